//! A checkpoint a correct replica calls stable on its own count was taken by `2f+1`
//! replicas (docs/PROTOCOL.md §2.2): it holds matching CHECKPOINTs from `2f` others that really
//! sent them, plus its own. Its own is counted without looking: a replica restored from its
//! disk holds checkpoints whose `CheckpointTaken` a crash cut off (clock-power-cuts 2919
//! with 7 replicas), and whether its own digest matches is the `checkpoints` checker's
//! business. Stability reached through a NEW-VIEW or a state transfer rests on other
//! evidence (`f+1` claims) and is judged by `checkpoints` too.

use super::Sink;
use byzfs_bft::{Digest, Event, ReplicaId, Seq, StableVia, Time};
use std::collections::{BTreeMap, BTreeSet};

/// Checker name.
pub const NAME: &str = "stable-quorum";

/// The stable-checkpoint quorum checker.
#[derive(Clone, Debug)]
pub struct StableQuorum {
    quorum: usize,
    /// Per correct instance: the other replicas known to have sent it a CHECKPOINT for
    /// `(seq, digest)`.
    votes: BTreeMap<usize, BTreeMap<(Seq, Digest), BTreeSet<ReplicaId>>>,
}

impl StableQuorum {
    /// A checker for clusters tolerating `f` faults.
    pub fn new(f: usize) -> StableQuorum {
        StableQuorum {
            quorum: 2 * f + 1,
            votes: BTreeMap::new(),
        }
    }

    /// Correct `inst` received a genuine CHECKPOINT of replica `from`.
    pub fn on_vote(&mut self, inst: usize, from: ReplicaId, seq: Seq, digest: Digest) {
        if from as usize == inst {
            return;
        }
        self.votes
            .entry(inst)
            .or_default()
            .entry((seq, digest))
            .or_default()
            .insert(from);
    }

    /// An event of correct `inst`.
    pub fn on_event(&mut self, sink: &mut Sink, now: Time, inst: usize, ev: &Event) {
        let Event::CheckpointStable { seq, digest, via } = *ev else {
            return;
        };
        let votes = self.votes.entry(inst).or_default();
        let count = 1 + votes.get(&(seq, digest)).map_or(0, BTreeSet::len);
        if via == StableVia::Quorum && count < self.quorum {
            sink.report(
                NAME,
                now,
                format!(
                    "r{inst} holds checkpoint {seq} stable on {count} replicas' \
                     CHECKPOINTs, fewer than {}",
                    self.quorum
                ),
            );
        }
        *votes = votes.split_off(&(seq + 1, Digest::ZERO));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_needs_two_f_plus_one_senders_on_the_quorum_path_only() {
        let mut q = StableQuorum::new(1);
        let mut s = Sink::new(1, "t");
        let d = Digest([7; 32]);
        let stable = |seq, via| Event::CheckpointStable {
            seq,
            digest: d,
            via,
        };
        q.on_event(
            &mut s,
            Time(0),
            0,
            &Event::CheckpointTaken { seq: 4, digest: d },
        );
        q.on_vote(0, 1, 4, d);
        q.on_vote(0, 2, 4, Digest([8; 32]));
        q.on_event(&mut s, Time(0), 0, &stable(4, StableVia::NewView));
        assert!(!s.any());
        q.on_event(
            &mut s,
            Time(0),
            0,
            &Event::CheckpointTaken { seq: 8, digest: d },
        );
        q.on_vote(0, 1, 8, d);
        q.on_event(&mut s, Time(0), 0, &stable(8, StableVia::Quorum));
        assert_eq!(
            s.violations()[0].message,
            "r0 holds checkpoint 8 stable on 2 replicas' CHECKPOINTs, fewer than 3"
        );
        q.on_event(
            &mut s,
            Time(0),
            0,
            &Event::CheckpointTaken { seq: 12, digest: d },
        );
        q.on_vote(0, 1, 12, d);
        q.on_vote(0, 3, 12, d);
        q.on_event(&mut s, Time(0), 0, &stable(12, StableVia::Quorum));
        assert_eq!(s.violations().len(), 1);
    }
}
