#!/usr/bin/env bash
# Remakes the bundled captures from real traffic between network namespaces.
#
#   client (ctc) --veth-- router (ctr) --veth-- server (cts)
#   10.10.1.2             10.10.1.1 | 10.10.2.1  10.10.2.2
#   fd00:1::2             fd00:1::1 | fd00:2::1  fd00:2::2
#
# examples/traffic.pcap: what crosses the router's client-side interface
# while the client pings (v4, v6), fetches pages over HTTP (v4, v6), trades
# UDP datagrams, hits closed TCP and UDP ports (RST, ICMP and ICMPv6 port
# unreachable) and pings with a TTL of 1 (ICMP time exceeded from the
# router). ARP and neighbour discovery are in it too.
#
# examples/linux-midstream-loose{0,1}.pcap and tests/expected/*.linux: a TCP
# connection whose router-side conntrack entry is flushed in the middle,
# with Linux's nf_conntrack_tcp_loose set to 0 and to 1, plus a fresh
# connection and a UDP exchange. The router's nftables forward chain logs
# the kernel's ct state of every forwarded packet to NFLOG; the capture is
# built from those very NFLOG records (so the packets and their order are
# exactly what the kernel judged), and the states become the expected
# output, in `ovstest` notation, that ctrack's --format ovs must reproduce.
#
# Needs root, iproute2, ethtool, tcpdump, nftables, conntrack, curl, iputils-ping,
# python3. Sends nothing outside the namespaces it creates (built by
# scripts/lib/netns.sh). With --setup-only as first argument it builds the
# namespaces as the captures have them, prints their state and removes them.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/netns.sh
. "$here/scripts/lib/netns.sh"
setup_only=
if [ "${1:-}" = --setup-only ]; then setup_only=1; shift; fi
out=${1:-$here/examples}
expected=${2:-$here/tests/expected}
[ -n "$setup_only" ] || mkdir -p "$out" "$expected"
netns_cleanup 2>/dev/null || true
work=$(mktemp -d)
netns_trap 'rm -rf "$work"'

setup() {
    netns_setup --mld-v2
    mkdir -p "$work/www"
    python3 -c "import sys; sys.stdout.write(''.join(f'line {i:05d} of the test page\n' for i in range(800)))" > "$work/www/page.txt"
}

if [ -n "$setup_only" ]; then setup; netns_show; exit 0; fi

start_servers() {
    ip netns exec $S python3 -m http.server 8080 --bind :: --directory "$work/www" >/dev/null 2>&1 &
    ip netns exec $S python3 - <<'EOF' >/dev/null 2>&1 &
import socket, threading
def udp(fam, addr):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, 5000))
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(b"echo: " + data, peer)
def tcp_echo():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", 8081)); s.listen(8)
    while True:
        c, _ = s.accept()
        def serve(c):
            while True:
                d = c.recv(4096)
                if not d:
                    c.close(); return
                c.sendall(d)
        threading.Thread(target=serve, args=(c,), daemon=True).start()
threading.Thread(target=udp, args=(socket.AF_INET, "10.10.2.2"), daemon=True).start()
threading.Thread(target=udp, args=(socket.AF_INET6, "fd00:2::2"), daemon=True).start()
tcp_echo()
EOF
    for _ in $(seq 50); do
        ip netns exec $S ss -ltn | grep -q ':8081' && ip netns exec $S ss -ltn | grep -q ':8080' && return
        sleep 0.1
    done
    echo "servers did not start" >&2; exit 1
}

udp_client() { # addr count
    ip netns exec $C python3 - "$1" "$2" <<'EOF'
import socket, sys
addr, n = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.settimeout(2)
for i in range(n):
    s.sendto(f"datagram {i}".encode(), (addr, 5000))
    s.recvfrom(2048)
EOF
}

udp_closed() { # addr: one datagram to a closed port, to draw a port unreachable
    ip netns exec $C python3 -c "
import socket, sys, time
a = sys.argv[1]
s = socket.socket(socket.AF_INET6 if ':' in a else socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b'anyone?', (a, 5001)); time.sleep(0.3)" "$1"
}

