//! The fuzz targets by name: the body each runs, what it counts, and the
//! shape of its input (which tells the campaign driver how to mutate it).
//! The names are those of `fuzz/fuzz_targets/` and `fuzz/corpus/`.

use crate::{Probe, gateway};

/// How a target's input is built, so that mutations keep it meaningful.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// Bytes read raw or decoded with `arbitrary`: byte edits and splices.
    Bytes,
    /// Text: words of the dictionary inserted, and byte edits.
    Text(&'static [&'static [u8]]),
    /// `prefix` bytes, then a frame list (see
    /// [`crate::mutate::encode_frames`]): frames edited, repeated, dropped,
    /// moved, taken from another input.
    Frames {
        /// Bytes before the frame list.
        prefix: usize,
    },
    /// A capture file: edits mostly after its 24-byte header.
    Capture,
}

/// One fuzz target.
#[derive(Debug)]
pub struct Target {
    /// Its name (the cargo-fuzz target's and the corpus folder's).
    pub name: &'static str,
    /// What [`Probe::units`] counts for it.
    pub unit: &'static str,
    /// True if its units are packets (frames, segments, fragments,
    /// records); false for inputs or table operations.
    pub packets: bool,
    /// The body.
    pub run: fn(&[u8], &mut Probe),
    /// How to mutate its inputs.
    pub shape: Shape,
    /// Longest input the driver makes for it.
    pub max_len: usize,
}

/// Words of FTP's control connection.
pub const FTP_WORDS: &[&[u8]] = &[
    b"PORT 10,0,0,1,4,1\r\n",
    b"EPRT |1|10.0.0.1|1025|\r\n",
    b"EPRT |2|fd00::1|1025|\r\n",
    b"227 Entering Passive Mode (10,0,0,1,4,1).\r\n",
    b"229 Entering Extended Passive Mode (|||1025|)\r\n",
    b"USER anonymous\r\n",
    b"PORT ",
    b"EPSV\r\n",
    b"\r\n",
    b"\n",
    b"255,",
    b"|",
];

/// Words of OVN's match language and of the policy [`crate::match_policy`].
pub const MATCH_WORDS: &[&[u8]] = &[
    b"tcp.dst",
    b"ip4.src",
    b"ip6.dst",
    b"inport",
    b"outport",
    b"eth.src",
    b"vlan.vid",
    b"icmp4.type",
    b"ip.proto",
    b"tcp",
    b"udp",
    b"ip4",
    b"nd",
    b"vlan.present",
    b"vlan.pcp",
    b"ip.dscp",
    b"ip.ecn",
    b"vlan.tci",
    b"arp.op",
    b"arp.spa",
    b"arp.tha",
    b"02:00:00:00:00:01",
    b"==",
    b"!=",
    b"<",
    b"<=",
    b">",
    b">=",
    b"&&",
    b"||",
    b"!",
    b"(",
    b")",
    b"{",
    b"}",
    b",",
    b"80",
    b"0x10/0x1f",
    b"10.0.0.0/8",
    b"fd00::/64",
    b"02:00:00:00:00:01",
    b"\"vm1\"",
    b"\"vm9\"",
    b"$clients",
    b"$web_ip4",
    b"@web",
    b"1",
    b"0",
    b" ",
    b"/* c */",
    b"65536",
    b"ct.est",
    b"tcp.flags",
    b"ip.ttl",
    b"icmp6",
    b"arp",
    b"sctp.dst",
    b"eth.dst",
    b"[",
    b"]",
    b"..",
    b"[40]",
    b"[120..127]",
    b"[0..7]",
    b"[128]",
    b"eth.mcast",
    b"eth.bcast",
    b"ip4.mcast",
    b"igmp",
    b"ip6.mcast_flood",
    b"ip6.mcast_all_rtrs",
    b"nd_ns_mcast",
];

