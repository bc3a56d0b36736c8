#!/usr/bin/env python3
"""Agreement test of a ctrack policy with the Linux kernel, on real traffic.

  nft-agree.py [OPTIONS] SCENARIO.toml

A scenario is three files side by side (tests/agree/web.*):

  NAME.toml     the ctrack policy (its ports: names, MACs, IPv4, IPv6)
  NAME.nft      an nftables ruleset meant to decide the same
  NAME.traffic  the traffic to run (format below)

The script builds one network namespace per port of the policy (interface
eth0 with the port's MAC and addresses) and a 'switch' namespace holding a
Linux bridge (br0) with one veth per port, loads NAME.nft into the switch
namespace with br_netfilter on (bridge-nf-call-iptables and -ip6tables,
per namespace), runs real clients and servers in the port namespaces, and
captures on every bridge port with tcpdump: what enters the bridge
(`-Q in`) and what leaves it (`-Q out`). Then:

- The ingress captures, merged in time order, are the capture ctrack
  replays (OUT/NAME.pcap): every frame entering the bridge exactly once.
- Each ingress frame is looked up, byte for byte (a bridge changes no
  byte), among the frames that left on the other ports: found, the kernel
  forwarded it (`allow`); not found, it dropped it (`drop`). A frame that
  left but never entered was made by the switch: a TCP RST or an ICMP or
  ICMPv6 unreachable made by nftables' `reject` is paired with the dropped
  frame it answers, which becomes `reject`; the bridge's own traffic (its
  MLD reports, from its MAC) and frames that entered after the ingress
  captures stopped are listed and ignored; anything else is an error.
  Written to OUT/NAME.kernel.json.
- Unless --no-ctrack, `CTRACK replay --policy NAME.toml --format json
  OUT/NAME.pcap` runs and its `verdict` for each `packet` is compared with
  the kernel's; every disagreement is printed (packet number, summary,
  kernel, ctrack) and makes the exit status 1.

With --no-nft the bridge filters nothing (no ruleset, br_netfilter off):
that is how scripts/make-policy-captures.sh makes the bundled captures.

What the kernel does with frames that are not IP: br_netfilter hands only
IPv4 and IPv6 to the inet family's hooks, so ARP is always bridged; a
scenario's policy must allow `arp` for ctrack to agree. IPv6 ND and MLD
reach the forward chain, where each ruleset accepts them first, as OVN
always passes them (conntrack calls ND packets invalid, so this comes
before `ct state invalid drop`).

The switch has an address in each subnet of the ports (x.x.x.254 and
PREFIX::fe) and static neighbour entries for every port: the kernel needs a
route back to send an ICMP error for `reject`, and the static entries keep
it from sending ARP or ND of its own. ICMP rate limits are off in it.

Traffic file: one command a line, `#` starts a comment:

  serve PORT tcp|udp N[,N...]   HTTP servers (tcp) or UDP echo (udp) on
                                ports N of PORT, IPv4 and IPv6
  tcp SRC DST N [-6] [from ADDR]
                                curl http://DST:N/ from SRC (1.5 s limit);
                                with `from`, from ADDR as ping's
  udp SRC DST N [-6]            one datagram, waits 1 s for an echo
  ping SRC DST [-6] [from ADDR] two echo requests; with `from`, sent from
                                ADDR, an address SRC takes on for it (a
                                source its port security does not allow)
  sleep SECONDS
  require VERDICT...            fail unless the kernel gave each verdict
                                at least once (a check on the ruleset)

Exit status: 0 agreement (or, with --no-ctrack, capture and verdicts
made); 1 disagreement; 2 setup or traffic failure. Namespaces (names with
this process's id) and everything in them, the ruleset included, are
removed however the script ends. Needs root, iproute2, ethtool, tcpdump,
nftables, curl, python3 >= 3.11 (tomllib); standard library only.
"""
import argparse
import collections
import ipaddress
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcapmerge  # noqa: E402  (scripts/pcapmerge.py: reads pcap files)

try:
    import tomllib
except ImportError:  # Python < 3.11
    sys.exit("nft-agree.py needs Python 3.11 or later (tomllib)")

BRIDGE_MAC = "02:ff:00:00:00:fe"

