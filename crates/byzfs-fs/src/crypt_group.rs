//! Encryption groups' replicated records (issue #28, docs/ENCRYPTION.md):
//! for each group, its owner's public key, its name, the current key version, that
//! version's writer public key and the members' lockboxes, kept with the owner's signature
//! ([`SignedGroup`]). The replicas store and serve the record and check every change
//! deterministically — signed by the owner, one version at a time — but never hold a key
//! that opens a lockbox. The writer check on encrypted files' operations
//! ([`crate::crypt_write`]) uses `writer`.
//!
//! **Who may make a group.** A group's id is `group_id(owner, name)`
//! ([`crate::proto::group::group_id`]): the replicas refuse (`EACCES`) a record whose id is not
//! that of the owner and name it names, so only the holder of an owner key makes a group with
//! that owner's ids, and nobody makes another user's `team` or `default` before its owner does
//! (issue #43 item 5).
//!
//! A record changes only by [`crate::proto::op::Op::GroupPut`] with the next version (1 for a new
//! group), signed by the group's owner over [`signed_bytes`](crate::proto::group::signed_bytes)
//! (which names the cluster): a replayed or stale change is `ESTALE`, a change signed by anyone
//! else `EACCES`, every correct replica alike. The signature is stored and returned by
//! [`crate::proto::op::Op::GroupGet`], so a mount checks the record it reads against the owner it
//! expects ([`authenticate`]) instead of believing the replicas.

use crate::encoding::{decode, encode};
use crate::exec::Exec;
use crate::fail::Res;
use crate::key;
use crate::proto::errno::Errno;
use crate::proto::group::{authenticate, GroupRecord, SignedGroup};
use crate::proto::reply::Reply;
use crate::store::Store;

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

    /// [`crate::proto::op::Op::GroupPut`].
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

    /// [`crate::proto::op::Op::GroupGet`].
    pub(crate) fn group_get(&mut self, group: [u8; 16]) -> Res<Reply> {
        Ok(Reply::Group(self.signed_group(&group)?))
    }
}
