//! Sending, once what goes first is known: one operation, waited for, with its retries on
//! `EBUSY` ([`send_growing`]); a plan of write-back requests (`writeback.rs`), one after
//! another with the follow-ups their answers ask for, waited for or left in flight
//! ([`run`]); and the answers of write-back in flight, landed ([`land_all`],
//! [`land_ready`]). Nothing here recurses into what it sends: an answer's follow-ups go
//! to the front of the plan being run, and a request that must wait for the write-back
//! in flight lands its oldest batch first, then looks again.

use crate::crypt::Crypt;
use crate::dirs::RECALL_RETRY;
use crate::inflight::Flying;
use crate::link::{finish_in_flight, prep_of, send_lane, settle, transmit, Link};
use crate::reclaim;
use crate::wire::Outcome;
use crate::writeback::{self, Outgoing, Wait};
use byzfs_fs::{Credentials, Errno, FileHandle, FsResult, Op, Reply};
use std::collections::VecDeque;
use std::time::Instant;

/// Most times one operation is sent again after `EBUSY` (each after its file's whole tail
/// went: another client would have to truncate the file again each time).
const BUSY_RETRIES: u32 = 16;

/// Whether this mount may leave batches in flight at all (`inflight.rs`).
pub(crate) fn may_fly(link: &Link) -> bool {
    link.cluster.windowed()
}

/// Whether one more batch may fly now: an encrypted mount's, only when none is in flight
/// (`crypt_in_flight.rs`).
pub(crate) fn has_room(link: &Link) -> bool {
    link.inflight.has_room() && (link.crypt.is_none() || link.inflight.is_empty())
}

/// Sends `plan` in order. Each request goes after the queue of early answers if that
/// makes what it writes (`writeback::queue_before`); one left in flight waits for room
/// (the oldest batch lands), one waited for waits for the batches in flight it may see
/// (`InFlight::must_precede`). What an answer asks to send next (a failed batch, file by
/// file) goes before the rest of the plan.
pub(crate) fn run(link: &mut Link, plan: Vec<Outgoing>) {
    let rest = run_until(link, plan, false);
    debug_assert!(rest.is_empty());
}

/// [`run`], up to the first request that would wait for the write-back in flight (for room,
/// or for a batch it must follow): that one and what follows it are returned, for a caller
/// that waits without the mount's lock (`unlocked.rs`).
pub(crate) fn run_while_room(link: &mut Link, plan: Vec<Outgoing>) -> Vec<Outgoing> {
    run_until(link, plan, true)
}

/// [`run`]; `stop_for_room`: returns the rest of the work at the first request that would
/// wait for the write-back in flight, instead of landing the oldest batch.
fn run_until(link: &mut Link, plan: Vec<Outgoing>, stop_for_room: bool) -> Vec<Outgoing> {
    let mut work: VecDeque<Outgoing> = plan.into();
    while let Some(mut o) = work.pop_front() {
        if o.recalled {
            // Another mount holds a file `o` writes: this mount gives back what it is
            // asked for meanwhile (two mounts writing each other's files both go on).
            o.recalled = false;
            std::thread::sleep(RECALL_RETRY);
            let first = give_back_asked(link, &o.cred);
            work.push_front(o);
            prepend(&mut work, first);
            continue;
        }
        let fly = o.wait == Wait::InFlight && may_fly(link) && Crypt::flies(&o.op);
        let first =
            writeback::queue_before(link, &o.op, if fly { Wait::InFlight } else { Wait::Yes });
        if !first.is_empty() {
            work.push_front(o);
            prepend(&mut work, first);
            continue;
        }
        let blocked = if fly {
            !has_room(link)
        } else {
            link.inflight.must_precede(&o.op)
        };
        if blocked {
            if !o.counted {
                o.counted = true;
                if fly {
                    link.inflight.waited_for_room += 1;
                } else {
                    link.inflight.waits(o.op.name());
                }
            }
            if stop_for_room {
                work.push_front(o);
                return work.into();
            }
            let follow = land_oldest(link);
            work.push_front(o);
            prepend(&mut work, follow);
            continue;
        }
        if fly {
            let follow = launch(link, o);
            prepend(&mut work, follow);
        } else {
            let r = send_growing(link, &o.cred, o.op, false);
            let follow = writeback::answered(link, o.then, r, true);
            prepend(&mut work, follow);
        }
    }
    Vec::new()
}

