//! A request on its way to the cluster that its sender does not wait for under the mount's
//! lock: a read-only operation in a lane (`lib.rs` `call`), the recall poll, a write-back
//! batch left in flight (`inflight.rs`). It keeps what its answer must update once it is
//! in ([`Prep`], applied by `link.rs` `settle`), found before it was sent.

use crate::attrs::Effect;
use crate::wire::{Outcome, Ticket, Wire};
use byzfs_fs::FileHandle;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What an operation needs done after its reply (`link.rs` `settle`), found before it is
/// sent (`link.rs` `prep_of`).
pub(crate) struct Prep {
    /// Sent read-only (a hint: the replicas decide from the operation itself).
    pub(crate) read_only: bool,
    /// What it does to the attribute cache.
    pub(crate) effect: Effect,
    /// Held directories whose names it changes.
    pub(crate) changes_held: Vec<FileHandle>,
    /// A held directory whose attributes it sets.
    pub(crate) sets_held: Option<FileHandle>,
}

/// Ordered operations sent in lanes (`calls.rs` `ordered_lane_takes`), logged at unmount.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LaneCount {
    /// How many were sent.
    pub(crate) sent: u64,
    /// How many are on their way now.
    pub(crate) now: usize,
    /// The most on their way at once.
    pub(crate) most: usize,
}

impl LaneCount {
    /// One more sent.
    pub(crate) fn sent(&mut self) {
        self.sent += 1;
        self.now += 1;
        self.most = self.most.max(self.now);
    }

    /// One answered.
    pub(crate) fn answered(&mut self) {
        self.now = self.now.saturating_sub(1);
    }
}

/// A request sent and not yet answered.
pub(crate) struct InLane {
    pub(crate) prep: Prep,
    /// The request's size.
    pub(crate) bytes: usize,
    /// Its place among the mount's requests (`cluster.rs` `Cluster::next_place`).
    pub(crate) place: u64,
    /// The attribute cache's mark when it was sent (`attrs.rs` `record_since`).
    pub(crate) mark: u64,
    pub(crate) wire: Arc<Wire>,
    pub(crate) ticket: Ticket,
    pub(crate) name: &'static str,
    pub(crate) began: Instant,
    /// The soft mount's timeout (`None`: hard).
    pub(crate) timeout: Option<Duration>,
}

impl InLane {
    /// When it was sent.
    pub(crate) fn began(&self) -> Instant {
        self.began
    }

    /// Its request's size.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The reply if it is in, without waiting.
    pub(crate) fn ready(&mut self) -> Option<Outcome> {
        self.ticket.ready()
    }

    /// Waits for the reply (without the mount's lock).
    pub(crate) fn wait(&mut self) -> Option<Outcome> {
        let ticket = std::mem::replace(&mut self.ticket, Ticket::Done);
        self.wire.wait(ticket, self.timeout, self.name)
    }
}
