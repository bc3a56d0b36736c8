//! The control server's commands end to end: a `Shared` built by hand,
//! connections made by real frames through the firewall, and every
//! command asked through the client over a real Unix socket.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use common::{CLIENT, Env, GUEST, POLICY, SERVER, lines, raw};
use ctrack_datapath::ctl::client::{Client, ClientError};
use ctrack_wire::build::L4;

#[test]
fn dump_conntrack_in_ovs_format_with_and_without_counters() {
    let mut env = Env::new();
    env.populate();
    let all = env.ok(&["dump-conntrack"]);
    assert_eq!(lines(&all).len(), 3, "{all}");
    assert!(!all.contains("packets="), "{all}");
    let z5 = env.ok(&["dump-conntrack", "zone=5"]);
    assert_eq!(lines(&z5).len(), 2, "{z5}");
    assert!(
        z5.starts_with(
            "tcp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=80),\
             reply=(src=10.0.0.2,dst=10.0.0.1,sport=80,dport=40000),zone=5,timeout="
        ),
        "{z5}"
    );
    assert!(z5.contains("protoinfo=(state=ESTABLISHED)"), "{z5}");
    let s = env.ok(&["dpctl/dump-conntrack", "-s", "zone=7"]);
    assert_eq!(lines(&s).len(), 1, "{s}");
    assert!(s.contains("dport=80,packets=2,bytes="), "{s}");
    let j: serde_json::Value =
        serde_json::from_str(&env.ok(&["dump-conntrack", "--format", "json"])).unwrap();
    assert_eq!(j.as_array().map(Vec::len), Some(3));
    assert_eq!(env.ok(&["dump-conntrack", "zone=99"]), "");
    assert!(env.fails(&["dump-conntrack", "zone=x"]).contains("zone"));
    assert!(
        env.fails(&["dump-conntrack", "-q"])
            .contains("unknown option -q")
    );
}

#[test]
fn list_in_conntrack_format_with_filters() {
    let mut env = Env::new();
    env.populate();
    let all = env.ok(&["list"]);
    let l = lines(&all);
    assert_eq!(l.len(), 3, "{all}");
    // Sorted by zone, then protocol: zone 5's TCP, zone 5's UDP, zone 7's.
    let tcp = l[0];
    assert!(tcp.starts_with("tcp      6 86"), "{tcp}");
    assert!(
        tcp.ends_with(
            " ESTABLISHED src=10.0.0.1 dst=10.0.0.2 sport=40000 dport=80 \
             src=10.0.0.2 dst=10.0.0.1 sport=80 dport=40000 [ASSURED] mark=0 zone=5 use=1"
        ),
        "{tcp}"
    );
    let udp = l[1];
    assert!(udp.starts_with("udp      17 "), "{udp}");
    assert!(
        udp.ends_with(
            " src=10.0.0.1 dst=10.0.0.2 sport=5000 dport=53 [UNREPLIED] \
             src=10.0.0.2 dst=10.0.0.1 sport=53 dport=5000 mark=0 zone=5 use=1"
        ),
        "{udp}"
    );
    let n = |argv: &[&str]| {
        let mut a = vec!["list"];
        a.extend_from_slice(argv);
        lines(&env.ok(&a)).len()
    };
    assert_eq!(n(&["-p", "tcp"]), 2);
    assert_eq!(n(&["--proto=17"]), 1);
    assert_eq!(n(&["--src", "10.0.0.3"]), 1);
    assert_eq!(n(&["-s", "10.0.0.0/24"]), 3);
    assert_eq!(n(&["--dst", "10.0.0.2"]), 3);
    assert_eq!(n(&["--dst", "10.0.0.1"]), 0);
    assert_eq!(n(&["--sport", "40000"]), 1);
    assert_eq!(n(&["--dport", "80"]), 2);
    assert_eq!(n(&["--dport", "80", "--zone", "7"]), 1);
    assert_eq!(n(&["-w", "5"]), 2);
    assert_eq!(n(&["--mark", "0"]), 3);
    assert_eq!(n(&["--mark", "1"]), 0);
    assert_eq!(n(&["--mark", "1/0"]), 3);
    assert_eq!(n(&["--state", "established"]), 2);
    assert_eq!(n(&["--state", "SYN_SENT"]), 0);
    let j: serde_json::Value =
        serde_json::from_str(&env.ok(&["list", "-p", "udp", "--format", "json"])).unwrap();
    let a = j.as_array().unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0]["zone"], 5);
    assert_eq!(a[0]["orig"]["dport"], 53);
    assert_eq!(a[0]["reply"]["packets"], 0);
    assert!(
        env.fails(&["list", "-p", "nope"])
            .contains("unknown protocol")
    );
    assert!(
        env.fails(&["list", "--src", "10.0.0.0/40"])
            .contains("prefix")
    );
    assert!(env.fails(&["list", "--sport"]).contains("needs a value"));
    assert!(
        env.fails(&["list", "extra"])
            .contains("unexpected argument")
    );
}

