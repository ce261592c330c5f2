//! Calls to the cluster as the mount's operations make them: one operation, after what
//! must reach the replicas first, retried while it meets another mount's directory
//! ([`invoke`]); a read-only one sent in a lane, waited for without the mount's lock
//! ([`send_in_lane`]); and the write-back sent on its own (`close`, `fsync`, the background
//! thread, a full queue). The layers below: `sender.rs` (sending, write-back in flight),
//! `writeback.rs` (what to send), `link.rs` (one request as it is).

use crate::crypt_read_lane::ReadPlan;
use crate::dirs::RECALL_RETRY;
use crate::gather::Pending;
use crate::lane::InLane;
use crate::link::{finish_ordered_in_lane, prep_of, send_lane, Link};
use crate::recalls;
use crate::reclaim;
use crate::sender::{self, run};
use crate::wire::Outcome;
use crate::writeback::{self, Wait};
use byzfs_fs::{Credentials, Errno, FsResult, Op, Reply};

/// Runs `op` on the cluster with `cred`. Waits until the cluster answers, or up to the
/// soft mount's timeout; the client retransmits meanwhile and its links reconnect by
/// themselves, so replicas killed and restarted never surface as errors. What `op` may
/// see goes first: the write-back in flight lands, the queue of early answers and held
/// writes are sent (`writeback::before`). An operation that grows a file the replicas are
/// still shrinking (`EBUSY`) is sent again once that file's old tail is gone, and one that
/// may leave space to give back wakes the background reclaim (`sender.rs` `send_growing`).
///
/// An operation on names in a directory, or on a file, another mount holds (`dirs.rs`,
/// `held_files.rs`) is answered `Recall`: it is sent again, ordered (so the replicas ask
/// the holder to give it back), every [`RECALL_RETRY`], until it runs; meanwhile this mount
/// gives back what it is asked for itself, so two mounts waiting on each other's
/// delegations both go on.
pub(crate) fn invoke(link: &mut Link, cred: &Credentials, op: Op) -> FsResult {
    let again = op.may_be_recalled().then(|| op.clone());
    let mut r = sender::call(link, cred, op, false);
    if let Some(op) = again {
        let mut waits = 0u32;
        while matches!(r, Ok(Reply::Recall)) {
            if waits.is_multiple_of(200) {
                tracing::debug!(op = op.name(), "waiting for another mount's directory");
            }
            waits = waits.wrapping_add(1);
            recalls::give_back_recalled(link, cred);
            std::thread::sleep(RECALL_RETRY);
            r = sender::call(link, cred, op.clone(), true);
        }
    }
    r
}

/// The first half of [`invoke`] for an operation `link.rs` `lane_takes`: sends what must go
/// first, then `op`, and returns without waiting, so the caller can let the mount's lock
/// go while `op` is at the replicas (`lib.rs` `call`). Its place among the mount's
/// requests is fixed here (`wire.rs`); `link.rs` `finish_in_lane` is the second half.
pub(crate) fn send_in_lane(link: &mut Link, cred: &Credentials, op: Op) -> InLane {
    if link.inflight.must_precede(&op) {
        sender::land_all_for(link, op.name());
    }
    let first = writeback::before(link, &op, Wait::Yes);
    run(link, first);
    let prep = prep_of(link, &op, false);
    send_lane(link, cred, op, prep)
}

/// An encrypted mount's [`Op::Read`] sent in a lane (`crypt_read_lane.rs`), as
/// [`send_in_lane`] sends a plain one: what must go first goes, then the crypto layer
/// plans one gathered read from the header and nodes it keeps. `None`: not in a lane (one
/// FUSE thread, another operation, or the layer needs more than one request), and `op`
/// goes through [`invoke`].
pub(crate) fn send_crypt_read_in_lane(
    link: &mut Link,
    cred: &Credentials,
    op: &Op,
) -> Option<(ReadPlan, InLane)> {
    if !link.cluster.lanes() || link.crypt.is_none() || !matches!(op, Op::Read { .. }) {
        return None;
    }
    if link.inflight.must_precede(op) {
        sender::land_all_for(link, op.name());
    }
    let first = writeback::before(link, op, Wait::Yes);
    run(link, first);
    let plan = link.crypt.as_ref()?.plan_read(op)?;
    let prep = prep_of(link, &plan.op, false);
    let sent = send_lane(link, cred, plan.op.clone(), prep);
    Some((plan, sent))
}

