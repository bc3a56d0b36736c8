//! Link types as libpcap reads them, and what is taken off a record to get
//! the frame the tracker reads: a BSD loopback header, a frame check
//! sequence.

use ctrack_wire::LinkType;
use pcap_file::DataLink;

/// How a record's bytes become the frame handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Framing {
    /// The link layer.
    pub(super) link: Link,
    /// Bytes of frame check sequence at the end of every packet.
    pub(super) fcs: u32,
}

/// A link layer the reader understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Link {
    /// Handed on as it is.
    Plain(LinkType),
    /// BSD loopback (`DLT_NULL`): a 4-byte address family in the byte order
    /// of the host that captured.
    Null,
    /// OpenBSD loopback (`DLT_LOOP`): a 4-byte address family in network
    /// byte order.
    Loop,
}

/// `AF_INET`, everywhere.
const AF_INET: u32 = 2;
/// `AF_INET6` as NetBSD, OpenBSD and BSD/OS (24), FreeBSD and DragonFly
/// (28) and macOS (30) number it: a loopback capture carries the number
/// of the system that made it.
const AF_INET6: [u32; 3] = [24, 28, 30];

/// The link layer of a link-type number (16 bits), if the tracker reads it.
pub(super) fn link_of(link_type: u32) -> Option<Link> {
    Some(match DataLink::from(link_type) {
        DataLink::ETHERNET => Link::Plain(LinkType::Ethernet),
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => Link::Plain(LinkType::RawIp),
        DataLink::LINUX_SLL => Link::Plain(LinkType::LinuxSll),
        DataLink::LINUX_SLL2 => Link::Plain(LinkType::LinuxSll2),
        DataLink::NULL => Link::Null,
        DataLink::LOOP => Link::Loop,
        _ => return None,
    })
}

/// The framing a pcap file header's link-type field declares: the link
/// type in its low 16 bits; with bit 26 set, the length of the frame check
/// sequence in bits 28 to 31, in 16-bit words (libpcap's `LT_LINKTYPE`,
/// `LT_FCS_LENGTH_PRESENT` and `LT_FCS_LENGTH`). Err: the link type, not
/// one the tracker reads.
pub(super) fn pcap_framing(field: u32) -> Result<Framing, u32> {
    let link_type = field & 0xffff;
    let fcs = if field & 0x0400_0000 != 0 {
        (field >> 28) * 2
    } else {
        0
    };
    match link_of(link_type) {
        Some(link) => Ok(Framing { link, fcs }),
        None => Err(link_type),
    }
}

/// The FCS length in bytes of a pcapng `if_fcslen` option. The format's
/// specification counts it in bits (32 for Ethernet's); some writers count
/// bytes. No FCS is shorter than a byte, so a value below 8 is bytes and a
/// multiple of 8 bits. None: neither.
pub(super) fn fcslen_option(v: u8) -> Option<u32> {
    let v = u32::from(v);
    match v {
        0..=7 => Some(v),
        _ if v.is_multiple_of(8) => Some(v / 8),
        _ => None,
    }
}

/// The FCS length in bytes of a pcapng `epb_flags` option (bits 5 to 8, in
/// bytes; 0 when unknown, and then the interface's applies).
pub(super) fn epb_flags_fcs(flags: u32) -> Option<u32> {
    match (flags >> 5) & 0xf {
        0 => None,
        n => Some(n),
    }
}

/// The frame in a record's packet data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Framed {
    /// Where it lies in the packet data.
    pub(super) start: usize,
    /// Where it ends.
    pub(super) end: usize,
    /// How it begins.
    pub(super) link: LinkType,
    /// Its length on the wire.
    pub(super) orig_len: u32,
}

impl Framing {
    /// Takes the frame check sequence and a loopback header off `data`, the
    /// captured bytes of a packet `orig_len` long on the wire.
    pub(super) fn frame(self, data: &[u8], orig_len: u32) -> Framed {
        // The FCS ends the packet on the wire: the captured bytes hold as
        // much of it as they hold past the packet's other bytes (none when
        // the snapshot cut the packet before it).
        let cap = data.len();
        let wire = orig_len.saturating_sub(self.fcs) as usize;
        let fcs_captured = cap.saturating_sub(wire).min(self.fcs as usize);
        let end = cap - fcs_captured;
        let orig_len = orig_len.saturating_sub(self.fcs);
        let big_endian = match self.link {
            Link::Plain(link) => {
                return Framed {
                    start: 0,
                    end,
                    link,
                    orig_len,
                };
            }
            Link::Null => false,
            Link::Loop => true,
        };
        let Some(h) = data[..end].first_chunk::<4>() else {
            // Cut inside its header: nothing of the packet to read (the
            // tracker sees a truncated link header).
            return Framed {
                start: end,
                end,
                link: LinkType::RawIp,
                orig_len: orig_len.saturating_sub(4),
            };
        };
        let family = if big_endian {
            u32::from_be_bytes(*h)
        } else {
            // Host byte order of a host that may not be the writer's: a
            // family has no bits in the upper half (libpcap and tcpdump
            // swap it when it does).
            let f = u32::from_le_bytes(*h);
            if f & 0xffff_0000 != 0 {
                f.swap_bytes()
            } else {
                f
            }
        };
        if family == AF_INET || AF_INET6.contains(&family) {
            Framed {
                start: 4,
                end,
                link: LinkType::RawIp,
                orig_len: orig_len.saturating_sub(4),
            }
        } else {
            // Another family: the header stays, and its first byte (a
            // family number's low byte below 64, or 0) is no IP version.
            Framed {
                start: 0,
                end,
                link: LinkType::RawIp,
                orig_len,
            }
        }
    }
}

/// The pcap link type a frame of `link` is written with.
pub(super) fn datalink_of(link: LinkType) -> DataLink {
    match link {
        LinkType::Ethernet => DataLink::ETHERNET,
        LinkType::RawIp => DataLink::RAW,
        LinkType::LinuxSll => DataLink::LINUX_SLL,
        LinkType::LinuxSll2 => DataLink::LINUX_SLL2,
    }
}
