//! `ctrack run`: the firewall between live interfaces, until SIGTERM or
//! SIGINT; SIGHUP reloads the policy file.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use ctrack_core::{Config, FragConfig};
use ctrack_datapath::ctl::DEFAULT_SOCKET;
use ctrack_datapath::daemon::{Daemon, RunConfig};
use ctrack_datapath::io::{IoKind, RxRing};
use ctrack_datapath::live::{SwitchDrop, WorkerStats};
use ctrack_datapath::say;
use ctrack_policy::firewall::{Action, DropReason};

use crate::args::bounded;

/// `ctrack run` arguments.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The policy file (TOML or JSON).
    #[arg(long, value_name = "FILE")]
    pub policy: PathBuf,
    /// Binds a policy port to an interface: `vm1=veth0`. Repeat for every
    /// port.
    #[arg(long = "port", value_name = "NAME=IFACE", value_parser = parse_port, required = true)]
    pub ports: Vec<(String, String)>,
    /// The sockets: af-xdp, or af-packet (TPACKET_V3 rings; works
    /// everywhere).
    #[arg(long, value_name = "KIND", default_value = "af-packet")]
    pub io: IoKind,
    /// Worker threads (default: the number of cores).
    #[arg(long, value_name = "N", value_parser = bounded(1usize, 256))]
    pub workers: Option<usize>,
    /// The control socket `ctrack ctl` talks to.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub ctl: PathBuf,
    /// A group whose members may use the control socket (mode 0660);
    /// without it, only the owner (0600).
    #[arg(long, value_name = "GROUP")]
    pub ctl_group: Option<String>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address: `PORT`
    /// (on the loopback address) or `ADDR:PORT`.
    #[arg(long, value_name = "ADDR", value_parser = parse_metrics)]
    pub metrics: Option<SocketAddr>,
    /// Frames per receive ring.
    #[arg(long, value_name = "N", default_value_t = 4096, value_parser = bounded(64usize, 1 << 20))]
    pub ring_frames: usize,
    /// The AF_PACKET receive ring: v3 (blocks, handed over full or after
    /// 1 ms) or v2 (each frame handed over at once: no wait for sparse
    /// traffic). docs/live.md, "I/O and workers".
    #[arg(long, value_name = "V", default_value = "v3")]
    pub rx_ring: RxRing,
    /// Most connections tracked.
    #[arg(long, value_name = "N", default_value_t = ctrack_core::track::DEFAULT_MAX_CONNS,
          value_parser = bounded(1usize, crate::args::MAX_CONNS))]
    pub max_conns: usize,
    /// Do not verify IP, TCP, UDP and ICMP checksums (for interfaces whose
    /// peers leave checksums to offload).
    #[arg(long)]
    pub no_checksum: bool,
    /// Do not reassemble fragments (they are judged one by one).
    #[arg(long)]
    pub no_reassembly: bool,
    /// Fault in the connection table's memory for `--max-conns` at start
    /// (about 135 bytes per connection of the limit, taken at once), so
    /// that the kernel's zeroing of fresh pages stays off the packet path.
    #[arg(long)]
    pub prefault: bool,
    /// Events each `ctrack ctl events` subscriber may have queued before
    /// more are dropped (and counted).
    #[arg(long, value_name = "N", default_value_t = 65_536, value_parser = bounded(16usize, 1 << 24))]
    pub event_queue: usize,
    /// Lines a second each worker may write to the ACL log (standard
    /// error) for ACLs with `log = true`; more are counted as suppressed.
    /// 0: no ACL log.
    #[arg(long, value_name = "N", default_value_t = ctrack_datapath::acllog::DEFAULT_RATE,
          value_parser = bounded(0u32, 1_000_000))]
    pub acl_log_rate: u32,
    /// `reject` answers (TCP RSTs, ICMP errors, SCTP ABORTs) a second, for
    /// all workers together; more rejected packets are dropped without an
    /// answer. 0: the burst, then none. A policy whose `[copp]` names a
    /// `reject` meter is limited by that meter instead.
    #[arg(long, value_name = "N", default_value_t = ctrack_policy::reject::DEFAULT_RATE)]
    pub reject_rate: u32,
    /// `reject` answers at once (0: none at all).
    #[arg(long, value_name = "N", default_value_t = ctrack_policy::reject::DEFAULT_BURST)]
    pub reject_burst: u32,
}

impl RunArgs {
    /// Checks between arguments: each policy port and each interface at
    /// most once (two of one port would split its frames between
    /// interfaces the policy sees as one; one interface twice would take
    /// each frame in twice).
    pub fn validate(&self) -> Result<(), String> {
        ctrack_datapath::daemon::check_ports(&self.ports)
    }
}

