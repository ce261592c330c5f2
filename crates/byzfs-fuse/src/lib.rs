//! # byzfs-fuse — the ByzFS mount
//!
//! The FUSE adapter (fuser) from kernel requests to file-service operations
//! (`byzfs_fs::Op`), invoked on the cluster through the BFT client ([`fsclient`]). The
//! `byzfs mount` and `byzfs up --mount` commands parse their flags and call [`mount`];
//! the mount session and its checks are in `session.rs`, the `Filesystem` implementation
//! here.
//!
//! * **Handles.** FUSE inode numbers are the service's inode numbers; the adapter remembers
//!   each inode's generation from the entry replies that gave it to the kernel (lookup,
//!   create, mkdir, …) until the kernel forgets it, to build the service's
//!   `(ino, generation)` handles. The root is `(1, 1)`.
//! * **Credentials.** Each request runs as the caller's uid, gid and supplementary groups
//!   (read from `/proc/<pid>/status`, since FUSE does not pass them, and kept for a second
//!   per process: `groups.rs`). The mount uses
//!   `default_permissions`, so the kernel checks modes too, with the full credentials.
//! * **Consistency between mounts: close-to-open**, as NFS clients give it.
//!   - Writes are gathered (`gather.rs`): a file's consecutive writes are acknowledged at
//!     once and sent together before any other operation, at `close` (`flush`) and
//!     `fsync`, and within 1 s; `close` returns once the cluster executed them and reports
//!     their error. No kernel writeback cache (it would trust its own size and mtime).
//!   - `open` fetches the file's attributes from the cluster; if they differ from the last
//!     ones this mount saw (another client wrote), it invalidates the kernel's cached
//!     attributes (`inval_inode`, attributes only), so the next read or stat fetches the
//!     new size. The kernel keeps the file's cached pages across opens
//!     (`FOPEN_KEEP_CACHE`) only while the file's size, mtime and ctime equal those of the
//!     last open that made it drop them (any write, here or elsewhere, changes them: the
//!     agreed clock moves with every operation), so a file read again and again (a header
//!     during a build) is read from the cluster once. A file another client removed
//!     answers `ESTALE`, on which the kernel looks the path up again (`LOOKUP_REVAL`) and
//!     opens what is there now.
//!   - Otherwise attributes and entries are cached by the kernel for the cache timeout,
//!     [`DEFAULT_CACHE_TIMEOUT`] unless `--cache-timeout` says otherwise (like NFS's
//!     attribute cache): `stat`/`ls` may show another client's change up to that late. The
//!     mount keeps the attributes the replies carry for as long (`attrs.rs`), a
//!     directory's after a create or remove in it too (post-operation attributes), and
//!     answers the kernel's `getattr` from them.
//!     Negative lookups are cached as long (as NFS's default `lookupcache=all`): a name
//!     another client just created may stay invisible here for that long. Names this
//!     mount creates, renames or removes update its kernel cache at once.
//!   - Locks (`fcntl` and `flock`) are taken at the replicas, so they hold between mounts
//!     (`locks.rs`); taking one revalidates the file as NFS does, so a program that locks
//!     around its reads and writes (SQLite) sees the last holder's writes.
//!   - Not covered: concurrent `O_APPEND` writers on two mounts (each appends at the size
//!     its kernel knows).
//! * **Mounting and unmounting** ([`check_fuse`], [`check_mountpoint`], [`Mounted`]): a
//!   one-line error says what to install if FUSE is unavailable; a mount point already
//!   mounted is refused and a stale one (its process was killed) is unmounted first; a busy
//!   mount is detached lazily at shutdown.
//! * **Read-only operations** are sent with the read-only flag the service itself would give
//!   them (`Op::is_read_only`), so they use the read-only optimisation.
//! * **Open files that are removed** (unlinked, or replaced by a rename) through this mount
//!   are moved to `.byzfs-silly-<client>-<ino>-<generation>` in the orphan directory at the root,
//!   `/.byzfs-orphans` (made on first use by the mount process, mode 1777 as `/tmp`), and
//!   removed at their last close, as NFS clients keep `.nfs…` files; so the directory they
//!   came from lists as empty and can be removed, as on a local file system. Where the
//!   orphan directory cannot be had (the mount process may not create it) the file's own
//!   directory keeps the hidden name, which this mount's `readdir` does not list (other
//!   mounts do); a `rmdir` that finds a directory holding only other mounts' hidden names
//!   sweeps those of dead mounts (`Op::SweepDir`) and tries again. A file removed by another
//!   client disappears at once (`ESTALE`).
//! * **`O_TMPFILE`** (through the vendored fuser's `FUSE_TMPFILE`): the file is created in
//!   the directory asked for (its permissions and group apply) under a hidden name,
//!   `.byzfs-silly-<client>-tmp-<n>`, moved to the orphan directory, and handled as a file
//!   removed while open: no links as `fstat` sees it, given a name by `linkat`, removed at
//!   its last close.
//! * **Hidden files of dead mounts** ([`byzfs_fs::orphan`]): every hidden name carries the
//!   mount's client session, and a mount holds its lock lease while it keeps hidden files
//!   in the orphan directory (renewed every 10 s, as while it holds locks). Each mount sends
//!   `Op::SweepOrphans` just after it starts and every `SWEEP_EVERY` (5 minutes): the replicas remove
//!   the hidden files whose mount's lease has lapsed (30 s of agreed time). A mount cut off
//!   from the cluster for longer than that may lose its open removed files, as it loses its
//!   locks, and logs it.
//! * **`rename` flags:** `RENAME_NOREPLACE` and `RENAME_EXCHANGE` are operations of their own
//!   at the replicas (`Op::RenameNoReplace`, `Op::Exchange`), so the check and the swap are
//!   atomic there; `RENAME_WHITEOUT` gets `EINVAL`.
//! * **`fallocate`:** mode 0 grows the file at the replicas (`Op::Allocate`, no space
//!   reserved); `FALLOC_FL_KEEP_SIZE` alone is answered here; punch-hole and zero-range
//!   run at the replicas (`ranges.rs`); collapse-range and insert-range get `EOPNOTSUPP`.
//! * **`copy_file_range`** copies at the replicas, and **`lseek` `SEEK_DATA`/`SEEK_HOLE`**
//!   finds the stored blocks there (`ranges.rs`); `fsyncdir` sends held-back writes (every
//!   operation is durable when it returns).
//! * **Large removals and truncations** give their space back in bounded steps that the
//!   mount sends in the background (`reclaim.rs`).
//! * **Extended attributes:** `user.` and `trusted.` (stored by the replicas, with Linux's
//!   checks: `byzfs_fs::xattr`); `security.` names read as absent, and `system.` (ACLs) is
//!   not supported.
//! * **Not handled yet:** ACLs are not supported (device nodes are: `mknod` by uid 0). The adapter is
//!   single-threaded: one operation at a time per mount. go-fuse's POSIX suite passes
//!   (docs/CONFORMANCE.md).

mod attrs;
mod delegations;
pub mod fsclient;
mod gather;
mod groups;
mod locks;
mod ranges;
mod reclaim;
mod session;

