//! Calls to the cluster: one operation (retried on `EBUSY` and while the cluster is
//! unreachable, within the mount's timeout), held-back writes sent, and the background
//! thread (write flushes, lease renewals, delegation recalls, orphan sweeps, reclaim steps).

use super::{
    decode_result, delegations, dirs, gather, inflight, locks, own_credentials, reclaim, AttrCache,
    BTreeMap, Credentials, Duration, Effect, Errno, FsResult, Gather, HashMap, Inner, Mutex, Op,
    Reply, Stamp, SWEEP_EVERY,
};
use crate::transport::Transport;
use crate::wire::{Outcome, Ticket, Wire};
use byzfs_fs::proto::batch::MAX_BATCH;
use byzfs_fs::FileHandle;

/// The cluster and what every call to it passes through: the client and its runtime, the
/// mount's options for calls, writes held back, the attribute cache the replies fill, the
/// attributes last seen of each file, and the reclaim bookkeeping. Locks and delegations
/// borrow this and their own books only (`locks.rs`).
pub(crate) struct Link {
    /// The cluster client (`wire.rs`), shared with callers waiting without the mount's
    /// lock.
    pub(crate) wire: std::sync::Arc<Wire>,
    /// Operations sent to the cluster, by kind: how many, and the time spent waiting for
    /// them (logged at unmount: where a workload's round trips and time go).
    pub(crate) sent: BTreeMap<&'static str, (u64, Duration)>,
    /// `None`: a hard mount (see [`crate::MountOptions::timeout`]).
    pub(crate) timeout: Option<Duration>,
    /// Send read-only operations as ordered requests.
    pub(crate) strict: bool,
    /// Writes held back (`gather.rs`).
    pub(crate) gather: Gather,
    /// Hold writes back at all (not `--sync-writes`).
    pub(crate) gather_writes: bool,
    /// Attributes from the cluster's replies, answering the kernel's `getattr` within the
    /// cache timeout (`attrs.rs`).
    pub(crate) attrs: AttrCache,
    /// The last attributes seen for each inode the kernel holds, to tell at `open` whether
    /// another client changed the file since.
    pub(crate) stamps: HashMap<u64, Stamp>,
    /// The attributes each inode had at its last `open` that let the kernel drop its cached
    /// pages: an `open` that finds the same ones keeps the pages (`FOPEN_KEEP_CACHE`).
    pub(crate) opened: HashMap<u64, Stamp>,
    /// Whether reclaim steps are due (`reclaim.rs`).
    pub(crate) reclaim: reclaim::Reclaimer,
    /// Directory delegations and the operations answered early in them (`dirs.rs`).
    pub(crate) dirs: dirs::Dirs,
    /// Write-back batches sent and not yet answered (`inflight.rs`).
    pub(crate) inflight: inflight::InFlight,
    /// Handles reserved for new entries (`handles.rs`).
    pub(crate) handles: super::handles::Handles,
    /// Read-only operations go in lanes (more than one FUSE thread: `lib.rs` `call`).
    pub(crate) lanes: bool,
    /// An encrypted mount's crypto layer (`crypt.rs`), between every operation and the wire.
    pub(crate) crypt: Option<Box<crate::crypt::Crypt>>,
}

/// Runs `op` on the cluster with `cred` (no bookkeeping). Waits until the cluster answers,
/// or up to the soft mount's timeout; the client retransmits meanwhile and its links
/// reconnect by themselves, so replicas killed and restarted never surface as errors. An
/// operation that grows a file the replicas are still shrinking (`EBUSY`) is sent again
/// once that file's old tail is gone, and one that may leave space to give back wakes the
/// background reclaim (`reclaim.rs`).
///
/// An operation on names in a directory another mount holds (`dirs.rs`) is answered
/// `Recall`: it is sent again, ordered (so the replicas ask the holder to give the directory
/// back), every [`dirs::RECALL_RETRY`], until it runs; meanwhile this mount gives back what
/// it is asked for itself, so two mounts waiting on each other's directories both go on.
pub(crate) fn invoke(link: &mut Link, cred: &Credentials, op: Op) -> FsResult {
    let again = (!op.is_lock() && !op.dirs_named().is_empty()).then(|| op.clone());
    let mut r = invoke_step(link, cred, op, false);
    if let Some(op) = again {
        let mut waits = 0u32;
        while matches!(r, Ok(Reply::Recall)) {
            if waits.is_multiple_of(200) {
                tracing::debug!(op = op.name(), "waiting for another mount's directory");
            }
            waits = waits.wrapping_add(1);
            give_back_recalled_dirs(link, cred);
            std::thread::sleep(dirs::RECALL_RETRY);
            r = invoke_step(link, cred, op.clone(), true);
        }
    }
    r
}

