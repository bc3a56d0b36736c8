//! The `ctrack` command: replay captures through the tracker and benchmark
//! it (and, in later versions, run it between interfaces and control it).
#![forbid(unsafe_code)]

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};
use ctrack::{bench, ctl, fwreplay, policy, replay, run};

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
    /// Measure the tracker: Open vSwitch's conntrack benchmarks and more.
    Bench(bench::BenchArgs),
    /// Check a policy file, or show it compiled.
    Policy(policy::PolicyArgs),
    /// Run the firewall between live interfaces (a bump in the wire or a
    /// small switch), until SIGTERM; SIGHUP reloads the policy.
    Run(run::RunArgs),
    /// Ask a running `ctrack run`: connections, counters, limits,
    /// timeouts, the policy, events.
    Ctl(ctl::CtlArgs),
}

impl Cli {
    /// Checks between arguments that clap's value parsers cannot make:
    /// Err names the subcommand (its path of names) and what is wrong.
    fn validate(&self) -> Result<(), (Vec<&'static str>, String)> {
        match &self.command {
            Command::Replay(_) | Command::Policy(_) | Command::Ctl(_) => Ok(()),
            Command::Run(r) => r.validate().map_err(|msg| (vec!["run"], msg)),
            Command::Bench(b) => b
                .validate()
                .map_err(|(name, msg)| (vec!["bench", name], msg)),
        }
    }
}

/// Exits with a usage error of the subcommand at `path`, as clap does for
/// a bad value (status 2).
fn usage_error(path: &[&str], msg: String) -> ! {
    let mut cmd = Cli::command();
    cmd.build();
    let mut sub = &mut cmd;
    for name in path {
        sub = sub
            .find_subcommand_mut(name)
            .expect("the subcommand path names subcommands");
    }
    sub.error(ErrorKind::ValueValidation, msg).exit()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err((path, msg)) = cli.validate() {
        usage_error(&path, msg);
    }
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let result = match &cli.command {
        Command::Replay(args) => fwreplay::run(args, &mut out),
        Command::Bench(args) => bench::run(args, &mut out),
        Command::Policy(args) => policy::run(args, &mut out),
        Command::Run(args) => run::run(args, &mut out),
        Command::Ctl(args) => ctl::run(args, &mut out),
    };
    let flushed = out.flush();
    match result.and(flushed.map_err(Into::into)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            ctrack_datapath::say(&format!("ctrack: error: {e:#}"));
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
