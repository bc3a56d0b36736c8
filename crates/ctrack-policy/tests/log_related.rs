//! OVN's `log-related` (an ACL's `options:log-related`): an ACL with
//! `log = true` and `log-related = true` has the replies and related
//! packets of the connections it committed logged too; its connections'
//! original-direction packets are not, and neither are anyone's without
//! the option. Frame by frame and in bursts alike.

mod common;

use common::{each, in_a_burst, plain};
use ctrack_core::{Config, FragConfig, Tracker};
use ctrack_policy::firewall::{AclRef, Action, Firewall, FwOutputs, Stage};
use ctrack_policy::model::Policy;
use ctrack_wire::build::{Frame, L4, quote};
use ctrack_wire::tcp::flags::{ACK, PSH, SYN};

const C_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const S_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const C_IP: [u8; 4] = [10, 0, 0, 1];
const S_IP: [u8; 4] = [10, 0, 0, 2];

/// The web ACL with the lines `opts`; SSH allowed and logged without
/// `log-related`.
fn firewall(opts: &str) -> Firewall<u64> {
    let text = format!(
        r#"
[default]
action = "drop"
[[port]]
name = "client"
addresses = ["02:00:00:00:00:01 10.0.0.1"]
[[port]]
name = "server"
addresses = ["02:00:00:00:00:02 10.0.0.2"]
[[acl]]
name = "web"
direction = "to-lport"
priority = 100
match = 'outport == "server" && tcp.dst == 80'
action = "allow-related"
{opts}
[[acl]]
name = "ssh"
direction = "to-lport"
priority = 100
match = 'outport == "server" && tcp.dst == 22'
action = "allow-related"
log = true
[[acl]]
name = "out"
direction = "from-lport"
priority = 1
match = "ip"
action = "allow-related"
"#
    );
    let p = Policy::from_str(&text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    Firewall::new(Tracker::new(Config::default()), FragConfig::default(), p).unwrap()
}

fn frame(back: bool, l4: L4) -> Vec<u8> {
    let (src, dst, smac, dmac) = if back {
        (S_IP, C_IP, S_MAC, C_MAC)
    } else {
        (C_IP, S_IP, C_MAC, S_MAC)
    };
    let mut f = Frame::v4(src, dst, l4);
    f.eth_src = smac;
    f.eth_dst = dmac;
    f.build()
}

fn seg(sport: u16, dport: u16, flags: u16, seq: u32, ack: u32, data: &[u8]) -> L4 {
    L4::tcp_seg(sport, dport, flags, seq, ack, 65535, data)
}

/// A connection to `port`: handshake, a request, an answer, and an ICMP
/// error from the server's host about the request (related); each with
/// whether it is a reply or related.
fn connection(port: u16) -> Vec<(Vec<u8>, bool)> {
    let request = frame(false, seg(40000, port, PSH | ACK, 2, 101, b"GET"));
    let quoted = quote(
        &Frame::v4(C_IP, S_IP, seg(40000, port, PSH | ACK, 2, 101, b"GET")).ip_packet(),
        8,
    );
    vec![
        (frame(false, seg(40000, port, SYN, 1, 0, b"")), false),
        (frame(true, seg(port, 40000, SYN | ACK, 100, 2, b"")), true),
        (frame(false, seg(40000, port, ACK, 2, 101, b"")), false),
        (request, false),
        (
            frame(true, seg(port, 40000, PSH | ACK, 101, 5, b"200")),
            true,
        ),
        (frame(true, L4::icmp_error(3, 4, &quoted)), true),
    ]
}

/// Which packets of a connection to `port` each path logs, frame by frame
/// and in one burst (which must agree), with the web ACL's lines `opts`.
fn logged(opts: &str, port: u16) -> Vec<bool> {
    let frames: Vec<Vec<u8>> = connection(port).into_iter().map(|(f, _)| f).collect();
    let by_frame = each(&firewall(opts), &frames, &mut FwOutputs::default());
    // In a burst after its first packet (the burst path's session packets
    // are the ones after a commit).
    let fw = firewall(opts);
    let mut st = FwOutputs::default();
    let mut by_burst = in_a_burst(&fw, &frames[..1], &mut st);
    by_burst.extend(in_a_burst(&fw, &frames[1..], &mut st));
    for (a, b) in by_frame.iter().zip(&by_burst) {
        assert_eq!(plain(a), plain(b));
        assert_eq!(a.action, Action::Allow, "{a:?}");
    }
    by_frame.iter().map(|d| d.log).collect()
}

#[test]
fn replies_and_related_packets_are_logged_with_log_related() {
    let replies: Vec<bool> = connection(80).into_iter().map(|(_, r)| r).collect();
    // The SYN is the ACL's own decision; then each reply and the related
    // ICMP error, and nothing of the original direction.
    let mut want = replies.clone();
    want[0] = true;
    assert_eq!(logged("log = true\nlog-related = true", 80), want);
    // Without the option, the ACL's decision alone.
    let first = [true, false, false, false, false, false];
    assert_eq!(logged("log = true", 80), first);
    // The option without `log` does nothing, as in OVN.
    assert_eq!(logged("log-related = true", 80), [false; 6]);
    // Another ACL's connections are not touched by the web ACL's option.
    assert_eq!(logged("log = true\nlog-related = true", 22), first);
}

#[test]
fn a_logged_reply_names_the_acl_and_the_session() {
    let frames: Vec<Vec<u8>> = connection(80).into_iter().map(|(f, _)| f).collect();
    let fw = firewall("log = true\nlog-related = true");
    let ds = each(&fw, &frames, &mut FwOutputs::default());
    assert_eq!((ds[1].stage, ds[1].acl), (Stage::Session, AclRef::Acl(0)));
    assert!(
        ds[5]
            .ct
            .is_some_and(|v| v.state.contains(ctrack_core::CtState::REL))
    );
    assert_eq!(
        fw.policy().policy.acls[0].options_text(),
        " log(severity=info,related)"
    );
}

/// A burst of the server's answers, one MAC pair, after the handshake:
/// the burst's session fast path logs each with the option, none without.
#[test]
fn the_burst_fast_path_logs_replies_with_log_related() {
    for (opts, want) in [
        ("log = true\nlog-related = true", true),
        ("log = true", false),
    ] {
        let fw = firewall(opts);
        let conn = connection(80);
        let mut st = FwOutputs::default();
        let opening: Vec<Vec<u8>> = conn[..3].iter().map(|(f, _)| f.clone()).collect();
        each(&fw, &opening, &mut st);
        let answers: Vec<Vec<u8>> = (0..8u32)
            .map(|i| frame(true, seg(80, 40000, ACK, 101 + 10 * i, 2, &[0x61; 10])))
            .collect();
        let before = st.stats.stages[Stage::Session as usize];
        let ds = in_a_burst(&fw, &answers, &mut st);
        assert_eq!(
            st.stats.stages[Stage::Session as usize] - before,
            8,
            "all by the session"
        );
        for d in &ds {
            assert_eq!(
                (d.action, d.acl, d.log),
                (Action::Allow, AclRef::Acl(0), want)
            );
        }
    }
}
