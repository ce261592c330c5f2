//! Record locks across mounts: `fcntl` (`F_GETLK`, `F_SETLK`, `F_SETLKW`) and `flock` locks
//! are taken at the replicas ([`byzfs_fs::lock`]), so every mount of the cluster sees them,
//! as NFS's lock manager makes them visible to every NFS client.
//!
//! * **Owners.** The kernel names each lock's owner: a process's file table for `fcntl`, the
//!   open file for `flock` (the mount asks for `FUSE_FLOCK_LOCKS`, so `flock` arrives as a
//!   whole-file lock; as on Linux's NFS client, an `flock` and an `fcntl` lock of one file
//!   then conflict). The replicas qualify it with this mount's client session.
//! * **Release.** POSIX drops a process's locks on a file at any `close` of it (`flush`
//!   here), `flock`'s at the open file's last close (`release`). The mount remembers which
//!   (file, owner) pairs may hold locks ([`Held`]), so a `close` costs a round trip only
//!   then.
//! * **Blocking (`F_SETLKW`, `flock` without `LOCK_NB`).** The FUSE session thread must go
//!   on (the holder's `close` arrives through it), so a conflicting request is handed to a
//!   waiter thread that tries again after 10 ms, doubling to at most 200 ms, and answers
//!   once granted. fuser answers the kernel's `FUSE_INTERRUPT` itself (`ENOSYS`), after
//!   which the kernel waits for the answer even on `SIGKILL`; so between attempts the waiter
//!   reads the waiting thread's pending signals (`/proc/<tid>/status`) and answers `EINTR`
//!   if one arrived, which the kernel turns into a restart of the call or `EINTR`, as for a
//!   local lock.
//! * **Data.** Writes held back are sent before any lock operation (so an unlock publishes
//!   them), and a lock granted on a file another client changed since this mount last saw
//!   it drops the kernel's cached pages and attributes of the file first (NFS does the
//!   same), so what the lock protects is read fresh. The pages are dropped from a helper
//!   thread: from the session thread it could wait on a page held by a read queued behind
//!   it.
//! * **A mount that dies** holding locks loses them when its lease lapses (30 s of agreed
//!   time); while it holds any, the mount renews the lease every [`RENEW_EVERY`]. A mount
//!   cut off for longer learns at its next lock operation that its locks were dropped, and
//!   logs it.
//! * **Delegations.** A file no other mount locks has its locks kept at this mount while
//!   it holds the file's delegation, with no round trip per lock ([`super::delegations`]);
//!   another mount's lock request on it waits until the delegation is given back
//!   ([`Outcome::Recalling`], retried every [`RECALL_RETRY`]).
//! * **Deadlocks.** A blocking `fcntl` request (`F_SETLKW`; the vendored fuser says
//!   whether a request is an `flock`) is sent as `Op::SetLkWait`, so the replicas record
//!   what its owner waits for and answer `EDEADLK` to a request that would close a cycle
//!   of waiting owners, on any mounts ([`byzfs_fs::deadlock`]). A waiter that gets a
//!   signal cancels its record. A blocking request that finds the range taken on a file
//!   this mount holds the delegation of gives the delegation back first, so that its wait,
//!   too, is known to the replicas. `flock` waits are not checked, as on Linux.

use super::delegations::Delegations;
use super::{errno, invoke, Inner, Link};
use crate::attrs::Stamp;
use crate::lease::{Answer, Lease, RENEW_EVERY};
use crate::lease_call::{self, Answered, Begun};
use byzfs_fs::proto::lock::{LockInfo, LockKind, LOCK_END_MAX};
use byzfs_fs::{Credentials, Errno, FileHandle, Op, Reply};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// `struct flock`'s `l_type` values on Linux.
const F_RDLCK: i32 = 0;
const F_WRLCK: i32 = 1;
const F_UNLCK: i32 = 2;

/// First pause of a blocked lock request between attempts; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(10);
/// Longest pause between attempts: also the longest a waiter may lag behind a release.
const RETRY_MAX: Duration = Duration::from_millis(200);
/// Pause between attempts while another mount gives its delegation of the file back.
const RECALL_RETRY: Duration = Duration::from_millis(5);

