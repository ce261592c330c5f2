//! Write-back as requests to send: what the mount holds (the queue of early answers,
//! `dirs.rs`; writes held back, `gather.rs`) taken from the books and packed into
//! [`Outgoing`] requests, in the order they must reach the replicas, and what each answer
//! means for the books. Nothing here sends: a plan goes to `sender.rs` `run`, which sends
//! it (waiting, or left in flight) and runs the follow-ups an answer asks for, one after
//! another. So an operation's sender is told what must go before it ([`before`]) instead
//! of sending it from inside its own send.

use crate::awaiting::{QueueSent, Then, WritesSent};
use crate::dirs::Dirs;
use crate::gather::{self, Gather, Pending};
use crate::held_files::HeldFiles;
use crate::inflight::footprint_of;
use crate::link::Link;
use byzfs_fs::proto::batch::{may_batch, MAX_BATCH};
use byzfs_fs::{Credentials, Errno, FileHandle, FsResult, Op, Reply};
use std::collections::HashSet;

use crate::attrs::Stamp;

/// Whether a sender waits for what it sends of the write-back (`inflight.rs`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Wait {
    /// Sent and answered before the sender goes on.
    Yes,
    /// Left in flight where the mount may (no room to hold more, or old enough).
    InFlight,
}

/// One write-back request to send, and what its answer is for.
pub(crate) struct Outgoing {
    pub(crate) cred: Credentials,
    pub(crate) op: Op,
    pub(crate) then: Then,
    pub(crate) wait: Wait,
    /// What it writes, makes or changes names in (`inflight.rs`), if left in flight.
    pub(crate) footprint: HashSet<u64>,
    /// It already waited once for the write-back in flight (counted in
    /// `InFlight::waited_by` or `waited_for_room`).
    pub(crate) counted: bool,
    /// Answered `Recall` (a file another mount holds): sent again after a pause in which
    /// this mount gives back what it is asked for (`sender.rs` `run`).
    pub(crate) recalled: bool,
}

impl Outgoing {
    /// `ino`'s writes `op`, alone and waited for: its error is kept for the file.
    fn write(cred: &Credentials, ino: u64, op: Op) -> Outgoing {
        let kept = vec![op.clone()];
        Outgoing {
            cred: cred.clone(),
            op,
            then: Then::Writes(WritesSent {
                cred: cred.clone(),
                inos: vec![ino],
                ops: kept,
            }),
            wait: Wait::Yes,
            footprint: HashSet::new(),
            counted: false,
            recalled: false,
        }
    }

    /// Handles reserved ahead, in flight (`handles.rs`).
    pub(crate) fn reserve(cred: &Credentials) -> Outgoing {
        Outgoing {
            cred: cred.clone(),
            op: Op::ReserveInodes {
                count: crate::handles::RESERVE,
            },
            then: Then::Reserved,
            wait: Wait::InFlight,
            footprint: HashSet::new(),
            counted: false,
            recalled: false,
        }
    }
}

