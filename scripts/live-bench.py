#!/usr/bin/env python3
"""Live forwarding benchmark: ctrack against Open vSwitch and the kernel.

  live-bench.py [--only ctrack,ovs,kernel,redirect,xdp-redirect] [--runs N] [--seconds S]
                [--io af-packet,af-xdp] [--workers 1,2] [--ctrack PATH]
                [--ovs-ports system,afxdp] [--figures udp,tcp,cps,rtt]
                [--json FILE] [--no-bare] [--no-sweep] [--fwd-rx fwd|sender]
                [--offloads off|on] [--fwd-cpus LIST] [--sink-cpu N]

Every forwarder forwards the same traffic between the same two veth pairs,
one after the other in one invocation, on this machine:

  client ns: c0 10.77.0.1 <-veth-> c1 [forwarder ns] s1 <-veth-> s0 10.77.0.2: server ns

(c1 and s1 are named lbNNNNc1 and lbNNNNs1, unique on the host.) Every
veth's checksum and segmentation offloads are off, or, with `--offloads
on`, on as a veth comes (the senders then hand over TCP segments of up to
64 KiB and leave checksums to finish; the AF_XDP rows cannot take them).
Rows:

- `bare`: no forwarder, c0 and s0 paired directly: what the generators
  manage alone (a forwarder close to it is limited by the tools).
- `kernel`: a Linux bridge over c1 and s1, br_netfilter on
  (bridge-nf-call-iptables=1) and an nftables inet forward chain:
  established,related accept; client -> server `ct state new` accept (by
  MAC, as tests/agree/*.nft: iifname is br0 for bridged packets); policy
  drop. ARP is bridged (br_netfilter hands only IP to inet).
- `redirect`: no bridge, no filter: a tc ingress filter on c1 and on s1
  (u32, every frame) whose mirred action redirects each frame out of the
  other veth. The cheapest forwarding the kernel has between two veths:
  not a firewall, a reference for how much any forwarder on this layout
  can deliver (on a 2-core machine the generator's core, not the
  forwarder's, bounds it).
- `xdp-redirect`: `redirect` with an XDP program on c1 and s1 (veth's
  native XDP) that passes every frame (`r0 = XDP_PASS; exit`, loaded by
  this script through the bpf system call and pinned in a bpf file system
  of its scratch folder). What the same redirect costs once a program is
  attached to the veths as AF_XDP needs one: veth then receives through
  NAPI, copies each frame into a page with XDP's headroom and builds a
  socket buffer again. The ceiling of any forwarder that attaches XDP to
  its veths.
- `ovs-system`, `ovs-afxdp`: Open vSwitch's userspace datapath without its
  kernel module: ovsdb-server and `ovs-vswitchd --disable-system` in a
  scratch folder (own database made by ovsdb-tool from vswitch.ovsschema,
  own sockets, pidfiles and logs; no system OVS is touched), a bridge with
  datapath_type=netdev, ports c1 (ofport 1) and s1 (ofport 2), the flow
  table: table 0 `ct_state=-trk,ip -> ct(table=1)`, ARP NORMAL; table 1
  from the client `+trk+new -> ct(commit),output:2`, `+trk+est -> output`
  both ways, from the server `+trk+new -> drop`. Port type `system`
  (netdev-linux, AF_PACKET): polled by ovs-vswitchd's main thread, a batch
  per main-loop pass, no PMD thread; `afxdp` (AF_XDP, xdp-mode
  best-effort): polled by a PMD thread, other_config:pmd-cpu-mask set to
  the forwarder's CPUs. A PMD busy-polls: its core shows 100% busy always.
- `ctrack-IO-wN`: `ctrack run --policy P --port client=c1 --port
  server=s1 --io IO --workers N --max-conns 1000000 --ctl SOCK`, P:
  default drop, ARP allow-stateless both ways, from the client `ip4`
  allow-related (UDP, TCP and the ping that checks the path), as
  tests/live/main.rs; one row per --io and --workers. --io takes
  af-packet, af-xdp, and af-packet-v2 / af-packet-v3 (af-packet with
  `--rx-ring v2` / `v3`).

For each: wait a second to see that the machine is quiet (warns if not),
build the namespaces, start the forwarder, wait until ping passes, measure
--runs runs of each figure, then tear everything down (processes,
namespaces, bridge, rulesets, OVS and its folder) whatever happens
(exceptions, Ctrl-C, SIGTERM, SIGHUP). Figures (median of the runs; every
run and every offered load in --json):

- `udp`: 64-byte frames (60 without the FCS: Ethernet, IPv4, UDP, 18 zero
  bytes) to UDP port 9 from 1,000 flows (source ports 10000-10999 in
  turn), sent by trafgen (netsniff-ng) from the client namespace, counted
  as the packets s0 received (rx_packets) over --seconds after --warmup;
  the server drops them at its ingress hook (an nftables netdev table),
  so no ICMP comes back. Offered: what c0 sent (and dropped) meanwhile.
  First flat out (trafgen's TX_RING); while packets are lost, again at
  lower offered loads (trafgen -b, each 0.7 of the last, 2 s each) down
  to the first without loss. trafgen -b paces by the second: it sends
  each second's frames in one burst at full speed (about 1.4 Mpps here),
  so the lower levels are line-rate bursts of fewer frames, not smooth
  lighter loads (trafgen -t paces frame by frame but not beyond about 40
  thousand a second here). Reported: the maximum forwarding rate (the
  most delivered at any load, RFC 2889's term); also kept: the rate at the
  maximum offered load. A userspace forwarder whose core also does the
  veth receive can deliver less when offered more (receive livelock).
  trafgen's TX_RING socket needs a larger send buffer than the default
  when the receiver is on another core (else sendto fails with EAGAIN and
  trafgen exits); trafgen cannot raise it inside a namespace, so this
  script raises net.core.wmem_default (host-wide) to 32 MiB while trafgen
  opens its socket and puts it back at once (and at exit, however it
  ends). --trafgen-sendto avoids that (sendto() mode, about half the rate).
- `tcp`: iperf3, one TCP stream client -> server, --seconds after a
  one-second --omit; the receiver's bits per second.
- `cps`: new TCP connections per second: a Python client (epoll, 64
  connections in flight) connects to 16 listening ports of a Python server
  that accepts and closes; the client closes once connected: handshake
  and both FINs for each one counted. Python on one core is slow (about
  12,000 a second on the development machine): the `bare` row says what
  the tools manage alone; a forwarder near it was not the limit.
- `rtt`: `ping` from the client to the server every 10 ms for --seconds,
  nothing else running: the mean round trip in microseconds (also min,
  max, mdev and losses in the JSON). What a sparse flow (a handshake, a
  DNS query, the ACKs of a slow stream) waits at the forwarder.

Cores: trafgen pins itself to CPU 0 (`-P 1`), so the generators and the
endpoints (trafgen, iperf3, the cps tool, and the endpoints' receive
processing, steered by RPS on c0 and s0) run on CPU 0; with --sink-cpu N
the receiving end (s0's receive processing, the iperf3 and cps servers)
runs on CPU N instead, so that on a machine of three or more CPUs the
generator's core does not also carry the receiver's work (on 2 CPUs
there is no core to spare: the receiver shares the generator's). The
forwarder runs on --fwd-cpus (default: every CPU but the generator's
and the sink's): ovs-vswitchd and ovsdb-server or
ctrack by taskset, and the receive processing of c1 and s1 (the kernel
bridge's whole work) by RPS; when the forwarder attaches XDP, veth
receives through NAPI on the sending CPU instead, so the script makes
that NAPI threaded and pins its threads there too. --fwd-rx sender leaves
veth's own way (receive work on the sending CPU, the generator's for c1).
On a 2-core machine that is one core each, and the table says so.

Offloads are off on every veth (tx, rx, tso, gso, gro): every forwarder
gets plain frames with real checksums. IPv6 is off in every namespace.

Output: a table (medians; [N%] the forwarder cores' busy share; ratios
of every ctrack row to every OVS row, to the kernel and to `redirect`, and
of the kernel to `redirect`) and, with --json,
every run. Under the table, for each row's median UDP run: the forwarder
cores' time split from /proc/stat (user, system, softirq, irq, steal,
idle; the veth receive work of threaded NAPI shows as system) and their
busy nanoseconds per delivered packet; for ctrack rows also the workers'
own accounting (`ctrack ctl stats --format json`, `cost`, read just before
and after each measuring window): nanoseconds per received packet in
recv, switch, firewall, send and other, their sum (busy), and the
workers' idle share. Every run prints the same under its line. Exit status 0; 1 if a forwarder failed (the others are still
measured); 2 for missing prerequisites (with the apt-get line to run).
Needs root, Python >= 3.9, iproute2, ethtool, util-linux (taskset),
nftables, netsniff-ng (trafgen), iputils-ping, openvswitch-switch,
iperf3; standard library only.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree

CLIENT_MAC, SERVER_MAC = "02:77:00:00:00:01", "02:77:00:00:00:02"
CLIENT_IP, SERVER_IP = "10.77.0.1", "10.77.0.2"
UDP_PORT, FLOWS, SPORT0 = 9, 1000, 10000
CPS_BASE, CPS_PORTS, CPS_CONCURRENCY = 20000, 16, 64
OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
WMEM_DEFAULT = "/proc/sys/net/core/wmem_default"
WMEM_BOOST = 32 << 20
SWEEP_SECONDS = 2
OFFLOADS = ["tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"]
# `--offloads on`: a veth's own defaults (checksums left to offload, TCP
# segmentation offload: the senders hand over frames of up to 64 KiB).
OFFLOADS_ON = ["tx", "on", "rx", "on", "tso", "on", "gso", "on", "gro", "off"]

# The programs each part needs and the Debian package that has them.
NEEDS = {
    "all": {"ip": "iproute2", "tc": "iproute2", "ethtool": "ethtool", "taskset": "util-linux",
            "nft": "nftables", "mount": "mount",
            "trafgen": "netsniff-ng", "iperf3": "iperf3", "ping": "iputils-ping"},
    "ovs": {"ovs-vswitchd": "openvswitch-switch", "ovsdb-server": "openvswitch-common",
            "ovsdb-tool": "openvswitch-common", "ovs-vsctl": "openvswitch-switch",
            "ovs-ofctl": "openvswitch-common", "ovs-appctl": "openvswitch-common"},
}

CPS_TOOL = r'''
import json, select, socket, sys, time
mode, addr, base, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ep = select.epoll()
if mode == "server":
    ls = {}
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, base + i))
        s.listen(4096)
        s.setblocking(False)
        ep.register(s.fileno(), select.EPOLLIN)
        ls[s.fileno()] = s
    print("ready", flush=True)
    while True:
        for fd, _ in ep.poll():
            while True:
                try:
                    c, _ = ls[fd].accept()
                except BlockingIOError:
                    break
                c.close()
conc, warm, secs = int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
live, k, done, fail = {}, 0, 0, 0
def start():
    global k
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    s.connect_ex((addr, base + k % n))
    k += 1
    ep.register(s.fileno(), select.EPOLLOUT)
    live[s.fileno()] = (s, time.monotonic())
for _ in range(conc):
    start()
t0 = time.monotonic()
t_warm, t_end, mark = t0 + warm, t0 + warm + secs, None
while True:
    now = time.monotonic()
    if mark is None and now >= t_warm:
        mark = (now, done, fail)
    if now >= t_end:
        break
    for fd, _ in ep.poll(0.05):
        s, _ = live.pop(fd)
        ep.unregister(fd)
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
            done += 1
        else:
            fail += 1
        s.close()
        start()
    for fd, (s, t) in list(live.items()):
        if now - t > 2:  # a lost SYN: give up on it, count it as failed
            live.pop(fd)
            ep.unregister(fd)
            s.close()
            fail += 1
            start()
t, d, f = mark or (t0, 0, 0)
print(json.dumps({"done": done - d, "failed": fail - f, "seconds": time.monotonic() - t}))
'''


class BenchError(Exception):
    """A setup or measurement failure of one forwarder."""


class Interrupted(BaseException):
    """A signal asked us to stop: unwinds to the cleanups."""


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       stdin=subprocess.DEVNULL, **kw)
    if check and r.returncode != 0:
        raise BenchError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-500:]}")
    return r


def wait_until(pred, seconds, step=0.1):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def cpu_list_mask(cpus):
    return format(sum(1 << c for c in cpus), "x")


def cpu_busy(cpus):
    """(busy, total) jiffies of CPUs `cpus` from /proc/stat."""
    busy = total = 0
    with open("/proc/stat") as f:
        for line in f:
            w = line.split()
            if w[0].startswith("cpu") and w[0][3:].isdigit() and int(w[0][3:]) in cpus:
                v = [int(x) for x in w[1:9]]
                total += sum(v)
                busy += sum(v) - v[3] - v[4]  # less idle and iowait
    return busy, total


def busy_share(before, after):
    db, dt = after[0] - before[0], after[1] - before[1]
    return round(db / dt, 3) if dt > 0 else None


# /proc/stat's first eight fields, and how the split names them.
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
SPLIT = {"user": ("user", "nice"), "system": ("system",), "softirq": ("softirq",),
         "irq": ("irq",), "steal": ("steal",), "idle": ("idle", "iowait")}


def cpu_fields(cpus):
    """/proc/stat's jiffies of CPUs `cpus`, summed, by field."""
    out = dict.fromkeys(STAT_FIELDS, 0)
    with open("/proc/stat") as f:
        for line in f:
            w = line.split()
            if w[0].startswith("cpu") and w[0][3:].isdigit() and int(w[0][3:]) in cpus:
                for k, v in zip(STAT_FIELDS, w[1:9]):
                    out[k] += int(v)
    return out


