//! The tracker: one call per packet with the `ct` action to apply and the
//! current time, one [`Verdict`] back.
//!
//! The decision procedure is Open vSwitch's `process_one`: look the packet's
//! key up from both directions; if a connection is found, let its protocol
//! tracker judge the packet (or, for an ICMP error, report it related); if
//! not, decide whether the packet may open a connection and, with `commit`,
//! store one. Per-packet results use the same `ct_state` bits.

use ctrack_wire::{Frame, LinkType, parse_frame};

use crate::conn::{Conn, Counters, Dir};
use crate::extract::{ExtractOptions, Extracted, InvalidReason, L4Info, extract};
use crate::key::{ConnKey, KeyHasher, Zone};
use crate::proto::{IcmpState, OtherState, ProtoState, Update, tcp};
use crate::state::CtState;
use crate::table::{ConnId, ConnTable, LocalTable, Sweep};
use crate::time::Time;
use crate::timeout::{Timeout, TimeoutPolicy, ZonePolicies};

/// Open vSwitch's default limit on tracked connections.
pub const DEFAULT_MAX_CONNS: usize = 3_000_000;

/// Tracker settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Check TCP sequence numbers and windows (Open vSwitch's
    /// `tcp_seq_chk`). Off, any segment with sane flags is in window.
    pub tcp_seq_check: bool,
    /// Let any TCP segment but a SYN-ACK open a connection, picking up
    /// connections established before tracking began (Open vSwitch's
    /// behaviour, Linux's `nf_conntrack_tcp_loose=1`). Off, only a SYN may
    /// (Linux's `nf_conntrack_tcp_loose=0`).
    pub tcp_loose: bool,
    /// Verify IPv4 header and transport checksums.
    pub checksums: bool,
    /// Most connections the table may hold; a commit beyond it is refused
    /// (the packet is still `new`, as in Open vSwitch).
    pub max_conns: usize,
    /// Timeout policy for zones without their own.
    pub timeouts: TimeoutPolicy,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tcp_seq_check: true,
            tcp_loose: true,
            checksums: true,
            max_conns: DEFAULT_MAX_CONNS,
            timeouts: TimeoutPolicy::default(),
        }
    }
}

/// A value and the mask of the bits to set (`mark=0x1/0xff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Masked<T> {
    /// Bits to write.
    pub value: T,
    /// Which bits to write.
    pub mask: T,
}

impl<T> Masked<T> {
    /// `value` under `mask`.
    pub fn new(value: T, mask: T) -> Self {
        Masked { value, mask }
    }
}

/// What the caller asks of the tracker for one packet: the `ct` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtAction {
    /// Zone to track in.
    pub zone: Zone,
    /// Store a new connection (else only look up).
    pub commit: bool,
    /// With `commit`: a packet that finds its connection in the reply
    /// direction ends that connection and starts one in its own direction.
    pub force: bool,
    /// Set bits of the connection's mark.
    pub mark: Option<Masked<u32>>,
    /// Set bits of the connection's label.
    pub label: Option<Masked<u128>>,
}

impl CtAction {
    /// `ct(commit,zone=zone)`.
    pub fn commit(zone: Zone) -> CtAction {
        CtAction {
            zone,
            commit: true,
            ..CtAction::default()
        }
    }

    /// `ct(zone=zone)`: look up only.
    pub fn lookup(zone: Zone) -> CtAction {
        CtAction {
            zone,
            ..CtAction::default()
        }
    }
}

/// Why a commit did not store a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Refusal {
    /// The table holds `max_conns` connections.
    TableFull,
}

/// The tracker's answer for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// `ct_state`.
    pub state: CtState,
    /// Zone the packet was tracked in.
    pub zone: Zone,
    /// The connection's mark (0 without a connection).
    pub mark: u32,
    /// The connection's label (0 without a connection).
    pub label: u128,
    /// The connection, if the packet has one (found or just committed).
    pub conn: Option<ConnId>,
    /// Direction of the packet in `conn`.
    pub dir: Dir,
    /// Why the packet is invalid, when it is.
    pub invalid: Option<InvalidReason>,
    /// Why a commit stored nothing, when it did not.
    pub refused: Option<Refusal>,
    /// The key looked up (the quoted packet's, reversed, for an ICMP
    /// error); absent if the packet was refused before lookup.
    pub key: Option<ConnKey>,
}

