//! Where connections live: the [`ConnTable`] interface the tracker uses, and
//! [`LocalTable`], a single-threaded implementation.
//!
//! `LocalTable` keeps connections in a slab. One hash index finds a
//! connection from either direction (the key hash is symmetric; a connection
//! whose reply key is not the reverse of its original key, under address
//! translation, gets a second entry). Each zone has its own intrusive list,
//! so flushing a zone visits that zone's connections only and an empty zone
//! costs one map lookup. Expiry uses a lazy timer wheel: a connection is
//! filed under its expiry second when inserted, a packet that extends it
//! touches nothing but the connection, and the sweeper, visiting a slot whose
//! second has passed, frees what has expired and files the rest again under
//! their new time. The packet path never scans.

use hashbrown::HashTable;

type HashMap<K, V> = hashbrown::HashMap<K, V, foldhash::fast::RandomState>;

use crate::conn::{Conn, Dir};
use crate::key::{ConnKey, KeyHasher, Zone};
use crate::time::Time;

/// A handle on a connection in a table. It stays valid until the
/// connection is removed; a handle to a removed connection finds nothing,
/// even after its slot is reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnId {
    index: u32,
    generation: u32,
}

impl ConnId {
    /// A number that identifies the connection while it lives (for
    /// printing).
    pub fn as_u64(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.index)
    }
}

/// What a sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sweep {
    /// Connections freed because they had expired.
    pub expired: usize,
    /// Connections looked at.
    pub examined: usize,
    /// When to sweep next: `Some(now)` if the budget ran out with work
    /// left, the end of the next occupied second otherwise, `None` if the
    /// table is empty.
    pub next: Option<Time>,
}

/// The storage the tracker needs. Implementations decide how connections
/// are laid out, indexed, and expired.
pub trait ConnTable {
    /// Finds the unexpired connection one of whose keys is `key`, and the
    /// direction `key` travels in it.
    fn lookup(&self, key: &ConnKey, now: Time) -> Option<(ConnId, Dir)>;
    /// The connection behind `id`.
    fn get(&self, id: ConnId) -> Option<&Conn>;
    /// The connection behind `id`, to update.
    fn get_mut(&mut self, id: ConnId) -> Option<&mut Conn>;
    /// Adds a connection (its keys must not belong to a live connection).
    fn insert(&mut self, conn: Conn) -> ConnId;
    /// Removes a connection.
    fn remove(&mut self, id: ConnId) -> Option<Conn>;
    /// Connections held, expired ones not yet swept included.
    fn len(&self) -> usize;
    /// True if no connection is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Connections held in `zone`.
    fn zone_len(&self, zone: Zone) -> usize;
    /// Removes every connection of `zone`; returns how many.
    fn flush_zone(&mut self, zone: Zone) -> usize;
    /// Removes every connection; returns how many.
    fn clear(&mut self) -> usize;
    /// Frees expired connections, looking at no more than `budget`.
    fn sweep(&mut self, now: Time, budget: usize) -> Sweep;
    /// Calls `f` for each connection, of `zone` only if given.
    fn for_each(&self, zone: Option<Zone>, f: &mut dyn FnMut(ConnId, &Conn));
}

const NIL: u32 = u32::MAX;

/// Width of a timer-wheel slot, in milliseconds.
const TICK_MS: u64 = 1000;
/// Slots in the wheel (a power of two); the wheel spans this many seconds,
/// and a connection expiring later is filed in the last slot and filed
/// again when that slot comes due.
const WHEEL_SLOTS: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
}

const UNLINKED: Link = Link {
    prev: NIL,
    next: NIL,
};

#[derive(Debug)]
struct Node {
    conn: Conn,
    zone_link: Link,
    timer_link: Link,
    timer_slot: u32,
}

#[derive(Debug)]
enum Slot {
    Occupied { generation: u32, node: Box<Node> },
    Vacant { generation: u32, next_free: u32 },
}