SERVER = r'''
import socket, socketserver, sys, threading
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from port %d\n" % self.server.server_address[1]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(ThreadingHTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True
    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        socketserver.TCPServer.server_bind(self)  # no getfqdn
        self.server_name, self.server_port = "agree", self.server_address[1]
def udp(port):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", port))
    while True:
        d, p = s.recvfrom(2048)
        s.sendto(b"echo: " + d[:64], p)
for spec in sys.argv[1:]:
    proto, port = spec.split(":")
    if proto == "tcp":
        threading.Thread(target=S(("::", int(port)), H).serve_forever, daemon=True).start()
    else:
        threading.Thread(target=udp, args=(int(port),), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
'''

UDP_CLIENT = r'''
import socket, sys
a, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
s.sendto(b"hello " + a.encode(), (a, port))
try:
    s.recvfrom(2048)
    print("answered")
except OSError as e:
    print(e)
'''


class SetupError(Exception):
    pass


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if check and r.returncode != 0:
        raise SetupError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def mac_str(b):
    return ":".join(f"{x:02x}" for x in b)


# ---------------------------------------------------------------- frames


def parse(frame):
    """A few fields of an Ethernet frame: enough to summarise it and to pair
    a reject's answer with the packet it answers."""
    p = {"dst": mac_str(frame[0:6]), "src": mac_str(frame[6:12])}
    off, et = 14, struct.unpack("!H", frame[12:14])[0]
    while et in (0x8100, 0x88A8) and len(frame) >= off + 4:
        et = struct.unpack("!H", frame[off + 2:off + 4])[0]
        off += 4
    p["ethertype"] = et
    if et == 0x0806 and len(frame) >= off + 28:
        op = struct.unpack("!H", frame[off + 6:off + 8])[0]
        spa = str(ipaddress.IPv4Address(frame[off + 14:off + 18]))
        tpa = str(ipaddress.IPv4Address(frame[off + 24:off + 28]))
        p["arp"] = (op, spa, tpa)
    elif et == 0x0800 and len(frame) >= off + 20:
        ihl = (frame[off] & 15) * 4
        p.update(ip=4, ipsrc=str(ipaddress.IPv4Address(frame[off + 12:off + 16])),
                 ipdst=str(ipaddress.IPv4Address(frame[off + 16:off + 20])),
                 proto=frame[off + 9], l4=frame[off + ihl:])
    elif et == 0x86DD and len(frame) >= off + 40:
        nh, l4 = frame[off + 6], off + 40
        while nh in (0, 43, 60) and len(frame) >= l4 + 8:
            nh, l4 = frame[l4], l4 + (frame[l4 + 1] + 1) * 8
        p.update(ip=6, ipsrc=str(ipaddress.IPv6Address(frame[off + 8:off + 24])),
                 ipdst=str(ipaddress.IPv6Address(frame[off + 24:off + 40])),
                 proto=nh, l4=frame[l4:])
    if "l4" in p:
        l4 = p["l4"]
        if p["proto"] in (6, 17) and len(l4) >= 4:
            p["sport"], p["dport"] = struct.unpack("!HH", l4[:4])
        if p["proto"] == 6 and len(l4) >= 14:
            p["tcpflags"] = l4[13]
        if p["proto"] in (1, 58) and len(l4) >= 2:
            p["icmp"] = (l4[0], l4[1])
    return p


def summary(frame):
    p = parse(frame)
    head = f"{p['src']} > {p['dst']}"
    if "arp" in p:
        op, spa, tpa = p["arp"]
        what = {1: f"who-has {tpa} tell {spa}", 2: f"{spa} is-at {p['src']}"}.get(op, f"op {op}")
        return f"{head} ARP {what}"
    if "ip" not in p:
        return f"{head} ethertype 0x{p['ethertype']:04x}"
    fam = "IP" if p["ip"] == 4 else "IP6"
    s, d = p["ipsrc"], p["ipdst"]
    if "sport" in p:
        s, d = f"{s}.{p['sport']}", f"{d}.{p['dport']}"
    proto = {6: "tcp", 17: "udp", 1: "icmp", 58: "icmp6"}.get(p["proto"], f"proto {p['proto']}")
    extra = ""
    if "tcpflags" in p:
        f = p["tcpflags"]
        extra = " [" + "".join(c for bit, c in ((2, "S"), (1, "F"), (4, "R"), (8, "P"), (16, "."))
                               if f & bit) + "]"
    elif "icmp" in p:
        extra = f" type {p['icmp'][0]} code {p['icmp'][1]}"
    return f"{head} {fam} {s} > {d} {proto}{extra} len {len(frame)}"


