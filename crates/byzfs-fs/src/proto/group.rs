//! An encryption group's record as the protocol carries it (`Op::GroupPut`, `Op::GroupGet`):
//! the owner's key, the name, the key version, its writer key and the members' lockboxes,
//! signed by the owner ([`signed_bytes`]), and the check both the replicas and a mount make
//! of it ([`authenticate`]). How the replicas keep and change records: [`crate::crypt_group`].

use super::codec::encode;
use super::errno::Errno;
use ed25519_dalek::{Signature, VerifyingKey};
use serde::{Deserialize, Serialize};

/// Most lockboxes (members) in one record.
pub const MAX_LOCKBOXES: usize = 256;
/// Largest lockbox, in bytes (a sealed 32-byte seed and 32-byte writer secret take 136).
pub const MAX_LOCKBOX: usize = 512;
/// Longest group name, in bytes.
pub const MAX_NAME: usize = 64;
/// The context of [`group_id`]: the same as `byzfs_crypt::member::group_id`'s (a test
/// compares them).
const GROUP_ID: &str = "byzfs-crypt 2026-11 group id from owner and name";

/// A group's record.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct GroupRecord {
    /// The owner's Ed25519 public key; fixed for the group's life.
    pub owner: [u8; 32],
    /// The group's name (at most [`MAX_NAME`] bytes); the id is [`group_id`] of owner
    /// and name. Fixed for the group's life.
    pub name: String,
    /// The key version (1 for a new group, +1 at each change).
    pub version: u32,
    /// The Ed25519 public key of this version's writer key.
    pub writer: [u8; 32],
    /// One lockbox per member, opaque to the replicas.
    pub lockboxes: Vec<Vec<u8>>,
}

/// A record with its owner's signature over [`signed_bytes`]: what the replicas store and
/// [`Op::GroupGet`](super::op::Op::GroupGet) returns.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct SignedGroup {
    /// The record.
    pub record: GroupRecord,
    /// The owner's Ed25519 signature (64 bytes).
    pub signature: Vec<u8>,
}

/// The id of the group owner `owner` (Ed25519 public key) names `name`.
pub fn group_id(owner: &[u8; 32], name: &str) -> [u8; 16] {
    let mut h = blake3::Hasher::new_derive_key(GROUP_ID);
    h.update(owner);
    h.update(name.as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&h.finalize().as_bytes()[..16]);
    id
}

/// What the owner signs for `record` of group `group` on cluster `cluster`: a context
/// string, the cluster and group ids and the record's encoding.
pub fn signed_bytes(cluster: &[u8; 16], group: &[u8; 16], record: &GroupRecord) -> Vec<u8> {
    let mut m = b"byzfs group record 2026-12\0".to_vec();
    m.extend_from_slice(cluster);
    m.extend_from_slice(group);
    m.extend_from_slice(&encode(record));
    m
}

/// Whether `record` with `signature` is group `group`'s on cluster `cluster`, as its owner signed
/// it: `EINVAL` for a record out of bounds or malformed keys, `EACCES` for an id that is not
/// [`group_id`] of the record's owner and name, or a signature that does not verify under the
/// record's owner. The replicas check every [`Op::GroupPut`](super::op::Op::GroupPut) with it; a
/// mount checks every record it reads, and that its owner is the one it expects.
pub fn authenticate(
    cluster: &[u8; 16],
    group: &[u8; 16],
    record: &GroupRecord,
    signature: &[u8],
) -> Result<(), Errno> {
    if record.lockboxes.len() > MAX_LOCKBOXES
        || record.lockboxes.iter().any(|b| b.len() > MAX_LOCKBOX)
        || record.name.len() > MAX_NAME
    {
        return Err(Errno::EINVAL);
    }
    VerifyingKey::from_bytes(&record.writer).map_err(|_| Errno::EINVAL)?;
    let owner = VerifyingKey::from_bytes(&record.owner).map_err(|_| Errno::EINVAL)?;
    let sig = Signature::from_slice(signature).map_err(|_| Errno::EINVAL)?;
    if group_id(&record.owner, &record.name) != *group {
        return Err(Errno::EACCES);
    }
    // Strict verification: one signature per message, whatever the implementation.
    owner
        .verify_strict(&signed_bytes(cluster, group, record), &sig)
        .map_err(|_| Errno::EACCES)
}
