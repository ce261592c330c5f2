//! View change (docs/PROTOCOL.md §3): timers with exponential back-off, the `f+1` join rule, the
//! `2f+1` limbo rule, signed VIEW-CHANGE, retransmission until installed, and rollback of
//! tentative execution. NEW-VIEW is built, checked and installed in [`super::new_view`].

use super::slot::PP_INFO_MAX;
use super::timers::TimerKind;
use super::{AuthChoice, Replica, M};
use crate::action::{DropReason, Event, PersistRecord};
use crate::crypto::Digest;
use crate::ids::{ClientId, ReplicaId, RequestId, View};
use crate::message::{Message, PrePreparedEntry, PreparedEntry, ViewChange};
use crate::service::Service;
use crate::time::Time;
use core::time::Duration;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Random extra delay on the view-change timer so replicas do not fire in lockstep (§3.1).
const VTIMER_JITTER: Duration = Duration::from_millis(100);

/// A VIEW-CHANGE received (or sent), with its signed frame.
#[derive(Clone, Debug)]
pub(crate) struct StoredVc {
    pub frame: Arc<[u8]>,
    pub vc: ViewChange,
}

/// View-change bookkeeping.
#[derive(Clone, Debug)]
pub(crate) struct ViewChangeState {
    base: Duration,
    /// Current timeout (doubles per consecutive failed view, §3.1).
    pub timeout: Duration,
    /// Latest VIEW-CHANGE per replica (own included).
    pub latest: BTreeMap<ReplicaId, StoredVc>,
    /// The NEW-VIEW frame of the current view (sent or received), relayed on STATUS.
    pub new_view_frame: Option<Arc<[u8]>>,
    /// How much more busy time ([`Replica::busy_for`]) may still push back the running
    /// timer; `view_change_timeout_max` at each arming (`set_vtimer`).
    pub busy_allowance: Duration,
    /// Replicas the driver reports unreachable ([`Replica::handle_reachability`]).
    pub unreachable: BTreeSet<ReplicaId>,
    /// Where the running timer stood before an unreachable primary hastened it: restored
    /// if the primary is reported reachable again before it fires.
    pub hastened_from: Option<Time>,
}

impl ViewChangeState {
    pub fn new(base: Duration) -> Self {
        ViewChangeState {
            base,
            timeout: base,
            latest: BTreeMap::new(),
            new_view_frame: None,
            busy_allowance: Duration::ZERO,
            unreachable: BTreeSet::new(),
            hastened_from: None,
        }
    }
    /// A request executed in the current view: the back-off resets (§3.1 [REC]).
    pub fn progress(&mut self) {
        self.timeout = self.base;
    }
}

impl<S: Service> Replica<S> {
    /// Every replica, the primary included, tracks the newest unexecuted request per client
    /// and runs the view-change timer while any is pending (§3.1).
    pub(super) fn add_pending(&mut self, c: ClientId, rid: RequestId, d: Digest) {
        if self
            .requests
            .pending
            .get(&c)
            .is_some_and(|&(r, _)| r >= rid)
        {
            return;
        }
        self.requests.pending.insert(c, (rid, d));
        self.monitor_waiting(c);
        if !self.timers.is_set(TimerKind::ViewChange) {
            self.restart_vtimer();
        }
    }

    /// (Re)starts the normal-case view-change timer if requests are pending; stops it if none.
    ///
    /// Unlike PBFT's per-backup timer (§3.1), the primary runs it too. A correct primary can be
    /// the one replica that cannot execute: its view may lack a working quorum (a faulty backup
    /// withholds its votes while the third correct replica has already moved to the next view
    /// alone), and the remaining correct backup may have executed everything in an earlier
    /// view, so no backup has a request pending. Only the primary then knows the view is stuck,
    /// and its VIEW-CHANGE is the `f+1`-th that moves everyone on (simulator: byzzfuzz 823,
    /// 1173). Its VIEW-CHANGE alone moves no one (the `f+1` join rule).
    pub(super) fn restart_vtimer(&mut self) {
        if !self.view.has_new_view {
            return;
        }
        if self.requests.pending.is_empty() || self.fetch.is_some() {
            self.timers.stop(TimerKind::ViewChange);
            return;
        }
        let at = self.now + self.vc.timeout + self.jitter(VTIMER_JITTER) + self.bodies_to_cross();
        self.set_vtimer(at);
    }

