//! Extended attributes: the `user.` namespace, which any user may use within the file's
//! permission bits (the namespace NFSv4.2 offers), and `trusted.`, which only root sees. Other
//! namespaces get `EOPNOTSUPP`: `security.` (file capabilities, SELinux labels) and `system.`
//! (POSIX ACLs) carry meaning the replicas do not enforce.
//!
//! The checks are Linux's (`xattr_permission` in fs/xattr.c), made here so that every replica
//! gives the same answer whatever the client's kernel checked:
//! - `user.`: only on regular files and directories (elsewhere `ENODATA` on read, `EPERM` on
//!   write); read permission to read, write permission to change; in a sticky directory only
//!   its owner or root may change them.
//! - `trusted.`: root only (`ENODATA` on read, `EPERM` on write); `listxattr` shows them only
//!   to root.
//!
//! Limits, as Linux's: a name is at most 255 bytes (`ERANGE`), a value at most 64 KiB
//! (`E2BIG`), and the list of one file's names at most 64 KiB (`ENOSPC` beyond). An
//! attribute's name and value count towards the file's stored bytes and the file system's
//! capacity. Setting or removing one changes the file's ctime.

use crate::exec::Exec;
use crate::fail::Res;
use crate::inode::Inode;
use crate::key;
use crate::perm;
use crate::proto::attr::{FileType, S_ISVTX};
use crate::proto::cred::Credentials;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::{XattrSet, R_OK, W_OK};
use crate::proto::reply::Reply;
use crate::store::Store;

/// Longest name, namespace prefix included (`XATTR_NAME_MAX`).
pub const MAX_NAME: usize = 255;
/// Largest value (`XATTR_SIZE_MAX`).
pub const MAX_VALUE: usize = 64 * 1024;
/// Largest `listxattr` result of one file (`XATTR_LIST_MAX`).
pub const MAX_LIST: usize = 64 * 1024;
/// Most bytes (names and values) of one file's attributes: 1 MiB, `ENOSPC` beyond, as
/// ext4 answers when its attribute space is full. Without it one file could hold about a
/// thousand 64 KiB values per 64 KiB of names, and every `setxattr` and `listxattr` on
/// it would read them all at every replica (ARCHITECTURE.md "Bounded work").
pub const MAX_TOTAL: u64 = 1 << 20;

/// A stored attribute: its name, its store key and its value.
type Stored = (Vec<u8>, Vec<u8>, Vec<u8>);

/// The namespaces the service stores.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Namespace {
    /// `user.`
    User,
    /// `trusted.`
    Trusted,
}

/// The namespace of `name`, or why it cannot be an attribute name here.
pub fn namespace(name: &[u8]) -> Result<Namespace, Errno> {
    if name.len() > MAX_NAME {
        return Err(Errno::ERANGE);
    }
    if name.contains(&0) {
        return Err(Errno::EINVAL);
    }
    let (ns, rest) = if let Some(rest) = name.strip_prefix(b"user.") {
        (Namespace::User, rest)
    } else if let Some(rest) = name.strip_prefix(b"trusted.") {
        (Namespace::Trusted, rest)
    } else {
        return Err(Errno::EOPNOTSUPP);
    };
    if rest.is_empty() {
        return Err(Errno::EINVAL);
    }
    Ok(ns)
}

/// Whether `cred` may read (`write` false) or change attributes of namespace `ns` on `i`.
fn check(cred: &Credentials, i: &Inode, ns: Namespace, write: bool) -> Result<(), Errno> {
    let refused = if write { Errno::EPERM } else { Errno::ENODATA };
    match ns {
        Namespace::Trusted if cred.uid != 0 => Err(refused),
        Namespace::Trusted => Ok(()),
        Namespace::User => {
            if !matches!(i.kind, FileType::Regular | FileType::Directory) {
                return Err(refused);
            }
            if write && i.is_dir() && i.mode & S_ISVTX != 0 && !perm::owner_or_root(cred, i) {
                return Err(Errno::EPERM);
            }
            perm::check(cred, i, if write { W_OK } else { R_OK })
        }
    }
}

