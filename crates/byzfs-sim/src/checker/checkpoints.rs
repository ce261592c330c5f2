//! INV-CKPT (docs/PROTOCOL.md §6.6): checkpoints with the same sequence number have the same digest
//! at every correct replica — stable ones, ones taken (once the replica has committed through
//! them, so a checkpoint of tentative state later rolled back does not count), and the
//! checkpoint a state transfer installed.

use super::Sink;
use byzfs_bft::{Digest, Event, Seq, Time};
use std::collections::BTreeMap;

/// Checker name.
pub const NAME: &str = "checkpoints";

/// The checkpoint checker.
#[derive(Clone, Debug, Default)]
pub struct Checkpoints {
    agreed: BTreeMap<Seq, (Digest, usize, &'static str)>,
    pending: BTreeMap<usize, BTreeMap<Seq, Digest>>,
}

impl Checkpoints {
    fn compare(
        &mut self,
        sink: &mut Sink,
        now: Time,
        inst: usize,
        seq: Seq,
        digest: Digest,
        how: &'static str,
    ) {
        match self.agreed.get(&seq) {
            None => {
                self.agreed.insert(seq, (digest, inst, how));
            }
            Some(&(d, first, first_how)) if d != digest => sink.report(
                NAME,
                now,
                format!(
                    "checkpoint {seq}: r{inst} {how} {digest:?} but r{first} {first_how} {d:?}"
                ),
            ),
            Some(_) => {}
        }
    }

    /// An event of correct instance `inst`.
    pub fn on_event(&mut self, sink: &mut Sink, now: Time, inst: usize, ev: &Event) {
        match *ev {
            Event::CheckpointTaken { seq, digest } => {
                self.pending.entry(inst).or_default().insert(seq, digest);
            }
            Event::CheckpointStable { seq, digest, .. } => {
                self.compare(sink, now, inst, seq, digest, "holds stable")
            }
            Event::StateTransferred { seq, digest } => {
                self.compare(sink, now, inst, seq, digest, "transferred")
            }
            Event::RolledBack { to } => {
                if let Some(p) = self.pending.get_mut(&inst) {
                    p.retain(|s, _| *s <= to);
                }
            }
            _ => {}
        }
    }

    /// After a step of `inst`: checkpoints it has now committed through become final.
    pub fn on_step_end(&mut self, sink: &mut Sink, now: Time, inst: usize, last_executed: Seq) {
        let Some(p) = self.pending.get_mut(&inst) else {
            return;
        };
        if p.first_key_value().is_none_or(|(s, _)| *s > last_executed) {
            return;
        }
        let rest = p.split_off(&(last_executed + 1));
        let done = std::mem::replace(p, rest);
        for (seq, digest) in done {
            self.compare(sink, now, inst, seq, digest, "took");
        }
    }

    /// `inst` restarted.
    pub fn on_restart(&mut self, inst: usize) {
        self.pending.remove(&inst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_bft::StableVia;

    fn d(b: u8) -> Digest {
        Digest([b; 32])
    }

    #[test]
    fn stable_digests_must_match() {
        let mut c = Checkpoints::default();
        let mut s = Sink::new(1, "t");
        c.on_event(
            &mut s,
            Time(0),
            0,
            &Event::CheckpointStable {
                seq: 4,
                digest: d(1),
                via: StableVia::Quorum,
            },
        );
        c.on_event(
            &mut s,
            Time(0),
            1,
            &Event::CheckpointStable {
                seq: 4,
                digest: d(1),
                via: StableVia::Quorum,
            },
        );
        assert!(!s.any());
        c.on_event(
            &mut s,
            Time(0),
            2,
            &Event::CheckpointStable {
                seq: 4,
                digest: d(2),
                via: StableVia::Quorum,
            },
        );
        assert_eq!(s.violations().len(), 1);
    }

    #[test]
    fn taken_checkpoints_count_once_committed_unless_rolled_back() {
        let mut c = Checkpoints::default();
        let mut s = Sink::new(1, "t");
        c.on_event(
            &mut s,
            Time(0),
            0,
            &Event::CheckpointStable {
                seq: 8,
                digest: d(1),
                via: StableVia::Quorum,
            },
        );
        // Replica 1 checkpoints tentative state at 8, rolls back to 4: ignored.
        c.on_event(
            &mut s,
            Time(0),
            1,
            &Event::CheckpointTaken {
                seq: 8,
                digest: d(9),
            },
        );
        c.on_step_end(&mut s, Time(0), 1, 4);
        c.on_event(&mut s, Time(0), 1, &Event::RolledBack { to: 4 });
        c.on_step_end(&mut s, Time(0), 1, 8);
        assert!(!s.any());
        // Replica 2 takes a wrong checkpoint and commits through it: caught.
        c.on_event(
            &mut s,
            Time(0),
            2,
            &Event::CheckpointTaken {
                seq: 8,
                digest: d(9),
            },
        );
        c.on_step_end(&mut s, Time(0), 2, 7);
        assert!(!s.any());
        c.on_step_end(&mut s, Time(0), 2, 8);
        assert_eq!(s.violations().len(), 1);
    }

    #[test]
    fn transferred_state_must_match() {
        let mut c = Checkpoints::default();
        let mut s = Sink::new(1, "t");
        c.on_event(
            &mut s,
            Time(0),
            0,
            &Event::CheckpointStable {
                seq: 16,
                digest: d(1),
                via: StableVia::Quorum,
            },
        );
        c.on_event(
            &mut s,
            Time(0),
            3,
            &Event::StateTransferred {
                seq: 16,
                digest: d(2),
            },
        );
        assert_eq!(s.violations().len(), 1);
    }
}
