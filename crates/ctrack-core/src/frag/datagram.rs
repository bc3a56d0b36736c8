//! A datagram made whole, and the fragments rebuilt from it as they came.

use ctrack_wire::{LinkType, ipv4, ipv6, parse_frame, read_be16};

use super::identify::v6_next_header_field;

/// A fragment held, and what its caller tagged it with.
#[derive(Debug)]
pub(super) struct Held<T> {
    pub(super) frame: Vec<u8>,
    pub(super) tag: T,
    /// Offset of the payload in the datagram.
    pub(super) off: usize,
    /// Payload bytes.
    pub(super) len: usize,
    /// Where its payload starts in `frame`.
    pub(super) data: usize,
    /// Where its IP datagram ends in `frame` (link padding follows).
    pub(super) end: usize,
    /// Its IP header's offset.
    pub(super) l3: usize,
    /// It came right after the fragment before it, when that was the
    /// last held: the two are of one run (Linux's `fragrun`).
    pub(super) joins: bool,
}

#[derive(Debug)]
pub struct Datagram<T> {
    /// The datagram in a frame: the first fragment's link header, then the
    /// datagram without fragmentation. Track (and translate) this.
    pub frame: Vec<u8>,
    /// Link type of `frame`.
    pub link: LinkType,
    pub(super) frags: Vec<Held<T>>,
    pub(super) v6: bool,
    /// Offset of the datagram's payload in `frame` (past its IP header,
    /// and for IPv6 its unfragmentable extension headers).
    pub(super) data: usize,
}

/// Builds the datagram of a complete, sorted fragment list.
pub(super) fn build<T>(frags: Vec<Held<T>>, link: LinkType, v6: bool) -> Option<Datagram<T>> {
    let first = frags.first()?;
    let payload_len: usize = frags.iter().map(|f| f.len).sum();
    let f = &first.frame;
    let mut frame = Vec::with_capacity(first.data + payload_len);
    frame.extend_from_slice(f.get(..first.data)?);
    if v6 {
        // Drop the fragment header: the header before it names what
        // follows it.
        let fh = first.data - ipv6::FRAG_HEADER_LEN;
        let next = *f.get(fh)?;
        let field = v6_next_header_field(f, first.l3, fh)?;
        frame.truncate(fh);
        frame[field] = next;
    }
    let data = frame.len();
    for h in &frags {
        frame.extend_from_slice(h.frame.get(h.data..h.data + h.len)?);
    }
    let l3 = first.l3;
    let ip_len = frame.len() - l3;
    if v6 {
        let plen = u16::try_from(ip_len - ipv6::HEADER_LEN).ok()?;
        frame[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
    } else {
        let total = u16::try_from(ip_len).ok()?;
        frame[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
        // No more fragments, offset 0; DF and the reserved bit stay.
        let ff = read_be16(&frame, l3 + 6)? & 0xc000;
        frame[l3 + 6..l3 + 8].copy_from_slice(&ff.to_be_bytes());
        let mut h = ipv4::Ipv4Packet::new_unchecked(&mut frame[l3..]);
        h.fill_checksum();
    }
    Some(Datagram {
        frame,
        link,
        frags,
        v6,
        data,
    })
}

impl<T> Datagram<T> {
    /// Takes the datagram's frame out (to track and translate it; give it
    /// back to [`Datagram::fragments`]).
    pub fn take_frame(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.frame)
    }

    /// The number of fragments it came in.
    pub fn fragment_count(&self) -> usize {
        self.frags.len()
    }

    /// The tags of its fragments, in offset order.
    pub fn tags(&self) -> impl Iterator<Item = &T> {
        self.frags.iter().map(|f| &f.tag)
    }

    /// The fragments to send, rebuilt from `datagram` (this datagram's
    /// frame after tracking, perhaps translated, perhaps with a payload of
    /// another length): each keeps its own link and IP headers (with the
    /// datagram's addresses) and its own share of the payload, in offset
    /// order; the last takes whatever the payload grew or shrank by.
    pub fn fragments(self, datagram: &[u8]) -> Vec<(Vec<u8>, T)> {
        let l3 = self.frags.first().map_or(0, |f| f.l3);
        let payload = datagram.get(self.data..).unwrap_or_default();
        // The datagram's IP end (a translated frame has no padding of its
        // own, but be exact).
        let layers = parse_frame(datagram, self.link);
        let dg_end = layers.ip.map_or(datagram.len(), |ip| ip.end);
        let payload = &payload[..dg_end.saturating_sub(self.data).min(payload.len())];
        let (src, dst) = if self.v6 {
            (
                datagram.get(l3 + 8..l3 + 24),
                datagram.get(l3 + 24..l3 + 40),
            )
        } else {
            (
                datagram.get(l3 + 12..l3 + 16),
                datagram.get(l3 + 16..l3 + 20),
            )
        };
        let n = self.frags.len();
        let mut out = Vec::with_capacity(n);
        for (i, h) in self.frags.into_iter().enumerate() {
            let last = i + 1 == n;
            let start = h.off.min(payload.len());
            let stop = if last {
                payload.len()
            } else {
                (h.off + h.len).min(payload.len())
            };
            let share = &payload[start..stop.max(start)];
            let mut f = Vec::with_capacity(h.data + share.len() + (h.frame.len() - h.end));
            f.extend_from_slice(&h.frame[..h.data]);
            f.extend_from_slice(share);
            f.extend_from_slice(&h.frame[h.end..]);
            let hl3 = h.l3;
            if let (Some(s), Some(d)) = (src, dst) {
                if self.v6 {
                    f[hl3 + 8..hl3 + 24].copy_from_slice(s);
                    f[hl3 + 24..hl3 + 40].copy_from_slice(d);
                    if share.len() != h.len {
                        let plen = (h.data - hl3 - ipv6::HEADER_LEN + share.len()) as u16;
                        f[hl3 + 4..hl3 + 6].copy_from_slice(&plen.to_be_bytes());
                    }
                } else {
                    let changed =
                        f[hl3 + 12..hl3 + 20] != [s, d].concat()[..] || share.len() != h.len;
                    f[hl3 + 12..hl3 + 16].copy_from_slice(s);
                    f[hl3 + 16..hl3 + 20].copy_from_slice(d);
                    if share.len() != h.len {
                        let total = (h.data - hl3 + share.len()) as u16;
                        f[hl3 + 2..hl3 + 4].copy_from_slice(&total.to_be_bytes());
                    }
                    if changed {
                        // Incrementally would keep a wrong header checksum
                        // wrong; the reassembler verified it (when checking
                        // checksums), so a fresh one is the same thing.
                        let mut ih = ipv4::Ipv4Packet::new_unchecked(&mut f[hl3..]);
                        ih.fill_checksum();
                    }
                }
            }
            out.push((f, h.tag));
        }
        out
    }
}
