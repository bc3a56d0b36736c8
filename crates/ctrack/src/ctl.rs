//! `ctrack ctl`: asks a running `ctrack run` over its control socket and
//! prints the answer (`events` streams until interrupted).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, anyhow};
use ctrack_datapath::ctl::DEFAULT_SOCKET;
use ctrack_datapath::ctl::client::{self, Client, StreamItem};

/// `ctrack ctl` arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Commands: dump-conntrack, list, flush, count, stats, set-maxconns, \
get-maxconns, ct-set-limits, ct-get-limits, ct-del-limits, ct-set-timeout, ct-get-timeout, \
ct-del-timeout, policy reload|show|counters, events, ports, version, help \
(`ctrack ctl help` lists them with their arguments)."
)]
pub struct CtlArgs {
    /// The control socket of the `ctrack run` to ask.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub ctl: PathBuf,
    /// The command and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

/// Sends the command and prints the reply (or the stream of events).
pub fn run(args: &CtlArgs, out: &mut dyn Write) -> Result<()> {
    if args.command.first().map(String::as_str) == Some("events") {
        // The client's errors say everything in one line (no chain of causes).
        let c = Client::connect(&args.ctl).map_err(|e| anyhow!("{e}"))?;
        let mut failed = None;
        c.stream(&args.command, |item| {
            let r = match item {
                StreamItem::Event(serde_json::Value::String(s)) => writeln!(out, "{s}"),
                StreamItem::Event(v) => writeln!(out, "{v}"),
                StreamItem::Dropped(n) => writeln!(out, "# {n} events dropped"),
            }
            .and_then(|()| out.flush());
            match r {
                Ok(()) => true,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        })
        .map_err(|e| anyhow!("{e}"))?;
        return match failed {
            Some(e) => Err(e.into()),
            None => Ok(()),
        };
    }
    let text = client::request(&args.ctl, &args.command).map_err(|e| anyhow!("{e}"))?;
    out.write_all(text.as_bytes())?;
    if !text.is_empty() && !text.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}
