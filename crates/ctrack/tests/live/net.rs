//! Network namespaces for the live tests: a client and a server joined
//! through a third namespace where `ctrack run` switches between two veth
//! pairs, every process started in them killed and every namespace removed
//! when the test ends, pass or fail.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The client's and the server's addresses.
pub(crate) const CLIENT_MAC: &str = "02:77:00:00:00:01";
pub(crate) const SERVER_MAC: &str = "02:77:00:00:00:02";
pub(crate) const CLIENT_IP: &str = "10.77.0.1";
pub(crate) const SERVER_IP: &str = "10.77.0.2";

/// One test at a time in this binary (the namespaces' programs are real
/// and the machine small); across binaries, the file lock.
static ONE: Mutex<()> = Mutex::new(());

/// Why the live tests cannot run here, if they cannot.
pub(crate) fn unusable() -> Option<String> {
    if !crate::common::root_user() {
        return Some("needs root (network namespaces, raw sockets)".into());
    }
    if let Some(tool) =
        crate::common::missing_tool(&["ip", "curl", "ethtool", "python3", "ping", "iperf3"])
    {
        return Some(format!("{tool} not found (.ci/run installs it)"));
    }
    None
}

/// Skips with a message, or fails in CI (`CI` set), where every live test
/// must run.
pub(crate) fn skip(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "live test cannot run in CI: {why}"
    );
    eprintln!("skipped: {why}");
}

/// Three namespaces: `c` (client, `c0`), `s` (server, `s0`), `f` (ctrack's,
/// `c1` and `s1`, the other ends).
#[derive(Debug)]
pub(crate) struct Net {
    pub(crate) c: String,
    pub(crate) s: String,
    pub(crate) f: String,
    pub(crate) dir: PathBuf,
    children: Vec<(String, Child)>,
    _one: std::sync::MutexGuard<'static, ()>,
    _lock: std::fs::File,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Net {
    /// Builds the namespaces for test `tag` (a few letters), every offload
    /// off.
    pub(crate) fn new(tag: &str) -> Net {
        Net::build(tag, false)
    }

    /// [`Net::new`], but the client and the server keep their transmit
    /// offloads (a veth's defaults): their stacks hand over TCP segments of
    /// up to 64 KiB for the device to cut (TSO, GSO), and TCP and UDP
    /// segments with the checksum left for it to finish. Receive checksum
    /// offload and GRO stay off on their ends, so that their stacks check
    /// every checksum that reaches them.
    pub(crate) fn with_sender_offloads(tag: &str) -> Net {
        Net::build(tag, true)
    }

    fn build(tag: &str, offloads: bool) -> Net {
        let one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let lock_path = std::env::temp_dir().join("ctrack-netns-tests.lock");
        let lock = std::fs::File::create(&lock_path).expect("lock file");
        lock.lock().expect("lock");
        let id = format!("{tag}{}", std::process::id() % 100_000);
        let dir = std::env::temp_dir().join(format!("ctrack-live-{id}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let net = Net {
            c: format!("ckc-{id}"),
            s: format!("cks-{id}"),
            f: format!("ckf-{id}"),
            dir,
            children: Vec::new(),
            _one: one,
            _lock: lock,
        };
        for ns in [&net.c, &net.s, &net.f] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        for (peer, end, inner, mac, addr) in [
            (&net.c, "c1", "c0", CLIENT_MAC, CLIENT_IP),
            (&net.s, "s1", "s0", SERVER_MAC, SERVER_IP),
        ] {
            ip(&[
                "-n", &net.f, "link", "add", end, "type", "veth", "peer", "name", inner, "netns",
                peer,
            ]);
            ip(&["-n", peer, "link", "set", inner, "address", mac]);
            ip(&[
                "-n",
                peer,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                inner,
            ]);
            ip(&["-n", peer, "link", "set", inner, "up"]);
            ip(&["-n", &net.f, "link", "set", end, "up"]);
            // Frames as on a wire: no segmentation or checksum offload
            // (a userspace switch gets what the peer really sent), unless
            // the test keeps the peer's transmit offloads.
            for (ns, dev, tx) in [
                (peer.as_str(), inner, if offloads { "on" } else { "off" }),
                (net.f.as_str(), end, "off"),
            ] {
                let o = net.run(
                    ns,
                    &[
                        "ethtool", "-K", dev, "tx", tx, "rx", "off", "tso", tx, "gso", tx, "gro",
                        "off",
                    ],
                );
                assert!(o.status.success(), "ethtool -K {dev}: {o:?}");
            }
        }
        net
    }

    /// Runs `argv` in namespace `ns` and waits for it.
    pub(crate) fn run(&self, ns: &str, argv: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", ns])
            .args(argv)
            .stdin(Stdio::null())
            .output()
            .expect("run in namespace")
    }

    /// Starts `argv` in namespace `ns`, output to files in the scratch
    /// folder named `name`; killed when the test ends.
    pub(crate) fn spawn(&mut self, ns: &str, name: &str, argv: &[&str]) {
        let out = std::fs::File::create(self.dir.join(format!("{name}.out"))).expect("out");
        let err = std::fs::File::create(self.dir.join(format!("{name}.err"))).expect("err");
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(argv)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn in namespace");
        self.children.push((name.to_string(), child));
    }

    /// [`Net::spawn`] with standard error a pipe whose reading end is
    /// closed at once, as when a log pipe goes away: every write to it
    /// fails (`EPIPE`).
    pub(crate) fn spawn_stderr_closed(&mut self, ns: &str, name: &str, argv: &[&str]) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn in namespace");
        drop(child.stderr.take());
        self.children.push((name.to_string(), child));
    }

    /// What a started program has written to standard output so far.
    pub(crate) fn stdout(&self, name: &str) -> String {
        read(&self.dir.join(format!("{name}.out")))
    }

    /// What a started program has written to standard error so far.
    pub(crate) fn stderr(&self, name: &str) -> String {
        read(&self.dir.join(format!("{name}.err")))
    }

    /// Sends `signal` to a started program.
    pub(crate) fn signal(&self, name: &str, signal: &str) {
        let (_, c) = self.child(name);
        // The shell's own kill: no procps needed.
        let ok = Command::new("sh")
            .args(["-c", &format!("kill -{signal} {}", c.id())])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} {name}");
    }

    /// A started program's process id (`ip netns exec` runs the program
    /// in its own place, so this is the program's).
    pub(crate) fn pid(&self, name: &str) -> u32 {
        self.child(name).1.id()
    }

    fn child(&self, name: &str) -> &(String, Child) {
        self.children
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no program {name}"))
    }

    /// Waits up to `limit` for a started program to exit; its status.
    pub(crate) fn wait(&mut self, name: &str, limit: Duration) -> Option<std::process::ExitStatus> {
        let i = self.children.iter().position(|(n, _)| n == name)?;
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(st)) = self.children[i].1.try_wait() {
                self.children.remove(i);
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Waits until `ok` holds, up to `limit`.
    pub(crate) fn until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Writes a file in the scratch folder; its path.
    pub(crate) fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).expect("write scratch file");
        p
    }
}

fn read(p: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(p) {
        let _ = f.read_to_string(&mut s);
    }
    s
}

impl Drop for Net {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.c, &self.s, &self.f] {
            // Whatever a test left running in the namespace goes with it.
            let pids = Command::new("ip")
                .args(["netns", "pids", ns])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            for pid in pids.split_whitespace() {
                let _ = Command::new("sh")
                    .args(["-c", &format!("kill -KILL {pid}")])
                    .status();
            }
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
