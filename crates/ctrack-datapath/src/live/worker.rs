//! A worker: its own handle on every port, a loop that receives a burst,
//! runs it through the firewall (reassembly, policy, tracker, translation,
//! gateways), switches what passes and sends it, a batch per port.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctrack_policy::firewall::{Action, FwOut, FwOutputs};

use super::shared::{Shared, SwitchDrop, Tag, WorkerStats};
use super::switch::{Dest, Source, SwitchView};
use crate::io::{self, Pool, Port};

/// Frames taken from one port per round.
pub const BURST: usize = 32;

/// How long an idle worker sleeps in `poll` before it looks at its flags.
const IDLE_WAIT: Duration = Duration::from_millis(20);

/// How often a worker publishes its counters.
const PUBLISH: Duration = Duration::from_millis(25);

/// One worker thread's state.
#[derive(Debug)]
pub struct Worker {
    shared: Arc<Shared>,
    me: usize,
    ports: Vec<Box<dyn Port>>,
    pool: Pool,
    rx: Vec<Vec<u8>>,
    outs: FwOutputs<Tag>,
    /// Frames to send, per port.
    tx: Vec<Vec<Vec<u8>>>,
    view: SwitchView,
    stats: WorkerStats,
}

impl Worker {
    /// Worker `me` over `ports` (one handle per datapath port, in order).
    pub fn new(shared: Arc<Shared>, me: usize, ports: Vec<Box<dyn Port>>) -> Worker {
        let n = ports.len();
        Worker {
            shared,
            me,
            ports,
            pool: Pool::default(),
            rx: Vec::with_capacity(BURST),
            outs: FwOutputs::default(),
            tx: (0..n).map(|_| Vec::with_capacity(BURST)).collect(),
            view: SwitchView::default(),
            stats: WorkerStats {
                ports: vec![Default::default(); n],
                ..WorkerStats::default()
            },
        }
    }

    /// Runs until the datapath stops, then drains what the rings hold and
    /// publishes the final counters.
    pub fn run(mut self) {
        let fds: Vec<_> = self.ports.iter().map(|p| p.fd()).collect();
        let mut published = Instant::now();
        while !self.shared.stopping() {
            let got = self.round();
            if published.elapsed() >= PUBLISH {
                self.publish();
                published = Instant::now();
            }
            if got == 0 && io::wait(&fds, IDLE_WAIT).is_err() {
                std::thread::sleep(IDLE_WAIT);
            }
        }
        // Drain: what arrived before the stop still goes through.
        for _ in 0..64 {
            if self.round() == 0 {
                break;
            }
        }
        self.publish();
    }

    /// One round over every port; returns how many frames came in.
    pub fn round(&mut self) -> usize {
        let mut got = 0;
        for i in 0..self.ports.len() {
            let mut rx = std::mem::take(&mut self.rx);
            let n = self.ports[i]
                .recv(&mut self.pool, &mut rx, BURST)
                .unwrap_or_default();
            got += n;
            if n != 0 {
                self.burst(i as Tag, &mut rx);
            }
            self.rx = rx;
        }
        self.flush();
        got
    }

    /// Runs the frames that came in on `port` through the firewall and
    /// queues what passes.
    fn burst(&mut self, port: Tag, rx: &mut Vec<Vec<u8>>) {
        let shared = Arc::clone(&self.shared);
        let now = shared.now();
        let policy = shared.fw.policy();
        self.view.sync(&policy, |name| {
            shared
                .ports
                .iter()
                .position(|p| p.name == name)
                .map(|i| i as Tag)
        });
        self.stats.bursts += 1;
        for frame in rx.drain(..) {
            match self.view.source(&frame, port, &shared.macs, now) {
                Source::Spoofed => {
                    self.drop(SwitchDrop::PortSecurity, frame);
                    continue;
                }
                Source::Ok { learned } => self.stats.switch.learned += u64::from(learned),
            }
            shared.fw.process(frame, port, now, &mut self.outs);
        }
        let mut outs = std::mem::take(&mut self.outs.out);
        for o in outs.drain(..) {
            self.route(o);
        }
        self.outs.out = outs;
        self.outs.dropped.clear();
    }

    /// Sends a firewall output on: the reject answer back where the packet
    /// came from, an allowed frame to its destination.
    fn route(&mut self, o: FwOut<Tag>) {
        if let Some(reply) = o.reply {
            self.stats.switch.replies += 1;
            self.queue(o.tag, reply);
        }
        if o.decision.action != Action::Allow {
            self.pool.put(o.frame);
            return;
        }
        // Disjoint fields: no reference count touched per packet.
        match self.view.dest(&o.frame, &self.shared.macs) {
            Dest::Port(p) if p == o.tag => self.drop(SwitchDrop::Hairpin, o.frame),
            Dest::Port(p) => {
                self.stats.switch.forwarded += 1;
                self.queue(p, o.frame);
            }
            Dest::Flood => {
                self.stats.switch.flooded += 1;
                let n = self.ports.len() as Tag;
                for p in (0..n).filter(|&p| p != o.tag) {
                    let mut copy = self.pool.get();
                    copy.extend_from_slice(&o.frame);
                    self.queue(p, copy);
                }
                self.pool.put(o.frame);
            }
        }
    }

    /// Queues `frame` for `port` if it fits the port's MTU.
    fn queue(&mut self, port: Tag, frame: Vec<u8>) {
        let Some(info) = self.shared.ports.get(usize::from(port)) else {
            self.pool.put(frame);
            return;
        };
        if frame.len() > info.mtu + max_header(&frame) {
            self.drop(SwitchDrop::TooBig, frame);
            return;
        }
        self.tx[usize::from(port)].push(frame);
    }

    /// Sends every queued frame, a batch per port.
    fn flush(&mut self) {
        for (i, q) in self.tx.iter_mut().enumerate() {
            if q.is_empty() {
                continue;
            }
            let refs: Vec<&[u8]> = q.iter().map(Vec::as_slice).collect();
            let sent = self.ports[i].send(&refs).unwrap_or(0);
            let failed = (q.len() - sent.min(q.len())) as u64;
            self.stats.switch.drops[SwitchDrop::TxFailed as usize] += failed;
            for f in q.drain(..) {
                self.pool.put(f);
            }
        }
    }

    fn drop(&mut self, why: SwitchDrop, frame: Vec<u8>) {
        self.stats.switch.drops[why as usize] += 1;
        self.pool.put(frame);
    }

    /// Copies the counters where the control server reads them.
    fn publish(&mut self) {
        self.stats.fw = self.outs.stats.clone();
        for (s, p) in self.stats.ports.iter_mut().zip(self.ports.iter_mut()) {
            *s = p.stats();
        }
        if let Some(slot) = self.shared.workers.get(self.me) {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = self.stats.clone();
        }
    }
}

/// The link header a frame may carry beyond the MTU: Ethernet, plus a VLAN
/// tag when it has one.
fn max_header(frame: &[u8]) -> usize {
    match frame.get(12..14) {
        Some([0x81, 0x00]) | Some([0x88, 0xa8]) => 18,
        _ => 14,
    }
}