/// Stored bytes of one attribute.
fn cost(name: &[u8], value: &[u8]) -> u64 {
    (name.len() + value.len()) as u64
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    pub(crate) fn getxattr(&mut self, fh: FileHandle, name: &[u8]) -> Res<Reply> {
        let i = self.resolve(fh)?;
        let ns = namespace(name)?;
        check(self.cred, &i, ns, false)?;
        match self.txn.get(&key::xattr(fh.ino, name))? {
            Some(v) => Ok(Reply::Xattr(v)),
            None => Err(Errno::ENODATA.into()),
        }
    }

    pub(crate) fn listxattr(&mut self, fh: FileHandle) -> Res<Reply> {
        self.resolve(fh)?;
        let mut list = Vec::new();
        for (name, _, _) in self.names(fh.ino)? {
            let visible = namespace(&name) == Ok(Namespace::User) || self.cred.uid == 0;
            if visible {
                list.extend_from_slice(&name);
                list.push(0);
            }
        }
        Ok(Reply::Xattr(list))
    }

    pub(crate) fn setxattr(
        &mut self,
        fh: FileHandle,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
    ) -> Res<Reply> {
        let mut i = self.resolve(fh)?;
        let ns = namespace(name)?;
        if value.len() > MAX_VALUE {
            return Err(Errno::E2BIG.into());
        }
        check(self.cred, &i, ns, true)?;
        let k = key::xattr(fh.ino, name);
        let old = self.txn.get(&k)?;
        match (&old, how) {
            (Some(_), XattrSet::Create) => return Err(Errno::EEXIST.into()),
            (None, XattrSet::Replace) => return Err(Errno::ENODATA.into()),
            _ => {}
        }
        let freed = old.as_deref().map_or(0, |v| cost(name, v));
        let all = self.names(fh.ino)?;
        if old.is_none() {
            let listed: usize = all.iter().map(|(n, _, _)| n.len() + 1).sum();
            if listed + name.len() + 1 > MAX_LIST {
                return Err(Errno::ENOSPC.into());
            }
        }
        let total: u64 = all.iter().map(|(n, _, v)| cost(n, v)).sum();
        if total - freed + cost(name, value) > MAX_TOTAL {
            return Err(Errno::ENOSPC.into());
        }
        let delta = cost(name, value) as i64 - freed as i64;
        self.charge(delta)?;
        i.used = i.used.saturating_add_signed(delta);
        i.ctime = self.now;
        self.txn.put(k, value.to_vec());
        self.save(fh.ino, &i);
        Ok(Reply::Done)
    }

    pub(crate) fn removexattr(&mut self, fh: FileHandle, name: &[u8]) -> Res<Reply> {
        let mut i = self.resolve(fh)?;
        let ns = namespace(name)?;
        check(self.cred, &i, ns, true)?;
        let k = key::xattr(fh.ino, name);
        let Some(old) = self.txn.get(&k)? else {
            return Err(Errno::ENODATA.into());
        };
        let freed = cost(name, &old);
        self.charge(-(freed as i64))?;
        i.used = i.used.saturating_sub(freed);
        i.ctime = self.now;
        self.txn.delete(k);
        self.save(fh.ino, &i);
        Ok(Reply::Done)
    }

    /// `(name, key)` of every attribute of `ino`, in name order.
    /// Every attribute of `ino`: name, key and value. Bounded by [`MAX_TOTAL`] (and the
    /// list by [`MAX_LIST`]).
    fn names(&self, ino: u64) -> Res<Vec<Stored>> {
        let start = key::xattr(ino, &[]);
        let prefix = start.len();
        let all = self.txn.range(&start, &key::xattr_end(ino), usize::MAX)?;
        Ok(all
            .into_iter()
            .map(|(k, v)| (k[prefix..].to_vec(), k, v))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_and_name_limits() {
        assert_eq!(namespace(b"user.a"), Ok(Namespace::User));
        assert_eq!(namespace(b"trusted.a"), Ok(Namespace::Trusted));
        for other in [
            &b"security.capability"[..],
            b"system.posix_acl_access",
            b"foo.x",
            b"x",
        ] {
            assert_eq!(namespace(other), Err(Errno::EOPNOTSUPP));
        }
        assert_eq!(namespace(b"user."), Err(Errno::EINVAL));
        assert_eq!(namespace(b"user.a\0b"), Err(Errno::EINVAL));
        let long = [b"user.".as_slice(), &[b'a'; MAX_NAME - 5]].concat();
        assert_eq!(namespace(&long), Ok(Namespace::User));
        let longer = [long.as_slice(), b"a"].concat();
        assert_eq!(namespace(&longer), Err(Errno::ERANGE));
    }
}
