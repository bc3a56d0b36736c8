//! The ports' types: [`IoKind`], [`PortOptions`], [`PortStats`], [`Pool`]
//! and the [`Port`] trait, re-exported by `crate::io` (their public home).
//! They live here, below both `io` and the socket code, so that `sys`
//! needs nothing from `io` (no import circle).

use std::io;
use std::os::fd::RawFd;

use ctrack_wire::offload::VnetHdr;

/// Which kind of socket carries a port's frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoKind {
    /// AF_XDP: an XDP program redirects the interface's frames to a UMEM
    /// shared with us (zero-copy where the driver has it, copy mode on
    /// veth and everywhere else).
    AfXdp,
    /// AF_PACKET with TPACKET_V3 (or V2, [`RxRing`]) receive rings and
    /// batched sends: works on every interface.
    #[default]
    AfPacket,
}

impl IoKind {
    /// The name `--io` takes.
    pub fn name(self) -> &'static str {
        match self {
            IoKind::AfXdp => "af-xdp",
            IoKind::AfPacket => "af-packet",
        }
    }
}

impl std::str::FromStr for IoKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "af-xdp" | "afxdp" | "xdp" => Ok(IoKind::AfXdp),
            "af-packet" | "afpacket" | "packet" => Ok(IoKind::AfPacket),
            _ => Err(format!("unknown I/O kind {s:?} (af-xdp or af-packet)")),
        }
    }
}

/// What a port's interface is now, as the datapath's housekeeping thread
/// watches it (every second; `ctrack ctl ports` shows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkState {
    /// Up and running: set up, with a carrier (a veth whose peer is up).
    #[default]
    Up,
    /// Set down, or without a carrier (a veth whose peer is down or in a
    /// namespace that went away): its frames wait until it comes back.
    Down,
    /// Removed, or made again under its name (another interface index):
    /// the ports' sockets stay bound to the interface they opened, so
    /// nothing comes in or goes out there until ctrack is restarted.
    Gone,
}

impl LinkState {
    /// How `ctrack ctl ports` names it: `up`, `down`, `gone`.
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Up => "up",
            LinkState::Down => "down",
            LinkState::Gone => "gone",
        }
    }

    /// The state numbered `n` as [`LinkState::number`] numbers it
    /// ([`LinkState::Gone`] for any other).
    pub fn from_number(n: u8) -> LinkState {
        match n {
            0 => LinkState::Up,
            1 => LinkState::Down,
            _ => LinkState::Gone,
        }
    }

    /// Its number, to keep in an atomic.
    pub fn number(self) -> u8 {
        self as u8
    }
}

/// The layout of an AF_PACKET port's receive ring (`--rx-ring`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxRing {
    /// TPACKET_V2: slots of one size, each handed over as soon as the
    /// kernel writes it (a frame of segmentation offload, longer than a
    /// slot, comes whole through the socket). No wait for sparse traffic.
    V2,
    /// TPACKET_V3: blocks of frames of any length, handed over full or
    /// after a millisecond: fewer status words under load, but a sparse
    /// frame waits up to that millisecond at each port.
    #[default]
    V3,
}

impl RxRing {
    /// The name `--rx-ring` takes.
    pub fn name(self) -> &'static str {
        match self {
            RxRing::V2 => "v2",
            RxRing::V3 => "v3",
        }
    }
}

impl std::str::FromStr for RxRing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "v2" | "tpacket_v2" | "2" => Ok(RxRing::V2),
            "v3" | "tpacket_v3" | "3" => Ok(RxRing::V3),
            _ => Err(format!("unknown receive ring {s:?} (v2 or v3)")),
        }
    }
}

/// How to open one worker's handle on an interface.
#[derive(Debug, Clone)]
pub struct PortOptions {
    /// The interface's name.
    pub ifname: String,
    /// The socket kind.
    pub kind: IoKind,
    /// This worker's number, from 0.
    pub worker: usize,
    /// How many workers share the interface.
    pub workers: usize,
    /// The fanout group the workers' AF_PACKET sockets on this interface
    /// share (with more than one worker): `None` for the first socket,
    /// which has the kernel make a group no other socket is in
    /// (`PACKET_FANOUT_FLAG_UNIQUEID`) and says its number
    /// ([`Port::fanout_group`]); that number for the others.
    pub fanout_group: Option<u16>,
    /// Frames per receive ring (rounded as the socket kind needs).
    pub ring_frames: usize,
    /// Largest frame handled (bytes, without the FCS); larger ones are
    /// counted and dropped.
    pub frame_size: usize,
    /// The receive ring's layout (AF_PACKET only).
    pub rx_ring: RxRing,
}

