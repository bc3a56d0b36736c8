//! Packet views and parsing for ctrack.
//!
//! Each protocol has a typed view over a borrowed buffer
//! (`Ipv4Packet<T: AsRef<[u8]>>` and so on): once `new_checked` succeeds no
//! accessor panics, and setters live in a separate `impl` for
//! `T: AsMut<[u8]>`. [`frame::parse_frame`] walks a whole frame once and says
//! where each layer lies; the connection tracker reads the headers it needs
//! through the views. Nothing here allocates, and no input can make it panic
//! or read out of bounds: the crate forbids `unsafe`, and every length comes
//! from a checked slice.
//!
//! Written by hand rather than with a general packet crate: the tracker must
//! classify malformed input exactly as Open vSwitch does (which lengths are
//! padding, which headers are skipped, what counts as a fragment), and this
//! is the hottest code in the datapath. `benches/parse.rs` compares it with
//! `etherparse` on the same frames.
//!
//! Besides the views: [`checksum`] (full and incremental Internet checksums,
//! SCTP's CRC32c), [`SeqNum`] (TCP sequence numbers, compared modulo 2^32),
//! [`build`] (frames for tests and benchmarks), and big-endian field access
//! ([`be16`] and [`be32`] where the bounds are known, [`read_be16`],
//! [`read_be32`], [`write_be16`] and [`write_be32`] where they are not).
//!
//! # Example
//!
//! Build a VLAN-tagged TCP SYN, find its layers, read its TCP header:
//!
//! ```
//! use ctrack_wire::build::{Frame as Builder, L4};
//! use ctrack_wire::tcp::{TcpPacket, flags};
//! use ctrack_wire::{Fragment, IpVersion, LinkType, SeqNum, ip_proto, parse_frame};
//!
//! let mut syn = L4::tcp(40000, 80, flags::SYN);
//! if let L4::Tcp { seq, .. } = &mut syn {
//!     *seq = u32::MAX; // the SYN takes the last number before the wrap
//! }
//! let bytes = Builder::v4([10, 0, 0, 1], [10, 0, 0, 2], syn)
//!     .vlan(0x8100, 42)
//!     .build();
//!
//! let frame = parse_frame(&bytes, LinkType::Ethernet);
//! assert_eq!(frame.vlans.as_slice()[0].vid(), 42);
//! assert_eq!(frame.l3, Some(14 + 4));
//! let ip = frame.ip.expect("an IPv4 frame");
//! assert_eq!(ip.version, IpVersion::V4);
//! assert_eq!(ip.proto, ip_proto::TCP);
//! assert_eq!(ip.frag, Fragment::No);
//! assert_eq!((ip.l4, ip.end), (18 + 20, bytes.len()));
//!
//! // The views read the layer's bytes, checked once by `new_checked`.
//! let tcp = TcpPacket::new_checked(&bytes[ip.l4..ip.end])?;
//! assert_eq!((tcp.src_port(), tcp.dst_port()), (40000, 80));
//! assert_eq!(tcp.flags(), flags::SYN);
//! // The SYN occupies one number: the peer's ACK will be 0.
//! assert_eq!(SeqNum(tcp.seq()) + 1, SeqNum(0));
//! # Ok::<(), ctrack_wire::Error>(())
//! ```
#![forbid(unsafe_code)]

pub mod build;
pub mod checksum;
pub mod describe;
pub mod ethernet;
pub mod frame;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod offload;
pub mod sctp;
pub mod seq;
pub mod tcp;
pub mod udp;

pub use frame::{Frame, IpLayer, IpVersion, LinkType, NotIp, parse_frame, plain_ipv4, plain_ipv6};
pub use ipv6::Fragment;
pub use seq::SeqNum;

/// Why a header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer ends before the header (or the part a length field
    /// promises) does.
    Truncated,
    /// A field has a value the protocol does not allow.
    Malformed,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated",
            Error::Malformed => "malformed",
        })
    }
}

impl std::error::Error for Error {}

/// Result of reading a header.
pub type Result<T> = core::result::Result<T, Error>;

/// IP protocol numbers.
pub mod ip_proto {
    /// IPv6 hop-by-hop options.
    pub const HOPOPTS: u8 = 0;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// IGMP.
    pub const IGMP: u8 = 2;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// DCCP.
    pub const DCCP: u8 = 33;
    /// IPv6 routing header.
    pub const ROUTING: u8 = 43;
    /// IPv6 fragment header.
    pub const FRAGMENT: u8 = 44;
    /// GRE.
    pub const GRE: u8 = 47;
    /// ESP.
    pub const ESP: u8 = 50;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 "no next header".
    pub const NONE: u8 = 59;
    /// IPv6 destination options.
    pub const DSTOPTS: u8 = 60;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// UDP-Lite.
    pub const UDPLITE: u8 = 136;

