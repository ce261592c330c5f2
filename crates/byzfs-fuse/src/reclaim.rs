//! The mount's share of giving space back ([`byzfs_fs::reclaim`]): the replicas delete a
//! large removed or truncated file's blocks only in bounded steps, and clients send those
//! steps.
//!
//! * **In the background.** After an operation that may have queued work (a removal, a
//!   rename over a file, a truncation, a sweep), when the mount starts (work a killed mount
//!   left) and every [`CHECK_EVERY`], the background thread sends `Op::Reclaim` steps, one
//!   at a time with the mount's lock released in between, until the replicas answer that
//!   nothing is left. A user's operation waits behind at most one step
//!   ([`byzfs_fs::reclaim::STEP_BLOCKS`] blocks).
//! * **On `EBUSY`.** A write, truncation or `fallocate` that would grow a file over the
//!   stale tail a large truncation left gets `EBUSY` from the replicas, having changed
//!   nothing; the mount then reclaims that file's tail and sends the operation again
//!   (`sender.rs` `send_growing`), so applications never see it.
//!
//! This file holds the books and the rules; the background thread sends the steps
//! (`background.rs`).

use byzfs_fs::{FileHandle, Op};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// How often a mount looks for reclaim work left by others, besides after its own removals.
pub(super) const CHECK_EVERY: Duration = Duration::from_secs(300);

/// After the replicas said no work is left, the next step waits this long, however many
/// removals and renames came meanwhile: one step then covers them all. Most removals
/// queue nothing (small files go at once), and a step after each took one ordered
/// request in eight of a workload that renames and removes (3,784 operations, 441 of them
/// steps: docs/BENCHMARKS.md "Ordered operations in lanes"). A file grown over a stale
/// tail does not wait for it (`EBUSY`, below).
pub(super) const QUIET_AFTER_NONE: Duration = Duration::from_secs(1);

/// Whether reclaim steps are due.
pub(super) struct Reclaimer {
    /// Work may be queued: send steps until the replicas say none is left.
    due: bool,
    /// When to look again without a reason.
    next_check: Instant,
    /// No step before this, even if due ([`QUIET_AFTER_NONE`]).
    quiet_until: Option<Instant>,
    /// Wakes the background thread.
    nudge: Option<Sender<()>>,
}

impl Reclaimer {
    /// Due at once (a killed mount may have left work), then every [`CHECK_EVERY`].
    pub(super) fn new(nudge: Option<Sender<()>>) -> Reclaimer {
        Reclaimer {
            due: true,
            next_check: Instant::now() + CHECK_EVERY,
            quiet_until: None,
            nudge,
        }
    }

    /// Notes that `op`, which succeeded, may have queued work.
    pub(super) fn after(&mut self, op_may_queue: bool) {
        if op_may_queue && !self.due {
            self.due = true;
            if let Some(n) = &self.nudge {
                // The background thread may be gone (unmounting): nothing to wake.
                let _ = n.send(());
            }
        }
    }

    /// The replicas said no work is left: look again in [`CHECK_EVERY`], and send no step
    /// for [`QUIET_AFTER_NONE`] whatever comes.
    pub(crate) fn done(&mut self, now: Instant) {
        self.due = false;
        self.next_check = now + CHECK_EVERY;
        self.quiet_until = Some(now + QUIET_AFTER_NONE);
    }

    /// Whether the background thread should send a step at `now`.
    pub(super) fn due(&mut self, now: Instant) -> bool {
        if !self.due && now >= self.next_check {
            self.due = true;
        }
        self.due && self.quiet_until.is_none_or(|t| now >= t)
    }
}

/// Whether `op` can leave work in the reclaim queue: it removes a file, or truncates one.
pub(super) fn may_queue(op: &Op) -> bool {
    match op {
        Op::Remove { .. }
        | Op::Rmdir { .. }
        | Op::Rename { .. }
        | Op::SweepOrphans { .. }
        | Op::SweepDir { .. }
        | Op::WriteSetAttr { .. } => true,
        Op::SetAttr { set, .. } => set.size.is_some(),
        Op::WriteAt { write, .. } => may_queue(write),
        _ => false,
    }
}

/// The file an operation grows, if it is one that answers `EBUSY` over a stale tail.
pub(super) fn grows(op: &Op) -> Option<FileHandle> {
    match op {
        Op::Write { fh, .. }
        | Op::WriteGather { fh, .. }
        | Op::WriteSetAttr { fh, .. }
        | Op::SetAttr { fh, .. }
        | Op::Allocate { fh, .. } => Some(*fh),
        Op::WriteAt { write, .. } => grows(write),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_nothing_was_left_steps_wait_out_the_quiet_spell() {
        let t0 = Instant::now();
        let mut r = Reclaimer::new(None);
        // Due at once when the mount starts; the replicas say nothing is left.
        assert!(r.due(t0));
        r.done(t0);
        // Removals within the quiet spell make it due, not sent: one step covers them.
        r.after(true);
        r.after(true);
        let ms = Duration::from_millis;
        let due: Vec<bool> = [ms(0), ms(999), ms(1000), ms(5000)]
            .into_iter()
            .map(|d| r.due(t0 + d))
            .collect();
        assert_eq!(due, vec![false, false, true, true]);
        // Nothing queued and the quiet spell over: not due until CHECK_EVERY.
        r.done(t0 + ms(5000));
        assert!(!r.due(t0 + ms(7000)));
        assert!(r.due(t0 + ms(5000) + CHECK_EVERY));
    }
}
