//! Early answers in the directories this mount holds (`dirs.rs` has the books and the
//! rules): creations, removals, renames and hard links answered here and queued, the
//! directory asked for (and listed) when a second change comes soon after a first, and the
//! handles new entries get (`handles.rs`).

use crate::calls::{invoke, send_queue};
use crate::dirs::{
    plain_name, Held, CONTENDED_FOR, LIST_PAGES, MAX_HELD, MAX_QUEUE, WANTED_WITHIN,
};
use crate::handles::RESERVE;
use crate::lease::Answer;
use crate::link::{lease_answered, Link};
use crate::recalls::give_back;
use crate::sender::{self, run};
use crate::writeback::{Outgoing, Wait};
use byzfs_fs::proto::op::MAX_READDIR_ENTRIES;
use byzfs_fs::{Attr, Credentials, FileHandle, FileType, Op, Reply};
use std::collections::HashMap;
use std::time::Instant;

/// Linux's `S_ISGID`.
const S_ISGID: u32 = 0o2000;

/// What an early creation makes.
pub(crate) enum Make {
    File,
    Dir,
    Symlink(Vec<u8>),
}

/// Makes room in the queue for `n` operations of `cred`.
fn make_room(link: &mut Link, cred: &Credentials, n: usize) {
    let other_caller = link.dirs.cred.as_ref().is_some_and(|c| c != cred);
    if other_caller || link.dirs.queue.len() + n > MAX_QUEUE {
        // No room: the queue goes, and the caller does not wait for it.
        send_queue(link, Wait::InFlight);
    }
}

/// Whether this mount holds `dir`, listed: asks for it (and lists it) if it may.
fn ensure(link: &mut Link, cred: &Credentials, dir: FileHandle) -> bool {
    if !link.dirs.enabled {
        return false;
    }
    match link.dirs.held.get(&dir.ino) {
        Some(h) if h.fh != dir => return false,
        Some(h) if !h.stale => return true,
        Some(_) => return relist(link, cred, dir),
        None => {}
    }
    let now = Instant::now();
    let contended = link
        .dirs
        .contended
        .get(&dir.ino)
        .is_some_and(|t| now.saturating_duration_since(*t) < CONTENDED_FOR);
    if contended || link.dirs.too_big.contains(&dir.ino) || link.dirs.held.len() >= MAX_HELD {
        return false;
    }
    // The first operation goes to the cluster; a second one soon after asks.
    let wanted = &mut link.dirs.wanted;
    let recent = wanted
        .remove(&dir.ino)
        .is_some_and(|t| now.saturating_duration_since(t) < WANTED_WITHIN);
    if !recent {
        if wanted.len() >= MAX_HELD {
            wanted.clear();
        }
        wanted.insert(dir.ino, now);
        return false;
    }
    let sent = Instant::now();
    let reply = invoke(link, cred, Op::DelegateDir { dir });
    // It renewed the lease (`lease.rs`): under the mount's lock, it was the last request.
    let place = link.cluster.last_place();
    match reply {
        Ok(Reply::Delegated { lapsed, attr, .. }) => {
            if lease_answered(link, place, lapsed, sent) == Answer::Late {
                return false;
            }
            link.dirs.held.insert(
                dir.ino,
                Held {
                    fh: dir,
                    attr,
                    names: HashMap::new(),
                    parent: None,
                    stale: true,
                    used: Instant::now(),
                    place,
                },
            );
            if let Some(n) = &link.dirs.nudge {
                let _ = n.send(());
            }
            relist(link, cred, dir)
        }
        Ok(Reply::Recall) => {
            link.dirs.contended.insert(dir.ino, now);
            false
        }
        other => {
            tracing::debug!(?other, "directory delegation refused");
            false
        }
    }
}

