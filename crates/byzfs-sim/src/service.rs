//! The service a simulated replica runs ([`SimService`]): the key-value service of the
//! original families, or the real file service of the `fs-` families. One enum rather than a
//! generic simulator, so the run, the nodes and the adversaries stay one type; every
//! `Service` method is forwarded, so a replica behaves exactly as over the service alone.

use crate::kv::KvService;
use byzfs_bft::service::DiskWork;
use byzfs_bft::{ClientId, Digest, Seq, Service, Time};
use byzfs_fs::store::LogStore;
use byzfs_fs::FileService;

/// Which service a family replicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ServiceKind {
    /// `byzfs_bft::services::kv`.
    Kv,
    /// `byzfs_fs::FileService` on its in-memory store.
    Fs,
    /// `byzfs_fs::FileService` on a persistent log store on the simulated disk
    /// (`crate::fs::disk`), as a `disk`-mode replica runs it.
    FsDisk,
}

impl ServiceKind {
    /// Whether this is the file service (the fs workload, model and checkers).
    pub fn is_fs(self) -> bool {
        matches!(self, ServiceKind::Fs | ServiceKind::FsDisk)
    }
}

/// A replica's service.
pub enum SimService {
    /// The key-value service.
    Kv(KvService),
    /// The file service (boxed: it is much larger than the key-value one).
    Fs(Box<FileService>),
    /// The file service on the simulated disk.
    FsDisk(Box<FileService<LogStore<crate::fs::disk::SimDisk>>>),
}

macro_rules! each {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            SimService::Kv($s) => $e,
            SimService::Fs($s) => $e,
            SimService::FsDisk($s) => $e,
        }
    };
}

impl SimService {
    /// The file service on its in-memory store, if this is one.
    pub fn fs(&self) -> Option<&FileService> {
        match self {
            SimService::Fs(s) => Some(&**s),
            _ => None,
        }
    }

    /// The key-value service, if this is one.
    pub fn kv(&self) -> Option<&KvService> {
        match self {
            SimService::Kv(s) => Some(s),
            _ => None,
        }
    }
}

impl Service for SimService {
    fn is_read_only(&self, op: &[u8]) -> bool {
        each!(self, s => s.is_read_only(op))
    }
    fn propose_nondet(&mut self, seq: Seq, now: Time) -> Vec<u8> {
        each!(self, s => s.propose_nondet(seq, now))
    }
    fn check_nondet(&self, seq: Seq, nondet: &[u8], now: Time) -> bool {
        each!(self, s => s.check_nondet(seq, nondet, now))
    }
    fn execute(&mut self, client: ClientId, op: &[u8], nondet: &[u8]) -> Vec<u8> {
        each!(self, s => s.execute(client, op, nondet))
    }
    fn execute_read_only(&self, client: ClientId, op: &[u8]) -> Vec<u8> {
        each!(self, s => s.execute_read_only(client, op))
    }
    fn begin_batch(&mut self, seq: Seq, committed: Seq) {
        each!(self, s => s.begin_batch(seq, committed))
    }
    fn execute_read_only_committed(
        &self,
        client: ClientId,
        op: &[u8],
        committed: Seq,
    ) -> Option<Vec<u8>> {
        each!(self, s => s.execute_read_only_committed(client, op, committed))
    }
    fn partition_count(&self) -> u32 {
        each!(self, s => s.partition_count())
    }
    fn checkpoint(&mut self, seq: Seq) -> Vec<Digest> {
        each!(self, s => s.checkpoint(seq))
    }
    fn discard_checkpoints_below(&mut self, seq: Seq) {
        each!(self, s => s.discard_checkpoints_below(seq))
    }
    fn rollback(&mut self) -> Option<Seq> {
        each!(self, s => s.rollback())
    }
    fn current_partition_digests(&self) -> Vec<Digest> {
        each!(self, s => s.current_partition_digests())
    }
    fn checkpoint_partition_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        each!(self, s => s.checkpoint_partition_digests(seq))
    }
    fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>> {
        each!(self, s => s.export_partition(seq, part))
    }
    fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool {
        each!(self, s => s.import_partition(part, data, expected))
    }
    fn finish_import(&mut self, seq: Seq) -> Vec<Digest> {
        each!(self, s => s.finish_import(seq))
    }
    fn failure(&self) -> Option<String> {
        each!(self, s => s.failure())
    }
    fn persists_state(&self) -> bool {
        each!(self, s => s.persists_state())
    }
    fn persist(&mut self, stored: Seq) -> Result<Option<DiskWork>, String> {
        each!(self, s => s.persist(stored))
    }
    fn work_done(&mut self) -> Result<Option<DiskWork>, String> {
        each!(self, s => s.work_done())
    }
    fn recorded(&mut self, stored: Seq) -> Result<Option<DiskWork>, String> {
        each!(self, s => s.recorded(stored))
    }
    fn reopen(&mut self, seq: Seq) -> Result<Vec<Digest>, String> {
        each!(self, s => s.reopen(seq))
    }
}
