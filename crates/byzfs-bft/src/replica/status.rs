//! STATUS and retransmission (docs/PROTOCOL.md §1.3, §3.6 #6 and #12): each replica periodically
//! says what it has; peers resend what it lacks — normal-case messages, the NEW-VIEW or
//! VIEW-CHANGE, checkpoints, missing batch bodies and big requests. The protocol never relies
//! on a message arriving the first time.

use super::answer_gap::Ask;
use super::timers::TimerKind;
use super::{AuthChoice, Replica};
use crate::action::Action;
use crate::crypto::Digest;
use crate::message::{BatchBody, BatchData, Checkpoint, Message, Status};
use crate::service::Service;
use crate::time::Time;
use std::collections::{BTreeMap, BTreeSet};

/// Bounds on what one STATUS asks for and what one answer resends.
const MISSING_MAX: usize = 64;
const RESEND_SLOTS_MAX: u64 = 32;

impl<S: Service> Replica<S> {
    pub(super) fn send_status(&mut self) {
        self.forward_late_big_requests();
        let (now, interval) = (self.now, self.config.status_interval);
        self.peers.answer_gaps.forget_idle(now, interval);
        let mut missing_requests: BTreeSet<Digest> = BTreeSet::new();
        for slot in self.log.slots.values() {
            if let Some(b) = slot
                .pre_prepare
                .as_ref()
                .and_then(|a| self.log.batches.get(&a.digest))
            {
                missing_requests.extend(
                    b.big
                        .iter()
                        .filter(|d| !self.requests.store.contains_key(d)),
                );
            }
        }
        missing_requests.extend(self.foreign_missing_bodies());
        let st = Status {
            replica: self.me,
            view: self.view.current,
            has_new_view: self.view.has_new_view,
            last_stable: self.log.last_stable,
            last_executed: self.log.last_executed,
            missing_batches: self
                .log
                .missing_batches
                .iter()
                .take(MISSING_MAX)
                .copied()
                .collect(),
            missing_requests: missing_requests.into_iter().take(MISSING_MAX).collect(),
        };
        self.broadcast(&Message::Status(st));
        // Retransmit our VIEW-CHANGE until the new view is installed (§3.6 #6), after
        // doubling gaps (`answer_gap.rs`): peers behind us ask for it in STATUS besides.
        if !self.view.has_new_view {
            let v = self.view.current;
            if let Some(own) = self.vc.latest.get(&self.me).filter(|s| s.vc.view == v) {
                let bytes = own.frame.clone();
                if self
                    .peers
                    .answer_gaps
                    .take(self.me, Ask::ViewChange(v), now, interval)
                {
                    self.out.push_back(Action::Broadcast { bytes });
                }
            }
        }
    }

    /// Starts the view-change timer once `2f+1` replicas (us included) say they are in our
    /// view or a later one without our view's NEW-VIEW. The `2f+1` rule of the view change
    /// counts VIEW-CHANGEs for the view, but replicas restarted after voting in it cannot send
    /// one (its entries must come from earlier views) and no one may still hold its NEW-VIEW
    /// (it is volatile): without this, a cluster restarted whole after a view change waited
    /// for ever (simulator: `total-crash`). Counting STATUS rather than starting the timer at
    /// every restart keeps a lone restarted replica in its view, where a peer's NEW-VIEW lets
    /// it rejoin, instead of sending it ahead alone.
    fn time_out_a_view_no_one_installed(&mut self) {
        if self.view.has_new_view || self.timers.is_set(TimerKind::ViewChange) {
            return;
        }
        let v = self.view.current;
        let me = self.me;
        let lacking = 1 + self
            .peers
            .views
            .iter()
            .filter(|(&r, &(pv, nv))| r != me && (pv > v || (pv == v && !nv)))
            .count();
        if lacking >= self.config.quorum() {
            let at = self.now + self.vc.timeout;
            self.set_vtimer(at);
        }
    }

