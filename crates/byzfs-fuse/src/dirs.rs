//! Directory delegations this mount holds (`byzfs_fs::dir_delegation`), and the operations
//! it answered early in them (docs/plans/27-mount-that-does-not-wait.md).
//!
//! * **Asked for** at the second creation or removal in a directory within [`WANTED_WITHIN`]
//!   (one alone does not pay for asking and listing), if the directory is not
//!   [contended](CONTENDED_FOR) and lists in [`LIST_PAGES`] pages (65,536 names); a directory made
//!   here is asked for in the batch that makes it. While this mount holds a directory, no
//!   other mount can read or change its names, so its listing, kept here, is exact.
//! * **Answered early**, from the listing: `create`, `mkdir` and `symlink` of a new name
//!   (with an inode number the mount reserved, `byzfs_fs::reserve`), `unlink` of a file and
//!   `rmdir` of an empty directory made here since the mount got the directory (no other
//!   mount can hold a handle of those) and not open, and `lookup` of a missing name or of
//!   one made there, and renames within it of what is not a directory (over nothing, or over a
//!   file it made). They
//!   are queued, in order, and sent as one `Op::Batch` (with the gathered writes of the same
//!   caller, so a new small file is one round trip) before any other operation, at `close`,
//!   `fsync` and `fsyncdir`, within [`gather::MAX_AGE`], when the queue is full, and when a
//!   directory is given back. Anything else in a held directory goes to the cluster as before,
//!   after the queue, and the listing is fetched again before the next early answer there.
//! * **Errors** only the replicas can find (`ENOSPC`, a quota): the batch is applied all or
//!   not at all; the error is reported by the next `close`, `fsync` or `fsyncdir`, and the
//!   mount forgets what it held (it lists again before answering early).
//! * **Recalls:** another mount's operation on a held directory's names makes the replicas
//!   ask for it back; the background thread polls for that while any is held
//!   (`delegations::POLL_EVERY`), sends the queue, and gives the directory back. An
//!   operation of this mount that meets another mount's delegation waits, giving back what
//!   it is asked for itself meanwhile, and is sent again, ordered (see `calls.rs` `invoke`).
//! * **Given back** when another mount asks, after [`IDLE`] unused (no early answer, and
//!   nothing made there looked up, stated, opened or read), and at unmount.
//! * **Read back from here:** the bytes of a small file made here are kept while it is this
//!   mount's alone (`mine.rs`), so reading it back asks nobody.
//! * **Write-back:** a file made here in a held directory is reachable by no other mount
//!   until the directory is recalled, so its `close` sends nothing (`filesystem.rs`
//!   `flush`): its creation and writes wait for [`gather::MAX_AGE`], `fsync`, a full
//!   gather or queue, or a recall, and go with other files' in one batch
//!   (`writeback.rs` `writes`; the queue's batch packs them too); removed first, its writes
//!   never go (`early.rs` `drop_writes`). The creation carries the time this mount answered it with
//!   (`Op::MakeAt`'s `time`), which the replicas take if near theirs
//!   (`byzfs_fs::reserve`), so the attributes the kernel was given do not change when the
//!   batch runs (go-fuse's `FstatDeleted` compares a `stat` before and an `fstat` after).
//! * **A mount that dies** loses what it queued and had not made durable by `fsync` (or,
//!   for files not made here, `close`), as with gathered writes; its delegations lapse
//!   with its lease.

//!
//! This file holds the books; `early.rs` answers early and asks for directories,
//! `recalls.rs` gives them back, `writeback.rs` sends the queue.

