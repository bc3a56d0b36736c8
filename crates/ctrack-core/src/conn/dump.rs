//! Connection entries as `ovs-appctl dpctl/dump-conntrack -s` and
//! `conntrack -L` show them.

use core::fmt;

use ctrack_table::Guard;
use ctrack_wire::ip_proto;

use crate::conn::{Conn, Counters, Ext};
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
    /// The same tuple as a tuple (no counters), for a caller that judges
    /// the connection by its control connection (a firewall after a policy
    /// change).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub master_tuple: Option<EntryTuple>,
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
            helper: ext.and_then(Ext::helper).map(|h| h.alg.name()),
            master: ext
                .and_then(Ext::master)
                .map(|m| m.to_key(zone, proto).to_string()),
            master_tuple: ext
                .and_then(Ext::master)
                .map(|m| EntryTuple::new(&m.to_key(zone, proto), Counters::default())),
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

#[cfg(test)]
mod tests {
    use super::{Entry, EntryTuple};
    use crate::conn::Counters;
    use crate::key::{ConnKey, Endpoint, Family};
    use crate::time::Time;
    use crate::track::Tracker;
    use crate::verdict::Stats;
    use crate::{CtAction, LinkType};
    use ctrack_wire::build::{Frame, L4};
    use ctrack_wire::icmp::v4;
    use ctrack_wire::ip_proto;
    use ctrack_wire::tcp::flags::{ACK, PSH, SYN};
    use std::net::{Ipv4Addr, Ipv6Addr};

    const C: [u8; 4] = [10, 0, 0, 1];
    const S: [u8; 4] = [10, 0, 0, 2];
    const NOW: Time = Time::from_secs(1000);

    /// Tracks `frames` in turn with `action`; the entry of the connection
    /// the last one belongs to, as of `at`.
    fn entry_after(frames: &[Frame], action: &str, at: Time) -> Entry {
        let t = Tracker::default();
        let action: CtAction = action.parse().unwrap();
        let mut last = None;
        for f in frames {
            let v = t.process(
                &f.build(),
                LinkType::Ethernet,
                &action,
                NOW,
                &mut Stats::default(),
            );
            last = v.conn;
        }
        t.conn(last.expect("a connection"), at).unwrap().entry
    }

    fn handshake(sport: u16, dport: u16) -> Vec<Frame> {
        vec![
            Frame::v4(C, S, L4::tcp_seg(sport, dport, SYN, 100, 0, 65535, b"")),
            Frame::v4(
                S,
                C,
                L4::tcp_seg(dport, sport, SYN | ACK, 500, 101, 65535, b""),
            ),
            Frame::v4(C, S, L4::tcp_seg(sport, dport, ACK, 101, 501, 65535, b"")),
        ]
    }

    #[test]
    fn a_tcp_entry_prints_like_dpctl_dump_conntrack() {
        let e = entry_after(&handshake(40000, 80), "commit", NOW);
        assert_eq!(
            e.to_string(),
            "tcp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=80,packets=2,bytes=80),\
             reply=(src=10.0.0.2,dst=10.0.0.1,sport=80,dport=40000,packets=1,bytes=40),\
             timeout=86400,protoinfo=(state=ESTABLISHED)"
        );
    }

    #[test]
    fn the_timeout_counts_down_in_whole_seconds() {
        let later = Time::from_millis(NOW.as_millis() + 86_390_500);
        let e = entry_after(&handshake(40000, 80), "commit", later);
        assert_eq!(e.timeout, 9);
        assert!(e.to_string().contains(",timeout=9,"), "{e}");
    }

    #[test]
    fn an_icmp_entry_prints_id_type_and_code() {
        let ping = |from, to, ty| Frame::v4(from, to, L4::icmp_query(ty, 77, 1));
        let frames = [ping(C, S, v4::ECHO_REQUEST), ping(S, C, v4::ECHO_REPLY)];
        let e = entry_after(&frames, "commit", NOW);
        // Open vSwitch prints `protoinfo` for TCP alone; ctrack for every
        // protocol (on purpose, see `Display for Entry`).
        assert_eq!(
            e.to_string(),
            "icmp,orig=(src=10.0.0.1,dst=10.0.0.2,id=77,type=8,code=0,packets=1,bytes=39),\
             reply=(src=10.0.0.2,dst=10.0.0.1,id=77,type=0,code=0,packets=1,bytes=39),\
             timeout=30,protoinfo=(state=REPLY)"
        );
        assert_eq!(e.orig.icmp, Some((77, v4::ECHO_REQUEST, 0)));
        assert_eq!((e.orig.sport, e.orig.dport), (None, None));
    }