/// The mount's lock books: what it may hold at the replicas, the files it holds the locks
/// of itself, and the files with a lock call on its way. Lock calls borrow this and the
/// [`Link`] only (`lib.rs` `Inner::for_locks`, which first drops what a lapse of the lease
/// told since took: [`Locking::follow`]).
pub(super) struct Locking {
    pub(super) held: Held,
    pub(super) delegs: Delegations,
    /// Files with a lock change or release on its way to the replicas: another lock call
    /// on the file waits for its reply (`lease_call.rs` `Begun::Wait`), so the file's
    /// locks change here in the order the replicas change them.
    busy: HashSet<u64>,
    /// The lapse of the lease these books last followed (`lease.rs` `Lease::lapsed_at`).
    followed: u64,
}

impl Locking {
    pub(super) fn new(delegs: Delegations) -> Locking {
        Locking {
            held: Held::default(),
            delegs,
            busy: HashSet::new(),
            followed: 0,
        }
    }

    /// Drops what the replicas dropped with a lapse of the lease told since these books
    /// were last borrowed; `hidden`: files this mount keeps under hidden names.
    pub(super) fn follow(&mut self, lease: &Lease, hidden: usize) {
        if lease.lapsed_at() == self.followed {
            return;
        }
        self.followed = lease.lapsed_at();
        self.held.prune(lease);
        self.delegs.prune(lease);
        if hidden > 0 {
            tracing::warn!(
                files = hidden,
                "this mount's lease lapsed while it kept removed files open: another mount may \
                 have swept them from the orphan directory (they then read as stale)"
            );
        }
    }
}

/// The (file, owner) pairs that may hold locks at the replicas, each with the place of the
/// reply that last granted one (`lease.rs`).
#[derive(Default)]
pub(super) struct Held {
    pairs: HashMap<(u64, u64), (FileHandle, u64)>,
}

impl Held {
    /// `owner` may now hold locks on `fh`, granted by the reply of place `place`.
    fn note(&mut self, fh: FileHandle, owner: u64, place: u64) {
        let e = self.pairs.entry((fh.ino, owner)).or_insert((fh, place));
        e.1 = e.1.max(place);
    }

    /// Forgets `owner`'s locks on `ino`, returning the file if it may have held some.
    pub(super) fn take(&mut self, ino: u64, owner: u64) -> Option<FileHandle> {
        self.pairs.remove(&(ino, owner)).map(|(fh, _)| fh)
    }

    /// The file `owner` may hold locks on, if it may.
    fn get(&self, ino: u64, owner: u64) -> Option<FileHandle> {
        self.pairs.get(&(ino, owner)).map(|(fh, _)| *fh)
    }

    /// Every pair, forgotten (at unmount).
    pub(super) fn take_all(&mut self) -> Vec<(FileHandle, u64)> {
        self.pairs
            .drain()
            .map(|((_, o), (fh, _))| (fh, o))
            .collect()
    }

    /// Whether any pair may hold locks (the lease is renewed while one does).
    fn any(&self) -> bool {
        !self.pairs.is_empty()
    }

    /// The pairs granted before the lease's last lapse, forgotten: the replicas dropped
    /// their locks.
    fn prune(&mut self, lease: &Lease) {
        let before = self.pairs.len();
        self.pairs.retain(|_, (_, place)| !lease.dropped(*place));
        if self.pairs.len() < before {
            tracing::error!(
                files = before - self.pairs.len(),
                "the cluster dropped this mount's locks: its lease lapsed (no lock operation \
                 or renewal reached it for 30 s); programs holding them may now conflict"
            );
        }
    }
}

/// The kind of an `l_type` (`None`: `F_UNLCK`).
pub(super) fn kind_of(typ: i32) -> Result<Option<LockKind>, fuser::Errno> {
    match typ {
        F_RDLCK => Ok(Some(LockKind::Read)),
        F_WRLCK => Ok(Some(LockKind::Write)),
        F_UNLCK => Ok(None),
        _ => Err(fuser::Errno::EINVAL),
    }
}

/// The `l_type` of `kind`.
fn typ_of(kind: LockKind) -> i32 {
    match kind {
        LockKind::Read => F_RDLCK,
        LockKind::Write => F_WRLCK,
    }
}

/// What an `F_GETLK` came to.
pub(super) enum Probe {
    /// The first conflicting lock, if any.
    Answer(Option<LockInfo>),
    /// Another mount is giving the file's delegation back: ask again shortly.
    Recalling,
    /// Failed.
    Failed(Errno),
}

