//! INV-VALID (docs/PROTOCOL.md §6.6): every request in the agreed history was really issued by a
//! client (the oracle records every request a client, correct or faulty, sent), with the
//! content that client sent (the digest its frame carried: the oracle records every request
//! frame a client put on the network, so a request a faulty primary altered, or made up in
//! a client's name, is caught once it runs), and each `(client, rid)` executes at most once
//! along the agreed history (§1.6 exactly-once).

use super::history::{Content, Pos};
use super::Sink;
use byzfs_bft::{ClientId, Digest, RequestId, Seq, Time};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// Checker name.
pub const NAME: &str = "exactly-once";

/// The exactly-once / validity checker.
#[derive(Clone, Debug, Default)]
pub struct ExactlyOnce {
    issued: BTreeSet<(ClientId, RequestId)>,
    /// The digest of every request frame a client put on the network.
    sent: HashSet<(ClientId, Digest)>,
    seen: BTreeMap<(ClientId, RequestId), Pos>,
}

impl ExactlyOnce {
    /// A client sent `(client, rid)`.
    pub fn on_issue(&mut self, client: ClientId, rid: RequestId) {
        self.issued.insert((client, rid));
    }

    /// Client `client` put a request frame whose body digest is `digest` on the network.
    pub fn on_sent(&mut self, client: ClientId, digest: Digest) {
        self.sent.insert((client, digest));
    }

    /// The content of agreed batch `seq` became known.
    pub fn on_agreed(&mut self, sink: &mut Sink, now: Time, seq: Seq, content: &Content) {
        for (idx, &(c, rid)) in content.requests.iter().enumerate() {
            let pos = Pos {
                seq,
                idx: idx as u32,
            };
            if let Some(d) = content.digests.get(idx) {
                if !self.sent.contains(&(c, *d)) {
                    sink.report(
                        NAME,
                        now,
                        format!(
                            "request c{c} rid {rid} executed at {pos} is not what its client sent \
                             (digest {d:?} on no frame of c{c})"
                        ),
                    );
                }
            }
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

    fn batch(requests: &[(ClientId, RequestId, u8)]) -> Content {
        Content {
            nondet: vec![],
            requests: requests.iter().map(|&(c, r, _)| (c, r)).collect(),
            digests: requests.iter().map(|&(_, _, d)| Digest([d; 32])).collect(),
        }
    }

    #[test]
    fn duplicate_forged_and_altered_requests_are_caught() {
        let mut e = ExactlyOnce::default();
        let mut s = Sink::new(1, "t");
        e.on_issue(7, 1);
        e.on_issue(7, 2);
        e.on_sent(7, Digest([1; 32]));
        e.on_sent(7, Digest([2; 32]));
        e.on_agreed(&mut s, Time(0), 1, &batch(&[(7, 1, 1), (7, 2, 2)]));
        assert!(!s.any());
        // Run again; made up in a client's name; the client's rid with other content.
        e.on_agreed(&mut s, Time(0), 2, &batch(&[(7, 1, 1)]));
        e.on_agreed(&mut s, Time(0), 3, &batch(&[(8, 1, 1)]));
        e.on_issue(7, 3);
        e.on_agreed(&mut s, Time(0), 4, &batch(&[(7, 3, 9)]));
        let found: Vec<String> = s.violations().iter().map(|v| v.message.clone()).collect();
        assert_eq!(
            found,
            vec![
                "request c7 rid 1 executed twice: at 1.0 and at 2.0".to_string(),
                "request c8 rid 1 executed at 3.0 is not what its client sent (digest \
                 010101010101 on no frame of c8)"
                    .to_string(),
                "request c8 rid 1 executed at 3.0 was never issued by a client".to_string(),
                "request c7 rid 3 executed at 4.0 is not what its client sent (digest \
                 090909090909 on no frame of c7)"
                    .to_string(),
            ]
        );
    }
}
