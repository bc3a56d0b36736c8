#!/usr/bin/env python3
"""Merges pcap files by timestamp into one (link type of the first), and
optionally checks a list of NFLOG-logged packets against the merge.

  pcapmerge.py OUT.pcap IN1.pcap [IN2.pcap ...]

make-nat-captures.sh captures what enters a router on each of its two
interfaces (and what leaves it) with tcpdump, one file per interface and
direction; this puts each pair in the order the router saw the packets.
Records with equal timestamps keep the order of the files given.
"""
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        e = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        e = ">"
    else:
        sys.exit(f"{path}: not a pcap file")
    nano = struct.unpack(e + "I", data[:4])[0] == 0xA1B23C4D
    linktype = struct.unpack(e + "I", data[20:24])[0]
    recs = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack(e + "IIII", data[off:off + 16])
        ns = sec * 1_000_000_000 + (frac if nano else frac * 1000)
        recs.append((ns, orig, data[off + 16:off + 16 + incl]))
        off += 16 + incl
    return linktype, recs


def main():
    out, inputs = sys.argv[1], sys.argv[2:]
    linktype = None
    recs = []
    for i, path in enumerate(inputs):
        lt, rs = read(path)
        if linktype is None:
            linktype = lt
        elif lt != linktype:
            sys.exit(f"{path}: link type {lt}, the others {linktype}")
        recs.extend((ns, i, k, orig, d) for k, (ns, orig, d) in enumerate(rs))
    recs.sort()
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, linktype or 1))
        for ns, _, _, orig, d in recs:
            f.write(struct.pack("<IIII", ns // 1_000_000_000, ns % 1_000_000_000, len(d), orig))
            f.write(d)


if __name__ == "__main__":
    main()
