#!/usr/bin/env python3
"""SYN flood against a full table: Linux's nf_conntrack and ctrack, same packets.

  flood-kernel.py [--established 2000] [--flood 1000000] [--newcomers 1000]
                  [--max-conns 5000] [--buckets 5000] [--runs 1] [--seed 1]
                  [--tcp-loose 0|1] [--ctrack PATH] [--keep-pcap FILE] [--json]

Issue 12's scenario: a table limited to --max-conns holds --established
handshaked connections when --flood spoofed SYNs arrive, then --newcomers
legitimate clients connect. Linux's early drop evicts an unassured entry
from the new connection's own hash neighbourhood (up to 8 buckets from its
own); ctrack evicts an unestablished connection at its limit. This script
builds one capture and runs it through both, one after the other:

1. The capture (Ethernet, IPv4, TCP, real checksums, written by hand):
   phase 1, for each established connection (clients 10.1.x.y, servers
   172.16.0.1-8 port 80): SYN, SYN-ACK, ACK, 16 bytes of data from the
   client; phase 2, the flood: SYNs from random sources outside 10/8 (and
   outside other private, loopback, link-local and multicast ranges),
   random source ports, to the servers; phase 3, each newcomer (clients
   10.2.x.y): SYN, SYN-ACK, ACK; phase 4, one more ACK from the client of
   every established connection. Client frames come from
   02:00:00:00:01:02 to 02:00:00:00:01:01, server frames from
   02:00:00:00:02:02 to 02:00:00:00:02:01.
2. The kernel: three network namespaces named ckk-<pid>-{r,c,s}: a router
   (r0 02:00:00:00:01:01, r1 02:00:00:00:02:01, ip_forward=1, rp_filter=0,
   IPv6 off, 10/8 routed to the client side and everything else to the
   server side through static neighbours) between a client and a server
   namespace that hold the veths' other ends with no address. The router's
   nftables ruleset: `table inet ckk`, chain `forward`, policy accept,
   `ct state established,related accept`, `ct state new accept`,
   `ct state invalid drop`, so conntrack tracks every forwarded packet.
   nf_conntrack_tcp_loose stays at its default (1: a mid-stream segment
   may open a connection) unless --tcp-loose 0. The frames are sent in
   capture order with AF_PACKET sockets bound to c0 (client frames) and s0
   (server frames), half a second of quiet between phases. On this kernel
   net.netfilter.nf_conntrack_max and nf_conntrack_buckets are read-only
   outside the initial namespace (max is global, compared with each
   namespace's own count), so the script sets the initial namespace's
   values (the whole host's!) to --max-conns and --buckets for the run and
   puts the old values back however it ends (exception, SIGINT, SIGTERM,
   SIGHUP); --buckets 0 leaves the hash size alone (the kernel rounds it
   up to whole pages of buckets: 5000 gives 5120; a kernel that sizes
   itself gives nf_conntrack_max == buckets, so 5000 is what a host sized
   for 5000 connections would have; the host default here, 262144, makes
   the neighbourhood of 8 buckets nearly always empty of flood entries and
   the kernel then refuses most newcomers). Then it reads the
   router's /proc/net/nf_conntrack (a connection counts as kept or admitted
   when it is ESTABLISHED and ASSURED: an unassured ESTABLISHED entry is a
   loose pick-up of an ACK whose SYN was refused) and
   /proc/net/stat/nf_conntrack (early_drop, drop, insert_failed, summed
   over CPUs), and checks the veths' and softnet's drop counters (a frame
   the kernel lost before conntrack saw it would skew the figures).
3. ctrack: `ctrack replay --max-conns N --format json --clock capture` on
   the same capture (with --no-tcp-loose under --tcp-loose 0): an
   established connection is kept when its phase-4 ACK is `est`, a
   newcomer admitted when its final ACK is `est`; the evictions and
   refusals come from its counters.

Holds $TMPDIR/ctrack-netns-tests.lock (default /tmp; fcntl.flock, the
project's live tests take it too) while the namespaces exist. Namespaces
and sysctls are cleaned up on every exit path.

Needs: root, Linux with nf_conntrack and nf_tables, iproute2 (`ip`), nft,
python3 (3.8+, standard library only), a built ctrack (--ctrack, default
target/release/ctrack). conntrack-tools are not needed (/proc is read).

  sudo python3 scripts/flood-kernel.py                 # defaults, one run
  sudo python3 scripts/flood-kernel.py --runs 3 --json # three, one JSON
"""
import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import platform
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

