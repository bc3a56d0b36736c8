//! The `ctrack` command: replay captures through the tracker and benchmark
//! it (and, in later versions, run it between interfaces and control it).
#![forbid(unsafe_code)]

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ctrack::{bench, replay};

/// A connection tracker and stateful firewall datapath in user space.
#[derive(Debug, Parser)]
#[command(name = "ctrack", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a capture through the tracker and print its decision for every
    /// packet.
    Replay(replay::ReplayArgs),
    /// Measure the tracker: the seed documents' benchmarks and more.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let result = match &cli.command {
        Command::Replay(args) => replay::run(args, &mut out),
        Command::Bench(args) => bench::run(args, &mut out),
    };
    let flushed = out.flush();
    match result.and(flushed.map_err(Into::into)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ctrack: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A reader that went away (`ctrack replay x | head`) is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
