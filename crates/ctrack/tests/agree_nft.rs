//! Agreement with the Linux kernel: for each scenario of `tests/agree/`
//! (a policy, an nftables ruleset meant to decide the same, and traffic),
//! `scripts/nft-agree.py` runs real traffic through a Linux bridge filtered
//! by the ruleset, takes the kernel's verdict for every frame that entered
//! the bridge (forwarded, dropped, or dropped and answered), and compares it
//! with `ctrack replay --policy` on the same frames. See
//! `docs/agreement.md`.
//!
//! Needs root and network namespaces (and nftables, tcpdump, curl, ethtool,
//! iproute2, python3): without them the tests print why and pass, except
//! in CI (`CI` set), where they fail. They hold an exclusive lock on
//! `$TMPDIR/ctrack-netns-tests.lock` while they run, so that no two
//! namespace tests run at once (the namespaces' names carry the script's
//! process id besides).

use std::fs::File;
use std::process::{Command, Stdio};

mod common;

use common::{missing_tool, root, root_user};

/// Why the tests cannot run here, as root, if they cannot (`probe`: a
/// name for a namespace tried and removed).
fn unusable(probe: &str) -> Option<String> {
    if let Some(tool) =
        missing_tool(&["ip", "nft", "tcpdump", "curl", "ethtool", "python3", "ping"])
    {
        return Some(format!("{tool} not found"));
    }
    let added = Command::new("ip")
        .args(["netns", "add", probe])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !added {
        return Some("`ip netns add` fails".into());
    }
    let _ = Command::new("ip").args(["netns", "del", probe]).status();
    None
}

/// Says why the scenario is skipped; in CI, fails instead.
fn skip(scenario: &str, why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "agreement with nftables cannot run in CI: {why}"
    );
    eprintln!("skipped: agreement with nftables ({scenario}): {why}");
}

fn agree(scenario: &str) {
    if !root_user() {
        skip(scenario, "not root");
        return;
    }
    let lock = File::create(std::env::temp_dir().join("ctrack-netns-tests.lock")).unwrap();
    lock.lock().unwrap();
    let probe = format!("ctrack-probe-{}-{scenario}", std::process::id());
    if let Some(why) = unusable(&probe) {
        skip(scenario, &why);
        return;
    }
    let mut cmd = Command::new("python3");
    cmd.current_dir(root())
        .arg("scripts/nft-agree.py")
        .arg(format!("tests/agree/{scenario}.toml"))
        .env("CTRACK", env!("CARGO_BIN_EXE_ctrack"));
    let out = cmd.output().expect("run python3 scripts/nft-agree.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprint!("{text}");
    assert!(
        out.status.success(),
        "{scenario}: nft-agree.py exit {:?}:\n{text}",
        out.status.code()
    );
    // Both halves ran: the kernel's verdicts, and ctrack's compared.
    assert!(
        text.contains(&format!(
            "{scenario}: ctrack agrees with the kernel on all "
        )),
        "{scenario}: no comparison with ctrack:\n{text}"
    );
}

#[test]
fn web_three_tiers_with_rejects() {
    agree("web");
}

#[test]
fn mixed_stateless_and_stateful() {
    agree("mixed");
}

#[test]
fn port_security_against_spoofed_sources() {
    agree("portsec");
}
