//! The switch between ports: where a frame goes once the firewall lets it
//! through.
//!
//! A destination MAC is looked up first among the policy's port addresses
//! (each policy port is bound to one datapath port), then among addresses
//! learned from the source MACs of frames that arrived on a port. Broadcast,
//! multicast and unknown unicast are flooded to every port but the one the
//! frame came in on (unknown unicast not to ports with `port_security`).
//! A frame whose source MAC is a policy address of another port is
//! dropped before the firewall sees it (port security: a VM cannot speak
//! for another), and so is one from a port with `port_security` whose
//! source MAC is none of the port's: the firewall checks the rest.
//!
//! The learned table is shared by the workers (a frame may arrive on one
//! worker and its reply on another); each worker keeps a small cache in
//! front of it, emptied whenever an address moves or ages out, so that the
//! packet path takes no lock while nothing moves.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use ctrack_core::Time;
use ctrack_policy::firewall::Compiled;
use ctrack_policy::key::mac_u64;

/// The most learned addresses (more are not learned; their frames flood).
pub const MAX_LEARNED: usize = 65_536;

/// How long a learned address lives without a frame from it (as a Linux
/// bridge's `ageing_time` default, 300 s).
pub const AGEING: Time = Time::from_secs(300);

/// A learned address, as [`MacTable::list`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    /// The address.
    pub mac: [u8; 6],
    /// The datapath port it is behind.
    pub port: u16,
    /// When the table last saw a frame from it.
    pub seen: Time,
}

/// Where a frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// To one port.
    Port(u16),
    /// To every port but the input.
    Flood,
}

/// The learned addresses, shared by the workers.
#[derive(Debug, Default)]
pub struct MacTable {
    learned: RwLock<HashMap<u64, (u16, Time)>>,
    /// Bumped when an address moves or is forgotten: caches empty.
    version: AtomicU64,
}

impl MacTable {
    /// Learns that `mac` is behind `port` as of `now`: whether that is
    /// news (a new address or a move), or `None` where the table is full
    /// and does not hold it.
    fn learn(&self, mac: u64, port: u16, now: Time) -> Option<bool> {
        {
            // A full table that does not hold it: said under the read lock,
            // so that the frames of a source it cannot learn (not cached,
            // so each asks) do not queue the workers on the write lock.
            let t = self.learned.read().unwrap_or_else(|e| e.into_inner());
            if t.len() >= MAX_LEARNED && !t.contains_key(&mac) {
                return None;
            }
        }
        let mut t = self.learned.write().unwrap_or_else(|e| e.into_inner());
        let room = t.len() < MAX_LEARNED;
        match t.get_mut(&mac) {
            Some(e) if e.0 == port => {
                e.1 = now;
                Some(false)
            }
            Some(e) => {
                *e = (port, now);
                self.version.fetch_add(1, Relaxed);
                Some(true)
            }
            None if room => {
                t.insert(mac, (port, now));
                Some(true)
            }
            None => None,
        }
    }

    fn get(&self, mac: u64) -> Option<u16> {
        let t = self.learned.read().unwrap_or_else(|e| e.into_inner());
        t.get(&mac).map(|e| e.0)
    }

    /// Forgets addresses not seen for [`AGEING`].
    pub fn age(&self, now: Time) {
        let mut t = self.learned.write().unwrap_or_else(|e| e.into_inner());
        let before = t.len();
        t.retain(|_, e| now.millis_since(e.1) < AGEING.as_millis());
        if t.len() != before {
            self.version.fetch_add(1, Relaxed);
        }
    }