def cpu_split(before, after):
    """Shares of the CPUs' time between two cpu_fields: user, system,
    softirq, irq, steal, idle."""
    d = {k: after[k] - before[k] for k in STAT_FIELDS}
    total = sum(d.values())
    if total <= 0:
        return None
    return {name: round(sum(d[k] for k in keys) / total, 3) for name, keys in SPLIT.items()}


def cost_delta(a, b):
    """ctrack's cost figures (`ctl stats`' `cost`) between two snapshots:
    nanoseconds per packet by part, and shares of the workers' wall time."""
    if not a or not b:
        return None
    try:
        packets = b["packets"] - a["packets"]
        rounds = b["rounds"] - a["rounds"]
        ns = {k: b["ns"][k] - a["ns"].get(k, 0) for k in b["ns"]}
        wall = ns["total"]
        per = {}
        if packets > 0:
            per = {k: round(ns[k] / packets, 1)
                   for k in ("recv", "switch", "firewall", "send", "other")}
            per["busy"] = round((wall - ns["idle"]) / packets, 1)
        share = ({k: round(ns[k] / wall, 3)
                  for k in ("recv", "switch", "firewall", "send", "other", "idle")}
                 if wall > 0 else {})
    except (KeyError, TypeError):
        return None
    return {"packets": packets, "rounds": rounds,
            "packets_per_round": round(packets / rounds, 1) if rounds > 0 else None,
            "ns_per_packet": per, "share": share, "ns": ns}


