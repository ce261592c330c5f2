//! The reference model: a single-threaded, obviously-correct key-value store. The results
//! checker replays the agreed history through it and compares every accepted result
//! (docs/PROTOCOL.md §6.6 INV-REPLY).
//!
//! Semantics (the agreed `KvService` API):
//! * `Put` → `Ok`; `Get` → `Value(current)`; `Delete` → `Ok`;
//! * `Append` → `Value(Some(new full value))` (absent counts as empty);
//! * `Cas{expect, new}` → `Ok` if current == expect (then set), else `CasFailed(current)`;
//! * `Time` → `Time(t)`.
//!
//! Non-determinism (the service's agreed time, docs/PROTOCOL.md §1.13): a batch's `nondet` is an
//! 8-byte little-endian timestamp in µs. Executing an operation first folds it into the agreed
//! clock — a timestamp above the stored one replaces it; an equal, lower or malformed one
//! leaves it — and `Time` returns the clock. So time never goes backwards and every operation
//! of a batch sees the same value. An undecodable operation still folds the clock, then
//! returns `Invalid`.

use super::{KvOp, KvResult};
use std::collections::BTreeMap;

/// The reference key-value state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvModel {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    last_ts: u64,
}

/// The key an operation touches (`None` for `Time`).
pub fn op_key(op: &KvOp) -> Option<&[u8]> {
    match op {
        KvOp::Put { key, .. }
        | KvOp::Get { key }
        | KvOp::Delete { key }
        | KvOp::Append { key, .. }
        | KvOp::Cas { key, .. } => Some(key),
        KvOp::Time => None,
    }
}

/// Decodes a batch's non-deterministic input (8-byte LE µs), 0 if malformed.
pub fn nondet_ts(nondet: &[u8]) -> u64 {
    match <[u8; 8]>::try_from(nondet) {
        Ok(b) => u64::from_le_bytes(b),
        Err(_) => 0,
    }
}

impl KvModel {
    /// An empty store at time 0.
    pub fn new() -> KvModel {
        KvModel::default()
    }

