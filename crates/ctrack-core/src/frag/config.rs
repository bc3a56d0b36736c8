//! The reassembler's settings, why a fragment is refused, and its counters.

/// Open vSwitch's default for fragments held.
pub const DEFAULT_MAX_FRAGS: usize = 1000;
/// The most fragments that may be held (Open vSwitch's bound).
pub const MAX_FRAGS_LIMIT: usize = 5000;
/// Default minimum size of a non-last IPv4 fragment (its IP packet).
pub const DEFAULT_MIN_V4: usize = 1200;
/// Default minimum size of a non-last IPv6 fragment.
pub const DEFAULT_MIN_V6: usize = 1280;
/// The smallest minimum that may be set.
pub const MIN_FRAG_LIMIT: usize = 400;
/// How long a datagram may take to arrive whole (ms).
pub const DEFAULT_TIMEOUT_MS: u64 = 15_000;
/// Default byte budget of held fragments.
pub const DEFAULT_MAX_BYTES: usize = 64 << 20;

pub(super) const SHARDS: usize = 16;
pub(super) const MAX_DATAGRAM: usize = 65535;

/// Settings of a [`Reassembler`](crate::frag::Reassembler).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragConfig {
    /// Reassemble IPv4 (off: IPv4 fragments are refused as such).
    pub v4: bool,
    /// Reassemble IPv6.
    pub v6: bool,
    /// Most fragments held at once (at most [`MAX_FRAGS_LIMIT`]).
    pub max_frags: usize,
    /// Most bytes of held frames.
    pub max_bytes: usize,
    /// Smallest IPv4 non-last fragment (IP header included).
    pub min_v4: usize,
    /// Smallest IPv6 non-last fragment (IPv6 and extension headers
    /// included).
    pub min_v6: usize,
    /// Time a datagram has to arrive whole (ms).
    pub timeout_ms: u64,
}

impl Default for FragConfig {
    fn default() -> Self {
        FragConfig {
            v4: true,
            v6: true,
            max_frags: DEFAULT_MAX_FRAGS,
            max_bytes: DEFAULT_MAX_BYTES,
            min_v4: DEFAULT_MIN_V4,
            min_v6: DEFAULT_MIN_V6,
            timeout_ms: DEFAULT_TIMEOUT_MS,
        }
    }
}

impl FragConfig {
    /// Most datagrams held at once (twice [`FragConfig::max_frags`], at
    /// least 2): those being reassembled and those dropped whose later
    /// fragments are still refused.
    pub fn max_datagrams(&self) -> usize {
        self.max_frags.max(1) * 2
    }

    /// Checks the bounds; the error says which setting is out of range.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_frags > MAX_FRAGS_LIMIT {
            return Err(format!(
                "at most {MAX_FRAGS_LIMIT} fragments may be held (asked {})",
                self.max_frags
            ));
        }
        if self.min_v4 < MIN_FRAG_LIMIT || self.min_v6 < MIN_FRAG_LIMIT {
            return Err(format!(
                "the minimum fragment size is at least {MIN_FRAG_LIMIT} bytes"
            ));
        }
        Ok(())
    }
}

/// Why a fragment was not held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum FragError {
    /// Reassembly of its family is off.
    Disabled,
    /// A non-last fragment smaller than the minimum.
    TooSmall,
    /// Lengths that cannot be: an IPv4 header with a bad checksum or
    /// length; an IPv6 fragment that contradicts its datagram's end, or is
    /// empty (dropped on its own); an IPv6 non-last fragment not a multiple
    /// of 8 bytes, or an empty IPv4 fragment (the datagram is dropped).
    Malformed,
    /// It lies within data held (dropped, the datagram goes on).
    Duplicate,
    /// It overlaps data held otherwise, or (IPv4) contradicts the
    /// datagram's end: the datagram is dropped.
    Overlap,
    /// The datagram would pass 65535 bytes: it is dropped (an IPv6
    /// fragment whose own data pass them is dropped alone).
    TooBig,
    /// Its datagram was dropped earlier (overlap, too big).
    DatagramDropped,
    /// As many fragments or bytes as allowed are held.
    Limit,
    /// Its datagram did not arrive whole in time.
    Expired,
    /// Its datagram was the oldest held when a new fragment met a limit,
    /// and was dropped to make room.
    Evicted,
}

impl FragError {
    /// A short stable name.
    pub fn name(self) -> &'static str {
        match self {
            FragError::Disabled => "disabled",
            FragError::TooSmall => "too_small",
            FragError::Malformed => "malformed",
            FragError::Duplicate => "duplicate",
            FragError::Overlap => "overlap",
            FragError::TooBig => "too_big",
            FragError::DatagramDropped => "datagram_dropped",
            FragError::Limit => "limit",
            FragError::Expired => "expired",
            FragError::Evicted => "evicted",
        }
    }
}

/// Counters of a [`Reassembler`](crate::frag::Reassembler).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FragStats {
    /// Fragments held now.
    pub held: u64,
    /// Fragments taken in.
    pub accepted: u64,
    /// Datagrams completed.
    pub completed: u64,
    /// Fragments sent on with their completed datagram.
    pub released: u64,
    /// Fragments dropped because their datagram timed out.
    pub expired: u64,
    /// Non-last fragments refused as too small.
    pub too_small: u64,
    /// Fragments refused as malformed.
    pub malformed: u64,
    /// Exact repeats dropped.
    pub duplicate: u64,
    /// Datagrams dropped for an overlap (and their fragments).
    pub overlap: u64,
    /// Datagrams dropped for passing 65535 bytes.
    pub too_big: u64,
    /// Fragments dropped because their datagram had been dropped.
    pub dropped: u64,
    /// Fragments refused at a limit.
    pub limit: u64,
    /// Fragments dropped to make room: their datagram was the oldest held
    /// when a new fragment met a limit.
    pub evicted: u64,
}

pub(super) fn clamp(mut c: FragConfig) -> FragConfig {
    c.max_frags = c.max_frags.min(MAX_FRAGS_LIMIT);
    c.min_v4 = c.min_v4.max(MIN_FRAG_LIMIT);
    c.min_v6 = c.min_v6.max(MIN_FRAG_LIMIT);
    c
}
