//! The agreed history: for each sequence number, the batch digest correct replicas committed
//! and (once one of them reported executing it) its content — the requests that ran, in order,
//! and the non-deterministic input. Built by [`super::agreement`], read by the results,
//! exactly-once and durability checkers.

use byzfs_bft::{ClientId, Digest, RequestId, Seq, Time};
use std::collections::BTreeMap;

/// A position in the agreed history: operation `idx` of batch `seq`. `Pos::ZERO` is the
/// initial state, before every operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    /// Sequence number (≥ 1 for operations).
    pub seq: Seq,
    /// Index in the batch's executed requests.
    pub idx: u32,
}

impl Pos {
    /// Before every operation.
    pub const ZERO: Pos = Pos { seq: 0, idx: 0 };
    /// After every operation.
    pub const MAX: Pos = Pos {
        seq: Seq::MAX,
        idx: u32::MAX,
    };
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.seq, self.idx)
    }
}

/// What a batch executed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    /// The agreed non-deterministic input.
    pub nondet: Vec<u8>,
    /// Requests executed, in order (duplicates answered from the reply cache excluded).
    pub requests: Vec<(ClientId, RequestId)>,
    /// Their digests, in the same order (what each client's frame carried); empty in
    /// histories built by hand in tests.
    pub digests: Vec<Digest>,
}

/// One agreed sequence number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The committed batch digest.
    pub digest: Digest,
    /// Its content, once known.
    pub content: Option<Content>,
    /// The replica instance that committed it first.
    pub first: usize,
    /// When.
    pub at: Time,
}

/// The agreed history.
#[derive(Clone, Debug, Default)]
pub struct AgreedHistory {
    /// Entries by sequence number.
    pub entries: BTreeMap<Seq, Entry>,
}

impl AgreedHistory {
    /// The content agreed at `seq`, if known.
    pub fn content(&self, seq: Seq) -> Option<&Content> {
        self.entries.get(&seq).and_then(|e| e.content.as_ref())
    }

    /// The highest committed sequence number.
    pub fn max_seq(&self) -> Seq {
        self.entries.last_key_value().map_or(0, |(s, _)| *s)
    }
}