    /// Backups do not forward big requests (their bodies go to every replica, §1.10), yet time
    /// them. A faulty client can send one to the backups only: they would wait for a request
    /// the primary never receives and change views (found by the simulator). So a backup
    /// forwards the body of a pending big request the primary has not pre-prepared for a whole
    /// STATUS interval — once per view, so the normal case costs nothing.
    ///
    /// With the links' rate stated, a whole half view-change timeout: a primary holds a big
    /// request while its relayed copies cross (`uplink.rs`), and every backup that holds the
    /// body sends it, so an early forward puts `n - 1` needless copies on the primary's
    /// links (simulator, `thin-links` 11: 11 KiB from each backup, half a second of each
    /// link, and the votes queued behind them timed out; Deviation 39).
    fn forward_late_big_requests(&mut self) {
        if self.is_primary() || !self.view.has_new_view {
            self.requests.late_big.clear();
            return;
        }
        let late: BTreeSet<Digest> = self
            .requests
            .pending
            .values()
            .map(|&(_, d)| d)
            .filter(|d| !self.requests.proposed.contains(d))
            .filter(|d| self.requests.store.get(d).is_some_and(|r| r.big))
            .collect();
        let primary = self.primary();
        let wait = if self.config.link_rate_stated() {
            self.config
                .status_interval
                .max(self.config.view_change_timeout / 2)
        } else {
            self.config.status_interval
        };
        let now = self.now;
        let late: BTreeMap<Digest, Time> = late
            .into_iter()
            .map(|d| (d, self.requests.late_big.get(&d).copied().unwrap_or(now)))
            .collect();
        let due: Vec<Digest> = late
            .iter()
            .filter(|&(_, &since)| since + wait <= now)
            .map(|(&d, _)| d)
            .filter(|d| !self.requests.forwarded_big.contains(d))
            .collect();
        for d in due {
            // Checked before it goes on, as a forwarded small request is (`on_request`): a
            // faulty client's badly signed bodies are not passed to the primary.
            if !self.signature_checked(d) {
                continue;
            }
            if let Some(frame) = self.requests.store.get(&d).map(|r| r.frame.clone()) {
                self.requests.forwarded_big.insert(d);
                self.send_frame(primary, frame);
            }
        }
        self.requests.late_big = late;
        let requests = &self.requests.store;
        self.requests
            .forwarded_big
            .retain(|d| requests.contains_key(d));
    }