/// [`invoke`] without the retries after a recall.
fn invoke_step(link: &mut Link, cred: &Credentials, op: Op, ordered: bool) -> FsResult {
    let queues = reclaim::may_queue(&op);
    let r = match reclaim::grows(&op) {
        Some(fh) => reclaim::invoke_growing(link, cred, fh, op),
        None => invoke_once_as(link, cred, op, ordered),
    };
    link.reclaim.after(queues && r.is_ok());
    r
}

/// Gives back the directories the replicas asked this mount for (see [`invoke`]).
fn give_back_recalled_dirs(link: &mut Link, cred: &Credentials) {
    if !link.dirs.any_held() {
        return;
    }
    if let Ok(Reply::Recalls(inos)) = invoke_once(link, cred, Op::Recalls) {
        for ino in inos {
            if link.dirs.holds(ino) {
                dirs::give_back(link, cred, ino);
            }
        }
    }
}

/// [`invoke`] without its `EBUSY` retry, recall retries and reclaim bookkeeping.
pub(crate) fn invoke_once(link: &mut Link, cred: &Credentials, op: Op) -> FsResult {
    invoke_once_as(link, cred, op, false)
}

/// [`invoke_once`], `ordered` even if read-only.
fn invoke_once_as(link: &mut Link, cred: &Credentials, op: Op, ordered: bool) -> FsResult {
    let prep = prepare(link, &op, ordered);
    let result = match link.crypt.take() {
        Some(mut crypt) => {
            let r = crypt.call(link, cred, op, prep.read_only);
            link.crypt = Some(crypt);
            r
        }
        None => transmit(link, cred, op, prep.read_only),
    };
    settle(link, prep, u64::MAX, &result);
    result
}

/// What an operation needs done after its reply ([`settle`]), found before it is sent.
struct Prep {
    read_only: bool,
    effect: Effect,
    /// Held directories whose names it changes.
    changes_held: Vec<FileHandle>,
    /// A held directory whose attributes it sets.
    sets_held: Option<FileHandle>,
}

/// Before `op` goes: waits for the write-back in flight it may see (`inflight.rs`), sends
/// what must reach the replicas first, and notes what its reply must update ([`settle`]).
fn prepare(link: &mut Link, op: &Op, ordered: bool) -> Prep {
    if link.inflight.must_precede(op) {
        inflight::land_all_for(link, op.name());
    }
    prepare_after_flight(link, op, ordered, Wait::Yes)
}

/// [`prepare`] but for the write-back in flight, which a batch of it follows in order;
/// what must go before `op` is sent as `first` says (a batch left in flight sends it in
/// flight too: it runs before the batch all the same, and the writer need not wait).
fn prepare_after_flight(link: &mut Link, op: &Op, ordered: bool, first: Wait) -> Prep {
    // Operations answered early, then writes held back, go first: every operation sees
    // them (they are taken, so the recursive calls send nothing else first). The recall
    // poll reads no file: it would otherwise send them every few milliseconds while
    // delegations are held.
    if !matches!(op, Op::Recalls) {
        // The held writes this operation may see (`gather::needs`).
        let files = gather::needs(op);
        let needed: Vec<u64> = match &files {
            Some(inos) => inos
                .iter()
                .copied()
                .filter(|&i| link.gather.holds(i))
                .collect(),
            None => link.gather.inos().collect(),
        };
        // Writes held back for a file the queue makes go with it, after it.
        let gathered_new = needed.iter().any(|&i| link.dirs.touches(i));
        // An encrypted mount makes a directory at a reserved handle (`crypt.rs`): the
        // lower ones the queue took must reach the replicas first (`byzfs_fs::reserve`).
        let takes_handle = link.crypt.is_some() && matches!(op, Op::Mkdir { .. });
        if link.dirs.must_precede(op) || gathered_new || takes_handle {
            dirs::send_queue(link, first);
        }
        let held = match files {
            Some(_) => needed
                .into_iter()
                .filter_map(|i| link.gather.take_file(i))
                .collect(),
            None => link.gather.take_all(),
        };
        send_writes(link, held, first);
    }
    // Names changed in held directories by anything but the queue: listed again before use.
    // A held directory's own attributes come back in the reply.
    let changes_held = match op {
        Op::Batch(_) | Op::DelegateDir { .. } | Op::ReturnDir { .. } | Op::SetAttr { .. } => {
            Vec::new()
        }
        _ if op.is_read_only() || !link.dirs.any_held() => Vec::new(),
        _ => op.dirs_named(),
    };
    // A hard link or a rename makes a file reachable from another directory.
    match op {
        Op::Link { fh, .. } => link.dirs.not_mine(fh.ino),
        Op::Rename {
            from_dir,
            from_name,
            ..
        }
        | Op::RenameNoReplace {
            from_dir,
            from_name,
            ..
        } => link.dirs.renamed_through_cluster(&[(*from_dir, from_name)]),
        Op::Exchange {
            a_dir,
            a_name,
            b_dir,
            b_name,
        } => link
            .dirs
            .renamed_through_cluster(&[(*a_dir, a_name), (*b_dir, b_name)]),
        _ => {}
    }
    let sets_held = match op {
        Op::SetAttr { fh, .. } if link.dirs.holds(fh.ino) => Some(*fh),
        _ => None,
    };
    Prep {
        // The flag is only a hint: replicas decide from the operation itself what is
        // read-only.
        read_only: op.is_read_only() && !link.strict && !ordered,
        effect: Effect::of(op),
        changes_held,
        sets_held,
    }
}

