//! The backups' watch on the primary's throughput (Aardvark, docs/PROTOCOL.md §5.3 measure 4;
//! parameters in [`crate::MonitorConfig`]).
//!
//! The view-change timer (§3.1) only replaces a primary that stops: it restarts whenever a
//! request executes, so a primary that holds every batch just under the timeout keeps its
//! view for ever at a few batches per timeout. Here each backup counts the work executed in
//! each `period` of the view (one unit per request, plus one per 4 KiB of its operation, so a
//! load of large writes is not mistaken for a slow primary of small ones) and, after the
//! view's `grace`, votes the primary out when a period falls short of the bar: `percent` % of
//! the best period of the last `views` views, raised by `raise_percent` % per judged period,
//! and at least the floor.
//!
//! Only while the load demands more: a client's request has waited at this backup for
//! `patience` with none of that client's requests running since. A backup holds a client's
//! small request only when the client retransmitted it to every replica (its reply was
//! late), and a large one as soon as the client sends it to every replica, or, if the
//! primary relayed it (docs/PROTOCOL.md §1.10), when the client retransmits it: a relayed body
//! crossing a slow link ahead of the PRE-PREPARE that names it is no sign of a slow primary
//! (ARCHITECTURE.md Deviation 33). So an idle or lightly loaded cluster, or a load that
//! simply shrank, is never judged. Periods in which the driver reported this
//! replica busy ([`Replica::busy_for`]) are not judged either: its own slowness is not the
//! primary's. A backup's complaint is a VIEW-CHANGE like a timeout's, and moves no one alone
//! (the `f+1` join rule).
//!
//! Nor is a period judged while a batch the backup accepted names a body it lacks
//! (`lacks_ordered_bodies`): the ordering is done and the bytes are on their way.
//!
//! A backup that lags behind a gap (a replica restarted without its data, in the middle of
//! its window) commits batches it cannot run yet: their work is credited to the primary when
//! they commit, not when they run (each batch once, so a primary that leaves a gap gains
//! nothing by it). Nor does a backup judge while it lags: when `f+1` replicas' STATUS
//! (§1.3) report more than `batch_window` batches executed beyond its own, at least one
//! correct replica is ahead by more than the primary keeps in flight, so the primary is
//! ordering and this backup is behind (`crates/byzfs/tests/faults.rs`
//! `replica_restarted_without_its_data_rejoins_by_state_transfer`: its vote put it alone in a
//! higher view, out of step until the others change view too). A faulty primary cannot
//! silence the watch this way: `f+1` reports include a correct replica's. And a backup judges
//! a period only if it heard the STATUS of `2f` other replicas in it: one that just started
//! (its peers still reconnecting) or is cut off knows nothing of what the primary ordered,
//! and a primary it cannot reach is the view-change timer's business.

use super::timers::TimerKind;
use super::Replica;
use crate::action::Event;
use crate::crypto::Digest;
use crate::ids::{ClientId, ReplicaId, Seq, View};
use crate::service::Service;
use crate::time::Time;
use core::time::Duration;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Bytes of an operation worth one more unit of work.
pub(crate) const UNIT_BYTES: usize = 4096;

/// A backup's measurements of the primaries' throughput.
#[derive(Clone, Debug, Default)]
pub(crate) struct Monitor {
    /// The view being measured and when this replica installed it.
    view: View,
    view_start: Time,
    /// Start of the current period and the work executed in it.
    period_start: Time,
    units: u64,
    /// The driver reported this replica busy during the period.
    busy: bool,
    /// Best period of the current view, and of each of the views before it (newest last).
    best: u64,
    history: VecDeque<u64>,
    /// Periods of this view judged so far (each raises the bar).
    judged: u32,
    /// The last batch the view's NEW-VIEW carried over (0 in a view without one).
    carried_to: Seq,
    /// Batches whose work was credited when they committed here, ahead of a gap.
    credited: BTreeSet<Seq>,
    /// Replicas whose STATUS arrived during the period.
    heard: BTreeSet<ReplicaId>,
    /// Since when each client with a request pending here has waited with none of its
    /// requests running (the demand test).
    waiting_since: BTreeMap<ClientId, Time>,
}

/// The outcome of one judged period, for the event and the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub units: u64,
    pub required: u64,
}

impl Monitor {
    /// The bar for the next judged period: the recent best, scaled, raised, floored (in
    /// units; a replica's own judgement, so floating point needs no agreement).
    /// During the grace only the floor holds (Aardvark's heartbeat: a primary must keep
    /// ordering while clients wait, even in its first seconds).
    fn required(&self, c: &crate::MonitorConfig, period_us: u64, in_grace: bool) -> f64 {
        let floor = c.floor_per_s as f64 * period_us as f64 / 1e6;
        if in_grace {
            return floor;
        }
        let best = self.history.iter().copied().chain([self.best]).max();
        let raise = (1.0 + f64::from(c.raise_percent) / 100.0).powi(self.judged.min(10_000) as i32);
        let bar = best.unwrap_or(0) as f64 * f64::from(c.percent) / 100.0 * raise;
        bar.max(floor)
    }
}

