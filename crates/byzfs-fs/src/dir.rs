//! Directories: name rules, entries with stable cookies, and the parent chain.
//!
//! Each entry is stored twice in the directory's partition: by cookie (for `readdir`, in
//! cookie order) and by name (for `lookup`). A directory hands out cookies from a counter in
//! its inode, so an entry's cookie never changes and is never reused in that directory:
//! `readdir` resumes "after cookie c" correctly whatever was added or removed meanwhile
//! (entries added during a listing appear at its end; removed ones simply vanish). `.` and
//! `..` have cookies 1 and 2. The order is deterministic: creation order.

use crate::encoding::{decode, encode};
use crate::fail::Res;
use crate::inode::{must_load, Inode};
use crate::key;
use crate::proto::attr::FileType;
use crate::proto::errno::Errno;
use crate::store::{Store, Txn};
use serde::{Deserialize, Serialize};

/// Longest name, in bytes.
pub const MAX_NAME: usize = 255;
/// Deepest directory nesting below the root (the root is depth 0). `mkdir` or `rename` of a
/// directory below it fails with `ENAMETOOLONG` (a path to it would exceed `PATH_MAX` anyway:
/// 2048 levels of at least 2 bytes each).
pub const MAX_DEPTH: u32 = 2048;
/// Longest symlink target, in bytes (`PATH_MAX - 1`).
pub const MAX_SYMLINK: usize = 4095;

/// Cookie of `.`.
pub const DOT_COOKIE: u64 = 1;
/// Cookie of `..`.
pub const DOTDOT_COOKIE: u64 = 2;
pub use crate::inode::FIRST_COOKIE;
// `inode` sets it for every new inode; the cookies of `.` and `..` come first.
const _: () = assert!(FIRST_COOKIE == DOTDOT_COOKIE + 1);

/// Checks a name for a new or existing entry: `ENOENT` if empty, `ENAMETOOLONG` if over
/// [`MAX_NAME`] bytes, `EINVAL` if it contains `/` or NUL.
pub fn check_name(name: &[u8]) -> Result<(), Errno> {
    if name.is_empty() {
        Err(Errno::ENOENT)
    } else if name.len() > MAX_NAME {
        Err(Errno::ENAMETOOLONG)
    } else if name.iter().any(|&b| b == b'/' || b == 0) {
        Err(Errno::EINVAL)
    } else {
        Ok(())
    }
}

/// Whether `name` is `.` or `..`.
pub fn is_dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// What an entry names.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub(crate) struct Target {
    pub ino: u64,
    pub generation: u64,
    pub kind: FileType,
}

/// The by-cookie record.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub(crate) struct EntryRec {
    pub name: Vec<u8>,
    pub target: Target,
}

/// The by-name record.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub(crate) struct NameRec {
    pub cookie: u64,
    pub target: Target,
}

/// The entry `name` of directory `dir`.
pub(crate) fn lookup<S: Store + ?Sized>(
    txn: &Txn<'_, S>,
    dir: u64,
    name: &[u8],
) -> Res<Option<NameRec>> {
    match txn.get(&key::name(dir, name))? {
        Some(b) => Ok(Some(decode(&b)?)),
        None => Ok(None),
    }
}

/// Adds `name → target` to directory `dir` (inode `d`, saved by the caller) with a new
/// cookie, which it returns.
pub(crate) fn add<S: Store + ?Sized>(
    txn: &mut Txn<'_, S>,
    dir: u64,
    d: &mut Inode,
    name: &[u8],
    target: Target,
) -> u64 {
    let cookie = d.next_cookie;
    d.next_cookie += 1;
    d.entries += 1;
    txn.put(
        key::entry(dir, cookie),
        encode(&EntryRec {
            name: name.to_vec(),
            target: target.clone(),
        }),
    );
    txn.put(key::name(dir, name), encode(&NameRec { cookie, target }));
    cookie
}

/// Removes the entry `name` (with cookie `cookie`) from directory `dir` (inode `d`).
pub(crate) fn remove<S: Store + ?Sized>(
    txn: &mut Txn<'_, S>,
    dir: u64,
    d: &mut Inode,
    name: &[u8],
    cookie: u64,
) {
    d.entries = d.entries.saturating_sub(1);
    txn.delete(key::entry(dir, cookie));
    txn.delete(key::name(dir, name));
}

/// Up to `limit` entries of `dir` with cookies above `after`, in cookie order, and whether
/// they are the last ones.
pub(crate) fn list<S: Store + ?Sized>(
    txn: &Txn<'_, S>,
    dir: u64,
    after: u64,
    limit: usize,
) -> Res<(Vec<(u64, EntryRec)>, bool)> {
    let start = key::entry(dir, after.saturating_add(1).max(FIRST_COOKIE));
    let end = key::entry(dir, u64::MAX);
    let mut rows = txn.range(&start, &end, limit.saturating_add(1))?;
    let eof = rows.len() <= limit;
    rows.truncate(limit);
    let mut out = Vec::with_capacity(rows.len());
    for (k, v) in rows {
        // The cookie is the last 8 bytes of the key (see `key::entry`).
        let mut c = [0u8; 8];
        c.copy_from_slice(&k[k.len() - 8..]);
        out.push((u64::from_be_bytes(c), decode(&v)?));
    }
    Ok((out, eof))
}

/// Depth of directory `ino` (root = 0), walking parent pointers; stops counting at
/// `MAX_DEPTH + 1`, so the walk is bounded.
pub(crate) fn depth<S: Store + ?Sized>(txn: &Txn<'_, S>, mut ino: u64) -> Res<u32> {
    let mut d = 0;
    while ino != crate::proto::handle::ROOT_INO && d <= MAX_DEPTH {
        ino = must_load(txn, ino)?.parent;
        d += 1;
    }
    Ok(d)
}

/// Whether directory `anc` is `ino` or one of its ancestors. `ino`'s depth must be at most
/// [`MAX_DEPTH`] (the walk gives up after that many steps).
pub(crate) fn is_ancestor<S: Store + ?Sized>(
    txn: &Txn<'_, S>,
    anc: u64,
    mut ino: u64,
) -> Res<bool> {
    for _ in 0..=MAX_DEPTH {
        if ino == anc {
            return Ok(true);
        }
        if ino == crate::proto::handle::ROOT_INO {
            return Ok(false);
        }
        ino = must_load(txn, ino)?.parent;
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(check_name(b""), Err(Errno::ENOENT));
        assert_eq!(check_name(b"a/b"), Err(Errno::EINVAL));
        assert_eq!(check_name(b"a\0b"), Err(Errno::EINVAL));
        assert_eq!(check_name(&[b'x'; 255]), Ok(()));
        assert_eq!(check_name(&[b'x'; 256]), Err(Errno::ENAMETOOLONG));
        assert_eq!(check_name("é".as_bytes()), Ok(()));
        assert!(is_dot(b".") && is_dot(b"..") && !is_dot(b"..."));
    }
}