/// After `result` came back for an operation sent at the attribute cache's `mark`
/// (`u64::MAX`: the mount's lock was held since).
fn settle(link: &mut Link, prep: Prep, mark: u64, result: &FsResult) {
    settle_but(link, prep, mark, result, &std::collections::HashSet::new());
}

/// [`settle`], the attributes of the inodes in `later` passed over (see
/// [`AttrCache::record_since_but`]).
fn settle_but(
    link: &mut Link,
    prep: Prep,
    mark: u64,
    result: &FsResult,
    later: &std::collections::HashSet<u64>,
) {
    let now = std::time::Instant::now();
    link.attrs
        .record_since_but(mark, prep.effect, result, now, later);
    if !prep.changes_held.is_empty() {
        link.dirs.changed_elsewhere(&prep.changes_held);
    }
    if let Some(fh) = prep.sets_held {
        match result {
            Ok(Reply::Attr(a)) => link.dirs.set_attr(a),
            _ => link.dirs.changed_elsewhere(&[fh]),
        }
    }
}

/// A read-only operation of a plain mount sent by [`send_in_lane`], not yet answered.
pub(crate) struct InLane {
    prep: Prep,
    /// The request's size.
    bytes: usize,
    mark: u64,
    wire: std::sync::Arc<Wire>,
    ticket: Ticket,
    name: &'static str,
    began: std::time::Instant,
    timeout: Option<Duration>,
}

/// Whether [`send_in_lane`] takes `op`: a read-only operation of a mount without the
/// crypto layer (whose reads fetch and check headers in several calls: `crypt.rs`), other
/// than the recall poll.
pub(crate) fn lane_takes(link: &Link, op: &Op) -> bool {
    link.lanes && link.crypt.is_none() && op.is_read_only() && !matches!(op, Op::Recalls)
}

/// The first half of [`invoke_once`] for an operation [`lane_takes`]: sends what must go
/// first, then `op`, and returns without waiting, so the caller can let the mount's lock go
/// while `op` is at the replicas (`lib.rs` `call`). Its place among the mount's requests is
/// fixed here (`wire.rs`).
pub(crate) fn send_in_lane(link: &mut Link, cred: &Credentials, op: Op) -> InLane {
    let prep = prepare(link, &op, false);
    sent_in_lane(link, cred, op, prep)
}

/// [`send_in_lane`] for a write-back batch left in flight (`inflight.rs`): it waits for
/// none of the others, which go before it in order.
pub(crate) fn send_in_flight(link: &mut Link, cred: &Credentials, op: Op) -> InLane {
    let prep = prepare_after_flight(link, &op, false, Wait::InFlight);
    sent_in_lane(link, cred, op, prep)
}

fn sent_in_lane(link: &mut Link, cred: &Credentials, op: Op, prep: Prep) -> InLane {
    let name = op.name();
    tracing::trace!(op = name, "send in a lane");
    let request = link.wire.request(cred, op);
    InLane {
        mark: link.attrs.mark(),
        bytes: request.len(),
        ticket: link.wire.call(request, prep.read_only),
        wire: std::sync::Arc::clone(&link.wire),
        prep,
        name,
        began: std::time::Instant::now(),
        timeout: link.timeout,
    }
}