/// `F_GETLK` of `owner` for a `kind` lock on `range` of `fh`: answered here if this mount
/// holds the file's delegation, else by the replicas (the mount's lock let go meanwhile:
/// `lease_call.rs`).
pub(super) fn probe(
    mount: &Mutex<Inner>,
    cred: &Credentials,
    fh: FileHandle,
    owner: u64,
    kind: LockKind,
    (start, end): (u64, u64),
) -> Probe {
    let mut went = false;
    let begin = |i: &mut Inner| {
        let (link, locking, _) = i.for_locks();
        let now = Instant::now();
        if let Some(c) = locking.delegs.get(fh.ino, owner, kind, (start, end), now) {
            return Begun::Done(Probe::Answer(c));
        }
        let op = Op::GetLk {
            fh,
            owner,
            kind,
            start,
            end,
        };
        if let Some(first) = lease_call::first(link, &op, &mut went) {
            return first;
        }
        Begun::Sent(Box::new(lease_call::send(link, cred, op, ())))
    };
    let end = |_: &mut Inner, a: Answered<()>| match a.result {
        Ok(Reply::Lock { conflict, .. }) => Probe::Answer(conflict),
        Ok(Reply::Recall) => Probe::Recalling,
        Ok(_) => Probe::Failed(Errno::EIO),
        Err(e) => Probe::Failed(e),
    };
    lease_call::run(mount, begin, end).unwrap_or(Probe::Failed(Errno::EIO))
}

/// Answers `F_GETLK`: the first conflicting lock, or `F_UNLCK`. A holder's pid is reported
/// only for this mount's own processes (a pid of another machine would name whatever
/// process has it here, or none).
pub(super) fn answer_getlk(
    conflict: Option<LockInfo>,
    me: u64,
    (start, end): (u64, u64),
    reply: fuser::ReplyLock,
) {
    match conflict {
        Some(c) => {
            let pid = if c.client == me { c.pid } else { 0 };
            reply.locked(c.start, c.end.min(LOCK_END_MAX), typ_of(c.kind), pid)
        }
        None => reply.locked(start, end, F_UNLCK, 0),
    }
}

/// What a `SetLk` came to.
pub(super) enum Outcome {
    /// Done; the file's pages must be dropped first if it changed elsewhere.
    Granted { changed: bool },
    /// Another owner holds a conflicting lock.
    Busy,
    /// Waiting would close a cycle of waiting owners (`Op::SetLkWait` only).
    Deadlock,
    /// Another mount is giving the file's delegation back: ask again shortly.
    Recalling,
    /// Failed.
    Failed(Errno),
}

/// A lock change on its way to the replicas: what its reply applies to.
struct SetSent {
    fh: FileHandle,
    owner: u64,
    kind: Option<LockKind>,
}

/// Decides `op` (a `SetLk` or `SetLkWait`): here if this mount holds the file's
/// delegation, else at the replicas (asking for the delegation unless the file is contended
/// or the request waits), the mount's lock let go while they answer (`lease_call.rs`);
/// keeps the mount's books: which pairs may hold locks, the lease, and the file's last
/// seen attributes.
pub(super) fn set(mount: &Mutex<Inner>, cred: &Credentials, op: &Op) -> Outcome {
    let (mut renewed, mut went) = (false, false);
    let begin = |i: &mut Inner| {
        let (link, locking, _) = i.for_locks();
        begin_set(link, locking, cred, op, (&mut renewed, &mut went))
    };
    lease_call::run(mount, begin, set_answered).unwrap_or(Outcome::Failed(Errno::EIO))
}

