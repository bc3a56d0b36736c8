//! Connection keys: (zone, L3 addresses, L4 ports or ICMP id/type/code,
//! protocol), and the keyed hash that finds a connection from either
//! direction.

use core::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ctrack_wire::{IpVersion, ip_proto};

/// The zone a connection lives in. Zones are separate tables: the same
/// addresses and ports in two zones are two connections.
pub type Zone = u16;

/// IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Family {
    /// IPv4.
    #[default]
    V4,
    /// IPv6.
    V6,
}

impl From<IpVersion> for Family {
    fn from(v: IpVersion) -> Family {
        match v {
            IpVersion::V4 => Family::V4,
            IpVersion::V6 => Family::V6,
        }
    }
}

/// One side of a connection.
///
/// The address is held as a 128-bit number: an IPv6 address, or an IPv4
/// address in the low 32 bits. For TCP, UDP, UDP-Lite and SCTP `port` is the
/// port; for ICMP and ICMPv6 queries it is the identifier and `icmp_type` /
/// `icmp_code` are set as Open vSwitch sets them (the source side holds the
/// packet's type, the destination side the type of the matching reply, so
/// that reversing the key gives the key of the reply). Other protocols use
/// the address alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Endpoint {
    /// Address (see the type's documentation).
    pub addr: u128,
    /// Port, or ICMP identifier.
    pub port: u16,
    /// ICMP type (0 for other protocols).
    pub icmp_type: u8,
    /// ICMP code (0 for other protocols).
    pub icmp_code: u8,
}

impl Endpoint {
    /// An endpoint with an IPv4 address and a port.
    pub fn v4(addr: Ipv4Addr, port: u16) -> Endpoint {
        Endpoint {
            addr: u128::from(u32::from(addr)),
            port,
            ..Endpoint::default()
        }
    }

    /// An endpoint with an IPv6 address and a port.
    pub fn v6(addr: Ipv6Addr, port: u16) -> Endpoint {
        Endpoint {
            addr: u128::from(addr),
            port,
            ..Endpoint::default()
        }
    }

    /// The address as a standard-library address of `family`.
    pub fn ip(&self, family: Family) -> IpAddr {
        match family {
            Family::V4 => IpAddr::V4(Ipv4Addr::from(self.addr as u32)),
            Family::V6 => IpAddr::V6(Ipv6Addr::from(self.addr)),
        }
    }

    /// The address from its wire bytes.
    pub fn addr_from_v4(bytes: [u8; 4]) -> u128 {
        u128::from(u32::from_be_bytes(bytes))
    }

    /// The address from its wire bytes.
    pub fn addr_from_v6(bytes: [u8; 16]) -> u128 {
        u128::from_be_bytes(bytes)
    }
}

/// The key of one direction of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConnKey {
    /// Sender side.
    pub src: Endpoint,
    /// Receiver side.
    pub dst: Endpoint,
    /// Zone.
    pub zone: Zone,
    /// IP protocol number.
    pub proto: u8,
    /// Address family.
    pub family: Family,
}

impl ConnKey {
    /// The key of the other direction.
    #[inline]
    pub fn reverse(&self) -> ConnKey {
        ConnKey {
            src: self.dst,
            dst: self.src,
            ..*self
        }
    }

    /// True for ICMP and ICMPv6 keys, whose L4 part is an id and types.
    pub fn is_icmp(&self) -> bool {
        matches!(
            (self.family, self.proto),
            (Family::V4, ip_proto::ICMP) | (Family::V6, ip_proto::ICMPV6)
        )
    }

    /// Source address.
    pub fn src_ip(&self) -> IpAddr {
        self.src.ip(self.family)
    }

    /// Destination address.
    pub fn dst_ip(&self) -> IpAddr {
        self.dst.ip(self.family)
    }
}

impl fmt::Display for ConnKey {
    /// `src=10.0.0.1,dst=10.0.0.2,sport=1,dport=2`, or
    /// `...,id=7,type=8,code=0` for ICMP: the tuple format of
    /// `ovs-appctl dpctl/dump-conntrack`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "src={},dst={}", self.src_ip(), self.dst_ip())?;
        if self.is_icmp() {
            write!(
                f,
                ",id={},type={},code={}",
                self.src.port, self.src.icmp_type, self.src.icmp_code
            )
        } else {
            write!(f, ",sport={},dport={}", self.src.port, self.dst.port)
        }
    }
}