impl InLane {
    /// When it was sent.
    pub(crate) fn began(&self) -> std::time::Instant {
        self.began
    }

    /// Its request's size.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The reply if it is in, without waiting.
    pub(crate) fn ready(&mut self) -> Option<Outcome> {
        self.ticket.ready()
    }

    /// Waits for the reply (without the mount's lock).
    pub(crate) fn wait(&mut self) -> Option<Outcome> {
        let ticket = std::mem::replace(&mut self.ticket, Ticket::Done);
        self.wire.wait(ticket, self.timeout, self.name)
    }
}

/// The second half: what [`invoke_once`] does with the reply, the mount's lock taken again.
pub(crate) fn finish_in_lane(link: &mut Link, sent: InLane, out: Option<Outcome>) -> FsResult {
    let result = received(link, sent.name, sent.began, out);
    settle(link, sent.prep, sent.mark, &result);
    result
}

/// [`finish_in_lane`] for a write-back batch in flight: what its reply says of the inodes
/// in `later`, which batches sent after it change, is passed over (`inflight.rs`).
pub(crate) fn finish_in_flight(
    link: &mut Link,
    sent: InLane,
    out: Option<Outcome>,
    later: &std::collections::HashSet<u64>,
) -> FsResult {
    let result = received(link, sent.name, sent.began, out);
    settle_but(link, sent.prep, sent.mark, &result, later);
    result
}

/// Sends `op` as it is and waits for its result, or up to the soft mount's timeout: the
/// wire under [`invoke_once`] (and under the crypto layer, `crypt.rs`).
pub(crate) fn transmit(link: &mut Link, cred: &Credentials, op: Op, read_only: bool) -> FsResult {
    let name = op.name();
    tracing::trace!(op = name, "send");
    let began = std::time::Instant::now();
    let ticket = link.wire.call(link.wire.request(cred, op), read_only);
    let out = link.wire.wait(ticket, link.timeout, name);
    received(link, name, began, out)
}

/// The result of an operation `name` sent at `began`, from what its wait got (`None`: the
/// soft mount's timeout), counted in [`Link::sent`].
fn received(
    link: &mut Link,
    name: &'static str,
    began: std::time::Instant,
    out: Option<Outcome>,
) -> FsResult {
    let tally = link.sent.entry(name).or_default();
    tally.0 += 1;
    tally.1 += began.elapsed();
    match out {
        Some(Ok(b)) => decode_result(&b).unwrap_or(Err(Errno::EIO)),
        Some(Err(e)) => {
            tracing::warn!(op = name, error = %e, "invoke failed");
            Err(Errno::EIO)
        }
        None => {
            tracing::warn!(op = name, "no reply within the soft mount's timeout: EIO");
            Err(Errno::EIO)
        }
    }
}

/// Sends writes held back (`gather.rs`); a failure is kept for the file's next `close` or
/// `fsync`.
pub(crate) fn send_held(link: &mut Link, p: gather::Pending) {
    let ino = p.fh.ino;
    let (cred, op) = p.into_op();
    send_write(link, ino, &cred, op);
}

/// Whether a sender waits for what it sends of the write-back (`inflight.rs`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Sent and answered before the sender goes on.
    Yes,
    /// Left in flight where the mount may (no room to hold more, or old enough).
    InFlight,
}

/// Sends held writes of several files (oldest first), a caller's together in one
/// `Op::Batch` as far as [`MAX_BATCH`] operations and the gather's bytes of data allow:
/// files written and closed under write-back (`filesystem.rs` `flush`) go in few round
/// trips. A batch runs all or nothing, so one that fails is sent again file by file, and
/// each file keeps its own error.
pub(crate) fn send_writes(link: &mut Link, held: Vec<gather::Pending>, wait: Wait) {
    let limit = link.gather.limit();
    let mut batch: Vec<gather::Pending> = Vec::new();
    let mut bytes = 0;
    for p in held {
        let cost = link.gather.cost(&p);
        let full = batch.len() >= MAX_BATCH || bytes + cost > limit;
        if batch.first().is_some_and(|b| b.cred != p.cred) || full {
            send_batch(link, std::mem::take(&mut batch), wait);
            bytes = 0;
        }
        bytes += cost;
        batch.push(p);
    }
    send_batch(link, batch, wait);
}