/// [`set`]'s first half, under the mount's lock. `renewed`: the lease was renewed for it
/// already; `went`: what it must follow was sent ([`lease_call::first`]).
fn begin_set(
    link: &mut Link,
    locking: &mut Locking,
    cred: &Credentials,
    op: &Op,
    (renewed, went): (&mut bool, &mut bool),
) -> Begun<Outcome, SetSent> {
    let (r, waits) = match op {
        Op::SetLk(r) => (r, false),
        Op::SetLkWait(r) => (r, true),
        _ => return Begun::Done(Outcome::Failed(Errno::EINVAL)),
    };
    let (fh, owner, kind) = (r.fh, r.owner, r.kind);
    if locking.busy.contains(&fh.ino) {
        return Begun::Wait;
    }
    let now = Instant::now();
    if locking.delegs.holds(fh.ino) && !link.lease.confirmed_recently(now) {
        if *renewed {
            // The renewal failed (its error is logged): the delegation is not sure.
            return Begun::Done(Outcome::Failed(Errno::EIO));
        }
        // Renew first: the delegation may have lapsed with the lease.
        *renewed = true;
        return Begun::Renew(cred.clone());
    }
    if let Some(r) = locking
        .delegs
        .set(fh.ino, owner, kind, (r.start, r.end), r.pid, now)
    {
        match r {
            Ok(()) => {
                if kind.is_some() {
                    let place = locking.delegs.place_of(fh.ino).unwrap_or(0);
                    locking.held.note(fh, owner, place);
                }
                return Begun::Done(Outcome::Granted { changed: false });
            }
            // A wait the replicas must know of, for deadlock detection: the file goes
            // back to them (and stays there while contended).
            Err(Errno::EAGAIN) if waits => {
                super::delegations::give_back(link, &mut locking.delegs, cred, fh.ino, true);
                if locking.delegs.holds(fh.ino) {
                    return Begun::Done(Outcome::Busy); // Not given back (a transient failure).
                }
            }
            Err(Errno::EAGAIN) => return Begun::Done(Outcome::Busy),
            Err(e) => return Begun::Done(Outcome::Failed(e)),
        }
    }
    let delegate = !waits && kind.is_some() && locking.delegs.wanted(fh.ino, now);
    let op = if delegate {
        op.clone().asking_delegation()
    } else {
        op.clone()
    };
    if let Some(first) = lease_call::first(link, &op, went) {
        return first;
    }
    locking.busy.insert(fh.ino);
    Begun::Sent(Box::new(lease_call::send(
        link,
        cred,
        op,
        SetSent { fh, owner, kind },
    )))
}

/// [`set`]'s second half, the mount's lock taken again: the reply applied to the books.
fn set_answered(inner: &mut Inner, a: Answered<SetSent>) -> Outcome {
    let SetSent { fh, owner, kind } = a.then;
    inner.locking.busy.remove(&fh.ino);
    let lapsed = match &a.result {
        Ok(
            Reply::Lock { lapsed, .. }
            | Reply::Deadlock { lapsed }
            | Reply::Delegated { lapsed, .. },
        ) => Some(*lapsed),
        _ => None,
    };
    let answer = lapsed.map(|l| lease_call::told(inner, a.place, l, a.at));
    let (link, locking, _) = inner.for_locks();
    match a.result {
        // A `SetLkWait` that must wait (it renewed the lease all the same).
        Ok(Reply::Lock {
            conflict: Some(_), ..
        }) => Outcome::Busy,
        Ok(Reply::Deadlock { .. }) => Outcome::Deadlock,
        Ok(Reply::Lock { attr, .. }) => granted(
            link,
            locking,
            (fh, owner),
            kind,
            attr.as_ref(),
            (a.place, answer),
        ),
        Ok(Reply::Delegated { attr, mine, .. }) => {
            let outcome = granted(
                link,
                locking,
                (fh, owner),
                kind,
                Some(&attr),
                (a.place, answer),
            );
            if answer != Some(Answer::Late) {
                locking.delegs.install(fh, mine, Instant::now(), a.place);
            }
            outcome
        }
        Ok(Reply::Recall) => Outcome::Recalling,
        Ok(_) => Outcome::Failed(Errno::EIO),
        Err(Errno::EAGAIN) => Outcome::Busy,
        Err(e) => {
            // A soft mount's timeout leaves unknown whether the lock was taken: release it
            // at close in case it was.
            if kind.is_some() && e == Errno::EIO {
                locking.held.note(fh, owner, a.place);
            }
            Outcome::Failed(e)
        }
    }
}