def quoted(p):
    """The packet an ICMP or ICMPv6 destination unreachable quotes, parsed
    as if it were a frame's payload; None for anything else."""
    if p.get("icmp") is None:
        return None
    if (p["proto"], p["icmp"][0]) not in ((1, 3), (58, 1)):
        return None
    inner = p["l4"][8:]
    et = b"\x08\x00" if p["ip"] == 4 else b"\x86\xdd"
    q = parse(b"\0" * 12 + et + inner)
    return q if "ip" in q else None


def same_flow(a, b):
    """Whether two parsed packets have the same addresses, protocol and
    ports."""
    keys = ("ipsrc", "ipdst", "proto", "sport", "dport")
    return all(a.get(k) == b.get(k) for k in keys)


def kernel_verdicts(ingress, egress, stop_ns, up_ns=0):
    """ingress: [(ns, port, frame)] in time order; egress: {port: [(ns,
    frame)]}; stop_ns: when the ingress captures were stopped. Returns the
    per-packet verdicts and the frames that left without having entered."""
    n = len(ingress)
    forwarded_to = [[] for _ in range(n)]
    made = []  # (ns, port, frame): left the bridge without having entered it
    for out_port, frames in egress.items():
        pending = collections.defaultdict(collections.deque)
        for i, (ns, port, frame) in enumerate(ingress):
            if port != out_port:
                pending[frame].append(i)
        for ns, frame in sorted(frames, key=lambda r: r[0]):
            q = pending.get(frame)
            if q and ingress[q[0]][0] <= ns:
                forwarded_to[q.popleft()].append(out_port)
            else:
                made.append((ns, out_port, frame))
    verdicts = ["allow" if f else "drop" for f in forwarded_to]
    # A group-addressed frame (an MLD report sent as a link came up) that
    # entered before every port's link was up, or in the second after (the
    # other ports' captures and forwarding state may still be settling; a
    # loaded machine showed one), may have had nowhere to go: the bridge's
    # flooding, not the firewall, decided it. Left out.
    for i, (ns, _, frame) in enumerate(ingress):
        if verdicts[i] == "drop" and ns < up_ns + 1_000_000_000 and frame[0] & 1:
            verdicts[i] = "before-up"
    answers = [None] * n
    parsed = [parse(f) for _, _, f in ingress]
    generated = []
    for ns, out_port, frame in sorted(made, key=lambda r: r[0]):
        p = parse(frame)
        target, kind = None, None
        if p.get("proto") == 6 and p.get("tcpflags", 0) & 4:
            kind = "tcp-reset"
            want = {"ipsrc": p["ipdst"], "ipdst": p["ipsrc"], "proto": 6,
                    "sport": p.get("dport"), "dport": p.get("sport")}
            target = want
        elif quoted(p) is not None:
            kind = "icmp-unreachable"
            target = quoted(p)
        entry = {"port": out_port, "summary": summary(frame)}
        if target is not None:
            best = None
            for i in range(n):
                if ingress[i][0] > ns:
                    break
                if verdicts[i] != "allow" and answers[i] is None and same_flow(parsed[i], target):
                    best = i
            if best is not None:
                verdicts[best] = "reject"
                answers[best] = {"kind": kind, "port": out_port, "summary": summary(frame)}
                entry.update(kind=kind, answers=best + 1)
                generated.append(entry)
                continue
        if p["src"] == BRIDGE_MAC and target is None:
            entry["kind"] = "switch"
        elif ns >= stop_ns:
            entry["kind"] = "after-capture"  # entered once ingress was no longer captured
        else:
            entry["kind"] = "unexplained"
        generated.append(entry)
    packets = []
    for i, (ns, port, frame) in enumerate(ingress):
        rec = {"packet": i + 1, "verdict": verdicts[i], "port": port,
               "time": ns / 1e9, "summary": summary(frame)}
        if forwarded_to[i]:
            rec["forwarded_to"] = forwarded_to[i]
        if answers[i]:
            rec["answer"] = answers[i]
        packets.append(rec)
    return packets, generated


# ---------------------------------------------------------------- policy


