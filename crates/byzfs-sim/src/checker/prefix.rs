//! INV-PREFIX (docs/PROTOCOL.md §6.6): after executing through `n` (committed, nothing tentative
//! beyond, not mid state transfer) every correct replica has the same state digest as any other
//! correct replica at `n`. Sampled after a step in which `last_executed` moved to a multiple
//! of [`STRIDE`] (computing a state digest is O(partitions); checkpoints cover multiples of K).

use super::{Observe, Sink};
use byzfs_bft::{Digest, Seq, Time};
use std::collections::BTreeMap;

/// Checker name.
pub const NAME: &str = "prefix";

/// Sample every `STRIDE`-th sequence number.
pub const STRIDE: u64 = 4;

/// The state-digest checker.
#[derive(Clone, Debug, Default)]
pub struct Prefix {
    seen: BTreeMap<Seq, (Digest, usize)>,
    last: BTreeMap<usize, Seq>,
}

impl Prefix {
    /// After a step of correct instance `inst`.
    pub fn on_step_end(&mut self, sink: &mut Sink, now: Time, inst: usize, r: &dyn Observe) {
        let le = r.last_executed();
        if !le.is_multiple_of(STRIDE)
            || self.last.get(&inst) == Some(&le)
            || r.last_tentative() != le
            || r.is_fetching()
        {
            return;
        }
        self.last.insert(inst, le);
        let d = r.state_digest();
        match self.seen.get(&le) {
            None => {
                self.seen.insert(le, (d, inst));
            }
            Some(&(other, first)) if other != d => sink.report(
                NAME,
                now,
                format!("state after seq {le}: r{inst} has {d:?} but r{first} had {other:?}"),
            ),
            Some(_) => {}
        }
    }

    /// `inst` restarted.
    pub fn on_restart(&mut self, inst: usize) {
        self.last.remove(&inst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Stub;

    #[test]
    fn diverging_state_is_caught_tentative_state_is_not_compared() {
        let mut p = Prefix::default();
        let mut s = Sink::new(1, "t");
        let at = |le, lt, b| Stub {
            last_executed: le,
            last_tentative: lt,
            digest: Digest([b; 32]),
            ..Stub::default()
        };
        p.on_step_end(&mut s, Time(0), 0, &at(8, 8, 1));
        p.on_step_end(&mut s, Time(0), 1, &at(8, 9, 7)); // tentative beyond: skipped
        p.on_step_end(&mut s, Time(0), 1, &at(8, 8, 1));
        p.on_step_end(&mut s, Time(0), 2, &at(9, 9, 5)); // not sampled
        assert!(!s.any());
        p.on_step_end(&mut s, Time(0), 2, &at(8, 8, 2));
        assert_eq!(s.violations().len(), 1);
    }
}
