//! The seeded random source and the mutations shared by the CI smoke runs
//! and the campaign driver, and the byte encoding of frame lists that the
//! frame-sequence targets read.
//!
//! Written here rather than taken from a crate: it is a few lines, and runs
//! must be reproducible from their seed on every platform and version.

/// splitmix64: a tiny, well-mixed PRNG, so that runs are reproducible from
/// their seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

/// Bytes that often sit on a boundary: lengths, flags, versions.
const INTERESTING: [u8; 8] = [0, 1, 0x7f, 0x80, 0xff, 0x40, 0x05, 0x45];

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }

    /// A copy of `input` with a few random edits: byte flips, overwrites
    /// with interesting values, truncation, insertion, removal.
    pub fn mutate(&mut self, input: &[u8]) -> Vec<u8> {
        let mut v = input.to_vec();
        for _ in 0..1 + self.below(4) {
            self.edit(&mut v, 0);
        }
        v
    }

    /// One random edit of `v` at or after `from`.
    pub fn edit(&mut self, v: &mut Vec<u8>, from: usize) {
        let from = from.min(v.len());
        let span = v.len() - from;
        match self.below(7) {
            0 if span > 0 => {
                let i = from + self.below(span);
                v[i] ^= 1 << self.below(8);
            }
            1 if span > 0 => {
                let i = from + self.below(span);
                v[i] = INTERESTING[self.below(INTERESTING.len())];
            }
            2 => v.truncate(from + self.below(span + 1)),
            3 => {
                let i = from + self.below(span + 1);
                let n = 1 + self.below(8);
                let b = self.bytes(n);
                v.splice(i..i, b);
            }
            4 if span > 0 => {
                let i = from + self.below(span);
                let n = 1 + self.below(8).min(v.len() - i - 1);
                v.drain(i..i + n);
            }
            5 if span >= 2 => {
                // A 16-bit field: add or subtract a little.
                let i = from + self.below(span - 1);
                let x = u16::from_be_bytes([v[i], v[i + 1]]);
                let d = self.below(33) as u16;
                let y = if self.below(2) == 0 {
                    x.wrapping_add(d)
                } else {
                    x.wrapping_sub(d)
                };
                v[i..i + 2].copy_from_slice(&y.to_be_bytes());
            }
            _ if span >= 2 => {
                let i = from + self.below(span - 1);
                v[i..i + 2].copy_from_slice(&[0xff, 0xff]);
            }
            _ => {}
        }
    }

    /// `a`'s head and `b`'s tail, cut at random points.
    pub fn splice(&mut self, a: &[u8], b: &[u8]) -> Vec<u8> {
        let mut v = a[..self.below(a.len() + 1)].to_vec();
        v.extend_from_slice(&b[self.below(b.len() + 1)..]);
        v
    }

    /// `input` with words of `dict` inserted, some mutated, and a few
    /// byte edits.
    pub fn mutate_text(&mut self, input: &[u8], dict: &[&[u8]]) -> Vec<u8> {
        let mut v = input.to_vec();
        for _ in 0..1 + self.below(3) {
            if dict.is_empty() || self.below(4) == 0 {
                self.edit(&mut v, 0);
                continue;
            }
            let w = dict[self.below(dict.len())];
            let w = if self.below(8) == 0 {
                self.mutate(w)
            } else {
                w.to_vec()
            };
            let i = self.below(v.len() + 1);
            v.splice(i..i, w);
        }
        v
    }

    /// A list of frames with one of: some frames mutated, a frame repeated,
    /// dropped, moved, or taken from `other`.
    pub fn mutate_frames(&mut self, frames: &mut Vec<Vec<u8>>, other: &[Vec<u8>]) {
        let n = frames.len();
        match self.below(6) {
            0 if n > 0 => {
                let i = self.below(n);
                frames.insert(self.below(n + 1), frames[i].clone());
            }
            1 if n > 0 => {
                frames.remove(self.below(n));
            }
            2 if n > 1 => {
                let (i, j) = (self.below(n), self.below(n));
                frames.swap(i, j);
            }
            3 if !other.is_empty() => {
                let f = other[self.below(other.len())].clone();
                frames.insert(self.below(n + 1), f);
            }
            _ if n > 0 => {
                for _ in 0..1 + self.below(3) {
                    let i = self.below(n);
                    frames[i] = self.mutate(&frames[i]);
                }
            }
            _ => {
                let n = self.below(80);
                frames.push(self.bytes(n));
            }
        }
    }
}

/// Most frames a frame list decodes to.
pub const MAX_FRAMES: usize = 512;

/// Writes `frames` as the frame-list targets read them: each frame as a
/// two-byte big-endian length and its bytes (longer frames are cut).
pub fn encode_frames(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames.iter().take(MAX_FRAMES) {
        let f = &f[..f.len().min(usize::from(u16::MAX))];
        out.extend_from_slice(&(f.len() as u16).to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// Reads a frame list written by [`encode_frames`]; any bytes decode (a
/// cut last frame keeps what there is), to at most [`MAX_FRAMES`] frames.
pub fn decode_frames(mut data: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while data.len() >= 2 && out.len() < MAX_FRAMES {
        let len = usize::from(u16::from_be_bytes([data[0], data[1]]));
        let end = (2 + len).min(data.len());
        out.push(data[2..end].to_vec());
        data = &data[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_any_bytes_decode() {
        let frames = vec![vec![1, 2, 3], vec![], vec![9; 300]];
        assert_eq!(decode_frames(&encode_frames(&frames)), frames);
        assert_eq!(decode_frames(&[0, 5, 1, 2]), vec![vec![1, 2]]);
        assert!(decode_frames(&[7]).is_empty());
        let many = vec![vec![0u8]; MAX_FRAMES + 10];
        assert_eq!(decode_frames(&encode_frames(&many)).len(), MAX_FRAMES);
    }

    #[test]
    fn runs_are_reproducible_and_edits_stay_after_from() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let x: Vec<_> = (0..50).map(|_| a.mutate(b"hello world")).collect();
        let y: Vec<_> = (0..50).map(|_| b.mutate(b"hello world")).collect();
        assert_eq!(x, y);
        assert!(x.iter().any(|m| m != b"hello world"));
        let mut r = Rng::new(1);
        for _ in 0..2000 {
            let mut v = b"HEADER-payload".to_vec();
            r.edit(&mut v, 6);
            assert_eq!(&v[..6], b"HEADER");
        }
    }
}
