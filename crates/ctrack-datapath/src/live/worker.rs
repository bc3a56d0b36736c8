//! A worker: its own handle on every port, a loop that receives a burst,
//! runs it through the firewall (reassembly, policy, tracker, translation,
//! gateways), switches what passes and sends it, a batch per port.
//!
//! The frames of a burst that are not IP fragments go through the
//! firewall's burst path ([`Firewall::process_burst`]: one tracker lookup
//! for the whole burst, with prefetching), the others (fragments, tagged
//! frames) one by one through [`Firewall::process`], which reassembles;
//! both give the same decisions, and the frames are judged and routed in
//! the order they came. The time each part takes is measured per burst
//! ([`super::cost`]).
//!
//! After a round that received frames, the worker expires connections
//! too: at most twice as many as it received, so that expiry keeps pace
//! with creation however many workers there are. The housekeeping thread
//! still sweeps (for idle times), but one thread alone falls behind
//! several busy workers: at 16 threads creating about 7 M connections/s,
//! a lone sweeper let the table fill and the workers evict
//! (`ctrack bench cps --sweeper thread`, BENCHMARKS.md), and packet
//! threads that each sweep a little also had the shorter latency tail.
//!
//! [`Firewall::process_burst`]: ctrack_policy::firewall::Firewall::process_burst
//! [`Firewall::process`]: ctrack_policy::firewall::Firewall::process

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctrack_core::Time;
use ctrack_policy::firewall::{Action, BurstOut, Decision, FwOutputs};
use ctrack_wire::offload::{self, VnetHdr};

use super::cost::{Lap, Part, RoundCost};
use super::shared::{Shared, SwitchDrop, Tag, WorkerStats};
use super::switch::{Dest, Source, SwitchView};
use crate::acllog::Limiter;
use crate::io::{self, Pool, Port};

/// Frames taken from one port per round.
pub const BURST: usize = 32;

/// The most frames handed to a port's `send` at once (a port's queue is
/// at most a burst from every other port, and the answers to its own).
const SEND_BATCH: usize = 4 * BURST;

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
    /// The burst being handled.
    rx: Vec<Vec<u8>>,
    lane: Lane,
    started: Instant,
}

/// What the packet path changes besides the ports and the burst: kept
/// apart from them so that a burst borrows each on its own.
#[derive(Debug)]
struct Lane {
    pool: Pool,
    outs: FwOutputs<Tag>,
    /// The burst path's decisions, one per frame of a run.
    decisions: Vec<Decision>,
    /// The burst path's reject answers: (frame index in the run, answer).
    replies: Vec<(usize, Vec<u8>)>,
    /// Per frame of the burst: whether it may take the burst path.
    whole: Vec<bool>,
    /// Per frame of the burst: the header it came with if it is a frame of
    /// segmentation offload (handed over whole, its checksum finished).
    rx_gso: Vec<Option<VnetHdr>>,
    /// What the port's `take_gso` handed over.
    gso_in: Vec<(usize, VnetHdr)>,
    /// Per port: whether it sends frames of segmentation offload whole.
    gso_tx: Vec<bool>,
    /// Per port: segments cut from frames of segmentation offload that
    /// came in on it and could not leave whole.
    cut: Vec<u64>,
    /// Where segments are built, and the segments of one frame.
    seg: Vec<u8>,
    pieces: Vec<Vec<u8>>,
    /// Frames to send, per port, each with the header it leaves behind
    /// when it leaves whole with its segmentation left to the kernel.
    tx: Vec<Vec<(Vec<u8>, Option<VnetHdr>)>>,
    view: SwitchView,
    /// The ports a flooded frame goes to (kept, so that a flood allocates
    /// nothing).
    flood_to: Vec<Tag>,
    stats: WorkerStats,
    /// The worker's side of the ACL log.
    log: Limiter,
}

