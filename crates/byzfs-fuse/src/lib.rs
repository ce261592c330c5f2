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
//! * **Threads** ([`MountOptions::threads`], [`DEFAULT_THREADS`]): several FUSE threads
//!   (four by default) take the kernel's requests. A read-only operation (getattr, lookup, read, readdir,
//!   readlink, access, statfs, extended attributes) of a plain mount lets the mount's lock
//!   go while the replicas answer it, so several processes' reads are in flight together;
//!   so do its changes of files and names outside the directories it holds (setattr,
//!   create, mkdir, unlink, rename, link, extended attributes, unbuffered writes, fsync:
//!   `calls.rs` `ordered_lane_takes`), in the order it sent them. An encrypted mount's
//!   reads do too, and open their blocks with no lock held (`crypt_read_lane.rs`), so
//!   several reads' blocks open on several cores. Lock operations, renewals of the lease
//!   and file delegations asked for let it go too (`lease_call.rs`): what their replies
//!   install is tagged with the request's place among the mount's, so a reply telling
//!   that the lease lapsed drops only what is older (`lease.rs`). Write-back is waited for
//!   without it (`unlocked.rs`). Still under the lock: a directory asked for (with its
//!   listing), delegations given back, and an encrypted mount's other operations.
//! * **Not handled yet:** ACLs are not supported (device nodes are: `mknod` by uid 0).
//!   go-fuse's POSIX suite passes (docs/CONFORMANCE.md).

mod attrs;
mod awaiting;
mod background;
mod calls;
mod cluster;
mod convert;
pub mod crypt;
mod crypt_data;
mod crypt_files;
mod crypt_handles;
mod crypt_in_flight;
mod crypt_nodes;
#[cfg(test)]
mod crypt_over_memory;
mod crypt_read_lane;
mod crypt_tree;
mod delegations;
mod dirs;
mod drain_rate;
mod early;
pub mod fsclient;
mod gather;
mod groups;
mod handles;
mod held_files;
mod inflight;
mod lane;
mod lease;
mod lease_call;
mod link;
mod listings;
mod locks;
mod mine;
mod open_files;
mod orphans;
mod ranges;
mod recalls;
mod reclaim;
mod sender;
mod session;
mod stamps;
mod transport;
mod unlocked;
mod wire;
mod writeback;

use attrs::{AttrCache, Stamp};
use background::spawn_background;
use byzfs_fs::proto::attr::{SetTime, Timestamp};
use byzfs_fs::proto::op::{XattrSet, MAX_IO};
use byzfs_fs::{
    Attr, Credentials, Errno, FileHandle, FileType, FsResult, Op, Reply, SetAttr, SpecialKind,
};
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::keygen::{client_key_path, DEFAULT_CLIENT};
use byzfs_net::ClientCredential;
use calls::{invoke, send_held};
use convert::{errno, file_attr, kind, negative_entry, timestamp};
use fuser::{
    AccessFlags, FileAttr, Filesystem, Generation, INodeNo, MountOption, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyStatfs,
    ReplyWrite, TimeOrNow, WriteFlags,
};
use gather::Gather;
use link::Link;
use orphans::{own_credentials, to_orphans};
pub use session::{check_fuse, check_mountpoint, mount, MountOptions, Mounted};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the kernel (and the mount) may cache attributes and names by default: 3 s,
/// NFS's `acregmin`. A build stats and looks up the same headers for seconds: the Tcl
/// `make -j2` through the mount took 21.5 s at 3 s against 24.6 s at 1 s.
pub const DEFAULT_CACHE_TIMEOUT: Duration = Duration::from_secs(3);
/// FUSE threads by default ([`MountOptions::threads`]): four, so that four processes'
/// reads are in flight together (`byzfs bench parallel`); `--threads 1` serves one
/// operation at a time.
pub const DEFAULT_THREADS: usize = 4;
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
    /// What its credential lets it act as: a caller outside it is mapped in
    /// ([`Self::credentials`]).
    grant: byzfs_fs::Grant,
    /// Notified at every RELEASE: a remove waits on it for the RELEASE of a file just
    /// closed (`open_files.rs`).
    released: Condvar,
    /// Whether another FUSE thread can deliver that RELEASE while one waits (more than one).
    waits_for_release: bool,
}

