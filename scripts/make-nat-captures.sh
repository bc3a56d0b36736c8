#!/usr/bin/env bash
# Remakes examples/nat/: real traffic through a Linux router that translates
# (nftables snat/dnat) and runs the kernel's FTP and TFTP helpers, captured
# where it enters the router and where it leaves.
#
#   client (ctc) --veth-- router (ctr) --veth-- server (cts)
#   10.10.1.2             10.10.1.1 | 10.10.2.1  10.10.2.2 (+ .3-.9)
#   fd00:1::2             fd00:1::1 | fd00:2::1  fd00:2::2
#
# For each scenario NAME: examples/nat/NAME.in.pcap (what entered the
# router on either side, in order) and NAME.out.pcap (what left it), and a
# line "NAME<TAB>ACTION" in examples/nat/scenarios.tsv: replayed with
# `ctrack replay --ct ACTION --write X.pcap NAME.in.pcap`, X.pcap must hold
# the packets of NAME.out.pcap (the router's TTL decrement and its own
# link-layer header aside). crates/ctrack/tests/nat_captures.rs checks it.
#
# Needs root, iproute2, ethtool, tcpdump, nftables, curl, python3 with
# pyftpdlib. Sends nothing outside the namespaces it creates (built by
# scripts/lib/netns.sh). With --setup-only as first argument it builds the
# namespaces as the scenarios have them, prints their state and removes
# them. ONLY=NAME remakes that scenario alone (its line in scenarios.tsv
# replaced or added). Run it with the system's python3 first in PATH (the
# one pyftpdlib's Debian package is for).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/netns.sh
. "$here/scripts/lib/netns.sh"
setup_only=
if [ "${1:-}" = --setup-only ]; then setup_only=1; shift; fi
out=${1:-$here/examples/nat}
[ -n "$setup_only" ] || mkdir -p "$out"
work=$(mktemp -d)
netns_trap 'rm -rf "$work"'
netns_cleanup 2>/dev/null || true

setup() {
    # Segments as sent; spare server addresses for the range4 scenario.
    local extra=() i
    for i in 3 4 5 6 7 8 9; do extra+=(--server-addr "10.10.2.$i/24"); done
    netns_setup --no-segment-offload "${extra[@]}"
    mkdir -p "$work/www" "$work/ftp"
    python3 -c "import sys; sys.stdout.write(''.join(f'line {i:03d} of the test page\n' for i in range(150)))" > "$work/www/page.txt"
    cp "$work/www/page.txt" "$work/ftp/page.txt"
    # Neighbours resolved before capturing.
    ip netns exec $C ping -q -c 1 10.10.2.2 >/dev/null
    ip netns exec $C ping -q -6 -c 1 fd00:2::2 >/dev/null || true
    ip netns exec $C ping -q -c 1 10.10.1.1 >/dev/null
}

if [ -n "$setup_only" ]; then setup; netns_show; exit 0; fi

servers() {
    ip netns exec $S python3 -m http.server 8080 --bind :: --directory "$work/www" >/dev/null 2>&1 &
    ip netns exec $S python3 - "$work/ftp" <<'EOF' >/dev/null 2>&1 &
import sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
a = DummyAuthorizer(); a.add_anonymous(sys.argv[1])
h = FTPHandler; h.authorizer = a; h.passive_ports = range(50000, 50100)
FTPServer(("::", 21), h).serve_forever()
EOF
    ip netns exec $S python3 - "$work/www/page.txt" <<'EOF' >/dev/null 2>&1 &
# A small TFTP server (RFC 1350, read requests): answers from a new port.
import socket, struct, sys, threading
data = open(sys.argv[1], "rb").read()
srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); srv.bind(("0.0.0.0", 69))
def send(peer):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    for blk in range(len(data) // 512 + 1):
        chunk = data[blk * 512:(blk + 1) * 512]
        s.sendto(struct.pack("!HH", 3, blk + 1) + chunk, peer)
        s.recvfrom(100)
while True:
    req, peer = srv.recvfrom(600)
    if struct.unpack("!H", req[:2])[0] == 1:
        threading.Thread(target=send, args=(peer,), daemon=True).start()
EOF
    ip netns exec $S python3 - <<'EOF' >/dev/null 2>&1 &
import socket, threading
def udp(fam, addr):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, 5000))
    while True:
        d, p = s.recvfrom(65535); s.sendto(b"echo: " + d[:64], p)