use crate::fsclient::FsClient;
use anyhow::{bail, Context as _};
use attrs::{AttrCache, Effect};
use byzfs_fs::attr::{SetTime, Timestamp};
use byzfs_fs::op::XattrSet;
use byzfs_fs::op::MAX_IO;
use byzfs_fs::{
    decode_result, Attr, Credentials, Errno, FileHandle, FileType, FsResult, Op, Reply, Request,
    SetAttr, SpecialKind,
};
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::keygen::{client_key_path, DEFAULT_CLIENT};
use byzfs_net::ClientCredential;
use fuser::{
    AccessFlags, FileAttr, Filesystem, Generation, INodeNo, MountOption, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyStatfs,
    ReplyWrite, TimeOrNow, WriteFlags,
};
use gather::Gather;
pub use session::{check_fuse, check_mountpoint, mount, MountOptions, Mounted};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the kernel (and the mount) may cache attributes and names by default: 3 s,
/// NFS's `acregmin`. A build stats and looks up the same headers for seconds: the Tcl
/// `make -j2` through the mount took 21.5 s at 3 s against 24.6 s at 1 s.
pub const DEFAULT_CACHE_TIMEOUT: Duration = Duration::from_secs(3);
/// Entries asked for per `readdir` round trip.
const READDIR_BATCH: u32 = 128;
/// Hidden names tried for one `O_TMPFILE` file before giving up (each taken one means a
/// file another process of this mount's client id left behind).
const TMPFILE_TRIES: u32 = 16;
/// The orphan directory's name, at the root ([`orphan_dir`]).
const ORPHANS: &[u8] = byzfs_fs::orphan::ORPHAN_DIR;
/// How often a mount sweeps the orphan directory of files dead mounts left there
/// ([`byzfs_fs::orphan`]); it also sweeps once just after it starts.
const SWEEP_EVERY: Duration = Duration::from_secs(300);

// Linux file-type bits and open flags (stable ABI values).
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFIFO: u32 = 0o010_000;
const S_IFSOCK: u32 = 0o140_000;
const S_IFCHR: u32 = 0o020_000;
const S_IFBLK: u32 = 0o060_000;
const O_EXCL: i32 = 0o200;
/// `setxattr(2)` flags.
const XATTR_CREATE: i32 = 1;
const XATTR_REPLACE: i32 = 2;
/// Linux `FALLOC_FL_KEEP_SIZE`.
const FALLOC_FL_KEEP_SIZE: i32 = 1;

/// The adapter. fuser calls it from its session thread; the mutex serialises calls (the
/// client has one outstanding request at a time anyway).
struct ByzFuse {
    inner: Arc<Mutex<Inner>>,
    /// Set right after the mount (the session owns the adapter): invalidates the kernel's
    /// cached attributes at `open` (close-to-open consistency).
    notifier: Arc<OnceLock<fuser::Notifier>>,
    /// Largest data of one `Op::Write`: `MAX_IO`, less whatever keeps the encoded request
    /// within the cluster's `op_bytes_max` (a 1 MiB kernel write would otherwise fail).
    write_chunk: usize,
    /// How long the kernel may cache attributes and entries, and the mount attributes.
    ttl: Duration,
    /// The callers' supplementary groups.
    groups: groups::GroupCache,
    /// This mount's client session at the replicas (the owner of its locks).
    client_id: u64,
}

/// Room for a write request's fields besides its data (credentials with supplementary
/// groups, handle, offset, encoding overhead).
const WRITE_OVERHEAD: usize = 16 * 1024;

struct Inner {
    rt: tokio::runtime::Runtime,
    client: FsClient,
    /// Operations sent to the cluster, by kind: how many, and the time spent waiting for
    /// them (logged at unmount: where a workload's round trips and time go).
    sent: BTreeMap<&'static str, (u64, Duration)>,
    /// Every inode the kernel may name: those it got in an entry reply and has not
    /// forgotten.
    known: HashMap<u64, Known>,
    /// Open count of every inode this mount has open (for silly renames).
    open: HashMap<u64, u32>,
    /// Directories open on this mount: how many times, and their last attributes, which
    /// `fstat` on one gets (with no links) once it is removed, as on a local file system.
    open_dirs: HashMap<u64, (u32, Attr)>,
    /// Open files removed while open: inode → (directory, hidden name), removed for good at
    /// the last release.
    silly: HashMap<u64, (FileHandle, Vec<u8>)>,
    /// The number in the next `O_TMPFILE` file's hidden name.
    tmp_next: u64,
    /// The orphan directory once looked for ([`orphan_dir`]): `Some(None)` if there is none
    /// to be had.
    orphans: Option<Option<FileHandle>>,
    /// The last attributes seen for each inode the kernel holds, to tell at `open` whether
    /// another client changed the file since.
    stamps: HashMap<u64, Stamp>,
    /// The attributes each inode had at its last `open` that let the kernel drop its cached
    /// pages: an `open` that finds the same ones keeps the pages (`FOPEN_KEEP_CACHE`).
    opened: HashMap<u64, Stamp>,
    /// Attributes from the cluster's replies, answering the kernel's `getattr` within the
    /// cache timeout (`attrs.rs`).
    attrs: AttrCache,
    /// `None`: a hard mount (see [`MountOptions::timeout`]).
    timeout: Option<Duration>,
    /// Send read-only operations as ordered requests.
    strict: bool,
    /// Writes held back (`gather.rs`).
    gather: Gather,
    /// Hold writes back at all (not `--sync-writes`).
    gather_writes: bool,
    /// Which files and owners may hold locks at the replicas (`locks.rs`).
    locks: locks::Held,
    /// Files whose locks this mount keeps (`delegations.rs`).
    delegs: delegations::Delegations,
    /// Whether reclaim steps are due (`reclaim.rs`).
    reclaim: reclaim::Reclaimer,
}

/// What of an inode's attributes says its data or size changed.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime: Timestamp,
    ctime: Timestamp,
}

impl Stamp {
    fn of(a: &Attr) -> Stamp {
        Stamp {
            size: a.size,
            mtime: a.mtime,
            ctime: a.ctime,
        }
    }
}

/// What the adapter knows of an inode the kernel holds.
struct Known {
    generation: u64,
    /// Entry replies not yet matched by `forget` (the kernel's lookup count).
    lookups: u64,
}

fn errno(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.raw())
}

fn system_time(t: Timestamp) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(t.nsecs));
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.secs.unsigned_abs()) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(t.secs.unsigned_abs()) + nanos
    }
}

fn timestamp(t: SystemTime) -> Timestamp {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timestamp {
            secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nsecs: d.subsec_nanos(),
        },
        Err(e) => {
            // Before the epoch: floor to whole seconds, positive nanoseconds.
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() == 0 {
                Timestamp {
                    secs: -secs,
                    nsecs: 0,
                }
            } else {
                Timestamp {
                    secs: -secs - 1,
                    nsecs: 1_000_000_000 - d.subsec_nanos(),
                }
            }
        }
    }
}

fn kind(k: FileType) -> fuser::FileType {
    match k {
        FileType::Regular => fuser::FileType::RegularFile,
        FileType::Directory => fuser::FileType::Directory,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::Fifo => fuser::FileType::NamedPipe,
        FileType::Socket => fuser::FileType::Socket,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.fh.ino),
        size: a.size,
        blocks: a.used.div_ceil(512),
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: system_time(a.ctime),
        kind: kind(a.kind),
        // `mode` holds only the 12 permission bits.
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        // Linux's `dev_t` as FUSE carries it (32 bits: new_encode_dev).
        rdev: u32::try_from(a.rdev).unwrap_or(0),
        blksize: byzfs_fs::data::BLOCK_SIZE as u32,
        flags: 0,
    }
}

/// A negative entry (inode 0): "no such name", cached by the kernel for the reply's timeout.
fn negative_entry() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: fuser::FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

/// How often a hard mount reports an operation still waiting for the cluster.
const STILL_WAITING: Duration = Duration::from_secs(10);

/// Runs `op` on the cluster with `cred` (no bookkeeping). Waits until the cluster answers,
/// or up to the soft mount's timeout; the client retransmits meanwhile and its links
/// reconnect by themselves, so replicas killed and restarted never surface as errors. An
/// operation that grows a file the replicas are still shrinking (`EBUSY`) is sent again
/// once that file's old tail is gone, and one that may leave space to give back wakes the
/// background reclaim (`reclaim.rs`).
fn invoke(inner: &mut Inner, cred: &Credentials, op: Op) -> FsResult {
    let queues = reclaim::may_queue(&op);
    let r = match reclaim::grows(&op) {
        Some(fh) => reclaim::invoke_growing(inner, cred, fh, op),
        None => invoke_once(inner, cred, op),
    };
    inner.reclaim.after(queues && r.is_ok());
    r
}