#[test]
fn count_and_flush_by_tuple_zone_and_all() {
    let mut env = Env::new();
    env.populate();
    assert_eq!(env.ok(&["count"]), "3");
    assert_eq!(env.ok(&["count", "zone=5"]), "2");
    assert_eq!(env.ok(&["ct-get-nconns", "zone=7"]), "1");
    // A whole tuple, from its reply side too (zone 5 given).
    env.ok(&[
        "flush",
        "zone=5",
        "ct_nw_src=10.0.0.2,ct_nw_dst=10.0.0.1,ct_nw_proto=17,ct_tp_src=53,ct_tp_dst=5000",
    ]);
    assert_eq!(env.ok(&["count", "zone=5"]), "1");
    let again = env.fails(&[
        "flush",
        "zone=5",
        "ct_nw_src=10.0.0.2,ct_nw_dst=10.0.0.1,ct_nw_proto=17,ct_tp_src=53,ct_tp_dst=5000",
    ]);
    assert!(again.contains("no connection"), "{again}");
    // Without zone=N the tuple is zone 0's: nothing there.
    env.fails(&["flush", "ct_nw_src=10.0.0.3"]);
    // A partial tuple matches every connection with those fields.
    env.ok(&["flush", "zone=7", "ct_nw_src=10.0.0.3,ct_nw_proto=6"]);
    assert_eq!(env.ok(&["count", "zone=7"]), "0");
    env.handshake(GUEST, 41001, 80);
    env.ok(&["flush", "zone=5"]);
    assert_eq!(env.ok(&["count"]), "1");
    env.ok(&["flush-conntrack"]);
    assert_eq!(env.ok(&["count"]), "0");
    assert!(
        env.fails(&["flush", "bogus=1"])
            .contains("unknown tuple field")
    );
    assert!(
        env.fails(&["flush", "zone=1", "zone=2"])
            .contains("one zone")
    );
    let st: serde_json::Value =
        serde_json::from_str(&env.ok(&["stats", "--format", "json"])).unwrap();
    assert_eq!(st["tracker"]["flushed"], 4, "{st}");
}