/// What giving back the held files the replicas asked this mount for takes
/// (`writeback::give_back_file`); directories and lock delegations are given back by the
/// calls that wait on them (`calls.rs` `invoke`) and the background's poll.
fn give_back_asked(link: &mut Link, cred: &Credentials) -> Vec<Outgoing> {
    if !link.files.any() {
        return Vec::new();
    }
    let Ok(Reply::Recalls(inos)) = send_op(link, cred, Op::Recalls, false) else {
        return Vec::new();
    };
    let now = Instant::now();
    let files: Vec<FileHandle> = inos
        .into_iter()
        .filter_map(|ino| {
            link.files
                .take(ino, true, now)
                .or_else(|| link.files.given_back_lately(ino))
        })
        .collect();
    for f in &files {
        link.dirs.contents_changed(f.ino);
    }
    files
        .into_iter()
        .flat_map(|file| writeback::give_back_file(link, cred, file))
        .collect()
}

/// Puts `first` at the front of `work`, in its order.
fn prepend(work: &mut VecDeque<Outgoing>, first: Vec<Outgoing>) {
    for o in first.into_iter().rev() {
        work.push_front(o);
    }
}

/// Sends `o` and leaves it in flight; the background thread leads the client while
/// batches fly (`background.rs`). An encrypted mount's is sealed first
/// (`crypt_in_flight.rs`); one that cannot be is answered with its error now: what that
/// answer asks to send next.
fn launch(link: &mut Link, o: Outgoing) -> Vec<Outgoing> {
    let reclaims = reclaim::may_queue(&o.op);
    let prep = prep_of(link, &o.op, false);
    let (cred, op, sealed) = match link.crypt.take() {
        None => (o.cred, o.op, None),
        Some(mut crypt) => {
            let r = crypt.seal_to_fly(link, &o.cred, o.op);
            link.crypt = Some(crypt);
            match r {
                Ok((cred, op, kept)) => (cred, op, Some(Box::new(kept))),
                Err(e) => {
                    settle(link, prep, u64::MAX, &Err(e));
                    return writeback::answered(link, o.then, Err(e), false);
                }
            }
        }
    };
    let lane = send_lane(link, &cred, op, prep);
    link.inflight.launched(Flying {
        lane,
        sent: Instant::now(),
        footprint: o.footprint,
        reclaims,
        then: o.then,
        sealed,
    });
    link.dirs.wake_background();
    Vec::new()
}

/// Waits for the oldest batch in flight and handles its answer; returns what the answer
/// asks to send next.
fn land_oldest(link: &mut Link) -> Vec<Outgoing> {
    let Some(out) = link.inflight.wait_oldest() else {
        return Vec::new();
    };
    let Some(f) = link.inflight.pop_oldest() else {
        return Vec::new();
    };
    land(link, f, out)
}

/// Handles batch `f`'s answer `out`. What it says of an inode a later batch still changes
/// is already old (a creation's size 0 before the writes in flight after it): the cache
/// takes it from the later batch's answer instead (`stat` answered 0: `faults::andrew`).
fn land(link: &mut Link, f: Flying, out: Option<Outcome>) -> Vec<Outgoing> {
    let later = link.inflight.later_footprint();
    let sealed = f.sealed;
    let result = finish_in_flight(link, f.lane, out, &later, |link, r| {
        match (&sealed, link.crypt.take()) {
            (Some(s), Some(mut crypt)) => {
                let r = crypt.landed(link, s, r);
                link.crypt = Some(crypt);
                r
            }
            (_, crypt) => {
                link.crypt = crypt;
                r
            }
        }
    });
    // Refused before it ran, on a header or keys that changed: built again on the new
    // ones and sent as the batch would have been had it waited (`crypt_in_flight.rs`).
    let result = match (result, sealed) {
        (Err(Errno::ESTALE | Errno::EKEYEXPIRED), Some(s)) => {
            tracing::debug!(
                op = s.plain.name(),
                "a sealed batch in flight refused; sent again"
            );
            send_growing(link, &s.plain_cred, s.plain, false)
        }
        (r, _) => r,
    };
    link.reclaim.after(f.reclaims && result.is_ok());
    writeback::answered(link, f.then, result, false)
}