#[derive(Debug, Clone, Copy)]
struct IndexEntry {
    hash: u64,
    index: u32,
    /// Which key the entry was made for: 0 the original key (which also
    /// finds the reply when that is its reverse), 1 a translated reply key.
    key: u8,
}

#[derive(Debug, Clone, Copy, Default)]
struct ListHead {
    head: u32,
    len: u32,
}

/// A single-threaded connection table. See the module documentation.
#[derive(Debug)]
pub struct LocalTable {
    hasher: KeyHasher,
    slots: Vec<Slot>,
    free_head: u32,
    len: usize,
    index: HashTable<IndexEntry>,
    zones: HashMap<Zone, ListHead>,
    wheel: Vec<ListHead>,
    /// The next wheel tick to process; every earlier tick is done.
    cursor: Option<u64>,
}

impl Default for LocalTable {
    fn default() -> Self {
        Self::new(KeyHasher::new())
    }
}

impl LocalTable {
    /// An empty table hashing keys with `hasher`.
    pub fn new(hasher: KeyHasher) -> LocalTable {
        LocalTable {
            hasher,
            slots: Vec::new(),
            free_head: NIL,
            len: 0,
            index: HashTable::new(),
            zones: HashMap::default(),
            wheel: vec![ListHead { head: NIL, len: 0 }; WHEEL_SLOTS],
            cursor: None,
        }
    }

    /// An empty table with room for `capacity` connections.
    pub fn with_capacity(hasher: KeyHasher, capacity: usize) -> LocalTable {
        let mut t = LocalTable::new(hasher);
        t.slots.reserve(capacity);
        t.index.reserve(capacity, |e| e.hash);
        t
    }

    fn node(&self, index: u32) -> &Node {
        match &self.slots[index as usize] {
            Slot::Occupied { node, .. } => node,
            Slot::Vacant { .. } => unreachable!("index entry for a vacant slot"),
        }
    }

    fn node_mut(&mut self, index: u32) -> &mut Node {
        match &mut self.slots[index as usize] {
            Slot::Occupied { node, .. } => node,
            Slot::Vacant { .. } => unreachable!("list link to a vacant slot"),
        }
    }

    fn resolve(&self, id: ConnId) -> Option<&Node> {
        match self.slots.get(id.index as usize)? {
            Slot::Occupied { generation, node } if *generation == id.generation => Some(node),
            _ => None,
        }
    }

    fn id_of(&self, index: u32) -> ConnId {
        match &self.slots[index as usize] {
            Slot::Occupied { generation, .. } => ConnId {
                index,
                generation: *generation,
            },
            Slot::Vacant { .. } => unreachable!("id of a vacant slot"),
        }
    }

    fn tick_of(t: Time) -> u64 {
        t.as_millis() / TICK_MS
    }

    /// The wheel slot for a connection expiring at `exp`: its own second if
    /// that lies within the lap ahead of the cursor, the cursor's (or
    /// `min_tick`'s) if it is earlier, the last of the lap if later.
    fn slot_for(&self, exp: Time, min_tick: u64) -> usize {
        let cursor = self.cursor.unwrap_or(0);
        let tick = Self::tick_of(exp).clamp(min_tick, cursor + WHEEL_SLOTS as u64 - 1);
        (tick % WHEEL_SLOTS as u64) as usize
    }

    // The intrusive lists: `get_link` / `set_link` pick the zone or timer
    // link of a node, so one pair of functions serves both lists.

    fn push_front(&mut self, head: ListHeadRef, index: u32) {
        let old = self.head(head).head;
        self.set_link(
            head,
            index,
            Link {
                prev: NIL,
                next: old,
            },
        );
        if old != NIL {
            let mut l = self.get_link(head, old);
            l.prev = index;
            self.set_link(head, old, l);
        }
        let h = self.head_mut(head);
        h.head = index;
        h.len += 1;
    }

