//! INV-VIEW (docs/PROTOCOL.md §6.6): a correct replica's view never decreases — not even across a
//! restart with its durable state (it restarts in at least the highest view it persisted) — and
//! it installs at most one NEW-VIEW per view, in increasing view order. A restart without state
//! (amnesia) resets everything.

use super::Sink;
use byzfs_bft::{Event, PersistRecord, Time, View};
use std::collections::BTreeMap;

/// Checker name.
pub const NAME: &str = "view";

/// The view-monotonicity checker.
#[derive(Clone, Debug, Default)]
pub struct ViewMonotonic {
    last: BTreeMap<usize, View>,
    persisted: BTreeMap<usize, View>,
    installed: BTreeMap<usize, View>,
}

impl ViewMonotonic {
    /// `inst` persisted `rec`.
    pub fn on_persist(&mut self, inst: usize, rec: PersistRecord) {
        if let PersistRecord::View(v) = rec {
            let p = self.persisted.entry(inst).or_default();
            *p = (*p).max(v);
        }
    }

    /// An event of correct `inst`.
    pub fn on_event(&mut self, sink: &mut Sink, now: Time, inst: usize, ev: &Event) {
        if let Event::ViewInstalled { view, .. } = *ev {
            if let Some(&prev) = self.installed.get(&inst) {
                if view <= prev {
                    sink.report(
                        NAME,
                        now,
                        format!("r{inst} installed NEW-VIEW {view} after NEW-VIEW {prev}"),
                    );
                }
            }
            self.installed.insert(inst, view);
        }
    }

    /// After a step of correct `inst`.
    pub fn on_step_end(&mut self, sink: &mut Sink, now: Time, inst: usize, view: View) {
        let last = self.last.entry(inst).or_default();
        if view < *last {
            sink.report(
                NAME,
                now,
                format!("r{inst} went from view {} back to view {view}", *last),
            );
        }
        *last = view;
    }

    /// `inst` restarted.
    pub fn on_restart(&mut self, inst: usize, with_state: bool) {
        self.installed.remove(&inst);
        if with_state {
            let floor = self.persisted.get(&inst).copied().unwrap_or(0);
            self.last.insert(inst, floor);
        } else {
            self.last.remove(&inst);
            self.persisted.remove(&inst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_going_back_is_caught() {
        let mut v = ViewMonotonic::default();
        let mut s = Sink::new(1, "t");
        v.on_step_end(&mut s, Time(0), 0, 0);
        v.on_step_end(&mut s, Time(0), 0, 2);
        v.on_step_end(&mut s, Time(0), 0, 2);
        assert!(!s.any());
        v.on_step_end(&mut s, Time(0), 0, 1);
        assert_eq!(s.violations().len(), 1);
    }

    #[test]
    fn restart_with_state_must_keep_the_persisted_view() {
        let mut v = ViewMonotonic::default();
        let mut s = Sink::new(1, "t");
        v.on_persist(0, PersistRecord::View(3));
        v.on_step_end(&mut s, Time(0), 0, 3);
        v.on_restart(0, true);
        v.on_step_end(&mut s, Time(0), 0, 0);
        assert_eq!(s.violations().len(), 1, "forgot its persisted view");
        v.on_restart(0, false);
        v.on_step_end(&mut s, Time(0), 0, 0);
        assert_eq!(s.violations().len(), 1, "amnesia resets");
    }

    #[test]
    fn installing_a_view_twice_is_caught() {
        let mut v = ViewMonotonic::default();
        let mut s = Sink::new(1, "t");
        v.on_event(
            &mut s,
            Time(0),
            0,
            &Event::ViewInstalled { view: 1, min: 0 },
        );
        v.on_event(
            &mut s,
            Time(0),
            0,
            &Event::ViewInstalled { view: 2, min: 0 },
        );
        assert!(!s.any());
        v.on_event(
            &mut s,
            Time(0),
            0,
            &Event::ViewInstalled { view: 2, min: 0 },
        );
        assert_eq!(s.violations().len(), 1);
    }
}
