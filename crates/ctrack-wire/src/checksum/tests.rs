//! Tests of the checksum module: fixed vectors, and incremental updates
//! checked against full recomputation with proptest.

use super::*;

/// The straightforward definition, to check the fast one against.
fn reference(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        acc += u32::from(w);
    }
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

#[test]
fn rfc1071_example() {
    // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
    let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert_eq!(fold(sum(0, &data)), 0xddf2);
    assert_eq!(checksum(&data), !0xddf2);
}

#[test]
fn matches_reference_on_all_lengths() {
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 13) as u8).collect();
    for len in 0..data.len() {
        assert_eq!(checksum(&data[..len]), reference(&data[..len]), "len {len}");
    }
    let ones = vec![0xffu8; 77];
    assert_eq!(checksum(&ones), reference(&ones));
}

#[test]
fn ipv4_header_verifies() {
    // A real IPv4 header (from a ping), checksum 0xb861.
    let hdr = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];
    assert_eq!(checksum(&hdr), 0);
    let mut zeroed = hdr;
    zeroed[10] = 0;
    zeroed[11] = 0;
    assert_eq!(checksum(&zeroed), 0xb861);
}

#[test]
fn incremental_update_matches_recompute() {
    let mut hdr = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];
    let old = u32::from_be_bytes([hdr[12], hdr[13], hdr[14], hdr[15]]);
    let new = 0x0a00_0001u32;
    let check = u16::from_be_bytes([hdr[10], hdr[11]]);
    let updated = update_u32(check, old, new);
    hdr[12..16].copy_from_slice(&new.to_be_bytes());
    hdr[10] = 0;
    hdr[11] = 0;
    assert_eq!(updated, checksum(&hdr));

    let old6 = [1u8; 16];
    let new6 = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
    let mut area = [0u8; 20];
    area[..16].copy_from_slice(&old6);
    area[16] = 0x12;
    let c0 = checksum(&area);
    let c1 = update_bytes(c0, &old6, &new6);
    area[..16].copy_from_slice(&new6);
    assert_eq!(c1, checksum(&area));
}

#[test]
fn crc32c_check_value() {
    // The CRC32c check value of "123456789" is 0xe3069283.
    assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    // The checksum field does not take part.
    let mut pkt = [0u8; 16];
    pkt[..8].copy_from_slice(b"12345678");
    let a = sctp_crc32c(&pkt);
    pkt[8..12].copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(a, sctp_crc32c(&pkt));
}

#[test]
fn delta_basics() {
    let mut d = Delta::new();
    assert!(d.is_empty());
    d.word(7, 7);
    d.word32(0x1234_5678, 0x1234_5678);
    d.bytes(&[1, 2, 3], &[1, 2, 3]);
    assert!(d.is_empty(), "unchanged words record nothing");
    assert_eq!(d.apply(0xffff), 0xffff);
    assert_eq!(d.apply(0), 0);
    let mut buf = [0xff, 0xff];
    assert!(d.apply_at(&mut buf, 0).is_empty());
    assert_eq!(buf, [0xff, 0xff], "an empty delta writes nothing");
    d.word(1, 2);
    assert!(!d.is_empty());
    assert_eq!(d.apply(0x1000), 0x0fff);
    let mut e = Delta::new();
    e.word(2, 1);
    assert_eq!((d + e).apply(0x1000), 0x1000);
    d += e;
    assert_eq!(d.apply(0x1000), 0x1000);
    // Out of bounds: nothing written, nothing recorded.
    let mut buf = [1u8, 2, 3];
    let mut d = Delta::new();
    assert!(!d.set_be16(&mut buf, 2, 9));
    assert!(!d.set_be32(&mut buf, 0, 9));
    assert!(!d.set_bytes(&mut buf, 1, &[0; 3]));
    assert!(!d.set_bytes(&mut buf, usize::MAX, &[0; 3]));
    assert!(d.apply_at(&mut buf, 2).is_empty());
    assert_eq!((buf, d), ([1, 2, 3], Delta::new()));
}

