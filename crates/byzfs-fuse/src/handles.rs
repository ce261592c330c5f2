//! The handles this mount gives new entries before the replicas make them
//! (`byzfs_fs::reserve`): reserved [`RESERVE`] at a time, taken in increasing order, and
//! asked for again ahead, in flight, once [`AHEAD_BELOW`] are left. This is the pool;
//! `early.rs` `take` takes from it for early answers, `link.rs` for the crypto layer.
//!
//! A reservation is an ordered request: it runs after every write-back batch in flight
//! before it. Asked for only when the pool was empty, a program making files waited for all
//! of them (3.8 s of Andrew's copy at `wan`, docs/BENCHMARKS.md "Write-back bounded in
//! bytes"); asked for ahead, its answer is back before the pool runs out unless the mount
//! makes more than `AHEAD_BELOW` entries while it crosses what is in flight.
//!
//! **Why asking ahead is safe.** The replicas keep a session's two newest ranges
//! (`byzfs_fs::reserve::MAX_RANGES`); a reservation drops the oldest. One is asked for ahead
//! only when fewer than `AHEAD_BELOW` handles are left, and only one at a time, so all of
//! them are in the range in use, of which more than `RESERVE - AHEAD_BELOW` (512) were taken.
//! A handle of the range it drops was taken before those, and every handle taken goes into
//! the queue of early answers (at most `MAX_BATCH - 1` = 63 operations) or to the cluster at
//! once (the crypto layer): so each `MakeAt` naming it was submitted before the
//! reservation, and the replicas run a client's requests in submission order (`wire.rs`). A
//! failed queue's creations are forgotten, never sent again.

use byzfs_fs::{FileHandle, FsResult, Reply};
use std::collections::VecDeque;

/// Inode numbers reserved at a time (the most one request may: 64-bit numbers skipped by a
/// mount that stops are never missed).
pub(crate) const RESERVE: u32 = byzfs_fs::reserve::MAX_RESERVE;

/// More are asked for once fewer than this are left (see the module docs for why
/// `RESERVE - AHEAD_BELOW` must exceed the queue of early answers).
pub(crate) const AHEAD_BELOW: usize = RESERVE as usize - RESERVE as usize / 8;

// The safety argument above, checked where the constants are.
const _: () = assert!(RESERVE as usize - AHEAD_BELOW > byzfs_fs::proto::batch::MAX_BATCH);

/// The reserved handles not yet given, oldest first, and whether more are asked for.
#[derive(Default)]
pub(crate) struct Handles {
    pool: VecDeque<FileHandle>,
    /// A reservation is in flight (`inflight.rs`).
    asking: bool,
}

impl Handles {
    /// Adds a range the replicas reserved; false if they refused.
    pub(crate) fn add(&mut self, reply: FsResult) -> bool {
        match reply {
            Ok(Reply::Reserved { first, count }) => {
                self.pool.extend((0..u64::from(count)).map(|k| FileHandle {
                    ino: first.ino + k,
                    generation: first.generation + k,
                }));
                true
            }
            other => {
                tracing::debug!(?other, "cannot reserve inode numbers");
                false
            }
        }
    }

    /// Whether none is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.pool.is_empty()
    }

    /// Whether a reservation is in flight.
    pub(crate) fn asking(&self) -> bool {
        self.asking
    }

    /// The next handle, in increasing order.
    pub(crate) fn take(&mut self) -> Option<FileHandle> {
        self.pool.pop_front()
    }

    /// Whether to ask for more ahead now (few left, none asked for); if so, counts it
    /// asked for.
    pub(crate) fn ask_ahead(&mut self) -> bool {
        let due = self.pool.len() < AHEAD_BELOW && !self.asking;
        self.asking |= due;
        due
    }

    /// The answer of a reservation asked for ahead.
    pub(crate) fn reserved(&mut self, reply: FsResult) {
        self.asking = false;
        self.add(reply);
    }
}
