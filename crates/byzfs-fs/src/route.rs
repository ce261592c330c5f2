//! [`Exec::run`]: each operation to the files that hold its family ([`Op::family`]). A batch,
//! a creation at a reserved handle and a signed request come back here for the operations
//! they carry.

use crate::exec::Exec;
use crate::fail::Res;
use crate::proto::family::Family;
use crate::proto::op::Op;
use crate::proto::reply::Reply;
use crate::store::Store;

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// Runs `op`: only a recall if it names a directory or a file another session holds
    /// ([`crate::dir_delegation`], [`crate::file_delegation`]), else what its family does.
    pub fn run(&mut self, op: Op) -> Res<Reply> {
        if let Some(recall) = self.recall_named_dirs(&op)? {
            return Ok(recall);
        }
        if let Some(recall) = self.recall_named_files(&op)? {
            return Ok(recall);
        }
        match op.family() {
            // attrs.rs, xattr.rs
            Family::Attrs => self.run_attrs(op),
            // contents.rs, ranges.rs
            Family::Data => self.run_data(op),
            // names.rs, unlink.rs, rename.rs, reserve.rs, dir_delegation.rs, orphan.rs
            Family::Dirs => self.run_dirs(op),
            // lock.rs, delegation.rs, deadlock.rs, file_delegation.rs
            Family::Locks => self.run_locks(op),
            // crypt_write.rs, crypt_group.rs, crypt_file.rs
            Family::Crypt => self.run_crypt(op),
            // capacity.rs, reclaim.rs
            Family::Space => self.run_space(op),
            // batch.rs
            Family::Batch => self.run_batch(op),
        }
    }
}
