//! Starting and stopping a live datapath: ports opened for every worker,
//! the worker threads, the housekeeping thread (expiry, reassembly
//! timeouts, address ageing), the thread that faults in the table's memory
//! ahead of the workers, the control server and the metrics endpoint.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ctrack_core::{FragConfig, InvalidReason, Stats, Tracker};
use ctrack_policy::firewall::{Firewall, FwStats};
use ctrack_policy::model::Policy;

use crate::acllog::{self, AclLog};
use crate::events::EventHub;
use crate::io::{self, IoKind, LinkState, PortOptions};
use crate::live::shared::{PortInfo, Shared, WorkerStats};
use crate::live::worker::Worker;

/// How `ctrack run` was asked to run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The policy file.
    pub policy_path: PathBuf,
    /// (policy port, interface) pairs, in datapath port order.
    pub ports: Vec<(String, String)>,
    /// The socket kind.
    pub io: IoKind,
    /// Worker threads.
    pub workers: usize,
    /// Frames per receive ring.
    pub ring_frames: usize,
    /// The AF_PACKET receive ring's layout.
    pub rx_ring: io::RxRing,
    /// The tracker's settings.
    pub tracker: ctrack_core::Config,
    /// Reassembly settings.
    pub frag: FragConfig,
    /// The control socket, if any.
    pub ctl: Option<PathBuf>,
    /// The group that may use the control socket.
    pub ctl_group: Option<String>,
    /// Where to serve Prometheus metrics, if anywhere.
    pub metrics: Option<SocketAddr>,
    /// Events each `ctrack ctl events` subscriber may have queued.
    pub event_queue: usize,
    /// ACL log lines (`log = true`) each worker may write a second.
    pub acl_log_rate: u32,
    /// `reject` answers a second and at once, for all the workers
    /// (`Firewall::set_reject_limit`).
    pub reject_limit: (u32, u32),
}

/// A running datapath.
#[derive(Debug)]
pub struct Daemon {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// The ports' interfaces, claimed while the datapath runs
    /// ([`io::claim`]).
    _claims: Vec<io::PortClaim>,
}

/// How many connections the housekeeping thread looks at per sweep (up
/// to 8 sweeps per wake while work is left).
pub const SWEEP_BUDGET: usize = 16_384;

/// How often the housekeeping thread wakes.
const TICK: Duration = Duration::from_millis(50);

