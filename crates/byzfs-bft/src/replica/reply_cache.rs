//! The per-client reply cache, kept inside the checkpointed library state so exactly-once
//! survives rollback and state transfer (docs/PROTOCOL.md §1.6 — mandatory).
//!
//! A client may have up to `Config::client_window` requests outstanding, so the cache keeps
//! the result of every executed request the client may still be waiting for: those above the
//! highest `acked` it has sent ([`crate::message::Request::acked`]). Keys per client:
//! `rr‖c` → (last executed rid, its batch's sequence number, floor), where floor is the
//! highest `acked` seen; `rv‖c` → the result of `last`; `rv‖c‖rid` → (sequence number,
//! result) for each earlier rid in `(floor, last)` that ran. A client with one request at a
//! time (acked = rid − 1) never has such earlier results, so it costs what PBFT's one-entry
//! cache cost (two overwritten keys; `bench throughput` measured it). A request is refused
//! unless `rid - acked <= client_window`, so `last - floor <= client_window` and at most that
//! many results are kept per client.

use crate::ids::{ClientId, RequestId, Seq};
use crate::state::PartitionedState;

/// The largest `client_window` (`Config::validate`) times four.
const SCAN_MAX: u64 = 4096;

fn key(tag: &[u8; 2], c: ClientId) -> Vec<u8> {
    let mut k = Vec::with_capacity(18);
    k.extend_from_slice(tag);
    k.extend_from_slice(&c.to_be_bytes());
    k
}

fn result_key(c: ClientId, rid: RequestId) -> Vec<u8> {
    let mut k = key(b"rv", c);
    k.extend_from_slice(&rid.to_be_bytes());
    k
}

fn u64_at(v: &[u8], i: usize) -> Option<u64> {
    let b: [u8; 8] = v.get(i..i + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// A client's entry: the last request executed, its batch, and the floor below which no
/// result is kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    pub last: RequestId,
    pub seq: Seq,
    pub floor: RequestId,
}

/// The entry of `c` (all zero for a client that never executed anything).
pub(crate) fn entry(lib: &PartitionedState, c: ClientId) -> Entry {
    let Some(v) = lib.get(&key(b"rr", c)) else {
        return Entry::default();
    };
    match (u64_at(v, 0), u64_at(v, 8), u64_at(v, 16)) {
        (Some(last), Some(seq), Some(floor)) => Entry { last, seq, floor },
        _ => Entry::default(),
    }
}

/// The last request id executed for `c` and the sequence number of its batch.
pub(crate) fn last(lib: &PartitionedState, c: ClientId) -> Option<(RequestId, Seq)> {
    let e = entry(lib, c);
    (e.last > 0).then_some((e.last, e.seq))
}

/// The cached result of `(c, rid)` and the sequence number of its batch, if `rid` ran and
/// is still above the floor.
pub(crate) fn result(lib: &PartitionedState, c: ClientId, rid: RequestId) -> Option<(Seq, &[u8])> {
    let e = entry(lib, c);
    if rid <= e.floor || rid > e.last {
        return None;
    }
    if rid == e.last {
        return Some((e.seq, lib.get(&key(b"rv", c))?));
    }
    let v = lib.get(&result_key(c, rid))?;
    Some((u64_at(v, 0)?, v.get(8..)?))
}

/// How many results are cached for `c` (at most `client_window`; the simulator checks it).
pub(crate) fn cached(lib: &PartitionedState, c: ClientId) -> usize {
    let e = entry(lib, c);
    if e.last <= e.floor {
        return 0;
    }
    let from = e.floor.max(e.last.saturating_sub(SCAN_MAX));
    1 + (from.saturating_add(1)..e.last)
        .filter(|&r| lib.get(&result_key(c, r)).is_some())
        .count()
}

/// Records the execution of `(c, rid)` at `seq` with `result`, and drops the results the
/// client no longer needs (`acked`). The caller has checked `acked < rid` and `rid > last`.
pub(crate) fn store(
    lib: &mut PartitionedState,
    c: ClientId,
    rid: RequestId,
    acked: RequestId,
    seq: Seq,
    result: Vec<u8>,
) {
    let old = entry(lib, c);
    let floor = old.floor.max(acked);
    // Earlier results live only in (old.floor, old.last), which the window bounds, so this
    // loop is short even when a restarted client's ids jump. (`SCAN_MAX` only keeps a
    // replica with the window check mutated away from looping for ever; the simulator then
    // sees the cache grow.)
    let from = old.floor.max(old.last.saturating_sub(SCAN_MAX));
    for r in from.saturating_add(1)..floor.saturating_add(1).min(old.last) {
        lib.delete(&result_key(c, r));
    }
    // The previous last result stays if the client may still wait for it.
    if old.last > floor {
        if let Some(prev) = lib.get(&key(b"rv", c)).map(<[u8]>::to_vec) {
            let mut v = Vec::with_capacity(8 + prev.len());
            v.extend_from_slice(&old.seq.to_le_bytes());
            v.extend_from_slice(&prev);
            lib.put(result_key(c, old.last), v);
        }
    }
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&rid.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    v.extend_from_slice(&floor.to_le_bytes());
    lib.put(key(b"rr", c), v);
    lib.put(key(b"rv", c), result);
}
