//! FTP through `ctrack run` with the FTP gateway and SNAT (the policy's
//! `ftp` ACL): passive and active transfers, and transfers that go on
//! through a policy reload that keeps FTP allowed.

use std::time::Duration;

use super::net::{CLIENT_IP, CLIENT_MAC, Net, SERVER_IP};
use super::{SNAT_IP, first_lines, hup, policy, setup};

/// Starts pyftpdlib on the server, serving one file of `len` bytes, and
/// has the server answer the SNAT address at the client's MAC, as a router
/// in front of the client would have it. The file's URL and contents.
fn ftp_server(net: &mut Net, len: usize) -> (String, String) {
    let s = net.s.clone();
    let o = net.run(
        &s,
        &[
            "ip", "neigh", "add", SNAT_IP, "lladdr", CLIENT_MAC, "dev", "s0",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let root = net.dir.join("ftp");
    std::fs::create_dir_all(&root).expect("ftp root");
    let body: String = (0..len)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    std::fs::write(root.join("file.txt"), &body).expect("ftp file");
    let root_s = root.display().to_string();
    net.spawn(
        &s,
        "ftpd",
        &[
            ftp_python(),
            "-m",
            "pyftpdlib",
            "-i",
            SERVER_IP,
            "-p",
            "21",
            "-d",
            &root_s,
        ],
    );
    (format!("ftp://{SERVER_IP}/file.txt"), body)
}

/// curl's arguments for a passive (`--disable-epsv`: PASV) or an active
/// (`--disable-eprt --ftp-port`: PORT) transfer.
fn mode(active: bool) -> Vec<&'static str> {
    match active {
        false => vec!["--disable-epsv"],
        true => vec!["--disable-eprt", "--ftp-port", CLIENT_IP],
    }
}

/// FTP through SNAT with the FTP gateway, passive and active.
#[test]
fn ftp_through_snat() {
    let Some((mut net, fw)) = setup("ft", "af-packet") else {
        return;
    };
    let (url, body) = ftp_server(&mut net, 20_000);
    let get = |active: bool| {
        let mut argv = vec!["curl", "-sS", "--max-time", "5"];
        argv.extend(mode(active));
        argv.push(&url);
        net.run(&net.c, &argv)
    };
    let ok = Net::until(Duration::from_secs(10), || get(false).status.success());
    assert!(
        ok,
        "passive FTP through SNAT failed: {:?}\nftpd: {}\nconnections:\n{}\nstats:\n{}",
        get(false),
        net.stderr("ftpd"),
        first_lines(&fw.ctl_ok(&net, &["dump-conntrack", "-s"]), 10),
        fw.ctl_ok(&net, &["stats"]),
    );
    let o = get(false);
    assert_eq!(String::from_utf8_lossy(&o.stdout), body, "passive transfer");
    let active = get(true);
    assert!(active.status.success(), "active FTP: {active:?}");
    assert_eq!(
        String::from_utf8_lossy(&active.stdout),
        body,
        "active transfer"
    );
    // The server saw the translated address.
    let log = net.stderr("ftpd");
    assert!(log.contains(SNAT_IP), "pyftpdlib log: {log}");
    // The gateway's connections are listed with their helper.
    let dump = fw.ctl_ok(&net, &["dump-conntrack"]);
    assert!(dump.contains("helper=ftp"), "dump: {dump}");
}

/// A transfer under way when the policy is reloaded (SIGHUP, the same
/// file with one unrelated ACL more) goes on to its end, passive and
/// active: its data connection, which the gateway let in as related to
/// the control connection, is judged again by the control connection,
/// which the new policy still allows.
#[test]
fn ftp_transfers_outlive_a_reload_that_keeps_ftp() {
    let Some((mut net, fw)) = setup("fr", "af-packet") else {
        return;
    };
    // 150 KB at 50 KB/s: three seconds, the reload about half a second in.
    let (url, body) = ftp_server(&mut net, 150_000);
    let ready = Net::until(Duration::from_secs(10), || {
        let o = net.run(&net.c, &["curl", "-sS", "--max-time", "5", "-I", &url]);
        o.status.success()
    });
    assert!(
        ready,
        "the FTP server does not answer: {}",
        net.stderr("ftpd")
    );
    let c = net.c.clone();
    // A small receive buffer on the client, so that the server sends only
    // as fast as curl reads: the data connection is still carrying the
    // file when the policy changes.
    let o = net.run(&c, &["sysctl", "-w", "net.ipv4.tcp_rmem=4096 16384 16384"]);
    assert!(o.status.success(), "{o:?}");
    for (n, active) in [(1, false), (2, true)] {
        let name = format!("get{n}");
        let out = net.dir.join(format!("{name}.file")).display().to_string();
        let mut argv = vec!["curl", "-sS", "--max-time", "20", "--limit-rate", "50k"];
        argv.extend(mode(active));
        argv.extend(["-o", &out, &url]);
        net.spawn(&c, &name, &argv);
        let flowing = Net::until(Duration::from_secs(3), || {
            std::fs::metadata(&out).is_ok_and(|m| m.len() > 20_000)
        });
        assert!(flowing, "{name}: no data: {}", net.stderr(&name));
        let dump = fw.ctl_ok(&net, &["dump-conntrack"]);
        assert!(dump.contains("master="), "no data connection: {dump}");
        let extra = format!(
            "\n[[acl]]\nname = \"ssh{n}\"\ndirection = \"to-lport\"\npriority = 900\n\
             match = \"outport == \\\"server\\\" && tcp.dst == 22\"\naction = \"allow-related\"\n"
        );
        hup(&net, &policy(true, &extra), n);
        let st = net.wait(&name, Duration::from_secs(25));
        let got = std::fs::read_to_string(&out).unwrap_or_default();
        assert!(
            st.is_some_and(|s| s.success()) && got == body,
            "{} transfer through a reload: status {st:?}, {} of {} bytes: {}\nstats:\n{}",
            if active { "active" } else { "passive" },
            got.len(),
            body.len(),
            net.stderr(&name),
            fw.ctl_ok(&net, &["stats"]),
        );
    }
}

/// A Python that has pyftpdlib: Debian's (`python3-pyftpdlib`, which
/// `.ci/run` installs) when the first `python3` on the path is another.
fn ftp_python() -> &'static str {
    for py in ["python3", "/usr/bin/python3"] {
        let ok = std::process::Command::new(py)
            .args(["-c", "import pyftpdlib"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return py;
        }
    }
    panic!("no python3 with pyftpdlib (apt-get install python3-pyftpdlib)");
}
