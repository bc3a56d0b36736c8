//! Interfaces: index, MAC address, MTU, link type and receive queues.

use std::io;
use std::os::fd::AsRawFd;

use super::os::{self, err};
use super::port::LinkState;

/// What a port needs to know of its interface.
#[derive(Debug, Clone, Copy)]
pub(super) struct Link {
    /// The interface index.
    pub(super) ifindex: u32,
    /// The MTU (bytes of L3 payload).
    pub(super) mtu: usize,
}

/// The error for an interface that does not exist.
fn no_such(ifname: &str) -> io::Error {
    err(
        io::ErrorKind::NotFound,
        format!("no interface named {ifname}"),
    )
}

/// `ifname` as a C string for `ifreq`, checked as Linux checks names.
fn c_name(ifname: &str) -> io::Result<[libc::c_char; libc::IFNAMSIZ]> {
    let bad = ifname.is_empty()
        || ifname.len() >= libc::IFNAMSIZ
        || ifname == "."
        || ifname == ".."
        || ifname
            .bytes()
            .any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace());
    if bad {
        return Err(err(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {ifname:?}"),
        ));
    }
    let mut out = [0 as libc::c_char; libc::IFNAMSIZ];
    for (o, b) in out.iter_mut().zip(ifname.bytes()) {
        *o = b as libc::c_char;
    }
    Ok(out)
}

/// One `SIOCGIF*` ioctl on `ifname`.
fn ifreq(ifname: &str, req: libc::c_ulong) -> io::Result<libc::ifreq> {
    let mut ifr: libc::ifreq = os::zeroed();
    ifr.ifr_name = c_name(ifname)?;
    let sock = os::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
        .map_err(|e| os::ctx(e, ifname, "opening a socket for ioctl"))?;
    // SAFETY: `ifr` is a live, writable `ifreq`, the argument both ioctls
    // take; the kernel writes only inside it.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), req as _, &mut ifr as *mut libc::ifreq) };
    match os::cvt(r) {
        Ok(_) => Ok(ifr),
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Err(no_such(ifname)),
        Err(e) => Err(os::ctx(e, ifname, "reading the interface")),
    }
}

/// The MAC address (and its ARPHRD link type) and the MTU of `ifname`.
pub(super) fn hw(ifname: &str) -> io::Result<([u8; 6], u16, usize)> {
    let r = ifreq(ifname, libc::SIOCGIFHWADDR)?;
    // SAFETY: SIOCGIFHWADDR filled the union's `ifru_hwaddr` member, and
    // every member is plain integers.
    let sa = unsafe { r.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *m = *b as u8;
    }
    let r = ifreq(ifname, libc::SIOCGIFMTU)?;
    // SAFETY: SIOCGIFMTU filled the union's `ifru_mtu` member (an int).
    let mtu = unsafe { r.ifr_ifru.ifru_mtu };
    let mtu = usize::try_from(mtu)
        .map_err(|_| err(io::ErrorKind::InvalidData, format!("{ifname}: MTU {mtu}")))?;
    Ok((mac, sa.sa_family, mtu))
}

/// See `crate::io::interface`.
pub(crate) fn interface(ifname: &str) -> io::Result<([u8; 6], usize)> {
    let (mac, _, mtu) = hw(ifname)?;
    Ok((mac, mtu))
}

/// The index of `ifname`.
fn ifindex(ifname: &str) -> io::Result<u32> {
    let name = c_name(ifname)?;
    // SAFETY: `name` is NUL-terminated (c_name leaves at least one zero
    // byte at the end) and lives across the call.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if i == 0 { Err(no_such(ifname)) } else { Ok(i) }
}

/// See `crate::io::interface_index`.
pub(crate) fn index(ifname: &str) -> io::Result<u32> {
    ifindex(ifname)
}

/// See `crate::io::link_state`.
pub(crate) fn link_state(ifname: &str, index: u32) -> LinkState {
    if ifindex(ifname).ok() != Some(index) {
        return LinkState::Gone;
    }
    let Ok(r) = ifreq(ifname, libc::SIOCGIFFLAGS) else {
        return LinkState::Gone;
    };
    // SAFETY: SIOCGIFFLAGS filled the union's `ifru_flags` member (a
    // short); every member is plain integers.
    let flags = libc::c_int::from(unsafe { r.ifr_ifru.ifru_flags });
    let up = libc::IFF_UP | libc::IFF_RUNNING;
    if flags & up == up {
        LinkState::Up
    } else {
        LinkState::Down
    }
}

/// Index and MTU of `ifname`, which must carry Ethernet frames.
pub(super) fn link(ifname: &str) -> io::Result<Link> {
    let ifindex = ifindex(ifname)?;
    let (_, hatype, mtu) = hw(ifname)?;
    if hatype != libc::ARPHRD_ETHER && hatype != libc::ARPHRD_LOOPBACK {
        return Err(err(
            io::ErrorKind::Unsupported,
            format!("{ifname} is not an Ethernet interface (link type {hatype})"),
        ));
    }
    Ok(Link { ifindex, mtu })
}

/// How many receive queues `ifname` has (the `rx-N` entries of
/// /sys/class/net/IF/queues); 1 when that cannot be read.
pub(super) fn rx_queues(ifname: &str) -> usize {
    c_name(ifname)
        .ok()
        .and_then(|_| std::fs::read_dir(format!("/sys/class/net/{ifname}/queues")).ok())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("rx-")))
                .count()
        })
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_checked() {
        assert!(c_name("eth0").is_ok());
        assert!(c_name("123456789012345").is_ok());
        for bad in [
            "",
            "1234567890123456",
            "a/b",
            "a b",
            "a:1",
            ".",
            "..",
            "a\0b",
        ] {
            let e = c_name(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    #[test]
    fn loopback_known_and_missing_named() {
        let (_, mtu) = interface("lo").unwrap();
        assert!(mtu >= 1280);
        let e = link("ckio-nope0").unwrap_err();
        assert_eq!(e.to_string(), "no interface named ckio-nope0");
        assert_eq!(rx_queues("ckio-nope0"), 1);
    }
}
