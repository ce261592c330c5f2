//! What may be a member of an [`Op::Batch`], and how many: the client builds batches by
//! these rules and the replicas refuse others (how a batch runs: [`crate::batch`]).

use super::op::Op;

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
        | Op::DelegateFile { .. }
        | Op::ReturnFile { .. }
        // A directory joins a group only in the request that makes it (`crypt_file`).
        | Op::SetGroup { .. } => true,
        // A size change may truncate: its work is bounded alone, not 64 times over.
        Op::SetAttr { set, .. } => set.size.is_none(),
        Op::WriteSetAttr { sets, .. } => sets.iter().all(|s| s.size.is_none()),
        // As the write it carries.
        Op::WriteAt { write, .. } => may_batch(write),
        _ => false,
    }
}