/// [`invoke`] without its `EBUSY` retry and reclaim bookkeeping.
fn invoke_once(inner: &mut Inner, cred: &Credentials, op: Op) -> FsResult {
    // Writes held back go first: every operation sees them (they are taken, so the
    // recursive call sends nothing else first). The recall poll reads no file: it would
    // otherwise send them every few milliseconds while delegations are held.
    if !matches!(op, Op::Recalls) {
        if let Some(p) = inner.gather.take() {
            send_held(inner, p);
        }
    }
    // The flag is only a hint: replicas decide from the operation itself what is read-only.
    let read_only = op.is_read_only() && !inner.strict;
    let name = op.name();
    tracing::trace!(op = name, "send");
    let began = std::time::Instant::now();
    let effect = Effect::of(&op);
    let bytes = Request::new(cred.clone(), op).encode();
    let timeout = inner.timeout;
    let client = &mut inner.client;
    let out = inner.rt.block_on(async {
        let start = tokio::time::Instant::now();
        let call = client.invoke(bytes, read_only);
        tokio::pin!(call);
        loop {
            let waited = start.elapsed();
            let nap = match timeout {
                Some(t) if waited >= t => return None,
                Some(t) => STILL_WAITING.min(t - waited),
                None => STILL_WAITING,
            };
            tokio::select! {
                r = &mut call => return Some(r),
                () = tokio::time::sleep(nap) => {
                    let waited = start.elapsed().as_secs();
                    if timeout.is_none_or(|t| start.elapsed() < t) {
                        tracing::warn!(op = name, waited_s = waited,
                            "still waiting for the cluster to answer (hard mount: retrying)");
                    }
                }
            }
        }
    });
    let tally = inner.sent.entry(name).or_default();
    tally.0 += 1;
    tally.1 += began.elapsed();
    let result = match out {
        Some(Ok(b)) => decode_result(&b).unwrap_or(Err(Errno::EIO)),
        Some(Err(e)) => {
            tracing::warn!(op = name, error = %e, "invoke failed");
            Err(Errno::EIO)
        }
        None => {
            tracing::warn!(op = name, "no reply within the soft mount's timeout: EIO");
            Err(Errno::EIO)
        }
    };
    inner
        .attrs
        .record(effect, &result, std::time::Instant::now());
    result
}

/// Sends writes held back (`gather.rs`); a failure is kept for the file's next `close` or
/// `fsync`.
fn send_held(inner: &mut Inner, p: gather::Pending) {
    let ino = p.fh.ino;
    let (cred, op) = p.into_op();
    match invoke(inner, &cred, op) {
        Ok(Reply::Write { attr, .. } | Reply::Attr(attr)) => {
            inner.stamps.insert(ino, Stamp::of(&attr));
        }
        Ok(_) => inner.gather.failed(ino, Errno::EIO),
        Err(e) => {
            tracing::debug!(ino, %e, "held-back writes failed; reported at close or fsync");
            inner.gather.failed(ino, e);
        }
    }
}

/// The background thread's pause between reclaim steps: the mount's lock is free
/// meanwhile, so a user's operation waits behind at most one step.
const RECLAIM_PAUSE: Duration = Duration::from_millis(1);

/// How long the background thread drives the client's links at each tick.
const LINK_DRIVE: Duration = Duration::from_millis(2);

/// While the mount lives, every quarter of [`gather::MAX_AGE`]: sends held-back writes
/// older than it, renews the lock lease when due (`locks.rs`), and drives the client's links
/// for [`LINK_DRIVE`] (reconnections, replies that arrived late), which otherwise run only
/// inside an operation. While it holds lock delegations, every
/// [`delegations::POLL_EVERY`] (`nudge` wakes it when one arrives): gives back those
/// recalled or idle.
fn spawn_background(inner: std::sync::Weak<Mutex<Inner>>, nudge: std::sync::mpsc::Receiver<()>) {
    let tick = gather::MAX_AGE / 4;
    let cred = own_credentials();
    let spawned = std::thread::Builder::new()
        .name("byzfs-mount-background".into())
        .spawn(move || {
            let mut nap = tick;
            let mut chores = std::time::Instant::now();
            let mut sweep = Sweep::default();
            loop {
                // Nudged or timed out alike.
                if let Err(std::sync::mpsc::RecvTimeoutError::Disconnected) =
                    nudge.recv_timeout(nap)
                {
                    std::thread::sleep(nap);
                }
                let Some(inner) = inner.upgrade() else {
                    return; // Unmounted.
                };
                let Ok(mut inner) = inner.lock() else {
                    return;
                };
                delegations::poll(&mut inner, &cred);
                // One reclaim step per wake-up, the lock released in between.
                let reclaiming = reclaim::step(&mut inner, &cred);
                if chores.elapsed() >= tick {
                    chores = std::time::Instant::now();
                    if let Some(p) = inner.gather.take_stale() {
                        send_held(&mut inner, p);
                    }
                    locks::renew_if_due(&mut inner, &cred);
                    sweep.step(&mut inner, &cred);
                    inner
                        .rt
                        .block_on(async { tokio::time::sleep(LINK_DRIVE).await });
                }
                nap = if reclaiming {
                    RECLAIM_PAUSE
                } else if inner.delegs.any() {
                    delegations::POLL_EVERY
                } else {
                    tick.saturating_sub(chores.elapsed())
                        .max(delegations::POLL_EVERY)
                };
            }
        });
    if let Err(e) = spawned {
        // Writes are then sent by the next operation, close or fsync only, and links run
        // only inside operations.
        tracing::warn!(%e, "cannot start the mount's background thread");
    }
}

/// Where the orphan directory's sweep stands ([`byzfs_fs::orphan`]): one `SweepOrphans` per
/// background tick while one is under way (so the mount's lock is never held for long), a
/// new one [`SWEEP_EVERY`], the first at once.
#[derive(Default)]
struct Sweep {
    /// Under way: go on after this cookie.
    at: Option<u64>,
    /// When the next one starts (`None`: now).
    next: Option<std::time::Instant>,
}

impl Sweep {
    fn step(&mut self, inner: &mut Inner, cred: &Credentials) {
        let now = std::time::Instant::now();
        if self.at.is_none() && self.next.is_some_and(|t| now < t) {
            return;
        }
        let after = self.at.unwrap_or(0);
        self.at = match invoke(inner, cred, Op::SweepOrphans { after }) {
            Ok(Reply::Swept { removed, next }) => {
                if removed > 0 {
                    tracing::info!(removed, "swept files that dead mounts left hidden");
                }
                next
            }
            Ok(_) => None,
            Err(e) => {
                tracing::debug!(%e, "cannot sweep the orphan directory");
                None
            }
        };
        if self.at.is_none() {
            self.next = Some(now + SWEEP_EVERY);
        }
    }
}

/// Answers a `getxattr`/`listxattr` with `value`'s size (`size` 0), the value, or `ERANGE`
/// if it is larger than the caller's buffer.
fn xattr_reply(r: FsResult, size: u32, reply: fuser::ReplyXattr) {
    match r {
        Ok(Reply::Xattr(v)) => match u32::try_from(v.len()) {
            Ok(n) if size == 0 => reply.size(n),
            Ok(n) if n <= size => reply.data(&v),
            _ => reply.error(fuser::Errno::ERANGE),
        },
        Ok(_) => reply.error(fuser::Errno::EIO),
        Err(e) => reply.error(errno(e)),
    }
}

