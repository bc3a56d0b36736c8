//! Application-layer gateways (FTP and TFTP): what a control connection's
//! gateway keeps between packets. The packet work is in the tracker's
//! gateway stage; the FTP text is read by [`crate::alg::ftp`].

use std::sync::{Mutex, MutexGuard};

use crate::action::Alg;
use crate::alg::expect::ExpKey;
use crate::alg::ftp::Stream;
use crate::nat::seqadj::SeqAdj;

/// The gateway of a control connection and its state.
#[derive(Debug)]
pub(crate) struct Helper {
    /// Which protocol.
    pub alg: Alg,
    state: Mutex<State>,
}

/// What a gateway keeps.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// The FTP text of each direction (by [`crate::Dir::index`]).
    pub streams: [Stream; 2],
    /// Sequence adjustment of each direction's bytes after rewrites.
    pub adj: [SeqAdj; 2],
    /// Expectations this connection has waiting, oldest first.
    pub waiting: Vec<ExpKey>,
    /// This connection counts in the tracker's number of connections
    /// with sequence adjustments.
    pub counted: bool,
}

impl Helper {
    pub(crate) fn new(alg: Alg) -> Helper {
        Helper {
            alg,
            state: Mutex::new(State::default()),
        }
    }

    /// The state, locked.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True if it ever adjusted sequence numbers.
    pub(crate) fn counted(&self) -> bool {
        self.lock().counted
    }
}
