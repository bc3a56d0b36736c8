# shellcheck shell=bash
# The network namespaces that make-captures.sh and make-nat-captures.sh
# send their traffic through. Sourced, not run.
#
#   client (ctc) c0 --veth-- r0 router (ctr) r1 --veth-- s0 server (cts)
#
#   namespace  link  MAC                IPv4          IPv6
#   ctc        c0    02:00:00:00:01:02  10.10.1.2/24  fd00:1::2/64
#   ctr        r0    02:00:00:00:01:01  10.10.1.1/24  fd00:1::1/64
#   ctr        r1    02:00:00:00:02:01  10.10.2.1/24  fd00:2::1/64
#   cts        s0    02:00:00:00:02:02  10.10.2.2/24  fd00:2::2/64
#
# The client and the server route everything through the router, which
# forwards IPv4 and IPv6.
#
# Sets C, R and S to the namespace names, and defines:
#
#   netns_setup [OPTION...]  builds the topology above: namespaces, veths,
#                  MACs, addresses (IPv6 without DAD), routes, forwarding on
#                  the router, checksum offloads off everywhere (checksums on
#                  the wire must be real), no router solicitations. Options:
#       --server-addr A/L    one more IPv4 address on the server's s0
#                            (repeatable; added after 10.10.2.2)
#       --no-segment-offload also GSO, GRO and TSO off (segments as sent)
#       --mld-v2             force MLDv2 on the client and the server
#   netns_cleanup  kills every process in the namespaces and deletes them;
#                  harmless if they do not exist.
#   netns_trap [COMMAND]  runs netns_cleanup, then COMMAND, when the script
#                  exits, however it exits (a failed step under `set -e`, a
#                  signal, the end).
#   netns_show     prints the namespaces' addresses, links, routes,
#                  offloads and sysctls (what --setup-only shows).
#
# Needs root, iproute2, ethtool.

C=ctc R=ctr S=cts

netns_cleanup() {
    local ns
    for ns in "$C" "$R" "$S"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true; done
    sleep 0.2
    for ns in "$C" "$R" "$S"; do ip netns del "$ns" 2>/dev/null || true; done
}

netns_trap() {
    # COMMAND is pasted into the trap now; its own variables (such as
    # "$work" in single quotes) are expanded when the trap runs.
    # shellcheck disable=SC2064
    trap "netns_cleanup; ${1:-}" EXIT
}

netns_setup() {
    local extra=() segment_offload=on mld_v2='' ns l o a
    while [ $# -gt 0 ]; do
        case "$1" in
            --server-addr) extra+=("$2"); shift 2 ;;
            --no-segment-offload) segment_offload=off; shift ;;
            --mld-v2) mld_v2=1; shift ;;
            *) echo "netns_setup: unknown option $1" >&2; return 1 ;;
        esac
    done
    for ns in "$C" "$R" "$S"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
    ip link add c0 netns "$C" type veth peer name r0 netns "$R"
    ip link add s0 netns "$S" type veth peer name r1 netns "$R"
    ip -n "$C" link set c0 address 02:00:00:00:01:02
    ip -n "$R" link set r0 address 02:00:00:00:01:01
    ip -n "$R" link set r1 address 02:00:00:00:02:01
    ip -n "$S" link set s0 address 02:00:00:00:02:02
    ip -n "$C" addr add 10.10.1.2/24 dev c0
    ip -n "$C" addr add fd00:1::2/64 dev c0 nodad
    ip -n "$R" addr add 10.10.1.1/24 dev r0
    ip -n "$R" addr add fd00:1::1/64 dev r0 nodad
    ip -n "$R" addr add 10.10.2.1/24 dev r1
    ip -n "$R" addr add fd00:2::1/64 dev r1 nodad
    ip -n "$S" addr add 10.10.2.2/24 dev s0
    for a in "${extra[@]}"; do ip -n "$S" addr add "$a" dev s0; done
    ip -n "$S" addr add fd00:2::2/64 dev s0 nodad
    for l in "$C c0" "$R r0" "$R r1" "$S s0"; do
        # shellcheck disable=SC2086
        set -- $l
        ip -n "$1" link set "$2" up
        # No offloads: checksums on the wire must be real.
        ip netns exec "$1" ethtool -K "$2" tx off rx off >/dev/null
        if [ "$segment_offload" = off ]; then
            for o in gso gro tso; do ip netns exec "$1" ethtool -K "$2" "$o" off >/dev/null 2>&1 || true; done
        fi
    done
    ip -n "$C" route add default via 10.10.1.1
    ip -n "$C" -6 route add default via fd00:1::1
    ip -n "$S" route add default via 10.10.2.1
    ip -n "$S" -6 route add default via fd00:2::1
    ip netns exec "$R" sysctl -qw net.ipv4.ip_forward=1
    ip netns exec "$R" sysctl -qw net.ipv6.conf.all.forwarding=1
    # Quiet, reproducible captures: no router solicitations (and, with
    # --mld-v2, no MLDv1 reports).
    for ns in "$C" "$S"; do
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.router_solicitations=0 || true
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.router_solicitations=0 || true
        if [ -n "$mld_v2" ]; then
            ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.force_mld_version=2 || true
        fi
    done
}

netns_show() {
    local ns dev k
    for ns in "$C" "$R" "$S"; do
        echo "== $ns"
        ip -n "$ns" addr
        ip -n "$ns" route
        ip -n "$ns" -6 route
        for dev in $(ip -n "$ns" -br link | awk '$1 != "lo" { sub(/@.*/, "", $1); print $1 }'); do
            echo "-- $dev offloads"
            ip netns exec "$ns" ethtool -k "$dev" | grep -E '^(rx|tx)-checksumming|segmentation-offload|receive-offload'
        done
        for k in net.ipv4.ip_forward net.ipv6.conf.all.forwarding \
            net.ipv6.conf.all.router_solicitations net.ipv6.conf.all.force_mld_version; do
            ip netns exec "$ns" sysctl "$k"
        done
    done
}
