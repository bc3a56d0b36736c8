//! What the workers, the housekeeping thread and the control server share.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ctrack_core::{Stats, Time};
use ctrack_policy::firewall::{Firewall, FwStats};
use ctrack_policy::model::Policy;

use crate::acllog::{AclLog, AclLogStats};
use crate::events::EventHub;
use crate::io::{IoKind, LinkState, PortStats};
use crate::live::cost::CostStats;
use crate::live::switch::MacTable;

/// One datapath port: a policy port bound to an interface.
#[derive(Debug, Clone)]
pub struct PortInfo {
    /// The policy port's name (`vm1`).
    pub name: String,
    /// The interface (`veth0`).
    pub ifname: String,
    /// The interface's own MAC address.
    pub mac: [u8; 6],
    /// The interface's MTU.
    pub mtu: usize,
}

/// Why the switch dropped a frame (the firewall counts its own reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchDrop {
    /// Its source MAC is another port's policy address, or, from a port
    /// with port security (or disabled), not one of the port's own: spoofed.
    /// (An address learned on another port moves instead.)
    PortSecurity,
    /// Its destination is the port it came from.
    Hairpin,
    /// Larger than the output port's MTU.
    TooBig,
    /// The output port would not take it (ring full, send error).
    TxFailed,
}

impl SwitchDrop {
    /// Every reason, in counter order.
    pub const ALL: [SwitchDrop; 4] = [
        SwitchDrop::PortSecurity,
        SwitchDrop::Hairpin,
        SwitchDrop::TooBig,
        SwitchDrop::TxFailed,
    ];

    /// The name stats and metrics print.
    pub fn name(self) -> &'static str {
        match self {
            SwitchDrop::PortSecurity => "port-security",
            SwitchDrop::Hairpin => "hairpin",
            SwitchDrop::TooBig => "too-big",
            SwitchDrop::TxFailed => "tx-failed",
        }
    }
}

/// The switch's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwitchStats {
    /// Frames sent to one known port.
    pub forwarded: u64,
    /// Frames flooded (broadcast, multicast, unknown unicast).
    pub flooded: u64,
    /// Reject answers sent back where the rejected packet came from.
    pub replies: u64,
    /// Addresses learned (or moved).
    pub learned: u64,
    /// Drops by [`SwitchDrop`] (in `SwitchDrop::ALL` order).
    pub drops: [u64; SwitchDrop::ALL.len()],
}

impl SwitchStats {
    /// Adds `o` to `self`.
    pub fn merge(&mut self, o: &SwitchStats) {
        self.forwarded += o.forwarded;
        self.flooded += o.flooded;
        self.replies += o.replies;
        self.learned += o.learned;
        for (a, b) in self.drops.iter_mut().zip(o.drops) {
            *a += b;
        }
    }
}

/// One worker's counters (published to [`Shared::workers`] every few
/// milliseconds; the sum over workers is the datapath's).
#[derive(Debug, Clone, Default)]
pub struct WorkerStats {
    /// The firewall's: verdicts, stages, drops, per ACL, the tracker's.
    pub fw: FwStats,
    /// The switch's.
    pub switch: SwitchStats,
    /// Per port (in [`Shared::ports`] order).
    pub ports: Vec<PortStats>,
    /// Bursts run (one per port that had frames in a round).
    pub bursts: u64,
    /// Where the worker's time went (zero for the housekeeping slot).
    pub cost: CostStats,
    /// The ACL log's lines, suppressed and dropped.
    pub acl_log: AclLogStats,
}

impl WorkerStats {
    /// Adds `o` to `self`.
    pub fn merge(&mut self, o: &WorkerStats) {
        self.fw.merge(&o.fw);
        self.switch.merge(&o.switch);
        if self.ports.len() < o.ports.len() {
            self.ports.resize(o.ports.len(), PortStats::default());
        }
        for (a, b) in self.ports.iter_mut().zip(&o.ports) {
            a.merge(b);
        }
        self.bursts += o.bursts;
        self.cost.merge(&o.cost);
        self.acl_log.merge(&o.acl_log);
    }
}

/// The frame's tag through the firewall: the port it came in on.
pub type Tag = u16;

/// Everything the threads of one `ctrack run` share.
#[derive(Debug)]
pub struct Shared {
    /// The firewall: policy, tracker, reassembly.
    pub fw: Firewall<Tag>,
    /// The ports, by datapath port number.
    pub ports: Vec<PortInfo>,
    /// The socket kind.
    pub io: IoKind,
    /// The policy file (what `policy reload` and SIGHUP read).
    pub policy_path: Mutex<PathBuf>,
    /// Each worker's last published counters.
    pub workers: Vec<Mutex<WorkerStats>>,
    /// The connection events' hub (the tracker's sink).
    pub events: Arc<EventHub>,
    /// Set to stop every thread.
    pub stop: AtomicBool,
    /// Time 0 of the datapath's clock.
    pub epoch: Instant,
    /// The learned MAC addresses.
    pub macs: MacTable,
    /// The ACL log (`log = true`): each worker's [`AclLog::limiter`], the
    /// writer's receiver.
    pub acl_log: AclLog,
    /// The tracker's counters of what the control commands did (their
    /// flushes), added to the workers' by [`Shared::stats`].
    pub ctl_tracker: Mutex<Stats>,
    /// Each port's [`LinkState`] (by [`LinkState::number`]), as the
    /// housekeeping thread last found it.
    pub links: Vec<AtomicU8>,
}

