//! One datapath an interface: each port's interface is claimed by binding
//! an abstract Unix socket named after its index. Abstract names belong to
//! the network namespace, as interface indices do, and the kernel lets go
//! of one when its socket closes, however the process ends (`kill -9`
//! included), so a claim is never left stale, and no file is needed.
//!
//! Two datapaths on one interface would each take in a copy of every frame
//! (an AF_PACKET socket sees all of them) and each send it on: every packet
//! forwarded twice, each copy judged by another connection table.

use std::fs;
use std::io;
use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr};

/// A claimed interface; the claim lasts as long as this value.
#[derive(Debug)]
pub struct PortClaim {
    _sock: OwnedFd,
}

/// The abstract socket name (without its leading NUL) that claims the
/// interface with index `index`.
fn name(index: u32) -> String {
    format!("ctrack/port/if{index}")
}

/// Claims interface `ifname` (index `index`) for this process. Fails, in
/// words that say who holds it where that can be found, if another process
/// has claimed it.
pub(crate) fn claim(ifname: &str, index: u32) -> io::Result<PortClaim> {
    let n = name(index);
    let wrap = |what: &str, e: Errno| {
        io::Error::new(
            io::Error::from(e).kind(),
            format!("{ifname}: claiming the interface ({what} @{n}): {e}"),
        )
    };
    let sock = nix::sys::socket::socket(
        AddressFamily::Unix,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| wrap("socket", e))?;
    let addr = UnixAddr::new_abstract(n.as_bytes()).map_err(|e| wrap("address", e))?;
    match nix::sys::socket::bind(std::os::fd::AsRawFd::as_raw_fd(&sock), &addr) {
        Ok(()) => Ok(PortClaim { _sock: sock }),
        Err(Errno::EADDRINUSE) => {
            let who = match holder(&n) {
                Some(pid) => format!("process {pid}{}", command(pid)),
                None => "another process".to_string(),
            };
            Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "interface {ifname} is already served by {who} (it holds @{n}): two datapaths on one interface would each forward every frame; stop the other first"
                ),
            ))
        }
        Err(e) => Err(wrap("bind", e)),
    }
}

/// The process holding abstract socket `@name`, where this process may
/// see it: its inode from /proc/net/unix, then the process with a
/// descriptor on that inode. Only for an error's words.
fn holder(name: &str) -> Option<u32> {
    let unix = fs::read_to_string("/proc/net/unix").ok()?;
    let want = format!("@{name}");
    // "Num RefCount Protocol Flags Type St Inode Path"
    let inode = unix.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 8 && f[7] == want).then(|| f[6].to_string())
    })?;
    let link = format!("socket:[{inode}]");
    for p in fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == link.as_str()) {
                return Some(pid);
            }
        }
    }
    None
}

/// " (COMMAND)" for process `pid`, or nothing if it cannot be read.
fn command(pid: u32) -> String {
    match fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(c) if !c.trim().is_empty() => format!(" ({})", c.trim()),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index no interface of the test's namespace has (they count up
    /// from 1), different in each test process so that tests run at once
    /// do not meet.
    fn unused_index(k: u32) -> u32 {
        0x4000_0000 + (std::process::id() % 0x10_0000) * 4 + k
    }

    #[test]
    fn a_second_claim_is_refused_and_names_the_holder() {
        let index = unused_index(0);
        let first = claim("test0", index).expect("first claim");
        let e = claim("test0", index).expect_err("second claim");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        let msg = e.to_string();
        assert!(
            msg.contains("interface test0 is already served by"),
            "{msg}"
        );
        // This process holds it; /proc says so where it is mounted, and
        // its command's name.
        if fs::metadata("/proc/net/unix").is_ok() {
            let comm = fs::read_to_string("/proc/self/comm").expect("comm");
            let me = format!("process {} ({})", std::process::id(), comm.trim());
            assert!(msg.contains(&me), "{msg}");
        }
        drop(first);
        let again = claim("test0", index).expect("a claim let go is free again");
        drop(again);
    }

    #[test]
    fn claims_on_other_interfaces_do_not_meet() {
        let a = claim("test1", unused_index(1)).expect("one");
        let b = claim("test2", unused_index(2)).expect("another");
        drop((a, b));
    }
}
