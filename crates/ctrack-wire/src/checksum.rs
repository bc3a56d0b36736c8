//! The Internet checksum (RFC 1071) and its pseudo-headers, and the CRC32c
//! of SCTP (RFC 9260 appendix A).
//!
//! Sums are kept unfolded in a `u64` so that pieces (pseudo-header, header,
//! payload) can be added before one final fold. Written by hand: it is on the
//! per-packet path and a word-at-a-time loop is several times faster than
//! summing 16-bit words.
//!
//! [`Delta`] updates a checksum after some fields changed (RFC 1624), for
//! address and port translation; [`crate::sctp::edit_keeping_crc`] does the same for SCTP's
//! CRC32c.

use crate::{read_be16, read_be32, write_be16, write_be32};

/// Adds `data` to a running one's-complement sum.
///
/// `data` is read as big-endian 16-bit words; an odd trailing byte is padded
/// with zero on the right, as RFC 1071 says. Only the last piece of a
/// checksummed area may have odd length.
#[inline]
pub fn sum(acc: u64, data: &[u8]) -> u64 {
    if data.len() < LE_FROM {
        return sum_words(acc, data, u64::from_be_bytes, u32::from_be_bytes, |b| {
            u64::from(b) << 8
        });
    }
    // The one's-complement sum does not depend on byte order (RFC 1071
    // §2(B)): summed as little-endian words, the folded sum is the
    // big-endian one with its two bytes swapped. Reading the words as they
    // lie saves a byte swap per word, and lets the compiler add 16 bytes
    // at a time without the shuffles a byte swap takes in SSE2: about three
    // times faster on a full-sized segment (`cargo bench -p ctrack-wire
    // --bench checksum`). The fold and swap at the end cost more than they
    // save on a few words, hence the big-endian loop below `LE_FROM` bytes.
    let le = sum_words(0, data, u64::from_le_bytes, u32::from_le_bytes, u64::from);
    acc + u64::from(fold(le).swap_bytes())
}

/// From this many bytes on, [`sum`] adds little-endian words.
const LE_FROM: usize = 32;

/// Adds `data` to `acc` as 16-bit words of one byte order: `word64` and
/// `word32` read 8 and 4 bytes in that order, `odd` places a trailing byte
/// where a zero pad on its right puts it.
#[inline(always)]
fn sum_words(
    mut acc: u64,
    data: &[u8],
    word64: fn([u8; 8]) -> u64,
    word32: fn([u8; 4]) -> u32,
    odd: fn(u8) -> u64,
) -> u64 {
    // Adding 32-bit words is the same, modulo 0xffff, as adding the 16-bit
    // words they hold, because 2^16 = 1 (mod 0xffff). A u64 cannot overflow
    // before 2^32 words (16 GiB), far beyond any packet.
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = word64([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w >> 32) + (w & 0xffff_ffff);
    }
    let mut rest = chunks.remainder();
    if rest.len() >= 4 {
        acc += u64::from(word32([rest[0], rest[1], rest[2], rest[3]]));
        rest = &rest[4..];
    }
    if rest.len() >= 2 {
        // Two bytes are a 32-bit word with two zero bytes: where those go
        // depends on the order.
        let w = u64::from(word32([rest[0], rest[1], 0, 0]));
        acc += (w >> 16) | (w & 0xffff);
        rest = &rest[2..];
    }
    if let Some(&b) = rest.first() {
        acc += odd(b);
    }
    acc
}