impl Verdict {
    fn invalid(zone: Zone, reason: InvalidReason) -> Verdict {
        Verdict {
            state: CtState::INV | CtState::TRK,
            zone,
            mark: 0,
            label: 0,
            conn: None,
            dir: Dir::Orig,
            invalid: Some(reason),
            refused: None,
            key: None,
        }
    }
}

/// Counters of everything the tracker decided. Every invalid packet and
/// every refused commit is counted by reason.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    /// Packets processed.
    pub packets: u64,
    /// Packets reported `new`.
    pub new: u64,
    /// Packets reported `est`.
    pub established: u64,
    /// Packets reported `rel`.
    pub related: u64,
    /// Packets reported `inv`.
    pub invalid: u64,
    /// `inv` packets by reason, in [`InvalidReason::ALL`] order.
    pub invalid_by_reason: [u64; InvalidReason::ALL.len()],
    /// Connections committed.
    pub committed: u64,
    /// Commits refused because the table was full.
    pub refused_table_full: u64,
    /// Connections ended by a packet that starts a new one in their place
    /// (TCP reuse after close, `force`).
    pub replaced: u64,
    /// Connections freed by sweeps after expiring.
    pub expired: u64,
    /// Connections removed by flushes.
    pub flushed: u64,
}

impl Stats {
    /// The count of `inv` packets for `reason`.
    pub fn invalid_count(&self, reason: InvalidReason) -> u64 {
        self.invalid_by_reason[reason as usize]
    }

    fn count(&mut self, v: &Verdict) {
        self.packets += 1;
        if v.state.contains(CtState::NEW) {
            self.new += 1;
        }
        if v.state.contains(CtState::EST) {
            self.established += 1;
        }
        if v.state.contains(CtState::REL) {
            self.related += 1;
        }
        if let Some(r) = v.invalid {
            self.invalid += 1;
            self.invalid_by_reason[r as usize] += 1;
        }
        if v.refused == Some(Refusal::TableFull) {
            self.refused_table_full += 1;
        }
    }
}

/// A connection tracker over a table `T`.
#[derive(Debug)]
pub struct Tracker<T: ConnTable = LocalTable> {
    config: Config,
    policies: ZonePolicies,
    table: T,
    stats: Stats,
}

impl Tracker<LocalTable> {
    /// A tracker with a single-threaded table and a random hash seed.
    pub fn new(config: Config) -> Self {
        Self::with_table(config, LocalTable::new(KeyHasher::new()))
    }
}

