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
//!   it is asked for itself meanwhile, and is sent again, ordered (see `cluster::invoke`).
//! * **Given back** when another mount asks, after [`IDLE`] unused (no early answer, and
//!   nothing made there looked up, stated, opened or read), and at unmount.
//! * **Read back from here:** the bytes of a small file made here are kept while it is this
//!   mount's alone (`mine.rs`), so reading it back asks nobody.
//! * **Write-back:** a file made here in a held directory is reachable by no other mount
//!   until the directory is recalled, so its `close` sends nothing (`filesystem.rs`
//!   `flush`): its creation and writes wait for [`gather::MAX_AGE`], `fsync`, a full
//!   gather or queue, or a recall, and go with other files' in one batch
//!   (`cluster::send_writes`; the queue's batch packs them too); removed first, its writes
//!   never go ([`drop_writes`]). The creation carries the time this mount answered it with
//!   (`Op::MakeAt`'s `time`), which the replicas take if near theirs
//!   (`byzfs_fs::reserve`), so the attributes the kernel was given do not change when the
//!   batch runs (go-fuse's `FstatDeleted` compares a `stat` before and an `fstat` after).
//! * **A mount that dies** loses what it queued and had not made durable by `fsync` (or,
//!   for files not made here, `close`), as with gathered writes; its delegations lapse
//!   with its lease.

use super::cluster::{invoke, invoke_once, send_write, send_writes, Link, Wait};
use super::gather;
use super::inflight;
use super::mine::Mine;
use byzfs_fs::proto::batch::{may_batch, MAX_BATCH};
use byzfs_fs::proto::op::MAX_READDIR_ENTRIES;
use byzfs_fs::{Attr, Credentials, Errno, FileHandle, FileType, FsResult, Op, Reply};
use std::collections::{HashMap, HashSet};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// Most operations queued: a batch keeps one place for the caller's gathered writes.
const MAX_QUEUE: usize = MAX_BATCH - 1;
/// Listing pages a directory may take to be delegated here ([`MAX_READDIR_ENTRIES`] names
/// each).
const LIST_PAGES: usize = 128;
/// Most directories held at once.
const MAX_HELD: usize = 4096;
/// A directory another mount asked back is not asked for again for this long.
const CONTENDED_FOR: Duration = Duration::from_secs(5);
/// A held directory this long unused (no early answer, nothing made there looked up,
/// stated, opened or read) is given back, so the mount stops polling for recalls when it
/// is done with its directories. Long enough to keep a working set through the phases of a
/// build or a benchmark: across sites, every use after a give-back costs round trips
/// (docs/BENCHMARKS.md "Across sites, the working set kept"); another mount never waits
/// for it (its operation recalls the directory).
const IDLE: Duration = Duration::from_secs(120);
/// Two creations or removals in a directory this close together make the mount ask for it.
const WANTED_WITHIN: Duration = Duration::from_secs(5);
/// How long an operation that met another mount's delegation waits before it is sent again.
pub(crate) const RECALL_RETRY: Duration = Duration::from_millis(5);
/// Linux's `S_ISGID`.
const S_ISGID: u32 = 0o2000;

/// A held directory: its attributes and names as this mount made them.
struct Held {
    fh: FileHandle,
    attr: Attr,
    /// Every name but `.` and `..`, with what it names.
    names: HashMap<Vec<u8>, (FileHandle, FileType)>,
    /// What its `..` names, once known (from a listing, or made here); forgotten when a
    /// rename through the cluster may have moved it ([`Dirs::renamed_through_cluster`]).
    parent: Option<FileHandle>,
    /// Something else changed the directory here: list it again before answering early.
    stale: bool,
    /// When it last answered early.
    used: Instant,
}

