//! Ethernet II frames, 802.1Q / 802.1ad VLAN tags, and 802.3 LLC/SNAP.

use crate::{Error, Result, be16};

/// EtherType values this crate knows by name.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service VLAN tag (QinQ outer tag).
    pub const QINQ: u16 = 0x88a8;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// MPLS unicast.
    pub const MPLS: u16 = 0x8847;
    /// Values below this are 802.3 lengths, not EtherTypes.
    pub const MIN: u16 = 0x0600;
}

/// Length of an Ethernet II header (two addresses and the EtherType).
pub const HEADER_LEN: usize = 14;
/// Length of one VLAN tag (TPID and TCI).
pub const VLAN_TAG_LEN: usize = 4;
/// At most this many VLAN tags are parsed (802.1ad outer + 802.1Q inner), as
/// Open vSwitch does; a third tag leaves the frame classified as non-IP.
pub const MAX_VLAN_TAGS: usize = 2;

mod field {
    use core::ops::Range;
    pub(super) const DST: Range<usize> = 0..6;
    pub(super) const SRC: Range<usize> = 6..12;
    pub(super) const ETHERTYPE: Range<usize> = 12..14;
}

/// A read-only or read-write view of an Ethernet II header.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` after checking it holds a whole Ethernet header; no
    /// accessor panics afterwards.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Self { buffer })
    }

    /// Destination MAC address.
    pub fn dst(&self) -> [u8; 6] {
        let d = self.buffer.as_ref();
        [d[0], d[1], d[2], d[3], d[4], d[5]]
    }

    /// Source MAC address.
    pub fn src(&self) -> [u8; 6] {
        let s = &self.buffer.as_ref()[field::SRC];
        [s[0], s[1], s[2], s[3], s[4], s[5]]
    }

    /// The EtherType (or 802.3 length) right after the addresses.
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE.start)
    }

    /// The bytes after the first EtherType field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Consumes the view, returning the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst(&mut self, mac: [u8; 6]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&mac);
    }

    /// Sets the source MAC address.
    pub fn set_src(&mut self, mac: [u8; 6]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&mac);
    }
}

/// One VLAN tag as found in the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VlanTag {
    /// Tag protocol identifier: 0x8100 (802.1Q) or 0x88a8 (802.1ad).
    pub tpid: u16,
    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub tci: u16,
}

impl VlanTag {
    /// The 12-bit VLAN identifier.
    pub fn vid(&self) -> u16 {
        self.tci & 0x0fff
    }

    /// The 3-bit priority code point.
    pub fn pcp(&self) -> u8 {
        (self.tci >> 13) as u8
    }
}

/// True for the TPIDs this crate parses as VLAN tags.
pub fn is_vlan_tpid(ethertype: u16) -> bool {
    ethertype == ethertype::VLAN || ethertype == ethertype::QINQ
}

/// The VLAN tags of a frame, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VlanTags {
    tags: [VlanTag; MAX_VLAN_TAGS],
    len: u8,
}

impl VlanTags {
    /// The tags, outermost first.
    pub fn as_slice(&self) -> &[VlanTag] {
        &self.tags[..usize::from(self.len)]
    }

    /// Number of tags.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// True if the frame carried no tag.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn push(&mut self, tag: VlanTag) {
        self.tags[usize::from(self.len)] = tag;
        self.len += 1;
    }
}

