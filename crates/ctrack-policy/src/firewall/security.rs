//! Port security: OVN's `Logical_Switch_Port.port_security`, the
//! addresses a port may send from and receive at, checked on every frame
//! before anything else (OVN's `ls_in_check_port_sec` and
//! `ls_out_check_port_sec`, whose flows ovn-controller builds in
//! `controller/lflow.c`). Each entry is a MAC and the IP addresses the
//! port may use with it; the entries of a port add up, but for one
//! exception on the way out (see [`Secured::egress`]).
//!
//! From the port (its entries whose MAC is the frame's source):
//! - IPv4 from a listed source (or, for an entry with IPv4 addresses, a
//!   DHCP client's broadcast: `0.0.0.0:68` to `255.255.255.255:67`);
//! - IPv6 from a listed source or the link-local address of the MAC, or
//!   from `::` to `ff02::/16` a duplicate address detection (a neighbour
//!   solicitation) or an MLD report; then neighbour discovery's own check:
//!   a solicitation's source link-layer option is absent or the MAC, an
//!   advertisement's target link-layer option is absent or the MAC and its
//!   target a listed address or the link-local one;
//! - ARP whose sender is the MAC and, where IPv4 addresses are listed,
//!   whose sender address is one of them (none for an entry that lists
//!   only IPv6 addresses);
//! - anything, and any other EtherType, where the entry lists no address;
//!   IPv4 where it lists only IPv6 addresses, IPv6 where only IPv4, and
//!   other EtherTypes where it lists any, are dropped.
//!
//! To the port (unicast frames to one of its entries' MACs): IPv4 to a
//! listed address, the broadcast address of a listed address given with a
//! prefix, `255.255.255.255` or `224.0.0.0/4`; IPv6 to a listed address,
//! the MAC's link-local one or `ff00::/8`; anything else where the
//! entries of that MAC list no address.
//!
//! Written here rather than compiled into ACLs: the checks read fields the
//! classifier's key does not hold (neighbour discovery's options), and
//! must hold for every packet, a session's too, where the ACLs are not
//! asked.

use std::net::IpAddr;

use ctrack_wire::{Fragment, Frame, IpVersion, ip_proto};

use crate::model::PortSecurity;

/// EtherTypes.
const IPV4: u16 = 0x0800;
const IPV6: u16 = 0x86dd;
const ARP: u16 = 0x0806;

/// ICMPv6 types: MLDv1 report, MLDv2 report, neighbour solicitation and
/// advertisement.
const MLD1_REPORT: u8 = 131;
const MLD2_REPORT: u8 = 143;
const NS: u8 = 135;
const NA: u8 = 136;

/// A network: `addr & mask == net`.
#[derive(Debug, Clone, Copy)]
struct Net<T> {
    net: T,
    mask: T,
}

/// One entry, compiled.
#[derive(Debug)]
struct Entry {
    mac: [u8; 6],
    /// The MAC's IPv6 link-local address (EUI-64).
    lla: u128,
    v4: Vec<Net<u32>>,
    /// Broadcast addresses of IPv4 entries given with a prefix and host
    /// bits: destinations only.
    bcast4: Vec<u32>,
    v6: Vec<Net<u128>>,
}

impl Entry {
    fn any_ip(&self) -> bool {
        !self.v4.is_empty() || !self.v6.is_empty()
    }

    fn has4(&self, a: u32) -> bool {
        self.v4.iter().any(|n| a & n.mask == n.net)
    }

    fn has6(&self, a: u128) -> bool {
        self.v6.iter().any(|n| a & n.mask == n.net)
    }

    /// An IPv4 destination the entry's port may receive.
    fn to4(&self, d: u32) -> bool {
        self.has4(d) || self.bcast4.contains(&d) || d == u32::MAX || d >> 28 == 0xe
    }

    /// Whether the entry is of `mac`.
    fn is(&self, mac: &[u8]) -> bool {
        self.mac[..] == *mac
    }
}

/// A port's port security, compiled.
#[derive(Debug)]
pub(super) struct Secured {
    /// `enabled = false`: nothing from or to the port.
    disabled: bool,
    entries: Vec<Entry>,
    /// The address checks by MAC, the entries of each MAC together: what
    /// a plain IPv4 or IPv6 frame needs ([`Secured::ingress4`],
    /// [`Side::sends6`]), found by one comparison a MAC.
    by_mac: Vec<MacChecks>,
}

/// The address checks of the entries of one MAC.
#[derive(Debug)]
pub(super) struct MacChecks {
    /// The MAC in a word (`mac_word`).
    mac: u64,
    /// An entry lists no address: anything from the MAC.
    open_from: bool,
    /// No entry lists an address: anything to the MAC.
    open_to: bool,
    /// Some entry lists IPv4 addresses: their networks, and the
    /// destinations they add.
    has_v4: bool,
    nets: Vec<Net<u32>>,
    bcast: Vec<u32>,
    /// Some entry lists IPv6 addresses: their networks, beside the MAC's
    /// link-local address.
    has_v6: bool,
    nets6: Vec<Net<u128>>,
    lla: u128,
}

/// The address check of one side of a MAC pair, found once for the
/// frames that carry the pair (a burst's): no port security there, no
/// entry of the MAC, or the MAC's entries.
#[derive(Debug, Clone, Copy)]
pub(super) enum Side<'a> {
    Open,
    Closed,
    Mac(&'a MacChecks),
}

