//! Waiting for the write-back in flight with the mount's lock let go (issue #45 item 1: no
//! lock held across a round trip). A thread that must see batches land (an `fsync`, what
//! an operation must follow) or must wait for room to launch one (a writer ahead of its
//! links) drops the lock, waits for the client to hand over a result (`wire.rs`
//! `Wire::await_answer`, leading the client if nobody else does), takes the lock again and
//! lands what came in, as the background thread does (`sender.rs` `land_ready`); other
//! processes' operations run in between. The batches' place among the mount's requests was
//! fixed when they were sent, so letting go changes no order the replicas see.

use super::{Inner, Link};
use crate::sender;
use crate::wire::STILL_WAITING;
use crate::writeback::Outgoing;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Longest wait between two looks at the write-back in flight (a result is told at once;
/// this bounds a wake-up missed for any other reason).
const LAND_POLL: Duration = Duration::from_millis(50);

/// Lands the write-back in flight, oldest first, until `done` says what the caller needs
/// has landed, the lock let go while the replicas answer. A soft mount gives up here at its
/// timeout: the locked path it returns to waits (`sender.rs` `land_all_for`) and fails the
/// batch at its own. `None`: the mount's lock is poisoned.
pub(crate) fn land<'a>(
    mount: &'a Mutex<Inner>,
    mut inner: MutexGuard<'a, Inner>,
    done: impl Fn(&Link) -> bool,
) -> Option<MutexGuard<'a, Inner>> {
    let began = Instant::now();
    let mut said = began;
    loop {
        let wire = Arc::clone(inner.link.cluster.wire());
        // Read before looking: a result handed over after this wakes the wait below.
        let seen = wire.answers();
        sender::land_ready(&mut inner.link);
        let timeout = inner.link.cluster.timeout();
        if done(&inner.link) || timeout.is_some_and(|t| began.elapsed() >= t) {
            return Some(inner);
        }
        drop(inner);
        if said.elapsed() >= STILL_WAITING {
            said = Instant::now();
            tracing::warn!(
                waited_s = began.elapsed().as_secs(),
                "still waiting for the write-back in flight (hard mount: retrying)"
            );
        }
        wire.await_answer(seen, LAND_POLL);
        inner = mount.lock().ok()?;
        inner.link.inflight.waited_unlocked += 1;
    }
}

/// Sends `plan` (`writeback.rs`), waiting for room in flight as [`land`] waits, without
/// the lock; what cannot fly is sent and waited for as `sender.rs` `run` sends it.
pub(crate) fn send<'a>(
    mount: &'a Mutex<Inner>,
    mut inner: MutexGuard<'a, Inner>,
    plan: Vec<Outgoing>,
) -> Option<MutexGuard<'a, Inner>> {
    let mut rest = plan;
    loop {
        rest = sender::run_while_room(&mut inner.link, rest);
        if rest.is_empty() {
            return Some(inner);
        }
        // Any batch landed makes room, or may be the one the rest must follow.
        let before = inner.link.inflight.landed();
        inner = land(mount, inner, |l| {
            l.inflight.landed() > before || l.inflight.is_empty()
        })?;
        if inner.link.inflight.landed() == before && !inner.link.inflight.is_empty() {
            // A soft mount's timeout: the rest waits under the lock.
            sender::run(&mut inner.link, rest);
            return Some(inner);
        }
    }
}