CLIENT_MAC, ROUTER_C_MAC = "02:00:00:00:01:02", "02:00:00:00:01:01"
SERVER_MAC, ROUTER_S_MAC = "02:00:00:00:02:02", "02:00:00:00:02:01"
SERVERS = [f"172.16.0.{i}" for i in range(1, 9)]
SERVER_PORT = 80
T0 = 1_700_000_000  # capture time of the first frame, seconds
SYSCTL = "/proc/sys/net/netfilter/"
RULESET = """table inet ckk {
  chain forward {
    type filter hook forward priority 0; policy accept;
    ct state established,related accept
    ct state new accept
    ct state invalid drop
  }
}
"""
SYN, ACK, PSH = 0x02, 0x10, 0x08


class Interrupted(BaseException):
    """A signal asked us to stop: unwinds to the cleanups."""


class FloodError(Exception):
    """A setup or measurement failure."""


def mac(text):
    return bytes(int(x, 16) for x in text.split(":"))


def csum(data):
    """The Internet checksum of data (ones' complement sum, by the
    2**16 == 1 (mod 0xffff) identity: one big-integer remainder)."""
    if len(data) % 2:
        data += b"\0"
    x = int.from_bytes(data, "big")
    s = x % 0xFFFF
    if s == 0 and x:
        s = 0xFFFF
    return ~s & 0xFFFF


class Pcap:
    """Writes an Ethernet pcap (microsecond timestamps) and remembers each
    frame's role: `marks[name]` lists the frame numbers (from 1)."""

    def __init__(self, path):
        self.f = open(path, "wb")
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        self.n = 0
        self.t = 0  # microseconds since T0
        self.marks = {}
        self.side = {"c": (mac(ROUTER_C_MAC), mac(CLIENT_MAC)),
                     "s": (mac(ROUTER_S_MAC), mac(SERVER_MAC))}

    def tcp(self, side, src, dst, sport, dport, seq, ack, flags, payload=b"", mark=None,
            step=10):
        src, dst = socket.inet_aton(src), socket.inet_aton(dst)
        tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 64240, 0, 0)
        tcp += payload
        c = csum(src + dst + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)
        tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), self.n & 0xFFFF, 0x4000, 64,
                         6, 0, src, dst)
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        dmac, smac = self.side[side]
        frame = dmac + smac + b"\x08\x00" + ip + tcp
        self.t += step
        self.f.write(struct.pack("<IIII", T0 + self.t // 1_000_000, self.t % 1_000_000,
                                 len(frame), len(frame)))
        self.f.write(frame)
        self.n += 1
        if mark:
            self.marks.setdefault(mark, []).append(self.n)

    def gap(self, seconds):
        self.t += int(seconds * 1_000_000)

    def close(self):
        self.f.close()


def spoofed(rng):
    """A random unicast source outside 10/8, 100.64/10, 127/8, 169.254/16,
    172.16/12, 192.168/16 and 224/3 (and 0/8)."""
    while True:
        a = rng.getrandbits(32)
        o1, o2 = a >> 24, (a >> 16) & 0xFF
        if o1 in (0, 10, 127) or o1 >= 224:
            continue
        if (o1, o2 >> 6) == (100, 1) or (o1, o2) in ((169, 254), (192, 168)):
            continue
        if o1 == 172 and 16 <= o2 < 32:
            continue
        return socket.inet_ntoa(struct.pack("!I", a))


def client_addr(net, i):
    return f"10.{net}.{(i >> 8) & 0xFF}.{i & 0xFF}"


def handshake(p, client, sport, server, cisn, sisn, mark_last):
    p.tcp("c", client, server, sport, SERVER_PORT, cisn, 0, SYN)
    p.tcp("s", server, client, SERVER_PORT, sport, sisn, cisn + 1, SYN | ACK)
    p.tcp("c", client, server, sport, SERVER_PORT, cisn + 1, sisn + 1, ACK, mark=mark_last)


