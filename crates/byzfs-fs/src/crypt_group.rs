//! Encryption groups' replicated records (issue #28, docs/ARCHITECTURE.md "Encryption"):
//! for each group, its owner's public key, the current key version, that version's writer
//! public key and the members' lockboxes. The replicas store and serve the record and check
//! every change deterministically — signed by the owner, one version at a time — but never
//! hold a key that opens a lockbox. The writer check on encrypted files' operations
//! ([`crate::crypt_write`]) uses `writer`.
//!
//! A record changes only by [`crate::op::Op::GroupPut`] with the next version (1 for a new group),
//! signed by the group's owner over [`signed_bytes`]: a replayed or stale change is
//! `ESTALE`, a change signed by anyone else `EACCES`, every correct replica alike.

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

/// A group's record.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct GroupRecord {
    /// The owner's Ed25519 public key; fixed for the group's life.
    pub owner: [u8; 32],
    /// The key version (1 for a new group, +1 at each change).
    pub version: u32,
    /// The Ed25519 public key of this version's writer key.
    pub writer: [u8; 32],
    /// One lockbox per member, opaque to the replicas.
    pub lockboxes: Vec<Vec<u8>>,
}

/// What the owner signs for `record` of group `group`: a context string, the group id and
/// the record's encoding.
pub fn signed_bytes(group: &[u8; 16], record: &GroupRecord) -> Vec<u8> {
    let mut m = b"byzfs group record 2026-11\0".to_vec();
    m.extend_from_slice(group);
    m.extend_from_slice(&encode(record));
    m
}

fn valid_key(k: &[u8; 32]) -> Res<VerifyingKey> {
    VerifyingKey::from_bytes(k).map_err(|_| Errno::EINVAL.into())
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    pub(crate) fn group_record(&self, group: &[u8; 16]) -> Res<Option<GroupRecord>> {
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
        if record.lockboxes.len() > MAX_LOCKBOXES
            || record.lockboxes.iter().any(|b| b.len() > MAX_LOCKBOX)
        {
            return Err(Errno::EINVAL.into());
        }
        valid_key(&record.writer)?;
        let owner = valid_key(&record.owner)?;
        let sig = Signature::from_slice(signature).map_err(|_| Errno::EINVAL)?;
        let stored = self.group_record(&group)?;
        let expected = match &stored {
            None => 1,
            Some(s) if s.owner != record.owner => return Err(Errno::EACCES.into()),
            Some(s) => s.version.saturating_add(1),
        };
        // Strict verification: one signature per message, whatever the implementation.
        owner
            .verify_strict(&signed_bytes(&group, &record), &sig)
            .map_err(|_| Errno::EACCES)?;
        if record.version != expected {
            return Err(Errno::ESTALE.into());
        }
        self.txn.put(key::crypt_group(&group), encode(&record));
        Ok(Reply::Done)
    }

    /// [`Op::GroupGet`].
    pub(crate) fn group_get(&mut self, group: [u8; 16]) -> Res<Reply> {
        Ok(Reply::Group(self.group_record(&group)?))
    }
}
