//! Connection entries as `ovs-appctl dpctl/dump-conntrack -s` and
//! `conntrack -L` show them.

use core::fmt;

use ctrack_wire::ip_proto;

use ctrack_table::Guard;

use crate::conn::{Conn, Counters};
use crate::key::{Addr, Dir};
use crate::key::{ConnKey, Zone};
use crate::time::Time;

/// A snapshot of one connection, for display and serialisation.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Entry {
    /// IP protocol number.
    pub proto: u8,
    /// Original-direction tuple.
    pub orig: EntryTuple,
    /// Reply-direction tuple.
    pub reply: EntryTuple,
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
    /// The gateway watching it (`ftp`, `tftp`), for a control connection.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub helper: Option<&'static str>,
    /// For a connection a gateway expected: its control connection's
    /// original tuple.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub master: Option<String>,
}

/// One direction of an [`Entry`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EntryTuple {
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

impl EntryTuple {
    fn new(key: &ConnKey, c: Counters) -> EntryTuple {
        let icmp = key.is_icmp();
        EntryTuple {
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
    /// The entry for `conn`, expiring at `expires` (ms), as of `now`.
    pub(crate) fn of<A: Addr>(conn: &Conn<A>, expires: u64, now: Time, guard: &Guard) -> Entry {
        let (zone, proto) = (conn.zone(), conn.proto());
        let orig = conn.orig().to_key(zone, proto);
        let reply = conn.reply(guard).to_key(zone, proto);
        let ext = conn.ext(guard);
        Entry {
            proto,
            orig: EntryTuple::new(&orig, conn.counters(Dir::Orig)),
            reply: EntryTuple::new(&reply, conn.counters(Dir::Reply)),
            zone,
            mark: conn.mark(),
            label: conn.label(guard),
            state: conn.proto_state().state_name(),
            timeout: Time::from_millis(expires).millis_since(now) / 1000,
            helper: ext.and_then(|e| e.helper.as_ref()).map(|h| h.alg.name()),
            master: ext
                .and_then(|e| e.master)
                .map(|m| m.to_key(zone, proto).to_string()),
        }
    }
}

impl fmt::Display for EntryTuple {
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
        write!(f, ",protoinfo=(state={})", self.state)?;
        if let Some(h) = self.helper {
            write!(f, ",helper={h}")?;
        }
        if let Some(m) = &self.master {
            write!(f, ",master=({m})")?;
        }
        Ok(())
    }
}