threading.Thread(target=udp, args=(socket.AF_INET, "0.0.0.0"), daemon=True).start()
udp(socket.AF_INET6, "::")
EOF
    for _ in $(seq 50); do
        ip netns exec $S ss -ltn | grep -q ':21 ' && ip netns exec $S ss -ltn | grep -q ':8080' && return
        sleep 0.1
    done
    echo "servers did not start" >&2; exit 1
}

udp_send() { # addr size count
    ip netns exec $C python3 - "$@" <<'EOF'
import socket, sys
a, size, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
for i in range(n):
    s.sendto(bytes((i + k) % 251 for k in range(size)), (a, 5000)); s.recvfrom(2048)
EOF
}

udp_closed() {
    ip netns exec $C python3 -c "
import socket, sys, time
a = sys.argv[1]
s = socket.socket(socket.AF_INET6 if ':' in a else socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b'anyone?', (a, 5001)); time.sleep(0.3)" "$1"
}

# Runs a scenario: NAME, FAMILY (ip|ip6), nftables rules, ACTION, commands.
scenario() {
    local name=$1 fam=$2 rules=$3 action=$4; shift 4
    if [ -n "${ONLY:-}" ] && [ "$ONLY" != "$name" ]; then return; fi
    setup
    servers
    # One statement a line, as nft wants them.
    sed -e 's/{ /{\n/g' -e 's/; }/\n}/g' -e 's/} }/}\n}/g' <<<"$rules" | ip netns exec $R nft -f -
    local filter
    if [ "$fam" = ip ]; then
        filter="ip and not host 10.10.1.1 and not host 10.10.2.1"
    else
        # (Link-local destinations too: a server address made during the
        # scenario answers the router's neighbour solicitation there.)
        filter="ip6 and not host fd00:1::1 and not host fd00:2::1 and not src net fe80::/10 and not dst net fe80::/10 and not dst net ff00::/8"
    fi
    local pids=()
    for dir in in out; do
        for ifc in r0 r1; do
            ip netns exec $R tcpdump -i $ifc -Q $dir -U --immediate-mode -s 0 --time-stamp-precision=nano \
                -w "$work/$name.$ifc.$dir.pcap" "$filter" 2>/dev/null &
            pids+=($!)
        done
    done
    sleep 1
    "$@"
    sleep 0.5
    kill -INT "${pids[@]}"; wait "${pids[@]}" || true
    python3 "$here/scripts/pcapmerge.py" "$out/$name.in.pcap" "$work/$name.r0.in.pcap" "$work/$name.r1.in.pcap"
    python3 "$here/scripts/pcapmerge.py" "$out/$name.out.pcap" "$work/$name.r0.out.pcap" "$work/$name.r1.out.pcap"
    printf '%s\t%s\n' "$name" "$action" >> "$out/scenarios.tsv.new"
    netns_cleanup
}

snat4_traffic() {
    ip netns exec $C ping -q -c 2 -i 0.2 10.10.2.2 >/dev/null
    ip netns exec $C curl -s -o /dev/null http://10.10.2.2:8080/page.txt
    udp_send 10.10.2.2 100 3
    udp_closed 10.10.2.2
    ip netns exec $C curl -s -o /dev/null --max-time 2 http://10.10.2.2:9/ || true
}
snat6_traffic() {
    ip netns exec $C ping -q -6 -c 2 -i 0.2 fd00:2::2 >/dev/null
    ip netns exec $C curl -s -g -o /dev/null "http://[fd00:2::2]:8080/page.txt"
    udp_send fd00:2::2 100 3
    udp_closed fd00:2::2
}
range4_traffic() {
    for i in 2 3 4 5 6 7 8 9; do
        ip netns exec $C ping -q -c 1 10.10.2.$i >/dev/null
        ip netns exec $C curl -s -o /dev/null http://10.10.2.$i:8080/page.txt
    done
}
range6_traffic() {
    # More server addresses, so that the flows' destinations, which seed
    # the address's hash, differ (no DAD: nothing to wait for).
    local i
    for i in 3 4 5 6 7 8 9; do ip -n $S addr add "fd00:2::$i/64" dev s0 nodad; done
    for i in 2 3 4 5 6 7 8 9; do
        ip netns exec $C ping -q -6 -c 1 "fd00:2::$i" >/dev/null
        ip netns exec $C curl -s -g -o /dev/null "http://[fd00:2::$i]:8080/page.txt"
    done
}
dnat4_traffic() {
    ip netns exec $C curl -s -o /dev/null http://198.51.100.80/page.txt
    ip netns exec $C curl -s -o /dev/null http://198.51.100.80/page.txt
}
ftp4_traffic() {
    ip netns exec $C curl -s -o /dev/null ftp://10.10.2.2/page.txt
    ip netns exec $C curl -s -o /dev/null --disable-epsv ftp://10.10.2.2/page.txt
    ip netns exec $C curl -s -o /dev/null -P - ftp://10.10.2.2/page.txt
    ip netns exec $C curl -s -o /dev/null -P - --disable-eprt ftp://10.10.2.2/page.txt
}
ftp6_traffic() {
    ip netns exec $C curl -s -g -o /dev/null "ftp://[fd00:2::2]/page.txt"
    # Active: Linux writes the translated address in full
    # (2001:0db8:ffff:0000:...), which pyftpdlib takes for a foreign
    # address and refuses; the exchange is still what Linux does.
    ip netns exec $C curl -s -g -o /dev/null --max-time 3 -P - "ftp://[fd00:2::2]/page.txt" || true
}
tftp4_traffic() {
    ip netns exec $C curl -s -o /dev/null tftp://10.10.2.2/page.txt
}
frag4_traffic() {
    udp_send 10.10.2.2 4000 2
    ip netns exec $C ping -q -c 2 -i 0.2 -s 3000 10.10.2.2 >/dev/null
}
frag6_traffic() {
    udp_send fd00:2::2 4000 2
    ip netns exec $C ping -q -6 -c 2 -i 0.2 -s 3000 fd00:2::2 >/dev/null
}

