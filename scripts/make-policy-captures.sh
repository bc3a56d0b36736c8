#!/usr/bin/env bash
# Remakes the captures of examples/policy/: for each policy NAME.toml there
# with a NAME.traffic beside it, real traffic between the policy's ports
# (one network namespace each, eth0 with the port's MAC and addresses),
# joined by a Linux bridge in a switch namespace that filters nothing.
# Every frame that entered the bridge, captured on the bridge side of each
# port's veth (tcpdump -Q in) and merged in time order, is NAME.pcap: each
# frame once, as the policy's switch would see it. Allowed and disallowed
# traffic alike went through; `ctrack replay --policy NAME.toml NAME.pcap`
# decides.
#
#   sudo scripts/make-policy-captures.sh [NAME...]     (default: all)
#
# The work is scripts/nft-agree.py's (--no-nft --no-ctrack; the traffic
# format is described there), which checks that the bridge forwarded every
# frame. Needs root, iproute2, ethtool, tcpdump, curl, python3 >= 3.11.
# Sends nothing outside the namespaces it creates; removes them however it
# ends.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
dir=$here/examples/policy
tag="pc$$-"
work=$(mktemp -d)

child=
cleanup() {
    local ns
    if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
    for ns in $(ip netns list 2>/dev/null | awk -v t="$tag" 'index($1, t) == 1 { print $1 }'); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$dir"/*.traffic; do names+=("$(basename "$f" .traffic)"); done
fi
for name in "${names[@]}"; do
    # In the background, so that a signal is handled at once (the trap
    # stops the script, then removes the namespaces).
    python3 "$here/scripts/nft-agree.py" --no-nft --no-ctrack --tag "$tag" \
        --out "$work" "$dir/$name.toml" &
    child=$!
    wait "$child"
    child=
    cp "$work/$name.pcap" "$dir/$name.pcap"
    size=$(stat -c %s "$dir/$name.pcap")
    echo "$dir/$name.pcap: $(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import pcapmerge; print(len(pcapmerge.read(sys.argv[2])[1]))' "$here/scripts" "$dir/$name.pcap") packets, $size bytes"
done