/// Fetches held `dir`'s attributes and names; gives it back if it has too many.
fn relist(link: &mut Link, cred: &Credentials, dir: FileHandle) -> bool {
    let attr = match invoke(link, cred, Op::GetAttr { fh: dir }) {
        Ok(Reply::Attr(a)) => a,
        _ => return false,
    };
    let mut names = HashMap::new();
    let mut parent = None;
    let mut cookie = 0;
    for page in 0.. {
        if page == LIST_PAGES {
            link.dirs.too_big.insert(dir.ino);
            give_back(link, cred, dir.ino);
            return false;
        }
        let op = Op::ReadDir {
            dir,
            cookie,
            max_entries: MAX_READDIR_ENTRIES,
        };
        let Ok(Reply::ReadDir { entries, eof }) = invoke(link, cred, op) else {
            return false;
        };
        if let Some(e) = entries.last() {
            cookie = e.cookie;
        }
        if let Some(e) = entries.iter().find(|e| e.name == b"..") {
            parent = Some(e.fh);
        }
        names.extend(
            entries
                .into_iter()
                .filter(|e| e.name != b"." && e.name != b"..")
                .map(|e| (e.name, (e.fh, e.kind))),
        );
        if eof {
            break;
        }
    }
    match link.dirs.held.get_mut(&dir.ino) {
        Some(h) => {
            h.attr = attr;
            h.names = names;
            h.parent = parent;
            h.stale = false;
            true
        }
        None => false,
    }
}

/// Answers a creation of `name` in `dir` early if it may: queues it and returns the new
/// entry's attributes (as the replicas will make them, with this machine's time) and the
/// directory's.
pub(crate) fn make_early(
    link: &mut Link,
    cred: &Credentials,
    dir: FileHandle,
    name: &[u8],
    mode: u32,
    what: Make,
) -> Option<(Attr, Attr)> {
    if !link.dirs.enabled || !plain_name(name) {
        return None;
    }
    let n = if matches!(what, Make::Dir) { 2 } else { 1 };
    make_room(link, cred, n);
    if !ensure(link, cred, dir) || !link.dirs.surely_missing(dir, name) {
        return None;
    }
    let at = take_handle(link, cred)?;
    // Asking for handles sent the queue; a failure there forgot the directory.
    let h = link.dirs.held.get_mut(&dir.ino).filter(|h| !h.stale)?;
    let now = crate::convert::timestamp(std::time::SystemTime::now());
    // As `byzfs_fs` makes them (exec.rs `make`): the group and set-group-ID bit of a
    // set-group-ID directory.
    let inherit = h.attr.mode & S_ISGID != 0;
    let gid = if inherit { h.attr.gid } else { cred.gid };
    let mut attr = Attr {
        fh: at,
        kind: FileType::Regular,
        mode: mode & 0o7777,
        nlink: 1,
        uid: cred.uid,
        gid,
        size: 0,
        used: 0,
        atime: now,
        mtime: now,
        ctime: now,
        rdev: 0,
        crypt: Vec::new(),
    };
    let make = match what {
        Make::File => Op::Create {
            dir,
            name: name.to_vec(),
            mode,
            exclusive: true,
        },
        Make::Dir => {
            attr.kind = FileType::Directory;
            attr.nlink = 2;
            attr.size = 4096;
            if inherit {
                attr.mode |= S_ISGID;
            }
            h.attr.nlink += 1;
            Op::Mkdir {
                dir,
                name: name.to_vec(),
                mode,
            }
        }
        Make::Symlink(target) => {
            attr.kind = FileType::Symlink;
            attr.mode = 0o777;
            attr.size = target.len() as u64;
            attr.used = attr.size;
            Op::Symlink {
                dir,
                name: name.to_vec(),
                target,
            }
        }
    };
    h.attr.mtime = now;
    h.attr.ctime = now;
    h.used = Instant::now();
    h.names.insert(name.to_vec(), (at, attr.kind));
    link.dirs
        .mine
        .made(at.ino, dir.ino, attr.kind == FileType::Regular);
    let h = link.dirs.held.get_mut(&dir.ino)?;
    let dir_attr = h.attr.clone();
    // The replicas make it at this machine's time, the one the kernel was given (within
    // `byzfs_fs::reserve::MAKE_AT_SKEW_SECS` of theirs): its attributes do not change
    // when the batch runs, however late (write-back).
    let mut ops = vec![Op::MakeAt {
        time: Some(now),
        at,
        make: Box::new(make),
    }];
    if attr.kind == FileType::Directory {
        // Nobody else can see it before the batch runs: it is held from the start.
        ops.push(Op::DelegateDir { dir: at });
        link.dirs.held.insert(
            at.ino,
            Held {
                fh: at,
                attr: attr.clone(),
                names: HashMap::new(),
                parent: Some(dir),
                stale: false,
                used: Instant::now(),
                place: link.cluster.next_place(),
            },
        );
    }
    link.dirs.push(cred, ops);
    Some((attr, dir_attr))
}

