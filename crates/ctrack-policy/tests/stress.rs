//! The firewall's burst path from several threads at once, as `ctrack
//! run`'s workers call it, while another thread changes the policy: each
//! connection's two directions are judged by different threads, packets
//! of one connection share bursts, and every connection is judged again
//! (concurrently, by whichever thread meets it first) at each change.
//!
//! What must hold whatever the interleaving: under policies that allow the
//! traffic, every packet passes (a change that keeps a connection allowed
//! never drops one of its packets, however many threads judge it again at
//! once); the counters add up to the packets sent; and after a change that
//! no longer allows the traffic, each connection's next packet is dropped
//! and the connection removed, by whichever thread meets it.
//!
//! Every other policy has port security, which the traffic passes.
//!
//! Longer by hand: `CTRACK_STRESS_ROUNDS=2000 cargo test --release -p
//! ctrack-policy --test stress`.

mod common;

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use ctrack_core::{Config, FragConfig, Time, Tracker};
use ctrack_policy::expr::Expr;
use ctrack_policy::firewall::{Action, BurstOut, Decision, DropReason, Firewall, FwStats};
use ctrack_policy::key::{Field, flag};
use ctrack_policy::model::{Acl, AclAction, DefaultAction, Direction, Policy, PortSecurity};
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::tcp::flags::{ACK, PSH, SYN};

const C_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const S_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const S_IP: [u8; 4] = [10, 0, 0, 2];
const THREADS: usize = 4;
/// Connections each thread opens a round.
const CONNS: u16 = 40;

/// The server takes TCP `port` from the client; the client may send
/// anything out. Default drop.
fn policy(port: u16) -> Policy {
    let p = common::port;
    let to_server = Expr::And(vec![
        Expr::eq(Field::Outport, 2),
        Expr::flags(flag::IP | flag::TCP),
        Expr::eq(Field::L4Dst, u128::from(port)),
    ]);
    Policy {
        default: DefaultAction::Drop,
        ports: vec![p("client", C_MAC, 1), p("server", S_MAC, 2)],
        acls: vec![
            Acl::new(
                0,
                Direction::ToLport,
                1000,
                AclAction::AllowRelated,
                to_server,
            ),
            Acl::new(
                1,
                Direction::FromLport,
                1,
                AclAction::AllowRelated,
                Expr::flags(flag::IP),
            ),
        ],
        ..Policy::default()
    }
}

/// [`policy`] with port security on both ports, on the addresses the
/// traffic uses: it passes as before.
fn secured(port: u16) -> Policy {
    let mut p = policy(port);
    let entry = |mac, net: [u8; 4], len| PortSecurity {
        mac,
        ips: vec![(std::net::IpAddr::from(net), len)],
    };
    p.ports[0].security = vec![entry(C_MAC, [10, 1, 0, 0], 16)];
    p.ports[1].security = vec![entry(S_MAC, S_IP, 32)];
    p
}

/// A segment of the connection from client port `sport` in round `r`
/// (each round's client has an address of its own).
fn seg(r: usize, client: bool, sport: u16, flags: u16, seq: u32, ack: u32, data: &[u8]) -> Vec<u8> {
    let c_ip = [10, 1, (r >> 8) as u8, r as u8];
    let (src, dst, smac, dmac, sp, dp) = if client {
        (c_ip, S_IP, C_MAC, S_MAC, sport, 80)
    } else {
        (S_IP, c_ip, S_MAC, C_MAC, 80, sport)
    };
    let mut f = Frame::v4(src, dst, L4::tcp_seg(sp, dp, flags, seq, ack, 65535, data));
    f.eth_src = smac;
    f.eth_dst = dmac;
    f.build()
}

/// The client ports of thread `t`'s connections.
fn ports(t: usize) -> impl Iterator<Item = u16> {
    let base = 10_000 + t as u16 * CONNS;
    base..base + CONNS
}

/// Runs `frames` through `fw` in bursts of 32; returns the decisions.
fn bursts(fw: &Firewall<()>, mut frames: Vec<Vec<u8>>, st: &mut FwStats) -> Vec<Decision> {
    let mut all = Vec::with_capacity(frames.len());
    for chunk in frames.chunks_mut(32) {
        let mut ds = vec![Decision::default(); chunk.len()];
        fw.process_burst(
            chunk,
            Time::from_secs(1),
            BurstOut {
                decisions: &mut ds,
                replies: &mut Vec::new(),
                stats: st,
            },
        );
        all.extend(ds);
    }
    all
}

/// Thread `t`'s frames of step `step` of round `r`: it opens its own
/// connections (SYN), answers thread `t + 1`'s (SYN-ACK), and sends its
/// own acknowledgment and data (side by side in a burst); then, at once,
/// the server's data back to thread `t + 1`'s connections and its own
/// connections' acknowledgment again, so that two threads meet each
/// connection together.
fn step(r: usize, t: usize, step: usize) -> Vec<Vec<u8>> {
    let next = (t + 1) % THREADS;
    let mut out = Vec::new();
    match step {
        0 => out.extend(ports(t).map(|p| seg(r, true, p, SYN, 1, 0, &[]))),
        1 => out.extend(ports(next).map(|p| seg(r, false, p, SYN | ACK, 100, 2, &[]))),
        2 => {
            for p in ports(t) {
                out.push(seg(r, true, p, ACK, 2, 101, &[]));
                out.push(seg(r, true, p, PSH | ACK, 2, 101, b"GET / HTTP/1.0"));
            }
        }
        _ => {
            for (p, q) in ports(next).zip(ports(t)) {
                out.push(seg(r, false, p, PSH | ACK, 101, 16, b"200"));
                out.push(seg(r, true, q, ACK, 16, 101, &[]));
            }
        }
    }
    out
}

