//! The handles this mount gives new entries before the replicas make them
//! (`byzfs_fs::reserve`): reserved [`RESERVE`] at a time, taken in increasing order, and
//! asked for again ahead, in flight, once [`AHEAD_BELOW`] are left.
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

use super::cluster::{invoke, transmit, Link};
use super::inflight::{self, Then};
use byzfs_fs::{Credentials, Errno, FileHandle, FsResult, Op, Reply};
use std::collections::{HashSet, VecDeque};

/// Inode numbers reserved at a time (the most one request may: 64-bit numbers skipped by a
/// mount that stops are never missed).
pub(crate) const RESERVE: u32 = byzfs_fs::reserve::MAX_RESERVE;

/// More are asked for once fewer than this are left (see the module docs for why
/// `RESERVE - AHEAD_BELOW` must exceed the queue of early answers).
pub(crate) const AHEAD_BELOW: usize = RESERVE as usize - RESERVE as usize / 8;

/// The reserved handles not yet given, oldest first, and whether more are asked for.
#[derive(Default)]
pub(crate) struct Handles {
    pool: VecDeque<FileHandle>,
    /// A reservation is in flight (`inflight.rs`).
    asking: bool,
}

impl Handles {
    /// Adds a range the replicas reserved.
    fn add(&mut self, reply: FsResult) -> bool {
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
}

/// A handle for an entry answered early (`dirs.rs`): the next reserved one, reserved first
/// (waiting) if none is left; more are asked for in flight once [`AHEAD_BELOW`] are left.
/// `None` if the cluster refused.
pub(crate) fn take(link: &mut Link, cred: &Credentials) -> Option<FileHandle> {
    if link.handles.pool.is_empty() && link.handles.asking {
        // The reservation in flight lands with the batches before it.
        inflight::land_all_for(link, "reserve_inodes");
    }
    if link.handles.pool.is_empty() {
        let reply = invoke(link, cred, Op::ReserveInodes { count: RESERVE });
        if !link.handles.add(reply) {
            return None;
        }
    }
    let fh = link.handles.pool.pop_front()?;
    if link.handles.pool.len() < AHEAD_BELOW && !link.handles.asking && inflight::may_fly(link) {
        link.handles.asking = true;
        let op = Op::ReserveInodes { count: RESERVE };
        inflight::send(link, cred, op, HashSet::new(), Then::Reserved);
    }
    Some(fh)
}

/// A handle for the crypto layer, which makes an entry at once (`crypt.rs`, through
/// [`crate::transport::Transport::new_handle`]): reserved on the wire under it if none is
/// left. The queue of early answers, which takes from the same pool, went before the
/// crypto layer's call (`cluster.rs` `invoke_once_as`), so handles stay in increasing order.
pub(crate) fn take_now(link: &mut Link, cred: &Credentials) -> Result<FileHandle, Errno> {
    if link.handles.pool.is_empty() {
        let reply = transmit(link, cred, Op::ReserveInodes { count: RESERVE }, false);
        if let Err(e) = reply {
            return Err(e);
        }
        link.handles.add(reply);
    }
    link.handles.pool.pop_front().ok_or(Errno::EIO)
}

// The safety argument above, checked where the constants are.
const _: () = assert!(RESERVE as usize - AHEAD_BELOW > byzfs_fs::proto::batch::MAX_BATCH);

/// The answer of a reservation asked for ahead.
pub(crate) fn reserved(link: &mut Link, reply: FsResult) {
    link.handles.asking = false;
    link.handles.add(reply);
}