/// The books after the replicas granted a lock change of place `place`, whose reply said
/// `answer` of the lease. A lock granted by a reply that came in after a later one said the
/// lease lapsed is lost (the replicas dropped it with the lease): `ENOLCK`.
fn granted(
    link: &mut Link,
    locking: &mut Locking,
    (fh, owner): (FileHandle, u64),
    kind: Option<LockKind>,
    attr: Option<&byzfs_fs::Attr>,
    (place, answer): (u64, Option<Answer>),
) -> Outcome {
    if kind.is_some() {
        if answer == Some(Answer::Late) {
            tracing::warn!(
                ino = fh.ino,
                "a lock the cluster granted was lost: this mount's lease lapsed after it ran \
                 (no lock operation or renewal reached the cluster for 30 s); ENOLCK"
            );
            return Outcome::Failed(Errno::ENOLCK);
        }
        locking.held.note(fh, owner, place);
    }
    let changed = match attr {
        Some(a) => {
            let stamp = Stamp::of(a);
            let before = link.stamps.saw(fh.ino, stamp);
            let changed = kind.is_some() && before.is_some_and(|b| b != stamp);
            if changed {
                // The pages are dropped before the reply, so they are this version.
                link.stamps.pages_dropped(fh.ino, stamp);
            }
            changed
        }
        None => false,
    };
    Outcome::Granted { changed }
}

/// Holds the lease while this mount keeps hidden files ([`byzfs_fs::orphan`]): renews it
/// now (under the mount's lock, which the caller holds across the rename that follows)
/// unless a renewal was confirmed within [`RENEW_EVERY`].
pub(super) fn hold_for_orphans(inner: &mut Inner, cred: &Credentials) {
    if !inner
        .link
        .lease
        .confirmed_within(Instant::now(), RENEW_EVERY)
    {
        lease_call::renew_locked(inner, cred, "cannot take the lease that keeps hidden files");
    }
}

/// Drops `owner`'s locks on `ino`: here if this mount holds the file's delegation, else at
/// the replicas if it may hold some there (the mount's lock let go meanwhile).
pub(super) fn release(mount: &Mutex<Inner>, cred: &Credentials, ino: u64, owner: u64) {
    let mut went = false;
    let begin = |i: &mut Inner| {
        let (link, locking, _) = i.for_locks();
        if locking.busy.contains(&ino) {
            return Begun::Wait;
        }
        if locking.delegs.release(ino, owner) {
            locking.held.take(ino, owner);
            return Begun::Done(());
        }
        let Some(fh) = locking.held.get(ino, owner) else {
            return Begun::Done(());
        };
        let op = Op::ReleaseLocks { fh, owner };
        if let Some(first) = lease_call::first(link, &op, &mut went) {
            return first;
        }
        locking.held.take(ino, owner);
        locking.busy.insert(ino);
        Begun::Sent(Box::new(lease_call::send(link, cred, op, ())))
    };
    let end = |i: &mut Inner, a: Answered<()>| {
        i.locking.busy.remove(&ino);
        match a.result {
            Ok(_) | Err(Errno::ESTALE) => {}
            Err(e) => tracing::warn!(ino, %e, "cannot release locks; they lapse with the lease"),
        }
    };
    let _ = lease_call::run(mount, begin, end);
}

/// Renews the lease if this mount holds locks, delegations or hidden files and the last
/// renewal is [`RENEW_EVERY`] old (the mount's lock let go while the replicas answer).
pub(super) fn renew_if_due(mount: &Mutex<Inner>, cred: &Credentials) {
    let begin = |i: &mut Inner| {
        let needed = i.locking.delegs.any()
            || i.locking.held.any()
            || !i.files.silly.is_empty()
            || i.link.dirs.any_held()
            || i.link.files.any();
        if i.link.lease.renewal_due(Instant::now(), needed) {
            Begun::Renew(cred.clone())
        } else {
            Begun::Done(())
        }
    };
    let _ = lease_call::run(mount, begin, |_, _: Answered<()>| ());
}

/// Answers a granted lock: at once, or, if the file changed elsewhere, after dropping the
/// kernel's cached pages of it from a helper thread (see the module docs).
pub(super) fn grant(
    notifier: &Arc<OnceLock<fuser::Notifier>>,
    ino: u64,
    changed: bool,
    reply: fuser::ReplyEmpty,
) {
    let Some(n) = notifier.get().filter(|_| changed).cloned() else {
        return reply.ok();
    };
    let spawned = std::thread::Builder::new()
        .name("byzfs-lock-inval".into())
        .spawn(move || {
            if let Err(e) = n.inval_inode(fuser::INodeNo(ino), 0, 0) {
                tracing::debug!(ino, %e, "inval_inode");
            }
            reply.ok();
        });
    if let Err(e) = spawned {
        // The reply went with the closure; the kernel gets EIO from its drop.
        tracing::warn!(%e, "cannot start a thread to drop a locked file's pages");
    }
}

