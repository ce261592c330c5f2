//! The read-only floor (docs/PROTOCOL.md §1.8): once a correct replica has sent COMMIT for
//! `seq`, a client may accept that batch's results (`f+1` correct COMMITs stand behind
//! them), so every read-only request that reaches the replica afterwards must be answered
//! from a state that includes `seq` — the committed state through `committed`, or with the
//! per-object floor the state after `committed + 1` as well. A replica answering from
//! before its own COMMITs lets a client read a value older than one it already saw
//! written. Judged from outside: the COMMITs a replica sends, the read-only requests it
//! receives, and its `ReadOnlyExecuted` events. A restart forgets both (the replica's
//! floor is volatile; a restored replica answers reads once it has the view again).

use super::Sink;
use byzfs_bft::{ClientId, RequestId, Seq, Time};
use std::collections::BTreeMap;

/// Checker name.
pub const NAME: &str = "read-floor";

/// The read-only floor checker.
#[derive(Clone, Debug, Default)]
pub struct ReadFloor {
    /// Per correct instance, the highest sequence number it sent a COMMIT for.
    committed_to: BTreeMap<usize, Seq>,
    /// Per instance and read, the floor when the read first reached it.
    reads: BTreeMap<(usize, ClientId, RequestId), Seq>,
}

impl ReadFloor {
    /// Correct `inst` sent a COMMIT for `seq`.
    pub fn on_commit_sent(&mut self, inst: usize, seq: Seq) {
        let c = self.committed_to.entry(inst).or_default();
        *c = (*c).max(seq);
    }

    /// A read-only request `(client, rid)` reaches correct `inst`.
    pub fn on_read(&mut self, inst: usize, client: ClientId, rid: RequestId) {
        let floor = self.committed_to.get(&inst).copied().unwrap_or(0);
        self.reads.entry((inst, client, rid)).or_insert(floor);
    }

    /// Correct `inst` answered `(client, rid)` read-only from the state through
    /// `committed` (and `committed + 1` if `on_tentative`).
    pub fn on_answer(
        &mut self,
        sink: &mut Sink,
        now: Time,
        inst: usize,
        (client, rid): (ClientId, RequestId),
        committed: Seq,
        on_tentative: bool,
    ) {
        let Some(&floor) = self.reads.get(&(inst, client, rid)) else {
            return;
        };
        let through = committed + u64::from(on_tentative);
        if through < floor {
            sink.report(
                NAME,
                now,
                format!(
                    "r{inst} answered c{client}'s read {rid} from the state through seq \
                     {through}, but had sent COMMIT for seq {floor} before the read reached it"
                ),
            );
        }
    }

    /// `inst` restarted.
    pub fn on_restart(&mut self, inst: usize) {
        self.committed_to.remove(&inst);
        self.reads = std::mem::take(&mut self.reads)
            .into_iter()
            .filter(|((i, _, _), _)| *i != inst)
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_after_a_commit_must_see_it() {
        let mut r = ReadFloor::default();
        let mut s = Sink::new(1, "t");
        r.on_read(0, 7, 1);
        r.on_commit_sent(0, 5);
        r.on_read(0, 7, 2);
        // Read 1 arrived before the COMMIT: any committed state will do.
        r.on_answer(&mut s, Time(0), 0, (7, 1), 3, false);
        // Read 2: the state through 4 plus a tentative 5 is enough.
        r.on_answer(&mut s, Time(0), 0, (7, 2), 4, true);
        assert!(!s.any());
        r.on_answer(&mut s, Time(0), 0, (7, 2), 4, false);
        assert_eq!(
            s.violations()[0].message,
            "r0 answered c7's read 2 from the state through seq 4, but had sent COMMIT for \
             seq 5 before the read reached it"
        );
    }
}