/// One batch of [`send_writes`]: one caller's writes.
fn send_batch(link: &mut Link, batch: Vec<gather::Pending>, wait: Wait) {
    let Some(first) = batch.first() else {
        return;
    };
    if wait == Wait::Yes && batch.len() == 1 {
        for p in batch {
            send_held(link, p);
        }
        return;
    }
    let cred = first.cred.clone();
    let (inos, ops): (Vec<u64>, Vec<Op>) =
        batch.into_iter().map(|p| (p.fh.ino, p.into_op().1)).unzip();
    let op = match <[Op; 1]>::try_from(ops.clone()) {
        Ok([op]) => op,
        Err(ops) => Op::Batch(ops),
    };
    let sent = WritesSent { cred, inos, ops };
    match wait {
        Wait::InFlight => {
            let footprint = inflight::footprint_of(&sent.ops);
            let cred = sent.cred.clone();
            inflight::send(link, &cred, op, footprint, inflight::Then::Writes(sent));
        }
        Wait::Yes => {
            let r = invoke(link, &sent.cred, op);
            sent.answered(link, r, true);
        }
    }
}

/// Held writes sent, one file's or several's in one batch ([`send_writes`]), for their
/// answer.
pub(crate) struct WritesSent {
    cred: Credentials,
    inos: Vec<u64>,
    ops: Vec<Op>,
}

impl WritesSent {
    /// Handles the answer. A batch that failed ran nothing: each file's writes are sent
    /// again alone and keep their own error. One file's writes that failed are sent again
    /// too unless `final_answer` (sent by [`invoke`], with its own retries), when the
    /// error is kept for the file.
    pub(crate) fn answered(self, link: &mut Link, result: FsResult, final_answer: bool) {
        let n = self.ops.len();
        match result {
            Ok(Reply::Write { attr, .. } | Reply::Attr(attr)) if n == 1 => {
                link.stamps.insert(self.inos[0], Stamp::of(&attr));
            }
            Ok(Reply::Batch(replies)) if n > 1 && replies.len() == n => {
                for (ino, reply) in self.inos.into_iter().zip(replies) {
                    if let Reply::Write { attr, .. } | Reply::Attr(attr) = reply {
                        link.stamps.insert(ino, Stamp::of(&attr));
                    }
                }
            }
            other if n == 1 && final_answer => {
                let e = match other {
                    Err(e) => e,
                    Ok(_) => Errno::EIO,
                };
                write_failed(link, self.inos[0], e);
            }
            other => {
                tracing::debug!(files = n, ?other, "held writes failed; sent file by file");
                for (ino, op) in self.inos.into_iter().zip(self.ops) {
                    send_write(link, ino, &self.cred, op);
                }
            }
        }
    }
}

/// Sends `op`, the writes held back for `ino` (see [`send_held`]).
pub(crate) fn send_write(link: &mut Link, ino: u64, cred: &Credentials, op: Op) {
    match invoke(link, cred, op) {
        Ok(Reply::Write { attr, .. } | Reply::Attr(attr)) => {
            link.stamps.insert(ino, Stamp::of(&attr));
        }
        Ok(_) => write_failed(link, ino, Errno::EIO),
        Err(e) => write_failed(link, ino, e),
    }
}

/// `ino`'s held writes failed for good: the error waits for its next `close` or `fsync`.
fn write_failed(link: &mut Link, ino: u64, e: Errno) {
    tracing::debug!(ino, %e, "held-back writes failed; reported at close or fsync");
    link.gather.failed(ino, e);
    // The replicas do not hold what the kept bytes say (`mine.rs`).
    link.dirs.contents_changed(ino);
}

/// The background thread's pause between reclaim steps: the mount's lock is free
/// meanwhile, so a user's operation waits behind at most one step.
pub(crate) const RECLAIM_PAUSE: Duration = Duration::from_millis(1);

/// How long the background thread drives the client at each tick, when no caller does
/// (`wire.rs`): replies that came late, reconnections.
pub(crate) const LINK_DRIVE: Duration = Duration::from_millis(2);

/// How long the background thread leads the client at a time while write-back is in
/// flight (`inflight.rs`), the mount's lock let go: the longest an answer waits to be
/// handled once in.
const FLIGHT_DRIVE: Duration = Duration::from_millis(10);

