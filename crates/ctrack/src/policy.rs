//! `ctrack policy check FILE` and `ctrack policy show FILE`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use ctrack_policy::analyze::Finding;
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
        /// `text` (a line per finding, then a summary) or `json` (one
        /// document: the summary's counts and a `findings` array).
        #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
        format: CheckFormat,
    },
    /// Print the compiled view: the ACLs by stage, tier and priority, in
    /// the order they are evaluated, and the classifiers' sizes.
    Show {
        /// The policy file.
        file: PathBuf,
    },
}

/// How `ctrack policy check` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckFormat {
    /// A line per finding, then a summary.
    Text,
    /// One JSON document.
    Json,
}

/// `ctrack policy check --format json`.
#[derive(Debug, serde::Serialize)]
struct CheckJson {
    file: String,
    ports: usize,
    address_sets: usize,
    port_groups: usize,
    acls: usize,
    stateful_acls: usize,
    default: &'static str,
    warnings: usize,
    notes: usize,
    findings: Vec<FindingJson>,
}

/// One finding in `--format json`: its level and kind, what it names, and
/// the text line's message.
#[derive(Debug, serde::Serialize)]
struct FindingJson {
    level: &'static str,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    acl: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    by: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    indexes: Vec<usize>,
    message: String,
}

impl FindingJson {
    fn of(f: &Finding) -> FindingJson {
        let mut j = FindingJson {
            level: if f.is_warning() { "warning" } else { "note" },
            kind: "",
            acl: None,
            by: Vec::new(),
            name: None,
            indexes: Vec::new(),
            message: f.to_string(),
        };
        match f {
            Finding::NeverMatches { acl } => {
                j.kind = "never_matches";
                j.acl = Some(acl.clone());
            }
            Finding::Shadowed { acl, by } => {
                j.kind = "shadowed";
                j.acl = Some(acl.clone());
                j.by = by.clone();
            }
            Finding::TooLarge { acl, .. } => {
                j.kind = "too_large";
                j.acl = Some(acl.clone());
            }
            Finding::Incomplete => j.kind = "incomplete",
            Finding::Unused { kind, name } => {
                j.kind = match *kind {
                    "address set" => "unused_address_set",
                    "meter" => "unused_meter",
                    _ => "unused_port_group",
                };
                j.name = Some(name.clone());
            }
            Finding::MeterWithoutLog { acl, meter } => {
                j.kind = "meter_without_log";
                j.acl = Some(acl.clone());
                j.name = Some(meter.clone());
            }
            Finding::LogRelatedInert { acl, why } => {
                j.kind = if why.contains("log") {
                    "log_related_without_log"
                } else {
                    "log_related_without_commit"
                };
                j.acl = Some(acl.clone());
            }
            Finding::PersistInert { acl } => {
                j.kind = "persist_without_commit";
                j.acl = Some(acl.clone());
            }
            Finding::CoppWithoutReject { meter } => {
                j.kind = "copp_without_reject";
                j.name = Some(meter.clone());
            }
            Finding::PortSecurityExcludes { port, .. } => {
                j.kind = "port_security_excludes";
                j.name = Some(port.clone());
            }
            Finding::SharedName { name, acls } => {
                j.kind = "shared_name";
                j.name = Some(name.clone());
                j.indexes = acls.clone();
            }
        }
        j
    }
}

/// Runs `ctrack policy`.
pub fn run(args: &PolicyArgs, out: &mut dyn Write) -> Result<()> {
    match &args.command {
        PolicyCommand::Check {
            file,
            strict,
            format,
        } => check(file, *strict, *format, out),
        PolicyCommand::Show { file } => show(file, out),
    }
}

fn load(file: &std::path::Path) -> Result<Compiled> {
    let policy = Policy::load(file).map_err(anyhow::Error::msg)?;
    Compiled::new(policy, 1).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

fn check(
    file: &std::path::Path,
    strict: bool,
    format: CheckFormat,
    out: &mut dyn Write,
) -> Result<()> {
    let c = load(file)?;
    let p = &c.policy;
    let findings = ctrack_policy::analyze::analyze(p);
    let warnings = findings.iter().filter(|f| f.is_warning()).count();
    let j = CheckJson {
        file: file.display().to_string(),
        ports: p.ports.len(),
        address_sets: p.address_sets.len(),
        port_groups: p.port_groups.len(),
        acls: p.acls.len(),
        stateful_acls: p.acls.iter().filter(|a| a.action.is_stateful()).count(),
        default: match p.default {
            ctrack_policy::model::DefaultAction::Allow => "allow",
            ctrack_policy::model::DefaultAction::Drop => "drop",
        },
        warnings,
        notes: findings.len() - warnings,
        findings: findings.iter().map(FindingJson::of).collect(),
    };
    match format {
        CheckFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &j)?;
            writeln!(out)?;
        }
        CheckFormat::Text => {
            for f in &j.findings {
                writeln!(out, "{}: {}", j.file, f.message)?;
            }
            writeln!(
                out,
                "{}: ok: {} ports, {} address sets, {} port groups, {} ACLs ({} stateful), default {}; {} warning(s), {} note(s)",
                j.file,
                j.ports,
                j.address_sets,
                j.port_groups,
                j.acls,
                j.stateful_acls,
                j.default,
                j.warnings,
                j.notes
            )?;
        }
    }
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
    if c.tracking {
        writeln!(
            out,
            "later +new packets of a connection (no reply yet): {}",
            match c.new_by_word_off() {
                None => "its verdict word decides them".to_string(),
                Some(why) => format!("meet the ACLs again ({why})"),
            }
        )?;
    }
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
            "port {} ({}): zone {}, {} {}{}",
            port.name,
            i + 1,
            port.zone,
            macs.join(" "),
            ips.join(" "),
            port.security_text()
        )?;
    }
    for l in p.meter_lines() {
        writeln!(out, "{l}")?;
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
                "  priority={:<5} {:<20} {:<16} match=({}){}",
                a.priority,
                a.name,
                a.action.name(),
                a.match_text,
                a.options_text()
            )?;
        }
    }
    Ok(())
}