/// The mount's directory delegations and its queue of early answers.
pub(crate) struct Dirs {
    /// Ask for delegations at all (`MountOptions::delegate_dirs`).
    pub(crate) enabled: bool,
    held: HashMap<u64, Held>,
    queue: Vec<Op>,
    /// The caller whose operations are queued (a batch has one caller's credentials).
    cred: Option<Credentials>,
    /// When the oldest queued operation was answered.
    oldest: Option<Instant>,
    /// The error of a batch not yet reported.
    error: Option<Errno>,
    /// Directories recently asked back, and when.
    contended: HashMap<u64, Instant>,
    /// Directories with more names than [`LIST_PAGES`] hold.
    too_big: HashSet<u64>,
    /// What this mount made in held directories since it got them, by inode, with the
    /// directory: no other mount can reach those (only through the directory, which it
    /// would recall), so what this mount last saw of them is current, and removing them
    /// early is invisible to others until sent. Dropped for a directory renamed out of or
    /// given back, and for a file linked elsewhere, through the cluster.
    mine: Mine,
    /// Directories not held where a creation or removal went to the cluster, and when.
    wanted: HashMap<u64, Instant>,
    /// Inodes the queue makes, removes or changes names in: a read-only operation on
    /// anything else need not wait for it.
    touched: HashSet<u64>,
    /// Wakes the background thread when a delegation arrives.
    nudge: Option<Sender<()>>,
    /// Inodes whose attributes the kernel got from an early answer (this machine's
    /// times) and whose batch has run since: the kernel should fetch them again.
    sent: Vec<u64>,
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
    pub(crate) fn listing(&mut self, dir: FileHandle) -> Option<Vec<super::listings::Entry>> {
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

    fn take_queue(&mut self) -> Option<(Credentials, Vec<Op>)> {
        if self.queue.is_empty() {
            return None;
        }
        self.oldest = None;
        self.touched.clear();
        let cred = self.cred.take()?;
        Some((cred, std::mem::take(&mut self.queue)))
    }

    fn push(&mut self, cred: &Credentials, ops: impl IntoIterator<Item = Op>) {
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
    fn forget_all(&mut self) {
        self.held.clear();
        self.mine.clear();
    }

    /// The lease lapsed: the replicas dropped every delegation of this session.
    pub(crate) fn lease_lapsed(&mut self) {
        if self.any_held() {
            tracing::warn!(
                dirs = self.held.len(),
                "this mount's lease lapsed while it held directories; they are listed again"
            );
        }
        self.forget_all();
    }
}

/// What an early creation makes.
pub(crate) enum Make {
    File,
    Dir,
    Symlink(Vec<u8>),
}

/// Sends the queue of early answers, with this caller's held writes joined to its batch
/// (as far as [`MAX_BATCH`] and the gather's bytes allow), then the other held writes.
pub(crate) fn send_queue(link: &mut Link, wait: Wait) {
    let footprint: HashSet<u64> = link.dirs.touched.iter().copied().collect();
    let Some((cred, mut ops)) = link.dirs.take_queue() else {
        return;
    };
    // Other callers' writes, sent after the batch; and (never met: held writes are writes
    // without size changes) what may not join one.
    let mut after = Vec::new();
    let mut alone = Vec::new();
    let mut joined = Vec::new();
    // A queued operation's name and framing.
    let mut bytes = ops.len() * 300;
    for p in link.gather.take_all() {
        let cost = link.gather.cost(&p);
        // One file's writes join whatever their size (a file's writes fill an operation).
        let room = joined.is_empty() || bytes + cost <= link.gather.limit();
        if p.cred != cred || ops.len() >= MAX_BATCH || !room {
            after.push(p);
            continue;
        }
        bytes += cost;
        let ino = p.fh.ino;
        let (_, op) = p.into_op();
        if may_batch(&op) {
            joined.push(ino);
            ops.push(op);
        } else {
            alone.push((ino, op));
        }
    }
    let n = ops.len();
    // The kernel holds the attributes the early answers gave (this machine's times) of
    // what the batch makes and of the directories it changes: it drops them once the
    // batch ran (`ByzFuse::drop_early_attrs`), and asks for the cluster's.
    let mut touched: Vec<u64> = ops.iter().flat_map(Op::dirs_named).map(|d| d.ino).collect();
    touched.extend(ops.iter().filter_map(|op| match op {
        Op::MakeAt { at, .. } => Some(at.ino),
        // Its `nlink` and `ctime` were answered here too.
        Op::Link { fh, .. } => Some(fh.ino),
        _ => None,
    }));
    touched.sort_unstable();
    touched.dedup();
    if link.dirs.sent.len() < 4 * MAX_BATCH {
        link.dirs.sent.extend(touched.iter().copied());
    }
    let first_write = n - joined.len();
    let writes: Vec<Op> = ops[first_write..].to_vec();
    let mut footprint = footprint;
    footprint.extend(touched);
    footprint.extend(joined.iter().copied());
    let sent = QueueSent {
        cred: cred.clone(),
        n,
        joined,
        writes,
    };
    match wait {
        Wait::InFlight => {
            let then = inflight::Then::Queue(sent);
            inflight::send(link, &cred, Op::Batch(ops), footprint, then);
        }
        Wait::Yes => {
            let r = invoke_once(link, &cred, Op::Batch(ops));
            sent.answered(link, r);
        }
    }
    for (ino, op) in alone {
        send_write(link, ino, &cred, op);
    }
    send_writes(link, after, wait);
}

/// The queue's batch sent ([`send_queue`]), for its answer.
pub(crate) struct QueueSent {
    cred: Credentials,
    /// Operations in the batch.
    n: usize,
    /// Files whose held writes joined it, in order, and those writes (its last ones).
    joined: Vec<u64>,
    writes: Vec<Op>,
}

impl QueueSent {
    /// Handles the answer. One that failed ran nothing: the error waits for the next
    /// `close`, `fsync` or `fsyncdir`, what this mount held is forgotten, and the joined
    /// writes are sent again file by file, each keeping its own error (those to a file the
    /// batch made fail with `ESTALE`).
    pub(crate) fn answered(self, link: &mut Link, result: FsResult) {
        let first_write = self.n - self.joined.len();
        match result {
            Ok(Reply::Batch(replies)) if replies.len() == self.n => {
                for (ino, reply) in self.joined.iter().zip(&replies[first_write..]) {
                    if let Reply::Write { attr, .. } | Reply::Attr(attr) = reply {
                        link.stamps.insert(*ino, super::Stamp::of(attr));
                    }
                }
            }
            other => {
                let e = match other {
                    Err(e) => e,
                    _ => Errno::EIO,
                };
                tracing::warn!(%e, ops = self.n, "operations answered early failed at the replicas; \
                    reported at the next close or fsync");
                link.dirs.error = Some(e);
                link.dirs.forget_all();
                for (ino, op) in self.joined.into_iter().zip(self.writes) {
                    send_write(link, ino, &self.cred, op);
                }
            }
        }
    }
}

/// Sends everything held: the queue of early answers, with the writes that join it, and
/// every other held write (a delegation given back, unmount, the gather full).
pub(crate) fn send_everything(link: &mut Link, wait: Wait) {
    send_queue(link, wait);
    let rest = link.gather.take_all();
    send_writes(link, rest, wait);
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
    match invoke(link, cred, Op::DelegateDir { dir }) {
        Ok(Reply::Delegated { attr, .. }) => {
            link.dirs.held.insert(
                dir.ino,
                Held {
                    fh: dir,
                    attr,
                    names: HashMap::new(),
                    parent: None,
                    stale: true,
                    used: Instant::now(),
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
    let at = super::handles::take(link, cred)?;
    // Asking for handles sent the queue; a failure there forgot the directory.
    let h = link.dirs.held.get_mut(&dir.ino).filter(|h| !h.stale)?;
    let now = super::timestamp(std::time::SystemTime::now());
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
    let now = super::timestamp(std::time::SystemTime::now());
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
    let now = super::timestamp(std::time::SystemTime::now());
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
    let now = super::timestamp(std::time::SystemTime::now());
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

/// A name the early answers handle: not `.` or `..`, within Linux's `NAME_MAX`.
fn plain_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && name.len() <= 255 && !name.contains(&0)
}

/// Sends the queue and gives `ino` back (asked for by another mount, or too big to hold).
pub(crate) fn give_back(link: &mut Link, cred: &Credentials, ino: u64) {
    link.dirs.mine.retain_dirs(|d| d != ino);
    let fh = match link.dirs.held.remove(&ino) {
        Some(h) => h.fh,
        // Forgotten after a failed batch, but the replicas may still count it as held.
        None => FileHandle { ino, generation: 0 },
    };
    // Files written and closed here under write-back (`filesystem.rs` `flush`) too: the
    // mount that asked will open them next.
    send_everything(link, Wait::Yes);
    if fh.generation == 0 {
        // The handle is not known any more: let the lease lapse.
        return;
    }
    link.dirs.contended.insert(ino, Instant::now());
    match invoke(link, cred, Op::ReturnDir { dir: fh }) {
        Ok(_) | Err(Errno::ENOLCK | Errno::ESTALE) => {}
        Err(e) => tracing::debug!(ino, %e, "cannot give a directory back; it lapses"),
    }
}

/// Gives back up to one batch of the directories idle for [`IDLE`] (from the background
/// thread, which polls for recalls only while some are held).
pub(crate) fn give_back_idle(link: &mut Link, cred: &Credentials) {
    let now = Instant::now();
    let idle: Vec<FileHandle> = link
        .dirs
        .held
        .values()
        .filter(|h| now.saturating_duration_since(h.used) >= IDLE && !link.dirs.touches(h.fh.ino))
        .map(|h| h.fh)
        .take(MAX_BATCH)
        .collect();
    if idle.is_empty() {
        return;
    }
    // Writes held for files made there (write-back) reach the replicas before another
    // mount can look the files up.
    let held_mine = link.gather.inos().any(|i| {
        link.dirs
            .mine
            .dir_of(i)
            .is_some_and(|d| idle.iter().any(|x| x.ino == d))
    });
    if held_mine {
        send_everything(link, Wait::Yes);
    }
    for d in &idle {
        link.dirs.held.remove(&d.ino);
    }
    link.dirs
        .mine
        .retain_dirs(|d| !idle.iter().any(|i| i.ino == d));
    let ops = idle.iter().map(|&dir| Op::ReturnDir { dir }).collect();
    if let Err(e) = invoke(link, cred, Op::Batch(ops)) {
        tracing::debug!(%e, "cannot give idle directories back; they lapse");
    }
}

/// Sends the queue and gives every held directory back (at unmount), in batches.
pub(crate) fn give_back_all(link: &mut Link, cred: &Credentials) {
    send_everything(link, Wait::Yes);
    link.dirs.mine.clear();
    let all: Vec<FileHandle> = link.dirs.held.drain().map(|(_, h)| h.fh).collect();
    for chunk in all.chunks(MAX_BATCH) {
        let ops = chunk.iter().map(|&dir| Op::ReturnDir { dir }).collect();
        if let Err(e) = invoke(link, cred, Op::Batch(ops)) {
            tracing::debug!(%e, "cannot give directories back; they lapse");
        }
    }
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
