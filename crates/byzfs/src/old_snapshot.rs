//! **Test-only fault injection** (`byzfs replica --byzantine old-snapshot`, only in builds
//! with the feature `byzantine`): a file-service replica that answers every lookup,
//! `getattr` and read of file data the way it answered the first identical one that
//! succeeded — an old snapshot of the files, consistent in itself (old attributes, old
//! signed headers, the old blocks and tree nodes that go with them; group records and
//! failures are told as they are, so mounts still start), and
//! correctly authenticated, digest-only replies included (the lie is the service's
//! result, so the replica's reply digests are the lie's). Its state and votes stay
//! correct. Two of them (`f + 1`) agree on the same old snapshot: the rollback an encrypted
//! mount's signed roots cannot stop and the reply quorum stops only up to `f`
//! (`tests/encryption.rs`). Never use it on a real cluster.

use byzfs_bft::service::{DiskWork, Service};
use byzfs_bft::{ClientId, Digest, Seq, Time};
use byzfs_fs::{decode_result, Op, Request};
use std::collections::HashMap;
use std::sync::Mutex;

/// `inner`, answering each read as it first did.
pub struct OldSnapshot<S> {
    inner: S,
    first: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
}

impl<S: Service> OldSnapshot<S> {
    /// The liar over `inner`.
    pub fn new(inner: S) -> OldSnapshot<S> {
        OldSnapshot {
            inner,
            first: Mutex::default(),
        }
    }

    /// The result first given for `op` (recording `truth` if none was), if `op` reads a
    /// file and `truth` is a success; `truth` otherwise.
    fn first(&self, op: &[u8], truth: Vec<u8>) -> Vec<u8> {
        let reads_a_file = Request::decode(op).is_some_and(|r| {
            matches!(
                r.op,
                Op::Lookup { .. } | Op::GetAttr { .. } | Op::Read { .. } | Op::ReadGather { .. }
            )
        });
        if !reads_a_file || !matches!(decode_result(&truth), Some(Ok(_))) {
            return truth;
        }
        match self.first.lock() {
            Ok(mut m) => m.entry(op.to_vec()).or_insert(truth).clone(),
            Err(_) => truth,
        }
    }
}

impl<S: Service> Service for OldSnapshot<S> {
    fn is_read_only(&self, op: &[u8]) -> bool {
        self.inner.is_read_only(op)
    }

    fn propose_nondet(&mut self, seq: Seq, now: Time) -> Vec<u8> {
        self.inner.propose_nondet(seq, now)
    }

    fn check_nondet(&self, seq: Seq, nondet: &[u8], now: Time) -> bool {
        self.inner.check_nondet(seq, nondet, now)
    }

    fn execute(&mut self, client: ClientId, op: &[u8], nondet: &[u8]) -> Vec<u8> {
        let truth = self.inner.execute(client, op, nondet);
        if self.inner.is_read_only(op) {
            self.first(op, truth)
        } else {
            truth
        }
    }

    fn execute_read_only(&self, client: ClientId, op: &[u8]) -> Vec<u8> {
        let truth = self.inner.execute_read_only(client, op);
        self.first(op, truth)
    }

    fn begin_batch(&mut self, seq: Seq, committed: Seq) {
        self.inner.begin_batch(seq, committed);
    }

    fn execute_read_only_committed(
        &self,
        client: ClientId,
        op: &[u8],
        committed: Seq,
    ) -> Option<Vec<u8>> {
        let truth = self
            .inner
            .execute_read_only_committed(client, op, committed)?;
        Some(self.first(op, truth))
    }

    fn partition_count(&self) -> u32 {
        self.inner.partition_count()
    }

    fn checkpoint(&mut self, seq: Seq) -> Vec<Digest> {
        self.inner.checkpoint(seq)
    }

    fn discard_checkpoints_below(&mut self, seq: Seq) {
        self.inner.discard_checkpoints_below(seq);
    }

    fn rollback(&mut self) -> Option<Seq> {
        self.inner.rollback()
    }

    fn current_partition_digests(&self) -> Vec<Digest> {
        self.inner.current_partition_digests()
    }

    fn checkpoint_partition_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        self.inner.checkpoint_partition_digests(seq)
    }

    fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>> {
        self.inner.export_partition(seq, part)
    }

    fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool {
        self.inner.import_partition(part, data, expected)
    }

    fn finish_import(&mut self, seq: Seq) -> Vec<Digest> {
        self.inner.finish_import(seq)
    }

    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }

    fn persists_state(&self) -> bool {
        self.inner.persists_state()
    }

    fn persist(&mut self, stored: Seq) -> Result<Option<DiskWork>, String> {
        self.inner.persist(stored)
    }

    fn work_done(&mut self) -> Result<Option<DiskWork>, String> {
        self.inner.work_done()
    }

    fn recorded(&mut self, stored: Seq) -> Result<Option<DiskWork>, String> {
        self.inner.recorded(stored)
    }

    fn reopen(&mut self, seq: Seq) -> Result<Vec<Digest>, String> {
        self.inner.reopen(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_fs::{Credentials, FileHandle, FileService, FsConfig, Op, Request, SetAttr};

    #[test]
    fn reads_are_answered_as_first_and_writes_as_they_are() {
        let fs = FileService::in_memory(FsConfig::trusted());
        let mut liar = OldSnapshot::new(fs);
        let cred = Credentials::root();
        let op = |o: Op| Request::new(cred.clone(), o).encode();
        let getattr = op(Op::GetAttr {
            fh: FileHandle::ROOT,
        });
        let first = liar.execute_read_only(1, &getattr);
        let chmod = op(Op::SetAttr {
            fh: FileHandle::ROOT,
            set: SetAttr {
                mode: Some(0o700),
                ..SetAttr::default()
            },
        });
        let changed = liar.execute(1, &chmod, &[]);
        assert_ne!(changed, first, "a change is answered truly");
        assert_eq!(liar.execute_read_only(2, &getattr), first);
        assert_eq!(liar.execute(2, &getattr, &[]), first, "ordered reads too");
        assert_ne!(liar.inner.execute_read_only(2, &getattr), first);
    }
}
