//! INV-RO-COMMITTED (docs/PROTOCOL.md §1.8): a correct replica answers a read-only request with
//! the result the request has on its *committed* state — the agreed history up to its
//! `last_executed` — even while a batch after it has executed tentatively (the per-object
//! floor lets such a read run only if it touched nothing that batch wrote).
//!
//! This is the rule the read-only optimisation's safety rests on (Castro's thesis §5.1.3):
//! an answer from an uncommitted write can reach a client on `2f+1` matching replies and
//! then vanish in a view change (ARCHITECTURE.md Deviations 6a has the counterexample). Checking the
//! rule at each correct replica catches a broken floor at once, where the end-to-end
//! linearizability check needs a rare schedule (a lying replica, a prepare at one correct
//! replica only, and a view change without it) to see it.
//!
//! Fed by [`Event::ReadOnlyExecuted`](byzfs_bft::Event::ReadOnlyExecuted); a read is checked
//! once the agreed history is known through its `committed` point (at the end of the run at
//! the latest; reads whose prefix is still unknown then are counted, not judged).

use super::results::Results;
use super::{show, Sink};
use crate::kv::KvResult;
use byzfs_bft::{ClientId, Digest, RequestId, Seq, Time};

/// Checker name.
pub const NAME: &str = "read-only-committed";

/// A read-only answer a correct replica sent.
#[derive(Clone, Debug)]
struct Answer {
    inst: usize,
    client: ClientId,
    rid: RequestId,
    committed: Seq,
    on_tentative: bool,
    result_digest: Digest,
    at: Time,
}

/// The checker.
#[derive(Clone, Debug, Default)]
pub struct ReadOnlyCommitted {
    pending: Vec<Answer>,
    /// Answers checked against the committed prefix.
    pub checked: u64,
    /// Of those, answered while a batch had executed only tentatively.
    pub checked_on_tentative: u64,
    /// Answers not judged: not a correct client's `Get`, or the prefix stayed unknown.
    pub unchecked: u64,
}

impl ReadOnlyCommitted {
    /// A correct replica instance `inst` answered read-only `(client, rid)` at `at`.
    #[allow(clippy::too_many_arguments)]
    pub fn on_answer(
        &mut self,
        inst: usize,
        at: Time,
        client: ClientId,
        rid: RequestId,
        committed: Seq,
        on_tentative: bool,
        result_digest: Digest,
    ) {
        self.pending.push(Answer {
            inst,
            client,
            rid,
            committed,
            on_tentative,
            result_digest,
            at,
        });
    }

    /// Judges every pending answer whose committed prefix the model has applied.
    pub fn check(&mut self, sink: &mut Sink, results: &Results) {
        let pending = std::mem::take(&mut self.pending);
        for a in pending {
            let Some(key) = results.correct_get_key(a.client, a.rid) else {
                self.unchecked += 1;
                continue;
            };
            let Some(value) = results.value_after(key, a.committed) else {
                self.pending.push(a);
                continue;
            };
            self.checked += 1;
            if a.on_tentative {
                self.checked_on_tentative += 1;
            }
            let expect = KvResult::Value(value.clone()).encode();
            if Digest::of(&expect) != a.result_digest {
                sink.report(
                    NAME,
                    a.at,
                    format!(
                        "replica {} answered read-only Get({}) for c{} rid {} with a result other \
                         than {} (its value after the committed prefix 1..={}){}",
                        a.inst,
                        show(key),
                        a.client,
                        a.rid,
                        value.as_deref().map(show).unwrap_or_else(|| "∅".into()),
                        a.committed,
                        if a.on_tentative {
                            ", while a later batch had executed tentatively"
                        } else {
                            ""
                        }
                    ),
                );
            }
        }
    }

    /// End of run: what is still pending stays unjudged.
    pub fn finish(&mut self, sink: &mut Sink, results: &Results) {
        self.check(sink, results);
        self.unchecked += self.pending.len() as u64;
        self.pending.clear();
    }
}