def fmt_split(split, cpus, pps):
    """CPU 1: user 30%, system 50%, ...; per forwarded packet."""
    if not split:
        return None
    text = f"CPU {fmt_cpus(cpus)}: " + ", ".join(
        f"{k} {pct(split[k])}" for k in ("user", "system", "softirq", "irq", "steal", "idle")
        if split.get(k) or k in ("user", "system", "softirq", "idle"))
    if pps:
        busy_ns = (1 - split["idle"]) * len(cpus) * 1e9 / pps
        text += f"; {busy_ns:,.0f} ns of busy CPU per delivered packet"
    return text


def fmt_cost(cost):
    """ctrack ns/packet: recv ..., then the workers' idle share."""
    if not cost or not cost.get("ns_per_packet"):
        return None
    per = cost["ns_per_packet"]
    text = "ctrack ns per received packet: " + ", ".join(
        f"{k} {per[k]:,.0f}" for k in ("recv", "switch", "firewall", "send", "other"))
    text += f" = busy {per['busy']:,.0f}"
    if cost.get("share"):
        text += f"; workers idle {pct(cost['share']['idle'])}"
    if cost.get("packets_per_round"):
        text += f"; {cost['packets_per_round']} packets a round"
    return text


# ---------------------------------------------------------------- the network


