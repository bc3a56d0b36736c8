//! Listings of connections (`dump-conntrack`, `list`), written a chunk at
//! a time.
//!
//! A listing is sorted (zone, protocol, original addresses and ports), so
//! the whole table's order must be known before its first line: what is
//! held for it is each connection's sort key and id, about 64 bytes a
//! connection, not its text. The text is made and sent a chunk of
//! [`CHUNK`] bytes at a time, each connection read again as it is
//! written (one that went meanwhile is left out), in reply lines that say
//! `"more":true` but the last. Until 2026-12-01 a listing was made whole
//! before it was sent: for a million connections, 160 MB of text, held
//! about five times over (the entries, the text, the reply line), raised
//! the daemon's peak memory by 780 MB, and the client refused a reply line
//! over 1 GiB, about six million connections.

use std::io::{self, Write};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Relaxed};

use ctrack_core::{ConnId, Entry, Zone};

use super::ctx::Ctx;
use super::list;
use super::proto::Reply;

/// The most bytes of text one reply line of a listing carries (a
/// connection's line may take it a little over).
pub(crate) const CHUNK: usize = 64 * 1024;

/// The most listings made or written at once, for all clients: each holds
/// its order while its client reads it.
pub(crate) const MAX_LISTINGS: usize = 4;

/// The order a listing is sorted in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Order {
    zone: Zone,
    proto: u8,
    src: IpAddr,
    dst: IpAddr,
    sport: Option<u16>,
    dport: Option<u16>,
    icmp: Option<(u16, u8, u8)>,
}

impl Order {
    fn of(e: &Entry) -> Order {
        Order {
            zone: e.zone,
            proto: e.proto,
            src: e.orig.src,
            dst: e.orig.dst,
            sport: e.orig.sport,
            dport: e.orig.dport,
            icmp: e.orig.icmp,
        }
    }
}

/// How a listing writes each connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// `dump-conntrack`'s lines (with `-s`, the statistics).
    Dump {
        /// Counters and timeouts too.
        stats: bool,
    },
    /// `list`'s lines, as `conntrack -L`.
    List,
    /// A JSON array of entries, as `serde_json::to_string_pretty` writes
    /// one.
    Json,
}

/// A listing: the connections to write, in order.
pub(crate) struct Listing {
    rows: Vec<(Order, ConnId)>,
    style: Style,
    /// Which connections the listing shows, asked again of each as it is
    /// written (its state or mark may have changed since).
    keep: Box<dyn Fn(&Entry) -> bool + Send>,
    /// Holds one of the [`MAX_LISTINGS`] places until dropped.
    _place: Place,
}

impl std::fmt::Debug for Listing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listing")
            .field("rows", &self.rows.len())
            .field("style", &self.style)
            .finish_non_exhaustive()
    }
}

/// One of the [`MAX_LISTINGS`] places, given back when dropped.
#[derive(Debug)]
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Listing {
    /// The connections of `zone` (all zones if `None`) that `keep`, as
    /// they are now, in order; an error if [`MAX_LISTINGS`] are under way.
    pub(crate) fn new(
        ctx: &Ctx,
        zone: Option<Zone>,
        keep: impl Fn(&Entry) -> bool + Send + 'static,
        style: Style,
    ) -> Result<Listing, String> {
        let count = ctx.listings.clone();
        if count.fetch_add(1, AcqRel) >= MAX_LISTINGS {
            count.fetch_sub(1, Relaxed);
            return Err(format!(
                "{MAX_LISTINGS} listings of connections are being written already: try again when one is done"
            ));
        }
        let place = Place(count);
        let tracker = ctx.shared.fw.tracker();
        // Room for all at once: no doubling on the way, whose copies
        // would hold the order twice over.
        let most = zone.map_or_else(|| tracker.table_len(), |z| tracker.zone_len(z));
        let mut rows = Vec::with_capacity(most);
        let now = ctx.shared.now();
        tracker.for_each(zone, now, |id, info| {
            if keep(&info.entry) {
                rows.push((Order::of(&info.entry), id));
            }
        });
        // Stable: connections of one key (none, in one generation of a
        // zone) keep the table's order.
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        if rows.len() < rows.capacity() / 2 {
            // Most were left out (`list`'s filters): held while the
            // client reads, the room they did not take is given back.
            rows.shrink_to_fit();
        }
        Ok(Listing {
            rows,
            style,
            keep: Box::new(keep),
            _place: place,
        })
    }

    /// Writes the reply lines to `out`: the connections that are still
    /// there and still to be shown, each as it is now.
    pub(crate) fn write(&self, ctx: &Ctx, out: &mut dyn Write) -> io::Result<()> {
        let tracker = ctx.shared.fw.tracker();
        let mut text = String::with_capacity(CHUNK + 1024);
        let mut written = 0usize;
        if self.style == Style::Json {
            text.push('[');
        }
        for (order, id) in &self.rows {
            let now = ctx.shared.now();
            let Some(info) = tracker.conn(*id, now) else {
                continue;
            };
            // Its slot taken by another connection meanwhile, or no longer
            // one the listing shows.
            if Order::of(&info.entry) != *order || !(self.keep)(&info.entry) {
                continue;
            }
            self.push(&mut text, &info.entry, written == 0);
            written += 1;
            if text.len() >= CHUNK {
                let mut line = Reply::text(std::mem::take(&mut text));
                line.more = Some(true);
                out.write_all(line.to_line().as_bytes())?;
            }
        }
        if self.style == Style::Json {
            text.push_str(if written == 0 { "]" } else { "\n]" });
        }
        out.write_all(Reply::text(text).to_line().as_bytes())
    }

    /// Appends `e` in the listing's style (`first` of the listing or not).
    fn push(&self, text: &mut String, e: &Entry, first: bool) {
        match self.style {
            Style::Dump { stats } => {
                text.push_str(&list::dump_line(e, stats));
                text.push('\n');
            }
            Style::List => {
                text.push_str(&list::conntrack_line(e, None));
                text.push('\n');
            }
            Style::Json => {
                text.push_str(if first { "\n" } else { ",\n" });
                // An element of a pretty array: its lines one level in.
                let one = serde_json::to_string_pretty(e).unwrap_or_default();
                for (i, l) in one.lines().enumerate() {
                    if i > 0 {
                        text.push('\n');
                    }
                    text.push_str("  ");
                    text.push_str(l);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the module's documentation says a listing holds a connection.
    #[test]
    fn a_row_is_64_bytes_at_most() {
        assert!(size_of::<(Order, ConnId)>() <= 64);
    }
}
