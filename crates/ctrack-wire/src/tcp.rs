//! TCP headers (RFC 9293) and the options conntrack needs: MSS, window
//! scale, SACK-permitted, SACK, timestamps.

use crate::{Error, Result, be16, be32};

/// Length of a TCP header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// The largest window-scale shift RFC 7323 allows.
pub const MAX_WSCALE: u8 = 14;

/// TCP flag bits as they sit in the low 12 bits of bytes 12-13.
pub mod flags {
    /// No more data from sender.
    pub const FIN: u16 = 0x001;
    /// Synchronize sequence numbers.
    pub const SYN: u16 = 0x002;
    /// Reset the connection.
    pub const RST: u16 = 0x004;
    /// Push function.
    pub const PSH: u16 = 0x008;
    /// Acknowledgment field significant.
    pub const ACK: u16 = 0x010;
    /// Urgent pointer field significant.
    pub const URG: u16 = 0x020;
    /// ECN echo.
    pub const ECE: u16 = 0x040;
    /// Congestion window reduced.
    pub const CWR: u16 = 0x080;
    /// ECN nonce (historic).
    pub const NS: u16 = 0x100;
}

/// Option kinds.
pub mod option_kind {
    /// End of option list.
    pub const EOL: u8 = 0;
    /// No operation.
    pub const NOP: u8 = 1;
    /// Maximum segment size.
    pub const MSS: u8 = 2;
    /// Window scale.
    pub const WSCALE: u8 = 3;
    /// SACK permitted.
    pub const SACK_PERM: u8 = 4;
    /// Selective acknowledgment.
    pub const SACK: u8 = 5;
    /// Timestamps.
    pub const TIMESTAMP: u8 = 8;
}

mod field {
    pub(super) const SRC_PORT: usize = 0;
    pub(super) const DST_PORT: usize = 2;
    pub(super) const SEQ: usize = 4;
    pub(super) const ACK: usize = 8;
    pub(super) const OFF_FLAGS: usize = 12;
    pub(super) const WINDOW: usize = 14;
    pub(super) const CHECKSUM: usize = 16;
    pub(super) const URGENT: usize = 18;
}

/// A view of a TCP segment over a buffer that starts with its header and
/// ends where the segment ends.
#[derive(Debug, Clone, Copy)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps `buffer` after checking that the data offset is at least 5 and
    /// the whole header (options included) fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let len = buffer.as_ref().len();
        if len < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Self { buffer };
        let hl = p.header_len();
        if hl < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < hl {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// Wraps `buffer` without checks.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ)
    }

    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::OFF_FLAGS] >> 4) * 4
    }

    /// The flag bits ([`flags`]), 12 bits wide.
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OFF_FLAGS) & 0x0fff
    }

    /// Window (unscaled).
    pub fn window(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WINDOW)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT)
    }

    /// The raw option bytes.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[MIN_HEADER_LEN..self.header_len()]
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// The window-scale shift announced by this segment, the way Open
    /// vSwitch's tracker (after pf) reads it. See [`ovs_wscale`].
    pub fn wscale(&self) -> Option<u8> {
        ovs_wscale(self.options())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        let f = field::SRC_PORT;
        self.buffer.as_mut()[f..f + 2].copy_from_slice(&port.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        let f = field::DST_PORT;
        self.buffer.as_mut()[f..f + 2].copy_from_slice(&port.to_be_bytes());
    }

    /// Sets the sequence number.
    pub fn set_seq(&mut self, seq: u32) {
        let f = field::SEQ;
        self.buffer.as_mut()[f..f + 4].copy_from_slice(&seq.to_be_bytes());
    }

    /// Sets the acknowledgment number.
    pub fn set_ack(&mut self, ack: u32) {
        let f = field::ACK;
        self.buffer.as_mut()[f..f + 4].copy_from_slice(&ack.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        let f = field::CHECKSUM;
        self.buffer.as_mut()[f..f + 2].copy_from_slice(&c.to_be_bytes());
    }
}

/// One parsed TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Maximum segment size.
    Mss(u16),
    /// Window scale shift (as sent, not clamped).
    WindowScale(u8),
    /// SACK permitted.
    SackPermitted,
    /// SACK blocks (raw, pairs of 32-bit edges).
    Sack(&'a [u8]),
    /// Timestamp value and echo reply.
    Timestamp {
        /// TSval.
        value: u32,
        /// TSecr.
        echo: u32,
    },
    /// Any other option, or a known kind with an unexpected length.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data (after kind and length).
        data: &'a [u8],
    },
}