/// What must reach the replicas before operation `op` (sent as `first` says; a batch left
/// in flight runs before `op` all the same, and its writer need not wait): the queue of
/// early answers if `op` may see what it changes, then the held writes `op` may see
/// (`gather::needs`), those of a file the queue makes after the queue. They are taken from
/// the books now, so nothing sent before `op` needs anything sent before it in turn but
/// the queue ([`queue_before`]). The recall poll reads no file: it would otherwise send
/// them every few milliseconds while delegations are held.
pub(crate) fn before(link: &mut Link, op: &Op, first: Wait) -> Vec<Outgoing> {
    if matches!(op, Op::Recalls) {
        return Vec::new();
    }
    let files = gather::needs(op);
    // A lookup reads names, and the attributes of what it finds: a file whose held
    // writes say its attributes exactly (`gather::Gather::expected`) keeps them, and the
    // reply is given those (`lib.rs` `call`).
    let lookup = matches!(op, Op::Lookup { .. });
    let needed: Vec<u64> = match &files {
        Some(inos) => inos
            .iter()
            .copied()
            .filter(|&i| link.gather.holds(i))
            .collect(),
        None if lookup => link
            .gather
            .inos()
            .filter(|&i| link.gather.expected(i).is_none())
            .collect(),
        None => link.gather.inos().collect(),
    };
    // Writes held back for a file the queue makes go with it, after it.
    let gathered_new = needed.iter().any(|&i| link.dirs.touches(i));
    let mut out = if queue_must_go(link, op) || gathered_new {
        queue(&mut link.dirs, &mut link.gather, &link.files, first)
    } else {
        Vec::new()
    };
    let held = match files {
        None if !lookup => link.gather.take_all(),
        _ => needed
            .into_iter()
            .filter_map(|i| link.gather.take_file(i))
            .collect(),
    };
    out.extend(writes(&link.gather, held, first));
    out
}

/// What must reach the replicas before write-back request `op`: the queue, if it makes
/// what `op` writes (`dirs::Dirs::must_precede`). Not the writes held since `op` was
/// taken: they are newer than `op`'s (a batch that failed, sent again file by file), and
/// go after it.
pub(crate) fn queue_before(link: &mut Link, op: &Op, first: Wait) -> Vec<Outgoing> {
    if queue_must_go(link, op) {
        queue(&mut link.dirs, &mut link.gather, &link.files, first)
    } else {
        Vec::new()
    }
}

/// Whether the queue must reach the replicas before `op`: `op` may see what it changes, or
/// (an encrypted mount) `op` makes a directory at a reserved handle, and the lower ones
/// the queue took must be made first (`byzfs_fs::reserve`; `crypt.rs`).
fn queue_must_go(link: &Link, op: &Op) -> bool {
    let takes_handle = link.crypt.is_some() && matches!(op, Op::Mkdir { .. });
    link.dirs.must_precede(op) || takes_handle
}