/// Room for a write request's fields besides its data (credentials with supplementary
/// groups, handle, offset, encoding overhead).
const WRITE_OVERHEAD: usize = 16 * 1024;

/// The mount's state, behind the adapter's mutex, in three parts that functions borrow
/// separately: a lock or delegation call borrows the link and the lock books, never the
/// file table.
struct Inner {
    /// The cluster and what every call to it passes through (`link.rs`).
    link: Link,
    /// What the kernel holds and what is open on this mount.
    files: Files,
    /// Locks and lock delegations (`locks.rs`, `delegations.rs`): those borrow this and
    /// [`Link`] only.
    locking: locks::Locking,
}

impl Inner {
    /// The parts a lock call borrows, and how many hidden files this mount keeps (it holds
    /// the lease for them as for locks). The lock books first drop what a lapse of the
    /// lease told since took (`lease.rs`).
    fn for_locks(&mut self) -> (&mut Link, &mut locks::Locking, usize) {
        let hidden = self.files.silly.len();
        self.locking.follow(&self.link.lease, hidden);
        (&mut self.link, &mut self.locking, hidden)
    }
}

/// What the kernel holds of the file system through this mount, and what is open.
struct Files {
    /// Every inode the kernel may name: those it got in an entry reply and has not
    /// forgotten.
    known: HashMap<u64, Known>,
    /// The files open on this mount, by handle (for silly renames, `open_files.rs`).
    open: open_files::OpenFiles,
    /// Directories open on this mount: how many times, and their last attributes, which
    /// `fstat` on one gets (with no links) once it is removed, as on a local file system.
    open_dirs: HashMap<u64, (u32, Attr)>,
    /// Open directories listed from this mount's books (`listings.rs`).
    listings: listings::Listings,
    /// Open files removed while open: inode → (directory, hidden name), removed for good at
    /// the last release.
    silly: HashMap<u64, (FileHandle, Vec<u8>)>,
    /// The number in the next `O_TMPFILE` file's hidden name.
    tmp_next: u64,
    /// The orphan directory once looked for ([`orphan_dir`]): `Some(None)` if there is none
    /// to be had.
    orphans: Option<Option<FileHandle>>,
}

/// Held directory `dir`'s entries for an open directory listed here (`listings.rs`),
/// without the files this mount keeps under hidden names there (as `readdir` from the
/// cluster leaves them out, but in the orphan directory itself).
fn held_listing(inner: &mut Inner, dir: FileHandle) -> Option<Vec<listings::Entry>> {
    let mut entries = inner.link.dirs.listing(dir)?;
    let files = &inner.files;
    if files.orphans != Some(Some(dir)) {
        entries.retain(|(name, ino, _)| {
            !files
                .silly
                .get(ino)
                .is_some_and(|(d, n)| *d == dir && n == name)
        });
    }
    Some(entries)
}

/// What the adapter knows of an inode the kernel holds.
struct Known {
    generation: u64,
    /// Entry replies not yet matched by `forget` (the kernel's lookup count).
    lookups: u64,
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

impl ByzFuse {
    /// The caller's credentials, supplementary groups from `/proc/<pid>/status` (cached
    /// for a second per process: `groups.rs`), mapped into the credential's grant: a user it
    /// may not act for becomes the anonymous one (root squashed unless granted), groups
    /// outside it are dropped (`byzfs_fs::proto::grant`, README "Security").
    fn credentials(&self, req: &fuser::Request) -> Credentials {
        let (uid, gid) = (req.uid(), req.gid());
        self.grant.squash(&Credentials {
            uid,
            gid,
            groups: self
                .groups
                .get(req.pid(), uid, gid, std::time::Instant::now()),
        })
    }