traffic_capture() {
    setup
    start_servers
    # Warm neighbour caches so the capture holds one resolution of each.
    ip netns exec $R tcpdump -i r0 -U -s 0 -w "$work/traffic.pcap" 2>/dev/null &
    local dump=$!
    sleep 1
    ip netns exec $C ping -q -c 2 -i 0.2 10.10.2.2 >/dev/null
    ip netns exec $C ping -q -6 -c 2 -i 0.2 fd00:2::2 >/dev/null
    ip netns exec $C curl -s -o /dev/null http://10.10.2.2:8080/page.txt
    ip netns exec $C curl -s -g -o /dev/null "http://[fd00:2::2]:8080/page.txt"
    udp_client 10.10.2.2 3
    udp_client fd00:2::2 2
    udp_closed 10.10.2.2
    udp_closed fd00:2::2
    ip netns exec $C curl -s -o /dev/null --max-time 2 http://10.10.2.2:9/ || true
    ip netns exec $C ping -q -c 1 -t 1 -W 1 10.10.2.2 >/dev/null || true
    ip netns exec $C ping -q -6 -c 1 -t 1 -W 1 fd00:2::2 >/dev/null || true
    sleep 0.5
    kill -INT $dump; wait $dump || true
    cp "$work/traffic.pcap" "$out/traffic.pcap"
    netns_cleanup
}

# A client that sends a line every 200 ms on one TCP connection, pausing
# for 1.5 s after the 5th line (the router's conntrack is flushed then),
# and closes after the 10th.
slow_client='
import socket, sys, time
s = socket.create_connection((sys.argv[1], 8081))
for i in range(10):
    s.sendall(f"line {i}\n".encode()); s.recv(64)
    time.sleep(1.5 if i == 4 else 0.2)
s.close(); time.sleep(0.3)
'

linux_reference() { # loose: 0 or 1
    local loose=$1
    setup
    start_servers
    ip netns exec $R tcpdump -i nflog:1 -U -s 0 -w "$work/nflog.pcap" 2>/dev/null &
    local dump=$!
    # Neighbours first, so that the pause below is quiet.
    ip netns exec $C ping -q -c 1 10.10.2.2 >/dev/null
    ip netns exec $C ping -q -6 -c 1 fd00:2::2 >/dev/null
    ip netns exec $C python3 -c "$slow_client" 10.10.2.2 &
    local client=$!
    # In the client's pause: start tracking and logging (conntrack runs in a
    # namespace once a rule needs it, so the connection is unknown to it).
    sleep 1.3
    ip netns exec $R conntrack -F >/dev/null 2>&1 || true
    ip netns exec $R nft -f "$work/ctlog.nft"
    ip netns exec $R sysctl -qw net.netfilter.nf_conntrack_tcp_loose=$loose
    wait $client
    # A fresh connection and a UDP exchange, both from the start.
    ip netns exec $C python3 -c "$slow_client" fd00:2::2
    udp_client 10.10.2.2 2
    sleep 0.5
    kill -INT $dump; wait $dump || true
    python3 "$here/scripts/nflog2pcap.py" "$work/nflog.pcap" \
        "$out/linux-midstream-loose$loose.pcap" "$expected/linux-midstream-loose$loose.linux"
    netns_cleanup
}

# Logs every forwarded packet to NFLOG group 1 with the kernel's ct state.
cat > "$work/ctlog.nft" <<'NFT'
table inet ctlog {
    chain forward_log {
        type filter hook forward priority 0; policy accept;
        ct state invalid log group 1 prefix "inv" accept
        ct state untracked log group 1 prefix "untracked" accept
        ct state related ct direction reply log group 1 prefix "rel|rpl" accept
        ct state related log group 1 prefix "rel" accept
        ct state new log group 1 prefix "new" accept
        ct state established ct direction reply log group 1 prefix "est|rpl" accept
        ct state established log group 1 prefix "est" accept
    }
}
NFT

traffic_capture
linux_reference 0
linux_reference 1
echo "wrote $out/traffic.pcap, $out/linux-midstream-loose{0,1}.pcap, $expected/linux-midstream-loose{0,1}.linux"
