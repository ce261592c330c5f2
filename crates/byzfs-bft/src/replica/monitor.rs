//! The backups' watch on the primary's throughput (Aardvark, PROTOCOL.md §5.3 measure 4;
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
//! late), and large ones as soon as they are sent; so an idle or lightly loaded cluster, or a
//! load that simply shrank, is never judged. Periods in which the driver reported this
//! replica busy ([`Replica::busy_for`]) are not judged either: its own slowness is not the
//! primary's. A backup's complaint is a VIEW-CHANGE like a timeout's, and moves no one alone
//! (the `f+1` join rule).
//!
//! Nor does a backup judge a period in which it lags: when `f+1` replicas sent it
//! authenticated PRE-PREPAREs, PREPAREs or COMMITs of this view above its log window, at
//! least one correct replica is past a checkpoint this backup lacks, so the primary is
//! ordering and this backup executes nothing only because it is behind (a replica restarted
//! without its data, before its state transfer; `crates/byzfs/tests/faults.rs`
//! `replica_restarted_without_its_data_rejoins_by_state_transfer`). Its vote would put it
//! alone in a higher view, out of step with the others until they change view too. A faulty
//! primary alone cannot silence the watch this way: `f+1` senders include a correct one.

use super::timers::TimerKind;
use super::Replica;
use crate::action::Event;
use crate::ids::{ClientId, ReplicaId, Seq, View};
use crate::service::Service;
use crate::time::Time;
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
    /// Replicas that sent this view's agreement messages above this replica's window during
    /// the period (it lags once they are `f+1`).
    ahead: BTreeSet<ReplicaId>,
    /// Best period of the current view, and of each of the views before it (newest last).
    best: u64,
    history: VecDeque<u64>,
    /// Periods of this view judged so far (each raises the bar).
    judged: u32,
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
        if m.view != self.view {
            m.history.push_back(m.best);
            while m.history.len() > self.config.monitor.views.saturating_sub(1) as usize {
                m.history.pop_front();
            }
            m.best = 0;
        }
        m.view = self.view;
        m.view_start = self.now;
        m.period_start = self.now;
        m.units = 0;
        m.busy = false;
        m.ahead.clear();
        m.judged = 0;
        if self.config.monitor.enabled {
            self.timers
                .set(TimerKind::Monitor, self.now + self.config.monitor.period);
        }
    }

    /// Work executed in this view (`units` of [`UNIT_BYTES`]).
    pub(super) fn monitor_executed(&mut self, units: u64) {
        self.monitor.units = self.monitor.units.saturating_add(units);
    }

    /// The driver reported a long step.
    pub(super) fn monitor_busy(&mut self) {
        self.monitor.busy = true;
    }

    /// Replica `j` sent an authenticated agreement message for `(view, seq)` that this
    /// replica dropped as out of its window.
    pub(super) fn monitor_out_of_window(&mut self, j: ReplicaId, view: View, seq: Seq) {
        if view == self.view && seq > self.last_stable + self.config.log_window {
            self.monitor.ahead.insert(j);
        }
    }

    /// Client `c` has a request pending here: it waits from now unless it already did.
    pub(super) fn monitor_waiting(&mut self, c: ClientId) {
        let now = self.now;
        self.monitor.waiting_since.entry(c).or_insert(now);
    }

    /// A request of `c` ran (its wait starts again if more are pending) or none is pending.
    pub(super) fn monitor_served(&mut self, c: ClientId) {
        if self.pending.contains_key(&c) {
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
        m.best = m.best.max(m.units);
        m.period_start = now;
        m.units = 0;
        m.busy = false;
        m.ahead.clear();
        if c.enabled {
            self.timers.set(TimerKind::Monitor, now + c.period);
        }
        if let Some(v) = verdict {
            self.stats.monitor_complaints += 1;
            tracing::info!(
                replica = self.me,
                view = self.view,
                units = v.units,
                required = v.required,
                "the primary's throughput fell short under load; voting it out"
            );
            self.event(Event::PrimaryTooSlow {
                view: self.view,
                units: v.units,
                required: v.required,
            });
            self.start_view_change(self.view + 1);
        }
    }

    /// Whether the period just ended condemns the primary.
    fn judge(&mut self, c: &crate::MonitorConfig, now: Time, period_us: u64) -> Option<Verdict> {
        let m = &self.monitor;
        let judged = c.enabled
            && self.has_new_view
            && self.fetch.is_none()
            && self.primary() != self.me
            && m.view == self.view
            && !m.busy
            && m.ahead.len() <= self.f()
            // A period cut short (a view installed mid-way) says little.
            && period_us >= c.period.as_micros() as u64;
        let in_grace = now.as_micros() < m.view_start.as_micros() + c.grace.as_micros() as u64;
        if !judged || (in_grace && c.floor_per_s == 0) {
            return None;
        }
        let patience = c.patience.as_micros() as u64;
        let waited: Vec<ClientId> = self
            .monitor
            .waiting_since
            .iter()
            .filter(|(_, t)| t.as_micros() + patience <= now.as_micros())
            .map(|(&cl, _)| cl)
            .collect();
        // Only a correct client's wait is demand: a request whose deferred signature fails
        // (checked now, at most once per client and period) blacklists its client and leaves
        // `pending` — a faulty client cannot frame the primary by waiting (§5.3).
        let mut demand = false;
        for cl in waited {
            let Some(&(_, d)) = self.pending.get(&cl) else {
                self.monitor.waiting_since.remove(&cl);
                continue;
            };
            if self.signature_checked(d) && self.pending.contains_key(&cl) {
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
