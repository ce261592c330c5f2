//! The correct clients' workload (docs/PROTOCOL.md §6.3 W-KV): operations over a small key set,
//! Append-heavy (every Append returns the key's full value, so histories are easy to check),
//! some `Get`s (read-only), `Put`s (some large enough for separate request transmission),
//! `Cas` against the last value the client saw, a few `Delete`s and `Time`s. A client keeps
//! one to four requests in flight (`ClientNode::window`).

use crate::kv::{op_key, KvOp, KvResult};
use crate::rng::{chance, Ppm, SimRng};
use byzfs_bft::ClientId;
use rand::Rng;
use std::collections::BTreeMap;

/// Workload knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadParams {
    /// Number of keys (`k0`, `k1`, ...).
    pub keys: usize,
    /// Think time between operations is uniform in `0..=think_max_us`...
    pub think_max_us: u64,
    /// ...except that, while pacing, a pause uniform in `0..=pause_max_us` follows an
    /// operation with probability `pause_ppm` (spreads a capped number of operations over the
    /// safety phase, in bursts, so late faults still meet traffic).
    pub pause_max_us: u64,
    /// Probability of a pause while pacing.
    pub pause_ppm: Ppm,
    /// Probability that a `Put` carries a 100–`big_put_max` byte value.
    pub big_put_ppm: Ppm,
    /// Largest big `Put` value, bytes (300 but in `thin-links`).
    pub big_put_max: usize,
    /// Reads go read-only even while the client's ordered requests are outstanding
    /// (`byzfs_bft::client::Access::ReadApart`, as a byzfs mount's reads in lanes): family
    /// `read-apart`.
    pub read_apart: bool,
}

/// One correct client's operation generator.
#[derive(Debug)]
pub struct Workload {
    params: WorkloadParams,
    client: ClientId,
    rng: SimRng,
    counter: u64,
    seen: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl Workload {
    /// A generator for `client` drawing from `rng` (its own stream).
    pub fn new(params: WorkloadParams, client: ClientId, rng: SimRng) -> Workload {
        Workload {
            params,
            client,
            rng,
            counter: 0,
            seen: BTreeMap::new(),
        }
    }

    /// Think time before the next operation, µs; with `pacing`, sometimes a longer pause.
    pub fn think_us(&mut self, pacing: bool) -> u64 {
        if pacing && chance(&mut self.rng, self.params.pause_ppm) {
            return self.rng.gen_range(0..=self.params.pause_max_us);
        }
        self.rng.gen_range(0..=self.params.think_max_us)
    }

    /// The next operation and whether to send it read-only.
    pub fn next_op(&mut self) -> (KvOp, bool) {
        self.counter += 1;
        let key = format!("k{}", self.rng.gen_range(0..self.params.keys.max(1))).into_bytes();
        let tag = format!("{}.{}", self.client, self.counter);
        let roll = self.rng.gen_range(0..1000);
        let op = match roll {
            0..450 => KvOp::Append {
                key,
                value: format!("{tag};").into_bytes(),
            },
            450..650 => return (KvOp::Get { key }, true),
            650..800 => {
                let mut value = format!("p{tag}").into_bytes();
                if chance(&mut self.rng, self.params.big_put_ppm) {
                    let len = self.rng.gen_range(100..=self.params.big_put_max.max(100));
                    value.resize(len, b'.');
                }
                KvOp::Put { key, value }
            }
            800..920 => {
                let expect = self.seen.get(&key).cloned().flatten();
                KvOp::Cas {
                    key,
                    expect,
                    new: format!("x{tag}").into_bytes(),
                }
            }
            920..960 => KvOp::Delete { key },
            _ => KvOp::Time,
        };
        (op, false)
    }

    /// Learns from a completed operation (for `Cas` expectations).
    pub fn observe(&mut self, op: &KvOp, result: &KvResult) {
        let Some(key) = op_key(op) else { return };
        let v = match (op, result) {
            (KvOp::Get { .. } | KvOp::Append { .. }, KvResult::Value(v)) => v.clone(),
            (_, KvResult::CasFailed(v)) => v.clone(),
            (KvOp::Put { value, .. }, KvResult::Ok) => Some(value.clone()),
            (KvOp::Cas { new, .. }, KvResult::Ok) => Some(new.clone()),
            (KvOp::Delete { .. }, KvResult::Ok) => None,
            _ => return,
        };
        self.seen.insert(key.to_vec(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{substream, Purpose};

    #[test]
    fn mix_is_append_heavy_and_reproducible() {
        let p = WorkloadParams {
            keys: 3,
            think_max_us: 10,
            pause_max_us: 0,
            pause_ppm: 0,
            big_put_ppm: 500_000,
            big_put_max: 300,
            read_apart: false,
        };
        let mut a = Workload::new(p.clone(), 1, substream(9, Purpose::Workload, 1));
        let mut b = Workload::new(p, 1, substream(9, Purpose::Workload, 1));
        let ops: Vec<_> = (0..2000).map(|_| a.next_op()).collect();
        let again: Vec<_> = (0..2000).map(|_| b.next_op()).collect();
        assert_eq!(ops, again);
        let appends = ops
            .iter()
            .filter(|(o, _)| matches!(o, KvOp::Append { .. }))
            .count();
        let gets = ops
            .iter()
            .filter(|(o, ro)| matches!(o, KvOp::Get { .. }) && *ro)
            .count();
        assert!(appends > 800 && gets > 300, "{appends} {gets}");
        assert!(ops
            .iter()
            .any(|(o, _)| matches!(o, KvOp::Put { value, .. } if value.len() >= 100)));
        assert!(ops
            .iter()
            .all(|(o, ro)| *ro == matches!(o, KvOp::Get { .. })));
    }

    #[test]
    fn cas_uses_the_last_seen_value() {
        let p = WorkloadParams {
            keys: 1,
            think_max_us: 0,
            pause_max_us: 0,
            pause_ppm: 0,
            big_put_ppm: 0,
            big_put_max: 300,
            read_apart: false,
        };
        let mut w = Workload::new(p, 1, substream(1, Purpose::Workload, 0));
        w.observe(
            &KvOp::Append {
                key: b"k0".to_vec(),
                value: vec![],
            },
            &KvResult::Value(Some(b"v".to_vec())),
        );
        let cas = (0..200)
            .map(|_| w.next_op().0)
            .find(|o| matches!(o, KvOp::Cas { .. }));
        assert!(matches!(cas, Some(KvOp::Cas { expect: Some(e), .. }) if e == b"v"));
    }
}