/// A port's counters, as the socket layer sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames the kernel dropped because the ring was full (AF_PACKET's
    /// `tp_drops`, AF_XDP's `rx_dropped` + `rx_ring_full`).
    pub rx_dropped: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames that could not be sent (ring full, too large, error).
    pub tx_errors: u64,
    /// Frames received with their transport checksum left to offload
    /// (AF_PACKET's `TP_STATUS_CSUMNOTREADY`), which ctrack finished.
    pub rx_csum_completed: u64,
    /// Frames received whole that their sender left to segmentation
    /// offload (TSO, GSO; counted in `rx_packets` too). Each leaves whole
    /// where the port it goes to can send it so (`tx_gso_frames` there),
    /// else cut into segments.
    pub rx_gso_frames: u64,
    /// The segments ctrack cut them into, where they could not leave
    /// whole (counted by the worker, at the port they came in on).
    pub rx_gso_segments: u64,
    /// Frames sent whole with their segmentation left to the kernel
    /// (counted in `tx_packets` too, one each).
    pub tx_gso_frames: u64,
}

impl PortStats {
    /// Adds `o` to `self`.
    pub fn merge(&mut self, o: &PortStats) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.rx_dropped += o.rx_dropped;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.tx_errors += o.tx_errors;
        self.rx_csum_completed += o.rx_csum_completed;
        self.rx_gso_frames += o.rx_gso_frames;
        self.rx_gso_segments += o.rx_gso_segments;
        self.tx_gso_frames += o.tx_gso_frames;
    }
}

/// Spare frame buffers, so that the packet path allocates nothing once
/// warm.
#[derive(Debug, Default)]
pub struct Pool {
    free: Vec<Vec<u8>>,
}

impl Pool {
    /// The most buffers kept.
    const KEEP: usize = 4096;
    /// The largest buffer kept: a frame of segmentation offload (up to 64
    /// KiB) comes in a buffer of its own, freed after use, so that the
    /// pool's buffers do not grow to that size and stay so.
    const KEEP_BYTES: usize = 16 << 10;

    /// An empty buffer (with capacity, when one was returned).
    #[inline]
    pub fn get(&mut self) -> Vec<u8> {
        self.free.pop().unwrap_or_default()
    }

    /// Returns a buffer for reuse.
    #[inline]
    pub fn put(&mut self, mut v: Vec<u8>) {
        if self.free.len() < Self::KEEP && v.capacity() != 0 && v.capacity() <= Self::KEEP_BYTES {
            v.clear();
            self.free.push(v);
        }
    }
}

/// One worker's handle on one interface.
pub trait Port: Send + std::fmt::Debug {
    /// The interface's name.
    fn name(&self) -> &str;

    /// Moves up to `max` received frames into `out` (buffers from `pool`),
    /// without blocking; returns how many.
    fn recv(&mut self, pool: &mut Pool, out: &mut Vec<Vec<u8>>, max: usize) -> io::Result<usize>;

    /// Queues `frames` for sending and flushes them (one system call per
    /// batch at most); returns how many were accepted. Frames over the
    /// interface's MTU are counted in `tx_errors`, not sent.
    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize>;

    /// Moves the virtio-net headers of the frames of segmentation offload
    /// that the last `recv` handed over whole, each with the frame's index
    /// in that call's `out`, into `into` (a port that hands over none adds
    /// nothing). Each such frame's transport checksum is finished; it is
    /// to leave through [`Port::send_gso`] or be cut
    /// ([`ctrack_wire::offload::segment`]).
    fn take_gso(&mut self, into: &mut Vec<(usize, VnetHdr)>) {
        let _ = into;
    }

    /// Whether [`Port::send_gso`] sends.
    fn sends_gso(&self) -> bool {
        false
    }

    /// Sends frames over the MTU whole, each behind its virtio-net header
    /// ([`ctrack_wire::offload::hand_over`]), the kernel to cut them;
    /// returns how many were accepted. A port that cannot sends none.
    fn send_gso(&mut self, frames: &[(&[u8], VnetHdr)]) -> io::Result<usize> {
        let _ = frames;
        Ok(0)
    }

    /// The descriptor to poll for readable frames.
    fn fd(&self) -> RawFd;

    /// The counters so far.
    fn stats(&mut self) -> PortStats;

    /// How the port runs, for the logs: the socket kind and mode, e.g.
    /// `"af-xdp, driver mode, copy"`.
    fn mode(&self) -> &'static str {
        ""
    }

    /// The AF_PACKET fanout group the socket is in, if any: what the other
    /// workers' sockets on the interface join ([`PortOptions::fanout_group`]).
    fn fanout_group(&self) -> Option<u16> {
        None
    }
}