impl Shared {
    /// The shared state of a datapath over `ports` with `fw`, its policy
    /// read from `policy_path`, counters for `slots` publishers (workers and
    /// the housekeeping thread), connection events through `events`; not
    /// stopping, its clock starting now, no MAC learned.
    pub fn new(
        fw: Firewall<Tag>,
        ports: Vec<PortInfo>,
        io: IoKind,
        policy_path: PathBuf,
        slots: usize,
        events: Arc<EventHub>,
    ) -> Shared {
        let links = ports.iter().map(|_| AtomicU8::new(0)).collect();
        Shared {
            fw,
            ports,
            io,
            policy_path: Mutex::new(policy_path),
            workers: (0..slots.max(1))
                .map(|_| Mutex::new(WorkerStats::default()))
                .collect(),
            events,
            stop: AtomicBool::new(false),
            epoch: Instant::now(),
            macs: MacTable::default(),
            acl_log: AclLog::default(),
            ctl_tracker: Mutex::new(Stats::default()),
            links,
        }
    }

    /// Port `i`'s link, as last found ([`LinkState::Gone`] for no port).
    pub fn link(&self, i: usize) -> LinkState {
        self.links.get(i).map_or(LinkState::Gone, |l| {
            LinkState::from_number(l.load(Ordering::Relaxed))
        })
    }

    /// Keeps port `i`'s link as `state`.
    pub fn set_link(&self, i: usize, state: LinkState) {
        if let Some(l) = self.links.get(i) {
            l.store(state.number(), Ordering::Relaxed);
        }
    }

    /// The same, its ACL log `log` (rather than [`AclLog::default`]).
    pub fn with_acl_log(mut self, log: AclLog) -> Shared {
        self.acl_log = log;
        self
    }

    /// The datapath's clock, now.
    #[inline]
    pub fn now(&self) -> Time {
        Time::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// True once the datapath is stopping.
    #[inline]
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Loads the policy file again (or `path`, which becomes the file from
    /// then on) and swaps it in; returns the new generation. On any error
    /// the running policy stays and the error says why. A policy without
    /// a port an interface is bound to is refused, as `ctrack run` refuses
    /// it at the start: that interface's frames would belong to no port,
    /// outside its port security and its ACLs (OVN drops the frames of an
    /// interface whose port is gone).
    pub fn reload(&self, path: Option<&Path>) -> Result<u32, String> {
        let mut p = self.policy_path.lock().unwrap_or_else(|e| e.into_inner());
        let file = path.map(Path::to_path_buf).unwrap_or_else(|| p.clone());
        let policy = Policy::load(&file).map_err(|e| e.to_string())?;
        if let Some(gone) =
            (self.ports.iter()).find(|b| !policy.ports.iter().any(|q| q.name == b.name))
        {
            return Err(format!(
                "{}: no port {:?}, which interface {} is bound to (--port {}={}): give it `enabled = false` to cut it off, or restart ctrack run without that --port to unbind it",
                file.display(),
                gone.name,
                gone.ifname,
                gone.name,
                gone.ifname
            ));
        }
        let generation = self
            .fw
            .set_policy(policy)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        *p = file;
        Ok(generation)
    }

    /// The sum of every worker's counters (the per-ACL ones: of workers
    /// that counted under the policy generation now in force).
    pub fn stats(&self) -> WorkerStats {
        let mut total = WorkerStats {
            ports: vec![PortStats::default(); self.ports.len()],
            ..WorkerStats::default()
        };
        // `FwStats::merge` adds per-ACL counters of its own generation only.
        total.fw.generation = self.fw.policy().generation;
        for w in &self.workers {
            total.merge(&w.lock().unwrap_or_else(|e| e.into_inner()));
        }
        total
            .fw
            .tracker
            .merge(&self.ctl_tracker.lock().unwrap_or_else(|e| e.into_inner()));
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(k: u64) -> SwitchStats {
        let mut s = SwitchStats {
            forwarded: k,
            flooded: 2 * k,
            replies: 3 * k,
            learned: 4 * k,
            ..SwitchStats::default()
        };
        for (i, d) in s.drops.iter_mut().enumerate() {
            *d = k * (5 + i as u64);
        }
        s
    }

    fn port(k: u64) -> PortStats {
        PortStats {
            rx_packets: k,
            tx_packets: 2 * k,
            ..PortStats::default()
        }
    }

    /// Workers' counters add up field by field, whatever port count each
    /// published (a worker that has published nothing yet has none).
    #[test]
    fn workers_counters_add_up() {
        let mut s = switch(2);
        s.merge(&switch(3));
        assert_eq!(s, switch(5));
        let a = WorkerStats {
            switch: switch(2),
            ports: vec![port(1), port(2)],
            bursts: 3,
            ..WorkerStats::default()
        };
        let mut total = WorkerStats::default();
        total.merge(&a);
        total.merge(&a);
        assert_eq!(total.switch, switch(4));
        assert_eq!(total.ports, vec![port(2), port(4)]);
        assert_eq!(total.bursts, 6);
        // One with fewer ports takes nothing away.
        total.merge(&WorkerStats {
            ports: vec![port(1)],
            ..WorkerStats::default()
        });
        assert_eq!(total.ports, vec![port(3), port(4)]);
    }
}