/// An area of `len` bytes with a right checksum in its first two.
fn checksummed(len: usize) -> Vec<u8> {
    let mut area: Vec<u8> = (0..len).map(|i| (i * 29 + 3) as u8).collect();
    area[..2].fill(0);
    let c = checksum(&area);
    area[..2].copy_from_slice(&c.to_be_bytes());
    area
}

#[test]
fn a_wrong_sum_is_not_valid() {
    let mut area = checksummed(20);
    assert!(is_valid(sum(0, &area)));
    assert!(is_valid(sum_le(&area)));
    area[7] ^= 0x10;
    assert!(!is_valid(sum(0, &area)));
    assert!(!is_valid(sum_le(&area)));
    // All-zero words fold to zero, not to 0xffff.
    assert!(!is_valid(0));
    assert!(!is_valid(sum(0, &[0; 12])));
}

#[test]
fn deltas_add_up_to_every_change() {
    let mut area = checksummed(24);
    let mut d = Delta::new();
    assert!(d.set_be16(&mut area, 4, 0xbeef));
    let mut e = Delta::new();
    assert!(e.set_be32(&mut area, 8, 0x0a00_0001));
    assert_eq!(area[8..12], [10, 0, 0, 1], "written");
    let mut f = Delta::new();
    assert!(f.set_bytes(&mut area, 12, &[1, 2, 3, 4, 5, 6]));
    assert_eq!(area[12..18], [1, 2, 3, 4, 5, 6], "written");
    assert!(!f.is_empty());
    let mut same = Delta::new();
    let before = area.clone();
    assert!(same.set_bytes(&mut area, 12, &[1, 2, 3, 4, 5, 6]));
    assert_eq!((area.as_slice(), same), (before.as_slice(), Delta::new()));
    let all = d + e + f;
    assert!(!all.is_empty());
    let mut g = d;
    g += e;
    g += f;
    assert_eq!(g, all);
    all.apply_at(&mut area, 0);
    assert_eq!(checksum(&area), 0, "every change is in the sum");
}

#[test]
fn a_mangled_checksum_updates_zero_and_never_writes_it() {
    // UDP-Lite's: a zero field is a checksum like any other. Words
    // 0x1200 0x0000 with checksum 0xedff; the second becomes 0xedff.
    let mut area = [0xed, 0xff, 0x12, 0x00, 0x00, 0x00];
    let mut d = Delta::new();
    assert!(d.set_be16(&mut area, 4, 0xedff));
    assert_eq!(d.apply_mangled(0xedff), 0xffff, "zero is written 0xffff");
    let mut e = Delta::new();
    e.word(0x1111, 0x2222);
    assert_eq!(e.apply_mangled(0), e.apply(0));
    assert_ne!(e.apply_mangled(0), 0);
    assert_eq!(e.apply_mangled(0x5555), e.apply(0x5555));
    let own = d.apply_mangled_at(&mut area, 0);
    assert_eq!(area[..2], [0xff, 0xff]);
    assert_eq!(own, {
        let mut o = Delta::new();
        o.word(0xedff, 0xffff);
        o
    });
    assert_eq!(checksum(&area), 0);
}

#[test]
fn the_crc_of_a_bare_or_short_sctp_header() {
    // Twelve bytes, the common header alone: its field does not count.
    let mut hdr = [0x13, 0x88, 0x17, 0x70, 0, 0, 0, 9, 0, 0, 0, 0];
    let zeroed = sctp_crc32c(&hdr);
    assert_eq!(zeroed, crc32c::crc32c(&hdr));
    hdr[8..12].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(sctp_crc32c(&hdr), zeroed);
    // Shorter than the field's end: all of it, and no panic.
    for len in 0..12 {
        assert_eq!(sctp_crc32c(&hdr[..len]), crc32c::crc32c(&hdr[..len]));
    }
}