/// Answers `unlink` (`is_dir` false) or `rmdir` of `name` in `dir` early if it may: an
/// entry made here under the present delegation, not open here (`open` says which are), a
/// directory empty and held. Returns the removed inode and the directory's attributes.
pub(crate) fn remove_early(
    link: &mut Link,
    cred: &Credentials,
    dir: FileHandle,
    name: &[u8],
    is_dir: bool,
    open: impl Fn(u64) -> bool,
) -> Option<(u64, Attr)> {
    if !link.dirs.enabled || !plain_name(name) {
        return None;
    }
    make_room(link, cred, 1);
    if !ensure(link, cred, dir) {
        return None;
    }
    let (fh, kind) = *link.dirs.held.get(&dir.ino)?.names.get(name)?;
    // Another mount may hold a handle of an older entry and must see it go at once.
    let mine = link.dirs.mine.dir_of(fh.ino) == Some(dir.ino);
    if (kind == FileType::Directory) != is_dir || open(fh.ino) || !mine {
        return None;
    }
    if is_dir {
        let empty = link
            .dirs
            .held
            .get(&fh.ino)
            .is_some_and(|c| c.fh == fh && !c.stale && c.names.is_empty());
        if !empty {
            return None;
        }
        link.dirs.held.remove(&fh.ino);
    }
    let h = link.dirs.held.get_mut(&dir.ino)?;
    let now = crate::convert::timestamp(std::time::SystemTime::now());
    h.names.remove(name);
    h.used = Instant::now();
    h.attr.mtime = now;
    h.attr.ctime = now;
    if is_dir {
        h.attr.nlink = h.attr.nlink.saturating_sub(1);
    }
    let dir_attr = h.attr.clone();
    link.dirs.mine.remove(fh.ino);
    link.dirs.touched.insert(fh.ino);
    drop_writes(link, fh.ino);
    let op = if is_dir {
        Op::Rmdir {
            dir,
            name: name.to_vec(),
        }
    } else {
        Op::Remove {
            dir,
            name: name.to_vec(),
        }
    };
    link.dirs.push(cred, [op]);
    Some((fh.ino, dir_attr))
}

/// A file made here, with one name (a second one makes it not "made here":
/// [`link_early`]) and not open, is removed early: the writes held for it (write-back,
/// `filesystem.rs` `flush`) die with it, unsent: a file a program writes, closes and
/// removes within a second (PostMark's, a build's temporaries) never sends its data.
fn drop_writes(link: &mut Link, ino: u64) {
    link.gather.discard(ino);
}