class Topology:
    """The namespaces and veths of one forwarder's turn; `cleanup` removes
    everything it made and every process started in it."""

    def __init__(self, tag, direct, cpus, work, fwd_rx="fwd", offloads=OFFLOADS):
        self.c, self.s, self.f = f"{tag}c", f"{tag}s", f"{tag}f"
        self.offloads = offloads
        # The forwarder's ends: names unique on the host, as their NAPI
        # threads (af-xdp) are found by name.
        self.c1, self.s1 = f"{tag}c1", f"{tag}s1"
        self.fwd_rx = fwd_rx
        self.direct = direct
        # The generator's CPU, the forwarder's, the receiving end's.
        self.gen_cpu, self.fwd_cpus, self.sink_cpu = cpus
        self.work = work
        self.procs = {}
        self.forwarder = None  # set by bench_forwarder
        self.created = []

    def ex(self, ns, *cmd, check=True):
        return run(["ip", "netns", "exec", ns, *cmd], check=check)

    def spawn(self, ns, name, argv, cpus, env=None, stdout=None):
        """Starts argv in namespace ns pinned to cpus; output in WORK/name.*."""
        out = stdout or open(os.path.join(self.work, f"{name}.out"), "w")
        err = open(os.path.join(self.work, f"{name}.err"), "w")
        cmd = ["ip", "netns", "exec", ns, "taskset", "-c", ",".join(map(str, cpus)), *argv]
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                             start_new_session=True, text=True)
        self.procs[name] = p
        return p

    def log(self, name):
        text = ""
        for ext in ("out", "err"):
            try:
                with open(os.path.join(self.work, f"{name}.{ext}")) as f:
                    text += f.read()[-1500:]
            except OSError:
                pass
        return text.strip()

    def stop(self, name, sig=signal.SIGTERM, wait=5):
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, sig)
            p.wait(timeout=wait)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()

    def build(self):
        names = [self.c, self.s] if self.direct else [self.c, self.s, self.f]
        for ns in names:
            run(["ip", "netns", "add", ns])
            self.created.append(ns)
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            self.ex(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1")
        if self.direct:
            run(["ip", "link", "add", "c0", "netns", self.c, "type", "veth", "peer", "name", "s0",
                 "netns", self.s])
            ends = [(self.c, "c0", self.gen_cpu), (self.s, "s0", self.sink_cpu)]
        else:
            for end, inner, ns in ((self.c1, "c0", self.c), (self.s1, "s0", self.s)):
                run(["ip", "link", "add", end, "netns", self.f, "type", "veth", "peer", "name",
                     inner, "netns", ns])
            ends = [(self.c, "c0", self.gen_cpu), (self.s, "s0", self.sink_cpu)]
            ends += [(self.f, self.c1, None), (self.f, self.s1, None)]
        for ns, dev, mac, addr in ((self.c, "c0", CLIENT_MAC, CLIENT_IP),
                                   (self.s, "s0", SERVER_MAC, SERVER_IP)):
            run(["ip", "-n", ns, "link", "set", dev, "address", mac])
            run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
        for ns, dev, cpu in ends:
            self.ex(ns, "ethtool", "-K", dev, *self.offloads)
            # Receive processing on the endpoints' core or the forwarder's.
            mask = cpu_list_mask([cpu] if cpu is not None else self.fwd_cpus)
            if cpu is None and self.fwd_rx == "sender":
                mask = "0"
            self.ex(ns, "sh", "-c", f"echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus")
            run(["ip", "-n", ns, "link", "set", dev, "up"])
        # The server drops the UDP load before its IP stack: no ICMP back.
        sink = (f'table netdev livebench_sink {{\n chain in {{\n  type filter hook ingress '
                f'device "s0" priority 0;\n  udp dport {UDP_PORT} counter drop\n }}\n}}\n')
        path = os.path.join(self.work, "sink.nft")
        with open(path, "w") as f:
            f.write(sink)
        self.ex(self.s, "nft", "-f", path)
        self.ex(self.c, "sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1",
                "net.ipv4.ip_local_port_range=1024 65535")

    def link(self, ns, dev):
        r = run(["ip", "-s", "-j", "-n", ns, "link", "show", "dev", dev])
        return json.loads(r.stdout)[0]["stats64"]

    def pin_napi(self):
        """When the forwarder attached XDP to its veths, veth receives
        through NAPI on the sending CPU; threaded NAPI, pinned to the
        forwarder's CPUs, puts that work with the rest of the forwarder's.
        Returns the threads pinned."""
        pinned = []
        for dev in (self.c1, self.s1) if self.fwd_rx == "fwd" else ():
            r = self.ex(self.f, "sh", "-c", f"echo 1 > /sys/class/net/{dev}/threaded", check=False)
            if r.returncode != 0:
                continue  # no NAPI: no XDP program
            for comm in glob.glob("/proc/[0-9]*/comm"):
                try:
                    with open(comm) as f:
                        name = f.read().strip()
                except OSError:
                    continue
                if name.startswith(f"napi/{dev}-"):
                    pid = comm.split("/")[2]
                    run(["taskset", "-pc", fmt_cpus(self.fwd_cpus), pid])
                    pinned.append(name)
        return pinned

    def ping(self):
        r = self.ex(self.c, "ping", "-c", "1", "-W", "1", SERVER_IP, check=False)
        return r.returncode == 0

    def cleanup(self):
        for name in list(self.procs):
            self.stop(name, signal.SIGKILL, wait=2)
        for ns in self.created:
            pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        for ns in reversed(self.created):
            run(["ip", "netns", "exec", ns, "nft", "flush", "ruleset"], check=False)
            run(["ip", "netns", "del", ns], check=False)
        self.created = []


# ---------------------------------------------------------------- forwarders


class Bare:
    """No forwarder: c0 and s0 paired directly."""
    name, label, direct = "bare", "bare veth (no forwarder)", True

    def start(self, topo, args):
        pass

    def stop(self, topo):
        pass

    def counters(self, topo):
        return {}

    def where(self, topo):
        return "nothing forwards"


class Kernel:
    """A Linux bridge with br_netfilter and an nftables inet forward chain."""
    name, label, direct = "kernel", "kernel bridge + nftables", False

    def start(self, topo, args):
        f = topo.f
        run(["ip", "-n", f, "link", "add", "br0", "type", "bridge", "stp_state", "0",
             "mcast_snooping", "0"])
        for dev in (topo.c1, topo.s1):
            run(["ip", "-n", f, "link", "set", dev, "master", "br0"])
        run(["ip", "-n", f, "link", "set", "br0", "up"])
        if topo.ex(f, "test", "-d", "/proc/sys/net/bridge", check=False).returncode != 0:
            run(["modprobe", "br_netfilter"], check=False)
        topo.ex(f, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1",
                "net.bridge.bridge-nf-call-ip6tables=1", "net.bridge.bridge-nf-call-arptables=0")
        path = os.path.join(topo.work, "kernel.nft")
        with open(path, "w") as fh:
            fh.write(f"""table inet livebench {{
    chain forward {{
        type filter hook forward priority filter; policy drop;
        ct state established,related accept
        ether saddr {CLIENT_MAC} ether daddr {SERVER_MAC} ct state new accept
    }}
}}
""")
        topo.ex(f, "nft", "-f", path)

    def stop(self, topo):
        if topo.f in topo.created:
            topo.ex(topo.f, "nft", "flush", "ruleset", check=False)
            run(["ip", "-n", topo.f, "link", "del", "br0"], check=False)

    def counters(self, topo):
        r = topo.ex(topo.f, "cat", "/proc/sys/net/netfilter/nf_conntrack_count", check=False)
        return {"nf_conntrack_count": r.stdout.strip()}

    def where(self, topo):
        return f"softirq on CPU {fmt_cpus(topo.fwd_cpus)} (RPS on its veths)"


class Redirect:
    """tc mirred redirect between c1 and s1, every frame, no filtering: the
    layout's ceiling, not a firewall."""
    name, label, direct = "redirect", "tc redirect (no filter)", False

    def start(self, topo, args):
        for a, b in ((topo.c1, topo.s1), (topo.s1, topo.c1)):
            topo.ex(topo.f, "tc", "qdisc", "add", "dev", a, "clsact")
            # u32 with an empty match takes every frame (this kernel may
            # lack matchall and flower).
            topo.ex(topo.f, "tc", "filter", "add", "dev", a, "ingress", "protocol", "all",
                    "u32", "match", "u32", "0", "0",
                    "action", "mirred", "egress", "redirect", "dev", b)

    def stop(self, topo):
        # The qdiscs go with the namespace's veths.
        pass

    def counters(self, topo):
        return {}

    def where(self, topo):
        return f"softirq on CPU {fmt_cpus(topo.fwd_cpus)} (RPS on its veths)"


def xdp_pass_program(path):
    """Loads the XDP program `r0 = XDP_PASS; exit` and pins it at `path`
    (in a bpf file system), for `ip link set ... xdpdrv pinned`."""
    import ctypes
    nr = {"x86_64": 321, "aarch64": 280}.get(platform.machine())
    if nr is None:
        raise BenchError(f"no bpf system call number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)

    def bpf(cmd, attr):
        buf = ctypes.create_string_buffer(bytes(attr), len(attr))
        r = libc.syscall(nr, cmd, buf, len(attr))
        if r < 0:
            e = ctypes.get_errno()
            raise BenchError(f"bpf({cmd}): {os.strerror(e)}")
        return r

    # mov r0, 2 (XDP_PASS); exit
    insns = struct.pack("<BBhi", 0xb7, 0, 0, 2) + struct.pack("<BBhi", 0x95, 0, 0, 0)
    code = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(b"GPL")
    attr = bytearray(128)  # union bpf_attr, BPF_PROG_LOAD: type XDP (6), 2 insns
    struct.pack_into("<IIQQ", attr, 0, 6, 2, ctypes.addressof(code), ctypes.addressof(lic))
    fd = bpf(5, attr)  # BPF_PROG_LOAD
    try:
        name = ctypes.create_string_buffer(path.encode())
        pin = bytearray(16)
        struct.pack_into("<QI", pin, 0, ctypes.addressof(name), fd)
        bpf(6, pin)  # BPF_OBJ_PIN
    finally:
        os.close(fd)


class XdpRedirect(Redirect):
    """`Redirect` with an XDP program that passes every frame attached to
    c1 and s1 (veth's native XDP): the ceiling of an XDP forwarder."""
    name, label, direct = "xdp-redirect", "XDP pass + tc redirect", False

    def start(self, topo, args):
        super().start(topo, args)
        # `ip netns exec` mounts a /sys of its own: the bpf file system
        # goes in the scratch folder, which the namespace sees.
        self.fs = os.path.join(topo.work, "bpffs")
        os.makedirs(self.fs, exist_ok=True)
        run(["mount", "-t", "bpf", "bpf", self.fs])
        prog = os.path.join(self.fs, "pass")
        xdp_pass_program(prog)
        for dev in (topo.c1, topo.s1):
            topo.ex(topo.f, "ip", "link", "set", "dev", dev, "xdpdrv", "pinned", prog)

    def stop(self, topo):
        if getattr(self, "fs", None):
            run(["umount", self.fs], check=False)
            self.fs = None

    def where(self, topo):
        return super().where(topo) + "; veth's NAPI (native XDP)"


class Ovs:
    """Open vSwitch's userspace datapath from a scratch folder; its veth
    ports of type `system` (AF_PACKET, polled by the main thread) or
    `afxdp` (AF_XDP, polled by a PMD thread)."""
    direct = False

    def __init__(self, port_type="system"):
        self.port_type = port_type
        self.name = f"ovs-{port_type}"
        self.label = f"OVS netdev, {port_type} ports"

    FLOWS = """\
table=0,priority=200,arp,actions=NORMAL
table=0,priority=100,ct_state=-trk,ip,actions=ct(table=1)
table=0,priority=0,actions=drop
table=1,priority=100,in_port=1,ct_state=+trk+new,ip,actions=ct(commit),output:2
table=1,priority=100,in_port=1,ct_state=+trk+est,ip,actions=output:2
table=1,priority=100,in_port=2,ct_state=+trk+est,ip,actions=output:1
table=1,priority=100,in_port=2,ct_state=+trk+new,ip,actions=drop
table=1,priority=0,actions=drop
"""

    def start(self, topo, args):
        d = self.dir = os.path.join(topo.work, "ovs")
        os.mkdir(d)
        self.env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d, OVS_SYSCONFDIR=d)
        self.db = f"unix:{d}/db.sock"
        run(["ovsdb-tool", "create", f"{d}/conf.db", OVS_SCHEMA], env=self.env)
        cpus = topo.fwd_cpus
        topo.spawn(topo.f, "ovsdb-server", [
            "ovsdb-server", f"{d}/conf.db", f"--remote=punix:{d}/db.sock",
            f"--unixctl={d}/ovsdb-server.ctl", f"--pidfile={d}/ovsdb-server.pid",
            f"--log-file={d}/ovsdb-server.log", "--no-chdir", "-vconsole:off"], cpus, env=self.env)
        if not wait_until(lambda: os.path.exists(f"{d}/db.sock"), 10):
            raise BenchError(f"ovsdb-server did not start: {topo.log('ovsdb-server')}")
        self.vsctl("--no-wait", "init")
        topo.spawn(topo.f, "ovs-vswitchd", [
            "ovs-vswitchd", self.db, "--disable-system", f"--unixctl={d}/ovs-vswitchd.ctl",
            f"--pidfile={d}/ovs-vswitchd.pid", f"--log-file={d}/ovs-vswitchd.log",
            "--no-chdir", "-vconsole:off"], cpus, env=self.env)
        if self.port_type == "afxdp":
            self.vsctl("set", "Open_vSwitch", ".",
                       f"other_config:pmd-cpu-mask={cpu_list_mask(cpus)}")
        ports = []
        for n, dev in ((1, topo.c1), (2, topo.s1)):
            ports += ["--", "add-port", "br0", dev, "--", "set", "interface", dev,
                      f"ofport_request={n}", f"type={self.port_type}"]
            if self.port_type == "afxdp":
                ports += [f"options:xdp-mode={os.environ.get('LB_XDP_MODE', 'best-effort')}"]
        self.vsctl("--timeout=30", "add-br", "br0", "--", "set", "bridge", "br0",
                   "datapath_type=netdev", "fail_mode=secure", *ports)
        self.ports = (topo.c1, topo.s1)
        for dev in self.ports:
            err = self.vsctl("get", "interface", dev, "error").stdout.strip()
            if err not in ("[]", ""):
                raise BenchError(f"OVS port {dev}: {err}")
        path = os.path.join(d, "flows.txt")
        with open(path, "w") as fh:
            fh.write(self.FLOWS)
        run(["ovs-ofctl", "add-flows", f"unix:{d}/br0.mgmt", path], env=self.env)

    def vsctl(self, *a):
        return run(["ovs-vsctl", f"--db={self.db}", *a], env=self.env)

    def appctl(self, *a):
        return run(["ovs-appctl", "-t", f"{self.dir}/ovs-vswitchd.ctl", *a], env=self.env,
                   check=False)

    def stop(self, topo):
        if getattr(self, "dir", None) and os.path.exists(f"{self.dir}/ovs-vswitchd.ctl"):
            self.appctl("exit", "--cleanup")
        topo.stop("ovs-vswitchd")
        topo.stop("ovsdb-server")
        if getattr(self, "dir", None):
            shutil.rmtree(self.dir, ignore_errors=True)

    def counters(self, topo):
        out = {}
        for key, cmd in (("dpif", ["dpif/show"]), ("ct", ["dpctl/ct-stats-show"]),
                         ("pmd", ["dpif-netdev/pmd-stats-show"])):
            out[key] = self.appctl(*cmd).stdout.strip()
        for dev in getattr(self, "ports", ()):
            out[f"status {dev}"] = self.vsctl("get", "interface", dev, "status").stdout.strip()
        out["flows"] = run(["ovs-ofctl", "dump-flows", f"unix:{self.dir}/br0.mgmt"],
                           env=self.env, check=False).stdout.strip()
        return out

    def where(self, topo):
        poller = ("its main thread polls the ports" if self.port_type == "system"
                  else f"a PMD thread polls the ports, pmd-cpu-mask={cpu_list_mask(topo.fwd_cpus)}")
        return (f"ovs-vswitchd ({poller}) and ovsdb-server pinned to CPU "
                f"{fmt_cpus(topo.fwd_cpus)}; veth receive there too (RPS)")


class Ctrack:
    """`ctrack run` with the policy twin of the others."""
    direct = False

    def __init__(self, path, io, workers):
        self.path, self.io, self.workers = path, io, workers
        self.name = f"ctrack-{io}-w{workers}"
        self.label = f"ctrack {io} workers={workers}"

    POLICY = f'''[default]
action = "drop"

[[port]]
name = "client"
addresses = ["{CLIENT_MAC} {CLIENT_IP}"]

[[port]]
name = "server"
addresses = ["{SERVER_MAC} {SERVER_IP}"]

[[acl]]
name = "arp-out"
direction = "from-lport"
priority = 32000
match = "arp"
action = "allow-stateless"

[[acl]]
name = "arp-in"
direction = "to-lport"
priority = 32000
match = "arp"
action = "allow-stateless"

[[acl]]
name = "client-out"
direction = "from-lport"
priority = 1000
match = "inport == \\"client\\" && ip4"
action = "allow-related"

# Each stage reaches its own default: the server's to-lport stage must
# allow the client's connections too (docs/firewall.md).
[[acl]]
name = "server-in"
direction = "to-lport"
priority = 1000
match = "outport == \\"server\\" && ip4.src == {CLIENT_IP}"
action = "allow-related"
'''

    def start(self, topo, args):
        policy = os.path.join(topo.work, "policy.toml")
        with open(policy, "w") as fh:
            fh.write(self.POLICY)
        self.sock = os.path.join(topo.work, "ctrack.sock")
        topo.spawn(topo.f, "ctrack", [
            self.path, "run", "--policy", policy, "--port", f"client={topo.c1}",
            "--port", f"server={topo.s1}",
            *self.io_args(), "--workers", str(self.workers), "--max-conns", "1000000",
            "--ctl", self.sock], topo.fwd_cpus)
        if not wait_until(lambda: self.ctl(topo, "count").returncode == 0
                          or topo.procs["ctrack"].poll() is not None, 15, 0.2) \
                or topo.procs["ctrack"].poll() is not None:
            raise BenchError(f"ctrack did not come up: {topo.log('ctrack')}")

    def io_args(self):
        """`--io` (and `--rx-ring` for af-packet-v2 and af-packet-v3)."""
        if self.io.startswith("af-packet-v"):
            return ["--io", "af-packet", "--rx-ring", self.io[len("af-packet-"):]]
        return ["--io", self.io]

    def ctl(self, topo, *a):
        return topo.ex(topo.f, self.path, "ctl", "--ctl", self.sock, *a, check=False)

    def stop(self, topo):
        topo.stop("ctrack", signal.SIGTERM, wait=10)

    def counters(self, topo):
        return {"stats": self.ctl(topo, "stats").stdout.strip(),
                "count": self.ctl(topo, "count").stdout.strip()}

    def cost(self, topo):
        """The workers' time accounting now (`ctl stats --format json`,
        its `cost`), asked from the generator's CPU so as not to take the
        forwarder's; None if it cannot be read."""
        r = topo.ex(topo.f, "taskset", "-c", str(topo.gen_cpu), self.path, "ctl", "--ctl",
                    self.sock, "stats", "--format", "json", check=False)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)["cost"]
        except (ValueError, KeyError):
            return None

    def where(self, topo):
        return f"ctrack pinned to CPU {fmt_cpus(topo.fwd_cpus)}; veth receive there too (RPS)"


