//! Why a packet is invalid.

use core::fmt;

/// Why the tracker calls a packet invalid. Each reason has its own counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[repr(u8)]
pub enum InvalidReason {
    /// The link-layer header is cut short.
    LinkTruncated,
    /// Not an IP packet (ARP, MPLS, LLDP...).
    NotIp,
    /// IPv4 header cut short or with inconsistent lengths.
    BadIpv4Header,
    /// IPv6 header cut short, payload length past the frame, or a malformed
    /// extension header.
    BadIpv6Header,
    /// An IP fragment, and no reassembly in front of the tracker.
    Fragment,
    /// Bad IPv4 header checksum.
    BadIpChecksum,
    /// The transport header is cut short.
    L4Truncated,
    /// A transport length field is impossible (TCP data offset, UDP length,
    /// UDP-Lite coverage, SCTP chunk lengths).
    L4Malformed,
    /// Bad transport checksum.
    BadL4Checksum,
    /// Port zero, which no connection uses.
    ZeroPort,
    /// An ICMP type the tracker does not handle (router advertisements,
    /// neighbour discovery, address masks...).
    IcmpUnsupportedType,
    /// A non-zero code on an ICMP query.
    IcmpBadCode,
    /// An ICMP error whose quoted packet is cut short, is a fragment, is
    /// itself an ICMP error, or was not sent to the error's recipient.
    IcmpBadQuote,
    /// An ICMP error quoting a packet of no tracked connection.
    RelatedNotFound,
    /// A TCP flag combination no stack sends.
    TcpBadFlags,
    /// A packet that may not open a connection, and no connection exists: a
    /// TCP SYN-ACK, any TCP segment but a SYN without loose pickup, an ICMP
    /// reply.
    CannotOpen,
    /// A TCP segment outside the window or with an impossible ACK.
    TcpOutOfWindow,
    /// A segment of a translated FTP control connection that ends inside
    /// an announcement (PORT, EPRT, 227, 229): the announcement cannot be
    /// rewritten across segments, so the segment is refused until it is
    /// sent again whole (Linux drops such segments).
    AlgPartialCommand,
    /// A segment of a translated FTP control connection announcing a data
    /// connection that cannot be translated: no expectation could be made
    /// (the table of expectations full, no free port near the announced
    /// one) or the rewritten datagram would pass 65535 bytes. Sent on, the
    /// announcement would give away the untranslated address (Linux drops
    /// such segments).
    AlgCannotTranslate,
}

impl InvalidReason {
    /// Every reason, in counter order.
    pub const ALL: [InvalidReason; 19] = [
        InvalidReason::LinkTruncated,
        InvalidReason::NotIp,
        InvalidReason::BadIpv4Header,
        InvalidReason::BadIpv6Header,
        InvalidReason::Fragment,
        InvalidReason::BadIpChecksum,
        InvalidReason::L4Truncated,
        InvalidReason::L4Malformed,
        InvalidReason::BadL4Checksum,
        InvalidReason::ZeroPort,
        InvalidReason::IcmpUnsupportedType,
        InvalidReason::IcmpBadCode,
        InvalidReason::IcmpBadQuote,
        InvalidReason::RelatedNotFound,
        InvalidReason::TcpBadFlags,
        InvalidReason::CannotOpen,
        InvalidReason::TcpOutOfWindow,
        InvalidReason::AlgPartialCommand,
        InvalidReason::AlgCannotTranslate,
    ];

    /// A short stable name (counter names, JSON).
    pub fn name(self) -> &'static str {
        match self {
            InvalidReason::LinkTruncated => "link_truncated",
            InvalidReason::NotIp => "not_ip",
            InvalidReason::BadIpv4Header => "bad_ipv4_header",
            InvalidReason::BadIpv6Header => "bad_ipv6_header",
            InvalidReason::Fragment => "fragment",
            InvalidReason::BadIpChecksum => "bad_ip_checksum",
            InvalidReason::L4Truncated => "l4_truncated",
            InvalidReason::L4Malformed => "l4_malformed",
            InvalidReason::BadL4Checksum => "bad_l4_checksum",
            InvalidReason::ZeroPort => "zero_port",
            InvalidReason::IcmpUnsupportedType => "icmp_unsupported_type",
            InvalidReason::IcmpBadCode => "icmp_bad_code",
            InvalidReason::IcmpBadQuote => "icmp_bad_quote",
            InvalidReason::RelatedNotFound => "related_not_found",
            InvalidReason::TcpBadFlags => "tcp_bad_flags",
            InvalidReason::CannotOpen => "cannot_open",
            InvalidReason::TcpOutOfWindow => "tcp_out_of_window",
            InvalidReason::AlgPartialCommand => "alg_partial_command",
            InvalidReason::AlgCannotTranslate => "alg_cannot_translate",
        }
    }
}

impl fmt::Display for InvalidReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
