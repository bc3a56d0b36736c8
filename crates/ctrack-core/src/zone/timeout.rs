//! Timeouts per protocol and state, with Open vSwitch's defaults, and timeout
//! policies per zone.
//!
//! A connection's expiry is recomputed from the policy of its zone each time
//! a packet moves it, so a changed policy applies to existing connections
//! from their next packet on.

use crate::time::Millis;

/// The timeout classes the protocol trackers ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[repr(u8)]
pub enum Timeout {
    /// TCP: only the opening packet seen (SYN_SENT).
    TcpFirstPacket,
    /// TCP: opening, not yet established both ways (SYN_RECV).
    TcpOpening,
    /// TCP: established.
    TcpEstablished,
    /// TCP: one side closing (FIN_WAIT in conntrack terms).
    TcpClosing,
    /// TCP: both sides sent FIN (TIME_WAIT in conntrack terms).
    TcpFinWait,
    /// TCP: closed (both FINs acknowledged, or reset).
    TcpClosed,
    /// Other protocols (UDP, SCTP, ...): first packet.
    OtherFirst,
    /// Other protocols: several packets, one direction.
    OtherMultiple,
    /// Other protocols: packets seen both ways.
    OtherBidir,
    /// ICMP: the query seen.
    IcmpFirst,
    /// ICMP: the reply seen.
    IcmpReply,
}

impl Timeout {
    /// Every class, in discriminant order.
    pub const ALL: [Timeout; 11] = [
        Timeout::TcpFirstPacket,
        Timeout::TcpOpening,
        Timeout::TcpEstablished,
        Timeout::TcpClosing,
        Timeout::TcpFinWait,
        Timeout::TcpClosed,
        Timeout::OtherFirst,
        Timeout::OtherMultiple,
        Timeout::OtherBidir,
        Timeout::IcmpFirst,
        Timeout::IcmpReply,
    ];

    /// The class with discriminant `i` (the last class for anything out of
    /// range).
    #[inline]
    pub fn from_index(i: u8) -> Timeout {
        Timeout::ALL[usize::from(i).min(Timeout::ALL.len() - 1)]
    }
}

/// Timeout values in seconds. Field names follow the `ct_timeout_policy`
/// attributes of Open vSwitch (and Linux's `nf_ct_timeout`): note that the
/// "other" protocols (UDP included) use the `udp_*` values, and that the
/// state of several packets one way is `udp_single` while packets both ways
/// is `udp_multiple`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct TimeoutPolicy {
    /// TCP SYN_SENT.
    pub tcp_syn_sent: u32,
    /// TCP SYN_RECV.
    pub tcp_syn_recv: u32,
    /// TCP ESTABLISHED.
    pub tcp_established: u32,
    /// TCP FIN_WAIT (one side closing).
    pub tcp_fin_wait: u32,
    /// TCP TIME_WAIT (both sides closing).
    pub tcp_time_wait: u32,
    /// TCP CLOSE.
    pub tcp_close: u32,
    /// Other protocols, first packet.
    pub udp_first: u32,
    /// Other protocols, several packets one way.
    pub udp_single: u32,
    /// Other protocols, both ways.
    pub udp_multiple: u32,
    /// ICMP query.
    pub icmp_first: u32,
    /// ICMP reply.
    pub icmp_reply: u32,
}

impl Default for TimeoutPolicy {
    /// Open vSwitch's userspace defaults (`ct_dpif_netdev_tp_def`).
    fn default() -> Self {
        TimeoutPolicy {
            tcp_syn_sent: 30,
            tcp_syn_recv: 30,
            tcp_established: 24 * 60 * 60,
            tcp_fin_wait: 15 * 60,
            tcp_time_wait: 45,
            tcp_close: 30,
            udp_first: 60,
            udp_single: 60,
            udp_multiple: 30,
            icmp_first: 60,
            icmp_reply: 30,
        }
    }
}

impl TimeoutPolicy {
    /// The timeout of `class`, in seconds.
    pub fn seconds(&self, class: Timeout) -> u32 {
        match class {
            Timeout::TcpFirstPacket => self.tcp_syn_sent,
            Timeout::TcpOpening => self.tcp_syn_recv,
            Timeout::TcpEstablished => self.tcp_established,
            Timeout::TcpClosing => self.tcp_fin_wait,
            Timeout::TcpFinWait => self.tcp_time_wait,
            Timeout::TcpClosed => self.tcp_close,
            Timeout::OtherFirst => self.udp_first,
            Timeout::OtherMultiple => self.udp_single,
            Timeout::OtherBidir => self.udp_multiple,
            Timeout::IcmpFirst => self.icmp_first,
            Timeout::IcmpReply => self.icmp_reply,
        }
    }