use crate::gather;
use crate::mine::Mine;
use byzfs_fs::proto::batch::MAX_BATCH;
use byzfs_fs::{Attr, Credentials, Errno, FileHandle, FileType, Op};
use std::collections::{HashMap, HashSet};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// Most operations queued: a batch keeps one place for the caller's gathered writes.
pub(crate) const MAX_QUEUE: usize = MAX_BATCH - 1;
/// Listing pages a directory may take to be delegated here ([`MAX_READDIR_ENTRIES`] names
/// each).
pub(crate) const LIST_PAGES: usize = 128;
/// Most directories held at once.
pub(crate) const MAX_HELD: usize = 4096;
/// A directory another mount asked back is not asked for again for this long.
pub(crate) const CONTENDED_FOR: Duration = Duration::from_secs(5);
/// A held directory this long unused (no early answer, nothing made there looked up,
/// stated, opened or read) is given back, so the mount stops polling for recalls when it
/// is done with its directories. Long enough to keep a working set through the phases of a
/// build or a benchmark: across sites, every use after a give-back costs round trips
/// (docs/BENCHMARKS.md "Across sites, the working set kept"); another mount never waits
/// for it (its operation recalls the directory).
pub(crate) const IDLE: Duration = Duration::from_secs(120);
/// Two creations or removals in a directory this close together make the mount ask for it.
pub(crate) const WANTED_WITHIN: Duration = Duration::from_secs(5);
/// How long an operation that met another mount's delegation waits before it is sent again.
pub(crate) const RECALL_RETRY: Duration = Duration::from_millis(5);

/// A held directory: its attributes and names as this mount made them.
pub(crate) struct Held {
    pub(crate) fh: FileHandle,
    pub(crate) attr: Attr,
    /// Every name but `.` and `..`, with what it names.
    pub(crate) names: HashMap<Vec<u8>, (FileHandle, FileType)>,
    /// What its `..` names, once known (from a listing, or made here); forgotten when a
    /// rename through the cluster may have moved it ([`Dirs::renamed_through_cluster`]).
    pub(crate) parent: Option<FileHandle>,
    /// Something else changed the directory here: list it again before answering early.
    pub(crate) stale: bool,
    /// When it last answered early.
    pub(crate) used: Instant,
    /// The place of the request that asked for it (`lease.rs`): for a directory made here,
    /// the place the next request had when it was queued (its batch goes later).
    pub(crate) place: u64,
}

/// The mount's directory delegations and its queue of early answers.
pub(crate) struct Dirs {
    /// Ask for delegations at all (`MountOptions::delegate_dirs`).
    pub(crate) enabled: bool,
    pub(crate) held: HashMap<u64, Held>,
    pub(crate) queue: Vec<Op>,
    /// The caller whose operations are queued (a batch has one caller's credentials).
    pub(crate) cred: Option<Credentials>,
    /// When the oldest queued operation was answered.
    pub(crate) oldest: Option<Instant>,
    /// The error of a batch not yet reported.
    pub(crate) error: Option<Errno>,
    /// Directories recently asked back, and when.
    pub(crate) contended: HashMap<u64, Instant>,
    /// Directories with more names than [`LIST_PAGES`] hold.
    pub(crate) too_big: HashSet<u64>,
    /// What this mount made in held directories since it got them, by inode, with the
    /// directory: no other mount can reach those (only through the directory, which it
    /// would recall), so what this mount last saw of them is current, and removing them
    /// early is invisible to others until sent. Dropped for a directory renamed out of or
    /// given back, and for a file linked elsewhere, through the cluster.
    pub(crate) mine: Mine,
    /// Directories not held where a creation or removal went to the cluster, and when.
    pub(crate) wanted: HashMap<u64, Instant>,
    /// Inodes the queue makes, removes or changes names in: a read-only operation on
    /// anything else need not wait for it.
    pub(crate) touched: HashSet<u64>,
    /// Wakes the background thread when a delegation arrives.
    pub(crate) nudge: Option<Sender<()>>,
    /// Inodes whose attributes the kernel got from an early answer (this machine's
    /// times) and whose batch has run since: the kernel should fetch them again.
    pub(crate) sent: Vec<u64>,
}

