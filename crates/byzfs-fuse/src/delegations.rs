//! Lock delegations held by this mount ([`byzfs_fs::delegation`]): the locks of a file no
//! other mount locks are kept here, so a program that takes and drops locks on it many
//! times (SQLite: about nine per transaction) waits for no round trip.
//!
//! * **Asked for** with a file's first lock while it is not [contended](CONTENDED_FOR);
//!   granted if no other client holds locks on it. The replicas' reply carries the locks
//!   this mount's owners already hold there, which the table here starts from.
//! * **Decided here** with the replicas' own rules ([`byzfs_fs::proto::lock::apply`]): locks,
//!   unlocks, `F_GETLK` and the release at `close`, as long as the lease was confirmed less
//!   than [`CONFIRMED_WITHIN`](crate::lease::CONFIRMED_WITHIN) ago (it lapses after 30 s of agreed time; past that the
//!   mount asks the replicas to renew it first).
//! * **Given back** when another client's lock operation recalls it (polled every
//!   [`POLL_EVERY`], or [`POLL_ROUND_TRIPS`] round trips on slow links, while any is held), after [`IDLE`] without use, and at unmount: the
//!   file's locks, as they are now, go to the replicas, which decide from then on. A file
//!   recalled is locked at the replicas for [`CONTENDED_FOR`]: two mounts taking turns on
//!   one file would otherwise pass its delegation back and forth at every lock.

use crate::calls::{invoke, send_in_lane};
use crate::lane::InLane;
use crate::link::{finish_in_lane, Link};
use crate::recalls;
use crate::wire::Outcome;
use byzfs_fs::proto::lock::{self, Held as Lock, LockInfo, LockKind, LockOwner, Returned};
use byzfs_fs::{Credentials, Errno, FileHandle, Op, Reply};
use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// How often, at most, a mount that holds delegations asks whether one was recalled: about
/// the delay another mount's lock request sees before the file's locks are decided again.
pub(super) const POLL_EVERY: Duration = Duration::from_millis(20);
/// The poll holds the mount's lock for its round trip, so it waits this many round trips
/// between polls: at most a tenth of the time goes to it. Across sites a poll takes 40 ms
/// (the `wan` profile), and polling every 20 ms held the lock two thirds of the time:
/// every operation of the mount, even one answered from its own books, waited behind it
/// (Andrew-Tcl's copy took 159 ms a file where one agreement round takes 60 ms).
const POLL_ROUND_TRIPS: u32 = 9;
/// ... and never waits longer than this between polls.
const POLL_EVERY_MAX: Duration = Duration::from_secs(1);
/// A delegation unused this long is given back.
const IDLE: Duration = Duration::from_secs(2);
/// How long a recalled file's locks stay at the replicas.
const CONTENDED_FOR: Duration = Duration::from_secs(5);
/// Recalled files remembered before the expired ones are dropped (bounds the map).
const CONTENDED_KEPT: usize = 256;

/// One file whose locks this mount keeps.
struct Delegated {
    fh: FileHandle,
    locks: Vec<Lock>,
    used: Instant,
    /// The place of the reply that granted it (`lease.rs`).
    place: u64,
}

/// The delegations this mount holds.
pub(super) struct Delegations {
    /// This mount's client session (the owner of its locks at the replicas).
    client: u64,
    held: HashMap<u64, Delegated>,
    /// Files recalled lately, and until when their locks stay at the replicas.
    contended: HashMap<u64, Instant>,
    polled: Option<Instant>,
    /// The last recall poll's round trip, smoothed.
    poll_rtt: Duration,
    /// Wakes the background thread, which then polls every [`POLL_EVERY`].
    nudge: Option<Sender<()>>,
    /// Lock operations answered here, delegations recalled, given back: logged at unmount.
    pub(super) local: u64,
    pub(super) recalled: u64,
    pub(super) returned: u64,
}

impl Delegations {
    /// `nudge` wakes the thread that polls for recalls (when a first delegation arrives).
    pub(super) fn new(client: u64, nudge: Option<Sender<()>>) -> Delegations {
        Delegations {
            client,
            held: HashMap::new(),
            contended: HashMap::new(),
            polled: None,
            poll_rtt: Duration::ZERO,
            nudge,
            local: 0,
            recalled: 0,
            returned: 0,
        }
    }

