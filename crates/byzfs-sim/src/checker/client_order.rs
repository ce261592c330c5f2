//! INV-CLIENT-ORDER (docs/PROTOCOL.md §1.6, "several requests in flight"): a correct client's
//! writes run in the order it invoked them. A write may be invoked while earlier ones are in
//! flight; it must still take its place in the agreed history after each of them. (Reads
//! may go read-only and are ordered with nothing; writes always go ordered.)

use super::history::{Content, Pos};
use super::Sink;
use byzfs_bft::{ClientId, RequestId, Seq, Time};
use std::collections::BTreeMap;

/// Checker name.
pub const NAME: &str = "client-order";

/// One client's writes in invocation order and how many of the first are placed.
#[derive(Clone, Debug, Default)]
struct Writes {
    order: Vec<RequestId>,
    index: BTreeMap<RequestId, usize>,
    placed: Vec<bool>,
    prefix: usize,
}

/// The client-order checker.
#[derive(Clone, Debug, Default)]
pub struct ClientOrder {
    clients: BTreeMap<ClientId, Writes>,
}

impl ClientOrder {
    /// A correct client invoked write `(client, rid)`.
    pub fn on_write(&mut self, client: ClientId, rid: RequestId) {
        let w = self.clients.entry(client).or_default();
        if w.index.contains_key(&rid) {
            return;
        }
        w.index.insert(rid, w.order.len());
        w.order.push(rid);
        w.placed.push(false);
    }

    /// The content of agreed batch `seq` became known.
    pub fn on_agreed(&mut self, sink: &mut Sink, now: Time, seq: Seq, content: &Content) {
        for (idx, &(c, rid)) in content.requests.iter().enumerate() {
            let Some(w) = self.clients.get_mut(&c) else {
                continue;
            };
            let Some(&i) = w.index.get(&rid) else {
                continue;
            };
            if w.placed[i] {
                continue; // exactly-once reports a second execution
            }
            if i > w.prefix {
                let pos = Pos {
                    seq,
                    idx: idx as u32,
                };
                sink.report(
                    NAME,
                    now,
                    format!(
                        "c{c} write rid {rid} ran at {pos} before its earlier write rid {}",
                        w.order[w.prefix]
                    ),
                );
            }
            w.placed[i] = true;
            while w.placed.get(w.prefix) == Some(&true) {
                w.prefix += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(requests: Vec<(ClientId, RequestId)>) -> Content {
        Content {
            nondet: vec![],
            requests,
            digests: Vec::new(),
        }
    }

    #[test]
    fn a_write_placed_before_an_earlier_one_is_caught() {
        let mut o = ClientOrder::default();
        let mut s = Sink::new(1, "t");
        for rid in [1, 2, 4] {
            o.on_write(7, rid);
        }
        // rid 3 was a read; another client's requests do not matter.
        o.on_agreed(
            &mut s,
            Time(0),
            1,
            &batch(vec![(7, 1), (8, 9), (7, 3), (7, 2)]),
        );
        assert!(!s.any());
        o.on_write(7, 5);
        o.on_agreed(&mut s, Time(0), 2, &batch(vec![(7, 5), (7, 4)]));
        assert_eq!(
            s.violations()
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>(),
            vec!["client-order: c7 write rid 5 ran at 2.0 before its earlier write rid 4 (at t=0 µs)"]
        );
    }
}