/// Waits for every batch in flight and handles their answers, oldest first (and what
/// they ask to send next, in turn).
pub(crate) fn land_all(link: &mut Link) {
    while !link.inflight.is_empty() {
        let follow = land_oldest(link);
        run(link, follow);
    }
}

/// [`land_all`] for an operation `why` that must see them, counted in
/// `InFlight::waited_by` if any is in flight.
pub(crate) fn land_all_for(link: &mut Link, why: &'static str) {
    if !link.inflight.is_empty() {
        link.inflight.waits(why);
        land_all(link);
    }
}

/// Handles the answers already in (the background thread, after driving the client),
/// oldest first, without waiting.
pub(crate) fn land_ready(link: &mut Link) {
    while let Some(out) = link.inflight.oldest_ready() {
        let Some(f) = link.inflight.pop_oldest() else {
            return;
        };
        let follow = land(link, f, Some(out));
        run(link, follow);
    }
}

/// Operation `op`, after what must reach the replicas before it (`writeback::before`,
/// the write-back in flight it may see): the whole of an ordinary call but the retries
/// after a recall (`calls.rs` `invoke`). `ordered`: sent ordered even if read-only.
pub(crate) fn call(link: &mut Link, cred: &Credentials, op: Op, ordered: bool) -> FsResult {
    if link.inflight.must_precede(&op) {
        land_all_for(link, op.name());
    }
    let first = writeback::before(link, &op, Wait::Yes);
    run(link, first);
    send_growing(link, cred, op, ordered)
}

/// Sends `op` (what goes first went), and after an `EBUSY` for a file it grows, reclaims
/// that file's stale tail and sends it again (`reclaim.rs`); an operation that may leave
/// space to give back wakes the background reclaim.
pub(crate) fn send_growing(link: &mut Link, cred: &Credentials, op: Op, ordered: bool) -> FsResult {
    let queues = reclaim::may_queue(&op);
    let r = match reclaim::grows(&op) {
        Some(fh) => growing(link, cred, fh, op),
        None => send_op(link, cred, op, ordered),
    };
    link.reclaim.after(queues && r.is_ok());
    r
}

/// Sends `op`, and after an `EBUSY` for file `fh` it grows, reclaims its stale tail and
/// sends it again.
fn growing(link: &mut Link, cred: &Credentials, fh: FileHandle, op: Op) -> FsResult {
    for _ in 0..BUSY_RETRIES {
        match send_op(link, cred, op.clone(), false) {
            Err(Errno::EBUSY) => file_tail(link, cred, fh)?,
            other => return other,
        }
    }
    send_op(link, cred, op, false)
}

/// Sends `Op::Reclaim` for `fh`'s stale tail until none is left.
fn file_tail(link: &mut Link, cred: &Credentials, fh: FileHandle) -> Result<(), Errno> {
    let began = Instant::now();
    let mut blocks = 0;
    loop {
        match send_op(link, cred, Op::Reclaim { file: Some(fh) }, false)? {
            Reply::Reclaimed { blocks: b, more } => {
                blocks += b;
                if !more {
                    tracing::debug!(ino = fh.ino, blocks, took = ?began.elapsed(),
                        "deleted a file's stale tail before growing it");
                    return Ok(());
                }
            }
            _ => return Err(Errno::EIO),
        }
    }
}

/// Sends `op` through the crypto layer if the mount has one, or as it is, waits for its
/// answer and applies it to the books (`link.rs` `settle`). What goes first went; the
/// batches in flight it may see land first.
pub(crate) fn send_op(link: &mut Link, cred: &Credentials, op: Op, ordered: bool) -> FsResult {
    if link.inflight.must_precede(&op) {
        land_all_for(link, op.name());
    }
    let prep = prep_of(link, &op, ordered);
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