def fmt_cpus(cpus):
    return ",".join(map(str, cpus))


# ---------------------------------------------------------------- measurements

WMEM_SAVED = []  # the host's net.core.wmem_default while it is raised


def wmem_set(value):
    with open(WMEM_DEFAULT, "w") as f:
        f.write(f"{value}\n")


def wmem_restore():
    while WMEM_SAVED:
        wmem_set(WMEM_SAVED.pop())


def start_trafgen(topo, args, rate=None):
    """trafgen on c0, 1,000 flows, as fast as it can (TX_RING) or at
    `rate` packets per second (sendto); returns once its socket is open."""
    conf = os.path.join(topo.work, "udp.trafgen")
    with open(conf, "w") as f:
        f.write(f"""{{
  eth(da={SERVER_MAC}, sa={CLIENT_MAC}),
  ipv4(sa={CLIENT_IP}, da={SERVER_IP}, ttl=64),
  udp(sp=dinc({SPORT0}, {SPORT0 + FLOWS - 1}), dp={UDP_PORT}),
  fill(0x00, 18)
}}
""")
    cmd = ["trafgen", "-o", "c0", "-c", conf, "-P", "1", "--no-sock-mem"]
    if rate:
        cmd += ["-b", f"{rate}pps"]
    elif args.trafgen_sendto:
        cmd += ["-t", "0"]
    else:
        with open(WMEM_DEFAULT) as f:
            WMEM_SAVED.append(int(f.read()))
        wmem_set(max(WMEM_BOOST, WMEM_SAVED[-1]))
    try:
        p = topo.spawn(topo.c, "trafgen", cmd, [topo.gen_cpu])
        up = wait_until(lambda: "Running!" in topo.log("trafgen") or p.poll() is not None, 5, 0.05)
        time.sleep(0.2)  # the socket is open before "Running!" is printed
    finally:
        wmem_restore()
    if not up or p.poll() is not None:
        raise BenchError(f"trafgen did not start: {topo.log('trafgen')}")