    /// The timeout of `class`, in milliseconds.
    #[inline]
    pub fn millis(&self, class: Timeout) -> u64 {
        u64::from(self.seconds(class)) * 1000
    }

    /// The timeout of `class`.
    pub fn duration(&self, class: Timeout) -> Millis {
        Millis::from_secs(self.seconds(class))
    }

    /// The longest timeout of the policy.
    pub fn max_seconds(&self) -> u32 {
        [
            self.tcp_syn_sent,
            self.tcp_syn_recv,
            self.tcp_established,
            self.tcp_fin_wait,
            self.tcp_time_wait,
            self.tcp_close,
            self.udp_first,
            self.udp_single,
            self.udp_multiple,
            self.icmp_first,
            self.icmp_reply,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }
}

/// A policy as the packet path reads it: the timeout of each class in
/// milliseconds, indexed by the class number (a 4-bit field of the
/// connection, hence sixteen entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compiled {
    /// The policy as configured.
    pub policy: TimeoutPolicy,
    ms: [u64; 16],
}

impl Compiled {
    /// Compiles `policy`.
    pub fn new(policy: TimeoutPolicy) -> Compiled {
        let mut ms = [policy.millis(Timeout::IcmpReply); 16];
        for c in Timeout::ALL {
            ms[c as usize] = policy.millis(c);
        }
        Compiled { policy, ms }
    }

    /// The timeout of the class numbered `class & 0xf`, in milliseconds.
    #[inline(always)]
    pub fn millis_of(&self, class: u8) -> u64 {
        self.ms[usize::from(class & 0x0f)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ovs_defaults() {
        let p = TimeoutPolicy::default();
        assert_eq!(p.seconds(Timeout::TcpFirstPacket), 30);
        assert_eq!(p.seconds(Timeout::TcpEstablished), 86400);
        assert_eq!(p.seconds(Timeout::TcpClosing), 900);
        assert_eq!(p.seconds(Timeout::TcpFinWait), 45);
        assert_eq!(p.seconds(Timeout::OtherFirst), 60);
        assert_eq!(p.seconds(Timeout::OtherMultiple), 60);
        assert_eq!(p.seconds(Timeout::OtherBidir), 30);
        assert_eq!(p.seconds(Timeout::IcmpReply), 30);
        assert_eq!(p.max_seconds(), 86400);
    }

    /// Each class reads its own field: with every field distinct, no two
    /// classes answer the same (several of Open vSwitch's defaults are
    /// equal, so the defaults alone cannot show a class reading a
    /// neighbour's field, SYN_RECV's SYN_SENT's for one).
    #[test]
    fn each_class_reads_its_own_field() {
        let p = TimeoutPolicy {
            tcp_syn_sent: 1,
            tcp_syn_recv: 2,
            tcp_established: 3,
            tcp_fin_wait: 4,
            tcp_time_wait: 5,
            tcp_close: 6,
            udp_first: 7,
            udp_single: 8,
            udp_multiple: 9,
            icmp_first: 10,
            icmp_reply: 11,
        };
        let got: Vec<u32> = Timeout::ALL.iter().map(|&t| p.seconds(t)).collect();
        assert_eq!(got, (1..=11).collect::<Vec<u32>>());
        assert_eq!(p.max_seconds(), 11);
    }

    #[test]
    fn compiled_policy_answers_per_class() {
        let p = TimeoutPolicy {
            udp_first: 5,
            tcp_established: 7200,
            ..TimeoutPolicy::default()
        };
        let c = Compiled::new(p);
        for t in Timeout::ALL {
            assert_eq!(c.millis_of(t as u8), p.millis(t), "{t:?}");
        }
        assert_eq!(c.millis_of(Timeout::OtherFirst as u8), 5_000);
        assert_eq!(c.millis_of(Timeout::TcpEstablished as u8), 7_200_000);
        // Only the low nibble names the class.
        assert_eq!(c.millis_of(Timeout::TcpEstablished as u8 | 0xf0), 7_200_000);
    }
}
