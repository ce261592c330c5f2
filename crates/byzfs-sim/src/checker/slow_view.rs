//! A slow primary's view ends (`replica/monitor.rs`, Aardvark, docs/PROTOCOL.md §5.3 measure 4):
//! in the `slow-primary` family, whose faulty primary holds every PRE-PREPARE just under the
//! view-change timeout, no view it leads may last longer than `bound` while correct clients
//! keep asking. The view-change timer alone never ends such a view (every held batch
//! executes before it expires); the backups' throughput watch must. A liveness-class
//! property: it shows the watch works, it is not safety.
//!
//! "The view" is the one at least `f+1` correct replicas have reached (once they left it,
//! the rest follow by the `f+1` join rule); "asking" means some correct client has an
//! operation outstanding, continuously — a pause resets the clock, since an idle cluster
//! owes no throughput.

use super::Sink;
use byzfs_bft::{ReplicaId, Time, View};

/// Checker name.
pub const NAME: &str = "slow-view";

/// What the run promises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    /// The slow primary.
    pub primary: ReplicaId,
    /// Replicas `n`.
    pub n: usize,
    /// Correct replicas needed to leave a view, `f+1`.
    pub weak: usize,
    /// Longest such view, µs of continuous demand.
    pub bound_us: u64,
}

/// The checker; it reports only with a [`Watch`].
#[derive(Clone, Debug, Default)]
pub struct SlowView {
    /// Set when the run promises it.
    pub watch: Option<Watch>,
    /// Each correct replica instance's current view.
    views: Vec<View>,
    /// The view `f+1` correct replicas reached, and since when.
    current: Option<(View, Time)>,
    /// Correct clients' operations outstanding, and since when there were some without pause.
    outstanding: u64,
    asking_since: Option<Time>,
    reported: bool,
}

impl SlowView {
    /// A correct client issued an operation.
    pub fn on_issue(&mut self, now: Time) {
        self.outstanding += 1;
        self.asking_since.get_or_insert(now);
    }

    /// A correct client's operation completed.
    pub fn on_complete(&mut self, now: Time) {
        self.outstanding = self.outstanding.saturating_sub(1);
        if self.outstanding == 0 {
            self.asking_since = None;
        }
        self.check(now);
    }

    /// After a step of correct instance `inst`, in view `view`.
    pub fn on_step_end(&mut self, sink: &mut Sink, now: Time, inst: usize, view: View) {
        let Some(w) = self.watch else { return };
        if self.views.len() <= inst {
            self.views.resize(inst + 1, 0);
        }
        self.views[inst] = view;
        let mut sorted = self.views.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let reached = sorted.get(w.weak - 1).copied().unwrap_or(0);
        if self.current.is_none_or(|(v, _)| v != reached) {
            self.current = Some((reached, now));
        }
        if self.check(now) && !self.reported {
            self.reported = true;
            let (v, since) = self.current.unwrap_or((0, now));
            sink.report(
                NAME,
                now,
                format!(
                    "view {v}, led by the slow primary r{}, has lasted {} ms (since {} ms) while correct clients kept asking; bound {} ms",
                    w.primary,
                    now.since(since).as_millis(),
                    since.as_micros() / 1000,
                    w.bound_us / 1000
                ),
            );
        }
    }

    /// Whether the current view is the slow primary's and has outlasted the bound.
    fn check(&self, now: Time) -> bool {
        let (Some(w), Some((v, since)), Some(asking)) =
            (self.watch, self.current, self.asking_since)
        else {
            return false;
        };
        let leader = (v % w.n as u64) as ReplicaId;
        let from = since.max(asking);
        leader == w.primary && now.as_micros() > from.as_micros() + w.bound_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> SlowView {
        SlowView {
            watch: Some(Watch {
                primary: 0,
                n: 4,
                weak: 2,
                bound_us: 1_000,
            }),
            ..SlowView::default()
        }
    }

    #[test]
    fn reports_a_slow_view_that_outlasts_the_bound_under_demand() {
        let mut sink = Sink::new(1, "t");
        let mut c = watch();
        c.on_issue(Time(0));
        for inst in 0..3 {
            c.on_step_end(&mut sink, Time(10), inst, 0);
        }
        c.on_step_end(&mut sink, Time(900), 1, 0);
        assert!(!sink.any(), "within the bound");
        c.on_step_end(&mut sink, Time(1_100), 1, 0);
        assert_eq!(sink.violations().len(), 1);
        assert_eq!(sink.violations()[0].checker, NAME);
    }

    #[test]
    fn a_pause_or_a_left_view_resets_the_clock() {
        let mut sink = Sink::new(1, "t");
        let mut c = watch();
        c.on_issue(Time(0));
        for inst in 0..3 {
            c.on_step_end(&mut sink, Time(10), inst, 0);
        }
        c.on_complete(Time(500));
        c.on_issue(Time(800));
        c.on_step_end(&mut sink, Time(1_500), 1, 0);
        assert!(!sink.any(), "asking again only since 800");
        // Two correct replicas leave view 0: view 1's primary is correct.
        c.on_step_end(&mut sink, Time(1_600), 0, 1);
        c.on_step_end(&mut sink, Time(1_700), 1, 1);
        c.on_step_end(&mut sink, Time(5_000), 2, 0);
        assert!(!sink.any());
        // Back to the slow primary at view 4: its clock starts at 6000.
        for inst in 0..3 {
            c.on_step_end(&mut sink, Time(6_000), inst, 4);
        }
        c.on_step_end(&mut sink, Time(6_900), 0, 4);
        assert!(!sink.any());
        c.on_step_end(&mut sink, Time(7_100), 0, 4);
        assert_eq!(sink.violations().len(), 1);
    }
}