def window(topo, seconds, sample):
    """Samples before and after `seconds`: sample(), the cores' jiffies,
    the forwarder cores' split (user, system, softirq...) and, for ctrack,
    its cost figures (read just outside the window)."""
    fwd, gen, sink = topo.fwd_cpus, [topo.gen_cpu], [topo.sink_cpu]
    cost = getattr(topo.forwarder, "cost", None)
    k0 = cost(topo) if cost else None
    b0, g0, r0, f0 = cpu_busy(fwd), cpu_busy(gen), cpu_busy(sink), cpu_fields(fwd)
    s0, t0 = sample(), time.monotonic()
    time.sleep(seconds)
    b1, g1, r1, f1 = cpu_busy(fwd), cpu_busy(gen), cpu_busy(sink), cpu_fields(fwd)
    s1, t1 = sample(), time.monotonic()
    k1 = cost(topo) if cost else None
    cpu = {"fwd_busy": busy_share(b0, b1), "gen_busy": busy_share(g0, g1),
           "sink_busy": busy_share(r0, r1), "fwd_split": cpu_split(f0, f1)}
    if cost:
        cpu["cost"] = cost_delta(k0, k1)
    return s0, s1, t1 - t0, cpu


def udp_level(topo, args, rate, warmup, seconds):
    """One offered load: trafgen at `rate` (None: flat out)."""
    start_trafgen(topo, args, rate)
    try:
        time.sleep(warmup)

        def sample():
            return topo.link(topo.c, "c0")["tx"], topo.link(topo.s, "s0")["rx"]
        (c0, s0), (c1, s1), dt, cpu = window(topo, seconds, sample)
        if topo.procs["trafgen"].poll() is not None:
            raise BenchError(f"trafgen stopped: {topo.log('trafgen')}")
    finally:
        topo.stop("trafgen", signal.SIGINT)
    sent = c1["packets"] - c0["packets"]
    return {"rate_limit": rate, "pps": (s1["packets"] - s0["packets"]) / dt,
            "offered_pps": (sent + c1["dropped"] - c0["dropped"]) / dt, "seconds": dt, **cpu}


def measure_udp(topo, args):
    """Flat out, then (unless --no-sweep), while packets are lost, lower
    offered loads (each 0.7 of the last) down to the first without loss:
    the forwarding rate at the maximum offered load and the maximum
    forwarding rate (RFC 2889's terms)."""
    full = udp_level(topo, args, None, args.warmup, args.seconds)
    points, target = [full], full["offered_pps"]
    while (not args.no_sweep and points[-1]["pps"] < 0.99 * points[-1]["offered_pps"]
           and len(points) < 12 and target * 0.7 >= 5000):
        target *= 0.7
        points.append(udp_level(topo, args, int(target), 1.0, SWEEP_SECONDS))
    best = max(points, key=lambda p: p["pps"])
    return {"pps": best["pps"], "offered_pps": best["offered_pps"], "at_max_load_pps": full["pps"],
            "max_offered_pps": full["offered_pps"], "fwd_busy": best["fwd_busy"],
            "gen_busy": best["gen_busy"], "sink_busy": best["sink_busy"],
            "fwd_split": best["fwd_split"],
            "cost": best.get("cost"), "levels": points}


def client_run(topo, args, name, argv, after=0.0):
    """Runs `argv` in the client namespace on the generator's core, the
    cores sampled over --seconds from `after` seconds after its start;
    waits for it. Returns its output (a file, at its start) and the
    cores' figures."""
    out = open(os.path.join(topo.work, f"{name}.out"), "w+")
    p = topo.spawn(topo.c, name, argv, [topo.gen_cpu], stdout=out)
    time.sleep(after)
    _, _, _, cpu = window(topo, args.seconds, lambda: None)
    try:
        p.wait(timeout=args.seconds + 30)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{name} did not finish")
    finally:
        topo.procs.pop(name, None)
    out.seek(0)
    return out, cpu


def measure_tcp(topo, args):
    if "iperf3-s" not in topo.procs:
        topo.spawn(topo.s, "iperf3-s", ["iperf3", "-s", "-B", SERVER_IP], [topo.sink_cpu])
        time.sleep(0.5)
    # (After iperf3's omitted second.)
    out, cpu = client_run(topo, args, "iperf3", ["iperf3", "-c", SERVER_IP, "-t",
                                                 str(args.seconds), "-O", "1", "-J"], after=1)
    try:
        res = json.load(out)
        bps = res["end"]["sum_received"]["bits_per_second"]
        retr = res["end"]["sum_sent"].get("retransmits")
    except (ValueError, KeyError) as e:
        raise BenchError(f"iperf3: {e}: {topo.log('iperf3')[-300:]}")
    return {"bps": bps, "retransmits": retr, **cpu}