impl Side<'_> {
    /// Whether a plain IPv4 frame from address `a` passes (`dhcp`: it is
    /// a DHCP client's broadcast).
    #[inline]
    pub(super) fn sends4(self, a: u32, dhcp: impl Fn() -> bool) -> bool {
        match self {
            Side::Open => true,
            Side::Closed => false,
            Side::Mac(m) => {
                m.open_from || (m.has_v4 && (m.nets.iter().any(|n| a & n.mask == n.net) || dhcp()))
            }
        }
    }

    /// Whether a plain IPv4 frame to address `d` passes.
    #[inline]
    pub(super) fn takes4(self, d: u32) -> bool {
        match self {
            Side::Open => true,
            Side::Closed => false,
            Side::Mac(m) => {
                m.open_to
                    || (m.has_v4
                        && (m.nets.iter().any(|n| d & n.mask == n.net)
                            || m.bcast.contains(&d)
                            || d == u32::MAX
                            || d >> 28 == 0xe))
            }
        }
    }

    /// Whether a plain IPv6 frame (TCP, UDP or SCTP: neither neighbour
    /// discovery nor MLD, whose own rules [`Secured::ingress`] keeps)
    /// from address `a` passes.
    #[inline]
    pub(super) fn sends6(self, a: u128) -> bool {
        match self {
            Side::Open => true,
            Side::Closed => false,
            Side::Mac(m) => {
                m.open_from
                    || (m.has_v6 && (a == m.lla || m.nets6.iter().any(|n| a & n.mask == n.net)))
            }
        }
    }

    /// Whether a plain IPv6 frame to address `d` passes.
    #[inline]
    pub(super) fn takes6(self, d: u128) -> bool {
        match self {
            Side::Open => true,
            Side::Closed => false,
            Side::Mac(m) => {
                m.open_to
                    || (m.has_v6
                        && (d == m.lla
                            || d >> 120 == 0xff
                            || m.nets6.iter().any(|n| d & n.mask == n.net)))
            }
        }
    }
}

/// A MAC's six bytes in a word, for comparing.
#[inline]
fn mac_word(m: &[u8]) -> u64 {
    match m.first_chunk::<6>() {
        Some(&[a, b, c, d, e, f]) => u64::from_be_bytes([0, 0, a, b, c, d, e, f]),
        None => u64::MAX,
    }
}

/// The mask of a prefix of `len` bits of a `bits`-bit address.
fn mask(len: u8, bits: u32) -> u128 {
    match u32::from(len) {
        0 => 0,
        n if n >= bits => u128::MAX >> (128 - bits),
        n => (u128::MAX >> (128 - bits)) & !((1u128 << (bits - n)) - 1),
    }
}

/// The link-local address of `mac` (fe80::/64 and its EUI-64).
fn link_local(mac: [u8; 6]) -> u128 {
    let [a, b, c, d, e, f] = mac;
    let iid = u64::from_be_bytes([a ^ 2, b, c, 0xff, 0xfe, d, e, f]);
    (0xfe80u128 << 112) | u128::from(iid)
}