    fn unlink(&mut self, head: ListHeadRef, index: u32) {
        let Link { prev, next } = self.get_link(head, index);
        if prev != NIL {
            let mut l = self.get_link(head, prev);
            l.next = next;
            self.set_link(head, prev, l);
        } else {
            self.head_mut(head).head = next;
        }
        if next != NIL {
            let mut l = self.get_link(head, next);
            l.prev = prev;
            self.set_link(head, next, l);
        }
        self.set_link(head, index, UNLINKED);
        self.head_mut(head).len -= 1;
    }

    fn head(&self, r: ListHeadRef) -> ListHead {
        match r {
            ListHeadRef::Zone(z) => self
                .zones
                .get(&z)
                .copied()
                .unwrap_or(ListHead { head: NIL, len: 0 }),
            ListHeadRef::Wheel(s) => self.wheel[s],
        }
    }

    fn head_mut(&mut self, r: ListHeadRef) -> &mut ListHead {
        match r {
            ListHeadRef::Zone(z) => self
                .zones
                .entry(z)
                .or_insert(ListHead { head: NIL, len: 0 }),
            ListHeadRef::Wheel(s) => &mut self.wheel[s],
        }
    }

    fn get_link(&self, r: ListHeadRef, index: u32) -> Link {
        let n = self.node(index);
        match r {
            ListHeadRef::Zone(_) => n.zone_link,
            ListHeadRef::Wheel(_) => n.timer_link,
        }
    }

    fn set_link(&mut self, r: ListHeadRef, index: u32, link: Link) {
        let n = self.node_mut(index);
        match r {
            ListHeadRef::Zone(_) => n.zone_link = link,
            ListHeadRef::Wheel(_) => n.timer_link = link,
        }
    }

    fn file(&mut self, index: u32, min_tick: u64) {
        let slot = self.slot_for(self.node(index).conn.expiration, min_tick);
        self.node_mut(index).timer_slot = slot as u32;
        self.push_front(ListHeadRef::Wheel(slot), index);
    }

    fn index_entries(&self, conn: &Conn) -> impl Iterator<Item = (u64, u8)> {
        let fwd = (self.hasher.hash(&conn.keys[0]), 0u8);
        let rev = conn
            .reply_key_differs()
            .then(|| (self.hasher.hash(&conn.keys[1]), 1u8));
        core::iter::once(fwd).chain(rev)
    }

    fn remove_index(&mut self, index: u32) -> Conn {
        let node = self.node(index);
        let zone = node.conn.keys[0].zone;
        let entries: Vec<(u64, u8)> = self.index_entries(&node.conn).collect();
        for (hash, key) in entries {
            if let Ok(e) = self
                .index
                .find_entry(hash, |e| e.index == index && e.key == key)
            {
                e.remove();
            }
        }
        self.unlink(ListHeadRef::Zone(zone), index);
        if self.zones.get(&zone).is_some_and(|h| h.len == 0) {
            self.zones.remove(&zone);
        }
        let slot = self.node(index).timer_slot as usize;
        self.unlink(ListHeadRef::Wheel(slot), index);
        let Slot::Occupied { generation, node } = core::mem::replace(
            &mut self.slots[index as usize],
            Slot::Vacant {
                generation: 0,
                next_free: NIL,
            },
        ) else {
            unreachable!("removing a vacant slot")
        };
        self.slots[index as usize] = Slot::Vacant {
            generation: generation.wrapping_add(1),
            next_free: self.free_head,
        };
        self.free_head = index;
        self.len -= 1;
        node.conn
    }