def measure_cps(topo, args):
    if "cps-server" not in topo.procs:
        p = topo.spawn(topo.s, "cps-server", ["python3", "-c", CPS_TOOL, "server", SERVER_IP,
                                              str(CPS_BASE), str(CPS_PORTS)], [topo.sink_cpu])
        if not wait_until(lambda: "ready" in topo.log("cps-server") or p.poll() is not None, 10):
            raise BenchError(f"cps server did not start: {topo.log('cps-server')}")
    out = open(os.path.join(topo.work, "cps.out"), "w+")
    warm = 1.0
    p = topo.spawn(topo.c, "cps", ["python3", "-c", CPS_TOOL, "client", SERVER_IP, str(CPS_BASE),
                                   str(CPS_PORTS), str(args.cps_concurrency), str(warm),
                                   str(args.seconds)], [topo.gen_cpu], stdout=out)
    time.sleep(warm)
    _, _, _, cpu = window(topo, args.seconds, lambda: None)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise BenchError("the cps client did not finish")
    finally:
        topo.procs.pop("cps", None)
    out.seek(0)
    try:
        res = json.loads(out.read().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise BenchError(f"cps client: {topo.log('cps')[-300:]}")
    return {"cps": res["done"] / res["seconds"], "failed": res["failed"], **cpu}


def measure_rtt(topo, args):
    """ping from the client to the server, 100 a second for --seconds:
    the round trip through the forwarder of a sparse flow (no other
    traffic), in microseconds."""
    n = max(20, 100 * args.seconds)
    out, cpu = client_run(topo, args, "ping", ["ping", "-q", "-n", "-i", "0.01", "-c", str(n),
                                               SERVER_IP])
    text = out.read()
    try:
        line = next(x for x in text.splitlines() if "min/avg/max" in x)
        mn, avg, mx, mdev = (float(v) * 1e3 for v in line.split("=")[1].split()[0].split("/"))
        sent, got = (int(x.split()[0]) for x in text.split("---")[-1].split(",")[:2])
    except (StopIteration, ValueError, IndexError) as e:
        raise BenchError(f"ping: {e}: {text[-300:]}")
    return {"rtt": avg, "rtt_min": mn, "rtt_max": mx, "rtt_mdev": mdev, "sent": sent,
            "received": got, **cpu}


MEASURE = {"udp": (measure_udp, "pps"), "tcp": (measure_tcp, "bps"), "cps": (measure_cps, "cps"),
           "rtt": (measure_rtt, "rtt")}


# ---------------------------------------------------------------- one forwarder's turn

ACTIVE = []  # (topology, forwarder) being measured: the signal path cleans them up


def bench_forwarder(fwd, args, tag, root):
    """Set up, warm up, measure --runs of each figure, tear down."""
    work = tempfile.mkdtemp(prefix=f"{fwd.name}-", dir=root)
    cpus = (args.gen_cpu, args.fwd_cpus, args.sink_cpu)
    topo = Topology(tag, fwd.direct, cpus, work, args.fwd_rx,
                    OFFLOADS_ON if args.offloads == "on" else OFFLOADS)
    topo.forwarder = fwd
    ACTIVE.append((topo, fwd))
    res = {"name": fwd.name, "label": fwd.label, "runs": {f: [] for f in args.figures}}
    print(f"== {fwd.label}", file=sys.stderr, flush=True)
    used = sorted(set(args.fwd_cpus + [args.gen_cpu, args.sink_cpu]))
    quiet = cpu_busy(used)
    time.sleep(1)
    res["busy_before"] = busy_share(quiet, cpu_busy(used))
    if res["busy_before"] > 0.05:
        print(f"   warning: the machine was {pct(res['busy_before'])} busy before this "
              "forwarder started: other work will skew its figures", file=sys.stderr)
    try:
        topo.build()
        fwd.start(topo, args)
        if not wait_until(topo.ping, 20, 0.5):
            raise BenchError(f"no ping through {fwd.label}")
        res["where"] = fwd.where(topo)
        res["napi_threads_pinned"] = topo.pin_napi()
        if res["napi_threads_pinned"]:
            res["where"] += "; threaded NAPI of its veths (XDP) pinned there too"
        print(f"   {res['where']}", file=sys.stderr, flush=True)
        for fig in args.figures:
            measure, key = MEASURE[fig]
            for i in range(args.runs):
                r = measure(topo, args)
                res["runs"][fig].append(r)
                print(f"   {fig} run {i + 1}: {fmt_value(fig, r[key])}  (forwarder cores busy "
                      f"{pct(r['fwd_busy'])}, generator core {pct(r['gen_busy'])})",
                      file=sys.stderr, flush=True)
                pps = r[key] if fig == "udp" else None
                for line in (fmt_split(r.get("fwd_split"), args.fwd_cpus, pps),
                             fmt_cost(r.get("cost"))):
                    if line:
                        print(f"      {line}", file=sys.stderr, flush=True)
                time.sleep(0.5)
        res["counters"] = fwd.counters(topo)
    except (BenchError, OSError, ValueError, KeyError) as e:
        res["error"] = f"{type(e).__name__}: {e}" if not isinstance(e, BenchError) else str(e)
        print(f"   FAILED: {res['error']}", file=sys.stderr, flush=True)
    finally:
        teardown(topo, fwd)
        ACTIVE.remove((topo, fwd))
    return res


def teardown(topo, fwd):
    try:
        fwd.stop(topo)
    except BenchError as e:
        print(f"   (stopping {fwd.label}: {e})", file=sys.stderr)
    topo.cleanup()
    shutil.rmtree(topo.work, ignore_errors=True)


# ---------------------------------------------------------------- the report


def pct(x):
    return "-" if x is None else f"{100 * x:.0f}%"


def fmt_value(fig, v):
    if v is None:
        return "-"
    if fig == "udp":
        return f"{v / 1e6:.3f} Mpps"
    if fig == "tcp":
        return f"{v / 1e9:.2f} Gbit/s"
    if fig == "rtt":
        return f"{v:,.0f} us"
    return f"{v:,.0f} conn/s"


def medians(res):
    out = {}
    for fig, runs in res["runs"].items():
        key = MEASURE[fig][1]
        if runs:
            out[fig] = statistics.median(r[key] for r in runs)
            out[f"{fig}_fwd_busy"] = statistics.median(r["fwd_busy"] or 0 for r in runs)
            if fig == "udp":
                out["udp_offered"] = statistics.median(r["offered_pps"] for r in runs)
                # The split and the cost of the median run (the lower
                # middle one of an even count).
                mid = sorted(runs, key=lambda r: r[key])[(len(runs) - 1) // 2]
                out["udp_fwd_split"] = mid.get("fwd_split")
                out["udp_cost"] = mid.get("cost")
                out["udp_median_run_pps"] = mid[key]
    return out


def ratios(results, figures):
    med = {r["name"]: medians(r) for r in results}
    out = {}
    for r in results:
        if not r["name"].startswith("ctrack") and r["name"] != "kernel":
            continue
        peers = [n for n in med if n.startswith("ovs")]
        peers += ["kernel", "redirect", "xdp-redirect"]
        if r["name"] == "kernel":
            peers = ["redirect", "xdp-redirect"]
        for peer in peers:
            if peer not in med:
                continue
            out.setdefault(r["name"], {})[peer] = {
                f: (med[r["name"]][f] / med[peer][f]
                    if med[r["name"]].get(f) and med[peer].get(f) else None)
                for f in figures}
    return med, out


def table(results, args):
    med, rat = ratios(results, args.figures)
    heads = {"udp": "UDP 64 B (offered)", "tcp": "TCP iperf3", "cps": "new TCP conns",
             "rtt": "ping RTT"}
    lines = [f"{'forwarder':<30}" + "".join(f"{heads[f]:>30}" for f in args.figures)]
    for r in results:
        m = med[r["name"]]
        cells = []
        for f in args.figures:
            if f not in m:
                cells.append("failed" if r.get("error") else "-")
                continue
            cell = fmt_value(f, m[f])
            if f == "udp":
                cell += f" ({m['udp_offered'] / 1e6:.3f})"
            cells.append(f"{cell} [{pct(m[f + '_fwd_busy'])}]")
        lines.append(f"{r['label']:<30}" + "".join(f"{c:>30}" for c in cells))
    for name, peers in rat.items():
        for peer, figs in peers.items():
            label = f"{name} / {peer}"
            lines.append(f"{label:<30}" + "".join(
                f"{(f'{figs[f]:.2f}x' if figs[f] else '-'):>30}" for f in args.figures))
    for r in results:
        m = med[r["name"]]
        for line in (fmt_split(m.get("udp_fwd_split"), args.fwd_cpus, m.get("udp_median_run_pps")),
                     fmt_cost(m.get("udp_cost"))):
            if line:
                lines.append(f"  {r['label']}, UDP: {line}")
    for r in results:
        if r.get("where"):
            lines.append(f"  {r['label']}: {r['where']}")
        if r.get("error"):
            lines.append(f"  {r['label']}: FAILED: {r['error'][:300]}")
    lines.append(f"[N%]: the forwarder's cores' busy share (CPU {fmt_cpus(args.fwd_cpus)}); "
                 f"medians of {args.runs} runs of {args.seconds} s.")
    if "rtt" in args.figures:
        lines.append("ping RTT: the mean round trip of a ping every 10 ms and nothing else; "
                     "its ratios are of times (lower is better).")
    ends = (f"generators and endpoints on CPU {args.gen_cpu}" if args.sink_cpu == args.gen_cpu
            else f"generators and client on CPU {args.gen_cpu}, receiving end on CPU "
                 f"{args.sink_cpu}")
    lines.append(f"Cores: {ends}, forwarder on CPU {fmt_cpus(args.fwd_cpus)}"
                 + (f": this machine has {os.cpu_count()} cores, the generator and the "
                    f"forwarder share them." if os.cpu_count() <= 2 else "."))
    return "\n".join(lines), med, rat


# ---------------------------------------------------------------- main


def prerequisites(args):
    """Exits with what to install if anything is missing."""
    problems, packages = [], set()
    if os.geteuid() != 0:
        problems.append("needs root (network namespaces, raw sockets)")
    needs = dict(NEEDS["all"])
    if "ovs" in args.only:
        needs.update(NEEDS["ovs"])
        if not os.path.exists(OVS_SCHEMA):
            problems.append(f"{OVS_SCHEMA} missing")
            packages.add("openvswitch-common")
    for tool, pkg in sorted(needs.items()):
        if shutil.which(tool) is None:
            problems.append(f"{tool} not found")
            packages.add(pkg)
    if "ctrack" in args.only and not os.access(args.ctrack, os.X_OK):
        problems.append(f"{args.ctrack} not found: cargo build --release -p ctrack, or --ctrack")
    if not args.fwd_cpus:
        problems.append("no CPU left for the forwarder (CPU 0 is the generator's; "
                        "name its CPUs with --fwd-cpus)")
    if problems:
        for p in problems:
            print(f"live-bench: {p}", file=sys.stderr)
        if packages:
            print(f"install with: apt-get install -y {' '.join(sorted(packages))}",
                  file=sys.stderr)
        sys.exit(2)


def first_line(cmd):
    try:
        r = run(cmd, check=False)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError):
        return None


def machine():
    model = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "ovs": first_line(["ovs-vswitchd", "--version"]),
            "trafgen": first_line(["trafgen", "-v"]), "nft": first_line(["nft", "-v"]),
            "iperf3": first_line(["iperf3", "--version"])}