/// A lock request that must wait: the waiting thread and what it asked.
pub(super) struct Waiter {
    pub inner: Weak<Mutex<Inner>>,
    pub notifier: Arc<OnceLock<fuser::Notifier>>,
    pub cred: Credentials,
    pub tid: u32,
    pub job: Job,
}

/// What a [`Waiter`] asks, and the reply to give.
pub(super) enum Job {
    /// A `SetLk`: `blocking` waits while the range is taken (`F_SETLKW`, `flock` without
    /// `LOCK_NB`); otherwise it waits only while a delegation is recalled.
    Set {
        op: Op,
        blocking: bool,
        reply: fuser::ReplyEmpty,
    },
    /// An `F_GETLK` that met a recall.
    Get {
        fh: FileHandle,
        owner: u64,
        kind: LockKind,
        range: (u64, u64),
        me: u64,
        reply: fuser::ReplyLock,
    },
}

/// Tries `w`'s request again and again from a thread of its own until it is answered, or
/// the waiting thread gets a signal.
pub(super) fn wait(w: Waiter) {
    let spawned = std::thread::Builder::new()
        .name("byzfs-lock-wait".into())
        .spawn(move || {
            let Waiter {
                inner,
                notifier,
                cred,
                tid,
                job,
            } = w;
            match job {
                Job::Set {
                    op,
                    blocking,
                    reply,
                } => wait_set(&inner, &notifier, &cred, tid, op, blocking, reply),
                Job::Get {
                    fh,
                    owner,
                    kind,
                    range,
                    me,
                    reply,
                } => {
                    let attempt = |m: &Mutex<Inner>| probe(m, &cred, fh, owner, kind, range);
                    loop {
                        match attempt_after(&inner, tid, RECALL_RETRY, attempt) {
                            Err(e) => return reply.error(e),
                            Ok(Probe::Recalling) => continue,
                            Ok(Probe::Answer(c)) => return answer_getlk(c, me, range, reply),
                            Ok(Probe::Failed(e)) => return reply.error(errno(e)),
                        }
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(%e, "cannot start a thread to wait for a lock");
    }
}

/// The loop of a waiting `SetLk` (see [`wait`]).
fn wait_set(
    inner: &Weak<Mutex<Inner>>,
    notifier: &Arc<OnceLock<fuser::Notifier>>,
    cred: &Credentials,
    tid: u32,
    op: Op,
    blocking: bool,
    reply: fuser::ReplyEmpty,
) {
    let (ino, waiting) = match &op {
        Op::SetLk(r) => (r.fh.ino, None),
        Op::SetLkWait(r) => (r.fh.ino, Some((r.fh, r.owner))),
        _ => (0, None),
    };
    let mut busy_nap = RETRY_FIRST;
    let mut nap = RECALL_RETRY;
    loop {
        let outcome = match attempt_after(inner, tid, nap, |m| set(m, cred, &op)) {
            Ok(o) => o,
            Err(e) => {
                if let Some((fh, owner)) = waiting {
                    cancel_wait(inner, cred, fh, owner);
                }
                return reply.error(e);
            }
        };
        match outcome {
            Outcome::Recalling => nap = RECALL_RETRY,
            Outcome::Busy if blocking => {
                nap = busy_nap;
                busy_nap = (busy_nap * 2).min(RETRY_MAX);
            }
            Outcome::Busy => return reply.error(fuser::Errno::EAGAIN),
            Outcome::Deadlock => return reply.error(fuser::Errno::EDEADLK),
            Outcome::Granted { changed } => return grant(notifier, ino, changed, reply),
            Outcome::Failed(e) => return reply.error(errno(e)),
        }
    }
}

/// Tells the replicas that `owner` no longer waits on `fh` (its process got a signal), so
/// its wait cannot make another request fail with `EDEADLK`; if this fails, the record
/// lapses by itself ([`byzfs_fs::deadlock::WAIT_TTL`]).
fn cancel_wait(inner: &Weak<Mutex<Inner>>, cred: &Credentials, fh: FileHandle, owner: u64) {
    let Some(inner) = inner.upgrade() else {
        return;
    };
    let Ok(mut guard) = inner.lock() else {
        return;
    };
    if let Err(e) = invoke(&mut guard.link, cred, Op::CancelWait { fh, owner }) {
        tracing::debug!(ino = fh.ino, %e, "cannot cancel a lock wait; it lapses");
    }
}

/// One attempt of a waiting request, after `nap`: `EINTR` if the waiting thread got a
/// signal meanwhile, `EIO` if the mount is gone.
fn attempt_after<T>(
    inner: &Weak<Mutex<Inner>>,
    tid: u32,
    nap: Duration,
    attempt: impl FnOnce(&Mutex<Inner>) -> T,
) -> Result<T, fuser::Errno> {
    std::thread::sleep(nap);
    if signal_pending(tid) {
        return Err(fuser::Errno::EINTR);
    }
    let inner = inner.upgrade().ok_or(fuser::Errno::EIO)?; // Unmounted.
    Ok(attempt(&inner))
}

/// Whether thread `tid` has a signal pending that it does not block (`SigPnd`/`ShdPnd`
/// less `SigBlk` in `/proc/<tid>/status`). A thread that is gone counts as signalled.
pub(super) fn signal_pending(tid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{tid}/status")) {
        Ok(status) => pending_in(&status),
        Err(_) => true,
    }
}

/// The signal check of [`signal_pending`] on a `status` file's text.
fn pending_in(status: &str) -> bool {
    let mask = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    (mask("SigPnd:") | mask("ShdPnd:")) & !mask("SigBlk:") != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_signals_count_unless_blocked() {
        let status = "Name:\tx\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000002\n\
                      SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n";
        assert!(pending_in(status), "SIGINT pending");
        let blocked = status.replace("SigBlk:\t0000000000000000", "SigBlk:\t0000000000000002");
        assert!(!pending_in(&blocked), "SIGINT blocked");
        let none = status.replace("ShdPnd:\t0000000000000002", "ShdPnd:\t0000000000000000");
        assert!(!pending_in(&none));
        assert!(!signal_pending(std::process::id()), "this test has none");
    }

    #[test]
    fn lock_types_map_both_ways() {
        assert_eq!(kind_of(F_RDLCK), Ok(Some(LockKind::Read)));
        assert_eq!(kind_of(F_WRLCK), Ok(Some(LockKind::Write)));
        assert_eq!(kind_of(F_UNLCK), Ok(None));
        assert!(kind_of(7).is_err());
        assert_eq!(typ_of(LockKind::Write), F_WRLCK);
    }

    #[test]
    fn pairs_granted_before_a_lapse_are_forgotten_and_later_ones_kept() {
        let t = Instant::now();
        let fh = |ino| FileHandle { ino, generation: 1 };
        let mut h = Held::default();
        h.note(fh(2), 7, 3);
        h.note(fh(4), 7, 9);
        // Granted again later: the pair counts from its latest grant.
        h.note(fh(5), 1, 2);
        h.note(fh(5), 1, 8);
        h.note(fh(5), 1, 6);
        let mut lease = Lease::default();
        assert_eq!(lease.answered(8, true, t), Answer::Lapsed(8));
        h.prune(&lease);
        let mut left = h.take_all();
        left.sort_by_key(|(f, o)| (f.ino, *o));
        assert_eq!(left, vec![(fh(4), 7), (fh(5), 1)]);
    }

    #[test]
    fn the_books_follow_each_lapse_once() {
        let t = Instant::now();
        let mut locking = Locking::new(Delegations::new(1, None));
        let f = FileHandle {
            ino: 3,
            generation: 1,
        };
        locking.held.note(f, 7, 4);
        locking.delegs.install(f, Vec::new(), t, 4);
        let mut lease = Lease::default();
        locking.follow(&lease, 0);
        assert!(
            locking.held.any() && locking.delegs.holds(3),
            "no lapse told"
        );
        lease.answered(5, true, t);
        locking.follow(&lease, 0);
        assert!(!locking.held.any() && !locking.delegs.holds(3));
        assert_eq!(locking.followed, 5);
        // Installed after the lapse, under the lease place 5 took again.
        locking.held.note(f, 7, 6);
        locking.delegs.install(f, Vec::new(), t, 6);
        locking.follow(&lease, 0);
        assert!(locking.held.any() && locking.delegs.holds(3));
    }
}
