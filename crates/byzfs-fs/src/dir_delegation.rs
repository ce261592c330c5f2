//! Directory delegations (docs/plans/27): one client session keeps a directory's names
//! itself, so that its mount answers creations, removals and renames in it at once and sends
//! them later, many in one [`Op::Batch`].
//!
//! * **Grant.** [`Op::DelegateDir`], which renews the caller's lease, is granted to a
//!   caller who may change the directory's names (write and search permission), unless
//!   another session holds the delegation: then that session is asked to
//!   give it back (the directory joins its recall list, as for lock delegations:
//!   [`crate::delegation`]) and the caller gets [`Reply::Recall`]. A delegation may be asked
//!   for in the same batch that creates the directory.
//! * **What it covers:** every operation that reads or changes names in the directory, or
//!   changes its attributes ([`crate::Op::dirs_named`]). Another session's such operation
//!   gets [`Reply::Recall`] and changes nothing; ordered, it also puts the directory on the
//!   holder's recall list (a read-only one cannot: its mount sends it again ordered). A batch
//!   naming a delegated directory anywhere is recalled as a whole, before any member runs.
//! * **Validity.** As lock delegations: only while the holder's lease is current and was
//!   granted under the lease's present epoch, so a session that dies holding one stops
//!   blocking the others when its lease lapses (30 s of agreed time).
//! * **Return.** [`Op::ReturnDir`], after the holder sent what it
//!   answered early; the directory leaves its recall list.
//!
//! Records: `17 ‖ dir` → the holder and its lease epoch (as for lock delegations), in the
//! directory's partition. A removed directory's record goes with its inode.

use crate::exec::Exec;
use crate::fail::Res;
use crate::key;
use crate::perm;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::{Op, W_OK, X_OK};
use crate::proto::reply::Reply;
use crate::store::Store;

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// [`Reply::Recall`] if `op` names a directory another session holds, each such
    /// directory put on its holder's recall list; `None` to run `op`.
    pub(crate) fn recall_named_dirs(&mut self, op: &Op) -> Res<Option<Reply>> {
        let mut recalled = false;
        for dir in op.dirs_named() {
            recalled |= self.recall_record(key::dir_delegation(dir.ino), dir.ino)?;
        }
        Ok(recalled.then_some(Reply::Recall))
    }

    /// [`Op::DelegateDir`].
    pub(crate) fn delegate_dir(&mut self, dir: FileHandle) -> Res<Reply> {
        let d = self.resolve(dir)?;
        if !d.is_dir() {
            return Err(Errno::ENOTDIR.into());
        }
        // The holder answers creations and removals there early, and every other session
        // waits for it meanwhile: only one who may change the directory's names may hold
        // it (a client with no right there could otherwise stop everyone's lookups in it).
        perm::check(self.cred, &d, W_OK | X_OK)?;
        // The holder answers changes early: only a writer of an encrypted directory's group
        // may hold it, or a reader's mount would answer changes the replicas then refuse.
        if let Some(group) = crate::crypt_file::group_of(self.txn, dir.ino)? {
            self.proofs_needed.push(group);
        }
        self.grant_or_recall(key::dir_delegation(dir.ino), dir.ino, d.attr(dir.ino))
    }

    /// [`Op::ReturnDir`].
    pub(crate) fn return_dir(&mut self, dir: FileHandle) -> Res<Reply> {
        self.resolve(dir)?;
        self.give_back_record(key::dir_delegation(dir.ino), dir.ino)
    }

    /// Drops `ino`'s directory delegation record (the inode is being freed).
    pub(crate) fn drop_dir_delegation(&mut self, ino: u64) {
        self.txn.delete(key::dir_delegation(ino));
    }
}
