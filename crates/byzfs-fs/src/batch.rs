//! [`Op::Batch`]: several operations as one, all or nothing, so a mount
//! that answered them early (docs/plans/27) sends them in one request: one agreement, one
//! disk sync and one reply for all.
//!
//! Members run in order in the batch's one transaction; the first errno fails the batch and
//! its transaction is dropped, so nothing of it is applied. What may be a member: the
//! operations a mount answers early for a directory it holds — creations ([`Op::MakeAt`]
//! among them), links, removals, renames, attribute changes that do not change a size, the
//! delegation of a directory the batch creates, directories given back (at unmount) — and
//! writes, at most [`MAX_IO`] bytes in all. Work stays bounded (ARCHITECTURE.md "Bounded
//! work"): at most [`MAX_BATCH`] members, and the members share one operation's budget of
//! blocks to delete (a removal beyond it queues the rest, as alone).

use crate::exec::{misrouted, Exec};
use crate::fail::Res;
use crate::proto::batch::{may_batch, MAX_BATCH};
use crate::proto::errno::Errno;
use crate::proto::op::{Op, MAX_IO};
use crate::proto::reply::Reply;
use crate::store::Store;

/// Bytes of file data `op` writes.
fn data_bytes(op: &Op) -> usize {
    match op {
        Op::Write { data, .. } => data.len(),
        Op::WriteGather { extents, .. } | Op::WriteSetAttr { extents, .. } => {
            extents.iter().map(|e| e.data.len()).sum()
        }
        // One level down: a write carries no `WriteAt` (`proto::bounded`).
        Op::WriteAt { write, .. } => data_bytes(write),
        _ => 0,
    }
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// [`Op::Batch`]: its members in order, in this operation's one transaction.
    pub(crate) fn run_batch(&mut self, op: Op) -> Res<Reply> {
        let Op::Batch(ops) = op else {
            return misrouted(&op);
        };
        if ops.is_empty() || ops.len() > MAX_BATCH || !ops.iter().all(may_batch) {
            return Err(Errno::EINVAL.into());
        }
        if ops.iter().map(data_bytes).sum::<usize>() > MAX_IO as usize {
            return Err(Errno::EINVAL.into());
        }
        let mut replies = Vec::with_capacity(ops.len());
        for op in ops {
            replies.push(self.run(op)?);
        }
        Ok(Reply::Batch(replies))
    }
}