    /// A short name for protocols with one, as conntrack tools print them.
    pub fn name(proto: u8) -> Option<&'static str> {
        Some(match proto {
            ICMP => "icmp",
            IGMP => "igmp",
            TCP => "tcp",
            UDP => "udp",
            DCCP => "dccp",
            GRE => "gre",
            ESP => "esp",
            AH => "ah",
            ICMPV6 => "icmpv6",
            SCTP => "sctp",
            UDPLITE => "udplite",
            _ => return None,
        })
    }
}

/// Reads the big-endian `u16` at byte `at` of `data`.
///
/// For offsets already known to be in bounds (a view after `new_checked`,
/// a fixed header whose length was checked); use [`read_be16`] otherwise.
///
/// # Panics
///
/// If `data` is shorter than `at + 2`.
#[inline]
pub fn be16(data: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([data[at], data[at + 1]])
}

/// Reads the big-endian `u32` at byte `at` of `data`.
///
/// The counterpart of [`be16`]; [`read_be32`] is the checked one.
///
/// # Panics
///
/// If `data` is shorter than `at + 4`.
#[inline]
pub fn be32(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
}

/// Reads the big-endian `u16` at byte `at` of `data`, or `None` if the two
/// bytes are not all inside `data`. Never panics, whatever `at` is.
#[inline]
pub fn read_be16(data: &[u8], at: usize) -> Option<u16> {
    data.get(at..)?
        .first_chunk()
        .map(|b| u16::from_be_bytes(*b))
}

/// Reads the big-endian `u32` at byte `at` of `data`, or `None` if the four
/// bytes are not all inside `data`. Never panics, whatever `at` is.
#[inline]
pub fn read_be32(data: &[u8], at: usize) -> Option<u32> {
    data.get(at..)?
        .first_chunk()
        .map(|b| u32::from_be_bytes(*b))
}

/// Writes `value` big-endian at byte `at` of `data`. Returns `false`, and
/// writes nothing, if the two bytes are not all inside `data`.
#[inline]
pub fn write_be16(data: &mut [u8], at: usize, value: u16) -> bool {
    match data.get_mut(at..).and_then(|d| d.first_chunk_mut::<2>()) {
        Some(b) => {
            *b = value.to_be_bytes();
            true
        }
        None => false,
    }
}

/// Writes `value` big-endian at byte `at` of `data`. Returns `false`, and
/// writes nothing, if the four bytes are not all inside `data`.
#[inline]
pub fn write_be32(data: &mut [u8], at: usize, value: u32) -> bool {
    match data.get_mut(at..).and_then(|d| d.first_chunk_mut::<4>()) {
        Some(b) => {
            *b = value.to_be_bytes();
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_endian_reads_and_writes() {
        let mut d = [0x12, 0x34, 0x56, 0x78, 0x9a];
        assert_eq!(be16(&d, 0), 0x1234);
        assert_eq!(be16(&d, 3), 0x789a);
        assert_eq!(be32(&d, 1), 0x3456_789a);
        assert_eq!(read_be16(&d, 3), Some(0x789a));
        assert_eq!(read_be32(&d, 1), Some(0x3456_789a));
        for at in [4, 5, 6, usize::MAX] {
            assert_eq!(read_be16(&d, at), None, "{at}");
        }
        for at in [2, 5, usize::MAX - 1] {
            assert_eq!(read_be32(&d, at), None, "{at}");
        }
        assert!(write_be16(&mut d, 3, 0xbeef));
        assert_eq!(d, [0x12, 0x34, 0x56, 0xbe, 0xef]);
        assert!(write_be32(&mut d, 0, 0xdead_0001));
        assert_eq!(d, [0xde, 0xad, 0x00, 0x01, 0xef]);
        // Out of bounds: nothing written.
        assert!(!write_be16(&mut d, 4, 0));
        assert!(!write_be32(&mut d, 2, 0));
        assert!(!write_be32(&mut d, usize::MAX, 0));
        assert_eq!(d, [0xde, 0xad, 0x00, 0x01, 0xef]);
    }

    #[test]
    #[should_panic]
    fn be16_panics_out_of_bounds() {
        be16(&[1, 2, 3], 2);
    }

    /// Protocols' names as conntrack tools print them; none for the rest.
    #[test]
    fn protocol_names_and_errors() {
        for (proto, name) in [
            (1, "icmp"),
            (2, "igmp"),
            (6, "tcp"),
            (17, "udp"),
            (33, "dccp"),
            (47, "gre"),
            (50, "esp"),
            (51, "ah"),
            (58, "icmpv6"),
            (132, "sctp"),
            (136, "udplite"),
        ] {
            assert_eq!(ip_proto::name(proto), Some(name), "{proto}");
        }
        assert_eq!(ip_proto::name(253), None);
        assert_eq!(Error::Truncated.to_string(), "truncated");
        assert_eq!(Error::Malformed.to_string(), "malformed");
    }
}