/// The queue of early answers as one batch, with this caller's held writes joined to it
/// (as far as [`MAX_BATCH`] and the gather's bytes allow), then the other held writes.
/// Only writes no other mount's file delegation can recall join (of files the queue makes,
/// this mount made in a directory it holds, or holds: `held_files.rs`): the queue's own
/// operations are not kept to be sent again.
pub(crate) fn queue(
    dirs: &mut Dirs,
    gather: &mut Gather,
    files: &HeldFiles,
    wait: Wait,
) -> Vec<Outgoing> {
    let footprint: HashSet<u64> = dirs.touched.iter().copied().collect();
    let Some((cred, mut ops)) = dirs.take_queue() else {
        return Vec::new();
    };
    let unrecallable = |ino: u64| footprint.contains(&ino) || dirs.is_mine(ino) || files.holds(ino);
    // Other callers' writes, sent after the batch; and (never met: held writes are writes
    // without size changes) what may not join one.
    let mut after = Vec::new();
    let mut alone = Vec::new();
    let mut joined = Vec::new();
    // A queued operation's name and framing.
    let mut bytes = ops.len() * 300;
    for p in gather.take_all() {
        let cost = gather.cost(&p);
        // One file's writes join whatever their size (a file's writes fill an operation).
        let room = joined.is_empty() || bytes + cost <= gather.limit();
        if p.cred != cred || ops.len() >= MAX_BATCH || !room || !unrecallable(p.fh.ino) {
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
    if dirs.sent.len() < 4 * MAX_BATCH {
        dirs.sent.extend(touched.iter().copied());
    }
    let first_write = n - joined.len();
    let writes_joined: Vec<Op> = ops[first_write..].to_vec();
    let mut footprint = footprint;
    footprint.extend(touched);
    footprint.extend(joined.iter().copied());
    let sent = QueueSent {
        cred: cred.clone(),
        n,
        joined,
        writes: writes_joined,
    };
    let mut out = vec![Outgoing {
        cred: cred.clone(),
        op: Op::Batch(ops),
        then: Then::Queue(sent),
        wait,
        footprint,
        counted: false,
        recalled: false,
    }];
    out.extend(
        alone
            .into_iter()
            .map(|(ino, op)| Outgoing::write(&cred, ino, op)),
    );
    out.extend(writes(gather, after, wait));
    out
}

/// Everything held: the queue of early answers, with the writes that join it, and every
/// other held write (a delegation given back, unmount, the gather full).
pub(crate) fn everything(link: &mut Link, wait: Wait) -> Vec<Outgoing> {
    let mut out = queue(&mut link.dirs, &mut link.gather, &link.files, wait);
    let rest = link.gather.take_all();
    out.extend(writes(&link.gather, rest, wait));
    out
}

/// Held writes of several files (oldest first), a caller's together in one `Op::Batch`
/// as far as [`MAX_BATCH`] operations and the gather's bytes of data allow: files written
/// and closed under write-back (`filesystem.rs` `flush`) go in few round trips. A batch
/// runs all or nothing, so one that fails is sent again file by file, and each file keeps
/// its own error ([`answered`]).
pub(crate) fn writes(gather: &Gather, held: Vec<Pending>, wait: Wait) -> Vec<Outgoing> {
    let limit = gather.limit();
    let mut out = Vec::new();
    let mut batch: Vec<Pending> = Vec::new();
    let mut bytes = 0;
    for p in held {
        let cost = gather.cost(&p);
        let full = batch.len() >= MAX_BATCH || bytes + cost > limit;
        if batch.first().is_some_and(|b| b.cred != p.cred) || full {
            out.extend(batch_of(std::mem::take(&mut batch), wait));
            bytes = 0;
        }
        bytes += cost;
        batch.push(p);
    }
    out.extend(batch_of(batch, wait));
    out
}

/// One request of [`writes`]: one caller's writes, one file's as they are.
fn batch_of(batch: Vec<Pending>, wait: Wait) -> Option<Outgoing> {
    let cred = batch.first()?.cred.clone();
    let (inos, ops): (Vec<u64>, Vec<Op>) =
        batch.into_iter().map(|p| (p.fh.ino, p.into_op().1)).unzip();
    let footprint = footprint_of(&ops);
    // Kept to be sent again: file by file after a failed batch, as they were after a
    // recall ([`answered`]).
    let kept = ops.clone();
    let op = match <[Op; 1]>::try_from(ops) {
        Ok([op]) => op,
        Err(ops) => Op::Batch(ops),
    };
    Some(Outgoing {
        cred: cred.clone(),
        op,
        then: Then::Writes(WritesSent {
            cred,
            inos,
            ops: kept,
        }),
        wait,
        footprint,
        counted: false,
        recalled: false,
    })
}

/// What write-back request `then` came back with means for the books, and what it asks to
/// send next (first, before anything else). `final_answer`: it was sent waited for, with
/// the retries of an ordinary operation (`sender.rs` `send_growing`), so one file's error is
/// kept for the file rather than sent again.
pub(crate) fn answered(
    link: &mut Link,
    then: Then,
    result: FsResult,
    final_answer: bool,
) -> Vec<Outgoing> {
    match then {
        Then::Queue(q) => queue_answered(link, q, result),
        Then::Writes(w) => writes_answered(link, w, result, final_answer),
        Then::Reserved => {
            link.handles.reserved(result);
            Vec::new()
        }
        Then::Returned(ino) => {
            match result {
                Ok(_) | Err(Errno::ENOLCK | Errno::ESTALE) => {}
                Err(e) => tracing::debug!(ino, %e, "cannot give a file back; it lapses"),
            }
            Vec::new()
        }
    }
}

/// Gives back held file `file` (another mount asked for it, `held_files.rs`): its held
/// writes, then `Op::ReturnFile` (which waits for the write-back in flight that writes it:
/// `InFlight::must_precede`).
pub(crate) fn give_back_file(
    link: &mut Link,
    cred: &Credentials,
    file: FileHandle,
) -> Vec<Outgoing> {
    let held: Vec<Pending> = link.gather.take_file(file.ino).into_iter().collect();
    let mut out = writes(&link.gather, held, Wait::Yes);
    out.push(Outgoing {
        cred: cred.clone(),
        op: Op::ReturnFile { file },
        then: Then::Returned(file.ino),
        wait: Wait::Yes,
        footprint: HashSet::new(),
        counted: false,
        recalled: false,
    });
    out
}

/// The queue's batch answered. One that failed ran nothing: the error waits for the next
/// `close`, `fsync` or `fsyncdir`, what this mount held is forgotten, and the joined writes
/// are sent again file by file, each keeping its own error (those to a file the batch made
/// fail with `ESTALE`).
fn queue_answered(link: &mut Link, q: QueueSent, result: FsResult) -> Vec<Outgoing> {
    let first_write = q.n - q.joined.len();
    match result {
        Ok(Reply::Batch(replies)) if replies.len() == q.n => {
            // A directory made here and asked for in the batch renewed the lease: a lapse it
            // tells is placed no later than now (`lease.rs`).
            if replies
                .iter()
                .any(|r| matches!(r, Reply::Delegated { lapsed: true, .. }))
            {
                let now = link.cluster.next_place();
                crate::link::lapsed_by(link, now);
            }
            for (ino, reply) in q.joined.iter().zip(&replies[first_write..]) {
                if let Reply::Write { attr, .. } | Reply::Attr(attr) = reply {
                    link.stamps.saw(*ino, Stamp::of(attr));
                }
            }
            Vec::new()
        }
        other => {
            let e = match other {
                Err(e) => e,
                _ => Errno::EIO,
            };
            tracing::warn!(%e, ops = q.n, "operations answered early failed at the replicas; \
                reported at the next close or fsync");
            link.dirs.error = Some(e);
            link.dirs.forget_all();
            q.joined
                .into_iter()
                .zip(q.writes)
                .map(|(ino, op)| Outgoing::write(&q.cred, ino, op))
                .collect()
        }
    }
}

/// Held writes answered. A batch that failed ran nothing: each file's writes are sent
/// again alone and keep their own error. One file's writes that failed are sent again too
/// unless `final_answer`, when the error is kept for the file.
fn writes_answered(
    link: &mut Link,
    w: WritesSent,
    result: FsResult,
    final_answer: bool,
) -> Vec<Outgoing> {
    let n = w.inos.len();
    match result {
        // Another mount holds one of the files (`byzfs_fs::file_delegation`): nothing ran;
        // the same writes go again once it gave the file back (`sender.rs` `run`).
        Ok(Reply::Recall) if !w.ops.is_empty() => {
            tracing::debug!(
                files = n,
                "held writes met another mount's file; sent again"
            );
            vec![again_after_recall(w)]
        }
        Ok(Reply::Write { attr, .. } | Reply::Attr(attr)) if n == 1 => {
            link.stamps.saw(w.inos[0], Stamp::of(&attr));
            Vec::new()
        }
        Ok(Reply::Batch(replies)) if n > 1 && replies.len() == n => {
            for (ino, reply) in w.inos.into_iter().zip(replies) {
                if let Reply::Write { attr, .. } | Reply::Attr(attr) = reply {
                    link.stamps.saw(ino, Stamp::of(&attr));
                }
            }
            Vec::new()
        }
        other if n == 1 && (final_answer || w.ops.is_empty()) => {
            let e = match other {
                Err(e) => e,
                Ok(_) => Errno::EIO,
            };
            write_failed(link, w.inos[0], e);
            Vec::new()
        }
        other => {
            tracing::debug!(files = n, ?other, "held writes failed; sent file by file");
            w.inos
                .into_iter()
                .zip(w.ops)
                .map(|(ino, op)| Outgoing::write(&w.cred, ino, op))
                .collect()
        }
    }
}

/// Writes `w` answered `Recall`, as they were, to be sent again (waited for) once this
/// mount gave back what it is asked for (`sender.rs` `run`).
fn again_after_recall(w: WritesSent) -> Outgoing {
    let op = match <[Op; 1]>::try_from(w.ops.clone()) {
        Ok([op]) => op,
        Err(ops) => Op::Batch(ops),
    };
    Outgoing {
        cred: w.cred.clone(),
        op,
        then: Then::Writes(w),
        wait: Wait::Yes,
        footprint: HashSet::new(),
        counted: false,
        recalled: true,
    }
}

/// `ino`'s held writes failed for good: the error waits for its next `close` or `fsync`.
fn write_failed(link: &mut Link, ino: u64, e: Errno) {
    tracing::debug!(ino, %e, "held-back writes failed; reported at close or fsync");
    link.gather.failed(ino, e);
    // The replicas do not hold what the kept bytes say (`mine.rs`).
    link.dirs.contents_changed(ino);
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_fs::proto::attr::Timestamp;
    use byzfs_fs::FileHandle;

    fn fh(ino: u64) -> FileHandle {
        FileHandle { ino, generation: 1 }
    }

    /// A request's shape: its operations' names, the files its answer is for, whether it
    /// is waited for, and (writes) whether it keeps its operations to send again.
    fn shape(o: &Outgoing) -> (Vec<&'static str>, Vec<u64>, Wait, Option<usize>) {
        let names = match &o.op {
            Op::Batch(ops) => ops.iter().map(Op::name).collect(),
            op => vec![op.name()],
        };
        let (inos, kept) = match &o.then {
            Then::Queue(q) => (q.joined.clone(), None),
            Then::Writes(w) => (w.inos.clone(), Some(w.ops.len())),
            Then::Reserved => (Vec::new(), None),
            Then::Returned(ino) => (vec![*ino], None),
        };
        (names, inos, o.wait, kept)
    }

    /// Holds four bytes for each of `files` as its caller.
    fn gather_with(files: &[(u64, &Credentials)]) -> Gather {
        let mut g = Gather::new(1 << 20);
        for &(ino, cred) in files {
            g.hold(fh(ino), cred, 0, b"data", None, Timestamp::default());
        }
        g
    }

    /// The held writes of `inos`, in that order.
    fn take(g: &mut Gather, inos: &[u64]) -> Vec<Pending> {
        inos.iter().filter_map(|&i| g.take_file(i)).collect()
    }

    #[test]
    fn held_writes_of_one_caller_go_in_one_batch_and_another_callers_apart() {
        let (a, b) = (Credentials::user(1000, 100), Credentials::user(1001, 100));
        let mut g = gather_with(&[(10, &a), (11, &a), (12, &b), (13, &a)]);
        let held = take(&mut g, &[10, 11, 12, 13]);
        let plan: Vec<_> = writes(&g, held, Wait::InFlight).iter().map(shape).collect();
        assert_eq!(
            plan,
            vec![
                (
                    vec!["write", "write"],
                    vec![10, 11],
                    Wait::InFlight,
                    Some(2)
                ),
                (vec!["write"], vec![12], Wait::InFlight, Some(1)),
                (vec!["write"], vec![13], Wait::InFlight, Some(1)),
            ]
        );
    }

    #[test]
    fn writes_that_meet_another_mounts_file_go_again_as_they_were() {
        let a = Credentials::user(1000, 100);
        let mut g = gather_with(&[(10, &a)]);
        let held = take(&mut g, &[10]);
        // One file's writes waited for keep a copy: a recall sends them again.
        let plan = writes(&g, held, Wait::Yes);
        let shapes: Vec<_> = plan.iter().map(shape).collect();
        assert_eq!(shapes, vec![(vec!["write"], vec![10], Wait::Yes, Some(1))]);
        let sent = plan.into_iter().next().map(|o| (o.op, o.then));
        let Some((op, Then::Writes(w))) = sent else {
            panic!("one file's writes");
        };
        let again = again_after_recall(w);
        assert!(again.recalled, "after a pause and the give-backs asked for");
        assert_eq!(again.op, op);
        assert_eq!(shape(&again), (vec!["write"], vec![10], Wait::Yes, Some(1)));
        // Several files' batch goes again whole.
        let mut g = gather_with(&[(11, &a), (12, &a)]);
        let held = take(&mut g, &[11, 12]);
        let plan = writes(&g, held, Wait::InFlight);
        let Some(o) = plan.into_iter().next() else {
            panic!("one batch");
        };
        let Then::Writes(w) = o.then else {
            panic!("writes");
        };
        let again = again_after_recall(w);
        assert_eq!(again.op, o.op);
        assert_eq!(
            shape(&again),
            (vec!["write", "write"], vec![11, 12], Wait::Yes, Some(2))
        );
    }

    #[test]
    fn the_queue_goes_as_one_batch_with_its_callers_writes_then_the_others() {
        let (a, b) = (Credentials::user(1000, 100), Credentials::user(1001, 100));
        let mut dirs = Dirs::new(true, None);
        let make = Op::Create {
            dir: fh(2),
            name: b"new".to_vec(),
            mode: 0o644,
            exclusive: true,
        };
        dirs.push(
            &a,
            [Op::MakeAt {
                time: None,
                at: fh(50),
                make: Box::new(make),
            }],
        );
        let mut g = gather_with(&[(50, &a), (60, &b)]);
        let plan = queue(&mut dirs, &mut g, &HeldFiles::new(true), Wait::Yes);
        let shapes: Vec<_> = plan.iter().map(shape).collect();
        assert_eq!(
            shapes,
            vec![
                (vec!["make_at", "write"], vec![50], Wait::Yes, None),
                (vec!["write"], vec![60], Wait::Yes, Some(1)),
            ]
        );
        let mut footprint: Vec<u64> = plan[0].footprint.iter().copied().collect();
        footprint.sort_unstable();
        assert_eq!(footprint, vec![2, 50], "the directory and what it makes");
        // The kernel drops the early attributes of both once the batch ran.
        assert_eq!(dirs.take_sent(), vec![2, 50]);
        // Everything was taken: a second plan is empty.
        assert!(queue(&mut dirs, &mut g, &HeldFiles::new(true), Wait::Yes).is_empty());
        assert!(!g.holds(50) && !g.holds(60));
    }

    #[test]
    fn only_writes_no_other_mount_can_recall_join_the_queue() {
        let a = Credentials::user(1000, 100);
        let mut dirs = Dirs::new(true, None);
        let make = Op::Mkdir {
            dir: fh(2),
            name: b"new".to_vec(),
            mode: 0o755,
        };
        let made = Op::MakeAt {
            time: None,
            at: fh(50),
            make: Box::new(make),
        };
        dirs.push(&a, [made]);
        // 70: a file this mount neither made nor holds; 80: one it holds.
        let mut g = gather_with(&[(70, &a), (80, &a)]);
        let mut files = HeldFiles::new(true);
        files.install(fh(80), std::time::Instant::now(), 0);
        let plan = queue(&mut dirs, &mut g, &files, Wait::Yes);
        let shapes: Vec<_> = plan.iter().map(shape).collect();
        assert_eq!(
            shapes,
            vec![
                (vec!["make_at", "write"], vec![80], Wait::Yes, None),
                (vec!["write"], vec![70], Wait::Yes, Some(1)),
            ]
        );
    }
}
