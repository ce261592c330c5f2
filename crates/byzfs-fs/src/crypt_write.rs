//! Who may change an encrypted file (issue #28, docs/ENCRYPTION.md "What the
//! replicas check"): only a holder of its group's current writer key. Every correct replica
//! refuses, with the same errno, any change to a file of a group ([`crate::crypt_file`])
//! that does not carry a valid [`WriterProof`] for that group.
//!
//! **What is checked.** An operation runs in its transaction as usual; then every inode
//! whose attributes, entries, extended attributes, block map or group it changed
//! (`key::file_of`) is looked up, before and after, and each group found needs a
//! proof — as does the group a [`crate::proto::op::Op::SetGroup`] joins. Checking the writes rather
//! than listing, per operation, which files it changes means no operation, batch member or
//! later addition can slip past. A directory of a group is delegated
//! ([`crate::dir_delegation`]) only with a proof too, as its holder answers changes early.
//! Not checked: lock and lease operations, file delegations, directories given back,
//! inode reservations, capacity reports, group records (signed by their owner,
//! [`crate::crypt_group`]) and the sweeps and reclaim steps that free what a dead client or
//! a removal left ([`crate::orphan`], [`crate::reclaim`]) — none of them lets its sender
//! choose a file's content, name or attributes.
//!
//! **A proof** ([`crate::proto::op::Op::Signed`]) is an Ed25519 signature with the group's writer
//! key of the key version the replicas hold, over [`signed_bytes`]: the cluster
//! ([`crate::FsConfig::cluster_id`]), the group, the version,
//! the client the replication library authenticated, a sequence number and the digest of
//! the request's credentials and operation. Bound to the client, a proof is worthless to
//! anyone else (a reader cannot send a writer's captured proof as its own); the sequence
//! number, which must exceed the last one the client used (stored per client, `writer_seq`),
//! makes it single-use even for a holder of the client's transport keys. (The plan first
//! bound proofs to a per-inode change counter; a per-client number binds as tightly, lets
//! one signature cover a batch that changes many files, and spares the mount guessing
//! counters.) A request may carry up to [`MAX_PROOFS`] proofs, one per group it changes.
//!
//! **Errnos**, the same at every correct replica: no proof, an unknown group, a wrong
//! signature or a used sequence number: `EACCES`; a proof made with an older key version
//! than the group's (the mount re-reads the group and signs again; a removed writer can
//! no longer open the new version): `EKEYEXPIRED`; more than [`MAX_PROOFS`] or none in an
//! `Op::Signed`, or one nested in another: `EINVAL`.

use crate::crypt_file::{group_of, CryptFile};
use crate::encoding::{decode, encode};
use crate::exec::{misrouted, Exec};
use crate::fail::Res;
use crate::key;
use crate::proto::batch::MAX_BATCH;
use crate::proto::errno::Errno;
use crate::proto::op::Op;
use crate::proto::proof::{signed_bytes, WriterProof, MAX_PROOFS};
use crate::proto::reply::Reply;
use crate::proto::signed::{request_digest, unchecked};
use crate::store::Store;
use ed25519_dalek::{Signature, VerifyingKey};
use std::collections::BTreeSet;

/// A signed request's parts, checked after its operation ran.
struct Signed {
    seq: u64,
    proofs: Vec<WriterProof>,
    digest: [u8; 32],
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// Runs an operation of the encryption family
    /// ([`Family::Crypt`](crate::proto::family::Family::Crypt)): group records
    /// ([`crate::crypt_group`]), the groups of files ([`crate::crypt_file`]), and the last sequence
    /// number of the caller's proofs.
    pub(crate) fn run_crypt(&mut self, op: Op) -> Res<Reply> {
        match op {
            Op::GroupPut {
                group,
                record,
                signature,
            } => self.group_put(group, record, &signature),
            Op::GroupGet { group } => self.group_get(group),
            Op::SetGroup { dir, group } => self.set_group(dir, group),
            Op::FileGroup { fh } => self.file_group(fh),
            Op::WriterSeq => self.writer_seq(),
            // Only a request's own operation may be signed (`run_checked`).
            Op::Signed { .. } => Err(Errno::EINVAL.into()),
            other => misrouted(&other),
        }
    }