def load_ports(path):
    with open(path, "rb") as f:
        policy = tomllib.load(f)
    ports = []
    for i, p in enumerate(policy.get("port", [])):
        fields = " ".join(p["addresses"]).split()
        mac, ips = fields[0].lower(), fields[1:]
        v4 = [a for a in ips if ":" not in a]
        v6 = [a for a in ips if ":" in a]
        ports.append({"name": p["name"], "mac": mac, "v4": v4, "v6": v6, "index": i})
    if not ports:
        raise SetupError(f"{path}: no [[port]]")
    return ports


def load_traffic(path):
    cmds = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if words:
                cmds.append((n, words))
    return cmds


# ---------------------------------------------------------------- the lab


class Lab:
    def __init__(self, ports, tag):
        self.ports = {p["name"]: p for p in ports}
        self.order = [p["name"] for p in ports]
        self.sw = f"{tag}sw"
        self.ns = {p["name"]: f"{tag}{p['index']}" for p in ports}
        self.procs = []
        self.created = []

    def ex(self, ns, *cmd, check=True):
        return run(["ip", "netns", "exec", ns, *cmd], check=check)

    def sysctl(self, ns, *kv, check=True):
        return self.ex(ns, "sysctl", "-qw", *kv, check=check)

    def build(self, nft_file):
        for ns in [self.sw, *self.ns.values()]:
            run(["ip", "netns", "add", ns])
            self.created.append(ns)
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        sw = self.sw
        # The switch speaks no IPv6 but on br0 (for ICMPv6 rejects).
        self.sysctl(sw, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
        run(["ip", "-n", sw, "link", "add", "br0", "address", BRIDGE_MAC, "type", "bridge",
             "mcast_snooping", "0", "stp_state", "0"])
        for name in self.order:
            p, ns = self.ports[name], self.ns[name]
            veth = f"p{p['index']}"
            self.sysctl(ns, "net.ipv6.conf.all.router_solicitations=0",
                        "net.ipv6.conf.default.router_solicitations=0")
            run(["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", veth,
                 "netns", sw])
            run(["ip", "-n", ns, "link", "set", "eth0", "address", p["mac"]])
            for a in p["v4"]:
                run(["ip", "-n", ns, "addr", "add", f"{a}/24", "dev", "eth0"])
            for a in p["v6"]:
                run(["ip", "-n", ns, "addr", "add", f"{a}/64", "dev", "eth0", "nodad"])
            run(["ip", "-n", sw, "link", "set", veth, "master", "br0"])
            for n_, dev in ((ns, "eth0"), (sw, veth)):
                # Checksums on the wire must be real, segments as sent.
                self.ex(n_, "ethtool", "-K", dev, "tx", "off", "rx", "off", "gso", "off",
                        "gro", "off", "tso", "off")
        self.sysctl(sw, "net.ipv6.conf.br0.disable_ipv6=0", "net.ipv6.conf.br0.addr_gen_mode=1")
        nets4, nets6 = set(), set()
        for p in self.ports.values():
            nets4.update(ipaddress.ip_interface(f"{a}/24").network for a in p["v4"])
            nets6.update(ipaddress.ip_interface(f"{a}/64").network for a in p["v6"])
        for net in sorted(nets4, key=str):
            run(["ip", "-n", sw, "addr", "add", f"{net.network_address + 254}/{net.prefixlen}", "dev", "br0"])
        for net in sorted(nets6, key=str):
            run(["ip", "-n", sw, "addr", "add", f"{net.network_address + 0xfe}/{net.prefixlen}",
                 "dev", "br0", "nodad"])
        run(["ip", "-n", sw, "link", "set", "br0", "up"])
        for p in self.ports.values():
            for a in p["v4"] + p["v6"]:
                run(["ip", "-n", sw, "neigh", "replace", a, "lladdr", p["mac"], "dev", "br0",
                     "nud", "permanent"])
        self.sysctl(sw, "net.ipv4.icmp_ratelimit=0")
        self.sysctl(sw, "net.ipv6.icmp.ratelimit=0", check=False)
        if nft_file:
            if not os.path.isdir("/proc/sys/net/bridge"):
                run(["modprobe", "br_netfilter"], check=False)
            r = self.ex(sw, "sh", "-c", "test -d /proc/sys/net/bridge", check=False)
            if r.returncode != 0:
                raise SetupError("no /proc/sys/net/bridge in the switch namespace: br_netfilter missing")
            self.sysctl(sw, "net.bridge.bridge-nf-call-iptables=1",
                        "net.bridge.bridge-nf-call-ip6tables=1", "net.bridge.bridge-nf-call-arptables=0")
            self.ex(sw, "nft", "-f", nft_file)
        else:
            self.sysctl(sw, "net.bridge.bridge-nf-call-iptables=0",
                        "net.bridge.bridge-nf-call-ip6tables=0", check=False)
        for name in self.order:
            run(["ip", "-n", sw, "link", "set", f"p{self.ports[name]['index']}", "up"])

    def up(self):
        """Brings the ports' links up: after the captures have started, so
        that every frame entering the bridge is seen entering."""
        for name in self.order:
            run(["ip", "-n", self.ns[name], "link", "set", "eth0", "up"])

    def spawn(self, ns, *cmd, **kw):
        pr = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], **kw)
        self.procs.append(pr)
        return pr

    def capture(self, work):
        files = []
        for name in self.order:
            veth = f"p{self.ports[name]['index']}"
            for d in ("in", "out"):
                path = os.path.join(work, f"{name}.{d}.pcap")
                err = open(path + ".log", "w+")
                pr = self.spawn(self.sw, "tcpdump", "-i", veth, "-Q", d, "-U", "--immediate-mode",
                                "-s", "0", "-n",
                                "--time-stamp-precision=nano", "-w", path,
                                stdout=subprocess.DEVNULL, stderr=err)
                files.append((name, d, path, pr, err))
        deadline = time.time() + 10
        for name, d, path, pr, err in files:
            while True:
                err.seek(0)
                if "listening on" in err.read():
                    break
                if pr.poll() is not None or time.time() > deadline:
                    err.seek(0)
                    raise SetupError(f"tcpdump on {name} ({d}) did not start: {err.read().strip()}")
                time.sleep(0.05)
        return files

    def cleanup(self):
        for pr in self.procs:
            if pr.poll() is None:
                pr.kill()
        for pr in self.procs:
            try:
                pr.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for ns in self.created:
            r = run(["ip", "netns", "pids", ns], check=False)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        if self.sw in self.created:
            # The ruleset lives in the switch namespace and goes with it;
            # flushed first all the same.
            run(["ip", "netns", "exec", self.sw, "nft", "flush", "ruleset"], check=False)
        for ns in reversed(self.created):
            run(["ip", "netns", "del", ns], check=False)
        self.created = []