const POLICY_WORDS: &[&[u8]] = &[
    b"[[port]]\n",
    b"[[acl]]\n",
    b"[default]\n",
    b"[address_sets]\n",
    b"[port_groups]\n",
    b"name = \"vm1\"\n",
    b"addresses = [\"02:00:00:00:00:01 10.0.0.1\"]\n",
    b"zone = 1\n",
    b"port_security = [\"02:00:00:00:00:01 10.0.0.1/24 fd00::1\"]\n",
    b"enabled = false\n",
    b"direction = \"to-lport\"\n",
    b"direction = \"from-lport\"\n",
    b"priority = 100\n",
    b"match = 'ip4 && tcp.dst == 80'\n",
    b"action = \"allow-related\"\n",
    b"action = \"drop\"\n",
    b"label = 7\n",
    b"nat = \"src=198.51.100.1\"\n",
    b"alg = \"ftp\"\n",
    b"tier = 2\n",
    b"log = true\n",
    b"log-related = true\n",
    b"meter = \"m\"\n",
    b"[meters.m]\n",
    b"rate = 10\n",
    b"burst = 0\n",
    b"unit = \"kbps\"\n",
    b"fair = true\n",
    b"[copp]\n",
    b"reject = \"m\"\n",
    b"\"",
    b"'",
    b"[",
    b"]",
    b"{",
    b"}",
    b",",
    b"=",
    b"\n",
    b"\"\"\"",
];

/// Words of the control protocol and its commands.
const CTL_WORDS: &[&[u8]] = &[
    b"{\"argv\":[",
    b"]}",
    b"\"",
    b",",
    b" ",
    b"\n",
    b"dump-conntrack",
    b"zone=5",
    b"zone=7",
    b"-s",
    b"list",
    b"-p",
    b"tcp",
    b"--src",
    b"10.0.0.1",
    b"--dport",
    b"80",
    b"--state",
    b"ESTABLISHED",
    b"--mark",
    b"--format",
    b"json",
    b"flush",
    b"ct_orig_src=10.0.0.1",
    b"count",
    b"stats",
    b"set-maxconns",
    b"get-maxconns",
    b"ct-set-limits",
    b"ct-get-limits",
    b"ct-del-limits",
    b"default=10",
    b"zone=5,limit=3",
    b"ct-set-timeout",
    b"ct-get-timeout",
    b"ct-del-timeout",
    b"tcp_established=10",
    b"policy",
    b"reload",
    b"show",
    b"counters",
    b"events",
    b"ports",
    b"fdb-show",
    b"fdb/flush",
    b"version",
    b"help",
    b"4294967296",
    b"-1",
];

/// Every target, in the order the driver runs them.
pub static TARGETS: [Target; 13] = [
    t("parse", "frames", true, crate::parse, Shape::Bytes, 4096),
    t(
        "tracker",
        "packets",
        true,
        crate::tracker,
        Shape::Bytes,
        16_384,
    ),
    t(
        "tracker_frames",
        "frames",
        true,
        crate::tracker_frames_bytes,
        Shape::Frames { prefix: 0 },
        65_536,
    ),
    t(
        "capture",
        "records",
        true,
        crate::capture,
        Shape::Capture,
        65_536,
    ),
    t("table", "ops", false, crate::table, Shape::Bytes, 8192),
    t(
        "ftp",
        "segments",
        true,
        crate::ftp,
        Shape::Text(FTP_WORDS),
        8192,
    ),
    t(
        "reassembly",
        "fragments",
        true,
        crate::reassembly,
        Shape::Bytes,
        4096,
    ),
    t(
        "pipeline_frames",
        "frames",
        true,
        gateway::pipeline_frames_bytes,
        Shape::Frames { prefix: 1 },
        65_536,
    ),
    t(
        "firewall_frames",
        "frames",
        true,
        crate::firewall_frames_bytes,
        Shape::Frames { prefix: 1 },
        65_536,
    ),
    t(
        "policy_file",
        "inputs",
        false,
        crate::policy_file,
        Shape::Text(POLICY_WORDS),
        8192,
    ),
    t(
        "match_expr",
        "inputs",
        false,
        crate::match_expr,
        Shape::Text(MATCH_WORDS),
        1024,
    ),
    t(
        "classifier_diff",
        "inputs",
        false,
        crate::classifier_diff,
        Shape::Bytes,
        2048,
    ),
    t(
        "ctl_request",
        "requests",
        false,
        crate::ctl_request,
        Shape::Text(CTL_WORDS),
        4096,
    ),
];

const fn t(
    name: &'static str,
    unit: &'static str,
    packets: bool,
    run: fn(&[u8], &mut Probe),
    shape: Shape,
    max_len: usize,
) -> Target {
    Target {
        name,
        unit,
        packets,
        run,
        shape,
        max_len,
    }
}

/// The target called `name`.
pub fn find(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
