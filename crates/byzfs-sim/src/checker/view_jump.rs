//! The `f+1` join rule, from the outside (docs/PROTOCOL.md §3.2): a correct replica moves to a
//! view more than one beyond its own only after `f+1` others are there, so at least one
//! correct replica reached that view first — by its own timer, or because its primary left.
//! One faulty replica's VIEW-CHANGEs for ever higher views (the `vc-spam` family) then move
//! no one: the views a correct replica enters are bounded by the view changes correct
//! replicas start themselves. (A valid NEW-VIEW for a higher view holds `2f+1` VIEW-CHANGEs
//! of that view: the same holds.)

use super::Sink;
use byzfs_bft::{Event, Time, View};
use std::collections::BTreeMap;

/// Checker name.
pub const NAME: &str = "view-jump";

/// The view-jump checker.
#[derive(Clone, Debug, Default)]
pub struct ViewJump {
    /// Each correct instance's current view (as of its last step or view change).
    current: BTreeMap<usize, View>,
    /// The highest view each correct instance has been in.
    reached: BTreeMap<usize, View>,
    /// The highest view each instance persisted (a crash may cut its step short after the
    /// record and before the event: it restarts in that view).
    persisted: BTreeMap<usize, View>,
}

impl ViewJump {
    fn enter(&mut self, inst: usize, view: View) {
        self.current.insert(inst, view);
        let r = self.reached.entry(inst).or_default();
        *r = (*r).max(view);
    }

    /// An event of correct `inst`.
    pub fn on_event(&mut self, sink: &mut Sink, now: Time, inst: usize, ev: &Event) {
        let Event::ViewChangeStarted { view } = *ev else {
            return;
        };
        let from = self.current.get(&inst).copied().unwrap_or(0);
        let vouched = self.reached.iter().any(|(&j, &r)| j != inst && r >= view);
        if view > from + 1 && !vouched {
            sink.report(
                NAME,
                now,
                format!(
                    "r{inst} jumped from view {from} to view {view}, which no other correct \
                     replica had reached"
                ),
            );
        }
        self.enter(inst, view);
    }

    /// After a step of correct `inst`.
    pub fn on_step_end(&mut self, inst: usize, view: View) {
        self.enter(inst, view);
    }

    /// `inst` persisted that it moved to `view`.
    pub fn on_persist(&mut self, inst: usize, view: View) {
        let p = self.persisted.entry(inst).or_default();
        *p = (*p).max(view);
    }

    /// `inst` restarted: with its disk, in the view it persisted.
    pub fn on_restart(&mut self, inst: usize, with_state: bool) {
        match self.persisted.get(&inst) {
            Some(&v) if with_state => self.enter(inst, v),
            _ => {
                self.current.remove(&inst);
                self.persisted.remove(&inst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_needs_a_correct_replica_there_first() {
        let mut v = ViewJump::default();
        let mut s = Sink::new(1, "t");
        let vc = |view| Event::ViewChangeStarted { view };
        v.on_step_end(0, 0);
        v.on_step_end(1, 0);
        // One beyond its own: its timer, allowed.
        v.on_event(&mut s, Time(0), 1, &vc(1));
        // Replica 0 joins view 1 and then jumps to 3, where no one is: caught.
        v.on_event(&mut s, Time(0), 0, &vc(1));
        assert!(!s.any());
        v.on_event(&mut s, Time(0), 0, &vc(3));
        assert_eq!(
            s.violations()[0].message,
            "r0 jumped from view 1 to view 3, which no other correct replica had reached"
        );
        // Replica 1 now jumps to 3, where replica 0 is: allowed.
        v.on_event(&mut s, Time(0), 1, &vc(3));
        assert_eq!(s.violations().len(), 1);
        // Replica 2 persists view 4 and crashes before its event; restarted, it gives the
        // view up for 5: one step from where it was.
        v.on_persist(2, 4);
        v.on_restart(2, true);
        v.on_event(&mut s, Time(0), 2, &vc(5));
        assert_eq!(s.violations().len(), 1);
    }
}
