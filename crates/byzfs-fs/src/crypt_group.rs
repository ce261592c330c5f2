//! Encryption groups' replicated records (issue #28, docs/ARCHITECTURE.md "Encryption"):
//! for each group, its owner's public key, its name, the current key version, that
//! version's writer public key and the members' lockboxes, kept with the owner's signature
//! ([`SignedGroup`]). The replicas store and serve the record and check every change
//! deterministically — signed by the owner, one version at a time — but never hold a key
//! that opens a lockbox. The writer check on encrypted files' operations
//! ([`crate::crypt_write`]) uses `writer`.
//!
//! **Who may make a group.** A group's id is [`group_id`]`(owner, name)`: the replicas
//! refuse (`EACCES`) a record whose id is not that of the owner and name it names, so only
//! the holder of an owner key makes a group with that owner's ids, and nobody makes
//! another user's `team` or `default` before its owner does (issue #43 item 5).
//!
//! A record changes only by [`crate::op::Op::GroupPut`] with the next version (1 for a new group),
//! signed by the group's owner over [`signed_bytes`] (which names the cluster): a replayed
//! or stale change is `ESTALE`, a change signed by anyone else `EACCES`, every correct
//! replica alike. The signature is stored and returned by [`crate::op::Op::GroupGet`], so
//! a mount checks the record it reads against the owner it expects ([`authenticate`])
//! instead of believing the replicas.

use crate::encoding::{decode, encode};
use crate::errno::{Errno, Res};
use crate::exec::Exec;
use crate::key;
use crate::op::Reply;
use crate::store::Store;
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
/// [`crate::op::Op::GroupGet`] returns.
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

/// Whether `record` with `signature` is group `group`'s on cluster `cluster`, as its owner
/// signed it: `EINVAL` for a record out of bounds or malformed keys, `EACCES` for an id
/// that is not [`group_id`] of the record's owner and name, or a signature that does not
/// verify under the record's owner. The replicas check every [`crate::op::Op::GroupPut`]
/// with it; a mount checks every record it reads, and that its owner is the one it expects.
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

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    pub(crate) fn group_record(&self, group: &[u8; 16]) -> Res<Option<GroupRecord>> {
        Ok(self.signed_group(group)?.map(|s| s.record))
    }

    fn signed_group(&self, group: &[u8; 16]) -> Res<Option<SignedGroup>> {
        match self.txn.get(&key::crypt_group(group))? {
            Some(b) => Ok(Some(decode(&b)?)),
            None => Ok(None),
        }
    }

    /// [`crate::op::Op::GroupPut`].
    pub(crate) fn group_put(
        &mut self,
        group: [u8; 16],
        record: GroupRecord,
        signature: &[u8],
    ) -> Res<Reply> {
        authenticate(&self.cfg.cluster_id, &group, &record, signature)?;
        let expected = match self.group_record(&group)? {
            None => 1,
            // The id names owner and name, so a stored record has both; checked anyway.
            Some(s) if s.owner != record.owner || s.name != record.name => {
                return Err(Errno::EACCES.into())
            }
            Some(s) => s.version.saturating_add(1),
        };
        if record.version != expected {
            return Err(Errno::ESTALE.into());
        }
        let signed = SignedGroup {
            record,
            signature: signature.to_vec(),
        };
        self.txn.put(key::crypt_group(&group), encode(&signed));
        Ok(Reply::Done)
    }

    /// [`crate::op::Op::GroupGet`].
    pub(crate) fn group_get(&mut self, group: [u8; 16]) -> Res<Reply> {
        Ok(Reply::Group(self.signed_group(&group)?))
    }
}