impl Daemon {
    /// Loads the policy, opens every worker's ports and starts the threads.
    /// Nothing runs if any step fails; the error says which, in one line.
    pub fn start(cfg: &RunConfig) -> Result<Daemon, String> {
        check_ports(&cfg.ports)?;
        let policy = Policy::load(&cfg.policy_path).map_err(|e| e.to_string())?;
        for (name, _) in &cfg.ports {
            if !policy.ports.iter().any(|p| &p.name == name) {
                return Err(format!(
                    "--port {name}=...: the policy has no port named {name:?}"
                ));
            }
        }
        io::check_capabilities(cfg.io)?;
        let mut infos = Vec::new();
        for (name, ifname) in &cfg.ports {
            let (mac, mtu) = io::interface(ifname).map_err(|e| format!("{ifname}: {e}"))?;
            infos.push(PortInfo {
                name: name.clone(),
                ifname: ifname.clone(),
                mac,
                mtu,
            });
        }
        if let Some(p) = infos.iter().find(|p| p.mtu + 18 > io::MAX_FRAME) {
            // `lo`'s 65,536, say: refused here in words rather than by
            // the ring's set-up as a frame size.
            return Err(format!(
                "{}: MTU {} is too large: a port's frames, its MTU and an 18-byte link header, must fit in {} bytes; lower it, as `ip link set {} mtu 9000`",
                p.ifname,
                p.mtu,
                io::MAX_FRAME,
                p.ifname
            ));
        }
        let workers = cfg.workers.max(1);
        // The indices the sockets bind to, read before they open them: an
        // interface removed or made again meanwhile is found gone.
        let indices = (infos.iter())
            .map(|p| io::interface_index(&p.ifname).map_err(|e| format!("{}: {e}", p.ifname)))
            .collect::<Result<Vec<u32>, String>>()?;
        same_interface(&infos, &indices)?;
        let claims = (infos.iter().zip(&indices))
            .map(|(p, &i)| io::claim(&p.ifname, i).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, String>>()?;
        let handles = open_ports(cfg, &infos, workers)?;
        let tracker = Tracker::new(cfg.tracker.clone());
        let fw = Firewall::new(tracker, cfg.frag, policy)
            .map_err(|e| format!("{}: {e}", cfg.policy_path.display()))?;
        fw.set_reject_limit(cfg.reject_limit.0, cfg.reject_limit.1);
        let events = Arc::new(EventHub::new(cfg.event_queue));
        fw.tracker().set_event_sink(Some(events.clone()));
        // One counter slot per worker, and the housekeeping thread's.
        let shared = Arc::new(
            Shared::new(
                fw,
                infos,
                cfg.io,
                cfg.policy_path.clone(),
                workers + 1,
                events,
            )
            .with_acl_log(AclLog::new(cfg.acl_log_rate, acllog::QUEUE)),
        );
        let mut links = Links {
            indices,
            mtus: shared.ports.iter().map(|p| p.mtu).collect(),
        };
        links.watch(&shared);
        let mut daemon = Daemon {
            shared: shared.clone(),
            threads: Vec::new(),
            _claims: claims,
        };
        for (w, ports) in handles.into_iter().enumerate() {
            let worker = Worker::new(shared.clone(), w, ports);
            let t = std::thread::Builder::new()
                .name(format!("ctrack-w{w}"))
                .spawn(move || worker.run())
                .map_err(|e| format!("cannot start worker {w}: {e}"))?;
            daemon.threads.push(t);
        }
        let hk = shared.clone();
        let t = std::thread::Builder::new()
            .name("ctrack-hk".into())
            .spawn(move || housekeeping(&hk, workers, &mut links))
            .map_err(|e| format!("cannot start the housekeeping thread: {e}"))?;
        daemon.threads.push(t);
        if let Some(rx) = shared.acl_log.take_receiver() {
            let sh = shared.clone();
            let t = std::thread::Builder::new()
                .name("ctrack-acl-log".into())
                .spawn(move || acllog::write_lines(&rx, &mut std::io::stderr(), &sh.stop))
                .map_err(|e| format!("cannot start the ACL log's thread: {e}"))?;
            daemon.threads.push(t);
        }
        let pop = shared.clone();
        let t = std::thread::Builder::new()
            .name("ctrack-populate".into())
            .spawn(move || populate(&pop))
            .map_err(|e| format!("cannot start the populating thread: {e}"))?;
        daemon.threads.push(t);
        if let Some(path) = &cfg.ctl {
            let t = crate::ctl::serve(shared.clone(), path, cfg.ctl_group.as_deref())
                .map_err(|e| format!("control socket {}: {e}", path.display()))?;
            daemon.threads.push(t);
        }
        if let Some(addr) = cfg.metrics {
            let t = crate::metrics::serve(shared.clone(), addr)
                // The error names the address already.
                .map_err(|e| e.to_string())?;
            daemon.threads.push(t);
        }
        Ok(daemon)
    }

    /// What the threads share (the control server's view).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The name of the first of the datapath's threads (a worker, the
    /// housekeeping thread, the control server...) that has ended although
    /// the datapath is not stopping. Each runs until the stop, so one that
    /// ended before has panicked, and the datapath is no longer whole: a
    /// dead worker's share of the traffic would go nowhere, and without the
    /// housekeeping thread no connection would expire. `ctrack run` stops
    /// then, with an error, for a supervisor to start it again.
    pub fn ended(&self) -> Option<String> {
        if self.shared.stopping() {
            return None;
        }
        let t = self.threads.iter().find(|t| t.is_finished())?;
        Some(t.thread().name().unwrap_or("unnamed").to_string())
    }

    /// Stops every thread (the workers drain their rings first) and
    /// returns the final counters.
    pub fn stop(mut self) -> WorkerStats {
        self.shutdown();
        self.shared.stats()
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Checks a datapath's ports, (policy port, interface) pairs: at least
/// one, and each policy port and each interface at most once.
pub fn check_ports(ports: &[(String, String)]) -> Result<(), String> {
    if ports.is_empty() {
        return Err("no ports: give at least one --port NAME=IFACE".into());
    }
    for (i, (name, ifname)) in ports.iter().enumerate() {
        if let Some((_, other)) = ports[..i].iter().find(|(n, _)| n == name) {
            return Err(format!(
                "--port {name}={ifname}: port {name:?} is given twice (with {other} before): one interface a port"
            ));
        }
        if let Some((other, _)) = ports[..i].iter().find(|(_, f)| f == ifname) {
            return Err(format!(
                "--port {name}={ifname}: interface {ifname} is given twice (for {other} before): one port an interface"
            ));
        }
    }
    Ok(())
}

/// Refuses two ports on one interface under two of its names (an
/// alternative name, `ip link property add dev IF altname NAME`), which
/// [`check_ports`] cannot see: `indices` are the ports' interfaces'.
fn same_interface(infos: &[PortInfo], indices: &[u32]) -> Result<(), String> {
    for (i, (p, index)) in infos.iter().zip(indices).enumerate() {
        if let Some(q) =
            (infos[..i].iter().zip(indices)).find_map(|(q, j)| (j == index).then_some(q))
        {
            return Err(format!(
                "--port {}={}: {} is interface {} (index {index}) under another name, given for port {} before: one port an interface",
                p.name, p.ifname, p.ifname, q.ifname, q.name
            ));
        }
    }
    Ok(())
}

/// Every worker's handle on every port: `[worker][port]`.
fn open_ports(
    cfg: &RunConfig,
    infos: &[PortInfo],
    workers: usize,
) -> Result<Vec<Vec<Box<dyn io::Port>>>, String> {
    let frame_size = infos.iter().map(|p| p.mtu + 18).max().unwrap_or(1518);
    // Each interface's AF_PACKET fanout group: made by worker 0's socket,
    // a group no other socket is in, which the other workers' join.
    let mut groups: Vec<Option<u16>> = vec![None; infos.len()];
    let mut all = Vec::with_capacity(workers);
    for w in 0..workers {
        let mut ports = Vec::with_capacity(infos.len());
        for (i, p) in infos.iter().enumerate() {
            let opts = PortOptions {
                ifname: p.ifname.clone(),
                kind: cfg.io,
                worker: w,
                workers,
                fanout_group: groups[i],
                ring_frames: cfg.ring_frames,
                frame_size,
                rx_ring: cfg.rx_ring,
            };
            let port = io::open(&opts)
                .map_err(|e| format!("{} ({}, worker {w}): {e}", p.ifname, cfg.io.name()))?;
            groups[i] = groups[i].or(port.fanout_group());
            ports.push(port);
        }
        all.push(ports);
    }
    Ok(all)
}

/// Faults in the table's memory ahead of the workers
/// ([`Tracker::populate_ahead`]), so that a worker committing a connection
/// never waits for the kernel to zero a page under a shard's lock.
fn populate(shared: &Shared) {
    while !shared.stopping() {
        if shared.fw.tracker().populate_ahead() == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Packets with bad transport checksums before AF_XDP ports say why they
/// may come (once a run).
const OFFLOAD_HINT_AFTER: u64 = 8;

/// Says once, on standard error, what an AF_XDP port cannot take in: a
/// sender that leaves its checksums to offload (a veth's default) sends
/// frames whose checksums look wrong, since AF_XDP does not tell them apart
/// (AF_PACKET does: docs/live.md, "Offloads"). Said once the tracker has
/// found [`OFFLOAD_HINT_AFTER`] such packets; corrupt or forged packets
/// count too, hence "if".
fn offload_hint(shared: &Shared, said: &mut bool) {
    if *said || shared.io != IoKind::AfXdp {
        return;
    }
    let bad = shared
        .stats()
        .fw
        .tracker
        .invalid_count(InvalidReason::BadL4Checksum);
    if bad >= OFFLOAD_HINT_AFTER {
        *said = true;
        crate::say(&format!(
            "ctrack: {bad} packets had bad TCP/UDP checksums (found invalid): if their senders leave checksums or segmentation to offload (a veth's default), AF_XDP cannot tell; turn the offloads off where the traffic is made (ethtool -K DEV tx off tso off gso off) or use --io af-packet"
        ));
    }
}

/// The ports' interfaces, as the housekeeping thread watches them.
struct Links {
    /// Each port's interface index when its sockets were opened.
    indices: Vec<u32>,
    /// Each port's MTU as last found (at the start, what its rings and
    /// its too-big check were sized for).
    mtus: Vec<usize>,
}

impl Links {
    /// Finds each port's [`LinkState`], keeps it in
    /// [`Shared::links`] (what `ctrack ctl ports` shows) and says on
    /// standard error where it changed: a link gone down (or down at the
    /// start), come back up, an interface gone, an MTU changed.
    fn watch(&mut self, shared: &Shared) {
        for (i, (p, &index)) in shared.ports.iter().zip(&self.indices).enumerate() {
            let now = io::link_state(&p.ifname, index);
            if now != LinkState::Gone
                && let Ok((_, mtu)) = io::interface(&p.ifname)
                && let Some(was) = self.mtus.get_mut(i).filter(|m| **m != mtu)
            {
                // The rings and the too-big check keep the start's MTU.
                let what = match mtu.cmp(&p.mtu) {
                    std::cmp::Ordering::Equal => "as at the start".to_string(),
                    std::cmp::Ordering::Greater => format!(
                        "ctrack sized the port for {} at the start: larger frames are dropped (counted as rx dropped) until ctrack run is restarted",
                        p.mtu
                    ),
                    std::cmp::Ordering::Less => format!(
                        "ctrack sized the port for {} at the start: frames it sends there larger than {mtu} fail (counted as tx errors) until ctrack run is restarted",
                        p.mtu
                    ),
                };
                crate::say(&format!(
                    "ctrack: port {} ({}): MTU {was} -> {mtu}, {what}",
                    p.name, p.ifname
                ));
                *was = mtu;
            }
            if now == shared.link(i) {
                continue;
            }
            shared.set_link(i, now);
            let what = match now {
                LinkState::Up => "link up",
                LinkState::Down => "link down: nothing comes in or goes out there until it is up",
                LinkState::Gone => {
                    "the interface is gone (removed, or made again under its name): the port's sockets stay bound to the one ctrack opened, so nothing comes in or goes out there until ctrack run is restarted; the other ports go on"
                }
            };
            crate::say(&format!("ctrack: port {} ({}): {what}", p.name, p.ifname));
        }
    }
}

/// Expires connections and reassembly lists, ages learned addresses,
/// watches the ports' links.
fn housekeeping(shared: &Shared, slot: usize, links: &mut Links) {
    let mut stats = Stats::default();
    // Fragments whose datagram's time ran out, counted as dropped.
    let mut fw = FwStats::default();
    let mut dropped = Vec::new();
    let mut aged = Instant::now();
    let mut hinted = false;
    while !shared.stopping() {
        let now = shared.now();
        for _ in 0..8 {
            let s = shared.fw.tracker().sweep(now, SWEEP_BUDGET, &mut stats);
            if s.next != Some(now) {
                break;
            }
        }
        shared.fw.expire(now, &mut dropped, &mut fw);
        dropped.clear();
        if aged.elapsed() >= Duration::from_secs(1) {
            shared.macs.age(now);
            aged = Instant::now();
            offload_hint(shared, &mut hinted);
            links.watch(shared);
        }
        if let Some(s) = shared.workers.get(slot) {
            let mut slot = s.lock().unwrap_or_else(|e| e.into_inner());
            slot.fw.tracker = stats;
            slot.fw.verdicts = fw.verdicts;
            slot.fw.stages = fw.stages;
            slot.fw.drops = fw.drops;
        }
        std::thread::sleep(TICK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_core::Config;

    /// A thread that ends before the stop is named; none is while all run,
    /// nor once the datapath is stopping.
    #[test]
    fn a_thread_that_ended_early_is_named() {
        let fw = Firewall::new(
            Tracker::new(Config::default()),
            FragConfig::default(),
            Policy::default(),
        )
        .expect("an empty policy");
        let shared = Arc::new(Shared::new(
            fw,
            Vec::new(),
            IoKind::AfPacket,
            PathBuf::new(),
            1,
            Arc::new(EventHub::new(16)),
        ));
        let spawn = |name: &str, f: fn(&Shared)| {
            let sh = shared.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || f(&sh))
                .expect("a thread")
        };
        let until_stop = |sh: &Shared| {
            while !sh.stopping() {
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        let mut daemon = Daemon {
            shared: shared.clone(),
            threads: vec![
                spawn("ctrack-w0", until_stop),
                spawn("ctrack-hk", until_stop),
            ],
            _claims: Vec::new(),
        };
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(daemon.ended(), None);
        // A worker that panics (quietly: the message is the test's noise).
        daemon.threads.push(spawn("ctrack-w1", |_| {
            std::panic::resume_unwind(Box::new("a worker's bug"))
        }));
        let named = (0..500).find_map(|_| {
            std::thread::sleep(Duration::from_millis(2));
            daemon.ended()
        });
        assert_eq!(named.as_deref(), Some("ctrack-w1"));
        shared.stop.store(true, Ordering::Relaxed);
        assert_eq!(daemon.ended(), None);
        let _ = daemon.stop();
    }
}