def build_capture(path, args, seed):
    """Writes the four phases; returns the frame marks and counts."""
    rng = random.Random(seed)
    p = Pcap(path)
    est = []
    for i in range(args.established):
        c, sp, srv = client_addr(1, i + 1), 20000 + i % 40000, SERVERS[i % len(SERVERS)]
        cisn, sisn = rng.getrandbits(32), rng.getrandbits(32)
        handshake(p, c, sp, srv, cisn, sisn, None)
        p.tcp("c", c, srv, sp, SERVER_PORT, (cisn + 1) & 0xFFFFFFFF, (sisn + 1) & 0xFFFFFFFF,
              PSH | ACK, payload=b"GET / HTTP/1.0\r\n")
        est.append((c, sp, srv, (cisn + 17) & 0xFFFFFFFF, (sisn + 1) & 0xFFFFFFFF))
    p.gap(1)
    for _ in range(args.flood):
        p.tcp("c", spoofed(rng), rng.choice(SERVERS), rng.randrange(1024, 65536), SERVER_PORT,
              rng.getrandbits(32), 0, SYN, step=1)
    p.gap(1)
    for i in range(args.newcomers):
        c, sp, srv = client_addr(2, i + 1), 30000 + i % 30000, SERVERS[i % len(SERVERS)]
        cisn, sisn = rng.getrandbits(32), rng.getrandbits(32)
        handshake(p, c, sp, srv, cisn, sisn, "newcomer_ack")
    p.gap(1)
    for c, sp, srv, seq, ack in est:
        p.tcp("c", c, srv, sp, SERVER_PORT, seq, ack, ACK, mark="established_ack")
    p.close()
    return p.marks, p.n


def read_pcap(path):
    """Yields (phase boundary?, side, frame) of a pcap Pcap wrote: side from
    the source MAC; a gap of 0.5 s or more between frames marks a phase."""
    cmac = mac(CLIENT_MAC)
    with open(path, "rb") as f:
        f.read(24)
        last = None
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, usec, incl, _ = struct.unpack("<IIII", h)
            frame = f.read(incl)
            t = sec + usec / 1e6
            yield (last is not None and t - last >= 0.5), ("c" if frame[6:12] == cmac else "s"), frame
            last = t


# ---------------------------------------------------------------- the kernel

def sh(cmd, check=True, input=None):
    r = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if check and r.returncode != 0:
        raise FloodError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return r.stdout


class Host:
    """The initial namespace's conntrack sysctls: set for the run, put back."""

    def __init__(self):
        self.saved = {}

    def set(self, name, value):
        path = SYSCTL + name
        with open(path) as f:
            old = f.read().strip()
        self.saved.setdefault(name, old)
        with open(path, "w") as f:
            f.write(str(value))

    def restore(self):
        for name, old in reversed(list(self.saved.items())):
            try:
                with open(SYSCTL + name, "w") as f:
                    f.write(old)
            except OSError as e:
                print(f"flood-kernel: could not restore {name}={old}: {e}", file=sys.stderr)
        self.saved.clear()


class Lab:
    """Router, client and server namespaces: ckk-<pid>-{r,c,s}."""

    def __init__(self):
        tag = f"ckk-{os.getpid()}"
        self.r, self.c, self.s = f"{tag}-r", f"{tag}-c", f"{tag}-s"
        self.made = []

    def nx(self, ns, *cmd, input=None, check=True):
        return sh(["ip", "netns", "exec", ns, *cmd], input=input, check=check)

    def setup(self, tcp_loose):
        for ns in (self.r, self.c, self.s):
            self.made.append(ns)
            sh(["ip", "netns", "add", ns])
            for k in ("all", "default"):
                self.nx(ns, "sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1")
            sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        sh(["ip", "link", "add", "c0", "netns", self.c, "type", "veth", "peer", "name", "r0",
            "netns", self.r])
        sh(["ip", "link", "add", "s0", "netns", self.s, "type", "veth", "peer", "name", "r1",
            "netns", self.r])
        for ns, dev, addr in ((self.c, "c0", CLIENT_MAC), (self.r, "r0", ROUTER_C_MAC),
                              (self.r, "r1", ROUTER_S_MAC), (self.s, "s0", SERVER_MAC)):
            sh(["ip", "-n", ns, "link", "set", dev, "address", addr])
            sh(["ip", "-n", ns, "link", "set", dev, "up"])
        ip = ["ip", "-n", self.r]
        sh(ip + ["addr", "add", "192.168.1.1/24", "dev", "r0"])
        sh(ip + ["addr", "add", "192.168.2.1/24", "dev", "r1"])
        sh(ip + ["neigh", "replace", "192.168.1.2", "lladdr", CLIENT_MAC, "dev", "r0",
                 "nud", "permanent"])
        sh(ip + ["neigh", "replace", "192.168.2.2", "lladdr", SERVER_MAC, "dev", "r1",
                 "nud", "permanent"])
        sh(ip + ["route", "add", "10.0.0.0/8", "via", "192.168.1.2", "dev", "r0"])
        sh(ip + ["route", "add", "default", "via", "192.168.2.2", "dev", "r1"])
        for k in ("net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0",
                  "net.ipv4.conf.default.rp_filter=0", "net.ipv4.conf.r0.rp_filter=0",
                  "net.ipv4.conf.r1.rp_filter=0", f"net.netfilter.nf_conntrack_tcp_loose={tcp_loose}"):
            self.nx(self.r, "sysctl", "-qw", k)
        self.nx(self.r, "nft", "-f", "-", input=RULESET)

    def cleanup(self):
        for ns in reversed(self.made):
            pids = sh(["ip", "netns", "pids", ns], check=False).split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            sh(["ip", "netns", "del", ns], check=False)
        self.made.clear()