    /// With the links' rate stated, how long the big bodies of the requests waiting here
    /// (each pending client's not yet run) need at that rate to reach the backups: one copy
    /// from the client to the primary and the fan-out's `k` from the primary; at most
    /// `view_change_timeout_max` (zero when the rate is not stated). The view-change timer
    /// waits that much longer, and the throughput watch's patience grows by as much
    /// (`monitor.rs`): at `slow-1` (1 Mb/s) the mount's 0.5 MB batch needs 6 s of links
    /// before the primary can order it, and a 5 s timer replaced every primary not at the
    /// client's site (BENCHMARKS.md "A body on its way"; Deviation 39). The bodies come from clients, so a
    /// faulty primary cannot stretch the wait, and the cap bounds what a faulty client can.
    pub(super) fn bodies_to_cross(&self) -> Duration {
        if !self.config.link_rate_stated() {
            return Duration::ZERO;
        }
        let bytes: u64 = self
            .requests
            .pending
            .keys()
            .flat_map(|&c| {
                let last = self.cached_rid(c).map_or(0, |(rid, _)| rid);
                self.requests.store.after(c, last)
            })
            .filter(|r| r.big)
            .map(|r| r.frame.len() as u64)
            .sum();
        let copies = 1 + self.config.relay_fan_out() as u64;
        let us = bytes
            .saturating_mul(copies)
            .saturating_mul(1_000_000)
            .checked_div(self.config.link_bytes_per_s())
            .unwrap_or(0);
        Duration::from_micros(us).min(self.config.view_change_timeout_max)
    }

    /// Arms the view-change timer at `at`, with a fresh allowance for busy time (see
    /// [`Replica::busy_for`]). Every arming goes through here.
    pub(super) fn set_vtimer(&mut self, at: Time) {
        self.timers.set(TimerKind::ViewChange, at);
        self.vc.busy_allowance = self.config.view_change_timeout_max;
        self.vc.hastened_from = None;
        self.hasten_vtimer();
    }

    /// The driver's report that `peer` is unreachable or reachable again (see
    /// [`Replica::handle_reachability`]).
    pub(super) fn on_reachability(&mut self, peer: ReplicaId, reachable: bool) {
        if peer as usize >= self.n() || peer == self.me {
            return;
        }
        if reachable {
            self.vc.unreachable.remove(&peer);
            if peer == self.primary() {
                self.unhasten_vtimer();
            }
            return;
        }
        if self.vc.unreachable.insert(peer) && peer == self.primary() {
            tracing::info!(
                replica = self.me,
                primary = peer,
                view = self.view.current,
                "primary unreachable: the view-change timer is shortened while requests wait"
            );
        }
        self.hasten_vtimer();
    }

    /// A running normal-case timer expires within `unreachable_primary_timeout` while our
    /// installed view's primary is unreachable (docs/PROTOCOL.md §3.1, "An unreachable
    /// primary"). Only sooner: the report never delays a view change, and it counts for
    /// this replica alone (the others join on `f+1` VIEW-CHANGEs as always).
    fn hasten_vtimer(&mut self) {
        let soon = self.config.unreachable_primary_timeout;
        if soon.is_zero()
            || !self.view.has_new_view
            || !self.vc.unreachable.contains(&self.primary())
        {
            return;
        }
        let Some(at) = self.timers.get(TimerKind::ViewChange) else {
            return;
        };
        let soon = self.now + soon;
        if soon < at {
            self.timers.set(TimerKind::ViewChange, soon);
            self.vc.hastened_from.get_or_insert(at);
        }
    }

    /// The primary is reachable again: a timer it hastened goes back to where it stood. A
    /// report that was only a moment's truth (a replica that started before the primary
    /// listened, and then reached it) costs no early vote (`crates/byzfs/tests/attacks.rs`:
    /// a backup started first voted on its hastened timer, not on the throughput watch).
    fn unhasten_vtimer(&mut self) {
        let Some(from) = self.vc.hastened_from.take() else {
            return;
        };
        if let Some(at) = self.timers.get(TimerKind::ViewChange) {
            if at < from {
                self.timers.set(TimerKind::ViewChange, from);
            }
        }
    }

