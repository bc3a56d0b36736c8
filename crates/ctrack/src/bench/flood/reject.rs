//! `ctrack bench flood reject`: a flood of packets that a `reject` ACL
//! refuses, through the firewall's burst path on one or more threads,
//! against the same flood refused by a `drop` ACL.
//!
//! Every refused packet could be answered (a TCP RST; an ICMP port
//! unreachable for UDP). The answers are rate-limited
//! (`Firewall::set_reject_limit`; 1,000 a second with a burst of 50 by
//! default, as Linux limits its ICMP errors), so that a flood cannot turn
//! the firewall into an amplifier. Each run fails (non-zero exit, the
//! reason on stderr) when more answers went out than the limit allows over
//! the time the run took, when a flood packet passed or was tracked, or
//! when a `drop` run answered. The reject flood's rate against the drop
//! flood's is what refusing with an answer costs a packet over refusing
//! without.
//!
//! The flood is spoofed: random sources in 100.64.0.0/10 and random source
//! ports, from the client port's MAC to the server's, at port 82 of the
//! server; each thread cycles over a ring of its own 16,384 frames. The
//! clock is the wall clock since the run started, so the limit refills as
//! it would in `ctrack run`.

use std::io::Write;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use ctrack_core::{Config, FragConfig, Time, Tracker};
use ctrack_policy::firewall::{Action, BurstOut, Decision, Firewall, FwStats};
use ctrack_policy::model::Policy;
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::tcp::flags::SYN;
use serde::Serialize;

use super::super::threads::on_threads;
use super::super::{Machine, median};
use super::fragmix::Rng;
use crate::args::{MAX_RUNS, MAX_THREADS, bounded};

/// Arguments of `ctrack bench flood reject`.
#[derive(Debug, Args)]
pub struct RejectFloodArgs {
    /// Flood packets a run, all threads together (1 to 1000000000).
    #[arg(long, default_value_t = 4_000_000, value_parser = bounded(1u64, 1_000_000_000))]
    pub packets: u64,
    /// Runs of each action; medians are reported (1 to 1000).
    #[arg(long, default_value_t = 3, value_parser = bounded(1, MAX_RUNS))]
    pub runs: usize,
    /// Threads sending the flood through the one firewall (1 to 1024).
    #[arg(long, default_value_t = 1, value_parser = bounded(1, MAX_THREADS))]
    pub threads: usize,
    /// The flood: TCP SYNs (answered with RSTs) or UDP datagrams
    /// (answered with ICMP port unreachable).
    #[arg(long, value_enum, default_value_t = FloodProto::Tcp)]
    pub proto: FloodProto,
    /// The answers' limit: answers a second.
    #[arg(long, default_value_t = ctrack_policy::reject::DEFAULT_RATE)]
    pub rate: u32,
    /// The answers' limit: answers at once.
    #[arg(long, default_value_t = ctrack_policy::reject::DEFAULT_BURST)]
    pub burst: u32,
    /// Seed of the flood's random sources.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The flood's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FloodProto {
    /// TCP SYNs.
    Tcp,
    /// UDP datagrams.
    Udp,
}

const BURST: usize = 32;
const RING: usize = 16_384;
const SERVER_IP: [u8; 4] = [10, 0, 0, 2];
const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// The flood's clock starts here (any time will do; not zero).
const START: u64 = 1_000_000_000;

/// The policy: a web server's port 80 allowed (so that the firewall
/// tracks, as a real policy would), its port 82 refused by `action`.
fn policy(action: &str) -> Result<Policy> {
    let text = format!(
        r#"
[[port]]
name = "client"
addresses = ["02:00:00:00:00:01"]
[[port]]
name = "server"
addresses = ["02:00:00:00:00:02 10.0.0.2"]
[[acl]]
name = "web"
direction = "to-lport"
priority = 1000
match = 'outport == "server" && tcp.dst == 80'
action = "allow-related"
[[acl]]
name = "closed"
direction = "to-lport"
priority = 1000
match = 'outport == "server" && (tcp.dst == 82 || udp.dst == 82)'
action = "{action}"
"#
    );
    Policy::from_str(&text, "flood.toml").map_err(anyhow::Error::msg)
}