@contextlib.contextmanager
def signals_held():
    """SIGINT, SIGTERM and SIGHUP wait meanwhile (for the cleanups)."""
    held = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def packet_socket(ns, dev):
    """An AF_PACKET socket bound to dev inside namespace ns (entered and
    left again with setns; the socket stays in ns)."""
    here = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if LIBC.setns(there, CLONE_NEWNET) != 0:
            raise FloodError(f"setns {ns}: {os.strerror(ctypes.get_errno())}")
        try:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            s.bind((dev, 0))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        finally:
            if LIBC.setns(here, CLONE_NEWNET) != 0:
                raise FloodError("setns back: " + os.strerror(ctypes.get_errno()))
    finally:
        os.close(here)
        os.close(there)
    return s


def inject(lab, pcap, settle):
    """Sends every frame in order; returns (frames, seconds, send errors)."""
    socks = {"c": packet_socket(lab.c, "c0"), "s": packet_socket(lab.s, "s0")}
    n = errors = 0
    t = time.monotonic()
    try:
        for boundary, side, frame in read_pcap(pcap):
            if boundary:
                time.sleep(settle)
            while True:
                try:
                    socks[side].send(frame)
                    break
                except (BlockingIOError, OSError) as e:
                    if getattr(e, "errno", None) not in (11, 105):  # EAGAIN, ENOBUFS
                        raise
                    errors += 1
                    time.sleep(0.0005)
            n += 1
        time.sleep(settle)
    finally:
        for s in socks.values():
            s.close()
    return n, time.monotonic() - t, errors


def softnet_dropped():
    total = 0
    with open("/proc/net/softnet_stat") as f:
        for line in f:
            total += int(line.split()[1], 16)
    return total


def link_drops(lab):
    """rx_dropped + tx_dropped of the four veth ends."""
    total = 0
    for ns, dev in ((lab.c, "c0"), (lab.r, "r0"), (lab.r, "r1"), (lab.s, "s0")):
        for k in ("rx_dropped", "tx_dropped"):
            total += int(lab.nx(ns, "cat", f"/sys/class/net/{dev}/statistics/{k}").strip())
    return total


def parse_table(text):
    """/proc/net/nf_conntrack -> {(src, sport, dst, dport): (state, assured)}
    for TCP (original direction)."""
    out = {}
    for line in text.splitlines():
        tok = line.split()
        if len(tok) < 6 or tok[2] != "tcp":
            continue
        kv = {}
        for t in tok[6:]:
            if "=" in t:
                k, v = t.split("=", 1)
                kv.setdefault(k, v)
        key = (kv.get("src"), int(kv.get("sport", 0)), kv.get("dst"), int(kv.get("dport", 0)))
        out[key] = (tok[5], "[ASSURED]" in tok)
    return out


def parse_stats(text):
    """/proc/net/stat/nf_conntrack -> {column: sum over CPUs} ('entries'
    is one global value, not summed)."""
    lines = text.split("\n")
    names = lines[0].split()
    out = dict.fromkeys(names, 0)
    for line in lines[1:]:
        vals = line.split()
        if len(vals) != len(names):
            continue
        for k, v in zip(names, vals):
            out[k] = int(v, 16) if k == "entries" else out[k] + int(v, 16)
    return out