    /// How many addresses are learned.
    pub fn len(&self) -> usize {
        self.learned.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True if no address is learned.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The learned addresses with the time each last sent a frame the
    /// table saw (refreshed at most every ten seconds while a worker has
    /// it cached), sorted by port then MAC.
    pub fn list(&self) -> Vec<Learned> {
        let t = self.learned.read().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<Learned> = t
            .iter()
            .map(|(m, e)| {
                let b = m.to_be_bytes();
                Learned {
                    mac: [b[2], b[3], b[4], b[5], b[6], b[7]],
                    port: e.0,
                    seen: e.1,
                }
            })
            .collect();
        v.sort_unstable_by_key(|l| (l.port, l.mac));
        v
    }

    /// Forgets every learned address (the workers' caches empty); returns
    /// how many there were. Frames to them flood until they are learned
    /// again.
    pub fn flush(&self) -> usize {
        let mut t = self.learned.write().unwrap_or_else(|e| e.into_inner());
        let n = t.len();
        t.clear();
        self.version.fetch_add(1, Relaxed);
        n
    }

    /// The learned addresses: (MAC, port), sorted by MAC.
    pub fn entries(&self) -> Vec<([u8; 6], u16)> {
        let mut v: Vec<_> = self.list().iter().map(|l| (l.mac, l.port)).collect();
        v.sort_unstable();
        v
    }
}

/// The worker's maps hash with foldhash (randomly seeded per process):
/// two lookups a packet, where SipHash costs several times more. Their
/// keys are the policy's addresses or a bounded cache (cleared when
/// full), so a hostile sender cannot grow them.
type FastMap<V> = HashMap<u64, V, foldhash::fast::RandomState>;

/// One worker's view of the switch.
#[derive(Debug, Default)]
pub struct SwitchView {
    /// The policy generation `owner` was built for.
    generation: u32,
    /// Policy address → datapath port.
    owner: FastMap<u16>,
    /// The datapath ports bound to policy ports with `port_security` (or
    /// disabled): they may send from their policy addresses only, and are
    /// not sent unicast frames for addresses not theirs.
    locked: Vec<u16>,
    /// Those bound to disabled policy ports (`enabled = false`): not
    /// flooded at all.
    closed: Vec<u16>,
    /// Learned addresses seen lately (valid while `version` holds).
    cache: FastMap<u16>,
    version: u64,
    /// When each cached source address was last refreshed in the table.
    refreshed: FastMap<Time>,
}

/// What the switch says of an arriving frame's source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Fine (and learned if it was news).
    Ok {
        /// The address was new or moved.
        learned: bool,
    },
    /// The source is another port's policy address.
    Spoofed,
}

/// How often a source already cached is refreshed in the shared table.
const REFRESH: Time = Time::from_secs(10);

/// The most addresses a worker caches.
const CACHE: usize = 4096;

impl SwitchView {
    /// Follows a policy change: policy port addresses map to the datapath
    /// ports bound to those policy ports (`port` names the datapath port
    /// a policy port is bound to).
    pub fn sync(&mut self, policy: &Compiled, port: impl Fn(&str) -> Option<u16>) {
        if self.generation == policy.generation {
            return;
        }
        self.generation = policy.generation;
        self.owner.clear();
        self.locked.clear();
        self.closed.clear();
        for p in &policy.policy.ports {
            if let Some(i) = port(&p.name) {
                for m in &p.macs {
                    self.owner.insert(mac_u64(m), i);
                }
                if !p.security.is_empty() || p.disabled {
                    self.locked.push(i);
                }
                if p.disabled {
                    self.closed.push(i);
                }
            }
        }
    }

    /// The datapath ports a flooded `frame` skips: for a group address,
    /// the disabled ones; for a unicast one (an address no port owns),
    /// those with port security too (OVN's egress port security drops a
    /// unicast frame to an address of none of the port's entries).
    pub fn flood_skips(&self, frame: &[u8]) -> &[u16] {
        match frame.first() {
            Some(b) if b & 1 == 0 => &self.locked,
            _ => &self.closed,
        }
    }

    /// Checks and learns the source of a frame that came in on `port`.
    pub fn source(&mut self, frame: &[u8], port: u16, table: &MacTable, now: Time) -> Source {
        let Some(src) = frame.get(6..12) else {
            return Source::Ok { learned: false };
        };
        if src[0] & 1 != 0 {
            // A group address as source is never learned (802.1D); from a
            // port with port security it is none of the port's.
            return match self.locked.contains(&port) {
                true => Source::Spoofed,
                false => Source::Ok { learned: false },
            };
        }
        let mac = mac_u64(src);
        if let Some(&owner) = self.owner.get(&mac) {
            return if owner == port {
                Source::Ok { learned: false }
            } else {
                Source::Spoofed
            };
        }
        if self.locked.contains(&port) {
            // A port with port security sends from its own addresses
            // only (the firewall checks which of them).
            return Source::Spoofed;
        }
        self.validate(table);
        let fresh = self.cache.get(&mac) == Some(&port)
            && self
                .refreshed
                .get(&mac)
                .is_some_and(|t| now.millis_since(*t) < REFRESH.as_millis());
        if fresh {
            return Source::Ok { learned: false };
        }
        let Some(learned) = table.learn(mac, port, now) else {
            // The table is full: not learned, so not cached either (frames
            // to it flood, from every worker alike).
            return Source::Ok { learned: false };
        };
        self.validate(table);
        if self.cache.len() >= CACHE {
            self.cache.clear();
            self.refreshed.clear();
        }
        self.cache.insert(mac, port);
        self.refreshed.insert(mac, now);
        Source::Ok { learned }
    }

