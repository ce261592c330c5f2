//! Open files that are removed through this mount: hidden under `.byzfs-silly-…` names in
//! the orphan directory (or their own directory) until their last close.

use std::sync::MutexGuard;
use std::time::Instant;

use super::{
    invoke, locks, Attr, ByzFuse, Credentials, Errno, FileHandle, FileType, FsResult, Inner, Op,
    Reply, ORPHANS,
};

/// NFS-style silly rename: if `dir/name` is a file with one link that this mount has open,
/// renames it to a hidden name instead of removing it, so the open file keeps working; it is
/// removed at its last release. `None` if the name is not such a file (remove it normally).
///
/// A file whose every handle here was just flushed is being closed: its RELEASE is waited
/// for first, a bounded time, and it is then removed normally (`open_files.rs`).
impl ByzFuse {
    pub(crate) fn hide_if_open<'a>(
        &self,
        mut inner: MutexGuard<'a, Inner>,
        cred: &Credentials,
        dir: FileHandle,
        name: &[u8],
    ) -> (MutexGuard<'a, Inner>, Option<FsResult>) {
        let Some(a) = open_target(&mut inner, cred, dir, name) else {
            return (inner, None);
        };
        if self.waits_for_release {
            let mut now = Instant::now();
            while let Some(end) = inner.files.open.closing_until(a.fh.ino, now) {
                inner = match self.released.wait_timeout(inner, end - now) {
                    Ok((g, _)) => g,
                    // A panicked thread's state: what `lock()` callers refuse, the remove
                    // below reaches only the replicas.
                    Err(e) => e.into_inner().0,
                };
                now = Instant::now();
            }
            if !inner.files.open.contains(a.fh.ino) {
                tracing::debug!(
                    ino = a.fh.ino,
                    "removed after the release of its last close"
                );
                return (inner, None);
            }
        }
        let r = hide(&mut inner, cred, (dir, name), &a);
        (inner, Some(r))
    }
}

/// The file `dir/name`, if it has one link and this mount has it open.
fn open_target(
    inner: &mut Inner,
    cred: &Credentials,
    dir: FileHandle,
    name: &[u8],
) -> Option<Attr> {
    if inner.files.open.is_empty() {
        return None;
    }
    let found = invoke(
        &mut inner.link,
        cred,
        Op::Lookup {
            dir,
            name: name.to_vec(),
        },
    );
    let Ok(Reply::Entry(a)) = found else {
        return None;
    };
    if a.kind == FileType::Directory || a.nlink != 1 || !inner.files.open.contains(a.fh.ino) {
        return None;
    }
    Some(a)
}

/// Renames the open file `a` at `dir/name` to a hidden name, kept until its last release.
fn hide(
    inner: &mut Inner,
    cred: &Credentials,
    (dir, name): (FileHandle, &[u8]),
    a: &Attr,
) -> FsResult {
    let what = format!("{:x}-{:x}", a.fh.ino, a.fh.generation);
    let hidden = byzfs_fs::orphan::hidden_name(inner.link.cluster.wire().id(), &what);
    if let Some(r) = to_orphans(inner, cred, (dir, name), &hidden) {
        inner.files.silly.insert(a.fh.ino, r);
        return Ok(Reply::Done);
    }
    // No orphan directory for this caller: the file's own directory keeps it, under the
    // lease too (`Op::SweepDir` sweeps such names in any directory).
    locks::hold_for_orphans(inner, cred);
    let op = Op::Rename {
        from_dir: dir,
        from_name: name.to_vec(),
        to_dir: dir,
        to_name: hidden.clone(),
    };
    let r = invoke(&mut inner.link, cred, op);
    if r.is_ok() {
        inner.files.silly.insert(a.fh.ino, (dir, hidden));
    }
    r
}

/// The directory at the root that keeps the files this and other mounts hide (removed while
/// open, `O_TMPFILE`), so that the directories they came from can be listed and removed as
/// on a local file system: created on first use by the mount process, mode 1777 as `/tmp`.
/// `None` if it cannot be had (a file of that name, or no right to create it).
pub(crate) fn orphan_dir(inner: &mut Inner) -> Option<FileHandle> {
    if let Some(known) = inner.files.orphans {
        return known;
    }
    let own = own_credentials();
    let lookup = |inner: &mut Inner| match invoke(
        &mut inner.link,
        &own,
        Op::Lookup {
            dir: FileHandle::ROOT,
            name: ORPHANS.to_vec(),
        },
    ) {
        Ok(Reply::Entry(a)) if a.kind == FileType::Directory => Ok(Some(a.fh)),
        Ok(_) => Ok(None),
        Err(e) => Err(e),
    };
    let fh = match lookup(inner) {
        Ok(found) => found,
        Err(Errno::ENOENT) => {
            let made = invoke(
                &mut inner.link,
                &own,
                Op::Mkdir {
                    dir: FileHandle::ROOT,
                    name: ORPHANS.to_vec(),
                    mode: 0o1777,
                },
            );
            match made {
                Ok(Reply::Made { entry, .. }) => Some(entry.fh),
                // Another mount made it meanwhile.
                Err(Errno::EEXIST) => lookup(inner).ok().flatten(),
                _ => None,
            }
        }
        Err(_) => None,
    };
    // A mount that may not create it does not try again (its files hide where they are).
    inner.files.orphans = Some(fh);
    fh
}

/// Moves `from` (a directory and a name) to `hidden` in the orphan directory; where the
/// file now is, or `None` if it stayed (no orphan directory, or the move failed).
pub(crate) fn to_orphans(
    inner: &mut Inner,
    cred: &Credentials,
    (dir, name): (FileHandle, &[u8]),
    hidden: &[u8],
) -> Option<(FileHandle, Vec<u8>)> {
    let orphans = orphan_dir(inner)?;
    // Held from before the file arrives, so no other mount's sweep can take it.
    locks::hold_for_orphans(inner, cred);
    let op = Op::Rename {
        from_dir: dir,
        from_name: name.to_vec(),
        to_dir: orphans,
        to_name: hidden.to_vec(),
    };
    match invoke(&mut inner.link, cred, op) {
        Ok(_) => Some((orphans, hidden.to_vec())),
        Err(e) => {
            // Perhaps removed by someone: look it up again next time.
            tracing::debug!(%e, "cannot move a hidden file to the orphan directory");
            inner.files.orphans = None;
            None
        }
    }
}

/// The mount process's own credentials (for clean-up at unmount).
pub(crate) fn own_credentials() -> Credentials {
    use std::os::unix::fs::MetadataExt as _;
    let (uid, gid) = std::fs::metadata("/proc/self")
        .map(|m| (m.uid(), m.gid()))
        .unwrap_or((0, 0));
    Credentials {
        uid,
        gid,
        groups: Vec::new(),
    }
}