impl<S: Service> Replica<S> {
    /// Starts measuring the current view (at construction, restart and each installed view).
    pub(super) fn monitor_view_start(&mut self) {
        let m = &mut self.monitor;
        if m.view != self.view.current {
            m.history.push_back(m.best);
            while m.history.len() > self.config.monitor.views.saturating_sub(1) as usize {
                m.history.pop_front();
            }
            m.best = 0;
        }
        m.view = self.view.current;
        m.view_start = self.now;
        m.carried_to = 0;
        m.period_start = self.now;
        m.units = 0;
        m.busy = false;
        m.judged = 0;
        if self.config.monitor.enabled {
            self.timers
                .set(TimerKind::Monitor, self.now + self.config.monitor.period);
        }
    }

    /// The view's NEW-VIEW carried batches over up to `seq`.
    pub(super) fn monitor_carried_over(&mut self, seq: Seq) {
        self.monitor.carried_to = seq;
    }

    /// Whether, with the links' rate stated, this view is still running the batches its
    /// NEW-VIEW carried over, within a view-change timeout of its start: a new primary
    /// that has not yet got past what the view change left is not judged on it. At
    /// `slow-1` each new primary was voted out half a second into its view, while the
    /// carried-over batches' bodies were still crossing (BENCHMARKS.md "A body on its
    /// way"). They are in the NEW-VIEW itself, so a faulty primary cannot hold them back;
    /// the view-change timer still runs.
    fn still_carrying_over(&self, now: Time) -> bool {
        let m = &self.monitor;
        self.config.link_rate_stated()
            && self.log.last_executed < m.carried_to
            && now.as_micros()
                < m.view_start.as_micros() + self.config.view_change_timeout.as_micros() as u64
    }

    /// Work executed in this view (`units` of [`UNIT_BYTES`]).
    pub(super) fn monitor_executed(&mut self, units: u64) {
        self.monitor.units = self.monitor.units.saturating_add(units);
    }

    /// The driver reported a long step.
    pub(super) fn monitor_busy(&mut self) {
        self.monitor.busy = true;
    }

    /// Batch `seq` (digest `d`) committed here. If this replica cannot run it yet (an
    /// earlier batch is missing), the primary's work is credited now.
    pub(super) fn monitor_committed(&mut self, seq: Seq, d: Digest) {
        if seq <= self.log.last_tentative.max(self.log.last_executed) + 1 {
            return;
        }
        let Some(b) = self.log.batches.get(&d) else {
            return;
        };
        let units: u64 = b
            .requests
            .iter()
            .map(|r| r.len())
            .chain(
                b.big
                    .iter()
                    .map(|bd| self.requests.store.get(bd).map_or(0, |r| r.frame.len())),
            )
            .map(|len| 1 + (len / UNIT_BYTES) as u64)
            .sum();
        self.monitor.units = self.monitor.units.saturating_add(units);
        self.monitor.credited.insert(seq);
    }

    /// Replica `j`'s STATUS arrived.
    pub(super) fn monitor_heard(&mut self, j: ReplicaId) {
        if j != self.me {
            self.monitor.heard.insert(j);
        }
    }

    /// Whether batch `seq`'s work was credited at its commit (it then counts no more).
    pub(super) fn monitor_take_credit(&mut self, seq: Seq) -> bool {
        self.monitor.credited.remove(&seq)
    }

    /// Client `c` has a request pending here: it waits from now unless it already did.
    pub(super) fn monitor_waiting(&mut self, c: ClientId) {
        let now = self.now;
        self.monitor.waiting_since.entry(c).or_insert(now);
    }

    /// A request of `c` ran (its wait starts again if more are pending) or none is pending.
    pub(super) fn monitor_served(&mut self, c: ClientId) {
        if self.requests.pending.contains_key(&c) {
            let now = self.now;
            self.monitor.waiting_since.insert(c, now);
        } else {
            self.monitor.waiting_since.remove(&c);
        }
    }