/// Folds a running sum to 16 bits (without complementing it).
///
/// Two additions with end-around carry, 64 to 32 bits then 32 to 16: the
/// same result as folding 16 bits at a time until nothing is left above
/// them (0 only for a zero sum, else the sum's residue modulo 0xffff in
/// 1..=0xffff, since 2^32 - 1 is a multiple of 0xffff), without the loop,
/// whose trip count depends on the data and which the processor
/// mispredicted on the packet path.
#[inline]
pub fn fold(acc: u64) -> u16 {
    let (s, c) = (acc as u32).overflowing_add((acc >> 32) as u32);
    // No overflow: with a carry, `s` is at most 2^32 - 2.
    let s = s + u32::from(c);
    let (t, c) = (s as u16).overflowing_add((s >> 16) as u16);
    t + u16::from(c)
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

/// The one's-complement sum of `data` read as little-endian 16-bit words,
/// unfolded, for verifying a checksum ([`is_valid`] of it plus
/// [`pseudo_header_v4_le`] or [`pseudo_header_v6_le`]): not to be mixed
/// with the big-endian sums of [`sum`].
///
/// Verifying needs no byte order: read little-endian, every 16-bit word is
/// its big-endian value times 256 modulo 0xffff (a byte swap), so the area
/// sums to 0 modulo 0xffff in one order exactly when it does in the other,
/// and to zero only when every word is zero. Read as they lie, the words
/// take no byte swap, and a tail of 1 to 7 bytes is one load of the last
/// 8 bytes shifted (the tail starts 8-aligned from `data`'s start, so its
/// words pair as the rest's): written by hand for the packet path, where
/// the big-endian [`sum`] of a 64-byte frame's UDP datagram took about 60
/// instructions (callgrind, `bench policy stage`).
#[inline(always)]
pub fn sum_le(data: &[u8]) -> u64 {
    let halves = |w: u64| (w >> 32) + (w & 0xffff_ffff);
    let mut acc = 0u64;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        acc += halves(u64::from_le_bytes([
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
        ]));
    }
    let r = chunks.remainder().len();
    if r != 0 {
        let w = match data.last_chunk::<8>() {
            // The last 8 bytes, of which the tail is the high `r`: shifted
            // down, the bytes before it fall off (r is 1 to 7, so the
            // shift is 8 to 56 bits).
            Some(last) => u64::from_le_bytes(*last) >> (8 * (8 - r)),
            None => {
                let mut b = [0u8; 8];
                b[..r].copy_from_slice(chunks.remainder());
                u64::from_le_bytes(b)
            }
        };
        acc += halves(w);
    }
    acc
}

