//! No view change where none is due: in a family without faults that promises it (the
//! plan's `stable_view`, e.g. `slow-execution`), a correct replica that starts a view change
//! blamed a correct primary. A liveness-class property, not safety (a view change is always
//! safe); it catches time spent executing counted against the primary
//! (`Replica::busy_for`).

use super::Sink;
use byzfs_bft::{Event, Time};

/// Checker name.
pub const NAME: &str = "stable-view";

/// The no-view-change checker; it reports only when the run expects a stable view.
#[derive(Clone, Debug, Default)]
pub struct StableView {
    /// Whether the run promises that no correct replica starts a view change.
    pub expected: bool,
}

impl StableView {
    /// An event of correct `inst`.
    pub fn on_event(&mut self, sink: &mut Sink, now: Time, inst: usize, ev: &Event) {
        if let (true, Event::ViewChangeStarted { view }) = (self.expected, ev) {
            sink.report(
                NAME,
                now,
                format!("r{inst} started a view change to view {view} in a run without faults"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_a_view_change_only_when_none_is_expected() {
        let ev = Event::ViewChangeStarted { view: 1 };
        let mut sink = Sink::new(1, "t");
        StableView { expected: false }.on_event(&mut sink, Time(5), 0, &ev);
        assert!(!sink.any());
        let mut c = StableView { expected: true };
        c.on_event(
            &mut sink,
            Time(5),
            0,
            &Event::Dropped(byzfs_bft::DropReason::Stale),
        );
        assert!(!sink.any());
        c.on_event(&mut sink, Time(5), 2, &ev);
        assert_eq!(sink.violations().len(), 1);
        assert_eq!(sink.violations()[0].checker, NAME);
    }
}