impl Worker {
    /// Worker `me` over `ports` (one handle per datapath port, in order).
    pub fn new(shared: Arc<Shared>, me: usize, ports: Vec<Box<dyn Port>>) -> Worker {
        let n = ports.len();
        let gso_tx = ports.iter().map(|p| p.sends_gso()).collect();
        let log = shared.acl_log.limiter();
        Worker {
            shared,
            me,
            ports,
            rx: Vec::with_capacity(BURST),
            lane: Lane {
                pool: Pool::default(),
                outs: FwOutputs::default(),
                decisions: Vec::with_capacity(BURST),
                replies: Vec::new(),
                whole: Vec::with_capacity(BURST),
                rx_gso: Vec::with_capacity(BURST),
                gso_in: Vec::new(),
                gso_tx,
                cut: vec![0; n],
                seg: Vec::new(),
                pieces: Vec::new(),
                tx: (0..n).map(|_| Vec::with_capacity(BURST)).collect(),
                view: SwitchView::default(),
                flood_to: Vec::with_capacity(n),
                stats: WorkerStats {
                    ports: vec![Default::default(); n],
                    ..WorkerStats::default()
                },
                log,
            },
            started: Instant::now(),
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
            if got == 0 {
                let mut lap = Lap::start();
                if io::wait(&fds, IDLE_WAIT).is_err() {
                    std::thread::sleep(IDLE_WAIT);
                }
                self.lane.stats.cost.ns[Part::Idle as usize] += lap.lap();
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
        let shared = &*self.shared;
        let mut lap = Lap::start();
        let mut cost = RoundCost::default();
        let now = Time::from_nanos(
            u64::try_from(lap.last().duration_since(shared.epoch).as_nanos()).unwrap_or(u64::MAX),
        );
        self.lane.sync(shared);
        let mut got = 0;
        for (i, port) in self.ports.iter_mut().enumerate() {
            let _ = port.recv(&mut self.lane.pool, &mut self.rx, BURST);
            self.lane.rx_gso.clear();
            self.lane.rx_gso.resize(self.rx.len(), None);
            port.take_gso(&mut self.lane.gso_in);
            for (at, h) in self.lane.gso_in.drain(..) {
                if let Some(g) = self.lane.rx_gso.get_mut(at) {
                    *g = Some(h);
                }
            }
            cost.add(Part::Recv, lap.lap());
            if !self.rx.is_empty() {
                got += self.rx.len();
                self.lane
                    .burst(shared, i as Tag, &mut self.rx, now, &mut lap, &mut cost);
            }
        }
        self.lane.flush(&mut self.ports);
        cost.add(Part::Send, lap.lap());
        if got > 0 {
            shared
                .fw
                .tracker()
                .sweep(now, 2 * got, &mut self.lane.outs.stats.tracker);
            cost.add(Part::Firewall, lap.lap());
        }
        cost.close(got, &mut self.lane.stats.cost);
        got
    }

    /// Copies the counters where the control server reads them.
    pub fn publish(&mut self) {
        let st = &mut self.lane.stats;
        st.fw.clone_from(&self.lane.outs.stats);
        for ((s, p), cut) in st
            .ports
            .iter_mut()
            .zip(self.ports.iter_mut())
            .zip(&self.lane.cut)
        {
            *s = p.stats();
            s.rx_gso_segments += cut;
        }
        st.cost.total_ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if let Some(slot) = self.shared.workers.get(self.me) {
            slot.lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone_from(st);
        }
    }
}

impl Lane {
    /// Follows a policy change (once per round, not per frame).
    fn sync(&mut self, shared: &Shared) {
        let policy = shared.fw.policy();
        self.view.sync(&policy, |name| {
            shared
                .ports
                .iter()
                .position(|p| p.name == name)
                .map(|i| i as Tag)
        });
    }

    /// Runs the frames that came in on `port` through the firewall and
    /// queues what passes; leaves `rx` empty.
    fn burst(
        &mut self,
        shared: &Shared,
        port: Tag,
        rx: &mut Vec<Vec<u8>>,
        now: Time,
        lap: &mut Lap,
        cost: &mut RoundCost,
    ) {
        self.stats.bursts += 1;
        self.sources(shared, port, rx, now);
        cost.add(Part::Switch, lap.lap());
        let mut start = 0;
        while start < rx.len() {
            if self.whole[start] {
                let len = self.whole[start..].iter().take_while(|&&w| w).count();
                let run = &mut rx[start..start + len];
                self.judge_run(shared, run, now);
                cost.add(Part::Firewall, lap.lap());
                self.route_run(shared, port, run, start);
                start += len;
            } else {
                let frame = std::mem::take(&mut rx[start]);
                shared.fw.process(frame, port, now, &mut self.outs);
                self.outs.dropped.clear();
                cost.add(Part::Firewall, lap.lap());
                let gso = self.rx_gso.get(start).copied().flatten();
                self.route_outs(shared, gso);
                start += 1;
            }
            cost.add(Part::Switch, lap.lap());
        }
        rx.clear();
    }

    /// Checks and learns every frame's source: spoofed ones are dropped
    /// (the others close up in `rx`), and each kept frame is marked for
    /// the burst path or not (`whole`).
    fn sources(&mut self, shared: &Shared, port: Tag, rx: &mut Vec<Vec<u8>>, now: Time) {
        self.whole.clear();
        let mut kept = 0;
        for i in 0..rx.len() {
            match self.view.source(&rx[i], port, &shared.macs, now) {
                Source::Spoofed => {
                    let frame = std::mem::take(&mut rx[i]);
                    self.drop(SwitchDrop::PortSecurity, frame);
                }
                Source::Ok { learned } => {
                    self.stats.switch.learned += u64::from(learned);
                    self.whole.push(unfragmented(&rx[i]));
                    rx.swap(kept, i);
                    self.rx_gso.swap(kept, i);
                    kept += 1;
                }
            }
        }
        // What is cut is the spoofed frames' empty places.
        rx.truncate(kept);
        self.rx_gso.truncate(kept);
    }

    /// The burst path over a run of frames that are not fragments.
    fn judge_run(&mut self, shared: &Shared, run: &mut [Vec<u8>], now: Time) {
        self.decisions.clear();
        self.decisions.resize(run.len(), Decision::default());
        self.replies.clear();
        shared.fw.process_burst(
            run,
            now,
            BurstOut {
                decisions: &mut self.decisions,
                replies: &mut self.replies,
                stats: &mut self.outs.stats,
            },
        );
    }

    /// Routes a judged run (from `port`, starting at frame `first` of the
    /// burst): each frame's answer first, then the frame, as
    /// [`Lane::route_outs`] does.
    fn route_run(&mut self, shared: &Shared, port: Tag, run: &mut [Vec<u8>], first: usize) {
        let mut replies = std::mem::take(&mut self.replies);
        let mut answers = replies.drain(..).peekable();
        for (i, slot) in run.iter_mut().enumerate() {
            while let Some((_, reply)) = answers.next_if(|(j, _)| *j <= i) {
                self.stats.switch.replies += 1;
                self.queue(shared, port, reply);
            }
            let action = self.decisions.get(i).map_or(Action::Drop, |d| d.action);
            if let Some(d) = self.decisions.get(i).filter(|d| d.log) {
                let d = *d;
                self.log_acl(shared, port, &d, slot);
            }
            let gso = self.rx_gso.get(first + i).copied().flatten();
            self.forward(shared, port, std::mem::take(slot), action, gso);
        }
        for (_, stray) in answers {
            self.pool.put(stray);
        }
        self.replies = replies;
    }

    /// Routes what [`ctrack_policy::firewall::Firewall::process`] handed
    /// back for one frame (`gso`: its header, if it is a frame of
    /// segmentation offload; such a frame is no fragment, so it comes back
    /// alone).
    fn route_outs(&mut self, shared: &Shared, gso: Option<VnetHdr>) {
        let mut outs = std::mem::take(&mut self.outs.out);
        for o in outs.drain(..) {
            if let Some(reply) = o.reply {
                self.stats.switch.replies += 1;
                self.queue(shared, o.tag, reply);
            }
            if o.decision.log {
                self.log_acl(shared, o.tag, &o.decision, &o.frame);
            }
            self.forward(shared, o.tag, o.frame, o.decision.action, gso);
        }
        self.outs.out = outs;
    }

    /// Logs decision `d` of an ACL with `log = true` on `frame`, which
    /// came in on `port` (docs/live.md, "The ACL log"). Out of the
    /// routing loops: few frames come here.
    #[cold]
    #[inline(never)]
    fn log_acl(&mut self, shared: &Shared, port: Tag, d: &Decision, frame: &[u8]) {
        let st = &mut self.stats.acl_log;
        let inport = shared
            .ports
            .get(usize::from(port))
            .map_or("", |p| p.name.as_str());
        // The policy in force (its meters, its ACLs' names) and the
        // generation the worker counted the frame under
        // (`acllog::acl_of`).
        let judged = self.outs.stats.generation;
        let log = &mut self.log;
        shared.fw.with_policy(|pol| {
            log.log(shared.now(), (pol, judged), inport, (d, frame), st);
        });
    }

    /// Sends a frame that came in on `tag` on to its destination if
    /// `action` allows it (`gso`: the header of a frame of segmentation
    /// offload).
    fn forward(
        &mut self,
        shared: &Shared,
        tag: Tag,
        frame: Vec<u8>,
        action: Action,
        gso: Option<VnetHdr>,
    ) {
        if action != Action::Allow {
            self.pool.put(frame);
            return;
        }
        match self.view.dest(&frame, &shared.macs) {
            Dest::Port(p) if p == tag => self.drop(SwitchDrop::Hairpin, frame),
            Dest::Port(p) => {
                self.stats.switch.forwarded += 1;
                match gso {
                    Some(h) => self.queue_gso(shared, p, frame, h, tag),
                    None => self.queue(shared, p, frame),
                }
            }
            Dest::Flood => {
                self.stats.switch.flooded += 1;
                let n = self.tx.len() as Tag;
                let mut to = std::mem::take(&mut self.flood_to);
                let skip = self.view.flood_skips(&frame);
                to.clear();
                to.extend((0..n).filter(|&p| p != tag && !skip.contains(&p)));
                // A copy to each port but the last, which takes the frame.
                match to.split_last() {
                    Some((&last, others)) => {
                        for &p in others {
                            let mut copy = match gso {
                                Some(_) => Vec::with_capacity(frame.len()),
                                None => self.pool.get(),
                            };
                            copy.extend_from_slice(&frame);
                            match gso {
                                Some(h) => self.queue_gso(shared, p, copy, h, tag),
                                None => self.queue(shared, p, copy),
                            }
                        }
                        match gso {
                            Some(h) => self.queue_gso(shared, last, frame, h, tag),
                            None => self.queue(shared, last, frame),
                        }
                    }
                    None => self.pool.put(frame),
                }
                self.flood_to = to;
            }
        }
    }

    /// Queues a frame of segmentation offload that came in on `from` with
    /// header `rx` for `port`: whole, behind a header that leaves the
    /// cutting to the kernel, where the port sends so and its MTU holds
    /// the segments; else cut here into segments, each queued as a frame.
    fn queue_gso(
        &mut self,
        shared: &Shared,
        port: Tag,
        mut frame: Vec<u8>,
        rx: VnetHdr,
        from: Tag,
    ) {
        let Some(info) = shared.ports.get(usize::from(port)) else {
            self.pool.put(frame);
            return;
        };
        if self.gso_tx.get(usize::from(port)) == Some(&true) {
            match offload::hand_over(&mut frame, rx) {
                Some(h) if h.segment_ip_len <= info.mtu => {
                    if let Some(q) = self.tx.get_mut(usize::from(port)) {
                        q.push((frame, Some(h.hdr)));
                    }
                    return;
                }
                Some(_) => {
                    // Segments over the port's MTU: as a frame over it.
                    self.drop(SwitchDrop::TooBig, frame);
                    return;
                }
                // (The checksum field is as it was: cut below.)
                None => {}
            }
        }
        let (pool, pieces) = (&mut self.pool, &mut self.pieces);
        let cut = offload::segment(&frame, rx.gso(), &mut self.seg, |piece| {
            let mut b = pool.get();
            b.extend_from_slice(piece);
            pieces.push(b);
        });
        let Some(n) = cut else {
            // Not a frame its header describes: as a frame over the MTU.
            self.drop(SwitchDrop::TooBig, frame);
            return;
        };
        self.pool.put(frame);
        if let Some(c) = self.cut.get_mut(usize::from(from)) {
            *c += n as u64;
        }
        let mut pieces = std::mem::take(&mut self.pieces);
        for piece in pieces.drain(..) {
            self.queue(shared, port, piece);
        }
        self.pieces = pieces;
    }

    /// Queues `frame` for `port` if it fits the port's MTU.
    fn queue(&mut self, shared: &Shared, port: Tag, frame: Vec<u8>) {
        let (Some(info), Some(q)) = (
            shared.ports.get(usize::from(port)),
            self.tx.get_mut(usize::from(port)),
        ) else {
            self.pool.put(frame);
            return;
        };
        if frame.len() > info.mtu + max_header(&frame) {
            self.drop(SwitchDrop::TooBig, frame);
            return;
        }
        q.push((frame, None));
    }

    /// Sends every queued frame, a batch per port (no allocation: the
    /// batch's slices are on the stack), in the order queued: a run of
    /// frames leaving whole with their segmentation left to the kernel
    /// goes out through `send_gso`, between the runs before and after it.
    fn flush(&mut self, ports: &mut [Box<dyn Port>]) {
        for (q, port) in self.tx.iter_mut().zip(ports.iter_mut()) {
            if q.is_empty() {
                continue;
            }
            let mut sent = 0;
            let mut at = 0;
            while at < q.len() {
                let gso = q[at].1.is_some();
                let len = q[at..]
                    .iter()
                    .take(SEND_BATCH)
                    .take_while(|(_, h)| h.is_some() == gso)
                    .count();
                let chunk = &q[at..at + len];
                let n = if gso {
                    let mut refs: [(&[u8], VnetHdr); SEND_BATCH] =
                        [(&[], VnetHdr::default()); SEND_BATCH];
                    for (r, (f, h)) in refs.iter_mut().zip(chunk) {
                        *r = (f.as_slice(), h.unwrap_or_default());
                    }
                    port.send_gso(&refs[..len]).unwrap_or(0)
                } else {
                    let mut refs: [&[u8]; SEND_BATCH] = [&[]; SEND_BATCH];
                    for (r, (f, _)) in refs.iter_mut().zip(chunk) {
                        *r = f.as_slice();
                    }
                    port.send(&refs[..len]).unwrap_or(0)
                };
                sent += n.min(len);
                at += len;
            }
            let failed = (q.len() - sent) as u64;
            self.stats.switch.drops[SwitchDrop::TxFailed as usize] += failed;
            for (f, _) in q.drain(..) {
                self.pool.put(f);
            }
        }
    }

    fn drop(&mut self, why: SwitchDrop, frame: Vec<u8>) {
        self.stats.switch.drops[why as usize] += 1;
        self.pool.put(frame);
    }
}

/// Whether `frame` may take the burst path: an untagged ARP frame, IPv4
/// packet that is not a fragment, or IPv6 packet whose next header is an
/// upper layer (no extension header, so no fragment header). Everything
/// else (fragments, tagged frames, other protocols, runts) goes through
/// `process`, which judges all.
fn unfragmented(frame: &[u8]) -> bool {
    const IPV4: [u8; 2] = [0x08, 0x00];
    const IPV6: [u8; 2] = [0x86, 0xdd];
    const ARP: [u8; 2] = [0x08, 0x06];
    match frame.get(12..14) {
        // Flags and fragment offset: MF or an offset make a fragment.
        Some(t) if t == IPV4 => frame
            .get(20..22)
            .is_some_and(|b| u16::from_be_bytes([b[0], b[1]]) & 0x3fff == 0),
        // TCP, UDP, ICMPv6, SCTP, no next header.
        Some(t) if t == IPV6 => frame
            .get(20)
            .is_some_and(|nh| matches!(nh, 6 | 17 | 58 | 132 | 59)),
        Some(t) => t == ARP,
        None => false,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(ty: [u8; 2], l3: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ty);
        f.extend_from_slice(l3);
        f
    }

    #[test]
    fn fragments_and_the_unknown_take_the_full_path() {
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[6] = 0x40; // DF only
        assert!(unfragmented(&eth([8, 0], &v4)));
        v4[6] = 0x20; // MF
        assert!(!unfragmented(&eth([8, 0], &v4)));
        v4[6] = 0x40;
        v4[7] = 1; // an offset
        assert!(!unfragmented(&eth([8, 0], &v4)));
        assert!(!unfragmented(&eth([8, 0], &v4[..5])));
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        for (nh, burst) in [(6, true), (17, true), (58, true), (44, false), (0, false)] {
            v6[6] = nh;
            assert_eq!(unfragmented(&eth([0x86, 0xdd], &v6)), burst, "{nh}");
        }
        assert!(unfragmented(&eth([8, 6], &[0; 28])));
        let mut tagged = eth([0x81, 0], &[0, 1, 8, 0]);
        tagged.extend_from_slice(&[0x45; 20]);
        assert!(!unfragmented(&tagged));
        assert!(!unfragmented(&[0u8; 13]));
        assert!(!unfragmented(&eth([0x88, 0xcc], &[0; 30])));
    }
}