fn parse_port(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, i)) if !n.is_empty() && !i.is_empty() && i.len() < 16 => {
            Ok((n.to_string(), i.to_string()))
        }
        Some((_, i)) if i.len() >= 16 => Err(format!("{i:?} is longer than an interface name")),
        _ => Err("expected NAME=IFACE, as vm1=veth0".into()),
    }
}

fn parse_metrics(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse()
        .map_err(|_| "expected PORT or ADDR:PORT, as 9301 or 127.0.0.1:9301".to_string())
}

/// Runs the datapath until SIGTERM or SIGINT, reloading the policy on
/// SIGHUP; prints the final counters to `out`.
pub fn run(args: &RunArgs, out: &mut dyn Write) -> Result<()> {
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let cfg = RunConfig {
        policy_path: args.policy.clone(),
        ports: args.ports.clone(),
        io: args.io,
        workers,
        ring_frames: args.ring_frames,
        rx_ring: args.rx_ring,
        tracker: Config {
            checksums: !args.no_checksum,
            max_conns: args.max_conns,
            prefault: args.prefault,
            // Each worker creates connections.
            shards: Config::shards_for(workers),
            ..Config::default()
        },
        frag: FragConfig {
            v4: !args.no_reassembly,
            v6: !args.no_reassembly,
            ..FragConfig::default()
        },
        ctl: Some(args.ctl.clone()),
        ctl_group: args.ctl_group.clone(),
        metrics: args.metrics,
        event_queue: args.event_queue,
        acl_log_rate: args.acl_log_rate,
        reject_limit: (args.reject_rate, args.reject_burst),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let hup = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())?;
    let daemon = Daemon::start(&cfg).map_err(|e| anyhow!(e))?;
    let generation = daemon.shared().fw.policy().generation;
    say(&format!(
        "ctrack: running: {} port(s) over {}, {} worker(s), policy {} (generation {generation}), control {}",
        cfg.ports.len(),
        cfg.io.name(),
        cfg.workers,
        cfg.policy_path.display(),
        args.ctl.display(),
    ));
    while !stop.load(Ordering::Relaxed) {
        if let Some(t) = daemon.ended() {
            // A thread that panicked: the datapath is not whole any more.
            say(&format!("ctrack: thread {t} ended unexpectedly: stopping"));
            let stats = daemon.stop();
            summary(&stats, out)?;
            bail!(
                "thread {t} of the datapath ended unexpectedly (it panicked: see above); restart ctrack run"
            );
        }
        if hup.swap(false, Ordering::Relaxed) {
            let shared = daemon.shared();
            match shared.reload(None) {
                Ok(g) => say(&format!("ctrack: SIGHUP: policy reloaded (generation {g})")),
                Err(e) => say(&format!(
                    "ctrack: SIGHUP: policy not reloaded, generation {} keeps running: {e}",
                    shared.fw.policy().generation
                )),
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    say("ctrack: stopping");
    let stats = daemon.stop();
    summary(&stats, out)?;
    Ok(())
}

/// The counters a stopped datapath prints.
fn summary(s: &WorkerStats, out: &mut dyn Write) -> Result<()> {
    let rx: u64 = s.ports.iter().map(|p| p.rx_packets).sum();
    let tx: u64 = s.ports.iter().map(|p| p.tx_packets).sum();
    writeln!(out, "packets: received {rx}, sent {tx}")?;
    writeln!(
        out,
        "verdicts: allow {}, drop {}, reject {} (answers sent {}, suppressed {})",
        s.fw.verdicts[Action::Allow as usize],
        s.fw.verdicts[Action::Drop as usize],
        s.fw.verdicts[Action::Reject as usize],
        s.fw.rejects_sent,
        s.fw.rejects_suppressed,
    )?;
    let drops: Vec<String> = DropReason::ALL
        .iter()
        .map(|r| (r.name(), s.fw.drops[*r as usize]))
        .chain(
            SwitchDrop::ALL
                .iter()
                .map(|r| (r.name(), s.switch.drops[*r as usize])),
        )
        .filter(|(_, n)| *n != 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    writeln!(
        out,
        "drops: {}",
        if drops.is_empty() {
            "none".into()
        } else {
            drops.join(", ")
        }
    )?;
    writeln!(
        out,
        "switch: forwarded {}, flooded {}, learned {}",
        s.switch.forwarded, s.switch.flooded, s.switch.learned
    )?;
    writeln!(
        out,
        "acl log: {} lines, {} suppressed (over a meter or --acl-log-rate), {} dropped (queue full)",
        s.acl_log.lines, s.acl_log.suppressed, s.acl_log.dropped
    )?;
    Ok(())
}
