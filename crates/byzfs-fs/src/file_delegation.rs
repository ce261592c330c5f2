//! File delegations (NFSv4's write delegations): one client session keeps a regular file's
//! contents and attributes itself, so that its mount answers `open`, `close` and `stat` of
//! the file at once and writes the file back later, in batches, with other files' writes.
//!
//! * **Grant.** [`Op::DelegateFile`], which renews the caller's lease, is granted to a caller
//!   who may write the file, unless another session holds it: then that session is asked to
//!   give it back (the file joins its recall list, as for lock delegations:
//!   [`crate::delegation`]) and the caller gets [`Reply::Recall`].
//! * **What it covers:** every operation naming the file by its handle that reads or changes
//!   its contents or attributes ([`Op::files_named`]). Another session's such operation gets
//!   [`Reply::Recall`] and changes nothing; ordered, it also puts the file on the holder's
//!   recall list (a read-only one cannot: its mount sends it again ordered). A batch naming a
//!   delegated file anywhere is recalled as a whole, before any member runs. So is
//!   another session's removal of one of its names, or rename over one ([`Op::Remove`],
//!   [`Op::Rename`]'s target): that may free the file, and the holder's writes land first
//!   (or, made after, fail at the holder's `close`). Other uses of its names are not
//!   covered: another session may link it, rename it or look it up (a lookup answers the
//!   attributes the replicas have: the holder's writes of the last second may be missing
//!   there, as from any attribute cache; an `open` asks by handle and so waits for them).
//! * **Validity.** As lock and directory delegations: only while the holder's lease is
//!   current and was granted under the lease's present epoch, so a session that dies
//!   holding one stops blocking the others when its lease lapses; what it had not written
//!   back is lost, as a local file system's unsynced data at a power cut.
//! * **Return.** [`Op::ReturnFile`], after the holder wrote back what it held; the file
//!   leaves its recall list.
//!
//! Records: `21 ‖ ino` → the holder and its lease epoch, in the inode's partition; a freed
//! inode's record goes with it.

use crate::dir;
use crate::exec::Exec;
use crate::fail::Res;
use crate::key;
use crate::perm;
use crate::proto::attr::FileType;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::{Op, W_OK};
use crate::proto::reply::Reply;
use crate::store::Store;

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// [`Reply::Recall`] if `op` names a file another session holds, each such file put on
    /// its holder's recall list; `None` to run `op`.
    pub(crate) fn recall_named_files(&mut self, op: &Op) -> Res<Option<Reply>> {
        let mut recalled = false;
        let mut files: Vec<u64> = op.files_named().iter().map(|f| f.ino).collect();
        self.names_freeing(op, &mut files)?;
        for ino in files {
            recalled |= self.recall_record(key::file_delegation(ino), ino)?;
        }
        Ok(recalled.then_some(Reply::Recall))
    }

    /// Adds to `files` what `op` removes a name of (a removal, a rename over an existing
    /// name), which may free it. A batch's members one level down (batches do not nest:
    /// `proto::bounded`).
    fn names_freeing(&self, op: &Op, files: &mut Vec<u64>) -> Res<()> {
        let (dir, name) = match op {
            Op::Remove { dir, name } => (dir, name),
            Op::Rename {
                to_dir, to_name, ..
            } => (to_dir, to_name),
            Op::Signed { op, .. } => return self.names_freeing(op, files),
            Op::Batch(ops) => {
                for op in ops {
                    if !matches!(op, Op::Batch(_)) {
                        self.names_freeing(op, files)?;
                    }
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        if let Some(e) = dir::lookup(self.txn, dir.ino, name)? {
            files.push(e.target.ino);
        }
        Ok(())
    }

    /// [`Op::DelegateFile`].
    pub(crate) fn delegate_file(&mut self, file: FileHandle) -> Res<Reply> {
        let i = self.resolve(file)?;
        if i.is_dir() {
            return Err(Errno::EISDIR.into());
        }
        if i.kind != FileType::Regular {
            return Err(Errno::EINVAL.into());
        }
        // The holder answers writes early: only one who may write the file may hold it
        // (and, for an encrypted file, a writer of its group).
        perm::check_io(self.cred, &i, W_OK)?;
        if let Some(group) = crate::crypt_file::group_of(self.txn, file.ino)? {
            self.proofs_needed.push(group);
        }
        self.grant_or_recall(key::file_delegation(file.ino), file.ino, i.attr(file.ino))
    }

    /// [`Op::ReturnFile`].
    pub(crate) fn return_file(&mut self, file: FileHandle) -> Res<Reply> {
        self.resolve(file)?;
        self.give_back_record(key::file_delegation(file.ino), file.ino)
    }

    /// Drops `ino`'s file delegation record (the inode is being freed).
    pub(crate) fn drop_file_delegation(&mut self, ino: u64) {
        self.txn.delete(key::file_delegation(ino));
    }
}