impl Dirs {
    pub(crate) fn new(enabled: bool, nudge: Option<Sender<()>>) -> Dirs {
        Dirs {
            enabled,
            held: HashMap::new(),
            queue: Vec::new(),
            cred: None,
            oldest: None,
            error: None,
            contended: HashMap::new(),
            too_big: HashSet::new(),
            wanted: HashMap::new(),
            mine: Mine::default(),
            touched: HashSet::new(),
            nudge,
            sent: Vec::new(),
        }
    }

    /// Wakes the mount's background thread (write-back was left in flight).
    pub(crate) fn wake_background(&self) {
        if let Some(n) = &self.nudge {
            let _ = n.send(());
        }
    }

    /// Whether any directory is held.
    pub(crate) fn any_held(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether `ino` is a held directory.
    pub(crate) fn holds(&self, ino: u64) -> bool {
        self.held.contains_key(&ino)
    }

    /// Whether `op` must see the queue applied first: one that reads or changes anything
    /// the queue touches (names in its directories, what it makes or removes), or whose
    /// reach is wider than its handles (`statfs`, sweeps). Others commute with the queue:
    /// it holds only creations and removals of entries no other operation can name yet.
    pub(crate) fn must_precede(&self, op: &Op) -> bool {
        if self.queue.is_empty() {
            return false;
        }
        let Some(inos) = handles_of(op) else {
            return true;
        };
        inos.iter().any(|i| self.touched.contains(i))
            || op
                .dirs_named()
                .iter()
                .any(|d| self.touched.contains(&d.ino))
    }

    /// Whether the queue makes, removes or changes names in `ino`.
    pub(crate) fn touches(&self, ino: u64) -> bool {
        self.touched.contains(&ino)
    }

    /// Whether the oldest queued operation is [`gather::MAX_AGE`] old.
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.oldest
            .is_some_and(|t| now.saturating_duration_since(t) >= gather::MAX_AGE)
    }