def kernel_side(args, pcap, conns, host):
    """Runs the capture through a router namespace; returns its figures."""
    lab = Lab()
    try:
        lab.setup(args.tcp_loose)
        # Only now is the router's conntrack in use; the host's limits are
        # shared by every namespace, hence the lock and the restore.
        host.set("nf_conntrack_max", args.max_conns)
        if args.buckets:
            host.set("nf_conntrack_buckets", args.buckets)
        with open(SYSCTL + "nf_conntrack_buckets") as f:
            buckets = int(f.read())
        d0, l0 = softnet_dropped(), link_drops(lab)
        frames, secs, errors = inject(lab, pcap, args.settle)
        drops = softnet_dropped() - d0 + link_drops(lab) - l0
        table = parse_table(lab.nx(lab.r, "cat", "/proc/net/nf_conntrack"))
        stats = parse_stats(lab.nx(lab.r, "cat", "/proc/net/stat/nf_conntrack"))
    finally:
        with signals_held():
            lab.cleanup()
            host.restore()
    est, new = conns

    def ok(key):
        st = table.get(key)
        return st is not None and st[0] == "ESTABLISHED" and st[1]

    states = {}
    for st, assured in table.values():
        k = st + ("" if assured else " unassured")
        states[k] = states.get(k, 0) + 1
    return {
        "established_kept": sum(map(ok, est)),
        "newcomers_admitted": sum(map(ok, new)),
        "entries": len(table),
        "evicted": stats.get("early_drop", 0),
        "refused": stats.get("drop", 0),
        "insert_failed": stats.get("insert_failed", 0),
        "invalid": stats.get("invalid", 0),
        "states": states,
        "buckets": buckets,
        "frames_sent": frames,
        "send_seconds": round(secs, 2),
        "send_retries": errors,
        "frames_dropped_before_conntrack": drops,
    }


# ---------------------------------------------------------------- ctrack

def ctrack_side(args, pcap, marks):
    """`ctrack replay` on the capture; returns the same figures. Its JSON
    lines: one per packet ({"packet": n, "flags": ["est", "trk"], ...}),
    one per connection, then {"stats": {...}, "connections": n}."""
    cmd = [args.ctrack, "replay", "--max-conns", str(args.max_conns), "--format", "json",
           "--clock", "capture", pcap]
    if not args.tcp_loose:
        cmd.insert(2, "--no-tcp-loose")
    want = {}
    for name in ("established_ack", "newcomer_ack"):
        for n in marks.get(name, []):
            want[n] = name
    got = {"established_ack": 0, "newcomer_ack": 0}
    last, n = {}, 0
    t = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stdout:
            n += 1
            if n in want:
                obj = json.loads(line)
                if obj.get("packet") != n:
                    raise FloodError(f"ctrack replay: line {n} is not packet {n}")
                got[want[n]] += "est" in obj.get("flags", [])
            elif n > marks["total"] and line.startswith('{"stats"'):
                last = json.loads(line)
        err = p.stderr.read()
    finally:
        p.stdout.close()
        rc = p.wait()
    if rc != 0 or "stats" not in last:
        raise FloodError(f"ctrack replay: exit {rc}, no counters: {err.strip()[-400:]}")
    st = last["stats"]
    return {
        "established_kept": got["established_ack"],
        "newcomers_admitted": got["newcomer_ack"],
        "entries": last.get("connections", -1),
        "evicted": st.get("evicted", -1),
        "refused": st.get("refused_table_full", -1),
        "committed": st.get("committed", -1),
        "invalid": st.get("invalid", -1),
        "seconds": round(time.monotonic() - t, 2),
    }


# ---------------------------------------------------------------- report

def one_run(args, seed, host):
    with tempfile.TemporaryDirectory(prefix="flood-kernel-") as tmp:
        pcap = args.keep_pcap or os.path.join(tmp, "flood.pcap")
        t = time.monotonic()
        marks, total = build_capture(pcap, args, seed)
        marks["total"] = total
        gen = time.monotonic() - t
        est, new = conn_keys(args)
        with NetnsLock():
            kern = kernel_side(args, pcap, (est, new), host)
        ct = ctrack_side(args, pcap, marks)
    return {"seed": seed, "frames": total, "generate_seconds": round(gen, 2),
            "kernel": kern, "ctrack": ct}