/// Iterates the options of a TCP header strictly: stops at EOL, and yields
/// an error (then stops) at an option whose length is below 2 or runs past
/// the end. Never panics.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// Iterates `options` (the bytes between the fixed header and the data).
    pub fn new(options: &'a [u8]) -> Self {
        Self { rest: options }
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (&kind, tail) = self.rest.split_first()?;
            match kind {
                option_kind::EOL => {
                    self.rest = &[];
                    return None;
                }
                option_kind::NOP => {
                    self.rest = tail;
                    continue;
                }
                _ => {}
            }
            let Some(&len) = tail.first() else {
                self.rest = &[];
                return Some(Err(Error::Truncated));
            };
            let len = usize::from(len);
            if len < 2 || len > self.rest.len() {
                self.rest = &[];
                return Some(Err(Error::Malformed));
            }
            let data = &self.rest[2..len];
            self.rest = &self.rest[len..];
            let opt = match (kind, data.len()) {
                (option_kind::MSS, 2) => TcpOption::Mss(u16::from_be_bytes([data[0], data[1]])),
                (option_kind::WSCALE, 1) => TcpOption::WindowScale(data[0]),
                (option_kind::SACK_PERM, 0) => TcpOption::SackPermitted,
                (option_kind::SACK, n) if n % 8 == 0 => TcpOption::Sack(data),
                (option_kind::TIMESTAMP, 8) => TcpOption::Timestamp {
                    value: be32(data, 0),
                    echo: be32(data, 4),
                },
                _ => TcpOption::Unknown { kind, data },
            };
            return Some(Ok(opt));
        }
    }
}

/// The options a connection tracker records from a SYN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SynOptions {
    /// Maximum segment size, if announced.
    pub mss: Option<u16>,
    /// Window scale, clamped to [`MAX_WSCALE`], if announced.
    pub wscale: Option<u8>,
    /// SACK permitted.
    pub sack_permitted: bool,
    /// Timestamps present.
    pub timestamps: bool,
}

impl SynOptions {
    /// Collects the options of `options`, ignoring a malformed tail.
    pub fn parse(options: &[u8]) -> Self {
        let mut s = SynOptions::default();
        for opt in TcpOptions::new(options).map_while(Result::ok) {
            match opt {
                TcpOption::Mss(m) => s.mss = Some(m),
                TcpOption::WindowScale(w) => s.wscale = Some(w.min(MAX_WSCALE)),
                TcpOption::SackPermitted => s.sack_permitted = true,
                TcpOption::Timestamp { .. } => s.timestamps = true,
                _ => {}
            }
        }
        s
    }
}

/// The window-scale option as Open vSwitch's tracker (and pf before it)
/// reads it: options are walked while at least 3 bytes remain; EOL stops the
/// walk; a window-scale kind is taken from its third byte whatever its
/// length field says, clamped to 14; an option length below 2 counts as 2.
///
/// This is deliberately more lenient than [`TcpOptions`], so that ctrack's
/// sequence tracking makes the same decisions as the reference.
pub fn ovs_wscale(options: &[u8]) -> Option<u8> {
    let mut opt = options;
    let mut wscale = None;
    while opt.len() >= 3 {
        match opt[0] {
            option_kind::EOL => return wscale,
            option_kind::NOP => opt = &opt[1..],
            kind => {
                if kind == option_kind::WSCALE {
                    wscale = Some(opt[2].min(MAX_WSCALE));
                }
                let len = usize::from(opt[1]).max(2);
                if len >= opt.len() {
                    // Open vSwitch's remaining length goes to or below zero.
                    return wscale;
                }
                opt = &opt[len..];
            }
        }
    }
    wscale
}

#[cfg(test)]
mod tests {
    use super::*;

    // A SYN from port 47000 to 80 with MSS 1460, SACK-permitted, timestamps,
    // NOP, window scale 7 (the option layout Linux sends).
    const SYN: [u8; 40] = [
        0xb7, 0x98, 0x00, 0x50, 0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0x12, 0x34, 0x00, 0x00, // fixed header, data offset 10
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x04, 0x02, // SACK permitted
        0x08, 0x0a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, // timestamps
        0x01, // NOP
        0x03, 0x03, 0x07, // window scale 7
    ];

    #[test]
    fn header_fields() {
        let t = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!(t.src_port(), 47000);
        assert_eq!(t.dst_port(), 80);
        assert_eq!(t.seq(), 0x1122_3344);
        assert_eq!(t.ack(), 0);
        assert_eq!(t.header_len(), 40);
        assert_eq!(t.flags(), flags::SYN);
        assert_eq!(t.window(), 64240);
        assert_eq!(t.checksum(), 0x1234);
        assert_eq!(t.options().len(), 20);
        assert!(t.payload().is_empty());
        assert_eq!(t.wscale(), Some(7));
    }

