//! `ctrack policy check FILE` and `ctrack policy show FILE`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use ctrack_policy::firewall::Compiled;
use ctrack_policy::model::Policy;

/// Arguments of `ctrack policy`.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

/// `ctrack policy` subcommands.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Parse and resolve a policy; warn of ACLs that can never match, ACLs
    /// shadowed by higher-ranked ones and ACLs that share a name, and note
    /// address sets and port groups no ACL names. Exit 1 if the file is
    /// refused (or, with --strict, if there is a warning), 0 otherwise.
    Check {
        /// The policy file (TOML, or JSON of the same shape).
        file: PathBuf,
        /// Exit 1 when there is a warning (notes do not count): for
        /// checking policies before they are deployed.
        #[arg(long)]
        strict: bool,
    },
    /// Print the compiled view: the ACLs by stage, tier and priority, in
    /// the order they are evaluated, and the classifiers' sizes.
    Show {
        /// The policy file.
        file: PathBuf,
    },
}

/// Runs `ctrack policy`.
pub fn run(args: &PolicyArgs, out: &mut dyn Write) -> Result<()> {
    match &args.command {
        PolicyCommand::Check { file, strict } => check(file, *strict, out),
        PolicyCommand::Show { file } => show(file, out),
    }
}

fn load(file: &std::path::Path) -> Result<Compiled> {
    let policy = Policy::load(file).map_err(anyhow::Error::msg)?;
    Compiled::new(policy, 1).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

fn check(file: &std::path::Path, strict: bool, out: &mut dyn Write) -> Result<()> {
    let c = load(file)?;
    let p = &c.policy;
    let findings = ctrack_policy::analyze::analyze(p);
    for f in &findings {
        writeln!(out, "{}: {f}", file.display())?;
    }
    writeln!(
        out,
        "{}: ok: {} ports, {} address sets, {} port groups, {} ACLs ({} stateful), default {}; {} warning(s), {} note(s)",
        file.display(),
        p.ports.len(),
        p.address_sets.len(),
        p.port_groups.len(),
        p.acls.len(),
        p.acls.iter().filter(|a| a.action.is_stateful()).count(),
        match p.default {
            ctrack_policy::model::DefaultAction::Allow => "allow",
            ctrack_policy::model::DefaultAction::Drop => "drop",
        },
        findings.iter().filter(|f| f.is_warning()).count(),
        findings.iter().filter(|f| !f.is_warning()).count()
    )?;
    let warnings = findings.iter().filter(|f| f.is_warning()).count();
    if strict && warnings > 0 {
        anyhow::bail!(
            "{}: {warnings} warning(s), refused by --strict",
            file.display()
        );
    }
    Ok(())
}

fn show(file: &std::path::Path, out: &mut dyn Write) -> Result<()> {
    let c = load(file)?;
    let p = &c.policy;
    writeln!(
        out,
        "policy {}: default {}, {} (connections {} tracked)",
        file.display(),
        match p.default {
            ctrack_policy::model::DefaultAction::Allow => "allow",
            ctrack_policy::model::DefaultAction::Drop => "drop",
        },
        if c.tracking { "stateful" } else { "stateless" },
        if c.tracking { "are" } else { "are not" }
    )?;
    for (i, port) in p.ports.iter().enumerate() {
        let macs: Vec<String> = port
            .macs
            .iter()
            .map(|m| {
                m.iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(":")
            })
            .collect();
        let ips: Vec<String> = port.ips.iter().map(|ip| ip.to_string()).collect();
        writeln!(
            out,
            "port {} ({}): zone {}, {} {}",
            port.name,
            i + 1,
            port.zone,
            macs.join(" "),
            ips.join(" ")
        )?;
    }
    for (dir, tier, cls) in c.classifiers() {
        let mut acls: Vec<_> = p
            .acls
            .iter()
            .filter(|a| a.direction == dir && usize::from(a.tier) == tier)
            .collect();
        if acls.is_empty() {
            continue;
        }
        acls.sort_by_key(|a| ctrack_policy::firewall::rank(a.priority, a.index));
        acls.reverse();
        let s = cls.stats();
        writeln!(
            out,
            "\n{} tier {}: {} ACLs, compiled to {}, {} bytes",
            dir.name(),
            tier,
            acls.len(),
            s,
            cls.memory()
        )?;
        for a in acls {
            writeln!(
                out,
                "  priority={:<5} {:<20} {:<16} match=({}){}{}",
                a.priority,
                a.name,
                a.action.name(),
                a.match_text,
                a.nat.map_or(String::new(), |n| format!(" nat=({n})")),
                a.alg
                    .map_or(String::new(), |g| format!(" alg={}", g.name()))
            )?;
        }
    }
    Ok(())
}
