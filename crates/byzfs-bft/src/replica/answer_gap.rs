//! Doubling gaps between repeated answers to the same ask (ARCHITECTURE.md Deviation 33 (7)).
//!
//! STATUS repeats every `status_interval` what a replica lacks, and an answer on a slow link
//! takes seconds to cross. Answering each repetition put a new copy on the link every
//! 150 ms: at 1 Mb/s (Andrew-Tcl at `slow-1`, BENCHMARKS.md) a backup asking for 64 batch
//! bodies was sent 4,352 BATCH-DATA frames (1.26 MB) in 10 s, and a replica behind a view
//! 29 NEW-VIEWs (487 KB) — more than the link carries, so every answer, and the NEW-VIEW
//! behind them, came late. An answer to the same peer's same ask is therefore sent again
//! only after one STATUS interval, then two, four, … up to [`GAP_DOUBLINGS_MAX`] doublings;
//! an ask left unrepeated for [`IDLE_INTERVALS`] intervals starts afresh.

use crate::crypto::Digest;
use crate::ids::{ReplicaId, Seq, View};
use crate::time::Time;
use core::time::Duration;
use std::collections::BTreeMap;

/// At most `2^5 = 32` STATUS intervals (4.8 s at 150 ms) between two answers.
pub(crate) const GAP_DOUBLINGS_MAX: u32 = 5;

/// STATUS intervals after an answer's due time without a new ask before it is forgotten.
const IDLE_INTERVALS: u32 = 64;

/// What a peer asked for (or, for our own rebroadcasts, what we keep sending).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ask {
    /// A request body (`Status::missing_requests`).
    Body(Digest),
    /// A batch body (`Status::missing_batches`).
    Batch(Digest),
    /// The NEW-VIEW of this view, to a peer behind it.
    NewView(View),
    /// Our VIEW-CHANGE for this view (to a peer behind it, or rebroadcast to all).
    ViewChange(View),
    /// The slots after what a peer that made no progress executed.
    Slots,
    /// Our CHECKPOINT of this sequence number, to a peer whose stable one is older.
    Checkpoint(Seq),
    /// The proof of our stable checkpoint at this sequence number, to a peer behind it.
    StableCheckpoint(Seq),
}

/// When each `(peer, ask)` may be answered next, and how many answers it had.
#[derive(Clone, Debug, Default)]
pub(crate) struct AnswerGaps {
    due: BTreeMap<(ReplicaId, Ask), (Time, u32)>,
}

impl AnswerGaps {
    /// Whether `peer`'s `ask` may be answered at `now`; if so the answer is counted and
    /// the next is due after `interval × 2^answers` (at most `2^GAP_DOUBLINGS_MAX`).
    pub(crate) fn take(
        &mut self,
        peer: ReplicaId,
        ask: Ask,
        now: Time,
        interval: Duration,
    ) -> bool {
        let (due, answered) = self.due.get(&(peer, ask)).copied().unwrap_or((now, 0));
        if now < due {
            return false;
        }
        let gap = interval * (1u32 << answered.min(GAP_DOUBLINGS_MAX));
        self.due
            .insert((peer, ask), (now + gap, answered.saturating_add(1)));
        true
    }

    /// Leaves `peer`'s `ask` unanswered until `until` (what it asks for is on its way to it:
    /// `relay_fan_out.rs`); a later due time is kept.
    pub(crate) fn defer(&mut self, peer: ReplicaId, ask: Ask, until: Time) {
        let e = self.due.entry((peer, ask)).or_insert((until, 0));
        e.0 = e.0.max(until);
    }

    /// Forgets `peer`'s `ask`: its next one is answered at once (e.g. a peer that made
    /// progress is no longer stuck).
    pub(crate) fn reset(&mut self, peer: ReplicaId, ask: Ask) {
        self.due.remove(&(peer, ask));
    }

    /// Forgets asks not repeated for [`IDLE_INTERVALS`] intervals after they were due
    /// (bounds the map; called once per STATUS interval).
    pub(crate) fn forget_idle(&mut self, now: Time, interval: Duration) {
        let idle = interval * IDLE_INTERVALS;
        self.due.retain(|_, (due, _)| *due + idle > now);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.due.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Asked every 10 ms for a second: answered at 0, 10, 30, 70, 150, 310, 630 and 950 ms
    /// (gaps 10, 20, 40, 80, 160, then 320 at most); another peer's same ask, another ask
    /// of the same peer and a reset one are answered at once.
    #[test]
    fn repeated_asks_are_answered_after_doubling_gaps() {
        let mut g = AnswerGaps::default();
        let ask = Ask::Batch(Digest([7; 32]));
        let answered: Vec<u64> = (0..100u64)
            .filter(|t| g.take(1, ask, Time::ZERO + MS * (*t as u32 * 10), 10 * MS))
            .map(|t| t * 10)
            .collect();
        assert_eq!(answered, [0, 10, 30, 70, 150, 310, 630, 950]);
        let at = Time::ZERO + MS * 995;
        assert_eq!(
            [
                g.take(1, ask, at, 10 * MS),
                g.take(2, ask, at, 10 * MS),
                g.take(1, Ask::NewView(3), at, 10 * MS),
            ],
            [false, true, true]
        );
        g.reset(1, ask);
        assert!(g.take(1, ask, at, 10 * MS));
    }

    /// An ask left alone for 64 intervals after it was due is forgotten, a recent one kept.
    #[test]
    fn idle_asks_are_forgotten() {
        let mut g = AnswerGaps::default();
        assert!(g.take(1, Ask::Slots, Time::ZERO, 10 * MS));
        assert!(g.take(2, Ask::Slots, Time::ZERO + MS * 600, 10 * MS));
        // Peer 1's was due at 10 ms: kept until 10 + 640 ms.
        g.forget_idle(Time::ZERO + MS * 649, 10 * MS);
        assert_eq!(g.len(), 2);
        g.forget_idle(Time::ZERO + MS * 650, 10 * MS);
        assert_eq!(g.len(), 1);
        assert!(g.take(1, Ask::Slots, Time::ZERO + MS * 650, 10 * MS));
    }
}