#[test]
fn flush_by_partial_tuples_compares_every_field_given() {
    let mut env = Env::new();
    env.populate();
    env.send(CLIENT, SERVER, L4::icmp_query(8, 7, 1));
    assert_eq!(env.ok(&["count", "zone=5"]), "3");
    // A source port no connection has: nothing flushed.
    let none = env.fails(&["flush", "zone=5", "ct_nw_proto=6,ct_tp_src=40001"]);
    assert!(none.contains("no connection"), "{none}");
    env.ok(&["flush", "zone=5", "ct_nw_proto=6,ct_tp_src=40000"]);
    assert_eq!(env.ok(&["count", "zone=5"]), "2");
    // The echo: its type and code are compared too.
    let none = env.fails(&["flush", "zone=5", "ct_nw_proto=1,icmp_type=8,icmp_code=1"]);
    assert!(none.contains("no connection"), "{none}");
    env.ok(&[
        "flush",
        "zone=5",
        "ct_nw_proto=1,icmp_type=8,icmp_code=0,icmp_id=7",
    ]);
    assert_eq!(env.ok(&["count", "zone=5"]), "1");
    // One tuple at most: the original direction's.
    let two = env.fails(&["flush", "zone=5", "ct_nw_proto=17", "ct_nw_dst=10.0.0.2"]);
    assert!(two.contains("one tuple at most"), "{two}");
    assert_eq!(env.ok(&["count", "zone=5"]), "1");
}

#[test]
fn maxconns_limits_and_timeouts_round_trip() {
    let mut env = Env::new();
    env.populate();
    env.ok(&["set-maxconns", "5000"]);
    assert_eq!(env.ok(&["get-maxconns"]), "5000");
    assert_eq!(env.ok(&["ct-get-maxconns"]), "5000");
    env.fails(&["set-maxconns", "0"]);
    // Past the table's ceiling (its 64 shards of 2^23), the bound of
    // `ctrack run --max-conns` too; until 2026-12-01 it was 64 Mi here
    // against 512 Mi there.
    let e = env.fails(&["set-maxconns", "536870913"]);
    assert!(e.contains("maxconns must be 1..=536870912"), "{e}");
    env.fails(&["set-maxconns", "99999999999"]);
    env.fails(&["set-maxconns"]);

    assert_eq!(env.ok(&["ct-get-limits"]), "default limit=0\n");
    env.ok(&[
        "ct-set-limits",
        "default=10",
        "zone=5,limit=3",
        "zone=9,limit=0",
    ]);
    assert_eq!(
        env.ok(&["ct-get-limits"]),
        "default limit=10\nzone=5,limit=3,count=2\nzone=9,limit=0,count=0\n"
    );
    assert_eq!(
        env.ok(&["ct-get-limits", "zone=7"]),
        "default limit=10\nzone=7,limit=10,count=1\n"
    );
    env.ok(&["ct-del-limits", "zone=5,9"]);
    assert_eq!(env.ok(&["ct-get-limits"]), "default limit=10\n");
    assert_eq!(
        env.ok(&["ct-get-limits", "zone=5"]),
        "default limit=10\nzone=5,limit=10,count=2\n"
    );
    env.fails(&["ct-set-limits", "zone=5"]);
    env.fails(&["ct-set-limits", "zone=5,limit=x"]);
    env.fails(&["ct-del-limits"]);

    let before = env.ok(&["ct-get-timeout", "zone=5"]);
    assert!(
        before.starts_with("Zone:5, Timeout Policies: tcp_syn_sent=30 "),
        "{before}"
    );
    assert!(before.contains(" tcp_established=86400 ") && before.ends_with(" (default)\n"));
    env.ok(&[
        "ct-set-timeout",
        "zone=5",
        "tcp_established=100",
        "udp_first=7",
    ]);
    let after = env.ok(&["ct-get-timeout", "zone=5"]);
    assert!(
        after.contains(" tcp_established=100 ") && after.contains(" udp_first=7 "),
        "{after}"
    );
    // It applies to existing connections at once.
    let est = env.ok(&["list", "-p", "tcp", "--zone", "5"]);
    let secs: u64 = est.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(secs <= 100, "{est}");
    let j: serde_json::Value =
        serde_json::from_str(&env.ok(&["ct-get-timeout", "zone=5", "--format", "json"])).unwrap();
    assert_eq!(j["timeouts"]["tcp_established"], 100);
    assert_eq!(j["own"], true);
    env.ok(&["ct-del-timeout", "zone=5"]);
    assert_eq!(env.ok(&["ct-get-timeout", "zone=5"]), before);
    assert!(
        env.fails(&["ct-set-timeout", "zone=5", "tcp_bogus=5"])
            .contains("tcp_established")
    );
    env.fails(&["ct-set-timeout", "tcp_established=5"]);
    env.fails(&["ct-set-timeout", "zone=5", "tcp_established=0"]);
    env.fails(&["ct-get-timeout"]);
}