    pub(super) fn on_status(&mut self, m: Status) {
        let j = m.replica;
        let (now, interval) = (self.now, self.config.status_interval);
        // Every answer below to an ask `j` repeats in each STATUS goes out again only after
        // a gap that doubles (`answer_gap.rs`: on a slow link an answer takes seconds to
        // cross, and one per STATUS filled the link with copies).
        let behind_view =
            m.view < self.view.current || (m.view == self.view.current && !m.has_new_view);
        if behind_view {
            let v = self.view.current;
            // The signed NEW-VIEW (or our VIEW-CHANGE) lets it catch up to our view.
            if let Some(nv) = self
                .vc
                .new_view_frame
                .clone()
                .filter(|_| self.view.has_new_view)
            {
                if self
                    .peers
                    .answer_gaps
                    .take(j, Ask::NewView(v), now, interval)
                {
                    self.send_frame(j, nv);
                }
            }
            if let Some(own) = self.vc.latest.get(&self.me).filter(|s| s.vc.view == v) {
                let f = own.frame.clone();
                if self
                    .peers
                    .answer_gaps
                    .take(j, Ask::ViewChange(v), now, interval)
                {
                    self.send_frame(j, f);
                }
            }
        }
        // Resend normal-case messages only to a peer that made no progress since its last
        // STATUS: in-flight slots are normal under load and need no retransmission. While
        // it stays stuck, again only after a doubling gap: each peer resent a stuck peer up
        // to 32 slots' PRE-PREPARE, PREPARE and COMMIT every 150 ms — at 1 Mb/s a third of
        // what its link carried, beside the body it waited for (BENCHMARKS.md, `slow-1`).
        let stuck = self.peers.executed.insert(j, m.last_executed) == Some(m.last_executed);
        if !stuck {
            self.peers.answer_gaps.reset(j, Ask::Slots);
        }
        self.monitor_heard(j);
        self.peers.views.insert(j, (m.view, m.has_new_view));
        self.time_out_a_view_no_one_installed();
        if m.view == self.view.current
            && m.has_new_view
            && self.view.has_new_view
            && stuck
            && self.peers.answer_gaps.take(j, Ask::Slots, now, interval)
        {
            self.resend_slots(j, m.last_executed);
        }
        // A peer alone in a higher view, behind us: our COMMITs let it run what our view
        // committed without voting in it (`catch_up.rs`, docs/PROTOCOL.md §3.8).
        if m.view > self.view.current
            && !m.has_new_view
            && self.view.has_new_view
            && m.last_executed < self.log.last_executed
            && self.peers.answer_gaps.take(j, Ask::Slots, now, interval)
        {
            self.resend_commits(j, m.last_executed);
        }
        // Checkpoints: a stable one if it is behind it, our newer own ones otherwise.
        if m.last_executed < self.log.last_stable {
            if let Some(f) = self.checkpoints.stable_frame.clone() {
                let stable = Ask::StableCheckpoint(self.log.last_stable);
                if self.peers.answer_gaps.take(j, stable, now, interval) {
                    // It may fetch this checkpoint: keep it until the FETCH can arrive.
                    self.lend_checkpoint(j, self.log.last_stable);
                    self.send_frame(j, f);
                }
            }
        }
        let newer: Vec<(u64, Digest)> = self
            .checkpoints
            .own
            .range(m.last_stable + 1..)
            .map(|(s, d)| (*s, *d))
            .collect();
        for (seq, digest) in newer {
            if !self
                .peers
                .answer_gaps
                .take(j, Ask::Checkpoint(seq), now, interval)
            {
                continue;
            }
            let cp = Message::Checkpoint(Checkpoint {
                seq,
                digest,
                replica: self.me,
                stable: false,
            });
            let f = self.encode(&cp, AuthChoice::MacTo(j));
            self.send_frame(j, f);
        }
        for d in m.missing_batches.iter().take(MISSING_MAX) {
            let Some(b) = self.log.batches.get(d).cloned() else {
                continue;
            };
            if !self
                .peers
                .answer_gaps
                .take(j, Ask::Batch(*d), now, interval)
            {
                continue;
            }
            let batch: BatchBody = (*b).clone();
            self.send_to(
                j,
                &Message::BatchData(BatchData {
                    replica: self.me,
                    batch,
                }),
            );
        }
        for d in m.missing_requests.iter().take(MISSING_MAX) {
            let Some(f) = self.requests.store.get(d).map(|r| r.frame.clone()) else {
                continue;
            };
            if self.peers.answer_gaps.take(j, Ask::Body(*d), now, interval) {
                self.body_sent_again(j, *d, f.len());
                self.send_frame(j, f);
            }
        }
    }

    /// Resends our COMMITs of the slots after what `j` executed (it may lack none of the
    /// others' view, only the NEW-VIEW that would let it use them).
    fn resend_commits(&mut self, j: u32, their_executed: u64) {
        let from = their_executed.max(self.log.last_stable) + 1;
        let to = from + RESEND_SLOTS_MAX;
        let frames: Vec<_> = self
            .log
            .slots
            .range(from..to)
            .filter_map(|(_, slot)| slot.own_commit.clone())
            .collect();
        for f in frames {
            self.send_frame(j, f);
        }
    }

    /// Resends the primary's PRE-PREPARE (its authenticator covers every replica) and our own
    /// PREPARE/COMMIT for the slots after what `j` executed.
    fn resend_slots(&mut self, j: u32, their_executed: u64) {
        let from = their_executed.max(self.log.last_stable) + 1;
        let to = from + RESEND_SLOTS_MAX;
        let primary = self.primary();
        let mut frames = Vec::new();
        for (_, slot) in self.log.slots.range(from..to) {
            if j != primary {
                if let Some(f) = slot.pre_prepare.as_ref().and_then(|a| a.frame.clone()) {
                    frames.push(f);
                }
            }
            frames.extend(slot.own_prepare.clone());
            frames.extend(slot.own_commit.clone());
        }
        for f in frames {
            self.send_frame(j, f);
        }
    }
}
