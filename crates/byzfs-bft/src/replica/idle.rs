//! Idle checkpoints (docs/PROTOCOL.md §2.6): a primary that has ordered nothing for
//! [`crate::Config::idle_checkpoint`], while its last batch is past the last checkpoint,
//! proposes null batches (§3.5) up to the next checkpoint.
//!
//! Why: checkpoints come every `K` batches, so the batches of a burst that ends between two
//! of them wait for the next burst to become part of a stable checkpoint. Until then every
//! replica keeps their log entries, and a service that gives space back at stable
//! checkpoints (the file service's log store, `byzfs-fs`'s `store/log/`) keeps what
//! they deleted: 90 s after a 1 GiB file was removed from an idle cluster, its replicas
//! still held it (issue #46).
//!
//! Safety is untouched: a null batch is agreed like any other and executes as nothing; the
//! backups accept it from the primary today (a faulty primary could always send them). The
//! cost is at most `K − 1` agreed slots per quiet spell, none when the burst ended on a
//! checkpoint. The timer measures quiet, not time since the burst began: it is set for an
//! idle time after the last proposal when the primary is past a checkpoint with nothing
//! queued, and at expiry it pads only if nothing was proposed since (otherwise it is set
//! again from the last proposal).

use super::timers::TimerKind;
use super::{Replica, M};
use crate::service::Service;

impl<S: Service> Replica<S> {
    /// Sets the idle timer when this primary's last slot is past a checkpoint, nothing is
    /// queued and it is not padding already (called after each proposal round).
    pub(super) fn arm_idle_timer(&mut self) {
        let idle = self.config.idle_checkpoint;
        if idle.is_zero()
            || !self.is_primary()
            || self.timers.is_set(TimerKind::Idle)
            || self
                .log
                .seqno
                .is_multiple_of(self.config.checkpoint_interval)
            || self.log.pad_to > self.log.seqno
            || !self.requests.queue.is_empty()
        {
            return;
        }
        let at = (self.log.last_proposed + idle).max(self.now);
        self.timers.set(TimerKind::Idle, at);
    }

    /// The idle timer expired: pads to the next checkpoint if nothing was proposed for the
    /// idle time, or sets the timer again for an idle time after the last proposal.
    pub(super) fn on_idle_timeout(&mut self) {
        if !self.is_primary() || self.mutated(M::NoIdleCheckpoint) {
            return;
        }
        let k = self.config.checkpoint_interval;
        if self.log.seqno.is_multiple_of(k) {
            return;
        }
        let quiet_since = self.log.last_proposed;
        if self.now < quiet_since + self.config.idle_checkpoint || !self.requests.queue.is_empty() {
            self.arm_idle_timer();
            return;
        }
        self.log.pad_to = (self.log.seqno / k + 1) * k;
        self.stats.idle_checkpoints += 1;
        self.try_send_pre_prepare();
    }
}