    fn me(&self, owner: u64) -> LockOwner {
        LockOwner {
            client: self.client,
            owner,
        }
    }

    /// How long to wait between recall polls: [`POLL_ROUND_TRIPS`] of the last polls'
    /// round trip, within [`POLL_EVERY`] ..= [`POLL_EVERY_MAX`].
    pub(super) fn poll_every(&self) -> Duration {
        (self.poll_rtt * POLL_ROUND_TRIPS).clamp(POLL_EVERY, POLL_EVERY_MAX)
    }

    /// Notes a poll's round trip (a moving average, 1/4 of the new one).
    fn polled_in(&mut self, rtt: Duration) {
        self.poll_rtt = if self.poll_rtt.is_zero() {
            rtt
        } else {
            (self.poll_rtt * 3 + rtt) / 4
        };
    }

    /// Whether this mount holds `ino`'s delegation.
    pub(super) fn holds(&self, ino: u64) -> bool {
        self.held.contains_key(&ino)
    }

    /// Whether it holds any.
    pub(super) fn any(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether to ask for `ino`'s delegation with its next lock.
    pub(super) fn wanted(&mut self, ino: u64, now: Instant) -> bool {
        match self.contended.get(&ino) {
            Some(&until) if now < until => false,
            Some(_) => {
                self.contended.remove(&ino);
                true
            }
            None => true,
        }
    }

    /// The replicas granted `fh`'s delegation by the reply of place `place`; `mine` are
    /// this mount's locks on it.
    pub(super) fn install(
        &mut self,
        fh: FileHandle,
        mine: Vec<Returned>,
        now: Instant,
        place: u64,
    ) {
        let locks = mine
            .into_iter()
            .map(|r| Lock {
                owner: self.me(r.owner),
                epoch: 0,
                kind: r.kind,
                start: r.start,
                end: r.end,
                pid: r.pid,
            })
            .collect();
        self.held.insert(
            fh.ino,
            Delegated {
                fh,
                locks,
                used: now,
                place,
            },
        );
        if let Some(n) = &self.nudge {
            // The thread may be gone at unmount: nothing left to poll for then.
            let _ = n.send(());
        }
    }

    /// `F_SETLK` on a delegated file, decided here (`None` if `ino` is not delegated).
    pub(super) fn set(
        &mut self,
        ino: u64,
        owner: u64,
        kind: Option<LockKind>,
        range: (u64, u64),
        pid: u32,
        now: Instant,
    ) -> Option<Result<(), Errno>> {
        let me = self.me(owner);
        let d = self.held.get_mut(&ino)?;
        d.used = now;
        self.local += 1;
        let next = lock::apply(d.locks.clone(), me, 0, kind, range, pid);
        Some(next.map(|locks| d.locks = locks))
    }

    /// `F_GETLK` on a delegated file (`None` if `ino` is not delegated).
    pub(super) fn get(
        &mut self,
        ino: u64,
        owner: u64,
        kind: LockKind,
        (start, end): (u64, u64),
        now: Instant,
    ) -> Option<Option<LockInfo>> {
        let me = self.me(owner);
        let d = self.held.get_mut(&ino)?;
        d.used = now;
        self.local += 1;
        Some(lock::first_conflict(&d.locks, me, kind, start, end).map(Lock::info))
    }

    /// Drops `owner`'s locks on a delegated file; `false` if `ino` is not delegated.
    pub(super) fn release(&mut self, ino: u64, owner: u64) -> bool {
        let me = self.me(owner);
        let Some(d) = self.held.get_mut(&ino) else {
            return false;
        };
        d.locks.retain(|l| l.owner != me);
        self.local += 1;
        true
    }

    /// The place of the reply that granted `ino`'s delegation, if held.
    pub(super) fn place_of(&self, ino: u64) -> Option<u64> {
        self.held.get(&ino).map(|d| d.place)
    }

    /// Forgets the delegations granted before the lease's last lapse: they lapsed with it.
    pub(super) fn prune(&mut self, lease: &crate::lease::Lease) {
        self.held.retain(|_, d| !lease.dropped(d.place));
    }

    /// Files whose delegation went unused for [`IDLE`].
    fn idle(&self, now: Instant) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, d)| now.saturating_duration_since(d.used) >= IDLE)
            .map(|(&ino, _)| ino)
            .collect();
        v.sort_unstable();
        v
    }

    /// Every delegated file.
    fn all(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.held.keys().copied().collect();
        v.sort_unstable();
        v
    }
}

