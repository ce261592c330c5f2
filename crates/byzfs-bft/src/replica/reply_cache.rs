//! The per-client reply cache, kept inside the checkpointed library state so exactly-once
//! survives rollback and state transfer (PROTOCOL.md §1.6 — mandatory).
//!
//! Two keys per client: `rr‖c` → (rid, seq) (checked on every request, so it stays small),
//! `rv‖c` → the result (read only to answer a retransmission).

use crate::ids::{ClientId, RequestId, Seq};
use crate::state::PartitionedState;

fn key(tag: &[u8; 2], c: ClientId) -> Vec<u8> {
    let mut k = Vec::with_capacity(10);
    k.extend_from_slice(tag);
    k.extend_from_slice(&c.to_be_bytes());
    k
}

/// The last request id executed for `c` and the sequence number of its batch.
pub(crate) fn last(lib: &PartitionedState, c: ClientId) -> Option<(RequestId, Seq)> {
    let v = lib.get(&key(b"rr", c))?;
    if v.len() != 16 {
        return None;
    }
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&v[..8]);
    b.copy_from_slice(&v[8..]);
    Some((u64::from_le_bytes(a), u64::from_le_bytes(b)))
}

/// The cached result for `c`.
pub(crate) fn result(lib: &PartitionedState, c: ClientId) -> Option<&[u8]> {
    lib.get(&key(b"rv", c))
}

/// Records the execution of `(c, rid)` at `seq` with `result`.
pub(crate) fn store(
    lib: &mut PartitionedState,
    c: ClientId,
    rid: RequestId,
    seq: Seq,
    result: Vec<u8>,
) {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&rid.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    lib.put(key(b"rr", c), v);
    lib.put(key(b"rv", c), result);
}
