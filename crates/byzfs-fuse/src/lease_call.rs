//! A lease-bearing call (a lock operation, a renewal of the lease, a file delegation asked
//! for) in two halves around its round trip, the mount's lock let go while the replicas
//! answer (issue #45 item 1: no lock held across a round trip).
//!
//! The first half ([`Begun`]) runs under the mount's lock: it answers the call from the
//! mount's books, or says what must happen first (held writes sent, write-back landed,
//! the lease renewed, another call on the same file answered), or sends the request,
//! fixing its place among the mount's requests (`cluster.rs`). [`run`] then lets the lock
//! go until the reply is in and takes it again for the second half, which applies the
//! reply to the books. Replies so come back in any order; what they install is tagged
//! with their place and a lapse drops only what is older (`lease.rs`).
//!
//! The unreplicated client sends a call only when it is waited for (`wire.rs`), so there
//! the wait keeps the lock (the order of the waits is the order at the server). An
//! encrypted mount's lock calls go through its crypto layer as any call does
//! (`calls.rs` `invoke`), under the lock.

use super::Inner;
use crate::calls::{invoke, send_in_lane};
use crate::lane::InLane;
use crate::lease::Answer;
use crate::link::{self, Link};
use crate::sender;
use crate::unlocked;
use crate::writeback::{self, Outgoing, Wait};
use byzfs_fs::{Credentials, Errno, FsResult, Op, Reply};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Longest wait, without the lock, for another call on the same file to be answered.
const BUSY_POLL: Duration = Duration::from_millis(5);

/// What the first half of a call came to. `K` is what its second half needs to know.
pub(crate) enum Begun<T, K> {
    /// Answered from the mount's books.
    Done(T),
    /// Another call on the same file is on its way: ask again once it is answered.
    Wait,
    /// Held writes the call must follow: sent (in flight), landed, then ask again.
    First(Vec<Outgoing>),
    /// Write-back in flight the call must follow: landed, then ask again.
    Land,
    /// The lease must be renewed first (a delegation is used only within
    /// `lease::CONFIRMED_WITHIN` of a confirmation): renewed, then ask again.
    Renew(Credentials),
    /// Sent (boxed: a lane is large beside the other variants).
    Sent(Box<Sent<K>>),
}

/// A lease-bearing request on its way.
pub(crate) struct Sent<K> {
    trip: Trip,
    at: Instant,
    then: K,
}

/// How a request went.
enum Trip {
    /// In a lane: its reply is waited for without the mount's lock.
    Lane(InLane),
    /// Sent and waited for under the lock (an encrypted mount's), with its place.
    Done(FsResult, u64),
}

/// A lease-bearing reply, in.
pub(crate) struct Answered<K> {
    pub(crate) then: K,
    /// Its request's place among the mount's requests (`lease.rs`).
    pub(crate) place: u64,
    /// When it was sent (a renewal counts from then).
    pub(crate) at: Instant,
    /// The attribute cache's mark when it was sent (`attrs.rs` `unchanged_since`;
    /// `u64::MAX` if the mount's lock was held since).
    pub(crate) mark: u64,
    pub(crate) result: FsResult,
}

/// Whether a lease-bearing call goes in a lane: as ordered operations do, on a plain mount
/// with more than one FUSE thread (`calls.rs` `ordered_lane_takes`).
fn in_lane(link: &Link) -> bool {
    link.cluster.lanes() && link.crypt.is_none()
}

/// What must happen before `op` is sent ([`Begun::First`], [`Begun::Land`]), where the
/// write-back may fly; `None`: nothing, or what is left is sent under the lock as any
/// call's is (`calls.rs` `send_in_lane`). Held writes are sent once per call (`went`:
/// they were), as `lib.rs` `ByzFuse::call` does: a process writing the file on and on
/// meanwhile would otherwise hold the call back for ever.
pub(crate) fn first<T, K>(link: &mut Link, op: &Op, went: &mut bool) -> Option<Begun<T, K>> {
    if !in_lane(link) || !sender::may_fly(link) {
        return None;
    }
    if link.inflight.must_precede(op) {
        return Some(Begun::Land);
    }
    if *went {
        return None;
    }
    *went = true;
    let plan = writeback::before(link, op, Wait::InFlight);
    (!plan.is_empty()).then_some(Begun::First(plan))
}

/// Sends lease-bearing `op`; `then` is what its second half needs.
pub(crate) fn send<K>(link: &mut Link, cred: &Credentials, op: Op, then: K) -> Sent<K> {
    let at = Instant::now();
    let trip = if in_lane(link) {
        Trip::Lane(send_in_lane(link, cred, op))
    } else {
        let r = invoke(link, cred, op);
        Trip::Done(r, link.cluster.last_place())
    };
    Sent { trip, at, then }
}

