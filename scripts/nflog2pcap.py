#!/usr/bin/env python3
"""Turns a tcpdump capture of an NFLOG group (link type 239) into an Ethernet
pcap of the logged packets and a list of the log prefixes, one per packet.
NFLOG carries the IP packet alone: each gets a synthetic Ethernet header
(02:00:00:00:00:01 -> 02:00:00:00:00:02), so that any tool reading Ethernet
captures, Open vSwitch's `ovstest test-conntrack pcap` included, reads it.

make-captures.sh logs every forwarded packet with the kernel's ct state as
the prefix ("new", "est|rpl", "inv"...). The state file is written in
`ovstest test-conntrack pcap` notation ("N: new|trk"), so that it can be
compared with `ctrack replay --format ovs` line by line.

Usage: nflog2pcap.py NFLOG.pcap OUT.pcap OUT.states
"""
import struct
import sys

NFULA_PAYLOAD = 9
NFULA_PREFIX = 10
LINKTYPE_NFLOG = 239
LINKTYPE_ETHERNET = 1
ETH_SRC = bytes.fromhex("020000000001")
ETH_DST = bytes.fromhex("020000000002")


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        e = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        e = ">"
    else:
        sys.exit(f"{path}: not a pcap file")
    linktype = struct.unpack(e + "I", data[20:24])[0]
    if linktype != LINKTYPE_NFLOG:
        sys.exit(f"{path}: link type {linktype}, expected NFLOG (239)")
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(e + "IIII", data[off:off + 16])
        yield sec, frac, data[off + 16:off + 16 + incl]
        off += 16 + incl


def tlvs(rec):
    # 4-byte NFLOG header, then TLVs in host byte order padded to 4 bytes.
    off = 4
    while off + 4 <= len(rec):
        length, ty = struct.unpack("<HH", rec[off:off + 4])
        if length < 4:
            break
        yield ty & 0x7FFF, rec[off + 4:off + length]
        off += (length + 3) & ~3


def state(prefix):
    if prefix == "untracked":
        return "0"
    return prefix + "|trk"


def main():
    src, out_pcap, out_states = sys.argv[1:4]
    pkts = []
    for sec, frac, rec in records(src):
        fields = dict(tlvs(rec))
        payload = fields.get(NFULA_PAYLOAD)
        prefix = fields.get(NFULA_PREFIX, b"").rstrip(b"\0").decode()
        if payload is None:
            continue
        pkts.append((sec, frac, payload, prefix))
    with open(out_pcap, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET))
        for sec, frac, payload, _ in pkts:
            ethertype = b"\x86\xdd" if payload[0] >> 4 == 6 else b"\x08\x00"
            frame = ETH_DST + ETH_SRC + ethertype + payload
            f.write(struct.pack("<IIII", sec, frac, len(frame), len(frame)))
            f.write(frame)
    with open(out_states, "w") as f:
        for i, (_, _, _, prefix) in enumerate(pkts, 1):
            f.write(f"{i}: {state(prefix)}\n")


if __name__ == "__main__":
    main()