    /// The end of a period: judge it, then start the next.
    pub(super) fn on_monitor_timeout(&mut self) {
        let c = self.config.monitor.clone();
        let now = self.now;
        let period_us = now
            .as_micros()
            .saturating_sub(self.monitor.period_start.as_micros());
        let verdict = self.judge(&c, now, period_us);
        let m = &mut self.monitor;
        m.heard.clear();
        m.best = m.best.max(m.units);
        m.period_start = now;
        m.units = 0;
        m.busy = false;
        let done = self.log.last_executed;
        m.credited.retain(|&s| s > done);
        if c.enabled {
            self.timers.set(TimerKind::Monitor, now + c.period);
        }
        if let Some(v) = verdict {
            self.stats.monitor_complaints += 1;
            tracing::info!(
                replica = self.me,
                view = self.view.current,
                units = v.units,
                required = v.required,
                "the primary's throughput fell short under load; voting it out"
            );
            self.event(Event::PrimaryTooSlow {
                view: self.view.current,
                units: v.units,
                required: v.required,
            });
            self.start_view_change(self.view.current + 1);
        }
    }

    /// Whether `f+1` other replicas reported executing more than `batch_window` batches
    /// beyond this one (their latest STATUS).
    fn lags(&self) -> bool {
        let mine = self
            .log
            .last_executed
            .saturating_add(self.config.batch_window);
        let ahead = self
            .peers
            .executed
            .iter()
            .filter(|&(&j, &e)| j != self.me && e > mine)
            .count();
        ahead > self.f()
    }

    /// Whether a batch this replica accepted but has not run names a body it lacks: the
    /// primary has ordered it and the body is crossing from whoever holds it (on a slow
    /// link, for seconds, as after a view change whose batches name bodies this replica
    /// never got). A primary that names bodies nobody has stalls its own slot, and with it
    /// every later one, and the view-change timer replaces it.
    fn lacks_ordered_bodies(&self) -> bool {
        self.log
            .slots
            .range(self.log.last_executed.saturating_add(1)..)
            .filter_map(|(_, s)| s.pre_prepare.as_ref())
            .filter_map(|a| self.log.batches.get(&a.digest))
            .any(|b| b.big.iter().any(|d| !self.requests.store.contains_key(d)))
    }

    /// Whether the period just ended condemns the primary.
    fn judge(&mut self, c: &crate::MonitorConfig, now: Time, period_us: u64) -> Option<Verdict> {
        let m = &self.monitor;
        let judged = c.enabled
            && self.view.has_new_view
            && self.fetch.is_none()
            && self.primary() != self.me
            && m.view == self.view.current
            && !m.busy
            && m.heard.len() >= 2 * self.f()
            && !self.lags()
            && !self.lacks_ordered_bodies()
            && !self.still_carrying_over(now)
            // A period cut short (a view installed mid-way) says little.
            && period_us >= c.period.as_micros() as u64;
        let in_grace = now.as_micros() < m.view_start.as_micros() + c.grace.as_micros() as u64;
        if !judged || (in_grace && c.floor_per_s == 0) {
            return None;
        }
        let patience = c.patience.as_micros() as u64;
        // With the links' rate stated, a client's wait counts from the view's start (the
        // bodies the new primary must first relay are its own link's time), and its
        // patience grows by the time the big bodies waiting here need at that rate, its
        // own and those ordered ahead of it (`view_change.rs` `bodies_to_cross`): at
        // `slow-1` every new primary was voted out in its first half second, its clients
        // having waited through the view change with 0.5 MB batches that need seconds of
        // link (BENCHMARKS.md "A body on its way"; Deviation 39).
        let stated = self.config.link_rate_stated();
        let view_start = self.monitor.view_start;
        let ahead = self.bodies_to_cross();
        let waited: Vec<ClientId> = self
            .monitor
            .waiting_since
            .iter()
            .filter(|&(_, &t)| {
                let (from, more) = if stated {
                    (t.max(view_start), ahead)
                } else {
                    (t, Duration::ZERO)
                };
                from.as_micros() + patience + more.as_micros() as u64 <= now.as_micros()
            })
            .map(|(&cl, _)| cl)
            .collect();
        // Only a correct client's wait is demand: a request whose deferred signature fails
        // (checked now, at most once per client and period) blacklists its client and leaves
        // `pending` — a faulty client cannot frame the primary by waiting (§5.3).
        let mut demand = false;
        for cl in waited {
            let Some(&(_, d)) = self.requests.pending.get(&cl) else {
                self.monitor.waiting_since.remove(&cl);
                continue;
            };
            if self.signature_checked(d) && self.requests.pending.contains_key(&cl) {
                demand = true;
                break;
            }
            self.monitor_served(cl);
        }
        if !demand {
            return None;
        }
        let required = self.monitor.required(c, period_us, in_grace);
        if !in_grace {
            self.monitor.judged = self.monitor.judged.saturating_add(1);
        }
        let units = self.monitor.units;
        ((units as f64) < required && !self.mutated(super::M::NoPrimaryMonitor)).then_some(
            Verdict {
                units,
                required: required.ceil() as u64,
            },
        )
    }
}
