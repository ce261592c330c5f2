//! INV-VALID (docs/PROTOCOL.md §6.6): every request in the agreed history was really issued by a
//! client (the oracle records every request a client, correct or faulty, sent), and each
//! `(client, rid)` executes at most once along the agreed history (§1.6 exactly-once).

use super::history::{Content, Pos};
use super::Sink;
use byzfs_bft::{ClientId, RequestId, Seq, Time};
use std::collections::{BTreeMap, BTreeSet};

/// Checker name.
pub const NAME: &str = "exactly-once";

/// The exactly-once / validity checker.
#[derive(Clone, Debug, Default)]
pub struct ExactlyOnce {
    issued: BTreeSet<(ClientId, RequestId)>,
    seen: BTreeMap<(ClientId, RequestId), Pos>,
}

impl ExactlyOnce {
    /// A client sent `(client, rid)`.
    pub fn on_issue(&mut self, client: ClientId, rid: RequestId) {
        self.issued.insert((client, rid));
    }

    /// The content of agreed batch `seq` became known.
    pub fn on_agreed(&mut self, sink: &mut Sink, now: Time, seq: Seq, content: &Content) {
        for (idx, &(c, rid)) in content.requests.iter().enumerate() {
            let pos = Pos {
                seq,
                idx: idx as u32,
            };
            if !self.issued.contains(&(c, rid)) {
                sink.report(
                    NAME,
                    now,
                    format!(
                        "request c{c} rid {rid} executed at {pos} was never issued by a client"
                    ),
                );
            }
            if let Some(prev) = self.seen.insert((c, rid), pos) {
                if prev != pos {
                    sink.report(
                        NAME,
                        now,
                        format!("request c{c} rid {rid} executed twice: at {prev} and at {pos}"),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_and_forged_requests_are_caught() {
        let mut e = ExactlyOnce::default();
        let mut s = Sink::new(1, "t");
        e.on_issue(7, 1);
        e.on_issue(7, 2);
        e.on_agreed(
            &mut s,
            Time(0),
            1,
            &Content {
                nondet: vec![],
                requests: vec![(7, 1), (7, 2)],
            },
        );
        assert!(!s.any());
        e.on_agreed(
            &mut s,
            Time(0),
            2,
            &Content {
                nondet: vec![],
                requests: vec![(7, 1)],
            },
        );
        assert_eq!(s.violations().len(), 1);
        e.on_agreed(
            &mut s,
            Time(0),
            3,
            &Content {
                nondet: vec![],
                requests: vec![(8, 1)],
            },
        );
        assert_eq!(s.violations().len(), 2);
    }
}
