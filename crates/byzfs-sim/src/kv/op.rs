//! Stand-in for `byzfs_bft::services::kv::{KvOp, KvResult}` (same variants, own encoding).
//! Delete once the real service lands (see [`crate::kv`]).

/// A key-value operation. `Get` is the only read-only one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KvOp {
    /// Set `key` to `value`.
    Put {
        /// Key.
        key: Vec<u8>,
        /// Value.
        value: Vec<u8>,
    },
    /// Read `key`.
    Get {
        /// Key.
        key: Vec<u8>,
    },
    /// Remove `key`.
    Delete {
        /// Key.
        key: Vec<u8>,
    },
    /// Append `value` to `key` (absent = empty); returns the new full value.
    Append {
        /// Key.
        key: Vec<u8>,
        /// Suffix.
        value: Vec<u8>,
    },
    /// Set `key` to `new` if its value is `expect` (`None` = absent).
    Cas {
        /// Key.
        key: Vec<u8>,
        /// Expected current value.
        expect: Option<Vec<u8>>,
        /// New value.
        new: Vec<u8>,
    },
    /// Read the agreed clock.
    Time,
}

/// The result of a [`KvOp`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KvResult {
    /// Done (Put, Delete, successful Cas).
    Ok,
    /// A value (Get; Append returns the new full value).
    Value(Option<Vec<u8>>),
    /// Cas failed; the current value.
    CasFailed(Option<Vec<u8>>),
    /// The agreed time, in µs.
    Time(u64),
    /// The operation did not decode.
    Invalid,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn put_opt(out: &mut Vec<u8>, b: &Option<Vec<u8>>) {
    match b {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            put_bytes(out, v);
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let len = self.0.get(..4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let v = self.0.get(4..4usize.checked_add(len)?)?.to_vec();
        self.0 = &self.0[4 + len..];
        Some(v)
    }
    fn opt(&mut self) -> Option<Option<Vec<u8>>> {
        match self.u8()? {
            0 => Some(None),
            1 => Some(Some(self.bytes()?)),
            _ => None,
        }
    }
    fn u64(&mut self) -> Option<u64> {
        let b = self.0.get(..8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        self.0 = &self.0[8..];
        Some(u64::from_le_bytes(a))
    }
    fn done<T>(self, v: T) -> Option<T> {
        self.0.is_empty().then_some(v)
    }
}

impl KvOp {
    /// The key the operation touches (`None` for `Time`).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            KvOp::Put { key, .. }
            | KvOp::Get { key }
            | KvOp::Delete { key }
            | KvOp::Append { key, .. }
            | KvOp::Cas { key, .. } => Some(key),
            KvOp::Time => None,
        }
    }

    /// Serialises the operation.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            KvOp::Put { key, value } => {
                out.push(1);
                put_bytes(&mut out, key);
                put_bytes(&mut out, value);
            }
            KvOp::Get { key } => {
                out.push(2);
                put_bytes(&mut out, key);
            }
            KvOp::Delete { key } => {
                out.push(3);
                put_bytes(&mut out, key);
            }
            KvOp::Append { key, value } => {
                out.push(4);
                put_bytes(&mut out, key);
                put_bytes(&mut out, value);
            }
            KvOp::Cas { key, expect, new } => {
                out.push(5);
                put_bytes(&mut out, key);
                put_opt(&mut out, expect);
                put_bytes(&mut out, new);
            }
            KvOp::Time => out.push(6),
        }
        out
    }

    /// Parses an operation; `None` if malformed.
    pub fn decode(b: &[u8]) -> Option<KvOp> {
        let mut r = Reader(b);
        let op = match r.u8()? {
            1 => KvOp::Put {
                key: r.bytes()?,
                value: r.bytes()?,
            },
            2 => KvOp::Get { key: r.bytes()? },
            3 => KvOp::Delete { key: r.bytes()? },
            4 => KvOp::Append {
                key: r.bytes()?,
                value: r.bytes()?,
            },
            5 => KvOp::Cas {
                key: r.bytes()?,
                expect: r.opt()?,
                new: r.bytes()?,
            },
            6 => KvOp::Time,
            _ => return None,
        };
        r.done(op)
    }
}

impl KvResult {
    /// Serialises the result.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            KvResult::Ok => out.push(1),
            KvResult::Value(v) => {
                out.push(2);
                put_opt(&mut out, v);
            }
            KvResult::CasFailed(v) => {
                out.push(3);
                put_opt(&mut out, v);
            }
            KvResult::Time(t) => {
                out.push(4);
                out.extend_from_slice(&t.to_le_bytes());
            }
            KvResult::Invalid => out.push(5),
        }
        out
    }

    /// Parses a result; `None` if malformed.
    pub fn decode(b: &[u8]) -> Option<KvResult> {
        let mut r = Reader(b);
        let res = match r.u8()? {
            1 => KvResult::Ok,
            2 => KvResult::Value(r.opt()?),
            3 => KvResult::CasFailed(r.opt()?),
            4 => KvResult::Time(r.u64()?),
            5 => KvResult::Invalid,
            _ => return None,
        };
        r.done(res)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let ops = [
            KvOp::Put {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            },
            KvOp::Get { key: b"k".to_vec() },
            KvOp::Delete { key: vec![] },
            KvOp::Append {
                key: b"a".to_vec(),
                value: b"xyz".to_vec(),
            },
            KvOp::Cas {
                key: b"c".to_vec(),
                expect: None,
                new: b"n".to_vec(),
            },
            KvOp::Cas {
                key: b"c".to_vec(),
                expect: Some(b"o".to_vec()),
                new: b"n".to_vec(),
            },
            KvOp::Time,
        ];
        for op in ops {
            assert_eq!(KvOp::decode(&op.encode()), Some(op));
        }
        let results = [
            KvResult::Ok,
            KvResult::Value(None),
            KvResult::Value(Some(b"v".to_vec())),
            KvResult::CasFailed(Some(vec![])),
            KvResult::Time(7),
            KvResult::Invalid,
        ];
        for r in results {
            assert_eq!(KvResult::decode(&r.encode()), Some(r));
        }
        assert_eq!(KvOp::decode(&[]), None);
        assert_eq!(KvOp::decode(&[2, 9, 0, 0, 0, 1]), None);
        let mut trailing = KvOp::Time.encode();
        trailing.push(0);
        assert_eq!(KvOp::decode(&trailing), None);
    }
}