fn read<const N: usize>(frame: &[u8], at: usize) -> Option<[u8; N]> {
    frame.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn v4_at(frame: &[u8], at: usize) -> Option<u32> {
    read::<4>(frame, at).map(u32::from_be_bytes)
}

fn v6_at(frame: &[u8], at: usize) -> Option<u128> {
    read::<16>(frame, at).map(u128::from_be_bytes)
}

/// What port security needs of a frame.
struct Seen {
    ethertype: Option<u16>,
    /// Source and destination, for an IP frame whose header is whole.
    v4: Option<(u32, u32)>,
    v6: Option<(u128, u128)>,
}

fn seen(frame: &[u8], layers: &Frame) -> Seen {
    let mut s = Seen {
        ethertype: layers.ethertype,
        v4: None,
        v6: None,
    };
    if let Ok(ip) = layers.ip {
        match ip.version {
            IpVersion::V4 => s.v4 = v4_at(frame, ip.l3 + 12).zip(v4_at(frame, ip.l3 + 16)),
            IpVersion::V6 => s.v6 = v6_at(frame, ip.l3 + 8).zip(v6_at(frame, ip.l3 + 24)),
        }
    }
    s
}

impl Secured {
    /// `entries` compiled; `None` for none (the port is not restricted).
    pub(super) fn new(entries: &[PortSecurity]) -> Option<Secured> {
        if entries.is_empty() {
            return None;
        }
        let entries = entries
            .iter()
            .map(|e| {
                let mut c = Entry {
                    mac: e.mac,
                    lla: link_local(e.mac),
                    v4: Vec::new(),
                    bcast4: Vec::new(),
                    v6: Vec::new(),
                };
                for &(addr, len) in &e.ips {
                    match addr {
                        IpAddr::V4(a) => {
                            let (a, m) = (u32::from(a), mask(len, 32) as u32);
                            if a & !m == 0 {
                                c.v4.push(Net { net: a, mask: m });
                            } else {
                                // A host of the network: that address
                                // alone, and the network's broadcast as a
                                // destination.
                                c.v4.push(Net {
                                    net: a,
                                    mask: u32::MAX,
                                });
                                c.bcast4.push(a | !m);
                            }
                        }
                        IpAddr::V6(a) => {
                            let (a, m) = (u128::from(a), mask(len, 128));
                            let m = if a & !m == 0 { m } else { u128::MAX };
                            c.v6.push(Net {
                                net: a & m,
                                mask: m,
                            });
                        }
                    }
                }
                c
            })
            .collect::<Vec<Entry>>();
        let mut by_mac: Vec<MacChecks> = Vec::new();
        for e in &entries {
            let mac = mac_word(&e.mac);
            let i = match by_mac.iter().position(|m| m.mac == mac) {
                Some(i) => i,
                None => {
                    by_mac.push(MacChecks {
                        mac,
                        open_from: false,
                        open_to: true,
                        has_v4: false,
                        nets: Vec::new(),
                        bcast: Vec::new(),
                        has_v6: false,
                        nets6: Vec::new(),
                        lla: e.lla,
                    });
                    by_mac.len() - 1
                }
            };
            let m = &mut by_mac[i];
            m.open_from |= !e.any_ip();
            m.open_to &= !e.any_ip();
            if !e.v4.is_empty() {
                m.has_v4 = true;
                m.nets.extend_from_slice(&e.v4);
                m.bcast.extend_from_slice(&e.bcast4);
            }
            if !e.v6.is_empty() {
                m.has_v6 = true;
                m.nets6.extend_from_slice(&e.v6);
            }
        }
        Some(Secured {
            disabled: false,
            entries,
            by_mac,
        })
    }

    /// A disabled port's (`enabled = false`): every frame from or to it
    /// is dropped, as OVN drops a disabled port's traffic.
    pub(super) fn disabled() -> Secured {
        Secured {
            disabled: true,
            entries: Vec::new(),
            by_mac: Vec::new(),
        }
    }

    fn of_mac(&self, mac: &[u8]) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(move |e| e.is(mac))
    }

    /// Whether the port may send `frame` (parsed as `layers`).
    pub(super) fn ingress(&self, frame: &[u8], layers: &Frame) -> bool {
        let Some(src) = frame.get(6..12).filter(|_| !self.disabled) else {
            return false;
        };
        let s = seen(frame, layers);
        match s.ethertype {
            Some(ARP) => {
                let at = layers.l3.unwrap_or(usize::MAX);
                let sha = frame.get(at.saturating_add(8)..at.saturating_add(14));
                let spa = v4_at(frame, at.saturating_add(14));
                self.of_mac(src).any(|e| {
                    (!e.v4.is_empty() || e.v6.is_empty())
                        && sha == Some(&e.mac[..])
                        && (e.v4.is_empty() || spa.is_some_and(|a| e.has4(a)))
                })
            }
            Some(IPV4) => {
                let Some((a, _)) = s.v4 else {
                    return self.of_mac(src).any(|e| !e.any_ip());
                };
                self.ingress4(src, a, || dhcp_client(frame, layers))
            }
            Some(IPV6) => {
                let icmp = icmp6(frame, layers);
                let mut passes = false;
                for e in self.of_mac(src) {
                    if !e.any_ip() {
                        passes = true;
                        continue;
                    }
                    if e.v6.is_empty() {
                        continue;
                    }
                    let Some((a, d)) = s.v6 else { continue };
                    if a == e.lla || e.has6(a) {
                        passes = true;
                    } else if a == 0 && d >> 112 == 0xff02 {
                        match icmp {
                            // MLD reports: no further check.
                            Some((MLD1_REPORT | MLD2_REPORT, 0, _)) => return true,
                            // Duplicate address detection.
                            Some((NS, 0, _)) => passes = true,
                            _ => {}
                        }
                    }
                }
                passes && self.nd_ok(frame, layers, src, icmp)
            }
            _ => self.of_mac(src).any(|e| !e.any_ip()),
        }
    }

    /// The address check of frames from `mac`: [`Side::Closed`] where no
    /// entry is of it.
    pub(super) fn sender_side(&self, mac: &[u8]) -> Side<'_> {
        if self.disabled {
            return Side::Closed;
        }
        self.checks_of(mac).map_or(Side::Closed, Side::Mac)
    }

    /// The address check of frames to `mac`: [`Side::Open`] for a group
    /// address.
    pub(super) fn receiver_side(&self, mac: &[u8]) -> Side<'_> {
        if self.disabled {
            return Side::Closed;
        }
        if mac.first().is_some_and(|b| b & 1 != 0) {
            return Side::Open;
        }
        self.checks_of(mac).map_or(Side::Closed, Side::Mac)
    }

    fn checks_of(&self, mac: &[u8]) -> Option<&MacChecks> {
        let w = mac_word(mac);
        self.by_mac.iter().find(|m| m.mac == w)
    }

    /// Whether the port may send IPv4 from `mac` and address `a`
    /// (`dhcp`: whether the datagram is a DHCP client's broadcast).
    #[inline]
    pub(super) fn ingress4(&self, mac: &[u8], a: u32, dhcp: impl Fn() -> bool) -> bool {
        self.sender_side(mac).sends4(a, dhcp)
    }

    /// Neighbour discovery's own check, for an IPv6 frame that passed the
    /// addresses' (`ls_in_check_port_sec_nd`): a solicitation or an
    /// advertisement (hop limit 255) must carry the port's MAC, or no
    /// link-layer option, and an advertisement a target of the port's.
    fn nd_ok(&self, frame: &[u8], layers: &Frame, src: &[u8], icmp: Option<(u8, u8, u8)>) -> bool {
        let Some((ty @ (NS | NA), code, 255)) = icmp else {
            return true;
        };
        let Ok(ip) = layers.ip else { return false };
        let target = v6_at(frame, ip.l4 + 8);
        let lladdr = nd_option(frame, ip.l4 + 24, ip.end, if ty == NS { 1 } else { 2 });
        self.of_mac(src).any(|e| {
            let ll_ok = lladdr.is_none_or(|m| m == [0; 6] || m == e.mac);
            let target_ok =
                ty == NS || e.v6.is_empty() || target.is_some_and(|t| t == e.lla || e.has6(t));
            code == 0 && ll_ok && target_ok
        })
    }

    /// Whether `frame` (parsed as `layers`) may go to the port. Frames to
    /// a group MAC address always may. Of the port's entries for the
    /// frame's MAC, one that lists addresses of the frame's family
    /// allowing its destination lets it through; otherwise an entry
    /// listing any address drops an IP frame (which is why, as in OVN, an
    /// entry without addresses does not widen another of the same MAC).
    pub(super) fn egress(&self, frame: &[u8], layers: &Frame) -> bool {
        let Some(dst) = frame.get(0..6).filter(|_| !self.disabled) else {
            return false;
        };
        if dst[0] & 1 != 0 {
            return true;
        }
        let s = seen(frame, layers);
        let mut found = false;
        let mut any_ip = false;
        for e in self.of_mac(dst) {
            found = true;
            any_ip |= e.any_ip();
            let to6 = |d: u128| d == e.lla || e.has6(d) || d >> 120 == 0xff;
            let allowed = match s.ethertype {
                Some(IPV4) => !e.v4.is_empty() && s.v4.is_some_and(|(_, d)| e.to4(d)),
                Some(IPV6) => !e.v6.is_empty() && s.v6.is_some_and(|(_, d)| to6(d)),
                _ => false,
            };
            if allowed {
                return true;
            }
        }
        let ip = matches!(s.ethertype, Some(IPV4 | IPV6));
        found && !(ip && any_ip)
    }
}