SNAT4='table ip nat { chain post { type nat hook postrouting priority srcnat; oifname "r1" snat to 198.51.100.1; } }'
SNAT6='table ip6 nat { chain post { type nat hook postrouting priority srcnat; oifname "r1" snat to 2001:db8:ffff::1; } }'
HELPERS='table inet helpers {
    ct helper ftp-std { type "ftp" protocol tcp; }
    ct helper tftp-std { type "tftp" protocol udp; }
    chain pre { type filter hook prerouting priority filter; tcp dport 21 ct helper set "ftp-std"; udp dport 69 ct helper set "tftp-std"; }
}'

rm -f "$out/scenarios.tsv.new"
scenario snat4 ip "$SNAT4" 'commit,nat(src=198.51.100.1)' snat4_traffic
scenario snat6 ip6 "$SNAT6" 'commit,nat(src=2001:db8:ffff::1)' snat6_traffic
scenario range4 ip 'table ip nat { chain post { type nat hook postrouting priority srcnat; oifname "r1" snat to 198.51.100.10-198.51.100.20; } }' \
    'commit,nat(src=198.51.100.10-198.51.100.20)' range4_traffic
# A range whose third word differs at its ends: where the first pick of
# that word is not its end, the last word is picked from all of its values
# (Linux's find_best_ips_proto).
scenario range6 ip6 'table ip6 nat { chain post { type nat hook postrouting priority srcnat; oifname "r1" snat to 2001:db8:ffff::1:0:0-2001:db8:ffff::2:0:0; } }' \
    'commit,nat(src=2001:db8:ffff::1:0:0-2001:db8:ffff::2:0:0)' range6_traffic
scenario dnat4 ip 'table ip nat { chain pre { type nat hook prerouting priority dstnat; iifname "r0" ip daddr 198.51.100.80 tcp dport 80 dnat to 10.10.2.2:8080; } }' \
    'commit,nat(dst=10.10.2.2:8080)' dnat4_traffic
scenario ftp4 ip "$SNAT4
$HELPERS" 'commit,nat(src=198.51.100.1),alg=ftp' ftp4_traffic
scenario ftp6 ip6 "$SNAT6
$HELPERS" 'commit,nat(src=2001:db8:ffff::1),alg=ftp' ftp6_traffic
scenario tftp4 ip "$SNAT4
$HELPERS" 'commit,nat(src=198.51.100.1),alg=tftp' tftp4_traffic
scenario frag4 ip "$SNAT4" 'commit,nat(src=198.51.100.1)' frag4_traffic
scenario frag6 ip6 "$SNAT6" 'commit,nat(src=2001:db8:ffff::1)' frag6_traffic
if [ -n "${ONLY:-}" ]; then
    # One scenario remade (ONLY=NAME): its line replaces its old one, or
    # is added.
    { grep -v "^$ONLY	" "$out/scenarios.tsv" || true; cat "$out/scenarios.tsv.new"; } > "$out/scenarios.tsv.keep"
    mv "$out/scenarios.tsv.keep" "$out/scenarios.tsv"
    rm -f "$out/scenarios.tsv.new"
else
    mv "$out/scenarios.tsv.new" "$out/scenarios.tsv"
fi
echo "wrote $out"
