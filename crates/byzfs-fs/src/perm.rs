//! Access checks from the credentials carried in the request and the inode's owner, group
//! and mode (POSIX rules, as Linux applies them).
//!
//! * Root (uid 0) passes every check, except that execute on a non-directory needs at least
//!   one execute bit.
//! * Otherwise the owner class, else the group class (primary or supplementary group), else
//!   the other class decides.
//! * **Owner override for data I/O** (as Linux's NFS server does): `read` and `write` by the
//!   file's owner are allowed whatever the mode, because a program may create a file with
//!   mode 0444 and then write to the descriptor it opened (git, tar). Permission to *open* is
//!   the FUSE layer's job (the kernel's `default_permissions` check).

use crate::inode::Inode;
use crate::proto::attr::{FileType, S_ISVTX};
use crate::proto::cred::Credentials;
use crate::proto::errno::Errno;
use crate::proto::op::X_OK;

/// Whether `cred` belongs to group `gid`.
pub fn in_group(cred: &Credentials, gid: u32) -> bool {
    cred.gid == gid || cred.groups.contains(&gid)
}

/// Whether `cred` is granted every bit of `mask` (`R_OK|W_OK|X_OK`) on a file with this
/// kind, owner, group and mode.
pub fn allowed(
    cred: &Credentials,
    kind: FileType,
    uid: u32,
    gid: u32,
    mode: u32,
    mask: u32,
) -> bool {
    let mask = mask & 7;
    if cred.uid == 0 {
        return mask & X_OK == 0 || kind == FileType::Directory || mode & 0o111 != 0;
    }
    let bits = if cred.uid == uid {
        mode >> 6
    } else if in_group(cred, gid) {
        mode >> 3
    } else {
        mode
    } & 7;
    bits & mask == mask
}

/// `Ok` if `cred` has `mask` on `inode`, else `EACCES`.
pub(crate) fn check(cred: &Credentials, inode: &Inode, mask: u32) -> Result<(), Errno> {
    if allowed(cred, inode.kind, inode.uid, inode.gid, inode.mode, mask) {
        Ok(())
    } else {
        Err(Errno::EACCES)
    }
}

/// Data I/O check: the owner (and root) always pass, others need `mask`.
pub(crate) fn check_io(cred: &Credentials, inode: &Inode, mask: u32) -> Result<(), Errno> {
    if cred.uid == 0 || cred.uid == inode.uid {
        Ok(())
    } else {
        check(cred, inode, mask)
    }
}

/// Whether `cred` owns `inode` or is root (chmod, explicit utimes).
pub(crate) fn owner_or_root(cred: &Credentials, inode: &Inode) -> bool {
    cred.uid == 0 || cred.uid == inode.uid
}

/// The sticky-directory rule: in a directory with `S_ISVTX`, only root, the directory's
/// owner or the victim's owner may remove or rename the victim (`EPERM` otherwise).
pub(crate) fn check_sticky(cred: &Credentials, dir: &Inode, victim: &Inode) -> Result<(), Errno> {
    if dir.mode & S_ISVTX == 0 || cred.uid == 0 || cred.uid == dir.uid || cred.uid == victim.uid {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::op::{R_OK, W_OK};

    #[test]
    fn classes() {
        let f = FileType::Regular;
        let owner = Credentials::user(10, 20);
        let member = Credentials {
            uid: 11,
            gid: 99,
            groups: vec![20],
        };
        let other = Credentials::user(12, 30);
        let mode = 0o640;
        assert!(allowed(&owner, f, 10, 20, mode, R_OK | W_OK));
        assert!(!allowed(&owner, f, 10, 20, mode, X_OK));
        assert!(allowed(&member, f, 10, 20, mode, R_OK));
        assert!(!allowed(&member, f, 10, 20, mode, W_OK));
        assert!(!allowed(&other, f, 10, 20, mode, R_OK));
        // The owner class decides for the owner even if "other" would allow more.
        assert!(!allowed(&owner, f, 10, 20, 0o007, R_OK));
        let root = Credentials::root();
        assert!(allowed(&root, f, 10, 20, 0, R_OK | W_OK));
        assert!(!allowed(&root, f, 10, 20, 0o644, X_OK));
        assert!(allowed(&root, f, 10, 20, 0o010, X_OK));
        assert!(allowed(&root, FileType::Directory, 10, 20, 0, X_OK));
    }
}