def forwarders(args):
    out = [] if args.no_bare else [Bare()]
    if "kernel" in args.only:
        out.append(Kernel())
    if "redirect" in args.only:
        out.append(Redirect())
    if "xdp-redirect" in args.only:
        out.append(XdpRedirect())
    if "ovs" in args.only:
        out += [Ovs(t) for t in args.ovs_ports]
    if "ctrack" in args.only:
        out += [Ctrack(args.ctrack, io, w) for io in args.io for w in args.workers]
    return out


def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctrack", default=os.path.join(here, "..", "target", "release", "ctrack"))
    ap.add_argument("--only", default="kernel,redirect,xdp-redirect,ovs,ctrack",
                    help="forwarders: ctrack,ovs,kernel,redirect,xdp-redirect")
    ap.add_argument("--no-bare", action="store_true", help="skip the bare veth baseline")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5, help="measuring window of each run")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of UDP before counting")
    ap.add_argument("--io", default="af-packet,af-xdp",
                    help="ctrack's sockets: af-packet, af-xdp, af-packet-v2, af-packet-v3")
    ap.add_argument("--workers", default="1", help="ctrack worker counts, as 1,2")
    ap.add_argument("--ovs-ports", default="system,afxdp",
                    help="OVS port types, one row each: system (AF_PACKET, main thread), "
                         "afxdp (AF_XDP, a PMD thread on the forwarder's CPUs)")
    ap.add_argument("--figures", default="udp,tcp,cps,rtt", help="udp,tcp,cps,rtt")
    ap.add_argument("--fwd-cpus", default=None,
                    help="forwarder CPUs, comma-separated (default: all but the generator's "
                         "and the sink's)")
    ap.add_argument("--sink-cpu", type=int, default=None,
                    help="CPU of the receiving end: the server namespace's receive processing "
                         "and its servers (default: the generator's, CPU 0)")
    ap.add_argument("--cps-concurrency", type=int, default=CPS_CONCURRENCY)
    ap.add_argument("--trafgen-sendto", action="store_true",
                    help="trafgen in sendto() mode: no host setting raised, a lower rate")
    ap.add_argument("--no-sweep", action="store_true",
                    help="UDP flat out only (no lower offered loads)")
    ap.add_argument("--fwd-rx", choices=("fwd", "sender"), default="fwd",
                    help="where the receive processing of the forwarder's veths runs: the "
                         "forwarder's CPUs (RPS, and threaded NAPI pinned there when it "
                         "attaches XDP; default) or the sending CPU (veth's own way)")
    ap.add_argument("--offloads", choices=("off", "on"), default="off",
                    help="every veth's checksum and segmentation offloads: off (default), or "
                         "on as a veth has them (senders hand over frames of up to 64 KiB)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    split = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    args.only, args.io, args.figures = split(args.only), split(args.io), split(args.figures)
    args.workers = [int(w) for w in split(args.workers)]
    args.ovs_ports = split(args.ovs_ports)
    bad = [x for x in args.only if x not in ("ctrack", "ovs", "kernel", "redirect", "xdp-redirect")]
    bad += [x for x in args.ovs_ports if x not in ("system", "afxdp")]
    bad += [x for x in args.io if x not in ("af-packet", "af-xdp", "af-packet-v2", "af-packet-v3")]
    bad += [x for x in args.figures if x not in MEASURE]
    if bad or args.runs < 1 or args.seconds < 1 or not all(0 < w <= 64 for w in args.workers):
        ap.error(f"bad value: {', '.join(bad) or 'runs, seconds or workers'}")
    args.gen_cpu = 0  # trafgen -P 1 pins itself to CPU 0
    have = os.sched_getaffinity(0)
    if args.sink_cpu is None:
        args.sink_cpu = args.gen_cpu
    if args.sink_cpu not in have:
        ap.error(f"--sink-cpu {args.sink_cpu}: not one of this process's CPUs "
                 f"({fmt_cpus(sorted(have))})")
    if args.fwd_cpus is None:
        args.fwd_cpus = sorted(have - {args.gen_cpu, args.sink_cpu})
    else:
        try:
            args.fwd_cpus = [int(c) for c in split(args.fwd_cpus)]
        except ValueError:
            ap.error(f"--fwd-cpus {args.fwd_cpus}: a comma-separated list of CPU numbers")
        if not set(args.fwd_cpus) <= have:
            ap.error(f"--fwd-cpus: not all of them are this process's CPUs "
                     f"({fmt_cpus(sorted(have))})")
    args.ctrack = os.path.normpath(args.ctrack)
    return args


def on_signal(signum, frame):
    raise Interrupted(signum)


def cleanup_all():
    """Everything still standing, with the signals held off meanwhile."""
    held = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        wmem_restore()
        for topo, fwd in list(ACTIVE):
            teardown(topo, fwd)
        ACTIVE.clear()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def main():
    args = parse_args()
    prerequisites(args)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    tag = f"lb{os.getpid() % 10000}"
    root = tempfile.mkdtemp(prefix="live-bench-")
    meta = machine()
    meta.update(command=" ".join(sys.argv), runs=args.runs, seconds=args.seconds,
                warmup=args.warmup, generator_cpu=args.gen_cpu, forwarder_cpus=args.fwd_cpus,
                sink_cpu=args.sink_cpu,
                trafgen_mode="sendto" if args.trafgen_sendto else "TX_RING",
                offloads=args.offloads)
    results = []
    try:
        for fwd in forwarders(args):
            results.append(bench_forwarder(fwd, args, tag, root))
    except Interrupted as e:
        print(f"live-bench: stopped by signal {e.args[0]}; cleaning up", file=sys.stderr)
        cleanup_all()
        shutil.rmtree(root, ignore_errors=True)
        sys.exit(130)
    finally:
        cleanup_all()
        shutil.rmtree(root, ignore_errors=True)
    text, med, rat = table(results, args)
    print(f"{meta['date']}  {meta['cpu']}, {meta['cores']} cores, Linux {meta['kernel']}; "
          f"{meta['ovs']}")
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results, "medians": med, "ratios": rat}, f,
                      indent=1)
    return 1 if any(r.get("error") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