    /// The driver's report that its last step kept this replica busy for `busy`
    /// ([`Replica::busy_for`]): the running view-change timer is pushed back by as much, within
    /// what is left of this arming's allowance.
    pub(super) fn push_back_vtimer(&mut self, busy: Duration) {
        let Some(at) = self.timers.get(TimerKind::ViewChange) else {
            return;
        };
        let by = busy.min(self.vc.busy_allowance);
        if by.is_zero() {
            return;
        }
        self.vc.busy_allowance -= by;
        self.timers.set(TimerKind::ViewChange, at + by);
        tracing::debug!(
            replica = self.me,
            busy_ms = busy.as_millis() as u64,
            pushed_back_ms = by.as_millis() as u64,
            "view-change timer pushed back: this replica was busy"
        );
    }

    pub(super) fn on_view_change_timeout(&mut self) {
        if self.view.has_new_view && !self.pending_signatures_checked() {
            // Only requests a faulty client signed badly were pending: no one to blame.
            self.restart_vtimer();
            return;
        }
        if self.view.has_new_view && self.awaits_a_prepared_body() {
            // The primary ordered it and `2f` others prepared it, so `f+1` correct replicas
            // hold the body: this replica is behind, not the primary at fault (a body passed
            // on by a backup busy executing: simulator, slow-execution 1213).
            self.restart_vtimer();
            return;
        }
        if self.view.has_new_view
            && self.is_primary()
            && self.config.link_rate_stated()
            && !self.peers.uplink.ahead(self.now).is_zero()
        {
            // Our own link still carries the bodies of our view's requests (`uplink.rs`):
            // this primary is at work, held back only by what it sent (a correct one never
            // votes itself out for that; a faulty one's vote moves no one alone).
            self.restart_vtimer();
            return;
        }
        if !self.view.has_new_view {
            // The new view failed to install in time: back off (§3.1, pitfall #8).
            let doubled = self.vc.timeout.saturating_mul(2);
            self.vc.timeout = doubled.min(self.config.view_change_timeout_max);
        }
        self.start_view_change(self.view.current + 1);
    }

    /// §3.2: move to view `v`.
    pub(super) fn start_view_change(&mut self, v: View) {
        if v <= self.view.current {
            return;
        }
        self.rollback_tentative();
        // Record P-info of certificates completed in the old view before clearing it.
        let old = self.view.current;
        for seq in self.log.slots.keys().copied().collect::<Vec<_>>() {
            if self.is_prepared(seq) {
                if let Some(slot) = self.log.slots.get_mut(&seq) {
                    if let Some(acc) = &slot.pre_prepare {
                        if slot.prepared_info.is_none_or(|(pv, _)| pv <= old) {
                            slot.prepared_info = Some((old, acc.digest));
                        }
                    }
                }
            }
        }
        for slot in self.log.slots.values_mut() {
            slot.clear_view_state();
        }
        // The NEW-VIEW names the batches wanted in the new view again.
        self.prune_missing_batches();
        self.view.current = v;
        self.view.has_new_view = false;
        self.log.pad_to = 0;
        self.vc.new_view_frame = None;
        self.requests.queue.clear();
        self.requests.proposed.clear();
        self.requests.proposed_ids.clear();
        self.requests.late_big.clear();
        self.requests.forwarded_big.clear();
        self.log.ahead.clear();
        self.timers.stop(TimerKind::ViewChange);
        self.persist(PersistRecord::View(v));
        self.resend_view_change();
        self.stats.view_changes += 1;
        tracing::debug!(replica = self.me, view = v, "view change started");
        self.event(Event::ViewChangeStarted { view: v });
        self.after_view_change_input();
    }

    /// Signs and multicasts our VIEW-CHANGE for the current view.
    pub(super) fn resend_view_change(&mut self) {
        let vc = self.build_view_change();
        let frame = self.encode(&Message::ViewChange(vc.clone()), AuthChoice::Signature);
        self.out.push_back(crate::action::Action::Broadcast {
            bytes: frame.clone(),
        });
        self.vc.latest.insert(self.me, StoredVc { frame, vc });
    }