/// Gives `ino`'s delegation back with the locks held on it now (`recalled`: the file is
/// contended, so it stays at the replicas for a while). On a transient failure it stays
/// held, to be given back at the next poll.
pub(super) fn give_back(
    link: &mut Link,
    delegs: &mut Delegations,
    cred: &Credentials,
    ino: u64,
    recalled: bool,
) {
    let Some(d) = delegs.held.get(&ino) else {
        return;
    };
    let fh = d.fh;
    let locks = d
        .locks
        .iter()
        .map(|l| Returned {
            owner: l.owner.owner,
            kind: l.kind,
            start: l.start,
            end: l.end,
            pid: l.pid,
        })
        .collect();
    match invoke(link, cred, Op::ReturnDelegation { fh, locks }) {
        Ok(_) => {
            delegs.held.remove(&ino);
            delegs.returned += 1;
            if recalled {
                delegs.recalled += 1;
                let now = Instant::now();
                let contended = &mut delegs.contended;
                if contended.len() >= CONTENDED_KEPT {
                    contended.retain(|_, until| now < *until);
                }
                contended.insert(ino, now + CONTENDED_FOR);
            }
        }
        Err(Errno::ESTALE) => {
            // The file is gone, and its locks with it.
            delegs.held.remove(&ino);
        }
        Err(Errno::ENOLCK) => {
            delegs.held.remove(&ino);
            tracing::error!(
                ino,
                "the cluster dropped this mount's lock delegation of a file: its lease \
                 lapsed; programs holding locks on it may now conflict"
            );
        }
        Err(e) => tracing::warn!(ino, %e, "cannot give a lock delegation back; retrying"),
    }
}

/// Sends the recall poll if one is due (at most every [`Delegations::poll_every`], while any
/// lock or directory delegation is held; from the mount's background thread), in a lane:
/// the caller lets the mount's lock go while it is at the replicas (across sites a poll
/// takes a round trip, 40 ms, which every operation of the mount would otherwise wait
/// behind), then hands its answer to [`poll_answered`].
pub(super) fn poll_sent(
    link: &mut Link,
    delegs: &mut Delegations,
    cred: &Credentials,
) -> Option<InLane> {
    if !delegs.any() && !link.dirs.any_held() && !link.files.any() {
        return None;
    }
    let now = Instant::now();
    let every = delegs.poll_every();
    if delegs
        .polled
        .is_some_and(|t| now.saturating_duration_since(t) < every)
    {
        return None;
    }
    delegs.polled = Some(now);
    Some(send_in_lane(link, cred, Op::Recalls))
}

/// Gives back the delegations the poll says were recalled, and those left idle.
pub(super) fn poll_answered(
    link: &mut Link,
    delegs: &mut Delegations,
    cred: &Credentials,
    (sent, out): (InLane, Option<Outcome>),
) {
    let began = sent.began();
    let answer = finish_in_lane(link, sent, out);
    delegs.polled_in(began.elapsed());
    match answer {
        Ok(Reply::Recalls(inos)) => {
            for ino in inos {
                // A file's delegation of its contents, apart from that of its locks (or
                // one whose return the replicas did not take).
                let file = link.files.holds(ino) || link.files.given_back_lately(ino).is_some();
                if file {
                    recalls::give_back_file(link, cred, ino, true);
                }
                if delegs.holds(ino) {
                    give_back(link, delegs, cred, ino, true);
                } else if !file {
                    // A directory (`dirs.rs`), held or forgotten after a failed batch.
                    recalls::give_back(link, cred, ino);
                }
            }
        }
        Ok(_) => tracing::warn!("unexpected reply to a recall poll"),
        Err(e) => tracing::debug!(%e, "recall poll failed"),
    }
    for ino in delegs.idle(Instant::now()) {
        give_back(link, delegs, cred, ino, false);
    }
    recalls::give_back_idle(link, cred);
}

