//! Capabilities: may this process open ports?

use super::port::IoKind;

const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

/// Checks the effective capabilities (`CapEff` in /proc/self/status); see
/// `crate::io::check_capabilities`.
pub(crate) fn check_capabilities(kind: IoKind) -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let capeff = status.as_deref().and_then(parse_capeff);
    let Some(capeff) = capeff else {
        // No /proc: trust root, and let the sockets say no otherwise.
        // SAFETY: geteuid(2) cannot fail and touches no memory.
        let euid = unsafe { libc::geteuid() };
        return if euid == 0 {
            Ok(())
        } else {
            Err(message(kind, "CAP_NET_RAW"))
        };
    };
    match missing(capeff, kind) {
        None => Ok(()),
        Some(cap) => Err(message(kind, cap)),
    }
}

/// The `CapEff` mask of a /proc/PID/status text.
fn parse_capeff(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

/// The first capability `kind` needs that `capeff` lacks.
fn missing(capeff: u64, kind: IoKind) -> Option<&'static str> {
    let has = |c: u32| capeff & (1u64 << c) != 0;
    if !has(CAP_NET_RAW) {
        return Some("CAP_NET_RAW");
    }
    if !has(CAP_NET_ADMIN) {
        return Some("CAP_NET_ADMIN");
    }
    if kind == IoKind::AfXdp && !has(CAP_BPF) && !has(CAP_SYS_ADMIN) {
        return Some("CAP_BPF");
    }
    None
}

/// The one-line error for a missing `cap`.
fn message(kind: IoKind, cap: &str) -> String {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "ctrack".into());
    let (io, caps) = match kind {
        IoKind::AfPacket => ("", "cap_net_raw,cap_net_admin"),
        IoKind::AfXdp => (" --io af-xdp", "cap_net_raw,cap_net_admin,cap_bpf"),
    };
    format!("ctrack run{io} needs {cap} (run as root or grant it: setcap {caps}+ep {exe})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capeff_parsed() {
        let s = "Name:\tx\nCapPrm:\t0000000000000000\nCapEff:\t000001fffeffffff\n";
        assert_eq!(parse_capeff(s), Some(0x1fffeffffff));
        assert_eq!(parse_capeff("CapEff:\tzz\n"), None);
        assert_eq!(parse_capeff(""), None);
    }

    #[test]
    fn missing_named() {
        let raw = 1u64 << CAP_NET_RAW;
        let admin = 1u64 << CAP_NET_ADMIN;
        let bpf = 1u64 << CAP_BPF;
        assert_eq!(missing(0, IoKind::AfPacket), Some("CAP_NET_RAW"));
        assert_eq!(missing(raw, IoKind::AfPacket), Some("CAP_NET_ADMIN"));
        assert_eq!(missing(raw | admin, IoKind::AfPacket), None);
        assert_eq!(missing(raw | admin, IoKind::AfXdp), Some("CAP_BPF"));
        assert_eq!(missing(raw | admin | bpf, IoKind::AfXdp), None);
        assert_eq!(
            missing(raw | admin | (1 << CAP_SYS_ADMIN), IoKind::AfXdp),
            None
        );
        let m = message(IoKind::AfXdp, "CAP_BPF");
        assert!(
            m.starts_with("ctrack run --io af-xdp needs CAP_BPF (run as root"),
            "{m}"
        );
        assert!(!m.contains('\n'));
    }
}