#[test]
fn stats_ports_and_policy_counters() {
    let mut env = Env::new();
    env.populate();
    let st: serde_json::Value =
        serde_json::from_str(&env.ok(&["stats", "--format", "json"])).unwrap();
    assert_eq!(st["connections"]["total"], 3);
    assert_eq!(st["connections"]["max"], 10_000);
    let zones = st["connections"]["zones"].as_array().unwrap();
    let z5 = zones.iter().find(|z| z["zone"] == 5).unwrap();
    assert_eq!(z5["count"], 2);
    assert_eq!(st["verdicts"]["allow"], 7);
    assert_eq!(st["verdicts"]["drop"], 0);
    assert!(st["stages"]["to-lport"].as_u64().unwrap() >= 2);
    assert_eq!(st["drops"]["invalid"], 0);
    assert_eq!(st["switch"]["drops"]["port-security"], 0);
    assert_eq!(st["tracker"]["committed"], 3);
    // The reassembler's counters, none of them moved (no fragment sent).
    assert_eq!(st["fragments"]["held"], 0, "{st}");
    assert_eq!(st["fragments"]["evicted"], 0, "{st}");
    assert_eq!(st["policy"]["generation"], 1);
    let web = st["policy"]["acls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["acl"] == "web")
        .unwrap();
    assert_eq!(
        (web["direction"].as_str(), web["priority"].as_u64()),
        (Some("to-lport"), Some(1000))
    );
    assert_eq!(web["conns"], 2, "{st:#}");
    assert!(web["bytes"].as_u64().unwrap() > 0);
    assert_eq!(st["ports"][0]["interface"], "veth0");
    assert_eq!(st["ports"][0]["mac"], "02:00:00:00:00:01");
    assert_eq!(st["ports"][0]["rx_packets"], 1);
    assert_eq!(st["events"]["dropped"], 0);
    let text = env.ok(&["stats"]);
    for want in [
        "connections: 3",
        "verdicts: allow=7",
        "drops (switch):",
        "port-security=0",
        "zone 5: 2",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
    let ports = env.ok(&["ports"]);
    assert!(
        ports.contains("client (veth0): link up, mac 02:00:00:00:00:01 mtu 1500; rx 1 packets"),
        "{ports}"
    );
    // The link as the housekeeping thread last found it.
    assert_eq!(st["ports"][0]["link"], "up");
    env.shared.set_link(0, ctrack_datapath::io::LinkState::Gone);
    let ports = env.ok(&["ports", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&ports).expect("JSON");
    assert_eq!(v[0]["link"], "gone", "{v:#}");
    env.shared.set_link(0, ctrack_datapath::io::LinkState::Up);
    let counters = env.ok(&["policy", "counters"]);
    assert!(counters.starts_with("policy generation 1:\n"), "{counters}");
    assert!(counters.contains("web "), "{counters}");
    let show = env.ok(&["policy", "show"]);
    assert!(
        show.contains("generation 1, default allow, stateful"),
        "{show}"
    );
    assert!(
        show.contains("to-lport tier 0: 1 ACLs, compiled to 1 rule ("),
        "{show}"
    );
    assert!(!show.contains('{') && !show.contains("Some("), "{show}");
    assert!(show.contains("priority=1000  web"), "{show}");
    assert!(show.contains("conns=2"), "{show}");
    env.fails(&["policy"]);
    env.fails(&["policy", "frob"]);
}

#[test]
fn policy_reload_good_and_bad() {
    let mut env = Env::new();
    env.populate();
    assert!(
        env.ok(&["policy", "reload"])
            .starts_with("policy generation 2 loaded from ")
    );
    let other = env.dir.join("other.toml");
    std::fs::write(&other, POLICY.replace("priority = 1000", "priority = 900")).unwrap();
    let r = env.ok(&["policy", "reload", other.to_str().unwrap()]);
    assert_eq!(
        r,
        format!("policy generation 3 loaded from {}", other.display())
    );
    assert!(env.ok(&["policy", "show"]).contains("priority=900"));
    let bad = env.dir.join("bad.toml");
    std::fs::write(&bad, "[[acl]]\nname = \"x\"\ndirection = \"sideways\"\n").unwrap();
    let e = env.fails(&["policy", "reload", bad.to_str().unwrap()]);
    assert!(e.contains("bad.toml"), "{e}");
    let e = env.fails(&["policy", "reload", "/nonexistent/p.toml"]);
    assert!(e.contains("cannot read"), "{e}");
    // A policy without a port an interface is bound to: the interface's
    // frames would be no port's.
    let unbound = env.dir.join("unbound.toml");
    std::fs::write(
        &unbound,
        "[[port]]\nname = \"client\"\naddresses = [\"02:00:00:00:00:01 10.0.0.1\"]\n",
    )
    .unwrap();
    let e = env.fails(&["policy", "reload", unbound.to_str().unwrap()]);
    assert!(
        e.contains("no port \"server\", which interface veth1 is bound to (--port server=veth1)"),
        "{e}"
    );
    // The running policy stays, and so does its file.
    assert_eq!(env.shared.fw.policy().generation, 3);
    assert!(env.ok(&["policy", "reload"]).ends_with("other.toml"));
    assert_eq!(env.shared.fw.policy().generation, 4);
}

#[test]
fn garbage_gets_error_replies_and_the_server_keeps_serving() {
    let env = Env::new();
    let err = |line: &str| {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert_eq!(v["ok"], false, "{line}");
        v["error"].as_str().unwrap().to_owned()
    };
    assert!(err(&raw(&env.sock, b"not json\n")).contains("invalid request"));
    assert!(err(&raw(&env.sock, b"{\"argv\": 5}\n")).contains("invalid request"));
    assert!(err(&raw(&env.sock, b"{\"argv\": [], \"x\": 1}\n")).contains("invalid request"));
    assert!(err(&raw(&env.sock, b"\xff\xfe\x00\n")).contains("invalid request"));
    assert!(err(&raw(&env.sock, b"{\"argv\": []}\n")).contains("empty request"));
    let huge = vec![b'a'; 70 * 1024];
    assert!(err(&raw(&env.sock, &huge)).contains("over 65536 bytes"));
    let many = serde_json::json!({"argv": vec!["count"; 300]}).to_string() + "\n";
    assert!(err(&raw(&env.sock, many.as_bytes())).contains("over 256"));
    // A command's errors keep the connection.
    let mut c = Client::connect(&env.sock).unwrap();
    for bad in [
        &["frobnicate"][..],
        &["count", "zone=70000"],
        &["flush", "ct_tp_src=99999"],
        &["ct-set-limits", "default=-1"],
    ] {
        match c.request(bad) {
            Err(ClientError::Failed(m)) => assert!(m.starts_with(bad[0]), "{m}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert_eq!(c.request(&["count"]).unwrap(), "0");
    assert!(c.request(&["version"]).unwrap().starts_with("ctrack "));
    assert!(c.request(&["help"]).unwrap().contains("dump-conntrack"));
    // A request without its newline, then the end: still answered.
    let mut s = UnixStream::connect(&env.sock).unwrap();
    s.write_all(br#"{"argv":["count"]}"#).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert_eq!(out, "{\"ok\":true,\"text\":\"0\"}\n");
    assert_eq!(env.ok(&["count"]), "0");
}

/// The control commands' arguments where a mutation round found the
/// tests above silent (docs/fuzzing.md, round 29): the zone a tuple
/// without `zone=N` names, a tuple of addresses alone, a destination and
/// an ICMP field compared as what they are, the default limit beside a
/// limit of the highest zone, and a timeout command that sets nothing.
#[test]
fn control_arguments_at_their_edges() {
    use ctrack_core::{CtAction, LinkType, Stats};
    use ctrack_wire::build::Frame;
    let mut env = Env::new();
    env.populate();
    // The same UDP flow committed in zones 0 and 1, by the tracker alone
    // (every port of the policy has a zone of its own).
    let t = env.shared.fw.tracker();
    let frame = Frame::v4([10, 0, 0, 8], [10, 0, 0, 9], L4::udp(7000, 7001, b"x")).build();
    for zone in [0, 1] {
        let action = CtAction {
            zone,
            commit: true,
            ..CtAction::default()
        };
        let v = t.process(
            &frame,
            LinkType::Ethernet,
            &action,
            env.shared.now(),
            &mut Stats::default(),
        );
        assert!(v.committed, "{v:?}");
    }
    assert_eq!(env.ok(&["count", "zone=0"]), "1");
    let tuple =
        "ct_nw_src=10.0.0.8,ct_nw_dst=10.0.0.9,ct_nw_proto=17,ct_tp_src=7000,ct_tp_dst=7001";
    env.ok(&["flush", tuple]);
    assert_eq!(env.ok(&["count", "zone=0"]), "0");
    assert_eq!(env.ok(&["count", "zone=1"]), "1");

    // Addresses and a protocol without ports: every connection between
    // them, whatever its ports.
    env.handshake(CLIENT, 40001, 80);
    assert_eq!(env.ok(&["count", "zone=5"]), "3");
    env.ok(&[
        "flush",
        "zone=5",
        "ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.2,ct_nw_proto=6",
    ]);
    assert_eq!(env.ok(&["count", "zone=5"]), "1");
    // The UDP connection left goes from 10.0.0.1: no connection goes to
    // it, and an ICMP field matches no UDP connection.
    env.fails(&["flush", "zone=5", "ct_nw_dst=10.0.0.1"]);
    env.fails(&["flush", "zone=5", "ct_nw_src=10.0.0.1,icmp_id=0"]);
    env.fails(&["flush", "zone=5", "ct_nw_src=10.0.0.1,icmp_type=0"]);
    assert_eq!(env.ok(&["count", "zone=5"]), "1");

    // The default limit is that of the zones given none, whichever zones
    // have one (the highest here).
    env.ok(&["ct-set-limits", "default=10", "zone=65535,limit=3"]);
    assert_eq!(
        env.ok(&["ct-get-limits"]),
        "default limit=10\nzone=65535,limit=3,count=0\n"
    );
    // A timeout command with a zone and nothing to set is refused, and
    // leaves the zone on the defaults.
    let before = env.ok(&["ct-get-timeout", "zone=5"]);
    assert!(
        env.fails(&["ct-set-timeout", "zone=5"])
            .contains("NAME=SECS")
    );
    assert_eq!(env.ok(&["ct-get-timeout", "zone=5"]), before);
    assert!(before.ends_with(" (default)\n"), "{before}");
}

/// What the reports say where a mutation round found the test above
/// silent (docs/fuzzing.md, round 31): ACLs in evaluation order (stage,
/// tier, then priority, highest first) and each under its own tier,
/// ports numbered from 1, a zone's limit, the text form's numbers alone,
/// the workers' time a packet without the idle time, packets a round,
/// and no address of a policy port that no interface is bound to.
#[test]
fn reports_follow_the_evaluation_order_and_say_what_they_count() {
    let mut env = Env::new();
    env.populate();
    let tiers = env.dir.join("tiers.toml");
    let acl = |name: &str, dir: &str, tier: u8, priority: u16| {
        format!(
            "[[acl]]\nname = \"{name}\"\ndirection = \"{dir}\"\ntier = {tier}\npriority = {priority}\nmatch = \"tcp.dst == {priority}\"\naction = \"allow-related\"\n"
        )
    };
    let ports = POLICY.split("[[acl]]").next().unwrap().to_owned();
    let text = [
        ports,
        acl("to-low", "to-lport", 0, 10),
        acl("from-t1", "from-lport", 1, 500),
        acl("to-high", "to-lport", 0, 900),
        acl("from-t0", "from-lport", 0, 20),
        acl("to-t2", "to-lport", 2, 30),
    ]
    .concat();
    std::fs::write(&tiers, text).unwrap();
    env.ok(&["policy", "reload", tiers.to_str().unwrap()]);
    let counters: serde_json::Value =
        serde_json::from_str(&env.ok(&["policy", "counters", "--format", "json"])).unwrap();
    let order: Vec<&str> = counters["acls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["acl"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["from-t0", "from-t1", "to-high", "to-low", "to-t2"]);
    let show = env.ok(&["policy", "show"]);
    assert!(show.contains("port client (1): zone 5,"), "{show}");
    assert!(show.contains("port guest (3): zone 9,"), "{show}");
    let section = |head: &str| -> Vec<String> {
        let start = show
            .find(head)
            .unwrap_or_else(|| panic!("{head} in {show}"));
        show[start..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_owned())
            .collect()
    };
    assert_eq!(section("from-lport tier 0: 1 ACLs"), ["from-t0"]);
    assert_eq!(section("from-lport tier 1: 1 ACLs"), ["from-t1"]);
    assert_eq!(section("to-lport tier 0: 2 ACLs"), ["to-high", "to-low"]);
    assert_eq!(section("to-lport tier 2: 1 ACLs"), ["to-t2"]);
    assert!(!show.contains("tier 3"), "no empty tier: {show}");
    assert!(!show.contains("to-lport tier 1"), "no empty tier: {show}");

    env.ok(&["ct-set-limits", "zone=5,limit=3"]);
    {
        let mut w = env.shared.workers[0].lock().unwrap();
        w.cost.packets = 10;
        w.cost.rounds = 4;
        w.cost.total_ns = 1_000_000;
    }
    let st: serde_json::Value =
        serde_json::from_str(&env.ok(&["stats", "--format", "json"])).unwrap();
    let zones = st["connections"]["zones"].as_array().unwrap();
    let z5 = zones.iter().find(|z| z["zone"] == 5).unwrap();
    assert_eq!((&z5["count"], &z5["limit"]), (&2.into(), &3.into()), "{st}");
    assert_eq!(st["cost"]["packets_per_round"], 2.5, "{st}");
    assert!(st["cost"]["ns_per_packet"].get("idle").is_none(), "{st}");
    assert!(st["cost"]["share"].get("idle").is_some(), "{st}");
    let text = env.ok(&["stats"]);
    assert!(!text.contains('{') && !text.contains('"'), "{text}");

    // The guest's port is in the policy but bound to no interface here.
    let fdb: serde_json::Value =
        serde_json::from_str(&env.ok(&["fdb-show", "--format", "json"])).unwrap();
    let macs: Vec<&str> = fdb["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["mac"].as_str().unwrap())
        .collect();
    assert!(macs.contains(&"02:00:00:00:00:01"), "{fdb}");
    assert!(!macs.contains(&"02:00:00:00:00:03"), "{fdb}");
}

/// The datapath's clock runs: connections age by it, and what `list`
/// says of their time left with it. (And the counters have a place for
/// every port from the start.)
#[test]
fn the_datapaths_clock_runs() {
    let env = Env::new();
    let a = env.shared.now();
    std::thread::sleep(std::time::Duration::from_millis(30));
    let b = env.shared.now();
    assert!(b.millis_since(a) >= 30, "{a:?} {b:?}");
    // Before any worker has published: a (zero) counter for every port.
    assert_eq!(env.shared.stats().ports.len(), 2);
}
