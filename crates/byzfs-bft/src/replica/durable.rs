//! What a replica promised, kept so a restart never contradicts it (PROTOCOL.md §3.6 #11):
//! the highest view entered and the votes sent above the last stable checkpoint. The driver
//! persists each [`PersistRecord`] before the sends that follow it; a restart rebuilds from
//! these records plus the state of the latest checkpoint.

use super::{Replica, LIB_PARTITIONS};
use crate::action::PersistRecord;
use crate::ids::{Seq, View};
use crate::service::Service;
use crate::time::Time;
use rand::RngCore;
use std::collections::BTreeMap;

/// The durable promises.
#[derive(Clone, Debug, Default)]
pub(crate) struct DurableLog {
    pub view: View,
    pub votes: BTreeMap<Seq, Vec<PersistRecord>>,
}

impl DurableLog {
    pub fn record(&mut self, rec: PersistRecord) {
        match rec {
            PersistRecord::View(v) => self.view = self.view.max(v),
            PersistRecord::Prepared { seq, .. } | PersistRecord::Committed { seq, .. } => {
                let e = self.votes.entry(seq).or_default();
                if !e.contains(&rec) {
                    e.push(rec);
                }
            }
        }
    }

    pub fn gc(&mut self, stable: Seq) {
        self.votes = self.votes.split_off(&(stable + 1));
    }
}

impl<S: Service> Replica<S> {
    /// Models a crash and restart that keeps only what was durable: the promises and the
    /// state of the latest checkpoint (everything executed after it is lost and re-learned).
    pub fn restart_from_durable(mut self, now: Time) -> Self {
        let seed = self.rng.next_u64();
        let ckpt = self.service.rollback();
        let lib_ckpt = self.lib.rollback();
        debug_assert_eq!(ckpt, lib_ckpt);
        let latest = ckpt.unwrap_or(0);
        let mut r = Self::blank(self.config, self.keys, self.service, self.lib, seed, now);
        debug_assert_eq!(LIB_PARTITIONS, r.lib.partition_count());
        r.last_executed = latest;
        r.last_tentative = latest;
        r.last_stable = self.last_stable.min(latest);
        r.seqno = latest;
        r.checkpoints.own = self
            .checkpoints
            .own
            .range(..=latest)
            .map(|(s, d)| (*s, *d))
            .collect();
        r.durable = self.durable;
        r.view = r.durable.view;
        r.has_new_view = r.view == 0;
        for recs in r.durable.votes.values() {
            for rec in recs {
                match *rec {
                    PersistRecord::Prepared { view, seq, digest } => {
                        r.log
                            .entry(seq)
                            .or_default()
                            .note_pre_prepared(digest, view);
                    }
                    PersistRecord::Committed { view, seq, digest } => {
                        let slot = r.log.entry(seq).or_default();
                        slot.note_pre_prepared(digest, view);
                        // A COMMIT is sent only with a prepared certificate: restore P-info.
                        if slot.prepared_info.is_none_or(|(pv, _)| pv < view) {
                            slot.prepared_info = Some((view, digest));
                        }
                    }
                    PersistRecord::View(_) => {}
                }
            }
        }
        r.log.retain(|&s, _| s > r.last_stable);
        // It may have replied to writes up to its highest vote, then lost them with the
        // volatile state: no read-only answers until it has executed that far again.
        let highest_vote = r.durable.votes.keys().next_back().copied().unwrap_or(0);
        r.read_only_floor = highest_vote;
        // Never assign a sequence number it may already have proposed (that would be an
        // honest replica equivocating).
        r.seqno = r.seqno.max(highest_vote);
        r.timers.set(
            super::timers::TimerKind::Status,
            now + r.config.status_interval,
        );
        if r.view > 0 && r.is_primary() {
            // It may have sent a NEW-VIEW for this view that it cannot rebuild identically
            // (its VIEW-CHANGE set is gone): give the view up rather than risk a second one.
            r.start_view_change(r.view + 1);
        } else if r.view > 0 {
            // The VIEW-CHANGE we sent may never have arrived; say it again from what is
            // durable (P-info restored from COMMIT records, Q-info from PREPARE records).
            r.resend_view_change();
        }
        r
    }
}