    /// The current value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<&Vec<u8>> {
        self.map.get(key)
    }

    /// Every key and value, in key order.
    pub fn entries(&self) -> impl Iterator<Item = (&Vec<u8>, &Vec<u8>)> {
        self.map.iter()
    }

    /// A store with these entries and clock.
    pub fn from_parts(entries: Vec<(Vec<u8>, Vec<u8>)>, last_ts: u64) -> KvModel {
        KvModel {
            map: entries.into_iter().collect(),
            last_ts,
        }
    }

    /// The agreed clock.
    pub fn last_ts(&self) -> u64 {
        self.last_ts
    }

    /// Folds a batch's `nondet` into the agreed clock for one executed operation and returns
    /// the time the operation sees.
    pub fn tick(&mut self, nondet: &[u8]) -> u64 {
        if nondet.len() == 8 {
            self.last_ts = self.last_ts.max(nondet_ts(nondet));
        }
        self.last_ts
    }

    /// Executes an ordered operation with its batch's `nondet`.
    pub fn execute(&mut self, op: &KvOp, nondet: &[u8]) -> KvResult {
        let t = self.tick(nondet);
        match op {
            KvOp::Put { key, value } => {
                self.map.insert(key.clone(), value.clone());
                KvResult::Ok
            }
            KvOp::Get { key } => KvResult::Value(self.map.get(key).cloned()),
            KvOp::Delete { key } => {
                self.map.remove(key);
                KvResult::Ok
            }
            KvOp::Append { key, value } => {
                let v = self.map.entry(key.clone()).or_default();
                v.extend_from_slice(value);
                KvResult::Value(Some(v.clone()))
            }
            KvOp::Cas { key, expect, new } => {
                let cur = self.map.get(key);
                if cur == expect.as_ref() {
                    self.map.insert(key.clone(), new.clone());
                    KvResult::Ok
                } else {
                    KvResult::CasFailed(cur.cloned())
                }
            }
            KvOp::Time => KvResult::Time(t),
        }
    }

    /// Executes encoded operation bytes (malformed → `Invalid`, clock still advances).
    pub fn execute_bytes(&mut self, op: &[u8], nondet: &[u8]) -> KvResult {
        match KvOp::decode(op) {
            Some(op) => self.execute(&op, nondet),
            None => {
                self.tick(nondet);
                KvResult::Invalid
            }
        }
    }

    /// Answers a read-only operation without changing anything.
    pub fn read_only(&self, op: &KvOp) -> KvResult {
        match op {
            KvOp::Get { key } => KvResult::Value(self.map.get(key).cloned()),
            _ => KvResult::Invalid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn semantics() {
        let mut m = KvModel::new();
        let nd = 100u64.to_le_bytes();
        assert_eq!(
            m.execute(&KvOp::Get { key: k("a") }, &nd),
            KvResult::Value(None)
        );
        assert_eq!(
            m.execute(
                &KvOp::Append {
                    key: k("a"),
                    value: k("x")
                },
                &nd
            ),
            KvResult::Value(Some(k("x")))
        );
        assert_eq!(
            m.execute(
                &KvOp::Append {
                    key: k("a"),
                    value: k("y")
                },
                &nd
            ),
            KvResult::Value(Some(k("xy")))
        );
        assert_eq!(
            m.execute(
                &KvOp::Cas {
                    key: k("a"),
                    expect: None,
                    new: k("z")
                },
                &nd
            ),
            KvResult::CasFailed(Some(k("xy")))
        );
        assert_eq!(
            m.execute(
                &KvOp::Cas {
                    key: k("a"),
                    expect: Some(k("xy")),
                    new: k("z")
                },
                &nd
            ),
            KvResult::Ok
        );
        assert_eq!(m.get(b"a"), Some(&k("z")));
        assert_eq!(
            m.execute(
                &KvOp::Put {
                    key: k("b"),
                    value: k("1")
                },
                &nd
            ),
            KvResult::Ok
        );
        assert_eq!(m.execute(&KvOp::Delete { key: k("b") }, &nd), KvResult::Ok);
        assert_eq!(
            m.read_only(&KvOp::Get { key: k("b") }),
            KvResult::Value(None)
        );
        assert_eq!(
            m.execute(
                &KvOp::Cas {
                    key: k("b"),
                    expect: None,
                    new: k("2")
                },
                &nd
            ),
            KvResult::Ok
        );
        assert_eq!(m.execute_bytes(b"\xff\xff", &nd), KvResult::Invalid);
    }

    #[test]
    fn clock_never_goes_back() {
        let mut m = KvModel::new();
        let at = |t: u64| t.to_le_bytes();
        assert_eq!(m.execute(&KvOp::Time, &at(50)), KvResult::Time(50));
        assert_eq!(
            m.execute(&KvOp::Time, &at(50)),
            KvResult::Time(50),
            "same batch"
        );
        assert_eq!(m.execute(&KvOp::Time, &at(10)), KvResult::Time(50));
        assert_eq!(m.execute(&KvOp::Time, &[1, 2]), KvResult::Time(50));
        assert_eq!(m.execute(&KvOp::Time, &at(90)), KvResult::Time(90));
    }

    #[test]
    fn agrees_with_the_real_service() {
        use byzfs_bft::Service;
        let mut real = crate::kv::KvService::new();
        let mut model = KvModel::new();
        let ops = [
            KvOp::Append {
                key: k("a"),
                value: k("1"),
            },
            KvOp::Time,
            KvOp::Cas {
                key: k("a"),
                expect: Some(k("1")),
                new: k("2"),
            },
            KvOp::Cas {
                key: k("a"),
                expect: None,
                new: k("3"),
            },
            KvOp::Get { key: k("a") },
            KvOp::Put {
                key: k("b"),
                value: k("x"),
            },
            KvOp::Delete { key: k("b") },
            KvOp::Get { key: k("b") },
            KvOp::Time,
        ];
        for (i, op) in ops.iter().enumerate() {
            let nd = (10 + (i as u64 / 2) * 7).to_le_bytes();
            let got = KvResult::decode(&real.execute(1, &op.encode(), &nd));
            assert_eq!(got, Some(model.execute(op, &nd)), "op {i} {op:?}");
        }
        let junk = [0xff, 0xff, 0xff];
        let nd = 99u64.to_le_bytes();
        let got = KvResult::decode(&real.execute(1, &junk, &nd));
        assert_eq!(got, Some(model.execute_bytes(&junk, &nd)));
        assert_eq!(real.last_agreed_time(), model.last_ts());
    }
}
