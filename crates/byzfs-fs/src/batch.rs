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

use crate::errno::{Errno, Res};
use crate::exec::Exec;
use crate::op::{Op, Reply, MAX_IO};
use crate::store::Store;

/// Most operations in one batch.
pub const MAX_BATCH: usize = 64;

/// Whether `op` may be a member of a batch.
pub fn may_batch(op: &Op) -> bool {
    match op {
        Op::Create { .. }
        | Op::Mkdir { .. }
        | Op::Symlink { .. }
        | Op::Mknod { .. }
        | Op::MakeAt { .. }
        | Op::Link { .. }
        | Op::Remove { .. }
        | Op::Rmdir { .. }
        | Op::Rename { .. }
        | Op::RenameNoReplace { .. }
        | Op::Exchange { .. }
        | Op::Write { .. }
        | Op::WriteGather { .. }
        | Op::DelegateDir { .. }
        | Op::ReturnDir { .. }
        // A directory joins a group only in the request that makes it (`crypt_file`).
        | Op::SetGroup { .. } => true,
        // A size change may truncate: its work is bounded alone, not 64 times over.
        Op::SetAttr { set, .. } => set.size.is_none(),
        Op::WriteSetAttr { sets, .. } => sets.iter().all(|s| s.size.is_none()),
        _ => false,
    }
}

/// Bytes of file data `op` writes.
fn data_bytes(op: &Op) -> usize {
    match op {
        Op::Write { data, .. } => data.len(),
        Op::WriteGather { extents, .. } | Op::WriteSetAttr { extents, .. } => {
            extents.iter().map(|e| e.data.len()).sum()
        }
        _ => 0,
    }
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// [`Op::Batch`].
    pub(crate) fn batch(&mut self, ops: Vec<Op>) -> Res<Reply> {
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
