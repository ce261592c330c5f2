//! The mount's background thread: write-back sent when old enough, answers of write-back
//! in flight handled, the lock lease renewed, recalls polled for, the orphan directory
//! swept, reclaim steps sent, and the client driven when no caller does.

use crate::calls::invoke;
use crate::delegations;
use crate::gather;
use crate::link::Link;
use crate::locks;
use crate::sender::{self, call};
use crate::unlocked;
use crate::writeback::{self, Wait};
use crate::{own_credentials, Inner, SWEEP_EVERY};
use byzfs_fs::{Credentials, Op, Reply};
use std::sync::Mutex;
use std::time::Duration;

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
                let reclaiming = reclaim_step(&mut inner.link, &cred);
                // Answers of write-back in flight that came in (`inflight.rs`).
                sender::land_ready(&mut inner.link);
                // Old enough: sent, not waited for (room in flight waited for without the
                // mount's lock: `unlocked.rs`).
                if inner.link.dirs.due(std::time::Instant::now()) {
                    let link = &mut inner.link;
                    let plan = writeback::queue(
                        &mut link.dirs,
                        &mut link.gather,
                        &link.files,
                        Wait::InFlight,
                    );
                    inner = match unlocked::send(&mount, inner, plan) {
                        Some(i) => i,
                        None => return,
                    };
                }
                if chores.elapsed() >= tick {
                    chores = std::time::Instant::now();
                    let stale = inner.link.gather.take_stale();
                    let plan = writeback::writes(&inner.link.gather, stale, Wait::InFlight);
                    inner = match unlocked::send(&mount, inner, plan) {
                        Some(i) => i,
                        None => return,
                    };
                    drop(inner);
                    locks::renew_if_due(&mount, &cred);
                    inner = match mount.lock() {
                        Ok(i) => i,
                        Err(_) => return,
                    };
                    sweep.step(&mut inner.link, &cred);
                    drive = Some(std::sync::Arc::clone(inner.link.cluster.wire()));
                }
                // Write-back in flight is sent and answered only while someone leads the
                // client (`wire.rs`), and its writer does not wait: this thread leads.
                let flying = !inner.link.inflight.is_empty();
                if flying {
                    drive = Some(std::sync::Arc::clone(inner.link.cluster.wire()));
                }
                nap = if flying {
                    Duration::ZERO
                } else if reclaiming {
                    RECLAIM_PAUSE
                } else if inner.locking.delegs.any()
                    || inner.link.dirs.any_held()
                    || inner.link.files.any()
                {
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

/// One background step: `Op::Reclaim` of the queue's oldest work. Returns whether more is
/// left (the caller sends the next step soon, with the mount's lock released meanwhile).
fn reclaim_step(link: &mut Link, cred: &Credentials) -> bool {
    if !link.reclaim.due(std::time::Instant::now()) {
        return false;
    }
    let more = match call(link, cred, Op::Reclaim { file: None }, false) {
        Ok(Reply::Reclaimed { more, .. }) => more,
        Ok(other) => {
            tracing::warn!(?other, "unexpected reply to a reclaim step");
            false
        }
        Err(e) => {
            tracing::debug!(%e, "cannot send a reclaim step");
            false
        }
    };
    if !more {
        link.reclaim.done(std::time::Instant::now());
    }
    more
}