#[test]
fn udp_zero_rule() {
    let mut d = Delta::new();
    d.word(0x1111, 0x2222);
    assert_eq!(d.apply_udp(0), 0, "no checksum stays none");
    // Words 0x1200 0x0000, checksum !0x1200 = 0xedff; the second word
    // becomes 0xedff: the sum is 0xffff, the checksum 0, sent 0xffff.
    let mut area = [0x12, 0x00, 0x00, 0x00, 0xed, 0xff];
    let mut d = Delta::new();
    assert!(d.set_be16(&mut area, 2, 0xedff));
    assert_eq!(d.apply(0xedff), 0);
    assert_eq!(d.apply_udp(0xedff), 0xffff);
    let own = d.apply_udp_at(&mut area, 4);
    assert_eq!(area[4..], [0xff, 0xff]);
    assert_eq!(own, {
        let mut o = Delta::new();
        o.word(0xedff, 0xffff);
        o
    });
    let mut area = [0x12, 0x00, 0x00, 0x00, 0x00, 0x00];
    assert!(d.apply_udp_at(&mut area, 4).is_empty());
    assert_eq!(area[4..], [0, 0]);
}

#[test]
fn odd_offset_field() {
    // A SACK edge after one NOP: the 4 bytes at offset 3 of the area.
    let mut area: Vec<u8> = (0..24u8).map(|i| i.wrapping_mul(37)).collect();
    area[0] = 0x45;
    area[16..18].fill(0);
    let c = checksum(&area);
    area[16..18].copy_from_slice(&c.to_be_bytes());
    let old: [u8; 4] = area[3..7].try_into().unwrap();
    let new = [0xff, 0x00, 0x80, 0x01];
    area[3..7].copy_from_slice(&new);
    let mut d = Delta::new();
    d.bytes_at(3, &old, &new);
    d.apply_at(&mut area, 16);
    assert_eq!(checksum(&area), 0);
}