/// The IPv4 pseudo-header's sum for [`sum_le`]: the same 12 bytes read as
/// little-endian words (the zero byte and the protocol make `proto << 8`,
/// the length its bytes swapped).
#[inline(always)]
pub fn pseudo_header_v4_le(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> u64 {
    u64::from(u32::from_le_bytes(src))
        + u64::from(u32::from_le_bytes(dst))
        + (u64::from(proto) << 8)
        + u64::from(len.swap_bytes())
}

/// The IPv6 pseudo-header's sum for [`sum_le`] (RFC 8200 §8.1, 40 bytes
/// read as little-endian words).
#[inline(always)]
pub fn pseudo_header_v6_le(src: &[u8; 16], dst: &[u8; 16], next_header: u8, len: u32) -> u64 {
    sum_le(src) + sum_le(dst) + u64::from(len.swap_bytes()) + (u64::from(next_header) << 8)
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

/// The changes made to a checksummed area, summed so that a checksum over
/// the area can be updated without reading the rest of it (RFC 1624 eqn. 3:
/// `HC' = ~(~HC + Σ~m + Σm')`).
///
/// Record each changed field (the `set_*` methods write a field and record
/// its change in one go), then apply the delta to every checksum that covers
/// those fields: one delta serves the IPv4 header checksum and the
/// transport checksum whose pseudo-header holds the same address, and
/// deltas add up ([`Delta::add`], `+`, `+=`).
///
/// Offsets: the sum is over 16-bit words counted from the start of the
/// checksummed area. [`word`](Delta::word), [`word32`](Delta::word32),
/// [`bytes`](Delta::bytes) and the `set_*` methods take fields that start
/// at an even offset from there (every address, port, sequence number and
/// length field does); [`bytes_at`](Delta::bytes_at) takes any field at any
/// offset (a TCP option's value).
///
/// Exactness: if the checksum was right before, the updated checksum is the
/// one a full recomputation gives, bit for bit, provided the area (with its
/// pseudo-header) is not all zeros afterwards, which a protocol number or an
/// IPv4 version field always prevents. If it was wrong, it stays wrong by
/// the same amount, so a corrupt packet is not repaired in passing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delta(u64);

impl Delta {
    /// No change.
    pub const fn new() -> Delta {
        Delta(0)
    }

    /// Records that the 16-bit word `old` became `new`.
    #[inline]
    pub fn word(&mut self, old: u16, new: u16) {
        if old != new {
            // A u64 takes 2^47 of these before it could overflow.
            self.0 += u64::from(!old) + u64::from(new);
        }
    }

    /// Records that the 32 bits `old` (two words: an IPv4 address, a
    /// sequence number) became `new`.
    #[inline]
    pub fn word32(&mut self, old: u32, new: u32) {
        self.word((old >> 16) as u16, (new >> 16) as u16);
        self.word(old as u16, new as u16);
    }

    /// Records that the bytes `old` became `new` (an IPv4 address, 4 bytes,
    /// or an IPv6 one, 16), the field starting at an even offset of the
    /// area. An odd last byte counts as the high half of a word.
    ///
    /// # Panics
    ///
    /// If `old` and `new` differ in length.
    #[inline]
    pub fn bytes(&mut self, old: &[u8], new: &[u8]) {
        assert_eq!(
            old.len(),
            new.len(),
            "checksum::Delta::bytes: lengths differ"
        );
        let (mut o, mut n) = (old.chunks_exact(2), new.chunks_exact(2));
        for (o, n) in (&mut o).zip(&mut n) {
            self.word(
                u16::from_be_bytes([o[0], o[1]]),
                u16::from_be_bytes([n[0], n[1]]),
            );
        }
        if let (Some(&o), Some(&n)) = (o.remainder().first(), n.remainder().first()) {
            self.word(u16::from(o) << 8, u16::from(n) << 8);
        }
    }

    /// Records that the bytes `old`, at `offset` from the start of the
    /// checksummed area, became `new`: any length, any offset. A field at
    /// an odd offset (a TCP SACK edge after a 1-byte NOP) straddles words;
    /// its first byte is the low half of one.
    ///
    /// # Panics
    ///
    /// If `old` and `new` differ in length.
    #[inline]
    pub fn bytes_at(&mut self, offset: usize, old: &[u8], new: &[u8]) {
        assert_eq!(
            old.len(),
            new.len(),
            "checksum::Delta::bytes_at: lengths differ"
        );
        match (old.split_first(), new.split_first()) {
            (Some((&o, old_rest)), Some((&n, new_rest))) if offset % 2 == 1 => {
                // ~(0x00oo) + 0x00nn: the unchanged high half cancels out.
                self.word(u16::from(o), u16::from(n));
                self.bytes(old_rest, new_rest);
            }
            _ => self.bytes(old, new),
        }
    }

    /// Adds the changes recorded in `other`.
    #[inline]
    pub fn add(&mut self, other: Delta) {
        self.0 += other.0;
    }

    /// True if nothing that changes a sum was recorded: applying the delta
    /// leaves every checksum as it is.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The checksum field value `check` updated for the recorded changes.
    #[inline]
    #[must_use]
    pub fn apply(self, check: u16) -> u16 {
        !fold(u64::from(!check) + self.0)
    }

    /// [`apply`](Delta::apply) for a UDP checksum over IPv4 (RFC 768): a
    /// field of zero means "no checksum" and stays zero, and a result of
    /// zero is written 0xffff, its other form in one's complement. (Also
    /// used for UDP over IPv6, where a zero field is invalid and is left as
    /// received.)
    #[inline]
    #[must_use]
    pub fn apply_udp(self, check: u16) -> u16 {
        if check == 0 {
            return 0;
        }
        match self.apply(check) {
            0 => 0xffff,
            c => c,
        }
    }

    /// [`apply`](Delta::apply) for a checksum that is mandatory and where
    /// zero would read as "none": UDP-Lite's (RFC 3828 3.1). A result of
    /// zero is written 0xffff, its other form in one's complement, as
    /// Linux's NAT writes it (`CSUM_MANGLED_0`); a zero field is updated
    /// like any other.
    #[inline]
    #[must_use]
    pub fn apply_mangled(self, check: u16) -> u16 {
        match self.apply(check) {
            0 => 0xffff,
            c => c,
        }
    }

    /// Updates the checksum field at byte `at` of `data` for the recorded
    /// changes. Returns the change to the field itself, for a checksum that
    /// covers this one (an ICMP error's checksum over the quoted IPv4 header
    /// and transport checksum). Does nothing if the delta is empty or the
    /// field is not inside `data`.
    #[inline]
    pub fn apply_at(self, data: &mut [u8], at: usize) -> Delta {
        self.apply_field(data, at, Delta::apply)
    }

    /// [`apply_at`](Delta::apply_at) with the UDP rule of
    /// [`apply_udp`](Delta::apply_udp).
    #[inline]
    pub fn apply_udp_at(self, data: &mut [u8], at: usize) -> Delta {
        self.apply_field(data, at, Delta::apply_udp)
    }

    /// [`apply_at`](Delta::apply_at) with the rule of
    /// [`apply_mangled`](Delta::apply_mangled).
    #[inline]
    pub fn apply_mangled_at(self, data: &mut [u8], at: usize) -> Delta {
        self.apply_field(data, at, Delta::apply_mangled)
    }

    #[inline]
    fn apply_field(self, data: &mut [u8], at: usize, apply: fn(Delta, u16) -> u16) -> Delta {
        let mut own = Delta::new();
        if self.is_empty() {
            return own;
        }
        if let Some(old) = read_be16(data, at) {
            let new = apply(self, old);
            write_be16(data, at, new);
            own.word(old, new);
        }
        own
    }

    /// Writes `value` big-endian at byte `at` of `data` and records the
    /// change (at an even offset of the area). Returns `false`, and changes
    /// nothing, if the field is not inside `data`.
    #[inline]
    pub fn set_be16(&mut self, data: &mut [u8], at: usize, value: u16) -> bool {
        let Some(old) = read_be16(data, at) else {
            return false;
        };
        write_be16(data, at, value);
        self.word(old, value);
        true
    }

    /// Writes `value` big-endian at byte `at` of `data` and records the
    /// change (at an even offset of the area; [`bytes_at`](Delta::bytes_at)
    /// for an odd one). Returns `false`, and changes nothing, if the field
    /// is not inside `data`.
    #[inline]
    pub fn set_be32(&mut self, data: &mut [u8], at: usize, value: u32) -> bool {
        let Some(old) = read_be32(data, at) else {
            return false;
        };
        write_be32(data, at, value);
        self.word32(old, value);
        true
    }

    /// Writes `value` at byte `at` of `data` (an address) and records the
    /// change (at an even offset of the area). Returns `false`, and changes
    /// nothing, if the field is not inside `data`.
    #[inline]
    pub fn set_bytes(&mut self, data: &mut [u8], at: usize, value: &[u8]) -> bool {
        let Some(field) = at
            .checked_add(value.len())
            .and_then(|end| data.get_mut(at..end))
        else {
            return false;
        };
        if field != value {
            self.bytes(field, value);
            field.copy_from_slice(value);
        }
        true
    }
}

impl core::ops::Add for Delta {
    type Output = Delta;
    #[inline]
    fn add(mut self, other: Delta) -> Delta {
        Delta::add(&mut self, other);
        self
    }
}

impl core::ops::AddAssign for Delta {
    #[inline]
    fn add_assign(&mut self, other: Delta) {
        Delta::add(self, other);
    }
}

/// Incremental update of a checksum field (RFC 1624 eqn. 3) when a 16-bit
/// word of the covered area changes from `old` to `new`.
#[inline]
pub fn update_u16(check: u16, old: u16, new: u16) -> u16 {
    let mut d = Delta::new();
    d.word(old, new);
    d.apply(check)
}

/// Incremental update when 32 bits of the covered area change (an IPv4
/// address, a sequence number).
#[inline]
pub fn update_u32(check: u16, old: u32, new: u32) -> u16 {
    let mut d = Delta::new();
    d.word32(old, new);
    d.apply(check)
}

/// Incremental update when a field at an even offset of the covered area
/// changes (an IPv6 address).
///
/// # Panics
///
/// If `old` and `new` differ in length.
pub fn update_bytes(check: u16, old: &[u8], new: &[u8]) -> u16 {
    let mut d = Delta::new();
    d.bytes(old, new);
    d.apply(check)
}

#[cfg(test)]
mod tests;