/// Thread `i`'s ring of spoofed frames.
fn ring(proto: FloodProto, seed: u64, i: usize) -> Vec<Vec<u8>> {
    let mut r = Rng::new(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    (0..RING)
        .map(|_| {
            let x = r.next();
            let src = (0x6440_0000 | (x as u32 & 0x003f_ffff)).to_be_bytes();
            let sport = (x >> 32) as u16 | 1024;
            let l4 = match proto {
                FloodProto::Tcp => L4::tcp_seg(sport, 82, SYN, (x >> 16) as u32, 0, 65535, &[]),
                FloodProto::Udp => L4::udp(sport, 82, &[0; 18]),
            };
            let mut f = Frame::v4(src, SERVER_IP, l4).build();
            f[0..6].copy_from_slice(&SERVER_MAC);
            f[6..12].copy_from_slice(&CLIENT_MAC);
            f
        })
        .collect()
}

/// One action's figures.
#[derive(Debug, Serialize)]
struct ActionFigures {
    action: &'static str,
    /// Millions of flood packets a second, all threads together: the
    /// median, and each run's.
    mpps: f64,
    runs: Vec<f64>,
    /// Answers sent and refused by the limit (or unanswerable), summed
    /// over the runs.
    answers_sent: u64,
    answers_suppressed: u64,
    /// The most answers a run's time allowed, summed over the runs.
    answers_allowed: u64,
}

#[derive(Debug, Serialize)]
struct RejectFloodJson {
    bench: &'static str,
    proto: FloodProto,
    threads: usize,
    packets: u64,
    rate: u32,
    burst: u32,
    drop: ActionFigures,
    reject: ActionFigures,
    /// The reject flood's rate over the drop flood's.
    reject_over_drop: f64,
    failures: Vec<String>,
    machine: Machine,
}

/// What a thread counted.
#[derive(Debug, Default, Clone, Copy)]
struct Counted {
    answers: u64,
    suppressed: u64,
    passed: u64,
}

/// One run of `packets` flood packets (rounded up to a multiple of the
/// threads) through a fresh firewall refusing them with `action`: the
/// seconds it took, the packets sent, what the threads counted, and the
/// connections tracked.
fn one_run(
    a: &RejectFloodArgs,
    action: &str,
    rings: &mut [Vec<Vec<u8>>],
) -> Result<(f64, u64, Counted, usize)> {
    let cfg = Config {
        shards: Config::shards_for(a.threads),
        ..Config::default()
    };
    let fw: Firewall<()> = Firewall::new(Tracker::new(cfg), FragConfig::default(), policy(action)?)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    fw.set_reject_limit(a.rate, a.burst);
    let each = a.packets.div_ceil(a.threads as u64);
    let t0 = Instant::now();
    let counted = std::sync::Mutex::new(Counted::default());
    let (secs, sent, _) = on_threads(rings, |ring| {
        let mut st = FwStats::default();
        let mut decisions = vec![Decision::default(); BURST];
        let mut replies = Vec::new();
        let mut answers = 0u64;
        let mut sent = 0u64;
        'run: loop {
            for chunk in ring.chunks_mut(BURST) {
                let n = chunk.len().min((each - sent) as usize);
                if n == 0 {
                    break 'run;
                }
                let now = Time::from_nanos(START + t0.elapsed().as_nanos() as u64);
                fw.process_burst(
                    &mut chunk[..n],
                    now,
                    BurstOut {
                        decisions: &mut decisions[..n],
                        replies: &mut replies,
                        stats: &mut st,
                    },
                );
                answers += replies.len() as u64;
                replies.clear();
                sent += n as u64;
            }
        }
        let mut c = counted.lock().unwrap_or_else(|e| e.into_inner());
        c.answers += answers;
        c.suppressed += st.rejects_suppressed;
        c.passed += st.verdicts[Action::Allow as usize];
        (sent, 0)
    })?;
    let c = *counted.lock().unwrap_or_else(|e| e.into_inner());
    Ok((secs, sent, c, fw.tracker().table_len()))
}

/// Runs `ctrack bench flood reject`.
pub(crate) fn run(a: &RejectFloodArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    let mut rings: Vec<Vec<Vec<u8>>> = (0..a.threads).map(|i| ring(a.proto, a.seed, i)).collect();
    let mut failures = Vec::new();
    let mut figures = Vec::new();
    for action in ["drop", "reject"] {
        let mut rates = Vec::with_capacity(a.runs);
        let mut f = ActionFigures {
            action,
            mpps: 0.0,
            runs: Vec::new(),
            answers_sent: 0,
            answers_suppressed: 0,
            answers_allowed: 0,
        };
        for _ in 0..a.runs {
            let (secs, sent, c, tracked) = one_run(a, action, &mut rings)?;
            rates.push(sent as f64 / secs / 1e6);
            // The limit refills by the millisecond: what a run of `secs`
            // can have let through, a millisecond's rounding either side.
            let allowed = if action == "reject" {
                u64::from(a.burst) + (f64::from(a.rate) * (secs + 0.002)).ceil() as u64 + 1
            } else {
                0
            };
            if c.answers > allowed {
                failures.push(format!(
                    "{action}: {} answers in {secs:.3} s, more than the limit allows ({allowed})",
                    c.answers
                ));
            }
            if c.passed > 0 || tracked > 0 {
                failures.push(format!(
                    "{action}: {} flood packets passed, {tracked} connections tracked",
                    c.passed
                ));
            }
            f.answers_sent += c.answers;
            f.answers_suppressed += c.suppressed;
            f.answers_allowed += allowed;
        }
        f.mpps = median(&rates);
        f.runs = rates;
        figures.push(f);
    }
    let reject = figures.pop().expect("two actions");
    let drop = figures.pop().expect("two actions");
    let j = RejectFloodJson {
        bench: "flood reject",
        proto: a.proto,
        threads: a.threads,
        packets: a.packets,
        rate: a.rate,
        burst: a.burst,
        reject_over_drop: reject.mpps / drop.mpps,
        drop,
        reject,
        failures,
        machine: Machine::this(),
    };
    if json {
        serde_json::to_writer_pretty(&mut *out, &j)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "flood reject: {} {:?} flood packets a run on {} thread(s), answers limited to {} a second (burst {})",
            j.packets, j.proto, j.threads, j.rate, j.burst
        )?;
        for f in [&j.drop, &j.reject] {
            writeln!(
                out,
                "  {:<6} {:>7.2} Mpps (runs {}), answers sent {} of at most {}, suppressed {}",
                f.action,
                f.mpps,
                f.runs
                    .iter()
                    .map(|r| format!("{r:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                f.answers_sent,
                f.answers_allowed,
                f.answers_suppressed
            )?;
        }
        writeln!(out, "  reject / drop: {:.3}", j.reject_over_drop)?;
    }
    if !j.failures.is_empty() {
        bail!("flood reject: {}", j.failures.join("; "));
    }
    Ok(())
}