    fn build_view_change(&self) -> ViewChange {
        let h = self.log.last_stable;
        let top = h + self.config.log_window;
        let mut prepared = Vec::new();
        let mut pre_prepared = Vec::new();
        for (&seq, slot) in self.log.slots.range(h + 1..=top) {
            if let Some((view, digest)) = slot.prepared_info {
                prepared.push(PreparedEntry { seq, view, digest });
            }
            for (&digest, &view) in &slot.pp_info {
                pre_prepared.push(PrePreparedEntry { seq, view, digest });
            }
        }
        ViewChange {
            view: self.view.current,
            replica: self.me,
            last_stable: h,
            checkpoints: {
                let mut c = self.checkpoints.own.clone();
                if let Some((s, d)) = self.certified_checkpoint() {
                    c.entry(s).or_insert(d);
                }
                c.into_iter().collect()
            },
            prepared,
            pre_prepared,
        }
    }

    /// Structural checks of a VIEW-CHANGE (bounded sizes, entries in its window, sorted).
    pub(super) fn view_change_well_formed(&self, m: &ViewChange) -> bool {
        let l = self.config.log_window;
        let k = self.config.checkpoint_interval;
        let in_win = |s: u64| s > m.last_stable && s <= m.last_stable.saturating_add(l);
        m.checkpoints.len() <= (l / k) as usize + 2
            && m.checkpoints
                .iter()
                .all(|&(s, _)| s >= m.last_stable && s % k == 0)
            && m.checkpoints.windows(2).all(|w| w[0].0 < w[1].0)
            && m.prepared.len() <= l as usize
            && m.prepared.iter().all(|e| in_win(e.seq) && e.view < m.view)
            && m.prepared.windows(2).all(|w| w[0].seq < w[1].seq)
            && m.pre_prepared.len() <= l as usize * PP_INFO_MAX
            && m.pre_prepared
                .iter()
                .all(|e| in_win(e.seq) && e.view < m.view)
            && m.pre_prepared
                .windows(2)
                .all(|w| (w[0].seq, w[0].digest) < (w[1].seq, w[1].digest))
    }

    /// A signed VIEW-CHANGE from replica `m.replica` (signature checked by `authentic`).
    pub(super) fn on_view_change(&mut self, m: ViewChange, bytes: &[u8]) {
        if m.view == 0 || !self.view_change_well_formed(&m) {
            return self.drop_input(DropReason::Invalid);
        }
        if m.view < self.view.current || (m.view == self.view.current && self.view.has_new_view) {
            return self.drop_input(DropReason::Stale);
        }
        let newer = self
            .vc
            .latest
            .get(&m.replica)
            .is_none_or(|s| s.vc.view < m.view);
        if !newer {
            return self.drop_input(DropReason::Stale);
        }
        self.vc.latest.insert(
            m.replica,
            StoredVc {
                frame: Arc::from(bytes),
                vc: m,
            },
        );
        self.after_view_change_input();
    }

    /// Applies the join rule, the limbo timer rule and (at the new primary) tries NEW-VIEW.
    fn after_view_change_input(&mut self) {
        // f+1 rule: jump to the largest view that f+1 replicas have reached beyond ours.
        let mut views: Vec<View> = self
            .vc
            .latest
            .iter()
            .filter(|(&r, _)| r != self.me)
            .map(|(_, s)| s.vc.view)
            .collect();
        views.sort_unstable_by(|a, b| b.cmp(a));
        let weak = if self.mutated(M::JoinViewOnOneVc) {
            1
        } else {
            self.config.weak()
        };
        if let Some(&target) = views.get(weak - 1) {
            if target > self.view.current {
                return self.start_view_change(target);
            }
        }
        // The primary of our view left it (its timer, or a restart that made it give the
        // view up): no one will propose here again, so waiting for our own timer only costs
        // time. A faulty primary gains nothing by it: it can always end its view by falling
        // silent.
        let primary = self.primary();
        if primary != self.me
            && self
                .vc
                .latest
                .get(&primary)
                .is_some_and(|s| s.vc.view > self.view.current)
        {
            return self.start_view_change(self.view.current + 1);
        }
        if self.view.has_new_view {
            return;
        }
        // 2f+1 rule: start waiting for NEW-VIEW once a quorum is in this view or later.
        let at_least = self
            .vc
            .latest
            .values()
            .filter(|s| s.vc.view >= self.view.current)
            .count();
        if at_least >= self.config.quorum() && !self.timers.is_set(TimerKind::ViewChange) {
            let at = self.now + self.vc.timeout;
            self.set_vtimer(at);
        }
        if self.is_primary() {
            self.try_new_view();
        }
    }
}