def traffic(lab, cmds):
    """Runs the traffic commands; returns the verdicts `require` names."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    required = []
    servers = collections.defaultdict(list)
    for n, w in cmds:
        if w[0] == "serve":
            if len(w) != 4 or w[2] not in ("tcp", "udp"):
                raise SetupError(f"traffic line {n}: serve PORT tcp|udp N[,N...]")
            servers[w[1]].extend(f"{w[2]}:{x}" for x in w[3].split(","))
        elif w[0] == "require":
            required.extend(w[1:])
    for name, specs in servers.items():
        pr = lab.spawn(lab.ns[lab_port(lab, name)], "python3", "-c", SERVER, *specs,
                       stdout=subprocess.PIPE, text=True)
        if pr.stdout.readline().strip() != "ready":
            raise SetupError(f"servers on {name} did not start")

    def addr(name, v6):
        p = lab.ports[lab_port(lab, name)]
        lst = p["v6"] if v6 else p["v4"]
        if not lst:
            raise SetupError(f"port {name} has no IPv{'6' if v6 else '4'} address")
        return lst[0]

    taken = set()
    for n, w in cmds:
        verb, args = w[0], w[1:]
        v6 = "-6" in args
        args = [a for a in args if a != "-6"]
        source = None
        if "from" in args:
            i = args.index("from")
            if verb not in ("ping", "tcp") or i + 1 >= len(args):
                raise SetupError(f"traffic line {n}: `from ADDR` is for ping and tcp")
            source = args[i + 1]
            del args[i:i + 2]
        if verb in ("serve", "require"):
            continue
        if verb == "sleep":
            time.sleep(float(args[0]))
            continue
        if verb not in ("tcp", "udp", "ping") or len(args) < 2:
            raise SetupError(f"traffic line {n}: unknown command {' '.join(w)}")
        src, dst = lab.ns[lab_port(lab, args[0])], addr(args[1], v6)
        # From the port's own address unless told otherwise: once SRC has
        # taken on another address (`from`), the kernel might choose that
        # one.
        mine = lab.ports[args[0]]["v6" if v6 else "v4"]
        source = source or (mine[0] if mine else None)
        if source and source not in mine and (src, source) not in taken:
            # An address SRC takes on, once (no duplicate address
            # detection: it would hold an IPv6 one back a while).
            plen = "64" if ":" in source else "24"
            extra = ["nodad"] if ":" in source else []
            run(["ip", "-n", src, "addr", "add", f"{source}/{plen}", "dev", "eth0", *extra])
            taken.add((src, source))
        if verb == "tcp":
            host = f"[{dst}]" if v6 else dst
            cmd = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--noproxy", "*",
                   "-m", "1.5", f"http://{host}:{args[2]}/"]
            if source:
                cmd[1:1] = ["--interface", source]
        elif verb == "udp":
            cmd = ["python3", "-c", UDP_CLIENT, dst, args[2]]
        else:
            cmd = ["ping", "-6" if v6 else "-4", "-c", "2", "-i", "0.2", "-W", "1", dst]
            if source:
                cmd[1:1] = ["-I", source]
        r = subprocess.run(["ip", "netns", "exec", src, *cmd], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env)
        last = (r.stdout.strip().splitlines() or [""])[-1]
        print(f"  {' '.join(w):<28} exit {r.returncode}  {last[:60]}", file=sys.stderr)
    return required


def lab_port(lab, name):
    if name not in lab.ports:
        raise SetupError(f"traffic names port {name}, not in the policy")
    return name


# ---------------------------------------------------------------- ctrack


def compare(ctrack, policy, pcap, packets):
    r = subprocess.run([ctrack, "replay", "--policy", policy, "--format", "json", pcap],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SetupError(f"{ctrack} replay --policy: exit {r.returncode}: {r.stderr.strip()}")
    theirs = {}
    for line in r.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if isinstance(obj.get("packet"), int) and not isinstance(obj.get("packet"), bool):
            theirs[obj["packet"]] = obj
    bad = 0
    for rec in packets:
        if rec["verdict"] not in ("allow", "drop", "reject"):
            continue
        obj = theirs.get(rec["packet"])
        verdict = None if obj is None else obj.get("verdict")
        if verdict != rec["verdict"]:
            bad += 1
            extra = ""
            if obj is not None:
                extra = f" (acl {obj.get('acl')}, stage {obj.get('stage')}, ct_state {obj.get('ct_state')})"
            print(f"DISAGREE packet {rec['packet']}: {rec['summary']}: kernel {rec['verdict']}, "
                  f"ctrack {verdict or '(none)'}{extra}")
    return bad


# ---------------------------------------------------------------- main


def write_pcap(path, records):
    """Writes [(ns, port, frame)] as a nanosecond pcap file (Ethernet)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for ns, _, frame in records:
            f.write(struct.pack("<IIII", ns // 1_000_000_000, ns % 1_000_000_000, len(frame), len(frame)))
            f.write(frame)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("policy", help="SCENARIO.toml (NAME.nft and NAME.traffic beside it)")
    ap.add_argument("--nft", help="ruleset (default: NAME.nft)")
    ap.add_argument("--traffic", help="traffic (default: NAME.traffic)")
    ap.add_argument("--out", help="directory for NAME.pcap, NAME.kernel.json and the raw "
                    "captures (default: a temporary one, removed)")
    ap.add_argument("--tag", help="prefix of the namespaces' names (default: ag<pid>-)")
    ap.add_argument("--no-nft", action="store_true", help="a plain bridge: no ruleset")
    ap.add_argument("--no-ctrack", action="store_true", help="stop after the kernel's verdicts")
    ap.add_argument("--ctrack", default=os.environ.get("CTRACK", "target/debug/ctrack"),
                    help="the ctrack binary (default: $CTRACK or target/debug/ctrack)")
    a = ap.parse_args()
    base = a.policy[:-5] if a.policy.endswith(".toml") else a.policy
    name = os.path.basename(base)
    nft_file = None if a.no_nft else os.path.abspath(a.nft or base + ".nft")
    traffic_file = a.traffic or base + ".traffic"
    if os.geteuid() != 0:
        print("nft-agree.py: needs root (network namespaces)", file=sys.stderr)
        return 2
    ports = load_ports(a.policy)
    cmds = load_traffic(traffic_file)
    if not a.no_ctrack and not os.access(a.ctrack, os.X_OK):
        print(f"nft-agree.py: no ctrack binary at {a.ctrack} (--ctrack, $CTRACK or --no-ctrack)",
              file=sys.stderr)
        return 2
    tmp = None
    if a.out:
        out = a.out
        os.makedirs(out, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="nft-agree-")
        out = tmp.name
    work = os.path.join(out, f"{name}.raw")
    os.makedirs(work, exist_ok=True)
    lab = Lab(ports, a.tag or f"ag{os.getpid()}-")

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        print(f"{name}: building {len(ports)} ports on a bridge"
              + ("" if a.no_nft else f", ruleset {os.path.relpath(nft_file)}"), file=sys.stderr)
        lab.build(nft_file)
        files = lab.capture(work)
        lab.up()
        up_ns = time.time_ns()
        time.sleep(0.5)
        required = traffic(lab, cmds)
        time.sleep(0.5)
        # What entered first, then what left: a frame seen entering is
        # seen leaving; one seen only leaving (entered after the stop) is
        # told apart by its time.
        stop_ns = time.time_ns()
        for d in ("in", "out"):
            for _, d_, _, pr, _ in files:
                if d_ == d:
                    pr.send_signal(signal.SIGINT)
            for _, d_, _, pr, _ in files:
                if d_ == d:
                    pr.wait(timeout=10)
            time.sleep(0.3)
        if not a.no_nft:
            r = lab.ex(lab.sw, "nft", "list", "ruleset", check=False)
            with open(os.path.join(work, "ruleset.after"), "w") as f:
                f.write(r.stdout)
    except SetupError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 2
    finally:
        lab.cleanup()
    ingress, egress = [], {}
    for port, d, path, _, _ in files:
        _, recs = pcapmerge.read(path)
        if d == "in":
            ingress.extend((ns, port, frame) for ns, _, frame in recs)
        else:
            egress[port] = [(ns, frame) for ns, _, frame in recs]
    order = {p: i for i, p in enumerate(lab.order)}
    ingress.sort(key=lambda r: (r[0], order[r[1]]))
    merged = os.path.join(out, f"{name}.pcap")
    write_pcap(merged, ingress)
    packets, generated = kernel_verdicts(ingress, egress, stop_ns, up_ns)
    with open(os.path.join(out, f"{name}.kernel.json"), "w") as f:
        json.dump({"scenario": name, "packets": packets, "generated": generated}, f, indent=1)
    counts = collections.Counter(p["verdict"] for p in packets)
    kinds = collections.Counter(g["kind"] for g in generated)
    print(f"{name}: {len(packets)} packets entered the bridge: "
          + ", ".join(f"{counts[v]} {v}" for v in ("allow", "drop", "reject"))
          + "; left without entering: " + (", ".join(f"{c} {k}" for k, c in sorted(kinds.items())) or "none"),
          file=sys.stderr)
    status = 0
    for g in generated:
        if g["kind"] == "unexplained":
            print(f"{name}: left the bridge on {g['port']} without entering it: {g['summary']}",
                  file=sys.stderr)
            status = 2
    if a.no_nft and (counts["drop"] or counts["reject"]):
        print(f"{name}: the plain bridge dropped {counts['drop'] + counts['reject']} frames",
              file=sys.stderr)
        status = 2
    for v in required:
        if not counts[v]:
            print(f"{name}: the traffic requires a kernel verdict {v}, none seen", file=sys.stderr)
            status = 2
    if status:
        return status
    if a.no_ctrack:
        print(f"{name}: capture {merged}, kernel verdicts {os.path.join(out, name + '.kernel.json')}",
              file=sys.stderr)
        return 0
    try:
        bad = compare(a.ctrack, a.policy, merged, packets)
    except SetupError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 2
    if bad:
        print(f"{name}: {bad} of {len(packets)} packets disagree", file=sys.stderr)
        return 1
    print(f"{name}: ctrack agrees with the kernel on all {len(packets)} packets", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (SystemExit, KeyboardInterrupt):
        raise
    except Exception:  # a failure of the script or the lab, not a disagreement
        import traceback
        traceback.print_exc()
        sys.exit(2)
