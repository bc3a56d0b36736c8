//! Connection entries as `ovs-appctl dpctl/dump-conntrack -s` and
//! `conntrack -L` show them.

use core::fmt;

use ctrack_wire::ip_proto;

use crate::conn::{Conn, Counters};
use crate::key::{ConnKey, Zone};
use crate::time::Time;

/// A snapshot of one connection, for display and serialisation.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Entry {
    /// IP protocol number.
    pub proto: u8,
    /// Original-direction tuple.
    pub orig: Tuple,
    /// Reply-direction tuple.
    pub reply: Tuple,
    /// Zone.
    pub zone: Zone,
    /// Mark.
    pub mark: u32,
    /// Label.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser_u128_hex"))]
    pub label: u128,
    /// Protocol state name (`ESTABLISHED`, `BIDIR`...).
    pub state: &'static str,
    /// Seconds until expiry (0 if expired).
    pub timeout: u64,
    /// Commit time.
    pub created: Time,
}

/// One direction of an [`Entry`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Tuple {
    /// Source address.
    pub src: std::net::IpAddr,
    /// Destination address.
    pub dst: std::net::IpAddr,
    /// Source port (absent for ICMP and portless protocols).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub sport: Option<u16>,
    /// Destination port.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub dport: Option<u16>,
    /// ICMP identifier, type and code.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub icmp: Option<(u16, u8, u8)>,
    /// Packets and bytes.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    #[cfg_attr(feature = "serde", serde(skip))]
    key: ConnKey,
}

#[cfg(feature = "serde")]
fn ser_u128_hex<S: serde::Serializer>(v: &u128, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{v:#x}"))
}

impl Tuple {
    fn new(key: &ConnKey, c: Counters) -> Tuple {
        let icmp = key.is_icmp();
        Tuple {
            src: key.src_ip(),
            dst: key.dst_ip(),
            sport: (!icmp).then_some(key.src.port),
            dport: (!icmp).then_some(key.dst.port),
            icmp: icmp.then_some((key.src.port, key.src.icmp_type, key.src.icmp_code)),
            packets: c.packets,
            bytes: c.bytes,
            key: *key,
        }
    }
}

impl Entry {
    /// The entry for `conn` as of `now`.
    pub fn new(conn: &Conn, now: Time) -> Entry {
        let k = &conn.keys[0];
        Entry {
            proto: k.proto,
            orig: Tuple::new(&conn.keys[0], conn.counters[0]),
            reply: Tuple::new(&conn.keys[1], conn.counters[1]),
            zone: k.zone,
            mark: conn.mark,
            label: conn.label,
            state: conn.proto.state_name(),
            timeout: conn.expiration.millis_since(now) / 1000,
            created: conn.created,
        }
    }
}

impl fmt::Display for Tuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.key)?;
        if self.packets != 0 || self.bytes != 0 {
            write!(f, ",packets={},bytes={}", self.packets, self.bytes)?;
        }
        Ok(())
    }
}

impl fmt::Display for Entry {
    /// `tcp,orig=(src=...,packets=3,bytes=180),reply=(...),zone=5,
    /// timeout=86399,mark=1,labels=0x2,protoinfo=(state=ESTABLISHED)`:
    /// the layout of `ovs-appctl dpctl/dump-conntrack -s` (without its
    /// wall-clock start time). Protocol state is printed for every protocol,
    /// not only TCP.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match ip_proto::name(self.proto) {
            Some(n) => f.write_str(n)?,
            None => write!(f, "{}", self.proto)?,
        }
        write!(f, ",orig=({}),reply=({})", self.orig, self.reply)?;
        if self.zone != 0 {
            write!(f, ",zone={}", self.zone)?;
        }
        write!(f, ",timeout={}", self.timeout)?;
        if self.mark != 0 {
            write!(f, ",mark={}", self.mark)?;
        }
        if self.label != 0 {
            write!(f, ",labels={:#x}", self.label)?;
        }
        write!(f, ",protoinfo=(state={})", self.state)
    }
}