    /// Where a frame for `frame`'s destination goes.
    pub fn dest(&mut self, frame: &[u8], table: &MacTable) -> Dest {
        let Some(dst) = frame.get(0..6) else {
            return Dest::Flood;
        };
        if dst[0] & 1 != 0 {
            return Dest::Flood;
        }
        let mac = mac_u64(dst);
        if let Some(&p) = self.owner.get(&mac) {
            return Dest::Port(p);
        }
        self.validate(table);
        if let Some(&p) = self.cache.get(&mac) {
            return Dest::Port(p);
        }
        match table.get(mac) {
            Some(p) => {
                if self.cache.len() < CACHE {
                    self.cache.insert(mac, p);
                }
                Dest::Port(p)
            }
            None => Dest::Flood,
        }
    }

    fn validate(&mut self, table: &MacTable) {
        let v = table.version.load(Relaxed);
        if v != self.version {
            self.version = v;
            self.cache.clear();
            self.refreshed.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_policy::model::{Policy, Port, PortSecurity};

    /// A port with `port_security` sends from its own MACs only, and is
    /// not flooded unicast frames; another port learns as before.
    #[test]
    fn ports_with_port_security_or_disabled_are_locked() {
        let port = |name: &str, mac: [u8; 6], locked: bool| Port {
            name: name.into(),
            macs: vec![mac],
            zone: 1,
            security: if locked {
                vec![PortSecurity { mac, ips: vec![] }]
            } else {
                vec![]
            },
            ..Port::default()
        };
        let mut off = port("c", [2, 0, 0, 0, 0, 3], false);
        off.disabled = true;
        let policy = Policy {
            ports: vec![
                port("a", [2, 0, 0, 0, 0, 1], true),
                port("b", [2, 0, 0, 0, 0, 2], false),
                off,
            ],
            ..Policy::default()
        };
        let compiled = Compiled::new(policy, 7).expect("compiles");
        let mut view = SwitchView::default();
        view.sync(&compiled, |n| {
            Some(["a", "b", "c"].iter().position(|x| *x == n)? as u16)
        });
        let table = MacTable::default();
        let frame = |src: [u8; 6], dst: [u8; 6]| {
            let mut f = dst.to_vec();
            f.extend_from_slice(&src);
            f.extend_from_slice(&[0x08, 0x00]);
            f
        };
        let now = Time::from_secs(1);
        let stranger = [2, 0, 0, 0, 0, 9];
        let own = [2, 0, 0, 0, 0, 1];
        assert_eq!(
            view.source(&frame(own, [0xff; 6]), 0, &table, now),
            Source::Ok { learned: false }
        );
        assert_eq!(
            view.source(&frame(stranger, [0xff; 6]), 0, &table, now),
            Source::Spoofed
        );
        assert_eq!(
            view.source(&frame(stranger, [0xff; 6]), 1, &table, now),
            Source::Ok { learned: true }
        );
        assert_eq!(
            view.source(&frame(stranger, [0xff; 6]), 2, &table, now),
            Source::Spoofed
        );
        // A group address as source: from a locked port, spoofed.
        let group = [0x03, 0, 0, 0, 0, 1];
        assert_eq!(
            view.source(&frame(group, [0xff; 6]), 0, &table, now),
            Source::Spoofed
        );
        assert_eq!(
            view.source(&frame(group, [0xff; 6]), 1, &table, now),
            Source::Ok { learned: false }
        );
        assert_eq!(view.flood_skips(&frame(own, [2, 0, 0, 0, 0, 0x42])), [0, 2]);
        // A disabled port is not flooded even group addresses.
        assert_eq!(view.flood_skips(&frame(own, [0xff; 6])), [2]);
        assert_eq!(view.flood_skips(&frame(own, [0x33, 0x33, 0, 0, 0, 1])), [2]);
    }
}

/// Learning, moves, ageing and the workers' caches in front of the
/// shared table.
#[cfg(test)]
mod learning {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];

    /// A frame from `src` to `dst`.
    fn frame(src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x08, 0x06]);
        f
    }

    fn at(secs: u64) -> Time {
        Time::from_secs(secs)
    }

    #[test]
    fn a_source_is_learned_on_its_port_and_a_move_is_news_to_every_worker() {
        let table = MacTable::default();
        let (mut one, mut two) = (SwitchView::default(), SwitchView::default());
        assert_eq!(
            one.source(&frame(A, [0xff; 6]), 1, &table, at(1)),
            Source::Ok { learned: true }
        );
        // Both workers send to it on port 1 now (the second caches it).
        assert_eq!(one.dest(&frame([2; 6], A), &table), Dest::Port(1));
        assert_eq!(two.dest(&frame([2; 6], A), &table), Dest::Port(1));
        // Again from port 1: nothing new.
        assert_eq!(
            one.source(&frame(A, [0xff; 6]), 1, &table, at(2)),
            Source::Ok { learned: false }
        );
        // It moves to port 3, seen by the worker that had it cached on 1
        // as a source: a move, learned.
        assert_eq!(
            one.source(&frame(A, [0xff; 6]), 3, &table, at(3)),
            Source::Ok { learned: true }
        );
        assert_eq!(table.entries(), [(A, 3)]);
        // The other worker's cache is emptied by the move.
        assert_eq!(two.dest(&frame([2; 6], A), &table), Dest::Port(3));
        assert_eq!(one.dest(&frame([2; 6], A), &table), Dest::Port(3));
    }

    #[test]
    fn an_address_sending_stays_learned_and_a_silent_one_ages_out() {
        let table = MacTable::default();
        let (mut one, mut two) = (SwitchView::default(), SwitchView::default());
        let b = [2, 0, 0, 0, 0, 0xb];
        one.source(&frame(A, [0xff; 6]), 1, &table, at(0));
        one.source(&frame(b, [0xff; 6]), 2, &table, at(0));
        assert_eq!(two.dest(&frame([2; 6], b), &table), Dest::Port(2));
        // A keeps sending through the worker that caches it: the shared
        // entry is refreshed (at most every ten seconds), so it outlives
        // the ageing time counted from when it was learned.
        for s in (5..=250).step_by(5) {
            one.source(&frame(A, [0xff; 6]), 1, &table, at(s));
        }
        // B sends through a worker that learns nothing new each time: its
        // entry is refreshed too.
        let mut three = SwitchView::default();
        three.source(&frame(b, [0xff; 6]), 2, &table, at(200));
        table.age(at(299));
        assert_eq!(table.entries(), [(A, 1), (b, 2)]);
        // B silent since 200 s: gone at 500 s (300 s on), and the worker
        // that had it cached floods to it again.
        table.age(at(499));
        assert_eq!(table.entries(), [(A, 1), (b, 2)]);
        table.age(at(500));
        assert_eq!(table.entries(), [(A, 1)]);
        assert_eq!(two.dest(&frame([2; 6], b), &table), Dest::Flood);
        table.age(at(550));
        assert!(table.entries().is_empty());
        assert_eq!(one.dest(&frame([2; 6], A), &table), Dest::Flood);
    }

    #[test]
    fn the_table_learns_at_most_max_learned_addresses() {
        let table = MacTable::default();
        let mut view = SwitchView::default();
        let mac = |i: u32| {
            let [_, a, b, c] = i.to_be_bytes();
            [2, 0, 0, a, b, c]
        };
        for i in 0..MAX_LEARNED as u32 {
            assert_eq!(
                view.source(&frame(mac(i), [0xff; 6]), 1, &table, at(1)),
                Source::Ok { learned: true }
            );
        }
        let one_more = mac(MAX_LEARNED as u32);
        assert_eq!(
            view.source(&frame(one_more, [0xff; 6]), 1, &table, at(1)),
            Source::Ok { learned: false }
        );
        assert_eq!(table.entries().len(), MAX_LEARNED);
        assert_eq!(view.dest(&frame(A, one_more), &table), Dest::Flood);
        // A move of one already held is still learned when full.
        assert_eq!(
            view.source(&frame(mac(7), [0xff; 6]), 2, &table, at(2)),
            Source::Ok { learned: true }
        );
    }

    /// A policy port's address goes to the port it is bound to before
    /// that port sent anything; a group address floods.
    #[test]
    fn a_policy_address_goes_to_its_port_unlearned() {
        use ctrack_policy::model::{Policy, Port};
        let policy = Policy {
            ports: vec![Port {
                name: "vm".into(),
                macs: vec![A],
                zone: 1,
                ..Port::default()
            }],
            ..Policy::default()
        };
        let compiled = Compiled::new(policy, 3).expect("compiles");
        let mut view = SwitchView::default();
        view.sync(&compiled, |n| (n == "vm").then_some(4));
        let table = MacTable::default();
        assert_eq!(view.dest(&frame([2; 6], A), &table), Dest::Port(4));
        assert_eq!(
            view.dest(&frame([2; 6], [0x33, 0x33, 0, 0, 0, 1]), &table),
            Dest::Flood
        );
        assert!(table.entries().is_empty());
    }
}