    /// Runs a request's operation, [`crate::proto::op::Op::Signed`] or not, then the writer check.
    pub(crate) fn run_checked(&mut self, op: Op) -> Res<Reply> {
        let (signed, op, headers) = match op {
            Op::Signed {
                seq,
                proofs,
                op,
                headers,
                expect,
            } => {
                if proofs.is_empty()
                    || proofs.len() > MAX_PROOFS
                    || headers.len() > MAX_BATCH
                    || expect.len() > MAX_BATCH
                    || matches!(*op, Op::Signed { .. })
                {
                    return Err(Errno::EINVAL.into());
                }
                let digest = request_digest(self.cred, &op, &headers, &expect);
                (
                    Some(Signed {
                        seq,
                        proofs,
                        digest,
                    }),
                    *op,
                    (headers, expect),
                )
            }
            op => (None, op, (Vec::new(), Vec::new())),
        };
        let (headers, expect) = headers;
        let scan = !unchecked(&op) || !headers.is_empty();
        let reply = self.run(op)?;
        // After the operation (it may make the file; it never sets a header), before
        // the headers are set: the same as before it for every file it did not make.
        for (fh, header) in &expect {
            self.expect_header(*fh, header)?;
        }
        for (fh, header) in headers {
            self.set_header(fh, header)?;
        }
        let mut need: BTreeSet<[u8; 16]> = self.proofs_needed.drain(..).collect();
        if scan {
            need.extend(self.groups_changed()?);
        }
        match signed {
            None if need.is_empty() => {}
            None => return Err(Errno::EACCES.into()),
            Some(s) => self.check_proofs(s, need)?,
        }
        self.with_headers(reply)
    }

    /// The groups of the files this operation's writes changed, before or after them.
    fn groups_changed(&self) -> Res<BTreeSet<[u8; 16]>> {
        let files: BTreeSet<u64> = self.txn.written_keys().filter_map(key::file_of).collect();
        let mut groups = BTreeSet::new();
        for ino in files {
            if let Some(b) = self.txn.get_before(&key::crypt_file(ino))? {
                groups.insert(decode::<CryptFile>(&b)?.group);
            }
            groups.extend(group_of(self.txn, ino)?);
        }
        Ok(groups)
    }

    /// Every proof valid, one for each group in `need`, and a fresh sequence number.
    fn check_proofs(&mut self, s: Signed, mut need: BTreeSet<[u8; 16]>) -> Res<()> {
        for p in &s.proofs {
            let record = self.group_record(&p.group)?.ok_or(Errno::EACCES)?;
            if p.version < record.version {
                return Err(Errno::EKEYEXPIRED.into());
            }
            if p.version != record.version {
                return Err(Errno::EACCES.into());
            }
            let writer = VerifyingKey::from_bytes(&record.writer).map_err(|_| Errno::EACCES)?;
            let sig = Signature::from_slice(&p.signature).map_err(|_| Errno::EACCES)?;
            let msg = signed_bytes(
                &self.cfg.cluster_id,
                &p.group,
                p.version,
                self.client,
                s.seq,
                &s.digest,
            );
            writer
                .verify_strict(&msg, &sig)
                .map_err(|_| Errno::EACCES)?;
            need.remove(&p.group);
        }
        if !need.is_empty() {
            return Err(Errno::EACCES.into());
        }
        let last = match self.txn.get(&key::writer_seq(self.client))? {
            Some(b) => decode::<u64>(&b)?,
            None => 0,
        };
        if s.seq <= last {
            return Err(Errno::EACCES.into());
        }
        self.txn.put(key::writer_seq(self.client), encode(&s.seq));
        Ok(())
    }

    /// [`crate::proto::op::Op::WriterSeq`]: the last sequence number the caller used (0: none).
    pub(crate) fn writer_seq(&mut self) -> Res<Reply> {
        let last = match self.txn.get(&key::writer_seq(self.client))? {
            Some(b) => decode::<u64>(&b)?,
            None => 0,
        };
        Ok(Reply::WriterSeq(last))
    }
}