/// A DHCP client's broadcast: UDP from `0.0.0.0:68` to
/// `255.255.255.255:67`.
fn dhcp_client(frame: &[u8], layers: &Frame) -> bool {
    let Ok(ip) = layers.ip else { return false };
    let s = seen(frame, layers);
    ip.proto == ip_proto::UDP
        && ip.frag != Fragment::Later
        && s.v4 == Some((0, u32::MAX))
        && read::<4>(frame, ip.l4) == Some([0, 68, 0, 67])
}

/// An ICMPv6 frame's type, code and hop limit.
fn icmp6(frame: &[u8], layers: &Frame) -> Option<(u8, u8, u8)> {
    let ip = layers.ip.ok()?;
    if ip.version != IpVersion::V6 || ip.proto != ip_proto::ICMPV6 || ip.frag == Fragment::Later {
        return None;
    }
    let [ty, code] = read::<2>(frame, ip.l4)?;
    Some((ty, code, *frame.get(ip.l3 + 7)?))
}

/// The link-layer address of the first option of type `kind` (1: source,
/// 2: target) among neighbour discovery's options from `at` to `end`.
fn nd_option(frame: &[u8], mut at: usize, end: usize, kind: u8) -> Option<[u8; 6]> {
    while at + 2 <= end {
        let (ty, len) = (*frame.get(at)?, usize::from(*frame.get(at + 1)?) * 8);
        if len == 0 {
            return None;
        }
        if ty == kind && len == 8 {
            return read::<6>(frame, at + 2);
        }
        at += len;
    }
    None
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use ctrack_wire::build::{Frame as Build, L4};
    use ctrack_wire::{LinkType, parse_frame, plain_ipv4, plain_ipv6};

    use super::*;

    const M1: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const M9: [u8; 6] = [2, 0, 0, 0, 0, 9];
    const M5: [u8; 6] = [2, 0, 0, 0, 0, 5];
    const GW: [u8; 6] = [2, 0, 0, 0, 0, 0x77];

    fn entry(mac: [u8; 6], ips: &[&str]) -> PortSecurity {
        let ips = ips
            .iter()
            .map(|s| {
                let (a, l) = s.split_once('/').unwrap_or((s, ""));
                let a: IpAddr = a.parse().unwrap();
                let bits = if a.is_ipv4() { 32 } else { 128 };
                (a, l.parse().unwrap_or(bits))
            })
            .collect();
        PortSecurity { mac, ips }
    }

    fn secured(entries: &[PortSecurity]) -> Secured {
        Secured::new(entries).expect("entries")
    }

    fn from(s: &Secured, frame: &[u8]) -> bool {
        s.ingress(frame, &parse_frame(frame, LinkType::Ethernet))
    }

    fn to(s: &Secured, frame: &[u8]) -> bool {
        s.egress(frame, &parse_frame(frame, LinkType::Ethernet))
    }

    fn eth(src: [u8; 6], dst: [u8; 6], mut b: Build) -> Vec<u8> {
        b.eth_src = src;
        b.eth_dst = dst;
        b.build()
    }

    fn v4(src: [u8; 6], dst: [u8; 6], s: &str, d: &str, l4: L4) -> Vec<u8> {
        let (s, d): (std::net::Ipv4Addr, std::net::Ipv4Addr) =
            (s.parse().unwrap(), d.parse().unwrap());
        eth(src, dst, Build::v4(s.octets(), d.octets(), l4))
    }

    fn v6(src: [u8; 6], dst: [u8; 6], s: &str, d: &str, hops: u8, l4: L4) -> Vec<u8> {
        let (s, d): (Ipv6Addr, Ipv6Addr) = (s.parse().unwrap(), d.parse().unwrap());
        let mut b = Build::v6(s, d, l4);
        b.ttl = hops;
        eth(src, dst, b)
    }

    fn udp() -> L4 {
        L4::udp(1000, 53, b"q")
    }

    /// A neighbour solicitation (135) or advertisement (136) for
    /// `target`, with a link-layer option of `ll` if any.
    fn nd(ty: u8, target: &str, ll: Option<[u8; 6]>) -> L4 {
        let t: Ipv6Addr = target.parse().unwrap();
        let mut body = t.octets().to_vec();
        if let Some(m) = ll {
            body.extend_from_slice(&[if ty == NS { 1 } else { 2 }, 1]);
            body.extend_from_slice(&m);
        }
        L4::Icmp {
            ty,
            code: 0,
            rest: [0; 4],
            body,
        }
    }

    fn arp(src: [u8; 6], sha: [u8; 6], spa: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&sha);
        f.extend_from_slice(&spa);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&[10, 0, 0, 2]);
        f
    }

    fn lldp(src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x88, 0xcc]);
        f.extend_from_slice(&[0; 46]);
        f
    }

    fn lla(mac: [u8; 6]) -> String {
        Ipv6Addr::from(link_local(mac)).to_string()
    }

    #[test]
    fn the_link_local_address_of_a_mac() {
        assert_eq!(
            lla([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
            "fe80::5054:ff:fe12:3456"
        );
    }

    /// A port of one MAC, one IPv4 and one IPv6 address: what it may send.
    #[test]
    fn ingress_of_a_port_with_addresses() {
        let s = secured(&[entry(M1, &["10.0.0.1", "fd00::1"])]);
        // IPv4 from its address and MAC only.
        assert!(from(&s, &v4(M1, GW, "10.0.0.1", "10.0.0.2", udp())));
        assert!(!from(&s, &v4(M1, GW, "10.0.0.9", "10.0.0.2", udp())));
        assert!(!from(&s, &v4(M9, GW, "10.0.0.1", "10.0.0.2", udp())));
        // A DHCP client's broadcast, and nothing like it.
        let bcast = [0xff; 6];
        let dhcp = |l4| v4(M1, bcast, "0.0.0.0", "255.255.255.255", l4);
        assert!(from(&s, &dhcp(L4::udp(68, 67, b"d"))));
        assert!(!from(&s, &dhcp(L4::udp(68, 68, b"d"))));
        assert!(!from(
            &s,
            &v4(M1, GW, "0.0.0.0", "10.0.0.2", L4::udp(68, 67, b"d"))
        ));
        assert!(!from(&s, &dhcp(L4::tcp(68, 67, 2))));
        // IPv6 from its address or its link-local one.
        assert!(from(&s, &v6(M1, GW, "fd00::1", "fd00::2", 64, udp())));
        assert!(from(&s, &v6(M1, GW, &lla(M1), "fe80::2", 64, udp())));
        assert!(!from(&s, &v6(M1, GW, "fd00::9", "fd00::2", 64, udp())));
        assert!(!from(&s, &v6(M1, GW, &lla(M9), "fe80::2", 64, udp())));
        // From `::`: duplicate address detection and MLD reports to
        // ff02::/16, nothing else.
        let sol = "ff02::1:ff00:1";
        assert!(from(
            &s,
            &v6(M1, [0x33; 6], "::", sol, 255, nd(NS, "fd00::1", None))
        ));
        assert!(!from(
            &s,
            &v6(M1, GW, "::", "fe80::2", 255, nd(NS, "fd00::1", None))
        ));
        let mld = |ty| L4::Icmp {
            ty,
            code: 0,
            rest: [0; 4],
            body: vec![0; 20],
        };
        assert!(from(
            &s,
            &v6(M1, [0x33; 6], "::", "ff02::16", 1, mld(MLD2_REPORT))
        ));
        assert!(from(
            &s,
            &v6(M1, [0x33; 6], "::", "ff02::16", 1, mld(MLD1_REPORT))
        ));
        assert!(!from(&s, &v6(M1, [0x33; 6], "::", "ff02::16", 1, mld(128))));
        // ARP as its MAC and address.
        assert!(from(&s, &arp(M1, M1, [10, 0, 0, 1])));
        assert!(!from(&s, &arp(M1, M1, [10, 0, 0, 9])));
        assert!(!from(&s, &arp(M1, M9, [10, 0, 0, 1])));
        assert!(!from(&s, &arp(M9, M1, [10, 0, 0, 1])));
        // Other EtherTypes, where addresses are listed: no.
        assert!(!from(&s, &lldp(M1, [0x01, 0x80, 0xc2, 0, 0, 0x0e])));
    }

    /// Neighbour discovery: a solicitation's source link-layer option, an
    /// advertisement's target option and target.
    #[test]
    fn neighbour_discovery_carries_the_port_s_own_addresses() {
        let s = secured(&[entry(M1, &["10.0.0.1", "fd00::1"])]);
        let ns = |ll| {
            v6(
                M1,
                [0x33; 6],
                "fd00::1",
                "ff02::1:ff00:2",
                255,
                nd(NS, "fd00::2", ll),
            )
        };
        assert!(from(&s, &ns(None)));
        assert!(from(&s, &ns(Some(M1))));
        assert!(!from(&s, &ns(Some(M9))));
        let na = |target, ll| v6(M1, GW, "fd00::1", "fd00::2", 255, nd(NA, target, ll));
        assert!(from(&s, &na("fd00::1", Some(M1))));
        assert!(from(&s, &na("fd00::1", None)));
        let own = lla(M1);
        assert!(from(&s, &na(&own, Some(M1))));
        assert!(!from(&s, &na("fd00::9", Some(M1))));
        assert!(!from(&s, &na("fd00::1", Some(M9))));
        // Not neighbour discovery unless its hop limit is 255: unchecked.
        let na64 = v6(
            M1,
            GW,
            "fd00::1",
            "fd00::2",
            64,
            nd(NA, "fd00::9", Some(M9)),
        );
        assert!(from(&s, &na64));
        // A nonzero code fails where the options are checked.
        let mut bad = na("fd00::1", Some(M1));
        let at = bad.len() - 32;
        bad[at + 1] = 1;
        assert!(!from(&s, &bad));
    }

    /// Entries without addresses, with one family only, with prefixes.
    #[test]
    fn entries_without_addresses_or_with_one_family() {
        let any = secured(&[entry(M1, &[])]);
        assert!(from(&any, &v4(M1, GW, "192.0.2.7", "10.0.0.2", udp())));
        assert!(from(&any, &v6(M1, GW, "2001:db8::7", "fd00::2", 64, udp())));
        assert!(from(&any, &arp(M1, M1, [192, 0, 2, 7])));
        assert!(!from(&any, &arp(M1, M9, [192, 0, 2, 7])));
        assert!(from(&any, &lldp(M1, [0x01, 0x80, 0xc2, 0, 0, 0x0e])));
        assert!(!from(&any, &v4(M9, GW, "192.0.2.7", "10.0.0.2", udp())));
        let ns = v6(
            M1,
            [0x33; 6],
            "fd00::7",
            "ff02::1:ff00:2",
            255,
            nd(NS, "fd00::2", Some(M9)),
        );
        assert!(!from(&any, &ns));
        // IPv6 only: no IPv4, no ARP.
        let six = secured(&[entry(M1, &["fd00::5"])]);
        assert!(from(&six, &v6(M1, GW, "fd00::5", "fd00::2", 64, udp())));
        assert!(!from(&six, &v4(M1, GW, "10.0.0.1", "10.0.0.2", udp())));
        assert!(!from(&six, &arp(M1, M1, [10, 0, 0, 1])));
        // IPv4 only: no IPv6.
        let four = secured(&[entry(M1, &["10.0.0.1"])]);
        assert!(!from(&four, &v6(M1, GW, &lla(M1), "fe80::2", 64, udp())));
        // A network (host bits zero): any address in it.
        let net = secured(&[entry(M1, &["10.0.2.0/24", "fd00:2::/64"])]);
        assert!(from(&net, &v4(M1, GW, "10.0.2.77", "10.0.0.2", udp())));
        assert!(!from(&net, &v4(M1, GW, "10.0.3.1", "10.0.0.2", udp())));
        assert!(from(&net, &v6(M1, GW, "fd00:2::77", "fd00::2", 64, udp())));
        // A host with a prefix: that address alone.
        let host = secured(&[entry(M1, &["10.0.1.4/24", "fd00:1::4/64"])]);
        assert!(from(&host, &v4(M1, GW, "10.0.1.4", "10.0.0.2", udp())));
        assert!(!from(&host, &v4(M1, GW, "10.0.1.5", "10.0.0.2", udp())));
        assert!(!from(&host, &v6(M1, GW, "fd00:1::5", "fd00::2", 64, udp())));
        // Entries add up on the way in.
        let two = secured(&[entry(M1, &["10.0.0.1"]), entry(M1, &["10.0.0.2"])]);
        assert!(from(&two, &v4(M1, GW, "10.0.0.1", "10.0.0.9", udp())));
        assert!(from(&two, &v4(M1, GW, "10.0.0.2", "10.0.0.9", udp())));
    }

    /// What may be sent to the port.
    #[test]
    fn egress_to_a_port() {
        let s = secured(&[entry(M1, &["10.0.1.4/24", "fd00::1"])]);
        let to4 = |d: &str| to(&s, &v4(GW, M1, "10.0.0.2", d, udp()));
        assert!(to4("10.0.1.4"));
        assert!(
            to4("10.0.1.255"),
            "the broadcast of a host given with its prefix"
        );
        assert!(to4("255.255.255.255"));
        assert!(to4("224.0.0.251"));
        assert!(!to4("10.0.1.5"));
        let to6 = |d: &str| to(&s, &v6(GW, M1, "fd00::2", d, 64, udp()));
        assert!(to6("fd00::1"));
        assert!(to6(&lla(M1)));
        assert!(to6("ff02::1"));
        assert!(to6("ff05::2"));
        assert!(!to6("fd00::2"));
        // Non-IP to its MAC passes; anything to another unicast MAC does
        // not; to a group address, anything.
        assert!(to(&s, &lldp(GW, M1)));
        assert!(to(&s, &arp(GW, GW, [10, 0, 0, 2])));
        assert!(!to(&s, &v4(GW, M9, "10.0.0.2", "10.0.1.4", udp())));
        assert!(to(&s, &v4(GW, [0xff; 6], "10.0.0.2", "10.9.9.9", udp())));
        // IPv6 to a port that lists only IPv4, not at all.
        let four = secured(&[entry(M1, &["10.0.0.1"])]);
        assert!(!to(&four, &v6(GW, M1, "fd00::2", &lla(M1), 64, udp())));
        // An entry without addresses does not widen another of its MAC
        // (OVN's priorities): IPv6 is still refused.
        let both = secured(&[entry(M1, &[]), entry(M1, &["10.0.0.1"])]);
        assert!(to(&both, &v4(GW, M1, "10.0.0.2", "10.0.0.1", udp())));
        assert!(!to(&both, &v6(GW, M1, "fd00::2", "fd00::1", 64, udp())));
        assert!(to(&both, &lldp(GW, M1)));
        let any = secured(&[entry(M1, &[])]);
        assert!(to(&any, &v6(GW, M1, "fd00::2", "fd00::1", 64, udp())));
    }

    /// Two ports of port security `a` (MAC `M1`) and `b` (`GW` and `M9`,
    /// and `M5` when `b` has an entry of it): whether the compiled
    /// policy's check of every frame of `frames(source MAC, destination
    /// MAC)` (each plain, `plain`: checked without parsing its layers)
    /// agrees with the general one, for every pair of five MACs; the
    /// frames that pass.
    fn fast_agrees(
        a: &[PortSecurity],
        b: &[PortSecurity],
        plain: impl Fn(&[u8]) -> bool,
        frames: impl Fn([u8; 6], [u8; 6]) -> Vec<(String, Vec<u8>)>,
    ) -> u32 {
        use crate::firewall::Compiled;
        use crate::model::{Policy, Port};
        // As the file makes them: every MAC of port security is one of
        // the port's.
        let port = |name: &str, security: &[PortSecurity]| Port {
            name: name.into(),
            macs: security.iter().map(|e| e.mac).collect(),
            zone: 1,
            security: security.to_vec(),
            ..Port::default()
        };
        let policy = Policy {
            ports: vec![port("a", a), port("b", b)],
            ..Policy::default()
        };
        let pol = Compiled::new(policy, 1).expect("compiles");
        let (sa, sb) = (secured(a), secured(b));
        let side = |m: [u8; 6]| match m {
            M1 => Some(&sa),
            m if b.iter().any(|e| e.mac == m) => Some(&sb),
            _ => None,
        };
        let macs = [M1, GW, M9, M5, [0xff; 6], [0x33, 0x33, 0, 0, 0, 1]];
        let mut n = 0;
        for (sm, dm) in macs.iter().flat_map(|x| macs.iter().map(move |y| (*x, *y))) {
            for (what, f) in frames(sm, dm) {
                assert!(plain(&f), "{what}");
                let layers = parse_frame(&f, LinkType::Ethernet);
                let general = side(sm).is_none_or(|x| x.ingress(&f, &layers))
                    && side(dm).is_none_or(|x| x.egress(&f, &layers));
                assert_eq!(pol.secure(&f), general, "{sm:02x?} > {dm:02x?}: {what}");
                n += u32::from(general);
            }
        }
        n
    }

    /// Every pair of `addrs`.
    fn pairs<'a>(addrs: &'a [&'a str]) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        addrs
            .iter()
            .flat_map(|x| addrs.iter().map(move |y| (*x, *y)))
    }

    /// The compiled policy's check of a plain IPv4 frame (which does not
    /// parse the frame's layers) agrees with the general one.
    #[test]
    fn the_plain_ipv4_path_agrees() {
        let a = [
            entry(M1, &["10.0.1.4/24", "fd00::1"]),
            entry(M1, &["192.0.2.0/28"]),
        ];
        let b = [entry(GW, &["10.0.0.2"]), entry(M9, &[])];
        let addrs = [
            "10.0.1.4",
            "10.0.1.5",
            "10.0.1.255",
            "192.0.2.3",
            "192.0.2.16",
            "10.0.0.2",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "239.1.2.3",
            "8.8.8.8",
        ];
        let n = fast_agrees(
            &a,
            &b,
            |f| plain_ipv4(f).is_some(),
            |sm, dm| {
                pairs(&addrs)
                    .flat_map(|(s, d)| {
                        [udp(), L4::udp(68, 67, b"d"), L4::tcp(68, 67, 2)]
                            .map(|l4| (format!("{s} > {d}"), v4(sm, dm, s, d, l4)))
                    })
                    .collect()
            },
        );
        assert!(n > 100, "{n}");
    }

    /// The same of a plain IPv6 frame (TCP or UDP), with a MAC whose
    /// entry lists IPv4 alone.
    #[test]
    fn the_plain_ipv6_path_agrees() {
        let a = [
            entry(M1, &["fd00:1::4/64", "10.0.0.1"]),
            entry(M1, &["2001:db8::/48"]),
        ];
        let b = [
            entry(GW, &["fd00::2"]),
            entry(M9, &[]),
            entry(M5, &["10.0.0.5"]),
        ];
        let (l1, lg, l9) = (lla(M1), lla(GW), lla(M9));
        let addrs = [
            "fd00:1::4",
            "fd00:1::5",
            "2001:db8::3",
            "2001:db8:1::3",
            "fd00::2",
            "::",
            "ff02::1",
            "ff05::1:3",
            "fe80::99",
            "2001:4860::8888",
            &l1,
            &lg,
            &l9,
        ];
        let n = fast_agrees(
            &a,
            &b,
            |f| plain_ipv6(f).is_some(),
            |sm, dm| {
                pairs(&addrs)
                    .flat_map(|(s, d)| {
                        [udp(), L4::tcp(40000, 80, 2)]
                            .map(|l4| (format!("{s} > {d}"), v6(sm, dm, s, d, 64, l4)))
                    })
                    .collect()
            },
        );
        assert!(n > 100, "{n}");
    }

    /// An address listed without a prefix is held to every bit, its
    /// first too (mutation round 44: the mask of a whole IPv6 address one
    /// bit short, which only an address whose first bit is 0 shows,
    /// passed the crate's tests: their whole addresses were `fd00::`'s).
    #[test]
    fn a_whole_address_is_held_to_every_bit() {
        let s = secured(&[entry(M1, &["2001:db8::5", "10.0.0.5"])]);
        for (src, ok) in [
            ("2001:db8::5", true),
            ("a001:db8::5", false),
            ("2001:db8::4", false),
        ] {
            let f = v6(M1, M9, src, "2001:db8::9", 64, udp());
            assert_eq!(from(&s, &f), ok, "from {src}");
            let f = v6(M9, M1, "2001:db8::9", src, 64, udp());
            assert_eq!(to(&s, &f), ok, "to {src}");
        }
        for (src, ok) in [
            ("10.0.0.5", true),
            ("138.0.0.5", false),
            ("10.0.0.4", false),
        ] {
            let f = v4(M1, M9, src, "10.0.0.9", udp());
            assert_eq!(from(&s, &f), ok, "from {src}");
            let f = v4(M9, M1, "10.0.0.9", src, udp());
            assert_eq!(to(&s, &f), ok, "to {src}");
        }
    }

    /// Only ICMPv6 is read as neighbour discovery, and its options only
    /// within the IP packet (mutation round 44: a UDP datagram from `::`
    /// whose source port reads as a solicitation's type and code, and an
    /// option read from the Ethernet padding after the packet, passed the
    /// crate's tests).
    #[test]
    fn neighbour_discovery_is_icmpv6_within_its_packet() {
        let s = secured(&[entry(M1, &["fd00::1"])]);
        let group = "ff02::1:ff00:1";
        let udp_dad = L4::udp(u16::from(NS) << 8, 547, b"q");
        assert!(!from(&s, &v6(M1, [0x33; 6], "::", group, 255, udp_dad)));
        assert!(from(
            &s,
            &v6(M1, [0x33; 6], "::", group, 255, nd(NS, "fd00::1", None))
        ));
        // A solicitation with one stray byte after its target, a source
        // link-layer option's type, and padding after the packet that
        // would make it an option of another MAC.
        let t: Ipv6Addr = "fd00::2".parse().unwrap();
        let mut body = t.octets().to_vec();
        body.push(1);
        let l4 = L4::Icmp {
            ty: NS,
            code: 0,
            rest: [0; 4],
            body,
        };
        let mut f = v6(M1, [0x33; 6], "fd00::1", "ff02::1:ff00:2", 255, l4);
        f.push(1);
        f.extend_from_slice(&M9);
        assert!(from(&s, &f));
        // A solicitation's options: only the source link-layer one (type
        // 1) is its MAC, wherever it comes.
        let ns_with = |opts: &[(u8, [u8; 6])]| {
            let mut body = t.octets().to_vec();
            for (ty, mac) in opts {
                body.extend_from_slice(&[*ty, 1]);
                body.extend_from_slice(mac);
            }
            let l4 = L4::Icmp {
                ty: NS,
                code: 0,
                rest: [0; 4],
                body,
            };
            v6(M1, [0x33; 6], "fd00::1", "ff02::1:ff00:2", 255, l4)
        };
        assert!(from(&s, &ns_with(&[(2, M9)])));
        assert!(from(&s, &ns_with(&[(2, M9), (1, M1)])));
        assert!(!from(&s, &ns_with(&[(2, M1), (1, M9)])));
    }

    /// Cut frames never panic, and none passes a restricted port before
    /// the addresses it is checked by are whole.
    #[test]
    fn cut_frames() {
        let s = secured(&[entry(M1, &["10.0.0.1", "fd00::1"])]);
        let frames = [
            (v4(M1, GW, "10.0.0.1", "10.0.0.2", udp()), 34),
            (
                v6(
                    M1,
                    [0x33; 6],
                    "fd00::1",
                    "ff02::1:ff00:2",
                    255,
                    nd(NS, "fd00::2", Some(M1)),
                ),
                54,
            ),
            (arp(M1, M1, [10, 0, 0, 1]), 32),
        ];
        for (f, whole) in frames {
            assert!(from(&s, &f));
            for n in 0..f.len() {
                let cut = &f[..n];
                let _ = to(&s, cut);
                assert!(n >= whole || !from(&s, cut), "{n} of {}", f.len());
            }
        }
    }
}