def conn_keys(args):
    """The (src, sport, dst, dport) of the established connections and the
    newcomers, as build_capture numbers them."""
    est = [(client_addr(1, i + 1), 20000 + i % 40000, SERVERS[i % len(SERVERS)], SERVER_PORT)
           for i in range(args.established)]
    new = [(client_addr(2, i + 1), 30000 + i % 30000, SERVERS[i % len(SERVERS)], SERVER_PORT)
           for i in range(args.newcomers)]
    return est, new


class NetnsLock:
    """$TMPDIR/ctrack-netns-tests.lock, held exclusively (fcntl.flock)."""

    def __enter__(self):
        path = os.path.join(tempfile.gettempdir(), "ctrack-netns-tests.lock")
        self.f = open(path, "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def table_text(run, args):
    E, N = args.established, args.newcomers
    k, c = run["kernel"], run["ctrack"]
    rows = [
        ("established kept", f"{k['established_kept']}/{E}", f"{c['established_kept']}/{E}"),
        ("newcomers admitted", f"{k['newcomers_admitted']}/{N} ({pct(k['newcomers_admitted'], N)})",
         f"{c['newcomers_admitted']}/{N} ({pct(c['newcomers_admitted'], N)})"),
        ("evictions", str(k["evicted"]), str(c["evicted"])),
        ("refused", str(k["refused"]), str(c["refused"])),
        ("entries at the end", str(k["entries"]), str(c["entries"])),
    ]
    out = [f"seed {run['seed']}: {run['frames']} frames, kernel buckets {k['buckets']}, "
           f"sent in {k['send_seconds']} s, {k['frames_dropped_before_conntrack']} dropped "
           f"before conntrack, insert_failed {k['insert_failed']}",
           f"  {'':22}{'kernel':>22}{'ctrack':>22}"]
    out += [f"  {a:22}{b:>22}{d:>22}" for a, b, d in rows]
    out.append(f"  kernel states: {json.dumps(k['states'], sort_keys=True)}")
    return "\n".join(out)


def pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "-"


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                       "?")
    except OSError:
        pass
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "kernel": platform.release(),
            "cpu": cpu, "cores": os.cpu_count(), "command": " ".join(sys.argv)}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--established", type=int, default=2000)
    ap.add_argument("--flood", type=int, default=1_000_000)
    ap.add_argument("--newcomers", type=int, default=1000)
    ap.add_argument("--max-conns", type=int, default=5000)
    ap.add_argument("--buckets", type=int, default=5000,
                    help="the kernel's hash size for the run (0: leave it)")
    ap.add_argument("--tcp-loose", type=int, choices=(0, 1), default=1)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1, help="run i uses seed+i")
    ap.add_argument("--settle", type=float, default=0.5, help="seconds between phases")
    ap.add_argument("--ctrack", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", "target", "release", "ctrack"))
    ap.add_argument("--keep-pcap", metavar="FILE", help="write the capture here and keep it")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()
    if not (0 < args.established < 65536 and 0 <= args.newcomers < 65536 and args.flood >= 0
            and args.max_conns > 0 and args.buckets >= 0 and args.runs > 0):
        ap.error("bad sizes (established and newcomers below 65536, the rest positive)")
    args.ctrack = os.path.normpath(args.ctrack)
    return args


def main():
    args = parse_args()
    if os.geteuid() != 0:
        sys.exit("flood-kernel: needs root (network namespaces, host sysctls)")
    if not os.access(args.ctrack, os.X_OK):
        sys.exit(f"flood-kernel: no ctrack binary at {args.ctrack} (--ctrack)")

    def on_signal(signum, _frame):
        raise Interrupted(signum)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    host, runs = Host(), []
    try:
        for i in range(args.runs):
            runs.append(one_run(args, args.seed + i, host))
            if not args.json:
                print(table_text(runs[-1], args), flush=True)
    except Interrupted as e:
        print(f"flood-kernel: stopped by signal {e.args[0]}", file=sys.stderr)
        return 130
    except FloodError as e:
        print(f"flood-kernel: {e}", file=sys.stderr)
        return 1
    finally:
        with signals_held():
            host.restore()
    if args.json:
        json.dump({"meta": machine(), "args": vars(args), "runs": runs}, sys.stdout, indent=1)
        print()
    else:
        m = machine()
        print(f"{m['date']}  Linux {m['kernel']}, {m['cpu']}, {m['cores']} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