/// Walks VLAN tags and LLC/SNAP starting at the EtherType field at `offset`
/// of `data`. Returns the tags, the final EtherType, and the offset of the
/// network header.
///
/// As Open vSwitch does: at most [`MAX_VLAN_TAGS`] tags, a tag is taken only
/// if the tag and the EtherType after it fit; an 802.3 length field is
/// followed into LLC/SNAP with the Ethernet OUI, and anything else is `None`.
pub(crate) fn parse_l2_tail(data: &[u8], mut offset: usize) -> (VlanTags, Option<u16>, usize) {
    let mut tags = VlanTags::default();
    // The caller guarantees the first EtherType field is present.
    let mut ty = be16(data, offset);
    while is_vlan_tpid(ty) && tags.len() < MAX_VLAN_TAGS {
        if data.len() < offset + VLAN_TAG_LEN + 2 {
            break;
        }
        tags.push(VlanTag {
            tpid: ty,
            tci: be16(data, offset + 2),
        });
        offset += VLAN_TAG_LEN;
        ty = be16(data, offset);
    }
    offset += 2;
    if ty >= ethertype::MIN {
        return (tags, Some(ty), offset);
    }
    // 802.3 length: only LLC/SNAP with the Ethernet OUI carries an EtherType.
    const LLC_SNAP_LEN: usize = 8;
    match data.get(offset..offset + LLC_SNAP_LEN) {
        Some([0xaa, 0xaa, 0x03, 0, 0, 0, hi, lo]) => {
            let inner = u16::from_be_bytes([*hi, *lo]);
            if inner >= ethertype::MIN {
                (tags, Some(inner), offset + LLC_SNAP_LEN)
            } else {
                (tags, None, offset + LLC_SNAP_LEN)
            }
        }
        _ => (tags, None, offset),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tail: &[u8]) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        f.extend_from_slice(tail);
        f
    }

    #[test]
    fn header_fields() {
        let f = frame(&[0x08, 0x00, 0x45]);
        let e = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(e.dst(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(e.src(), [2, 0, 0, 0, 0, 2]);
        assert_eq!(e.ethertype(), ethertype::IPV4);
        assert_eq!(e.payload(), &[0x45]);
        assert_eq!(
            EthernetFrame::new_checked(&f[..13]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn untagged() {
        let f = frame(&[0x86, 0xdd]);
        let (tags, ty, off) = parse_l2_tail(&f, 12);
        assert!(tags.is_empty());
        assert_eq!(ty, Some(ethertype::IPV6));
        assert_eq!(off, 14);
    }

    #[test]
    fn single_tag() {
        let f = frame(&[0x81, 0x00, 0x20, 0x64, 0x08, 0x00]);
        let (tags, ty, off) = parse_l2_tail(&f, 12);
        assert_eq!(tags.len(), 1);
        assert_eq!(tags.as_slice()[0].vid(), 100);
        assert_eq!(tags.as_slice()[0].pcp(), 1);
        assert_eq!(ty, Some(ethertype::IPV4));
        assert_eq!(off, 18);
    }

    #[test]
    fn qinq() {
        let f = frame(&[0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x14, 0x08, 0x00]);
        let (tags, ty, off) = parse_l2_tail(&f, 12);
        assert_eq!(tags.len(), 2);
        assert_eq!(tags.as_slice()[0].tpid, ethertype::QINQ);
        assert_eq!(tags.as_slice()[0].vid(), 10);
        assert_eq!(tags.as_slice()[1].vid(), 20);
        assert_eq!(ty, Some(ethertype::IPV4));
        assert_eq!(off, 22);
    }

    #[test]
    fn third_tag_is_not_parsed() {
        let f = frame(&[
            0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2, 0x81, 0x00, 0, 3, 0x08, 0x00,
        ]);
        let (tags, ty, _) = parse_l2_tail(&f, 12);
        assert_eq!(tags.len(), 2);
        assert_eq!(ty, Some(ethertype::VLAN));
    }

    #[test]
    fn truncated_tag_is_left_alone() {
        // A TPID with only two more bytes: not enough for TCI + EtherType.
        let f = frame(&[0x81, 0x00, 0x00, 0x05]);
        let (tags, ty, _) = parse_l2_tail(&f, 12);
        assert!(tags.is_empty());
        assert_eq!(ty, Some(ethertype::VLAN));
    }

    #[test]
    fn llc_snap() {
        let f = frame(&[0x00, 0x40, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00, 0x45]);
        let (_, ty, off) = parse_l2_tail(&f, 12);
        assert_eq!(ty, Some(ethertype::IPV4));
        assert_eq!(off, 22);
        // Plain 802.2 LLC (e.g. STP) has no EtherType.
        let f = frame(&[0x00, 0x26, 0x42, 0x42, 0x03, 0, 0, 0, 0, 0]);
        assert_eq!(parse_l2_tail(&f, 12).1, None);
        // Truncated SNAP.
        let f = frame(&[0x00, 0x26, 0xaa, 0xaa]);
        assert_eq!(parse_l2_tail(&f, 12).1, None);
    }

    /// A bare header is a frame; the addresses write in their places; a
    /// tag's priority is its top three bits; SNAP with no EtherType after
    /// it still ends the link header.
    #[test]
    fn fields_tags_and_snap_without_an_ethertype() {
        let mut f = frame(&[0x08, 0x00]);
        let mut e = EthernetFrame::new_checked(&mut f[..]).unwrap();
        e.set_dst([1, 2, 3, 4, 5, 6]);
        e.set_src([7, 8, 9, 10, 11, 12]);
        assert_eq!(
            (e.dst(), e.src()),
            ([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12])
        );
        assert_eq!(f[..12], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        let f = frame(&[0x81, 0x00, 0xb0, 0x07, 0x08, 0x00]);
        let (tags, _, _) = parse_l2_tail(&f, 12);
        assert!(!tags.is_empty());
        assert_eq!((tags.as_slice()[0].pcp(), tags.as_slice()[0].vid()), (5, 7));
        let f = frame(&[0x00, 0x40, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x00, 0x26, 0x45]);
        assert_eq!(parse_l2_tail(&f, 12), (VlanTags::default(), None, 22));
    }
}
