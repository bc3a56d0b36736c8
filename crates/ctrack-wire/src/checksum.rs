//! The Internet checksum (RFC 1071) and its pseudo-headers, and the CRC32c
//! of SCTP (RFC 9260 appendix A).
//!
//! Sums are kept unfolded in a `u64` so that pieces (pseudo-header, header,
//! payload) can be added before one final fold. Written by hand: it is on the
//! per-packet path and a word-at-a-time loop is several times faster than
//! summing 16-bit words.

/// Adds `data` to a running one's-complement sum.
///
/// `data` is read as big-endian 16-bit words; an odd trailing byte is padded
/// with zero on the right, as RFC 1071 says. Only the last piece of a
/// checksummed area may have odd length.
#[inline]
pub fn sum(mut acc: u64, data: &[u8]) -> u64 {
    // Adding big-endian 32-bit words is the same, modulo 0xffff, as adding
    // the 16-bit words they hold, because 2^16 = 1 (mod 0xffff). A u64 cannot
    // overflow before 2^32 words (16 GiB), far beyond any packet.
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w >> 32) + (w & 0xffff_ffff);
    }
    let mut rest = chunks.remainder();
    if rest.len() >= 4 {
        acc += u64::from(u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]));
        rest = &rest[4..];
    }
    if rest.len() >= 2 {
        acc += u64::from(u16::from_be_bytes([rest[0], rest[1]]));
        rest = &rest[2..];
    }
    if let Some(&b) = rest.first() {
        acc += u64::from(b) << 8;
    }
    acc
}

/// Folds a running sum to 16 bits (without complementing it).
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum field value for an area whose running sum is `acc`.
#[inline]
pub fn finish(acc: u64) -> u16 {
    !fold(acc)
}

/// The Internet checksum of `data` alone (e.g. an IPv4 header, with its
/// checksum field zeroed to compute it, or as received to verify it: a
/// correct area checksums to zero).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(0, data))
}

/// The running sum of the IPv4 pseudo-header for an upper-layer area of
/// `len` bytes.
#[inline]
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u32) -> u64 {
    u64::from(u32::from_be_bytes(src))
        + u64::from(u32::from_be_bytes(dst))
        + u64::from(proto)
        + u64::from(len)
}

/// The running sum of the IPv6 pseudo-header (RFC 8200 §8.1).
#[inline]
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, len: u32) -> u64 {
    let acc = sum(0, src);
    let acc = sum(acc, dst);
    acc + u64::from(len) + u64::from(next_header)
}

/// True if an upper-layer area whose sum, pseudo-header included, is `acc`
/// carries a correct checksum.
#[inline]
pub fn is_valid(acc: u64) -> bool {
    // A correct area sums to 0xffff. A sum that folds to zero can only come
    // from all-zero words, whose correct checksum field would be 0xffff.
    fold(acc) == 0xffff
}

/// The CRC32c of an SCTP packet, computed with the checksum field taken as
/// zero. The value is returned in the byte order it is stored in the packet
/// (SCTP stores the CRC little-endian, unlike every other field).
pub fn sctp_crc32c(packet: &[u8]) -> u32 {
    const CSUM: core::ops::Range<usize> = 8..12;
    if packet.len() < CSUM.end {
        return crc32c::crc32c(packet);
    }
    let crc = crc32c::crc32c(&packet[..CSUM.start]);
    let crc = crc32c::crc32c_append(crc, &[0; 4]);
    crc32c::crc32c_append(crc, &packet[CSUM.end..])
}

/// Incremental update of a checksum field (RFC 1624 eqn. 3) when a 16-bit
/// word of the covered area changes from `old` to `new`.
#[inline]
pub fn update_u16(check: u16, old: u16, new: u16) -> u16 {
    // HC' = ~(~HC + ~m + m')
    let acc = u64::from(!check) + u64::from(!old) + u64::from(new);
    !fold(acc)
}

/// Incremental update when 32 bits of the covered area change (an IPv4
/// address, a sequence number).
#[inline]
pub fn update_u32(check: u16, old: u32, new: u32) -> u16 {
    let check = update_u16(check, (old >> 16) as u16, (new >> 16) as u16);
    update_u16(check, old as u16, new as u16)
}

/// Incremental update when a 16-byte field (an IPv6 address) changes.
pub fn update_bytes(check: u16, old: &[u8], new: &[u8]) -> u16 {
    debug_assert_eq!(old.len(), new.len());
    debug_assert!(old.len().is_multiple_of(2));
    // ~(~HC + sum(~m) + sum(m')) in one pass.
    let mut acc = u64::from(!check);
    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
        acc += u64::from(!u16::from_be_bytes([o[0], o[1]]));
        acc += u64::from(u16::from_be_bytes([n[0], n[1]]));
    }
    !fold(acc)
}

#[cfg(test)]
mod tests {
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
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
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
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
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
}