/// Gives every delegation back (at unmount).
pub(super) fn give_back_all(link: &mut Link, delegs: &mut Delegations, cred: &Credentials) {
    for ino in delegs.all() {
        give_back(link, delegs, cred, ino, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Option<LockKind> = Some(LockKind::Read);
    const W: Option<LockKind> = Some(LockKind::Write);

    fn delegated(d: &mut Delegations, ino: u64, mine: Vec<Returned>, now: Instant) {
        d.install(FileHandle { ino, generation: 1 }, mine, now, 1);
    }

    /// On a fast link the poll comes every 20 ms; across sites every nine round trips (a
    /// 40 ms poll: 360 ms), never more than a second apart.
    #[test]
    fn recall_polls_space_out_with_their_round_trip() {
        let ms = Duration::from_millis;
        let mut d = Delegations::new(9, None);
        assert_eq!(d.poll_every(), ms(20), "nothing measured yet");
        d.polled_in(ms(1));
        assert_eq!(d.poll_every(), ms(20));
        let mut d = Delegations::new(9, None);
        d.polled_in(ms(40));
        assert_eq!(d.poll_every(), ms(360));
        // Smoothed: one quick poll moves it a quarter of the way.
        d.polled_in(ms(0));
        assert_eq!(d.poll_every(), ms(270));
        d.polled_in(ms(500));
        assert_eq!(d.poll_every(), Duration::from_secs(1));
    }

    #[test]
    fn locks_of_a_delegated_file_follow_posix_between_owners() {
        let t = Instant::now();
        let mut d = Delegations::new(9, None);
        assert_eq!(d.set(5, 1, W, (0, 9), 11, t), None, "not delegated");
        let mine = vec![Returned {
            owner: 1,
            kind: LockKind::Read,
            start: 0,
            end: 0,
            pid: 11,
        }];
        delegated(&mut d, 5, mine, t);
        assert_eq!(d.set(5, 2, W, (0, 0), 12, t), Some(Err(Errno::EAGAIN)));
        assert_eq!(d.set(5, 2, R, (0, 0), 12, t), Some(Ok(())));
        assert_eq!(d.set(5, 1, W, (5, 9), 11, t), Some(Ok(())));
        let c = d.get(5, 2, LockKind::Read, (0, 100), t).flatten();
        assert_eq!(
            c.map(|c| (c.client, c.start, c.end, c.pid)),
            Some((9, 5, 9, 11))
        );
        assert_eq!(d.set(5, 1, W, (9, 3), 11, t), Some(Err(Errno::EINVAL)));
        assert!(d.release(5, 1));
        assert_eq!(d.get(5, 2, LockKind::Write, (0, 100), t), Some(None));
        assert!(!d.release(6, 1));
        assert_eq!(d.local, 7);
    }

    #[test]
    fn idle_and_contended_files() {
        let t = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut d = Delegations::new(9, Some(tx));
        delegated(&mut d, 5, Vec::new(), t);
        assert!(rx.try_recv().is_ok(), "the poller is woken");
        delegated(&mut d, 6, Vec::new(), t);
        assert!(d.idle(t + IDLE / 2).is_empty());
        assert_eq!(d.set(6, 1, W, (0, 0), 1, t + IDLE / 2), Some(Ok(())));
        assert_eq!(d.idle(t + IDLE), vec![5]);
        assert_eq!(d.all(), vec![5, 6]);
        d.contended.insert(7, t + CONTENDED_FOR);
        assert!(!d.wanted(7, t));
        assert!(d.wanted(7, t + CONTENDED_FOR));
        assert!(d.wanted(8, t));
        let mut lease = crate::lease::Lease::default();
        lease.answered(2, true, t);
        d.prune(&lease);
        assert!(!d.any(), "both granted at place 1, before the lapse at 2");
    }
}