    #[test]
    fn zone_mark_and_labels_print_after_the_tuples() {
        let e = entry_after(
            &handshake(40000, 80),
            "commit,zone=5,mark=0x42,label=0x1f",
            NOW,
        );
        assert_eq!(
            e.to_string(),
            "tcp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=80,packets=2,bytes=80),\
             reply=(src=10.0.0.2,dst=10.0.0.1,sport=80,dport=40000,packets=1,bytes=40),\
             zone=5,timeout=86400,mark=66,labels=0x1f,protoinfo=(state=ESTABLISHED)"
        );
    }

    #[test]
    fn a_gateway_s_control_connection_names_its_helper() {
        let mut frames = handshake(40000, 21);
        frames.push(Frame::v4(
            C,
            S,
            L4::tcp_seg(
                40000,
                21,
                PSH | ACK,
                101,
                501,
                65535,
                b"PORT 10,0,0,1,156,65\r\n",
            ),
        ));
        let e = entry_after(&frames, "commit,alg=ftp", NOW);
        assert_eq!(e.helper, Some("ftp"));
        assert_eq!(
            e.to_string(),
            "tcp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=21,packets=3,bytes=142),\
             reply=(src=10.0.0.2,dst=10.0.0.1,sport=21,dport=40000,packets=1,bytes=40),\
             timeout=86400,protoinfo=(state=ESTABLISHED),helper=ftp"
        );
    }

    #[test]
    fn an_expected_connection_names_its_master() {
        let t = Tracker::default();
        let commit: CtAction = "commit".parse().unwrap();
        let ftp: CtAction = "commit,alg=ftp".parse().unwrap();
        let mut frames = handshake(40000, 21);
        frames.push(Frame::v4(
            C,
            S,
            L4::tcp_seg(
                40000,
                21,
                PSH | ACK,
                101,
                501,
                65535,
                b"PORT 10,0,0,1,156,65\r\n",
            ),
        ));
        for (i, f) in frames.iter().enumerate() {
            let a = if i == 0 { &ftp } else { &commit };
            t.process(
                &f.build(),
                LinkType::Ethernet,
                a,
                NOW,
                &mut Stats::default(),
            );
        }
        let data = Frame::v4(S, C, L4::tcp_seg(20, 40001, SYN, 9000, 0, 65535, b""));
        let v = t.process(
            &data.build(),
            LinkType::Ethernet,
            &commit,
            NOW,
            &mut Stats::default(),
        );
        let e = t.conn(v.conn.unwrap(), NOW).unwrap().entry;
        assert_eq!(
            e.to_string(),
            "tcp,orig=(src=10.0.0.2,dst=10.0.0.1,sport=20,dport=40001,packets=1,bytes=40),\
             reply=(src=10.0.0.1,dst=10.0.0.2,sport=40001,dport=20),\
             timeout=30,protoinfo=(state=SYN_SENT),\
             master=(src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=21)"
        );
        let m = e.master_tuple.expect("the master's tuple");
        assert_eq!(
            (m.src, m.dst, m.sport, m.dport),
            (C.into(), S.into(), Some(40000), Some(21))
        );
    }

    fn tuple(key: &ConnKey, c: Counters) -> EntryTuple {
        EntryTuple::new(key, c)
    }

    #[test]
    fn counters_print_only_when_something_was_counted() {
        let key = ConnKey {
            src: Endpoint::v6("fd00::1".parse::<Ipv6Addr>().unwrap(), 5000),
            dst: Endpoint::v6("fd00::2".parse::<Ipv6Addr>().unwrap(), 53),
            zone: 0,
            proto: ip_proto::UDP,
            family: Family::V6,
        };
        let none = tuple(&key, Counters::default());
        assert_eq!(
            none.to_string(),
            "src=fd00::1,dst=fd00::2,sport=5000,dport=53"
        );
        let some = tuple(
            &key,
            Counters {
                packets: 0,
                bytes: 7,
            },
        );
        assert_eq!(
            some.to_string(),
            "src=fd00::1,dst=fd00::2,sport=5000,dport=53,packets=0,bytes=7"
        );
    }

    #[test]
    fn a_protocol_without_a_name_prints_its_number() {
        let key = ConnKey {
            src: Endpoint::v4(Ipv4Addr::from(C), 0),
            dst: Endpoint::v4(Ipv4Addr::from(S), 0),
            zone: 0,
            proto: 253,
            family: Family::V4,
        };
        let e = Entry {
            proto: 253,
            orig: tuple(&key, Counters::default()),
            reply: tuple(&key.reverse(), Counters::default()),
            zone: 0,
            mark: 0,
            label: 0,
            state: "FIRST",
            timeout: 60,
            helper: None,
            master: None,
            master_tuple: None,
        };
        assert_eq!(
            e.to_string(),
            "253,orig=(src=10.0.0.1,dst=10.0.0.2,sport=0,dport=0),\
             reply=(src=10.0.0.2,dst=10.0.0.1,sport=0,dport=0),\
             timeout=60,protoinfo=(state=FIRST)"
        );
    }
}