/// While the mount lives, every quarter of [`gather::MAX_AGE`]: sends held-back writes
/// older than it, renews the lock lease when due (`locks.rs`), sweeps the orphan
/// directory, and drives the client for [`LINK_DRIVE`] with the mount's lock let go
/// (`wire.rs`: otherwise only waiting callers drive it). While it holds lock or directory
/// delegations, every [`delegations::POLL_EVERY`] or more (`nudge` wakes it when one
/// arrives): polls for recalls, without the mount's lock, and gives back those recalled or
/// idle.
pub(crate) fn spawn_background(
    inner: std::sync::Weak<Mutex<Inner>>,
    nudge: std::sync::mpsc::Receiver<()>,
) {
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
                let Some(mount) = inner.upgrade() else {
                    return; // Unmounted.
                };
                // The recall poll, its round trip without the mount's lock (`poll_sent`).
                let Ok(mut guard) = mount.lock() else {
                    return;
                };
                let (link, locking, _) = guard.for_locks();
                let poll = delegations::poll_sent(link, &mut locking.delegs, &cred);
                drop(guard);
                if let Some(mut sent) = poll {
                    let out = sent.wait();
                    let Ok(mut guard) = mount.lock() else {
                        return;
                    };
                    let (link, locking, _) = guard.for_locks();
                    delegations::poll_answered(link, &mut locking.delegs, &cred, (sent, out));
                }
                let Ok(mut inner) = mount.lock() else {
                    return;
                };
                let mut drive = None;
                // One reclaim step per wake-up, the lock released in between.
                let reclaiming = reclaim::step(&mut inner.link, &cred);
                // Answers of write-back in flight that came in (`inflight.rs`).
                inflight::land_ready(&mut inner.link);
                // Old enough: sent, not waited for.
                if inner.link.dirs.due(std::time::Instant::now()) {
                    dirs::send_queue(&mut inner.link, Wait::InFlight);
                }
                if chores.elapsed() >= tick {
                    chores = std::time::Instant::now();
                    let stale = inner.link.gather.take_stale();
                    send_writes(&mut inner.link, stale, Wait::InFlight);
                    let (link, locking, hidden) = inner.for_locks();
                    locks::renew_if_due(link, locking, hidden, &cred);
                    sweep.step(&mut inner.link, &cred);
                    drive = Some(std::sync::Arc::clone(&inner.link.wire));
                }
                // Write-back in flight is sent and answered only while someone leads the
                // client (`wire.rs`), and its writer does not wait: this thread leads.
                let flying = !inner.link.inflight.is_empty();
                if flying {
                    drive = Some(std::sync::Arc::clone(&inner.link.wire));
                }
                nap = if flying {
                    Duration::ZERO
                } else if reclaiming {
                    RECLAIM_PAUSE
                } else if inner.locking.delegs.any() || inner.link.dirs.any_held() {
                    inner.locking.delegs.poll_every()
                } else {
                    tick.saturating_sub(chores.elapsed())
                        .max(delegations::POLL_EVERY)
                };
                drop(inner);
                if let Some(wire) = drive {
                    let led = wire.drive_for(if flying { FLIGHT_DRIVE } else { LINK_DRIVE });
                    if flying && !led {
                        // A waiting caller leads and hands the answers on meanwhile.
                        std::thread::sleep(FLIGHT_DRIVE);
                    }
                }
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
pub(crate) struct Sweep {
    /// Under way: go on after this cookie.
    at: Option<u64>,
    /// When the next one starts (`None`: now).
    next: Option<std::time::Instant>,
}

impl Sweep {
    fn step(&mut self, link: &mut Link, cred: &Credentials) {
        let now = std::time::Instant::now();
        if self.at.is_none() && self.next.is_some_and(|t| now < t) {
            return;
        }
        let after = self.at.unwrap_or(0);
        self.at = match invoke(link, cred, Op::SweepOrphans { after }) {
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

/// The crypto layer's wire (`transport.rs`): the calls under it go out as they are.
impl Transport for Link {
    fn transmit(&mut self, cred: &Credentials, op: Op, read_only: bool) -> FsResult {
        transmit(self, cred, op, read_only)
    }

    fn strict(&self) -> bool {
        self.strict
    }

    fn granted(&self, cred: &Credentials) -> Credentials {
        self.wire.granted(cred)
    }

    /// From the mount's one pool (`handles.rs`).
    fn new_handle(&mut self, cred: &Credentials) -> Result<FileHandle, Errno> {
        super::handles::take_now(self, cred)
    }
}