/// Waits for two more policy changes: the second began after this call
/// did, so every packet judged before the call is of an older generation.
fn a_change(changes: &AtomicU64) {
    let c0 = changes.load(Relaxed);
    while changes.load(Relaxed) < c0 + 2 {
        std::thread::yield_now();
    }
}

#[test]
fn bursts_from_many_threads_through_policy_changes() {
    let rounds: usize = std::env::var("CTRACK_STRESS_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
        // Each round's connections stay in the table (and each round's
        // client has an address of its own).
        .clamp(1, 4096);
    let fw = Firewall::new(
        Tracker::new(Config::default()),
        FragConfig::default(),
        policy(80),
    )
    .unwrap();
    let barrier = Barrier::new(THREADS);
    let done = AtomicBool::new(false);
    let changes = AtomicU64::new(0);
    let sent = AtomicU64::new(0);
    let totals = std::sync::Mutex::new(FwStats::default());
    let failure = std::sync::Mutex::new(None::<String>);
    std::thread::scope(|s| {
        // The same rule, a new generation each time: every connection is
        // judged again at its next packet, by whichever thread meets it.
        // Every other policy has port security that the traffic passes
        // (the workers' memos of their MAC pairs' checks are of one
        // policy and must not outlive it).
        s.spawn(|| {
            for k in 0.. {
                if done.load(Relaxed) {
                    break;
                }
                fw.set_policy(if k % 2 == 0 { policy(80) } else { secured(80) })
                    .unwrap();
                changes.fetch_add(1, Relaxed);
                std::thread::sleep(std::time::Duration::from_micros(300));
            }
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (fw, barrier, sent, totals) = (&fw, &barrier, &sent, &totals);
                let failure = &failure;
                let changes = &changes;
                s.spawn(move || {
                    let mut st = FwStats::default();
                    for r in 0..rounds {
                        for k in 0..4 {
                            if k % 2 == 1 {
                                // Every connection is judged again at its
                                // next packet (at step 3 by two threads).
                                a_change(changes);
                            }
                            let frames = step(r, t, k);
                            sent.fetch_add(frames.len() as u64, Relaxed);
                            // What goes wrong is noted, not asserted here,
                            // and a panic is caught: a worker that panicked
                            // would leave the others at the barrier for
                            // ever.
                            let note = |what: String| {
                                let mut f = failure.lock().unwrap_or_else(|e| e.into_inner());
                                f.get_or_insert(format!("round {r}, thread {t}, step {k}: {what}"));
                            };
                            let ds = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                bursts(fw, frames, &mut st)
                            }));
                            match ds {
                                Ok(ds) => {
                                    if let Some((i, d)) = (ds.iter().enumerate())
                                        .find(|(_, d)| d.action != Action::Allow)
                                    {
                                        note(format!("frame {i}: {d:?}"));
                                    }
                                }
                                Err(_) => note("the burst panicked".into()),
                            }
                            barrier.wait();
                        }
                    }
                    totals.lock().unwrap().merge(&st);
                })
            })
            .collect();
        // The changer stops however the workers end, a panic included.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Relaxed);
            }
        }
        let _stop = Stop(&done);
        for w in workers {
            w.join().unwrap();
        }
    });
    if let Some(f) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        panic!("traffic the policies allow, under their changes: {f}");
    }
    let st = totals.into_inner().unwrap();
    let sent = sent.into_inner();
    assert_eq!(st.verdicts[Action::Allow as usize], sent);
    assert_eq!(st.verdicts.iter().sum::<u64>(), sent);
    let conns = (rounds * THREADS * usize::from(CONNS)) as u64;
    assert!(changes.into_inner() >= 2 * rounds as u64);
    // Each connection judged again at step 1 and at step 3 (there by one
    // of its two packets at least, by both where they met it together).
    assert!(st.rejudged >= 2 * conns, "{} re-judgings", st.rejudged);
    assert_eq!(fw.tracker().table_len() as u64, conns);
    // A change that no longer allows port 80: each connection's next
    // packet, from whichever side and thread, is dropped and the
    // connection removed.
    fw.set_policy(policy(443)).unwrap();
    let blocked = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (fw, blocked) = (&fw, &blocked);
            s.spawn(move || {
                let mut st = FwStats::default();
                let frames: Vec<Vec<u8>> = (0..rounds)
                    .flat_map(|r| ports(t).map(move |p| (r, p)))
                    .map(|(r, p)| {
                        if (r + t) % 2 == 0 {
                            seg(r, true, p, ACK, 16, 104, &[])
                        } else {
                            seg(r, false, p, ACK, 104, 16, &[])
                        }
                    })
                    .collect();
                for d in bursts(fw, frames, &mut st) {
                    assert_eq!(
                        (d.action, d.reason),
                        (Action::Drop, Some(DropReason::Blocked))
                    );
                    blocked.fetch_add(1, Relaxed);
                }
            });
        }
    });
    assert_eq!(blocked.into_inner(), conns);
    assert_eq!(fw.tracker().table_len(), 0);
}