    #[test]
    fn syn_options() {
        let t = TcpPacket::new_checked(&SYN[..]).unwrap();
        let o = SynOptions::parse(t.options());
        assert_eq!(o.mss, Some(1460));
        assert_eq!(o.wscale, Some(7));
        assert!(o.sack_permitted);
        assert!(o.timestamps);
        let all: Vec<_> = TcpOptions::new(t.options()).collect();
        assert_eq!(all.len(), 4);
        assert_eq!(all[2], Ok(TcpOption::Timestamp { value: 1, echo: 0 }));
    }

    #[test]
    fn bad_offsets() {
        let mut s = SYN;
        s[12] = 0x40; // data offset 4
        assert_eq!(TcpPacket::new_checked(&s[..]).err(), Some(Error::Malformed));
        s[12] = 0xf0; // data offset 15 = 60 bytes > 40
        assert_eq!(TcpPacket::new_checked(&s[..]).err(), Some(Error::Truncated));
        assert_eq!(
            TcpPacket::new_checked(&s[..19]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn malformed_options_never_panic() {
        for opts in [
            &[0x02][..],
            &[0x02, 0x00],
            &[0x02, 0x01, 0x00],
            &[0x03, 0x09, 0x01],
            &[0x05, 0x03, 0, 0],
            &[0x01, 0x01, 0x00, 0x03],
        ] {
            let _ = TcpOptions::new(opts).count();
            let _ = SynOptions::parse(opts);
            let _ = ovs_wscale(opts);
        }
        assert_eq!(
            TcpOptions::new(&[0x02, 0x01]).next(),
            Some(Err(Error::Malformed))
        );
    }

    #[test]
    fn wscale_like_ovs() {
        assert_eq!(ovs_wscale(&[3, 3, 7]), Some(7));
        assert_eq!(ovs_wscale(&[3, 3, 200]), Some(14), "clamped");
        assert_eq!(ovs_wscale(&[1, 1, 1, 3, 3, 2]), Some(2));
        assert_eq!(ovs_wscale(&[0, 3, 3, 2]), None, "EOL first");
        // Fewer than three bytes left: not read.
        assert_eq!(ovs_wscale(&[1, 3, 3]), None);
        // A wrong length is ignored for the value itself, as pf does.
        assert_eq!(ovs_wscale(&[3, 2, 5, 0]), Some(5));
        // The strict parser does not accept that.
        assert_eq!(SynOptions::parse(&[3, 2, 5, 0]).wscale, None);
    }

    /// A segment's setters write what its getters then read, each field
    /// in its own place, and its payload follows the header.
    #[test]
    fn fields_written_are_read_back() {
        let mut seg = SYN.to_vec();
        seg.extend_from_slice(b"data");
        seg[18..20].copy_from_slice(&[0xab, 0xcd]); // urgent pointer
        let mut t = TcpPacket::new_checked(&mut seg[..]).unwrap();
        assert_eq!((t.urgent(), t.payload()), (0xabcd, &b"data"[..]));
        t.set_src_port(0x0102);
        t.set_dst_port(0x0304);
        t.set_seq(0x0506_0708);
        t.set_ack(0x090a_0b0c);
        t.set_checksum(0x0d0e);
        assert_eq!(
            (t.src_port(), t.dst_port(), t.seq(), t.ack(), t.checksum()),
            (0x0102, 0x0304, 0x0506_0708, 0x090a_0b0c, 0x0d0e)
        );
        let want: [u8; 20] = [
            1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0xa0, 0x02, 0xfa, 0xf0, 0x0d, 0x0e, 0xab, 0xcd,
        ];
        assert_eq!(seg[..20], want);
    }

    /// End of options stops the walk; a SACK block list is a whole number
    /// of eight-byte edges pairs, else the option is unknown.
    #[test]
    fn end_of_options_and_sack_blocks() {
        let opts = [2, 4, 5, 0xb4, 0, 2, 4, 1, 0x90];
        let all: Vec<_> = TcpOptions::new(&opts).collect();
        assert_eq!(all, [Ok(TcpOption::Mss(1460))]);
        let sack = [5, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(
            TcpOptions::new(&sack).next(),
            Some(Ok(TcpOption::Sack(&sack[2..])))
        );
        for len in [6u8, 9, 12] {
            let mut odd = vec![5, len];
            odd.resize(usize::from(len), 7);
            assert_eq!(
                TcpOptions::new(&odd).next(),
                Some(Ok(TcpOption::Unknown {
                    kind: 5,
                    data: &odd[2..]
                })),
                "{len}"
            );
        }
    }
}
