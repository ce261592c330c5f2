//! The reference model: a single-threaded, obviously-correct key-value store. The results
//! checker replays the agreed history through it and compares every accepted result
//! (PROTOCOL.md §6.6 INV-REPLY).
//!
//! Semantics (the agreed `KvService` API):
//! * `Put` → `Ok`; `Get` → `Value(current)`; `Delete` → `Ok`;
//! * `Append` → `Value(Some(new full value))` (absent counts as empty);
//! * `Cas{expect, new}` → `Ok` if current == expect (then set), else `CasFailed(current)`;
//! * `Time` → `Time(t)`.
//!
//! Non-determinism: a batch's `nondet` is an 8-byte little-endian timestamp in µs. Every
//! executed operation advances the agreed clock to `t = max(ts, last_ts + 1)`, so `Time` results
//! are strictly increasing along the history. A malformed `nondet` counts as `ts = 0`.

use super::op::{KvOp, KvResult};
use std::collections::BTreeMap;

/// The reference key-value state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvModel {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    last_ts: u64,
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

    /// Advances the agreed clock for one executed operation and returns the time it saw.
    pub fn tick(&mut self, nondet: &[u8]) -> u64 {
        let t = nondet_ts(nondet).max(self.last_ts.saturating_add(1));
        self.last_ts = t;
        t
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
        assert_eq!(m.execute_bytes(b"\xff", &nd), KvResult::Invalid);
    }

    #[test]
    fn clock_is_strictly_monotonic() {
        let mut m = KvModel::new();
        assert_eq!(
            m.execute(&KvOp::Time, &50u64.to_le_bytes()),
            KvResult::Time(50)
        );
        // A primary's clock behind the agreed one cannot move time backwards.
        assert_eq!(
            m.execute(&KvOp::Time, &10u64.to_le_bytes()),
            KvResult::Time(51)
        );
        assert_eq!(m.execute(&KvOp::Time, &[]), KvResult::Time(52));
        assert_eq!(
            m.execute(&KvOp::Time, &90u64.to_le_bytes()),
            KvResult::Time(90)
        );
    }
}
