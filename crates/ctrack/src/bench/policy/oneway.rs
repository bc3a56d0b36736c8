//! `bench policy oneway`: the later packets of connections that are
//! committed but have seen no reply (`+new`: one-way UDP flows, which is
//! what a generator such as `scripts/live-bench.py`'s `trafgen` sends),
//! decided by the connection's verdict word, against the same policy with
//! one more ACL that reads `ip.ttl` and matches nothing, which keeps the
//! ACLs meeting every such packet (docs/firewall.md, "The session").

use anyhow::{Result, bail};
use ctrack_core::FragConfig;
use ctrack_policy::expr::Expr;
use ctrack_policy::firewall::{Firewall, FwStats};
use ctrack_policy::key::{Field, flag};
use ctrack_policy::model::{AclAction, Policy};

use super::{
    PolicyBenchArgs, Proto, Report, Traffic, acl, frame, fw_rate, judge_all, policy, report,
    ring_len, rules_name, tracker,
};

/// `p` with an ACL, last and of the lowest priority, that reads `ip.ttl`
/// and matches nothing.
fn with_ttl_acl(mut p: Policy) -> Policy {
    let never = Expr::And(vec![
        Expr::flags(flag::IP),
        Expr::eq(Field::IpTtl, 0),
        Expr::eq(Field::IpTtl, 1),
    ]);
    p.acls.push(acl(p.acls.len(), 0, AclAction::Drop, never));
    p
}

/// A firewall of `p` with `conns` one-way UDP connections committed (each
/// connection's first packet, no answer).
fn one_way(p: Policy, conns: u64, t: Traffic) -> Result<Firewall<()>> {
    let fw = Firewall::new(tracker(), FragConfig::default(), p)?;
    let mut frames: Vec<Vec<u8>> = (0..conns).map(|i| frame(t, i, false)).collect();
    let passed = judge_all(&fw, &mut frames, &mut FwStats::default());
    if passed != conns || fw.tracker().table_len() as u64 != conns {
        bail!("{passed} of {conns} opening packets passed");
    }
    Ok(fw)
}

/// The ring: connection `k × 7919 mod conns` for the `k`-th packet, the
/// original direction only.
fn ring(a: &PolicyBenchArgs) -> Vec<Vec<u8>> {
    (0..ring_len(a))
        .map(|k| frame(Traffic::of(a), (k * 7919) % a.conns, false))
        .collect()
}

pub(super) fn oneway(a: &PolicyBenchArgs) -> Result<Report> {
    if a.proto != Proto::Udp {
        bail!("`oneway` sends UDP (--proto udp)");
    }
    let mut rows = Vec::new();
    let mut text = format!(
        "one-way UDP{} (`+new` packets of committed connections), {} connections, {} ACLs in front, a ring of {} frames, one core:\n",
        if a.ipv6 { " over IPv6" } else { "" },
        a.conns,
        rules_name(a.rules),
        ring_len(a)
    );
    for &n in &a.acls {
        let t = Traffic::of(a);
        let p = policy(n, AclAction::AllowRelated, t, a.rules);
        let words = one_way(p.clone(), a.conns, t)?;
        let acls = one_way(with_ttl_acl(p), a.conns, t)?;
        let mut r = ring(a);
        let (w, w_runs) = fw_rate(&words, &mut r, a)?;
        let (c, c_runs) = fw_rate(&acls, &mut r, a)?;
        text += &format!(
            "  {n:>6} ACLs: by the connections' words {w:.2} Mpps, by the ACLs {c:.2} Mpps: {:.2}x\n",
            w / c
        );
        rows.push(serde_json::json!({
            "acls": n, "words_mpps": w, "words_runs": w_runs,
            "acls_mpps": c, "acls_runs": c_runs, "speedup": w / c,
        }));
    }
    Ok(report(
        "policy oneway",
        serde_json::json!({"conns": a.conns, "ipv6": a.ipv6, "rules": a.rules, "ring": ring_len(a), "rows": rows}),
        text,
    ))
}