/// Whether ordered operation `op` may go in a lane ([`send_in_lane`]), its reply waited
/// for without the mount's lock, as read-only ones do (`link.rs` `lane_takes`): a plain
/// mount's own operations on files and names, none in a directory it holds. The replicas
/// run the mount's requests in the order it submitted them (`wire.rs`), and that order is
/// fixed under the lock; what the reply updates is guarded by the attribute cache's mark
/// (an inode changed since it was sent is dropped: `attrs.rs` `record_ordered_since`) or
/// commutes (a held directory's listing marked stale, reclaim marked due). A directory
/// this mount holds is left out: an early answer there, given while the operation is on
/// its way, would be given from a listing that does not show it yet. Locks, delegations,
/// the background's operations and batches stay under the lock.
pub(crate) fn ordered_lane_takes(link: &Link, op: &Op) -> bool {
    let user_op = matches!(
        op,
        Op::SetAttr { .. }
            | Op::Create { .. }
            | Op::Mkdir { .. }
            | Op::Symlink { .. }
            | Op::Mknod { .. }
            | Op::Remove { .. }
            | Op::Rmdir { .. }
            | Op::Rename { .. }
            | Op::RenameNoReplace { .. }
            | Op::Exchange { .. }
            | Op::Link { .. }
            | Op::SetXattr { .. }
            | Op::RemoveXattr { .. }
            | Op::Write { .. }
            | Op::Allocate { .. }
            | Op::Fsync { .. }
    );
    user_op
        && link.cluster.lanes()
        && link.crypt.is_none()
        && !op.is_read_only()
        && !op.dirs_named().iter().any(|d| link.dirs.holds(d.ino))
}

/// The second half of an ordered operation sent in a lane ([`ordered_lane_takes`]), the
/// mount's lock taken again: its reply applied (`link.rs` `finish_ordered_in_lane`). An
/// answer [`invoke`] would have retried — `Recall` (another mount's directory), `EBUSY` of
/// an operation that grows a file over a stale tail (it changed nothing) — sends `op`
/// again through [`invoke`].
pub(crate) fn finish_ordered(
    link: &mut Link,
    cred: &Credentials,
    op: Op,
    sent: InLane,
    out: Option<Outcome>,
) -> FsResult {
    link.cluster.ordered_lane_answered();
    let r = finish_ordered_in_lane(link, sent, out);
    let recalled = matches!(r, Ok(Reply::Recall)) && !op.dirs_named().is_empty();
    let busy = matches!(r, Err(Errno::EBUSY)) && reclaim::grows(&op).is_some();
    if recalled || busy {
        return invoke(link, cred, op);
    }
    link.reclaim.after(reclaim::may_queue(&op) && r.is_ok());
    r
}

/// [`send_in_lane`] for an ordered operation ([`ordered_lane_takes`]), counted.
pub(crate) fn send_ordered_in_lane(link: &mut Link, cred: &Credentials, op: Op) -> InLane {
    let sent = send_in_lane(link, cred, op);
    link.cluster.ordered_lane_sent();
    sent
}

/// Sends the queue of early answers, with the held writes that join it, then the other
/// held writes.
pub(crate) fn send_queue(link: &mut Link, wait: Wait) {
    let plan = writeback::queue(&mut link.dirs, &mut link.gather, &link.files, wait);
    run(link, plan);
}

/// Sends everything held: the queue, with the writes that join it, and every other held
/// write (a delegation given back, unmount, the gather full).
pub(crate) fn send_everything(link: &mut Link, wait: Wait) {
    let plan = writeback::everything(link, wait);
    run(link, plan);
}

/// Sends held writes of several files (`writeback::writes` packs them).
pub(crate) fn send_writes(link: &mut Link, held: Vec<Pending>, wait: Wait) {
    let plan = writeback::writes(&link.gather, held, wait);
    run(link, plan);
}

/// Sends one file's held writes and waits; a failure is kept for the file's next `close`
/// or `fsync`.
pub(crate) fn send_held(link: &mut Link, p: Pending) {
    send_writes(link, vec![p], Wait::Yes);
}