#[test]
fn nested_checksums() {
    // An ICMP error (checksum at 2) quoting an IPv4 header (checksum
    // at 8 + 10): the quoted source changes; the quoted header's
    // checksum follows, and the ICMP checksum follows both.
    let mut msg = vec![3, 3, 0, 0, 0, 0, 0, 0];
    msg.extend_from_slice(&[
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7, 0x9c, 0x40, 0x00, 0x35,
    ]);
    let c = checksum(&msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    let mut inner = Delta::new();
    assert!(inner.set_bytes(&mut msg, 8 + 12, &[10, 0, 0, 1]));
    let own = inner.apply_at(&mut msg, 8 + 10);
    assert_eq!(checksum(&msg[8..28]), 0);
    (inner + own).apply_at(&mut msg, 2);
    assert_eq!(checksum(&msg), 0);
}

#[test]
fn legacy_update_functions() {
    let mut area = [0x45u8, 0, 0x12, 0x34, 0, 0, 0xab, 0xcd, 0xef, 0x01];
    let c = checksum(&area);
    area[4..6].copy_from_slice(&c.to_be_bytes());
    let c = update_u16(c, 0x1234, 0x4321);
    area[2..4].copy_from_slice(&[0x43, 0x21]);
    let c = update_u32(c, 0xabcd_ef01, 0x0102_0304);
    area[6..10].copy_from_slice(&[1, 2, 3, 4]);
    let c = update_bytes(c, &[0x45, 0], &[0x46, 0]);
    area[0] = 0x46;
    area[4..6].copy_from_slice(&c.to_be_bytes());
    assert_eq!(checksum(&area), 0);
}

#[test]
fn sctp_update_keeps_the_error() {
    let mut pkt = vec![0x13, 0x88, 0x17, 0x70, 0, 0, 0, 0, 0, 0, 0, 0];
    pkt.extend_from_slice(&[
        1, 0, 0, 20, 0, 0, 0x12, 0x34, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 9,
    ]);
    let crc = sctp_crc32c(&pkt);
    pkt[8..12].copy_from_slice(&crc.to_le_bytes());
    let mut bad = pkt.clone();
    bad[9] ^= 0x40;
    let edit = |p: &mut [u8]| p[0..2].copy_from_slice(&5001u16.to_be_bytes());
    assert!(crate::sctp::edit_keeping_crc(&mut pkt, edit));
    assert!(crate::sctp::edit_keeping_crc(&mut bad, edit));
    let want = sctp_crc32c(&pkt);
    assert_eq!(pkt[8..12], want.to_le_bytes());
    assert_eq!(bad[9] ^ 0x40, pkt[9]);
    assert_eq!((&bad[..9], &bad[10..]), (&pkt[..9], &pkt[10..]));
    let mut short = [0u8; 11];
    assert!(!crate::sctp::edit_keeping_crc(&mut short, |_| panic!(
        "not called"
    )));
}

mod prop {
    use super::super::*;
    use crate::be16;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// Bytes heavy in 0x00 and 0xff, where one's-complement edge cases
    /// (the two zeros) live.
    fn byte() -> impl Strategy<Value = u8> {
        prop_oneof![Just(0u8), Just(0xff), any::<u8>()]
    }

    /// A change: where (relative to the area), and what kind.
    #[derive(Debug, Clone)]
    enum Edit {
        Word(usize, u16),
        Word32(usize, u32),
        Addr(usize, Vec<u8>),
        Anywhere(usize, Vec<u8>),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        let w = prop_oneof![Just(0u16), Just(0xffff), any::<u16>()];
        prop_oneof![
            (0usize..64, w).prop_map(|(at, v)| Edit::Word(at * 2, v)),
            (0usize..64, any::<u32>()).prop_map(|(at, v)| Edit::Word32(at * 2, v)),
            (0usize..64, prop_oneof![vec(byte(), 4), vec(byte(), 16)])
                .prop_map(|(at, v)| Edit::Addr(at * 2, v)),
            (0usize..128, vec(byte(), 0..9)).prop_map(|(at, v)| Edit::Anywhere(at, v)),
        ]
    }

    /// Applies `e` to `area` (whose checksum field is at `check`, which
    /// edits leave alone) the way a rewriter does, recording it in `d`.
    fn apply_edit(area: &mut [u8], check: usize, e: &Edit, d: &mut Delta) {
        let overlaps = |at: usize, len: usize| at < check + 2 && check < at + len;
        match e {
            Edit::Word(at, v) if !overlaps(*at, 2) => {
                d.set_be16(area, *at, *v);
            }
            Edit::Word32(at, v) if !overlaps(*at, 4) => {
                d.set_be32(area, *at, *v);
            }
            Edit::Addr(at, v) if !overlaps(*at, v.len()) => {
                d.set_bytes(area, *at, v);
            }
            Edit::Anywhere(at, v) if !overlaps(*at, v.len()) => {
                if let Some(field) = area.get_mut(*at..*at + v.len()) {
                    let old = field.to_vec();
                    field.copy_from_slice(v);
                    d.bytes_at(*at, &old, v);
                }
            }
            _ => {}
        }
    }

    /// A checksummed area: a non-zero first word (a version field, a
    /// pseudo-header's protocol; edits may still clear it), then
    /// anything; and an even offset for the checksum field.
    fn area() -> impl Strategy<Value = (Vec<u8>, usize)> {
        (vec(byte(), 4..130), 1usize..64).prop_map(|(mut a, at)| {
            a[0] = 0x45;
            let at = (at * 2).min((a.len() - 2) & !1);
            let at = at.max(2);
            (a, at)
        })
    }

    fn full(area: &[u8], at: usize) -> u16 {
        let mut a = area.to_vec();
        a[at..at + 2].fill(0);
        checksum(&a)
    }

    /// Equal as one's-complement numbers (0 and 0xffff are both zero).
    fn same_value(a: u16, b: u16) -> bool {
        a % 0xffff == b % 0xffff
    }

    /// Folding 16 bits at a time until nothing is left above them (what
    /// `fold` did before it was written without a loop).
    fn fold_by_loop(mut acc: u64) -> u16 {
        while acc >> 16 != 0 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn fold_at_the_edges_is_the_loop() {
        for acc in [
            0,
            1,
            0xffff,
            0x1_0000,
            0xffff_ffff,
            0x1_0000_0000,
            0xffff_fffe_0001,
            u64::MAX - 1,
            u64::MAX,
        ] {
            assert_eq!(fold(acc), fold_by_loop(acc), "{acc:#x}");
        }
    }

    proptest! {
        /// Any running sum folds as the loop folds it, including sums with
        /// every bit set in one of their halves.
        #[test]
        fn fold_is_the_loop(acc in any::<u64>(), hi in any::<bool>(), lo in any::<bool>()) {
            let acc = acc | if hi { 0xffff_ffff << 32 } else { 0 } | if lo { 0xffff_ffff } else { 0 };
            prop_assert_eq!(fold(acc), fold_by_loop(acc));
        }

        /// Any data, summed whole or in pieces of even length (and with a
        /// pseudo-header's sum in front), folds to the straightforward
        /// 16-bit sum bit for bit (0 only for all zeros).
        #[test]
        fn sum_in_pieces_is_the_reference(
            data in vec(any::<u8>(), 0..2000),
            cut in any::<usize>(),
            zeros in any::<bool>(),
        ) {
            let data = if zeros { vec![0; data.len()] } else { data };
            prop_assert_eq!(checksum(&data), super::reference(&data));
            let cut = if data.is_empty() { 0 } else { (cut % data.len()) & !1 };
            let (a, b) = data.split_at(cut);
            prop_assert_eq!(finish(sum(sum(0, a), b)), super::reference(&data));
            let pseudo = pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, data.len() as u32);
            let mut whole = vec![10, 0, 0, 1, 10, 0, 0, 2, 0, 17];
            whole.extend_from_slice(&(data.len() as u16).to_be_bytes());
            whole.extend_from_slice(&data);
            if data.len() < 0x1_0000 {
                prop_assert_eq!(finish(sum(pseudo, &data)), super::reference(&whole));
            }
        }

        /// The little-endian sum folds to the big-endian one's bytes
        /// swapped, on every length (the tail's shifted load included), and
        /// verifies an area with its pseudo-header exactly when the
        /// big-endian sum does: with its checksum right, and with any one
        /// word of it changed.
        #[test]
        fn the_little_endian_sum_verifies_as_the_big_endian_one(
            data in vec(any::<u8>(), 0..300),
            src in any::<[u8; 4]>(),
            dst in any::<[u8; 4]>(),
            src6 in any::<[u8; 16]>(),
            dst6 in any::<[u8; 16]>(),
            proto in any::<u8>(),
            zeros in any::<bool>(),
            flip in any::<(usize, u16)>(),
        ) {
            let data = if zeros { vec![0; data.len()] } else { data };
            prop_assert_eq!(fold(sum_le(&data)), fold(sum(0, &data)).swap_bytes());
            for start in 0..data.len().min(9) {
                let d = &data[start..];
                prop_assert_eq!(fold(sum_le(d)), fold(sum(0, d)).swap_bytes());
            }
            // The area with a right checksum in its first two bytes.
            let mut area = data.clone();
            area.resize(area.len().max(2), 0);
            area[0] = 0;
            area[1] = 0;
            let len = area.len() as u16;
            let be4 = pseudo_header_v4(src, dst, proto, u32::from(len));
            let be6 = pseudo_header_v6(&src6, &dst6, proto, u32::from(len));
            let le4 = pseudo_header_v4_le(src, dst, proto, len);
            let le6 = pseudo_header_v6_le(&src6, &dst6, proto, u32::from(len));
            for (be, le) in [(be4, le4), (be6, le6)] {
                let mut a = area.clone();
                let c = finish(sum(be, &a));
                a[..2].copy_from_slice(&c.to_be_bytes());
                prop_assert!(is_valid(sum(be, &a)));
                prop_assert!(is_valid(le + sum_le(&a)));
                let at = (flip.0 % a.len()) & !1;
                let w = u16::from_be_bytes([a[at], a.get(at + 1).copied().unwrap_or(0)]);
                let nw = w ^ flip.1;
                a[at] = (nw >> 8) as u8;
                if let Some(b) = a.get_mut(at + 1) {
                    *b = nw as u8;
                }
                prop_assert_eq!(is_valid(sum(be, &a)), is_valid(le + sum_le(&a)));
            }
        }

        #[test]
        fn update_equals_recomputation(
            (mut a, at) in area(),
            edits in vec(edit(), 1..8),
        ) {
            let c = full(&a, at);
            a[at..at + 2].copy_from_slice(&c.to_be_bytes());
            let mut d = Delta::new();
            for e in &edits {
                apply_edit(&mut a, at, e, &mut d);
            }
            let own = d.apply_at(&mut a, at);
            let want = full(&a, at);
            let mut o = Delta::new();
            o.word(c, be16(&a, at));
            prop_assert_eq!(own, o);
            if a.iter().enumerate().all(|(i, &b)| b == 0 || i == at || i == at + 1) {
                // The one case left out: an all-zero area, where the
                // update may give the other zero.
                prop_assert!(same_value(be16(&a, at), want));
            } else {
                prop_assert_eq!(be16(&a, at), want);
                prop_assert_eq!(checksum(&a), 0);
            }
        }

        #[test]
        fn a_wrong_checksum_stays_as_wrong(
            (mut a, at) in area(),
            edits in vec(edit(), 1..8),
            err in 1u16..0xffff,
        ) {
            let c = full(&a, at);
            let bad = !fold(u64::from(!c) + u64::from(err));
            a[at..at + 2].copy_from_slice(&bad.to_be_bytes());
            let mut d = Delta::new();
            for e in &edits {
                apply_edit(&mut a, at, e, &mut d);
            }
            d.apply_at(&mut a, at);
            let want = !fold(u64::from(!full(&a, at)) + u64::from(err));
            prop_assert!(same_value(be16(&a, at), want));
        }

        #[test]
        fn udp_update_equals_recomputation(
            (mut a, at) in area(),
            edits in vec(edit(), 1..8),
        ) {
            let udp = |area: &[u8]| match full(area, at) {
                0 => 0xffff,
                c => c,
            };
            let c = udp(&a);
            a[at..at + 2].copy_from_slice(&c.to_be_bytes());
            let mut d = Delta::new();
            for e in &edits {
                apply_edit(&mut a, at, e, &mut d);
            }
            d.apply_udp_at(&mut a, at);
            prop_assert_eq!(be16(&a, at), udp(&a));
            prop_assert!(is_valid(sum(0, &a)));
        }

        #[test]
        fn udp_none_stays_none(
            (mut a, at) in area(),
            edits in vec(edit(), 1..8),
        ) {
            a[at..at + 2].fill(0);
            let mut d = Delta::new();
            for e in &edits {
                apply_edit(&mut a, at, e, &mut d);
            }
            prop_assert!(d.apply_udp_at(&mut a, at).is_empty());
            prop_assert_eq!(be16(&a, at), 0);
        }

        #[test]
        fn sctp_update_equals_recomputation(
            mut pkt in vec(any::<u8>(), 12..200),
            sport in any::<u16>(),
            vtag in any::<u32>(),
            err in any::<u32>(),
        ) {
            let crc = sctp_crc32c(&pkt);
            pkt[8..12].copy_from_slice(&(crc ^ err).to_le_bytes());
            let done = crate::sctp::edit_keeping_crc(&mut pkt, |p| {
                p[0..2].copy_from_slice(&sport.to_be_bytes());
                p[4..8].copy_from_slice(&vtag.to_be_bytes());
                p[9] = !p[9];
            });
            prop_assert!(done);
            let stored = u32::from_le_bytes(pkt[8..12].try_into().unwrap());
            prop_assert_eq!(stored, sctp_crc32c(&pkt) ^ err);
        }
    }
}