    fn remove_list(&mut self, head: ListHeadRef) -> usize {
        let mut n = 0;
        loop {
            let h = self.head(head).head;
            if h == NIL {
                return n;
            }
            self.remove_index(h);
            n += 1;
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum ListHeadRef {
    Zone(Zone),
    Wheel(usize),
}

impl ConnTable for LocalTable {
    fn lookup(&self, key: &ConnKey, now: Time) -> Option<(ConnId, Dir)> {
        let hash = self.hasher.hash(key);
        let entry = self.index.find(hash, |e| {
            let c = &self.node(e.index).conn;
            !c.is_expired(now) && c.direction_of(key).is_some()
        })?;
        let dir = self.node(entry.index).conn.direction_of(key)?;
        Some((self.id_of(entry.index), dir))
    }

    fn get(&self, id: ConnId) -> Option<&Conn> {
        self.resolve(id).map(|n| &n.conn)
    }

    fn get_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        match self.slots.get_mut(id.index as usize)? {
            Slot::Occupied { generation, node } if *generation == id.generation => {
                Some(&mut node.conn)
            }
            _ => None,
        }
    }

    fn insert(&mut self, conn: Conn) -> ConnId {
        if self.cursor.is_none() {
            self.cursor = Some(Self::tick_of(conn.created));
        }
        let zone = conn.keys[0].zone;
        let entries: Vec<(u64, u8)> = self.index_entries(&conn).collect();
        let node = Box::new(Node {
            conn,
            zone_link: UNLINKED,
            timer_link: UNLINKED,
            timer_slot: 0,
        });
        let index = if self.free_head != NIL {
            let index = self.free_head;
            let Slot::Vacant {
                generation,
                next_free,
            } = self.slots[index as usize]
            else {
                unreachable!("free list holds an occupied slot")
            };
            self.free_head = next_free;
            self.slots[index as usize] = Slot::Occupied { generation, node };
            index
        } else {
            let index = u32::try_from(self.slots.len()).expect("more than 2^32 connections");
            self.slots.push(Slot::Occupied {
                generation: 0,
                node,
            });
            index
        };
        for (hash, key) in entries {
            self.index
                .insert_unique(hash, IndexEntry { hash, index, key }, |e| e.hash);
        }
        self.push_front(ListHeadRef::Zone(zone), index);
        self.file(index, self.cursor.unwrap_or(0));
        self.len += 1;
        self.id_of(index)
    }

    fn remove(&mut self, id: ConnId) -> Option<Conn> {
        self.resolve(id)?;
        Some(self.remove_index(id.index))
    }

    fn len(&self) -> usize {
        self.len
    }

    fn zone_len(&self, zone: Zone) -> usize {
        self.zones.get(&zone).map_or(0, |h| h.len as usize)
    }

    fn flush_zone(&mut self, zone: Zone) -> usize {
        if !self.zones.contains_key(&zone) {
            return 0;
        }
        self.remove_list(ListHeadRef::Zone(zone))
    }

    fn clear(&mut self) -> usize {
        let n = self.len;
        self.slots.clear();
        self.free_head = NIL;
        self.len = 0;
        self.index.clear();
        self.zones.clear();
        for h in &mut self.wheel {
            *h = ListHead { head: NIL, len: 0 };
        }
        n
    }

    fn sweep(&mut self, now: Time, budget: usize) -> Sweep {
        let mut out = Sweep::default();
        let now_tick = Self::tick_of(now);
        let Some(mut cursor) = self.cursor else {
            return out;
        };
        // More than a lap behind: the slots of the last lap hold everything,
        // so skip the ticks before it.
        if now_tick > cursor + WHEEL_SLOTS as u64 {
            cursor = now_tick - WHEEL_SLOTS as u64;
            self.cursor = Some(cursor);
        }
        // Only slots whose whole second has passed are due.
        while cursor < now_tick {
            let slot = (cursor % WHEEL_SLOTS as u64) as usize;
            loop {
                let h = self.wheel[slot].head;
                if h == NIL {
                    break;
                }
                if out.examined == budget {
                    out.next = Some(now);
                    return out;
                }
                out.examined += 1;
                if self.node(h).conn.is_expired(now) {
                    self.remove_index(h);
                    out.expired += 1;
                } else {
                    // Extended since it was filed: file it under its new
                    // time, which lies after this slot's second (never in
                    // this slot again, or the loop would not end).
                    self.unlink(ListHeadRef::Wheel(slot), h);
                    self.file(h, cursor + 1);
                }
            }
            cursor += 1;
            self.cursor = Some(cursor);
        }
        out.next = (0..WHEEL_SLOTS as u64)
            .map(|i| cursor + i)
            .find(|t| self.wheel[(t % WHEEL_SLOTS as u64) as usize].len > 0)
            .map(|t| Time::from_millis((t + 1) * TICK_MS));
        out
    }

    fn for_each(&self, zone: Option<Zone>, f: &mut dyn FnMut(ConnId, &Conn)) {
        match zone {
            Some(z) => {
                let mut i = self.head(ListHeadRef::Zone(z)).head;
                while i != NIL {
                    let n = self.node(i);
                    f(self.id_of(i), &n.conn);
                    i = n.zone_link.next;
                }
            }
            None => {
                for (i, s) in self.slots.iter().enumerate() {
                    if let Slot::Occupied { node, .. } = s {
                        f(self.id_of(i as u32), &node.conn);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{Endpoint, Family};
    use crate::proto::{OtherState, ProtoState};
    use std::net::Ipv4Addr;

    fn key(i: u32, zone: Zone) -> ConnKey {
        ConnKey {
            src: Endpoint::v4(Ipv4Addr::from(0x0a00_0000 + i), 1000 + (i % 60000) as u16),
            dst: Endpoint::v4(Ipv4Addr::new(10, 255, 0, 1), 53),
            zone,
            proto: 17,
            family: Family::V4,
        }
    }

    fn conn(k: ConnKey, now: u64, exp: u64) -> Conn {
        Conn::new(
            k,
            ProtoState::Other(OtherState::First),
            Time::from_millis(now),
            Time::from_millis(exp),
        )
    }

    #[test]
    fn lookup_both_directions_and_zones() {
        let mut t = LocalTable::new(KeyHasher::with_seed(1));
        let k = key(1, 5);
        let id = t.insert(conn(k, 0, 10_000));
        assert_eq!(t.lookup(&k, Time::ZERO), Some((id, Dir::Orig)));
        assert_eq!(t.lookup(&k.reverse(), Time::ZERO), Some((id, Dir::Reply)));
        let mut other_zone = k;
        other_zone.zone = 6;
        assert_eq!(t.lookup(&other_zone, Time::ZERO), None);
        assert_eq!(t.zone_len(5), 1);
        assert_eq!(t.zone_len(6), 0);
    }

    #[test]
    fn expired_is_absent_at_exactly_the_expiry() {
        let mut t = LocalTable::new(KeyHasher::with_seed(1));
        let k = key(1, 0);
        t.insert(conn(k, 0, 30_000));
        assert!(t.lookup(&k, Time::from_millis(29_999)).is_some());
        assert!(t.lookup(&k, Time::from_millis(30_000)).is_none());
        // A new connection with the same key may then be inserted.
        let id2 = t.insert(conn(k, 30_000, 60_000));
        assert_eq!(
            t.lookup(&k, Time::from_millis(30_000)).map(|x| x.0),
            Some(id2)
        );
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn translated_reply_key_has_its_own_entry() {
        let mut t = LocalTable::new(KeyHasher::with_seed(1));
        let k = key(1, 0);
        let mut c = conn(k, 0, 10_000);
        let mut rev = k.reverse();
        rev.dst.addr = u128::from(u32::from(Ipv4Addr::new(192, 0, 2, 1)));
        rev.dst.port = 40000;
        c.keys[1] = rev;
        let id = t.insert(c);
        assert_eq!(t.lookup(&rev, Time::ZERO), Some((id, Dir::Reply)));
        assert_eq!(t.lookup(&k, Time::ZERO), Some((id, Dir::Orig)));
        assert_eq!(
            t.lookup(&k.reverse(), Time::ZERO),
            None,
            "untranslated reply"
        );
        t.remove(id);
        assert_eq!(t.lookup(&rev, Time::ZERO), None);
        assert_eq!(t.index.len(), 0);
    }

    #[test]
    fn stale_ids_find_nothing() {
        let mut t = LocalTable::new(KeyHasher::with_seed(1));
        let a = t.insert(conn(key(1, 0), 0, 10_000));
        assert!(t.remove(a).is_some());
        let b = t.insert(conn(key(2, 0), 0, 10_000));
        assert_ne!(a, b);
        assert!(t.get(a).is_none());
        assert!(t.remove(a).is_none());
        assert!(t.get(b).is_some());
    }

    #[test]
    fn flush_zone_touches_only_that_zone() {
        let mut t = LocalTable::new(KeyHasher::with_seed(1));
        for i in 0..100 {
            t.insert(conn(key(i, (i % 3) as u16), 0, 10_000));
        }
        assert_eq!(t.flush_zone(1), 33);
        assert_eq!(t.flush_zone(1), 0);
        assert_eq!(t.flush_zone(9), 0);
        assert_eq!(t.len(), 67);
        assert_eq!(t.zone_len(0), 34);
        for i in 0..100 {
            let found = t.lookup(&key(i, (i % 3) as u16), Time::ZERO).is_some();
            assert_eq!(found, i % 3 != 1);
        }
        let mut n = 0;
        t.for_each(Some(2), &mut |_, c| {
            assert_eq!(c.keys[0].zone, 2);
            n += 1;
        });
        assert_eq!(n, 33);
        assert_eq!(t.clear(), 67);
        assert!(t.is_empty());
    }

    #[test]
    fn sweep_frees_expired_and_refiles_extended() {
        let mut t = LocalTable::new(KeyHasher::with_seed(1));
        let a = t.insert(conn(key(1, 0), 0, 5_000));
        let b = t.insert(conn(key(2, 0), 0, 5_000));
        let _c = t.insert(conn(key(3, 0), 0, 100_000_000)); // beyond the wheel
        // b is extended by traffic: only its connection changes.
        t.get_mut(b).unwrap().expiration = Time::from_millis(20_000);
        let s = t.sweep(Time::from_millis(4_000), usize::MAX);
        assert_eq!(s.expired, 0);
        assert_eq!(s.next, Some(Time::from_millis(6_000)));
        let s = t.sweep(Time::from_millis(6_000), usize::MAX);
        assert_eq!((s.expired, s.examined), (1, 2));
        assert!(t.get(a).is_none());
        assert!(t.get(b).is_some());
        assert_eq!(s.next, Some(Time::from_millis(21_000)));
        let s = t.sweep(Time::from_millis(21_000), usize::MAX);
        assert_eq!(s.expired, 1);
        assert_eq!(t.len(), 1);
        // The long-lived one is refiled each lap and freed after its time.
        let s = t.sweep(Time::from_millis(100_000_001), usize::MAX);
        assert_eq!(s.expired, 1);
        assert_eq!(s.next, None);
        assert!(t.is_empty());
    }

    #[test]
    fn sweep_budget() {
        let mut t = LocalTable::new(KeyHasher::with_seed(1));
        for i in 0..10 {
            t.insert(conn(key(i, 0), 0, 1_000));
        }
        let now = Time::from_millis(5_000);
        let s = t.sweep(now, 4);
        assert_eq!((s.expired, s.next), (4, Some(now)));
        let s = t.sweep(now, 100);
        assert_eq!(s.expired, 6);
        assert_eq!(s.next, None);
    }

    #[test]
    fn time_going_backwards_is_harmless() {
        let mut t = LocalTable::new(KeyHasher::with_seed(1));
        t.insert(conn(key(1, 0), 50_000, 60_000));
        t.sweep(Time::from_millis(55_000), usize::MAX);
        // A connection created "earlier" than the cursor.
        t.insert(conn(key(2, 0), 10_000, 20_000));
        let s = t.sweep(Time::from_millis(56_000), usize::MAX);
        assert_eq!(s.expired, 1);
        let s = t.sweep(Time::from_millis(61_000), usize::MAX);
        assert_eq!(s.expired, 1);
        assert!(t.is_empty());
    }
}