/// Answers a plain `rename` within one held directory early if it may: the source exists,
/// and the target is missing, the source itself, or a file made here under the present
/// delegation and not open (`open` says which are; another mount may hold a handle of an
/// older file and must see it replaced at once). Directories are not moved early. Returns
/// the replaced inode, if any, and the directory's attributes.
pub(crate) fn rename_early(
    link: &mut Link,
    cred: &Credentials,
    dir: FileHandle,
    (from, to): (&[u8], &[u8]),
    open: impl Fn(u64) -> bool,
) -> Option<(Option<u64>, Attr)> {
    if !link.dirs.enabled || !plain_name(from) || !plain_name(to) {
        return None;
    }
    make_room(link, cred, 1);
    if !ensure(link, cred, dir) {
        return None;
    }
    let h = link.dirs.held.get(&dir.ino)?;
    let (fh, kind) = *h.names.get(from)?;
    if kind == FileType::Directory {
        return None;
    }
    let replaced = match h.names.get(to) {
        None => None,
        Some(&(t, _)) if t == fh => None,
        Some(&(t, tkind)) => {
            let mine = link.dirs.mine.dir_of(t.ino) == Some(dir.ino);
            if tkind == FileType::Directory || !mine || open(t.ino) {
                return None;
            }
            Some(t.ino)
        }
    };
    let h = link.dirs.held.get_mut(&dir.ino)?;
    let now = crate::convert::timestamp(std::time::SystemTime::now());
    h.names.remove(from);
    h.used = Instant::now();
    h.names.insert(to.to_vec(), (fh, kind));
    h.attr.mtime = now;
    h.attr.ctime = now;
    let dir_attr = h.attr.clone();
    if let Some(t) = replaced {
        link.dirs.mine.remove(t);
        link.dirs.touched.insert(t);
        drop_writes(link, t);
    }
    link.dirs.touched.insert(fh.ino);
    let op = Op::Rename {
        from_dir: dir,
        from_name: from.to_vec(),
        to_dir: dir,
        to_name: to.to_vec(),
    };
    link.dirs.push(cred, [op]);
    Some((replaced, dir_attr))
}

/// Answers `link` of file `fh` as `name` in `dir` early if it may: `dir` is held, `name`
/// surely missing there, and `fh` a file (not a directory) this mount made under a
/// delegation it still holds, so nobody else has its handle and `known`, the attributes
/// this mount last gave the kernel, are its attributes. Once it has two names it is no
/// longer "made here": removing either name then goes to the replicas at once, which count
/// its links. Returns the file's attributes (`nlink + 1`) and the directory's.
pub(crate) fn link_early(
    link: &mut Link,
    cred: &Credentials,
    (fh, known): (FileHandle, Attr),
    dir: FileHandle,
    name: &[u8],
) -> Option<(Attr, Attr)> {
    if !link.dirs.enabled || !plain_name(name) || known.fh != fh {
        return None;
    }
    if known.kind == FileType::Directory || !link.dirs.is_mine(fh.ino) {
        return None;
    }
    make_room(link, cred, 1);
    if !ensure(link, cred, dir) || !link.dirs.surely_missing(dir, name) {
        return None;
    }
    // Making room or asking for `dir` may have sent the queue and lost the delegation.
    if !link.dirs.is_mine(fh.ino) {
        return None;
    }
    let now = crate::convert::timestamp(std::time::SystemTime::now());
    let mut attr = known;
    attr.nlink += 1;
    attr.ctime = now;
    let h = link.dirs.held.get_mut(&dir.ino).filter(|h| !h.stale)?;
    h.names.insert(name.to_vec(), (fh, attr.kind));
    h.used = Instant::now();
    h.attr.mtime = now;
    h.attr.ctime = now;
    let dir_attr = h.attr.clone();
    link.dirs.mine.remove(fh.ino);
    link.dirs.touched.insert(fh.ino);
    let op = Op::Link {
        fh,
        dir,
        name: name.to_vec(),
    };
    link.dirs.push(cred, [op]);
    Some((attr, dir_attr))
}

/// A handle for an entry answered early: the next reserved one, reserved first (waiting)
/// if none is left; more are asked for in flight once `handles::AHEAD_BELOW` are left
/// (`handles.rs` says why that is safe). `None` if the cluster refused.
fn take_handle(link: &mut Link, cred: &Credentials) -> Option<FileHandle> {
    if link.handles.is_empty() && link.handles.asking() {
        // The reservation in flight lands with the batches before it.
        sender::land_all_for(link, "reserve_inodes");
    }
    if link.handles.is_empty() {
        let reply = invoke(link, cred, Op::ReserveInodes { count: RESERVE });
        if !link.handles.add(reply) {
            return None;
        }
    }
    let fh = link.handles.take()?;
    if sender::may_fly(link) && link.handles.ask_ahead() {
        run(link, vec![Outgoing::reserve(cred)]);
    }
    Some(fh)
}