/// NFS-style silly rename: if `dir/name` is a file with one link that this mount has open,
/// renames it to a hidden name instead of removing it, so the open file keeps working; it is
/// removed at its last release. `None` if the name is not such a file (remove it normally).
fn hide_if_open(
    inner: &mut Inner,
    cred: &Credentials,
    dir: FileHandle,
    name: &[u8],
) -> Option<FsResult> {
    if inner.open.is_empty() {
        return None;
    }
    let found = invoke(
        inner,
        cred,
        Op::Lookup {
            dir,
            name: name.to_vec(),
        },
    );
    let Ok(Reply::Entry(a)) = found else {
        return None;
    };
    if a.kind == FileType::Directory || a.nlink != 1 || !inner.open.contains_key(&a.fh.ino) {
        return None;
    }
    let what = format!("{:x}-{:x}", a.fh.ino, a.fh.generation);
    let hidden = byzfs_fs::orphan::hidden_name(inner.client.id(), &what);
    if let Some(r) = to_orphans(inner, cred, (dir, name), &hidden) {
        inner.silly.insert(a.fh.ino, r);
        return Some(Ok(Reply::Done));
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
    let r = invoke(inner, cred, op);
    if r.is_ok() {
        inner.silly.insert(a.fh.ino, (dir, hidden));
    }
    Some(r)
}

/// The directory at the root that keeps the files this and other mounts hide (removed while
/// open, `O_TMPFILE`), so that the directories they came from can be listed and removed as
/// on a local file system: created on first use by the mount process, mode 1777 as `/tmp`.
/// `None` if it cannot be had (a file of that name, or no right to create it).
fn orphan_dir(inner: &mut Inner) -> Option<FileHandle> {
    if let Some(known) = inner.orphans {
        return known;
    }
    let own = own_credentials();
    let lookup = |inner: &mut Inner| match invoke(
        inner,
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
                inner,
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
    inner.orphans = Some(fh);
    fh
}

/// Moves `from` (a directory and a name) to `hidden` in the orphan directory; where the
/// file now is, or `None` if it stayed (no orphan directory, or the move failed).
fn to_orphans(
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
    match invoke(inner, cred, op) {
        Ok(_) => Some((orphans, hidden.to_vec())),
        Err(e) => {
            // Perhaps removed by someone: look it up again next time.
            tracing::debug!(%e, "cannot move a hidden file to the orphan directory");
            inner.orphans = None;
            None
        }
    }
}

/// The mount process's own credentials (for clean-up at unmount).
fn own_credentials() -> Credentials {
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

impl ByzFuse {
    /// The caller's credentials, supplementary groups from `/proc/<pid>/status` (cached
    /// for a second per process: `groups.rs`).
    fn credentials(&self, req: &fuser::Request) -> Credentials {
        let (uid, gid) = (req.uid(), req.gid());
        Credentials {
            uid,
            gid,
            groups: self
                .groups
                .get(req.pid(), uid, gid, std::time::Instant::now()),
        }
    }

    /// Runs `op` on the cluster as the caller. An entry reply gives the kernel a reference to
    /// an inode (its lookup count grows by one), so the inode's generation is remembered
    /// until the matching `forget`.
    fn call(&self, req: &fuser::Request, op: Op) -> FsResult {
        let cred = self.credentials(req);
        let Ok(mut inner) = self.inner.lock() else {
            return Err(Errno::EIO);
        };
        let result = invoke(&mut inner, &cred, op);
        if let Some(a) = result.as_ref().ok().and_then(Reply::entry) {
            let k = inner.known.entry(a.fh.ino).or_insert(Known {
                generation: a.fh.generation,
                lookups: 0,
            });
            k.generation = a.fh.generation;
            k.lookups += 1;
        }
        if let Ok(
            Reply::Entry(a)
            | Reply::Made { entry: a, .. }
            | Reply::Attr(a)
            | Reply::Write { attr: a, .. },
        ) = &result
        {
            inner.stamps.insert(a.fh.ino, Stamp::of(a));
        }
        result
    }

    /// Holds a `setattr` back with the caller's pending writes to the file (see
    /// `gather.rs`), and returns the attributes it will give; `None` to send it now.
    fn hold_setattr(&self, req: &fuser::Request, fh: FileHandle, set: &SetAttr) -> Option<Attr> {
        let cred = self.credentials(req);
        let mut inner = self.inner.lock().ok()?;
        if !inner.gather_writes || inner.gather.error(fh.ino).is_some() {
            return None;
        }
        let now = timestamp(SystemTime::now());
        inner.gather.hold_set(fh, &cred, set, now)
    }

    /// The service handle of FUSE inode `ino`.
    fn fh(&self, ino: INodeNo) -> Result<FileHandle, fuser::Errno> {
        let inner = self.inner.lock().map_err(|_| fuser::Errno::EIO)?;
        inner
            .known
            .get(&ino.0)
            .map(|k| FileHandle {
                ino: ino.0,
                generation: k.generation,
            })
            .ok_or(fuser::Errno::ESTALE)
    }

    /// The attributes `fstat` gets for directory `ino`, open here and removed (by a rename
    /// over it or by another client): the last ones seen, with no links, as a local file
    /// system keeps a removed directory for its open descriptors.
    fn removed_open_dir(&self, ino: u64) -> Option<FileAttr> {
        let inner = self.inner.lock().ok()?;
        let (_, a) = inner.open_dirs.get(&ino)?;
        let mut fa = file_attr(a);
        fa.nlink = 0;
        Some(fa)
    }

    /// `a` as the kernel should see it: a file this mount removed while open (now under a
    /// silly name until its last close) shows one link fewer, so `fstat` on the open file
    /// says `nlink` 0 as on a local file system.
    fn attr_of(&self, a: &Attr) -> FileAttr {
        let mut fa = file_attr(a);
        if let Ok(inner) = self.inner.lock() {
            if inner.silly.contains_key(&a.fh.ino) {
                fa.nlink = fa.nlink.saturating_sub(1);
            }
        }
        fa
    }

    fn entry(&self, req: &fuser::Request, op: Op, reply: ReplyEntry) {
        match self.call(req, op) {
            Ok(Reply::Entry(a) | Reply::Made { entry: a, .. }) => {
                reply.entry(&self.ttl, &self.attr_of(&a), Generation(a.fh.generation))
            }
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// If directory `dir/name` holds only hidden names of other mounts (files those mounts
    /// hid there, where the orphan directory could not be had), removes those whose mount's
    /// lease has lapsed ([`Op::SweepDir`]); whether any went. A directory with any other
    /// entry is left alone after one listing, so a plain `ENOTEMPTY` costs little.
    fn sweep_hidden_in(&self, req: &fuser::Request, dir: FileHandle, name: &[u8]) -> bool {
        let cred = self.credentials(req);
        let Ok(mut inner) = self.inner.lock() else {
            return false;
        };
        let me = inner.client.id();
        let lookup = Op::Lookup {
            dir,
            name: name.to_vec(),
        };
        let Ok(Reply::Entry(a)) = invoke(&mut inner, &cred, lookup) else {
            return false;
        };
        let mut cookie = 0;
        loop {
            let op = Op::ReadDir {
                dir: a.fh,
                cookie,
                max_entries: READDIR_BATCH,
            };
            let Ok(Reply::ReadDir { entries, eof }) = invoke(&mut inner, &cred, op) else {
                return false;
            };
            let others = |e: &byzfs_fs::op::DirEntry| {
                e.name == b"."
                    || e.name == b".."
                    || byzfs_fs::orphan::client_of(&e.name).is_some_and(|c| c != me)
            };
            if !entries.iter().all(others) {
                return false;
            }
            match entries.last() {
                Some(e) if !eof => cookie = e.cookie,
                _ => break,
            }
        }
        let (mut removed, mut after) = (0, 0);
        loop {
            let op = Op::SweepDir { dir: a.fh, after };
            match invoke(&mut inner, &cred, op) {
                Ok(Reply::Swept { removed: n, next }) => {
                    removed += n;
                    match next {
                        Some(c) => after = c,
                        None => break,
                    }
                }
                other => {
                    tracing::debug!(?other, "cannot sweep a directory being removed");
                    break;
                }
            }
        }
        if removed > 0 {
            tracing::info!(
                removed,
                "swept files that dead mounts left hidden in a directory"
            );
        }
        removed > 0
    }

    fn done(&self, req: &fuser::Request, op: Op, reply: ReplyEmpty) {
        match self.call(req, op) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }
}

/// Unwraps a handle or answers the error.
macro_rules! fh {
    ($self:ident, $ino:expr, $reply:ident) => {
        match $self.fh($ino) {
            Ok(fh) => fh,
            Err(e) => return $reply.error(e),
        }
    };
}

impl Filesystem for ByzFuse {
    /// Asks the kernel to leave clearing set-user-ID/set-group-ID on write, truncate and
    /// chown to the file system (the replicas do it, deterministically). Without it the
    /// kernel sends a `chmod` as the writer before a non-owner's write to a set-user-ID
    /// file, which the replicas refuse (only the owner may chmod), so the write failed
    /// with EPERM (found by a by-hand POSIX check).
    fn init(
        &mut self,
        _req: &fuser::Request,
        config: &mut fuser::KernelConfig,
    ) -> std::io::Result<()> {
        if let Err(missing) = config.add_capabilities(fuser::InitFlags::FUSE_HANDLE_KILLPRIV) {
            tracing::warn!(?missing, "the kernel cannot leave suid/sgid clearing to us");
        }
        // Locks go to the replicas, shared by every mount (`locks.rs`).
        let lock_flags = fuser::InitFlags::FUSE_POSIX_LOCKS | fuser::InitFlags::FUSE_FLOCK_LOCKS;
        if let Err(missing) = config.add_capabilities(lock_flags) {
            tracing::warn!(
                ?missing,
                "locks stay local to this mount: the kernel cannot pass them"
            );
        }
        Ok(())
    }

    /// The kernel dropped `nlookup` references to `ino`; at zero the adapter forgets it.
    fn forget(&self, _req: &fuser::Request, ino: INodeNo, nlookup: u64) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if ino.0 == byzfs_fs::handle::ROOT_INO {
            return;
        }
        if let Some(k) = inner.known.get_mut(&ino.0) {
            k.lookups = k.lookups.saturating_sub(nlookup);
            if k.lookups == 0 {
                inner.known.remove(&ino.0);
                inner.stamps.remove(&ino.0);
                inner.opened.remove(&ino.0);
                inner.attrs.forget(ino.0);
            }
        }
    }

    fn lookup(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let dir = fh!(self, parent, reply);
        let name = name.as_bytes().to_vec();
        match self.call(req, Op::Lookup { dir, name }) {
            Ok(Reply::Entry(a)) => {
                reply.entry(&self.ttl, &file_attr(&a), Generation(a.fh.generation))
            }
            Ok(_) => reply.error(fuser::Errno::EIO),
            // Inode 0 with a timeout: the kernel caches the miss for the cache timeout (a compiler's
            // include path search repeats the same misses thousands of times).
            Err(Errno::ENOENT) => reply.entry(&self.ttl, &negative_entry(), Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn getattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: Option<fuser::FileHandle>,
        reply: ReplyAttr,
    ) {
        let fh = fh!(self, ino, reply);
        let cached = self.inner.lock().ok().and_then(|i| {
            i.attrs
                .fresh(ino.0, self.ttl)
                .map(|(a, left)| (a.clone(), left))
        });
        if let Some((a, left)) = cached {
            return reply.attr(&left, &self.attr_of(&a));
        }
        match self.call(req, Op::GetAttr { fh }) {
            Ok(Reply::Attr(a)) => {
                if let Ok(mut inner) = self.inner.lock() {
                    if let Some((_, last)) = inner.open_dirs.get_mut(&ino.0) {
                        *last = a.clone();
                    }
                }
                reply.attr(&self.ttl, &self.attr_of(&a))
            }
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(Errno::ESTALE) => match self.removed_open_dir(ino.0) {
                Some(fa) => reply.attr(&Duration::ZERO, &fa),
                None => reply.error(fuser::Errno::ESTALE),
            },
            Err(e) => reply.error(errno(e)),
        }
    }

    /// Counts an open directory and keeps its attributes (see [`Inner::open_dirs`]): the
    /// lookup that found it usually left them in the cache, else they are fetched.
    fn opendir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _flags: OpenFlags,
        reply: fuser::ReplyOpen,
    ) {
        let fh = fh!(self, ino, reply);
        let known = self
            .inner
            .lock()
            .ok()
            .and_then(|i| i.attrs.last(ino.0).filter(|a| a.fh == fh).cloned());
        let attr = match known {
            Some(a) => a,
            None => match self.call(req, Op::GetAttr { fh }) {
                Ok(Reply::Attr(a)) => a,
                Ok(_) => return reply.error(fuser::Errno::EIO),
                Err(e) => return reply.error(errno(e)),
            },
        };
        if let Ok(mut inner) = self.inner.lock() {
            let entry = inner.open_dirs.entry(ino.0).or_insert((0, attr.clone()));
            entry.0 += 1;
            entry.1 = attr;
        }
        reply.opened(fuser::FileHandle(0), fuser::FopenFlags::empty());
    }

    fn releasedir(
        &self,
        _req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        if let Ok(mut inner) = self.inner.lock() {
            if let Some((n, _)) = inner.open_dirs.get_mut(&ino.0) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    inner.open_dirs.remove(&ino.0);
                }
            }
        }
        reply.ok();
    }

    fn setattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<fuser::FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let fh = fh!(self, ino, reply);
        let time = |t: TimeOrNow| match t {
            TimeOrNow::Now => SetTime::Now,
            TimeOrNow::SpecificTime(t) => SetTime::At(timestamp(t)),
        };
        let set = SetAttr {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(time),
            mtime: mtime.map(time),
        };
        tracing::trace!(ino = ino.0, ?set, "setattr");
        if let Some(a) = self.hold_setattr(req, fh, &set) {
            // Valid for no time: the next `stat` asks again and sends it first.
            return reply.attr(&Duration::ZERO, &self.attr_of(&a));
        }
        match self.call(req, Op::SetAttr { fh, set }) {
            Ok(Reply::Attr(a)) => reply.attr(&self.ttl, &self.attr_of(&a)),
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readlink(&self, req: &fuser::Request, ino: INodeNo, reply: ReplyData) {
        let fh = fh!(self, ino, reply);
        match self.call(req, Op::ReadLink { fh }) {
            Ok(Reply::ReadLink(t)) => reply.data(&t),
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let dir = fh!(self, parent, reply);
        let name = name.as_bytes().to_vec();
        let perm = mode & !umask & 0o7777;
        let op = match mode & S_IFMT {
            S_IFREG => Op::Create {
                dir,
                name,
                mode: perm,
                exclusive: true,
            },
            S_IFIFO => Op::Mknod {
                dir,
                name,
                kind: SpecialKind::Fifo,
                mode: perm,
            },
            S_IFSOCK => Op::Mknod {
                dir,
                name,
                kind: SpecialKind::Socket,
                mode: perm,
            },
            S_IFCHR => Op::Mknod {
                dir,
                name,
                kind: SpecialKind::CharDevice(u64::from(rdev)),
                mode: perm,
            },
            S_IFBLK => Op::Mknod {
                dir,
                name,
                kind: SpecialKind::BlockDevice(u64::from(rdev)),
                mode: perm,
            },
            _ => return reply.error(fuser::Errno::EINVAL),
        };
        self.entry(req, op, reply);
    }

    fn mkdir(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let dir = fh!(self, parent, reply);
        let op = Op::Mkdir {
            dir,
            name: name.as_bytes().to_vec(),
            mode: mode & !umask & 0o7777,
        };
        self.entry(req, op, reply);
    }

    fn unlink(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let dir = fh!(self, parent, reply);
        let name = name.as_bytes().to_vec();
        let cred = self.credentials(req);
        let Ok(mut inner) = self.inner.lock() else {
            return reply.error(fuser::Errno::EIO);
        };
        let r = match hide_if_open(&mut inner, &cred, dir, &name) {
            Some(r) => r,
            None => invoke(&mut inner, &cred, Op::Remove { dir, name }),
        };
        match r {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rmdir(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let dir = fh!(self, parent, reply);
        let name = name.as_bytes().to_vec();
        let op = Op::Rmdir {
            dir,
            name: name.clone(),
        };
        match self.call(req, op.clone()) {
            Ok(_) => reply.ok(),
            // Files dead mounts hid there may be all it holds: sweep them, and try again.
            Err(Errno::ENOTEMPTY) if self.sweep_hidden_in(req, dir, &name) => {
                self.done(req, op, reply)
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn symlink(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let dir = fh!(self, parent, reply);
        let op = Op::Symlink {
            dir,
            name: link_name.as_bytes().to_vec(),
            target: target.as_os_str().as_bytes().to_vec(),
        };
        self.entry(req, op, reply);
    }

    fn rename(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let from_dir = fh!(self, parent, reply);
        let to_dir = fh!(self, newparent, reply);
        let (from_name, to_name) = (name.as_bytes().to_vec(), newname.as_bytes().to_vec());
        let cred = self.credentials(req);
        let Ok(mut inner) = self.inner.lock() else {
            return reply.error(fuser::Errno::EIO);
        };
        // Neither flag removes the target, so only a plain rename needs the silly rename.
        let op = if flags == RenameFlags::RENAME_EXCHANGE {
            Op::Exchange {
                a_dir: from_dir,
                a_name: from_name,
                b_dir: to_dir,
                b_name: to_name,
            }
        } else if flags == RenameFlags::RENAME_NOREPLACE {
            Op::RenameNoReplace {
                from_dir,
                from_name,
                to_dir,
                to_name,
            }
        } else if flags.is_empty() {
            // A file open here that the rename would replace is hidden first, as on unlink.
            if (from_dir, &from_name) != (to_dir, &to_name) {
                if let Some(Err(e)) = hide_if_open(&mut inner, &cred, to_dir, &to_name) {
                    return reply.error(errno(e));
                }
            }
            Op::Rename {
                from_dir,
                from_name,
                to_dir,
                to_name,
            }
        } else {
            // RENAME_WHITEOUT (overlayfs) or a combination.
            return reply.error(fuser::Errno::EINVAL);
        };
        match invoke(&mut inner, &cred, op) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn link(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let fh = fh!(self, ino, reply);
        let dir = fh!(self, newparent, reply);
        let name = newname.as_bytes().to_vec();
        self.entry(req, Op::Link { fh, dir, name }, reply);
    }

    fn read(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let fh = fh!(self, ino, reply);
        let op = Op::Read {
            fh,
            offset,
            count: size.min(MAX_IO),
        };
        match self.call(req, op) {
            Ok(Reply::Read { data, .. }) => reply.data(&data),
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let fh = fh!(self, ino, reply);
        let cred = self.credentials(req);
        {
            let Ok(mut inner) = self.inner.lock() else {
                return reply.error(fuser::Errno::EIO);
            };
            if let Some(e) = inner.gather.error(ino.0) {
                return reply.error(errno(e));
            }
            let end = offset.checked_add(data.len() as u64);
            let fits = end.is_some_and(|e| e <= byzfs_fs::attr::MAX_FILE_SIZE);
            // EFBIG is known here: such a write goes at once and fails at once.
            if inner.gather_writes && fits && inner.gather.may_hold(data.len()) {
                if !inner.gather.joins(fh, &cred, data.len()) {
                    if let Some(p) = inner.gather.take() {
                        send_held(&mut inner, p);
                    }
                }
                let base = inner.attrs.fresh(ino.0, self.ttl).map(|(a, _)| a.clone());
                let now = timestamp(SystemTime::now());
                inner
                    .gather
                    .hold(fh, &cred, offset, data, base.as_ref(), now);
                // Its size and times change when the writes are applied.
                inner.attrs.forget(ino.0);
                // `data.len() <= write_chunk <= MAX_IO`, a `u32`.
                return reply.written(data.len() as u32);
            }
        }
        let mut written: u32 = 0;
        for chunk in data.chunks(self.write_chunk) {
            let op = Op::Write {
                fh,
                offset: offset + u64::from(written),
                data: chunk.to_vec(),
            };
            match self.call(req, op) {
                Ok(Reply::Write { count, .. }) => written += count,
                Ok(_) => return reply.error(fuser::Errno::EIO),
                Err(e) if written == 0 => return reply.error(errno(e)),
                // A short write: report what was written.
                Err(_) => break,
            }
        }
        reply.written(written);
    }

    /// `close`: sends the file's held-back writes and reports their error, or an earlier
    /// one of its writes (`gather.rs`); then drops the closing process's locks on the file.
    fn flush(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        let cred = self.credentials(req);
        let Ok(mut inner) = self.inner.lock() else {
            return reply.error(fuser::Errno::EIO);
        };
        if inner.gather.pending_ino() == Some(ino.0) {
            if let Some(p) = inner.gather.take() {
                send_held(&mut inner, p);
            }
        }
        // POSIX: a process's close of a file drops its locks on it, after its writes.
        locks::release(&mut inner, &cred, ino.0, lock_owner.0);
        match inner.gather.take_error(ino.0) {
            Some(e) => reply.error(errno(e)),
            None => reply.ok(),
        }
    }

    /// Extended attributes (`user.` and `trusted.`, see `byzfs_fs::xattr`). `security.`
    /// names are answered here: the replicas store none (setting one gets `EOPNOTSUPP`), and
    /// the kernel asks for `security.capability` before writes.
    fn getxattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        name: &OsStr,
        size: u32,
        reply: fuser::ReplyXattr,
    ) {
        let name = name.as_bytes().to_vec();
        if name.starts_with(b"security.") {
            return reply.error(fuser::Errno::ENODATA);
        }
        let fh = fh!(self, ino, reply);
        xattr_reply(self.call(req, Op::GetXattr { fh, name }), size, reply);
    }

    fn listxattr(&self, req: &fuser::Request, ino: INodeNo, size: u32, reply: fuser::ReplyXattr) {
        let fh = fh!(self, ino, reply);
        xattr_reply(self.call(req, Op::ListXattr { fh }), size, reply);
    }

    fn setxattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        let how = match flags {
            0 => XattrSet::Any,
            XATTR_CREATE => XattrSet::Create,
            XATTR_REPLACE => XattrSet::Replace,
            _ => return reply.error(fuser::Errno::EINVAL),
        };
        if position != 0 {
            return reply.error(fuser::Errno::EINVAL);
        }
        let fh = fh!(self, ino, reply);
        let op = Op::SetXattr {
            fh,
            name: name.as_bytes().to_vec(),
            value: value.to_vec(),
            how,
        };
        self.done(req, op, reply);
    }

    fn removexattr(&self, req: &fuser::Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let fh = fh!(self, ino, reply);
        let name = name.as_bytes().to_vec();
        self.done(req, Op::RemoveXattr { fh, name }, reply);
    }

    /// `fallocate(2)`: mode 0 grows the file at the replicas ([`Op::Allocate`]; space is not
    /// reserved); `FALLOC_FL_KEEP_SIZE` alone changes nothing a reader can see, so it is
    /// answered here; hole punching and the other modes get `EOPNOTSUPP`.
    /// No ioctls here: `ENOTTY`, as a local file system answers the ones it does not know
    /// (`isatty` on an output file, `cp`'s clone attempt). fuser's default answer logged a
    /// warning for each, 1.4 % of the mount's CPU in Andrew (docs/BENCHMARKS.md "Session
    /// 13").
    fn ioctl(
        &self,
        _req: &fuser::Request,
        _ino: INodeNo,
        _fh: fuser::FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(fuser::Errno::ENOTTY);
    }

    fn fallocate(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let fh = fh!(self, ino, reply);
        match mode {
            0 => {
                let Some(end) = offset.checked_add(length) else {
                    return reply.error(fuser::Errno::EFBIG);
                };
                match self.call(req, Op::Allocate { fh, end }) {
                    Ok(Reply::Attr(_)) => reply.ok(),
                    Ok(_) => reply.error(fuser::Errno::EIO),
                    Err(e) => reply.error(errno(e)),
                }
            }
            FALLOC_FL_KEEP_SIZE => reply.ok(),
            m if m == ranges::PUNCH_HOLE | ranges::KEEP_SIZE
                || m == ranges::ZERO_RANGE
                || m == ranges::ZERO_RANGE | ranges::KEEP_SIZE =>
            {
                let keep = m & ranges::KEEP_SIZE != 0;
                match ranges::punch(self, req, fh, offset, length, keep) {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(errno(e)),
                }
            }
            _ => reply.error(fuser::Errno::EOPNOTSUPP),
        }
    }

    /// `SEEK_DATA` and `SEEK_HOLE` (the kernel answers the other kinds itself).
    fn lseek(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        offset: i64,
        whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        let fh = fh!(self, ino, reply);
        match ranges::seek(self, req, fh, offset, whence) {
            Ok(at) => reply.offset(at),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// A copy at the replicas: the bytes do not travel.
    fn copy_file_range(
        &self,
        req: &fuser::Request,
        ino_in: INodeNo,
        _fh_in: fuser::FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        _fh_out: fuser::FileHandle,
        offset_out: u64,
        len: u64,
        flags: fuser::CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        if !flags.is_empty() {
            return reply.error(fuser::Errno::EINVAL);
        }
        let from = fh!(self, ino_in, reply);
        let to = fh!(self, ino_out, reply);
        match ranges::copy(self, req, (from, offset_in), (to, offset_out), len) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// Every operation is durable at the replicas when it returns, so a directory's `fsync`
    /// is a file's: held-back writes are sent first.
    fn fsyncdir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync(req, ino, fh, datasync, reply);
    }

    fn fsync(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let fh = fh!(self, ino, reply);
        // The Fsync operation sends the held-back writes first (`invoke`).
        let synced = self.call(req, Op::Fsync { fh });
        let held = self
            .inner
            .lock()
            .ok()
            .and_then(|mut i| i.gather.take_error(ino.0));
        match (held, synced) {
            (Some(e), _) | (None, Err(e)) => reply.error(errno(e)),
            (None, Ok(_)) => reply.ok(),
        }
    }

    fn readdir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let dir = fh!(self, ino, reply);
        // Files this mount keeps under hidden names (removed while open, `O_TMPFILE`) in
        // their own directory, where the orphan directory was not to be had, are in no
        // directory as its users see it. The orphan directory itself lists them.
        let hidden: Vec<(u64, Vec<u8>)> = match self.inner.lock() {
            Ok(inner) => inner
                .silly
                .iter()
                .filter(|(_, (d, _))| *d == dir && inner.orphans != Some(Some(dir)))
                .map(|(ino, (_, name))| (*ino, name.clone()))
                .collect(),
            Err(_) => return reply.error(fuser::Errno::EIO),
        };
        // FUSE's offset is the cookie of the last entry the kernel consumed (0 at first).
        let mut cookie = offset;
        loop {
            let op = Op::ReadDir {
                dir,
                cookie,
                max_entries: READDIR_BATCH,
            };
            match self.call(req, op) {
                Ok(Reply::ReadDir { entries, eof }) => {
                    for e in entries {
                        if hidden.iter().any(|(i, n)| *i == e.fh.ino && *n == e.name) {
                            cookie = e.cookie;
                            continue;
                        }
                        let name = OsStr::from_bytes(&e.name);
                        if reply.add(INodeNo(e.fh.ino), e.cookie, kind(e.kind), name) {
                            // The kernel's buffer is full; it asks again from here.
                            return reply.ok();
                        }
                        cookie = e.cookie;
                    }
                    if eof {
                        return reply.ok();
                    }
                }
                Ok(_) => return reply.error(fuser::Errno::EIO),
                // Open here, removed elsewhere: Linux lists a removed directory as ENOENT.
                Err(Errno::ESTALE) if self.removed_open_dir(ino.0).is_some() => {
                    return reply.error(fuser::Errno::ENOENT)
                }
                Err(e) => return reply.error(errno(e)),
            }
        }
    }

    fn statfs(&self, req: &fuser::Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.call(req, Op::StatFs) {
            Ok(Reply::StatFs(s)) => reply.statfs(
                s.blocks,
                s.blocks_free,
                s.blocks_free,
                s.files,
                s.files_free,
                s.block_size,
                s.name_max,
                s.block_size,
            ),
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn access(&self, req: &fuser::Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let fh = fh!(self, ino, reply);
        let mask = u32::try_from(mask.bits()).unwrap_or(0) & 7;
        self.done(req, Op::Access { fh, mask }, reply);
    }

    fn create(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let dir = fh!(self, parent, reply);
        let op = Op::Create {
            dir,
            name: name.as_bytes().to_vec(),
            mode: mode & !umask & 0o7777,
            exclusive: flags & O_EXCL != 0,
        };
        match self.call(req, op) {
            Ok(Reply::Made { entry: a, .. }) => {
                if let Ok(mut inner) = self.inner.lock() {
                    *inner.open.entry(a.fh.ino).or_default() += 1;
                }
                reply.created(
                    &self.ttl,
                    &file_attr(&a),
                    Generation(a.fh.generation),
                    fuser::FileHandle(0),
                    fuser::FopenFlags::empty(),
                )
            }
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// `open(dir, O_TMPFILE)`: a file under a hidden name, handled from the start as a file
    /// removed while open (see the module docs).
    fn tmpfile(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let dir = fh!(self, parent, reply);
        // The lease first: from its creation the file has a hidden name, which another
        // mount's sweep (`Op::SweepDir`) may take if this mount holds no current lease.
        let cred = self.credentials(req);
        match self.inner.lock() {
            Ok(mut inner) => locks::hold_for_orphans(&mut inner, &cred),
            Err(_) => return reply.error(fuser::Errno::EIO),
        }
        // A name another mount's tmpfile could take too is skipped: the create is exclusive.
        for _ in 0..TMPFILE_TRIES {
            let n = match self.inner.lock() {
                Ok(mut inner) => {
                    inner.tmp_next += 1;
                    inner.tmp_next
                }
                Err(_) => return reply.error(fuser::Errno::EIO),
            };
            let name = byzfs_fs::orphan::hidden_name(self.client_id, &format!("tmp-{n:x}"));
            let op = Op::Create {
                dir,
                name: name.clone(),
                mode: mode & !umask & 0o7777,
                exclusive: true,
            };
            match self.call(req, op) {
                Ok(Reply::Made { entry: a, .. }) => {
                    if let Ok(mut inner) = self.inner.lock() {
                        *inner.open.entry(a.fh.ino).or_default() += 1;
                        // Created where the caller asked (permissions, group), then moved
                        // out of the way; if it cannot move, its directory keeps it.
                        let at = to_orphans(&mut inner, &cred, (dir, &name), &name)
                            .unwrap_or((dir, name));
                        inner.silly.insert(a.fh.ino, at);
                    }
                    // One link: the kernel drops it itself (`d_tmpfile`).
                    return reply.created(
                        &self.ttl,
                        &file_attr(&a),
                        Generation(a.fh.generation),
                        fuser::FileHandle(0),
                        fuser::FopenFlags::empty(),
                    );
                }
                Err(Errno::EEXIST) => continue,
                Ok(_) => return reply.error(fuser::Errno::EIO),
                Err(e) => return reply.error(errno(e)),
            }
        }
        reply.error(fuser::Errno::EEXIST)
    }

    /// Close-to-open consistency: fetches the file's attributes from the cluster, and if
    /// they differ from the last ones this mount saw (another client wrote since), tells
    /// the kernel to drop its cached attributes, so the size is fetched again. The kernel
    /// keeps the file's cached pages (`FOPEN_KEEP_CACHE`) only if the attributes equal the
    /// ones of the last open that dropped them; otherwise it drops them. A file removed by
    /// another client answers `ESTALE`, on which the kernel looks the path up again.
    fn open(&self, req: &fuser::Request, ino: INodeNo, flags: OpenFlags, reply: fuser::ReplyOpen) {
        tracing::trace!(ino = ino.0, flags = flags.0, "open");
        let fh = fh!(self, ino, reply);
        let before = self
            .inner
            .lock()
            .ok()
            .and_then(|i| i.stamps.get(&ino.0).copied());
        let keep = match self.call(req, Op::GetAttr { fh }) {
            Ok(Reply::Attr(a)) => {
                let now = Stamp::of(&a);
                if before != Some(now) {
                    if let Some(n) = self.notifier.get() {
                        // Offset -1: attributes only. Dropping pages here could wait on a
                        // page lock held by a read that waits for this very thread.
                        if let Err(e) = n.inval_inode(ino, -1, 0) {
                            tracing::debug!(ino = ino.0, %e, "inval_inode");
                        }
                    }
                }
                let Ok(mut inner) = self.inner.lock() else {
                    return reply.error(fuser::Errno::EIO);
                };
                // Unchanged since an open that dropped the pages: whatever the kernel cached
                // since came from this version (or from this mount's own writes through
                // the page cache), so it may stay. Otherwise it drops them (no flag).
                let keep = inner.opened.get(&ino.0) == Some(&now);
                if !keep {
                    inner.opened.insert(ino.0, now);
                }
                keep
            }
            Ok(_) => return reply.error(fuser::Errno::EIO),
            Err(e) => return reply.error(errno(e)),
        };
        if let Ok(mut inner) = self.inner.lock() {
            *inner.open.entry(ino.0).or_default() += 1;
        }
        let flags = if keep {
            fuser::FopenFlags::FOPEN_KEEP_CACHE
        } else {
            fuser::FopenFlags::empty()
        };
        reply.opened(fuser::FileHandle(0), flags);
    }

    /// At the last release of a file removed while open, removes it for good; drops an
    /// `flock` taken through this open file.
    fn release(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let cred = self.credentials(req);
        if let Ok(mut inner) = self.inner.lock() {
            // Writes through mmap can arrive after the last `close`.
            if inner.gather.pending_ino() == Some(ino.0) {
                if let Some(p) = inner.gather.take() {
                    send_held(&mut inner, p);
                }
            }
            // The kernel names an owner here when the file was `flock`ed: its last close
            // drops that lock.
            if let Some(owner) = lock_owner {
                locks::release(&mut inner, &cred, ino.0, owner.0);
            }
            let last = match inner.open.get_mut(&ino.0) {
                Some(n) => {
                    *n = n.saturating_sub(1);
                    *n == 0
                }
                None => false,
            };
            if last {
                inner.open.remove(&ino.0);
                // Nobody is left to report it to.
                if let Some(e) = inner.gather.take_error(ino.0) {
                    tracing::warn!(ino = ino.0, %e, "a write to a closed file failed");
                }
                if let Some((dir, name)) = inner.silly.remove(&ino.0) {
                    if let Err(e) = invoke(&mut inner, &cred, Op::Remove { dir, name }) {
                        tracing::warn!(ino = ino.0, %e, "cannot remove a silly-renamed file");
                    }
                }
            }
        }
        reply.ok();
    }

    /// `F_GETLK` (`locks.rs`).
    fn getlk(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        lock_owner: fuser::LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        reply: fuser::ReplyLock,
    ) {
        let fh = fh!(self, ino, reply);
        let kind = match locks::kind_of(typ) {
            Ok(Some(k)) => k,
            Ok(None) | Err(_) => return reply.error(fuser::Errno::EINVAL),
        };
        let cred = self.credentials(req);
        let probe = match self.inner.lock() {
            Ok(mut inner) => locks::probe(&mut inner, &cred, fh, lock_owner.0, kind, (start, end)),
            Err(_) => return reply.error(fuser::Errno::EIO),
        };
        match probe {
            locks::Probe::Answer(c) => locks::answer_getlk(c, self.client_id, (start, end), reply),
            locks::Probe::Recalling => locks::wait(locks::Waiter {
                inner: Arc::downgrade(&self.inner),
                notifier: Arc::clone(&self.notifier),
                cred,
                tid: req.pid(),
                job: locks::Job::Get {
                    fh,
                    owner: lock_owner.0,
                    kind,
                    range: (start, end),
                    me: self.client_id,
                    reply,
                },
            }),
            locks::Probe::Failed(e) => reply.error(errno(e)),
        }
    }

    /// `F_SETLK`/`F_SETLKW`, and `flock` (`locks.rs`). A blocking request that finds the
    /// range taken goes on waiting in a thread of its own.
    /// `F_SETLK`, `F_SETLKW` and `flock` (`locks.rs`); a blocking `fcntl` request waits with
    /// deadlock detection (`Op::SetLkWait`).
    fn setlk_flock(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        lock_owner: fuser::LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        flock: bool,
        reply: ReplyEmpty,
    ) {
        let fh = fh!(self, ino, reply);
        let kind = match locks::kind_of(typ) {
            Ok(k) => k,
            Err(e) => return reply.error(e),
        };
        let cred = self.credentials(req);
        let lock = byzfs_fs::lock::LockReq {
            fh,
            owner: lock_owner.0,
            kind,
            start,
            end,
            pid,
        };
        let op = if sleep && !flock && kind.is_some() {
            Op::SetLkWait(lock)
        } else {
            Op::SetLk(lock)
        };
        let outcome = match self.inner.lock() {
            Ok(mut inner) => locks::set(&mut inner, &cred, op.clone()),
            Err(_) => return reply.error(fuser::Errno::EIO),
        };
        match outcome {
            locks::Outcome::Granted { changed } => {
                locks::grant(&self.notifier, ino.0, changed, reply)
            }
            locks::Outcome::Busy if !sleep => reply.error(fuser::Errno::EAGAIN),
            locks::Outcome::Deadlock => reply.error(fuser::Errno::EDEADLK),
            // A blocking request waits for the range, any for a recalled delegation.
            locks::Outcome::Busy | locks::Outcome::Recalling => locks::wait(locks::Waiter {
                inner: Arc::downgrade(&self.inner),
                notifier: Arc::clone(&self.notifier),
                cred,
                tid: req.pid(),
                job: locks::Job::Set {
                    op,
                    blocking: sleep,
                    reply,
                },
            }),
            locks::Outcome::Failed(e) => reply.error(errno(e)),
        }
    }

    /// At unmount, drops the locks still held and removes files still hidden by silly
    /// renames.
    fn destroy(&mut self) {
        let cred = own_credentials();
        if let Ok(mut guard) = self.inner.lock() {
            let inner = &mut *guard;
            if let Some(p) = inner.gather.take() {
                send_held(inner, p);
            }
            let total: u64 = inner.sent.values().map(|(n, _)| n).sum();
            let waited: Duration = inner.sent.values().map(|(_, t)| *t).sum();
            let by_kind: Vec<String> = inner
                .sent
                .iter()
                .map(|(k, (n, t))| {
                    let mean = t.as_micros() / u128::from((*n).max(1));
                    format!("{k}={n} ({:.2} s, {mean} µs each)", t.as_secs_f64())
                })
                .collect();
            tracing::info!(
                total,
                waited_s = waited.as_secs_f64(),
                "operations sent: {}",
                by_kind.join(" ")
            );
            if let Some(s) = inner.client.stats() {
                tracing::info!(
                    retransmissions = s.retransmissions,
                    read_only_to_quorum = s.read_only_to_quorum,
                    read_only_hedged = s.read_only_hedged,
                    read_only_fallbacks = s.read_only_fallbacks,
                    "client counters"
                );
            }
            delegations::give_back_all(inner, &cred);
            tracing::info!(
                answered_here = inner.delegs.local,
                recalled = inner.delegs.recalled,
                given_back = inner.delegs.returned,
                "lock delegations"
            );
            for (fh, owner) in inner.locks.take_all() {
                let _ = invoke(inner, &cred, Op::ReleaseLocks { fh, owner });
            }
            let hidden: Vec<_> = inner.silly.drain().map(|(_, v)| v).collect();
            for (dir, name) in hidden {
                let _ = invoke(inner, &cred, Op::Remove { dir, name });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_including_before_the_epoch() {
        for t in [
            Timestamp { secs: 0, nsecs: 0 },
            Timestamp {
                secs: 1_700_000_000,
                nsecs: 123,
            },
            Timestamp {
                secs: -5,
                nsecs: 250_000_000,
            },
            Timestamp { secs: -1, nsecs: 0 },
        ] {
            assert_eq!(timestamp(system_time(t)), t);
        }
    }
}
