//! The SCTP ABORT sent for a rejected packet (pinctrl's
//! `pinctrl_handle_sctp_abort`, after RFC 9260 §8.4, "Handle 'Out of the
//! Blue' Packets").
//!
//! The answer is a common header with the ports swapped and one ABORT chunk
//! with no error cause (4 bytes), its CRC32c computed. The verification
//! tag:
//!
//! - the packet's tag is 0 and its first chunk is an INIT: the INIT's
//!   initiate tag, T bit clear (§8.4 item 3);
//! - otherwise the packet's own tag, reflected, T bit set (§8.4 item 8).
//!
//! No answer to a packet that is cut before its first chunk header (or,
//! for an INIT, before the end of the INIT's fixed fields, as pinctrl), or
//! that holds an ABORT (§8.4 item 2), a SHUTDOWN COMPLETE (item 6) or a
//! COOKIE ACK (item 7) in any chunk its chunk lengths reach. pinctrl looks
//! at the first chunk only, and only for ABORT.

use ctrack_wire::sctp::{CHUNK_HEADER_LEN, HEADER_LEN, SctpPacket};
use ctrack_wire::{checksum, ip_proto, read_be16, read_be32};

use super::{Answer, RESET_TTL};

/// Chunk types (RFC 9260 §3.2).
mod chunk {
    /// INIT.
    pub(super) const INIT: u8 = 1;
    /// ABORT.
    pub(super) const ABORT: u8 = 6;
    /// COOKIE ACK.
    pub(super) const COOKIE_ACK: u8 = 11;
    /// SHUTDOWN COMPLETE.
    pub(super) const SHUTDOWN_COMPLETE: u8 = 14;
}

/// The T bit of an ABORT chunk's flags: the verification tag is the
/// receiver's own, reflected.
pub(super) const FLAG_T: u8 = 0x01;

/// Length of an INIT chunk's fixed fields after the chunk header: initiate
/// tag, advertised window, stream counts, initial TSN.
const INIT_FIXED_LEN: usize = 16;

/// The ABORT answering the SCTP packet `l4`, or `None` (see the module
/// documentation).
pub(super) fn abort(l4: &[u8]) -> Option<Answer> {
    let pkt = SctpPacket::new_checked(l4).ok()?;
    let first = pkt.first_chunk_type()?;
    if l4.len() < HEADER_LEN + CHUNK_HEADER_LEN || holds_silencing_chunk(l4) {
        return None;
    }
    let (vtag, flags) = if pkt.vtag() == 0 && first == chunk::INIT {
        if l4.len() < HEADER_LEN + CHUNK_HEADER_LEN + INIT_FIXED_LEN {
            return None;
        }
        (read_be32(l4, HEADER_LEN + CHUNK_HEADER_LEN)?, 0)
    } else {
        (pkt.vtag(), FLAG_T)
    };
    let mut out = Vec::with_capacity(HEADER_LEN + CHUNK_HEADER_LEN);
    out.extend_from_slice(&pkt.dst_port().to_be_bytes());
    out.extend_from_slice(&pkt.src_port().to_be_bytes());
    out.extend_from_slice(&vtag.to_be_bytes());
    out.extend_from_slice(&[0; 4]); // CRC32c, below
    out.extend_from_slice(&[chunk::ABORT, flags, 0, CHUNK_HEADER_LEN as u8]);
    let crc = checksum::sctp_crc32c(&out);
    out[8..12].copy_from_slice(&crc.to_le_bytes());
    Some(Answer {
        proto: ip_proto::SCTP,
        ttl: RESET_TTL,
        l4: out,
    })
}

/// True if a chunk that must not be answered appears among the chunks of
/// `l4`, walked by their lengths until one is cut short or malformed.
fn holds_silencing_chunk(l4: &[u8]) -> bool {
    let mut at = HEADER_LEN;
    while let (Some(&ty), Some(len)) = (l4.get(at), read_be16(l4, at + 2)) {
        if matches!(
            ty,
            chunk::ABORT | chunk::SHUTDOWN_COMPLETE | chunk::COOKIE_ACK
        ) {
            return true;
        }
        let len = usize::from(len);
        if len < CHUNK_HEADER_LEN {
            return false;
        }
        at += (len + 3) & !3;
    }
    false
}