impl Default for Tracker<LocalTable> {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

impl<T: ConnTable> Tracker<T> {
    /// A tracker over `table`.
    pub fn with_table(config: Config, table: T) -> Self {
        Tracker {
            policies: ZonePolicies::new(config.timeouts),
            config,
            table,
            stats: Stats::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The table.
    pub fn table(&self) -> &T {
        &self.table
    }

    /// Connections held (expired ones not yet swept included).
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    /// The timeout policies.
    pub fn policies(&self) -> &ZonePolicies {
        &self.policies
    }

    /// Gives `zone` its own timeout policy. Existing connections of the zone
    /// get the new timeouts at their next packet.
    pub fn set_zone_timeouts(&mut self, zone: Zone, policy: TimeoutPolicy) {
        self.policies.set_zone(zone, policy);
    }

    /// Returns `zone` to the default timeout policy.
    pub fn clear_zone_timeouts(&mut self, zone: Zone) {
        self.policies.clear_zone(zone);
    }

    /// Replaces the default timeout policy.
    pub fn set_default_timeouts(&mut self, policy: TimeoutPolicy) {
        self.config.timeouts = policy;
        self.policies.set_default(policy);
    }

    /// Changes the connection limit (existing connections stay).
    pub fn set_max_conns(&mut self, max: usize) {
        self.config.max_conns = max;
    }

    /// Tracks one frame captured with link type `link`.
    pub fn process(
        &mut self,
        frame: &[u8],
        link: LinkType,
        action: &CtAction,
        now: Time,
    ) -> Verdict {
        let layers = parse_frame(frame, link);
        self.process_layers(frame, &layers, action, now)
    }

    /// Tracks one frame whose layers the caller already found with
    /// [`parse_frame`].
    pub fn process_layers(
        &mut self,
        frame: &[u8],
        layers: &Frame,
        action: &CtAction,
        now: Time,
    ) -> Verdict {
        let opts = ExtractOptions {
            checksums: self.config.checksums,
        };
        let v = match extract(frame, layers, action.zone, opts) {
            Ok(ex) => self.process_extracted(&ex, action, now),
            Err(reason) => Verdict::invalid(action.zone, reason),
        };
        self.stats.count(&v);
        v
    }

    fn process_extracted(&mut self, ex: &Extracted, action: &CtAction, now: Time) -> Verdict {
        let zone = action.zone;
        let mut found = self.table.lookup(&ex.key, now);
        if action.force && action.commit {
            if let Some((id, Dir::Reply)) = found {
                self.table.remove(id);
                self.stats.replaced += 1;
                found = None;
            }
        }

        let mut state = CtState::empty();
        let mut invalid = None;
        let mut conn = None;
        let mut dir = Dir::Orig;
        let mut create = false;
        match found {
            Some((id, d)) if ex.related => {
                state = CtState::REL;
                if d.is_reply() {
                    state |= CtState::RPL;
                }
                conn = Some(id);
                dir = d;
            }
            Some((id, d)) => {
                conn = Some(id);
                dir = d;
                match self.update_conn(id, ex, d, now) {
                    Update::Valid => {
                        state = CtState::EST;
                        if d.is_reply() {
                            state |= CtState::RPL;
                        }
                    }
                    Update::ValidNew => state = CtState::NEW,
                    Update::Invalid => {
                        state = CtState::INV;
                        invalid = Some(match ex.l4 {
                            L4Info::Tcp(seg) if tcp::invalid_flags(seg.flags) => {
                                InvalidReason::TcpBadFlags
                            }
                            _ => InvalidReason::TcpOutOfWindow,
                        });
                    }
                    Update::New => {
                        self.table.remove(id);
                        self.stats.replaced += 1;
                        conn = None;
                        dir = Dir::Orig;
                        create = true;
                    }
                }
            }
            None if ex.related => {
                state = CtState::INV;
                invalid = Some(InvalidReason::RelatedNotFound);
            }
            None => create = true,
        }

        let mut refused = None;
        if create {
            match self.open(ex, action, now) {
                Ok(id) => {
                    state = CtState::NEW;
                    conn = id;
                }
                Err(Opening::Invalid(r)) => {
                    state = CtState::INV;
                    invalid = Some(r);
                }
                Err(Opening::Refused(r)) => {
                    state = CtState::NEW;
                    refused = Some(r);
                }
            }
        }

        let (mut mark, mut label) = (0, 0);
        if let Some(c) = conn.and_then(|id| self.table.get_mut(id)) {
            if let Some(m) = action.mark {
                c.mark = (c.mark & !m.mask) | (m.value & m.mask);
            }
            if let Some(l) = action.label {
                c.label = (c.label & !l.mask) | (l.value & l.mask);
            }
            mark = c.mark;
            label = c.label;
        }

        Verdict {
            state: state | CtState::TRK,
            zone,
            mark,
            label,
            conn,
            dir,
            invalid,
            refused,
            key: Some(ex.key),
        }
    }

    /// Runs the protocol tracker of connection `id` for the packet, refreshes
    /// its expiry and counts it.
    fn update_conn(&mut self, id: ConnId, ex: &Extracted, dir: Dir, now: Time) -> Update {
        let seq_check = self.config.tcp_seq_check;
        let Some(c) = self.table.get_mut(id) else {
            return Update::Invalid;
        };
        let reply = dir.is_reply();
        let (verdict, timeout) = match (&mut c.proto, &ex.l4) {
            (ProtoState::Tcp(t), L4Info::Tcp(seg)) => tcp::update(t, seg, reply, seq_check),
            (ProtoState::Icmp(s), _) => s.update(reply),
            (ProtoState::Other(s), _) => s.update(reply),
            // A key match implies the same protocol, so the transport
            // details agree with the state.
            (ProtoState::Tcp(_), _) => (Update::Invalid, None),
        };
        if let Some(t) = timeout {
            let zone = c.keys[0].zone;
            c.expiration = now + self.policies.get(zone).duration(t);
        }
        if matches!(verdict, Update::Valid | Update::ValidNew) {
            c.counters[dir.index()].add(ex.ip_len);
        }
        verdict
    }

    /// Decides whether the packet may open a connection and, with `commit`,
    /// stores it.
    fn open(
        &mut self,
        ex: &Extracted,
        action: &CtAction,
        now: Time,
    ) -> Result<Option<ConnId>, Opening> {
        let proto = match ex.l4 {
            L4Info::Tcp(seg) => {
                if tcp::invalid_flags(seg.flags) {
                    return Err(Opening::Invalid(InvalidReason::TcpBadFlags));
                }
                if !tcp::valid_new(seg.flags, self.config.tcp_loose) {
                    return Err(Opening::Invalid(InvalidReason::CannotOpen));
                }
                ProtoState::Tcp(tcp::new_conn(&seg))
            }
            L4Info::IcmpQuery { msg_type } => {
                let request = match ex.key.family {
                    crate::key::Family::V4 => ctrack_wire::icmp::v4::is_request(msg_type),
                    crate::key::Family::V6 => msg_type == ctrack_wire::icmp::v6::ECHO_REQUEST,
                };
                if !request {
                    return Err(Opening::Invalid(InvalidReason::CannotOpen));
                }
                ProtoState::Icmp(IcmpState::First)
            }
            L4Info::Other => ProtoState::Other(OtherState::First),
        };
        if !action.commit {
            return Ok(None);
        }
        if self.table.len() >= self.config.max_conns {
            return Err(Opening::Refused(Refusal::TableFull));
        }
        let timeout: Timeout = proto.initial_timeout();
        let expiration = now + self.policies.get(action.zone).duration(timeout);
        let mut conn = Conn::new(ex.key, proto, now, expiration);
        conn.counters[0] = Counters {
            packets: 1,
            bytes: u64::from(ex.ip_len),
        };
        let id = self.table.insert(conn);
        self.stats.committed += 1;
        Ok(Some(id))
    }

    /// The connection behind `id`.
    pub fn conn(&self, id: ConnId) -> Option<&Conn> {
        self.table.get(id)
    }

    /// Finds the live connection with `key` in either direction.
    pub fn lookup(&self, key: &ConnKey, now: Time) -> Option<(ConnId, &Conn, Dir)> {
        let (id, dir) = self.table.lookup(key, now)?;
        Some((id, self.table.get(id)?, dir))
    }

    /// Frees expired connections, looking at no more than `budget`, and says
    /// when to call again.
    pub fn sweep(&mut self, now: Time, budget: usize) -> Sweep {
        let s = self.table.sweep(now, budget);
        self.stats.expired += s.expired as u64;
        s
    }

    /// Removes every connection of `zone`.
    pub fn flush_zone(&mut self, zone: Zone) -> usize {
        let n = self.table.flush_zone(zone);
        self.stats.flushed += n as u64;
        n
    }

    /// Removes every connection.
    pub fn flush_all(&mut self) -> usize {
        let n = self.table.clear();
        self.stats.flushed += n as u64;
        n
    }

    /// Removes the connection with `key` (either direction), if live.
    pub fn flush_key(&mut self, key: &ConnKey, now: Time) -> bool {
        match self.table.lookup(key, now) {
            Some((id, _)) => {
                self.table.remove(id);
                self.stats.flushed += 1;
                true
            }
            None => false,
        }
    }

    /// Calls `f` for each connection (of `zone`, if given), expired ones not
    /// yet swept included.
    pub fn for_each(&self, zone: Option<Zone>, mut f: impl FnMut(ConnId, &Conn)) {
        self.table.for_each(zone, &mut f);
    }
}

enum Opening {
    Invalid(InvalidReason),
    Refused(Refusal),
}
