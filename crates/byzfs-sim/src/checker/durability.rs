//! INV-DURABLE (docs/PROTOCOL.md §6.6): no acknowledged write is lost. At the end of a run whose
//! liveness phase converged, every write a correct client accepted is in the agreed history
//! (the agreement checker already pins each position for ever), and every correct replica that
//! is up has executed through it (or holds a stable checkpoint covering it).

use super::results::Outcomes;
use super::Sink;
use byzfs_bft::{Seq, Time};

/// Checker name.
pub const NAME: &str = "durability";

/// A replica's progress at the end of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaProgress {
    /// Instance.
    pub inst: usize,
    /// Last executed.
    pub last_executed: Seq,
    /// Last stable checkpoint.
    pub last_stable: Seq,
}

/// Runs the end-of-run durability check: every acknowledged write is agreed, and each listed
/// replica (the correct ones that are up) executed through `through` (or holds a stable
/// checkpoint covering it) — the highest sequence number of a write acknowledged before the
/// catch-up stage of the liveness phase.
pub fn check(
    sink: &mut Sink,
    now: Time,
    results: &dyn Outcomes,
    replicas: &[ReplicaProgress],
    through: Seq,
) {
    for a in results.acked().iter().filter(|a| !a.is_get) {
        if results.position(a.client, a.rid).is_none() {
            sink.report(
                NAME,
                now,
                format!(
                    "c{} rid {} acknowledged at t={} µs is not in the agreed history (contiguous through seq {})",
                    a.client,
                    a.rid,
                    a.complete.as_micros(),
                    results.next_seq() - 1
                ),
            );
        }
    }
    let max_seq = through;
    for r in replicas {
        if r.last_executed < max_seq && r.last_stable < max_seq {
            sink.report(
                NAME,
                now,
                format!(
                    "r{} is up but executed only through seq {} (stable {}); acknowledged writes reach seq {max_seq}",
                    r.inst, r.last_executed, r.last_stable
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::history::{AgreedHistory, Content, Entry};
    use crate::checker::results::Results;
    use crate::kv::{KvOp, KvResult};
    use byzfs_bft::Digest;

    #[test]
    fn lost_and_unreplicated_writes_are_caught() {
        let mut r = Results::new(true);
        let mut s = Sink::new(1, "t");
        let put = KvOp::Put {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
        }
        .encode();
        r.issue(Time(0), 1, 1, &put, true);
        r.issue(Time(0), 1, 2, &put, true);
        let mut h = AgreedHistory::default();
        h.entries.insert(
            3,
            Entry {
                digest: Digest::ZERO,
                content: Some(Content {
                    nondet: vec![],
                    requests: vec![(1, 1)],
                    digests: Vec::new(),
                }),
                first: 0,
                at: Time(0),
            },
        );
        for seq in 1..3 {
            h.entries.insert(
                seq,
                Entry {
                    digest: Digest::ZERO,
                    content: Some(Content {
                        nondet: vec![],
                        requests: vec![],
                        digests: Vec::new(),
                    }),
                    first: 0,
                    at: Time(0),
                },
            );
        }
        r.advance(&mut s, Time(1), &h);
        r.accept(&mut s, Time(2), 1, 1, &KvResult::Ok.encode());
        assert_eq!(r.acked_write_max_seq(), 3);
        assert_eq!(r.unplaced_writes(), 0);
        let up = [
            ReplicaProgress {
                inst: 0,
                last_executed: 3,
                last_stable: 0,
            },
            ReplicaProgress {
                inst: 1,
                last_executed: 2,
                last_stable: 4,
            },
        ];
        check(&mut s, Time(3), &r, &up, 3);
        assert!(!s.any(), "{:?}", s.violations());
        check(
            &mut s,
            Time(3),
            &r,
            &[ReplicaProgress {
                inst: 2,
                last_executed: 2,
                last_stable: 0,
            }],
            3,
        );
        assert_eq!(s.violations().len(), 1);
        // Acknowledged but never ordered.
        r.accept(&mut s, Time(4), 1, 2, &KvResult::Ok.encode());
        check(&mut s, Time(5), &r, &[], 3);
        assert_eq!(r.unplaced_writes(), 1);
        assert_eq!(s.violations().len(), 2);
    }
}