    /// Inodes whose early attributes the kernel should drop now (see [`Dirs::sent`]).
    pub(crate) fn take_sent(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.sent)
    }

    /// The error of a failed batch, once.
    pub(crate) fn take_error(&mut self) -> Option<Errno> {
        self.error.take()
    }

    /// The attributes of held directory `ino` as this mount made them.
    pub(crate) fn attr(&self, ino: u64) -> Option<&Attr> {
        self.held.get(&ino).filter(|h| !h.stale).map(|h| &h.attr)
    }

    /// The entry `name` of held directory `dir` if this mount made it under the present
    /// delegation: no other mount can have changed it, so what this mount last saw of it
    /// is current.
    pub(crate) fn made_here(&self, dir: FileHandle, name: &[u8]) -> Option<FileHandle> {
        let h = self
            .held
            .get(&dir.ino)
            .filter(|h| h.fh == dir && !h.stale)?;
        let (fh, _) = h.names.get(name)?;
        (self.mine.dir_of(fh.ino) == Some(dir.ino)).then_some(*fh)
    }

    /// Whether this mount made `ino` in a directory it still holds (see [`Dirs::mine`]).
    pub(crate) fn is_mine(&self, ino: u64) -> bool {
        self.mine
            .dir_of(ino)
            .and_then(|d| self.held.get(&d))
            .is_some_and(|h| !h.stale)
    }

    /// [`Dirs::is_mine`], and if so its directory counts as used now (answering from what
    /// the mount made keeps the delegation, as an early answer does).
    pub(crate) fn use_mine(&mut self, ino: u64) -> bool {
        let Some(h) = self.mine.dir_of(ino).and_then(|d| self.held.get_mut(&d)) else {
            return false;
        };
        if h.stale {
            return false;
        }
        h.used = Instant::now();
        true
    }

    /// `ino` may now be reachable from elsewhere (a hard link made through the cluster).
    pub(crate) fn not_mine(&mut self, ino: u64) {
        self.mine.remove(ino);
    }

    /// Up to `count` bytes of `ino` at `offset` from the bytes kept of a small file this
    /// mount made (`mine.rs`), if it is still this mount's alone; its directory counts as
    /// used.
    pub(crate) fn read_mine(&mut self, ino: u64, offset: u64, count: u32) -> Option<Vec<u8>> {
        if !self.use_mine(ino) {
            return None;
        }
        self.mine.read(ino, offset, count)
    }

    /// Up to `count` bytes of `ino` at `offset` from kept bytes, whoever's (the caller
    /// knows the file is this mount's alone: `held_files.rs`).
    pub(crate) fn read_kept(&mut self, ino: u64, offset: u64, count: u32) -> Option<Vec<u8>> {
        self.mine.read(ino, offset, count)
    }

    /// See `Mine::changes`.
    pub(crate) fn kept_changes(&self) -> u64 {
        self.mine.changes()
    }

    /// See `Mine::keep_read`.
    pub(crate) fn keep_read(&mut self, ino: u64, data: &[u8], seen: u64) -> bool {
        self.mine.keep_read(ino, data, seen)
    }

    /// This mount wrote `data` at `offset` of `ino` (`mine.rs`).
    pub(crate) fn wrote(&mut self, ino: u64, offset: u64, data: &[u8]) {
        self.mine.wrote(ino, offset, data);
    }

    /// `ino`'s contents changed in a way `mine.rs` does not follow.
    pub(crate) fn contents_changed(&mut self, ino: u64) {
        self.mine.changed(ino);
    }

    /// Reads answered from kept bytes (`mine.rs`), for the log at unmount.
    pub(crate) fn reads_answered(&self) -> u64 {
        self.mine.reads
    }

    /// Whether `name` is surely missing from directory `dir` (held, listed). Only a plain
    /// name: the cluster answers the others (`ENAMETOOLONG` for one over `NAME_MAX`, not a
    /// miss; tests/mount.rs `errnos`).
    pub(crate) fn surely_missing(&self, dir: FileHandle, name: &[u8]) -> bool {
        plain_name(name)
            && self
                .held
                .get(&dir.ino)
                .is_some_and(|h| h.fh == dir && !h.stale && !h.names.contains_key(name))
    }

    /// A held directory's attributes after this mount changed them through the cluster.
    pub(crate) fn set_attr(&mut self, a: &Attr) {
        if let Some(h) = self.held.get_mut(&a.fh.ino).filter(|h| h.fh == a.fh) {
            h.attr = a.clone();
        }
    }

    /// An operation sent to the cluster that changed names in (or attributes of) held
    /// directories, not answered here: their listings are fetched again before use.
    pub(crate) fn changed_elsewhere(&mut self, dirs: &[FileHandle]) {
        for d in dirs {
            if let Some(h) = self.held.get_mut(&d.ino) {
                h.stale = true;
            }
        }
    }

    /// A rename out of (or an exchange of) `names` (directory, name) is about to go through
    /// the cluster. What this mount made in those directories may then be reachable
    /// elsewhere; a held directory it moves has a new `..`, known again at its next
    /// listing (a name in a directory not held or not listed may name any of them).
    pub(crate) fn renamed_through_cluster(&mut self, names: &[(FileHandle, &Vec<u8>)]) {
        self.mine
            .retain_dirs(|d| !names.iter().any(|(x, _)| x.ino == d));
        for (dir, name) in names {
            let listed = self.held.get(&dir.ino).filter(|h| h.fh == *dir && !h.stale);
            match listed.map(|h| h.names.get(*name)) {
                Some(Some((fh, FileType::Directory))) => {
                    let fh = *fh;
                    if let Some(h) = self.held.get_mut(&fh.ino) {
                        h.parent = None;
                    }
                }
                Some(_) => {}
                None => self.held.values_mut().for_each(|h| h.parent = None),
            }
        }
    }

    /// Held directory `dir`'s `..`, as a listing from the cluster showed it.
    pub(crate) fn listed_parent(&mut self, dir: FileHandle, parent: FileHandle) {
        if let Some(h) = self.held.get_mut(&dir.ino).filter(|h| h.fh == dir) {
            h.parent = Some(parent);
        }
    }

    /// Held directory `dir`'s entries as this mount keeps them, `.` and `..` first, for an
    /// `opendir` (`listings.rs`); `None` if it is not held and listed here, or its `..` is
    /// not known. The directory counts as used.
    pub(crate) fn listing(&mut self, dir: FileHandle) -> Option<Vec<crate::listings::Entry>> {
        let h = self
            .held
            .get_mut(&dir.ino)
            .filter(|h| h.fh == dir && !h.stale)?;
        let parent = h.parent?;
        h.used = Instant::now();
        let mut out = Vec::with_capacity(h.names.len() + 2);
        out.push((b".".to_vec(), dir.ino, FileType::Directory));
        out.push((b"..".to_vec(), parent.ino, FileType::Directory));
        out.extend(
            h.names
                .iter()
                .map(|(name, (fh, kind))| (name.clone(), fh.ino, *kind)),
        );
        Some(out)
    }

    pub(crate) fn take_queue(&mut self) -> Option<(Credentials, Vec<Op>)> {
        if self.queue.is_empty() {
            return None;
        }
        self.oldest = None;
        self.touched.clear();
        let cred = self.cred.take()?;
        Some((cred, std::mem::take(&mut self.queue)))
    }

    pub(crate) fn push(&mut self, cred: &Credentials, ops: impl IntoIterator<Item = Op>) {
        if self.queue.is_empty() {
            self.oldest = Some(Instant::now());
            self.cred = Some(cred.clone());
        }
        for op in ops {
            self.touched.extend(op.dirs_named().iter().map(|d| d.ino));
            if let Op::MakeAt { at, .. } = &op {
                self.touched.insert(at.ino);
            }
            self.queue.push(op);
        }
    }

    /// Forgets every held directory (after a failed batch nothing here is sure).
    pub(crate) fn forget_all(&mut self) {
        self.held.clear();
        self.mine.clear();
    }

    /// The lease lapsed: the replicas dropped the delegations this session had before
    /// the lapse, and the entries made in them are no longer surely this mount's.
    pub(crate) fn lease_lapsed(&mut self, lease: &crate::lease::Lease) {
        let before = self.held.len();
        self.held.retain(|_, h| !lease.dropped(h.place));
        if self.held.len() < before {
            tracing::warn!(
                dirs = before - self.held.len(),
                "this mount's lease lapsed while it held directories; they are listed again"
            );
        }
        let held = &self.held;
        self.mine.retain_dirs(|d| held.contains_key(&d));
    }
}

/// A name the early answers handle: not `.` or `..`, within Linux's `NAME_MAX`.
pub(crate) fn plain_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && name.len() <= 255 && !name.contains(&0)
}

/// The files `op` names by handle (its directories come from `Op::dirs_named`); `None` for
/// an operation whose effects reach further.
pub(crate) fn handles_of(op: &Op) -> Option<Vec<u64>> {
    // The files' own operations: the ones whose held writes they need (`gather.rs`).
    if let Some(files) = gather::needs(op) {
        return Some(files);
    }
    Some(match op {
        Op::GetLk { fh, .. }
        | Op::ReleaseLocks { fh, .. }
        | Op::ReturnDelegation { fh, .. }
        | Op::CancelWait { fh, .. } => vec![fh.ino],
        Op::SetLk(r) | Op::SetLkWait(r) | Op::LockDelegate(r) => vec![r.fh.ino],
        // A change of names acts on entries it names by name (an `rmdir` of a directory
        // the queue empties): it waits for the queue.
        Op::Lookup { .. } | Op::ReadDir { .. } => Vec::new(),
        Op::DelegateDir { dir } | Op::ReturnDir { dir } => vec![dir.ino],
        _ => return None,
    })
}
