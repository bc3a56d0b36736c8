//! The lists a shard keeps of its records: doubly linked through a pair of
//! links in each record's header (a zone instance's records, a wheel
//! slot's), and a shard's zone lists by instance.

use hashbrown::HashMap;

use crate::header::Header;
use crate::sync::AtomicU32;

/// A doubly linked list of slots (through a pair of header links).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct List {
    pub(crate) head: u32,
    pub(crate) tail: u32,
    pub(crate) len: u32,
}

/// Which pair of header links a list uses.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Links {
    Zone,
    Wheel,
}

impl Links {
    #[inline]
    pub(crate) fn of(self, h: &Header) -> (&AtomicU32, &AtomicU32) {
        match self {
            Links::Zone => (&h.zone_prev, &h.zone_next),
            Links::Wheel => (&h.wheel_prev, &h.wheel_next),
        }
    }
}

/// A shard's zone lists by instance. The one that most inserts and
/// removals go to (a shard usually holds records of one zone instance or
/// a few) is kept inline, on a line that every insert touches anyway; the
/// others in a map, whose buckets would be one more line to fetch from
/// another core's cache on each insert.
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct ZoneLists {
    /// The instance of `first`, while `first.len > 0`.
    pub(crate) first_key: u64,
    /// Vacant while empty.
    pub(crate) first: List,
    /// The others. An instance is in at most one of `first` and `rest`.
    pub(crate) rest: HashMap<u64, List, foldhash::fast::RandomState>,
}

impl ZoneLists {
    /// The list of `instance`, if it has records.
    #[inline]
    pub(crate) fn get(&self, instance: u64) -> Option<&List> {
        if self.first.len > 0 && self.first_key == instance {
            Some(&self.first)
        } else {
            self.rest.get(&instance)
        }
    }

    /// The list of `instance`, if it has records, to change.
    #[inline]
    pub(crate) fn get_mut(&mut self, instance: u64) -> Option<&mut List> {
        if self.first.len > 0 && self.first_key == instance {
            Some(&mut self.first)
        } else {
            self.rest.get_mut(&instance)
        }
    }

    /// The list of `instance`, made empty if it had none. Its caller puts
    /// a record in it at once: an empty list is as good as none.
    #[inline]
    pub(crate) fn get_or_default(&mut self, instance: u64) -> &mut List {
        if self.first.len > 0 {
            if self.first_key == instance {
                return &mut self.first;
            }
        } else if !self.rest.contains_key(&instance) {
            self.first_key = instance;
            self.first = List::default();
            return &mut self.first;
        }
        self.rest.entry(instance).or_default()
    }

    /// Makes `instance`'s list (if it has records) the inline one, the one
    /// it held going to the map: for a caller about to look the list up
    /// once a record, as a zone's reclaim does (each record's removal
    /// unlinks it from its zone list). Found in the map, as the second
    /// zone of a shard's is, each lookup hashed the instance and probed
    /// the map: about 25 instructions a record of `bench zones`'s reclaim
    /// (callgrind). Allocates nothing: the map has just given up the room
    /// the inline list takes.
    pub(crate) fn promote(&mut self, instance: u64) {
        if self.first.len > 0 && self.first_key == instance {
            return;
        }
        let Some(list) = self.rest.remove(&instance) else {
            return;
        };
        if self.first.len > 0 {
            self.rest.insert(self.first_key, self.first);
        }
        self.first_key = instance;
        self.first = list;
    }

    /// Forgets the list of `instance` (emptied by its caller).
    #[inline]
    pub(crate) fn remove(&mut self, instance: u64) {
        debug_assert!(self.get(instance).is_none_or(|l| l.len == 0));
        if self.first_key == instance {
            self.first = List::default();
        }
        self.rest.remove(&instance);
    }

    /// Every instance with records, and its list.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &List)> {
        (self.first.len > 0)
            .then_some((self.first_key, &self.first))
            .into_iter()
            .chain(self.rest.iter().map(|(k, l)| (*k, l)))
    }

    /// Entries the map has room for.
    pub(crate) fn capacity(&self) -> usize {
        self.rest.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::{List, ZoneLists};

    fn with(len: u32) -> List {
        List {
            head: 1,
            tail: 1,
            len,
        }
    }

    fn listed(z: &ZoneLists) -> Vec<(u64, u32)> {
        let mut v: Vec<_> = z.iter().map(|(k, l)| (k, l.len)).collect();
        v.sort_unstable();
        v
    }

    /// A promoted zone's list becomes the inline one, and the one held
    /// there goes to the map, whole; an empty inline list goes nowhere.
    #[test]
    fn promotion_swaps_the_inline_list_and_loses_none() {
        let mut z = ZoneLists::default();
        *z.get_or_default(1) = with(3);
        *z.get_or_default(2) = with(5);
        *z.get_or_default(3) = with(7);
        assert_eq!(z.first_key, 1);
        z.promote(2);
        assert_eq!((z.first_key, z.first.len), (2, 5));
        assert_eq!(listed(&z), [(1, 3), (2, 5), (3, 7)]);
        // Promoting the inline one, or one with no list, changes nothing.
        z.promote(2);
        z.promote(9);
        assert_eq!((z.first_key, listed(&z)), (2, vec![(1, 3), (2, 5), (3, 7)]));
        // An emptied inline list is not kept when another is promoted.
        z.get_mut(2).unwrap().len = 0;
        z.remove(2);
        z.promote(3);
        assert_eq!((z.first_key, listed(&z)), (3, vec![(1, 3), (3, 7)]));
        assert!(z.get(2).is_none());
        assert!(z.capacity() >= 1, "the map's room is counted");
    }

    /// The map's room, as the table's memory figures count it, grows with
    /// the zones past the inline one.
    #[test]
    fn the_maps_room_is_told() {
        let mut z = ZoneLists::default();
        assert_eq!(z.capacity(), 0);
        for k in 1..=20 {
            *z.get_or_default(k) = with(1);
        }
        assert!(z.capacity() >= 19, "{}", z.capacity());
    }
}
