//! A writer's proof ([`WriterProof`]): the signature with an encryption group's writer key
//! that a request changing the group's files carries (`Op::Signed`), over [`signed_bytes`]:
//! the cluster, the group and key version, the client, a sequence number and the digest of
//! the request. How a request is signed: [`super::signed`]; what the replicas check, and why
//! so: [`crate::crypt_write`].

use serde::{Deserialize, Serialize};

/// Most proofs one request carries (each costs a signature check at every replica).
pub const MAX_PROOFS: usize = 4;

/// A writer's proof for one group, carried by `Op::Signed`.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct WriterProof {
    /// The group.
    pub group: [u8; 16],
    /// The key version whose writer key signed.
    pub version: u32,
    /// Ed25519 signature (64 bytes) over [`signed_bytes`].
    pub signature: Vec<u8>,
}

/// What a writer signs.
pub fn signed_bytes(
    cluster: &[u8; 16],
    group: &[u8; 16],
    version: u32,
    client: u64,
    seq: u64,
    digest: &[u8; 32],
) -> Vec<u8> {
    let mut m = b"byzfs writer proof 2026-12\0".to_vec();
    m.extend_from_slice(cluster);
    m.extend_from_slice(group);
    m.extend_from_slice(&version.to_be_bytes());
    m.extend_from_slice(&client.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(digest);
    m
}