/// Runs a call: `begin` (under the mount's lock) until it answers or sends, then `end`
/// (under the lock again) on the reply. `Err(EIO)`: the mount's lock is poisoned.
pub(crate) fn run<T, K>(
    mount: &Mutex<Inner>,
    mut begin: impl FnMut(&mut Inner) -> Begun<T, K>,
    end: impl FnOnce(&mut Inner, Answered<K>) -> T,
) -> Result<T, Errno> {
    let mut guard = mount.lock().map_err(|_| Errno::EIO)?;
    loop {
        guard = match begin(&mut guard) {
            Begun::Done(t) => return Ok(t),
            Begun::Sent(s) => {
                let (mut guard, answered) = wait(mount, guard, *s)?;
                return Ok(end(&mut guard, answered));
            }
            Begun::Wait => {
                let wire = Arc::clone(guard.link.cluster.wire());
                let seen = wire.answers();
                drop(guard);
                wire.await_answer(seen, BUSY_POLL);
                mount.lock().map_err(|_| Errno::EIO)?
            }
            Begun::First(plan) => {
                let guard = unlocked::send(mount, guard, plan).ok_or(Errno::EIO)?;
                let upto = guard.link.inflight.sent_so_far();
                let guard = unlocked::land(mount, guard, |l| l.inflight.landed() >= upto)
                    .ok_or(Errno::EIO)?;
                landed_or_waited(guard, upto)
            }
            Begun::Land => {
                let upto = guard.link.inflight.landed() + 1;
                let guard = unlocked::land(mount, guard, |l| {
                    l.inflight.landed() >= upto || l.inflight.is_empty()
                })
                .ok_or(Errno::EIO)?;
                landed_or_waited(guard, upto)
            }
            Begun::Renew(cred) => {
                let s = send(&mut guard.link, &cred, Op::RenewLease, ());
                guard.link.lease.renewing(s.at);
                let (mut guard, a) = wait(mount, guard, s)?;
                renewed(&mut guard, &a, "cannot renew the lease");
                guard
            }
        };
    }
}

/// After a wait for write-back up to `upto` without the lock: a soft mount's timeout
/// left it short, and it is waited for here (`sender.rs` `land_all_for` fails it at its
/// own timeout), so the call's next look finds nothing left to wait for.
fn landed_or_waited(mut guard: MutexGuard<'_, Inner>, upto: u64) -> MutexGuard<'_, Inner> {
    if guard.link.inflight.landed() < upto {
        sender::land_all_for(&mut guard.link, "a lock or delegation");
    }
    guard
}

/// Waits for `s`'s reply, without the mount's lock where the client sends it by itself.
fn wait<'a, K>(
    mount: &'a Mutex<Inner>,
    mut guard: MutexGuard<'a, Inner>,
    s: Sent<K>,
) -> Result<(MutexGuard<'a, Inner>, Answered<K>), Errno> {
    let Sent { trip, at, then } = s;
    let (result, place, mark) = match trip {
        Trip::Done(r, place) => (r, place, u64::MAX),
        Trip::Lane(mut lane) => {
            let out = if guard.link.cluster.windowed() {
                drop(guard);
                let out = lane.wait();
                guard = mount.lock().map_err(|_| Errno::EIO)?;
                guard.link.lease.trips_unlocked += 1;
                out
            } else {
                lane.wait()
            };
            let (place, mark) = (lane.place, lane.mark);
            (
                link::finish_in_lane(&mut guard.link, lane, out),
                place,
                mark,
            )
        }
    };
    let answered = Answered {
        then,
        place,
        at,
        mark,
        result,
    };
    Ok((guard, answered))
}

/// Renews the lease now, waiting under the mount's lock: for a caller that holds it across
/// the calls around (a removed open file hidden: `orphans.rs`).
pub(crate) fn renew_locked(inner: &mut Inner, cred: &Credentials, why: &'static str) {
    let at = Instant::now();
    inner.link.lease.renewing(at);
    let result = invoke(&mut inner.link, cred, Op::RenewLease);
    let place = inner.link.cluster.last_place();
    let a = Answered {
        then: (),
        place,
        at,
        mark: u64::MAX,
        result,
    };
    renewed(inner, &a, why);
}

/// A renewal's reply applied (`why`: what to log if it failed).
pub(crate) fn renewed(inner: &mut Inner, a: &Answered<()>, why: &'static str) {
    match &a.result {
        Ok(Reply::Lock { lapsed, .. }) => {
            told(inner, a.place, *lapsed, a.at);
        }
        Ok(other) => tracing::warn!(?other, "{why}: unexpected reply"),
        Err(e) => tracing::warn!(%e, "{why}"),
    }
}

/// What a lease-bearing reply of place `place`, sent at `at`, says of the lease, applied
/// to every book (`lapsed`: the lease had lapsed before it ran).
pub(crate) fn told(inner: &mut Inner, place: u64, lapsed: bool, at: Instant) -> Answer {
    let answer = link::lease_answered(&mut inner.link, place, lapsed, at);
    inner.for_locks(); // The lock books follow the lapse.
    answer
}
