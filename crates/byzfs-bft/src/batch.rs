//! Batch digests (docs/PROTOCOL.md §1.3): `d = D(D(req_1) ‖ … ‖ D(req_k) ‖ big_1 ‖ … ‖ nondet)`.
//! The request digests are the frames' body digests, computed once while parsing.

use crate::crypto::Digest;
use crate::message::BatchBody;
use crate::wire::{Frame, HEADER_LEN};

/// Digest of a batch given its requests' digests.
pub fn batch_digest_from(request_digests: &[Digest], big: &[Digest], nondet: &[u8]) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(b"byzfs batch v1");
    h.update(&(request_digests.len() as u64).to_le_bytes());
    for d in request_digests {
        h.update(&d.0);
    }
    h.update(&(big.len() as u64).to_le_bytes());
    for d in big {
        h.update(&d.0);
    }
    h.update(&(nondet.len() as u64).to_le_bytes());
    h.update(nondet);
    Digest(*h.finalize().as_bytes())
}

/// The digest of the null batch (no requests, no non-determinism), used to fill gaps after a
/// view change.
pub fn null_digest() -> Digest {
    batch_digest_from(&[], &[], &[])
}

/// Digest of a batch, reading each inlined request's digest from its frame header (no
/// re-hashing). Returns `None` if an inlined request is not a well-formed frame.
pub fn batch_digest(batch: &BatchBody) -> Option<Digest> {
    let mut ds = Vec::with_capacity(batch.requests.len());
    for r in &batch.requests {
        if r.len() < HEADER_LEN {
            return None;
        }
        let mut d = [0u8; 32];
        d.copy_from_slice(&r[32..64]);
        ds.push(Digest(d));
    }
    Some(batch_digest_from(&ds, &batch.big, &batch.nondet))
}

/// Parses every inlined request frame of a batch (checking each body digest).
pub fn parse_requests(batch: &BatchBody, max_len: usize) -> Option<Vec<Frame<'_>>> {
    batch
        .requests
        .iter()
        .map(|r| Frame::parse(r, max_len).ok())
        .collect()
}
