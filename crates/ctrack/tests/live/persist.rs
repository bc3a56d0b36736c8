//! `persist-established` through `ctrack run`'s reloads: an iperf3 stream
//! its ACL committed outlives a change to that ACL's match, and ends with
//! the option's removal, as OVN flushes such an ACL's connections.

use std::time::Duration;

use super::{hup, iperf_cut_by, iperf_stream, policy, setup_with};

/// The iperf3 ACL, named `iperf` (its identity across reloads), taking
/// TCP `port` on the server, with `persist-established` or without.
fn iperf_acl(port: u16, persist: bool) -> String {
    format!(
        "\n[[acl]]\nname = \"iperf\"\ndirection = \"to-lport\"\npriority = 1000\n\
         match = \"outport == \\\"server\\\" && tcp.dst == {port}\"\n\
         action = \"allow-related\"\npersist-established = {persist}\n"
    )
}

/// The stream flows on after a reload (SIGHUP) whose `iperf` ACL no
/// longer matches it but keeps the option, its connection's label holding
/// the ACL's identity; a reload (`ctl policy reload`) that unsets the
/// option stops it at once.
#[test]
fn a_persisted_stream_outlives_its_match_and_ends_with_the_option() {
    let first = policy(false, &iperf_acl(5201, true));
    let Some((mut net, fw)) = setup_with("pe", "af-packet", false, &first) else {
        return;
    };
    iperf_stream(&mut net, &fw);
    let dump = fw.ctl_ok(&net, &["dump-conntrack"]);
    let line = dump
        .lines()
        .find(|l| l.contains("dport=5201") && l.contains("labels=0x"))
        .unwrap_or_else(|| panic!("the stream's connection has no label: {dump}"));
    std::thread::sleep(Duration::from_millis(1500));
    hup(&net, &policy(false, &iperf_acl(5202, true)), 1);
    std::thread::sleep(Duration::from_millis(2500));
    let unset = net.file("unset.toml", &policy(false, &iperf_acl(5202, false)));
    let why = format!("the option was unset (labelled: {line})");
    iperf_cut_by(&mut net, &fw, &unset, &why);
}