    /// Runs `op` on the cluster as the caller. An entry reply gives the kernel a reference to
    /// an inode (its lookup count grows by one), so the inode's generation is remembered
    /// until the matching `forget`.
    ///
    /// A read-only operation of a plain mount goes in a lane (`calls.rs`
    /// [`calls::send_in_lane`]): sent under the mount's lock, which is then let go while
    /// the replicas answer, so other threads' operations are sent meanwhile and are in
    /// flight together through the client's window (`wire.rs`). Its place among the
    /// mount's requests is where it was sent; its reply updates the attribute cache only
    /// where nothing changed since (`attrs.rs`). One the replicas answer `Recall` (a
    /// directory another mount holds) is run again as any other operation is. So does an
    /// ordered operation on files and names outside the directories the mount holds
    /// ([`calls::ordered_lane_takes`]); one answered `Recall`, or `EBUSY` over a file's
    /// stale tail, goes again through [`invoke`]. An encrypted mount's read goes in a lane
    /// when its crypto layer can plan it as one request, and its blocks are opened after
    /// the lock is let go ([`calls::send_crypt_read_in_lane`], `crypt_read_lane.rs`).
    fn call(&self, req: &fuser::Request, op: Op) -> FsResult {
        let cred = self.credentials(req);
        let Ok(mut inner) = self.inner.lock() else {
            return Err(Errno::EIO);
        };
        if inner.link.cluster.wire().awaiting() > 0 {
            inner.link.inflight.ran_meanwhile += 1;
        }
        // What it must see goes first: the held writes and early answers it may see, sent
        // in flight, and the write-back in flight it must follow, landed, all without the
        // lock while the replicas answer (`unlocked.rs`). What other threads hold back
        // meanwhile goes before it, under the lock, where it is sent (`calls.rs`).
        let mut upto = None;
        if sender::may_fly(&inner.link) {
            let first = writeback::before(&mut inner.link, &op, writeback::Wait::InFlight);
            if !first.is_empty() {
                inner = match unlocked::send(&self.inner, inner, first) {
                    Some(i) => i,
                    None => return Err(Errno::EIO),
                };
                upto = Some(inner.link.inflight.sent_so_far());
            }
        }
        let Some(mut inner) = unlocked::land(&self.inner, inner, |l| {
            !l.inflight.must_precede(&op) && upto.is_none_or(|u| l.inflight.landed() >= u)
        }) else {
            return Err(Errno::EIO);
        };
        let result = if link::lane_takes(&inner.link, &op) {
            let again = op.may_be_recalled().then(|| op.clone());
            let mut sent = calls::send_in_lane(&mut inner.link, &cred, op);
            drop(inner);
            let out = sent.wait();
            inner = match self.inner.lock() {
                Ok(i) => i,
                Err(_) => return Err(Errno::EIO),
            };
            match (link::finish_in_lane(&mut inner.link, sent, out), again) {
                (Ok(Reply::Recall), Some(op)) => invoke(&mut inner.link, &cred, op),
                (r, _) => r,
            }
        } else if let Some((plan, mut sent)) =
            calls::send_crypt_read_in_lane(&mut inner.link, &cred, &op)
        {
            drop(inner);
            let out = sent.wait();
            inner = match self.inner.lock() {
                Ok(i) => i,
                Err(_) => return Err(Errno::EIO),
            };
            let r = link::finish_in_lane(&mut inner.link, sent, out);
            let sealed = inner
                .link
                .crypt
                .as_mut()
                .and_then(|c| c.sealed_read(plan, r));
            if let Some(sealed) = sealed {
                // Its blocks opened without the lock (`crypt_read_lane.rs`).
                drop(inner);
                if let Some(reply) = sealed.open() {
                    return Ok(reply);
                }
                inner = match self.inner.lock() {
                    Ok(i) => i,
                    Err(_) => return Err(Errno::EIO),
                };
            }
            invoke(&mut inner.link, &cred, op)
        } else if calls::ordered_lane_takes(&inner.link, &op) {
            let again = op.clone();
            let mut sent = calls::send_ordered_in_lane(&mut inner.link, &cred, op);
            drop(inner);
            let out = sent.wait();
            inner = match self.inner.lock() {
                Ok(i) => i,
                Err(_) => return Err(Errno::EIO),
            };
            calls::finish_ordered(&mut inner.link, &cred, again, sent, out)
        } else {
            invoke(&mut inner.link, &cred, op)
        };
        if let Some(a) = result.as_ref().ok().and_then(Reply::entry) {
            let k = inner.files.known.entry(a.fh.ino).or_insert(Known {
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
            // Unless a later reply or change of this mount knows better (a lane's reply
            // that came back late: the cache then holds other attributes, or none).
            if inner.link.attrs.last(a.fh.ino) == Some(a) {
                inner.link.stamps.saw(a.fh.ino, Stamp::of(a));
            }
        }
        // A lookup of a file whose held writes say its attributes (`writeback::before`
        // kept them): those, not the replicas' of before them.
        let mut result = result;
        if let Ok(Reply::Entry(a)) = &mut result {
            if let Some(e) = inner
                .link
                .gather
                .expected(a.fh.ino)
                .filter(|e| e.fh == a.fh)
            {
                *a = e.clone();
            }
        }
        result
    }

    /// Asks for file `fh`'s delegation (`held_files.rs`) at an `open` for writing; the
    /// reply's attributes as a `getattr`'s. The mount's lock is let go while the replicas
    /// answer (`lease_call.rs`). Another mount holding it (asked to give it back) or a
    /// refusal: the file is not asked for again for a while, and the `open` looks at its
    /// attributes as usual (after the holder gave it back).
    fn delegate_file(&self, req: &fuser::Request, fh: FileHandle) -> FsResult {
        use lease_call::{Answered, Begun};
        let cred = self.credentials(req);
        let op = Op::DelegateFile { file: fh };
        let mut went = false;
        let begin = |i: &mut Inner| {
            if let Some(first) = lease_call::first(&mut i.link, &op, &mut went) {
                return first;
            }
            Begun::Sent(Box::new(lease_call::send(
                &mut i.link,
                &cred,
                op.clone(),
                (),
            )))
        };
        let end = |i: &mut Inner, a: Answered<()>| match a.result {
            Ok(Reply::Delegated { lapsed, attr, .. }) => {
                // It renewed the lease: a lapse dropped every older delegation. One told by
                // a later reply already dropped this one.
                if lease_call::told(i, a.place, lapsed, a.at) == lease::Answer::Late {
                    return None;
                }
                let now = std::time::Instant::now();
                let link = &mut i.link;
                // Bytes kept from an earlier delegation may be old now.
                link.dirs.contents_changed(fh.ino);
                link.files.install(fh, now, a.place);
                // Unless this mount changed the file since it asked.
                if link.attrs.unchanged_since(a.mark, fh.ino) {
                    link.attrs.learn(&attr, now);
                    link.stamps.saw(fh.ino, Stamp::of(&attr));
                }
                Some(attr)
            }
            other => {
                tracing::debug!(ino = fh.ino, ?other, "file delegation not granted");
                i.link.files.contended(fh.ino, std::time::Instant::now());
                None
            }
        };
        match lease_call::run(&self.inner, begin, end)? {
            Some(attr) => Ok(Reply::Attr(attr)),
            None => self.call(req, Op::GetAttr { fh }),
        }
    }

    /// Holds a `setattr` back with the caller's pending writes to the file (see
    /// `gather.rs`), and returns the attributes it will give; `None` to send it now.
    fn hold_setattr(&self, req: &fuser::Request, fh: FileHandle, set: &SetAttr) -> Option<Attr> {
        let cred = self.credentials(req);
        let mut inner = self.inner.lock().ok()?;
        if !inner.link.gather.holds_back() || inner.link.gather.error(fh.ino).is_some() {
            return None;
        }
        let now = timestamp(SystemTime::now());
        inner.link.gather.hold_set(fh, &cred, set, now)
    }

    /// The service handle of FUSE inode `ino`.
    fn fh(&self, ino: INodeNo) -> Result<FileHandle, fuser::Errno> {
        let inner = self.inner.lock().map_err(|_| fuser::Errno::EIO)?;
        inner
            .files
            .known
            .get(&ino.0)
            .map(|k| FileHandle {
                ino: ino.0,
                generation: k.generation,
            })
            .ok_or(fuser::Errno::ESTALE)
    }

    /// Answers a `readdir` of an open directory listed from this mount's books
    /// (`listings.rs`), with the entries from `offset` on that fit; `None` if `handle` is
    /// not one. An offset of 0 (a rewind) copies the names again if still held.
    fn readdir_listed(
        &self,
        dir: FileHandle,
        handle: u64,
        offset: u64,
        reply: &mut ReplyDirectory,
    ) -> Option<()> {
        let mut inner = self.inner.lock().ok()?;
        if !inner.files.listings.has(handle) {
            return None;
        }
        if offset == 0 {
            if let Some(entries) = held_listing(&mut inner, dir) {
                inner.files.listings.renew(handle, entries);
            }
        }
        for (next, (name, ino, k)) in inner.files.listings.from(handle, offset)? {
            if reply.add(
                INodeNo(*ino),
                next,
                kind(*k),
                <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name),
            ) {
                // The kernel's buffer is full; it asks again from here.
                break;
            }
        }
        Some(())
    }

    /// The attributes `fstat` gets for directory `ino`, open here and removed (by a rename
    /// over it or by another client): the last ones seen, with no links, as a local file
    /// system keeps a removed directory for its open descriptors.
    fn removed_open_dir(&self, ino: u64) -> Option<FileAttr> {
        let inner = self.inner.lock().ok()?;
        let (_, a) = inner.files.open_dirs.get(&ino)?;
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
            if inner.files.silly.contains_key(&a.fh.ino) {
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
        let me = inner.link.cluster.wire().id();
        let lookup = Op::Lookup {
            dir,
            name: name.to_vec(),
        };
        let Ok(Reply::Entry(a)) = invoke(&mut inner.link, &cred, lookup) else {
            return false;
        };
        let mut cookie = 0;
        loop {
            let op = Op::ReadDir {
                dir: a.fh,
                cookie,
                max_entries: READDIR_BATCH,
            };
            let Ok(Reply::ReadDir { entries, eof }) = invoke(&mut inner.link, &cred, op) else {
                return false;
            };
            let others = |e: &byzfs_fs::proto::reply::DirEntry| {
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
            match invoke(&mut inner.link, &cred, op) {
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

    /// Answers a creation early if this mount holds `dir` (`dirs.rs`): the new entry's
    /// attributes, which the kernel now holds a reference to.
    fn make_early(
        &self,
        req: &fuser::Request,
        dir: FileHandle,
        name: &[u8],
        mode: u32,
        what: early::Make,
    ) -> Option<Attr> {
        let cred = self.credentials(req);
        let mut inner = self.inner.lock().ok()?;
        let (a, d) = early::make_early(&mut inner.link, &cred, dir, name, mode, what)?;
        let now = std::time::Instant::now();
        inner.link.attrs.learn(&a, now);
        inner.link.attrs.learn(&d, now);
        inner.link.stamps.saw(a.fh.ino, Stamp::of(&a));
        let k = inner.files.known.entry(a.fh.ino).or_insert(Known {
            generation: a.fh.generation,
            lookups: 0,
        });
        k.generation = a.fh.generation;
        k.lookups += 1;
        Some(a)
    }

    /// Answers a `link` early if this mount holds `dir` and made the file under a delegation
    /// it still holds (`dirs.rs`), unless writes to the file are held back (its size would
    /// be this mount's guess): the file's attributes, which the kernel now holds another
    /// reference to.
    fn link_early(
        &self,
        req: &fuser::Request,
        fh: FileHandle,
        dir: FileHandle,
        name: &[u8],
    ) -> Option<Attr> {
        let cred = self.credentials(req);
        let mut inner = self.inner.lock().ok()?;
        if inner.link.gather.holds(fh.ino) || inner.link.inflight.holds(fh.ino) {
            return None;
        }
        let known = inner
            .link
            .attrs
            .last(fh.ino)
            .filter(|a| a.fh == fh)?
            .clone();
        let (a, d) = early::link_early(&mut inner.link, &cred, (fh, known), dir, name)?;
        let now = std::time::Instant::now();
        inner.link.attrs.learn(&a, now);
        inner.link.attrs.learn(&d, now);
        inner.link.stamps.saw(a.fh.ino, Stamp::of(&a));
        if let Some(k) = inner.files.known.get_mut(&a.fh.ino) {
            k.lookups += 1;
        }
        Some(a)
    }

    /// Answers a `lookup` of an entry this mount made in a directory it holds, from the
    /// attributes it last saw of it (`dirs.rs`), unless writes to it are held back.
    fn lookup_early(&self, dir: FileHandle, name: &[u8]) -> Option<Attr> {
        let mut inner = self.inner.lock().ok()?;
        let fh = inner.link.dirs.made_here(dir, name)?;
        if inner.link.gather.holds(fh.ino) || inner.link.inflight.holds(fh.ino) {
            return None;
        }
        // Answering from what the mount made keeps the delegation (`dirs.rs` `IDLE`).
        inner.link.dirs.use_mine(fh.ino);
        let a = inner
            .link
            .attrs
            .last(fh.ino)
            .filter(|a| a.fh == fh)?
            .clone();
        let k = inner.files.known.entry(fh.ino).or_insert(Known {
            generation: fh.generation,
            lookups: 0,
        });
        k.generation = fh.generation;
        k.lookups += 1;
        Some(a)
    }

    /// Answers an `unlink` (`is_dir` false) or `rmdir` early if this mount holds `dir` and
    /// the entry is not open here (`dirs.rs`); whether it did.
    fn remove_early(
        &self,
        inner: &mut Inner,
        cred: &Credentials,
        dir: FileHandle,
        name: &[u8],
        is_dir: bool,
    ) -> bool {
        let Inner { link, files, .. } = inner;
        let open = |ino: u64| {
            files.open.contains(ino)
                || files.open_dirs.contains_key(&ino)
                || files.silly.contains_key(&ino)
        };
        let Some((ino, d)) = early::remove_early(link, cred, dir, name, is_dir, open) else {
            return false;
        };
        link.attrs.forget(ino);
        link.attrs.learn(&d, std::time::Instant::now());
        link.stamps.unsee(ino);
        true
    }

    /// `ino`'s contents change in a way the bytes kept of files made here do not follow
    /// (`mine.rs`): they are read from the cluster from now on.
    fn contents_changed(&self, ino: u64) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.link.dirs.contents_changed(ino);
        }
    }

    /// Tells the kernel to drop the attributes early answers gave it, for what has been
    /// sent since (`dirs.rs`): it then asks for the cluster's (agreed times).
    fn drop_early_attrs(&self) {
        let inos = match self.inner.lock() {
            Ok(mut inner) => inner.link.dirs.take_sent(),
            Err(_) => return,
        };
        let Some(n) = self.notifier.get() else {
            return;
        };
        for ino in inos {
            // Offset -1: attributes only (as `open` does).
            if let Err(e) = n.inval_inode(INodeNo(ino), -1, 0) {
                tracing::debug!(ino, %e, "inval_inode");
            }
        }
    }

    /// Answers a plain `rename` within one directory this mount holds early (`dirs.rs`);
    /// whether it did.
    fn rename_early(
        &self,
        inner: &mut Inner,
        cred: &Credentials,
        dir: FileHandle,
        names: (&[u8], &[u8]),
    ) -> bool {
        let Inner { link, files, .. } = inner;
        let open = |ino: u64| files.open.contains(ino) || files.silly.contains_key(&ino);
        let Some((replaced, d)) = early::rename_early(link, cred, dir, names, open) else {
            return false;
        };
        let now = std::time::Instant::now();
        if let Some(ino) = replaced {
            link.attrs.forget(ino);
            link.stamps.unsee(ino);
        }
        link.attrs.learn(&d, now);
        true
    }

    /// Answers a `create` (or `O_TMPFILE` open) with the new file, opened as `handle`.
    fn created(&self, a: &Attr, handle: u64, reply: ReplyCreate) {
        reply.created(
            &self.ttl,
            &file_attr(a),
            Generation(a.fh.generation),
            fuser::FileHandle(handle),
            fuser::FopenFlags::empty(),
        )
    }

    /// Counts an open of `ino` on this mount: its handle (`open_files.rs`).
    fn opened(&self, ino: u64) -> u64 {
        match self.inner.lock() {
            Ok(mut inner) => inner.files.open.open(ino),
            // Poisoned: the mount answers EIO to everything after this anyway.
            Err(_) => 0,
        }
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

mod filesystem;
