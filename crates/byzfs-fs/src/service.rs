//! [`FileService`]: the file system as a `byzfs_bft::Service`.
//!
//! **Agreed time (docs/PROTOCOL.md §1.13).** As in the key-value service: the batch's
//! non-deterministic input is an 8-byte LE timestamp in microseconds; the primary proposes
//! `max(now, last proposed + 1, last agreed + 1)`, a backup accepts a value above the last
//! agreed one and within the clock tolerance of its own clock. The agreed value lives in the
//! superblock (so checkpoints and digests cover it), and every `mtime`/`ctime` comes from it.
//!
//! **Atomic operations.** Each operation runs in a [`Txn`]; its writes reach the store only
//! if it succeeds. A failed operation still advances the agreed clock, like any other.
//!
//! **Who may state which credentials** ([`crate::policy`]): every request, ordered or
//! read-only, is checked against [`FsConfig::client_policy`] with the protocol client id the
//! library passes (the authenticated session) before it runs; `EPERM` otherwise, which an
//! ordered request answers as any failed operation (only the agreed clock moves).
//!
//! **Local storage failures** (a replica's disk full or failing) are not deterministic, so
//! they must never become replicated state. The operation's writes are discarded whole (the
//! store applies write sets atomically, so nothing already stored is lost), this replica
//! answers `ENOSPC` (disk full) or `EIO`, and counts it in [`FileService::local_failures`].
//! A disk store ([`crate::store::LogStore`]) also records the failure (`Service::failure`),
//! and the driver stops the replica before that answer leaves: it counts as one of the `f`
//! faults until restarted with room, when it recovers from its log and by state transfer.
//! A store that can go on after a failed write (and reports no failure) just lags: its next
//! checkpoint digest differs, which the library repairs by state transfer. Clients are
//! unaffected either way (they need `f+1`/`2f+1` matching replies). A *deterministic*
//! `ENOSPC` comes from the replicated capacity in [`FsConfig`], identical at every replica.

use crate::config::FsConfig;
use crate::exec::Exec;
use crate::fail::Fail;
use crate::inode::{self, Inode, Superblock};
use crate::key;
use crate::proto::attr::{FileType, Timestamp};
use crate::proto::errno::Errno;
use crate::proto::handle::{ROOT_GENERATION, ROOT_INO};
use crate::proto::op::Op;
use crate::proto::reply::FsResult;
use crate::proto::request::{encode_result, Request};
use crate::store::{MemStore, Store, StoreError, Txn, WriteSet};
use byzfs_bft::service::DiskWork;
use byzfs_bft::write_tracker::WriteTracker;
use byzfs_bft::{ClientId, Digest, Seq, Service, Time};

/// The replicated file service over a [`Store`].
pub struct FileService<S: Store = MemStore> {
    store: S,
    cfg: FsConfig,
    /// Last timestamp this replica proposed as primary. Not replicated: it only keeps one
    /// primary's pipelined proposals increasing before earlier batches execute.
    last_proposed: u64,
    /// Operations this replica could not apply because its store failed.
    local_failures: u64,
    /// Which uncommitted batch wrote each key, for reads during tentative execution
    /// ([`Service::execute_read_only_committed`]). Not replicated state.
    writes: WriteTracker,
    /// Grants whose signatures verified (a memo: it changes no result).
    grants: crate::policy::Verified,
}

impl FileService<MemStore> {
    /// An empty file system in memory.
    pub fn in_memory(cfg: FsConfig) -> Self {
        let store = MemStore::new(cfg.partitions);
        // A fresh in-memory store cannot fail.
        Self::with_store(store, cfg).expect("in-memory store does not fail")
    }
}

impl<S: Store> FileService<S> {
    /// The file service over `store`. An empty store is initialised with the superblock and
    /// the root directory (owner, group and mode from `cfg`, times 0), identically at every
    /// replica; a store that already holds a file system is used as is.
    pub fn with_store(mut store: S, cfg: FsConfig) -> Result<Self, StoreError> {
        if store.get(&key::superblock())?.is_none() {
            let sb = Superblock {
                clock_us: 0,
                next_ino: ROOT_INO + 1,
                next_generation: ROOT_GENERATION + 1,
                used_bytes: 0,
                inodes: 1,
            };
            let mut root = Inode::new(
                FileType::Directory,
                ROOT_GENERATION,
                cfg.root_mode & crate::proto::attr::MODE_MASK,
                cfg.root_uid,
                cfg.root_gid,
                Timestamp::default(),
            );
            root.parent = ROOT_INO;
            let mut txn = Txn::new(&store);
            inode::save_super(&mut txn, &sb);
            inode::save(&mut txn, ROOT_INO, &root);
            let writes = txn.into_writes();
            store.apply(writes)?;
        }
        Ok(FileService {
            store,
            cfg,
            last_proposed: 0,
            local_failures: 0,
            writes: WriteTracker::new(),
            grants: crate::policy::Verified::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &FsConfig {
        &self.cfg
    }

    /// The store (for tests and tools).
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The store, mutably: for tools and fault-injection tests only. Changing it outside
    /// the service makes this replica diverge (state transfer then repairs it).
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Operations this replica failed to apply because of its local store (see the module
    /// docs).
    pub fn local_failures(&self) -> u64 {
        self.local_failures
    }

    /// The last agreed timestamp, in microseconds (0 before the first batch).
    pub fn last_agreed_time(&self) -> u64 {
        let txn = Txn::new(&self.store);
        inode::load_super(&txn).map_or(0, |sb| sb.clock_us)
    }

    /// Executes `req` as an ordered operation with agreed time `nondet` and returns the
    /// typed result (what [`Service::execute`] encodes).
    pub fn execute_request(&mut self, req: Option<Request>, nondet: &[u8]) -> FsResult {
        self.execute_request_from(0, req, nondet)
    }

    /// As [`Self::execute_request`], for `client` (the owner of the locks it takes).
    pub fn execute_request_from(
        &mut self,
        client: ClientId,
        req: Option<Request>,
        nondet: &[u8],
    ) -> FsResult {
        let planned = self.plan(client, req, nondet);
        let (result, writes) = match planned {
            Ok(p) => p,
            Err(f) => return self.local_failure(f),
        };
        if writes.is_empty() {
            return result;
        }
        for k in writes.keys() {
            self.writes.record(k);
        }
        match self.store.apply(writes) {
            Ok(()) => result,
            Err(e) => self.local_failure(Fail::Store(e)),
        }
    }

    /// Runs `req` in a transaction: its result and the writes to apply (the operation's and
    /// the clock's on success, only the clock's on an errno).
    fn plan(
        &self,
        client: ClientId,
        req: Option<Request>,
        nondet: &[u8],
    ) -> Result<(FsResult, WriteSet), Fail> {
        let mut txn = Txn::new(&self.store);
        let sb0 = inode::load_super(&txn)?;
        let mut sb = sb0.clone();
        // Strictly increasing, one microsecond at least per ordered operation: no two
        // changes of a file share an mtime/ctime, so the mount can tell from the attributes
        // alone whether a file changed (close-to-open with `FOPEN_KEEP_CACHE`).
        let agreed = <[u8; 8]>::try_from(nondet).map_or(0, u64::from_le_bytes);
        sb.clock_us = agreed.max(sb.clock_us.saturating_add(1));
        let clock_moved = sb.clock_us != sb0.clock_us;
        let now = Timestamp::from_micros(sb.clock_us);
        let outcome = match req.map(|r| self.admit(client, &r).map(|()| r)) {
            None => Err(Fail::Errno(Errno::EINVAL)),
            Some(Err(e)) => Err(Fail::Errno(e)),
            Some(Ok(req)) => Exec {
                txn: &mut txn,
                sb: &mut sb,
                cfg: &self.cfg,
                cred: &req.cred,
                now,
                client,
                budget: crate::reclaim::STEP_BLOCKS,
                at: None,
                proofs_needed: Vec::new(),
            }
            .run_checked(req.op),
        };
        match outcome {
            Ok(reply) => {
                inode::save_super(&mut txn, &sb);
                Ok((Ok(reply), txn.into_writes()))
            }
            Err(Fail::Errno(e)) => {
                // Drop the operation's writes; keep only the clock.
                let mut txn = Txn::new(&self.store);
                if clock_moved {
                    let clock_only = Superblock {
                        clock_us: sb.clock_us,
                        ..sb0
                    };
                    inode::save_super(&mut txn, &clock_only);
                }
                Ok((Err(e), txn.into_writes()))
            }
            Err(f) => Err(f),
        }
    }

    /// Executes read-only `req` against the current state (no writes, no clock change).
    /// A mutating operation gets `EINVAL`: it must be ordered.
    pub fn execute_request_read_only(&self, req: Option<Request>) -> FsResult {
        self.read_only_in(0, &mut Txn::new(&self.store), req)
    }

    /// Executes read-only `req` as [`Self::execute_request_read_only`] does, but only if it
    /// read nothing a batch after `committed` wrote: then its result is the committed
    /// state's. `None` otherwise.
    ///
    /// Every read-only operation loads the superblock, which every ordered operation writes
    /// (the agreed clock), but only `statfs` depends on it (its counters); the others use
    /// neither the clock nor the counters (atime is not maintained), so the superblock is a
    /// conflict for `statfs` only. The property test
    /// `reads_during_tentative_execution_equal_reads_on_the_committed_state` checks this
    /// against a replica that never executed the uncommitted batch.
    pub fn execute_request_read_only_committed(
        &self,
        req: Option<Request>,
        committed: Seq,
    ) -> Option<FsResult> {
        self.read_only_committed_from(0, req, committed)
    }

    /// As [`Self::execute_request_read_only_committed`], for `client`.
    fn read_only_committed_from(
        &self,
        client: ClientId,
        req: Option<Request>,
        committed: Seq,
    ) -> Option<FsResult> {
        let statfs = req.as_ref().is_some_and(|r| matches!(r.op, Op::StatFs));
        let mut txn = Txn::recording(&self.store);
        let result = self.read_only_in(client, &mut txn, req);
        let reads = txn.into_reads().unwrap_or_default();
        let sb = key::superblock();
        let conflict = reads
            .keys
            .iter()
            .filter(|k| statfs || **k != sb)
            .any(|k| self.writes.written_after(k, committed))
            || reads
                .ranges
                .iter()
                .any(|(a, b)| self.writes.written_in_range_after(a, b, committed));
        (!conflict).then_some(result)
    }

    /// Runs read-only `req` in `txn`.
    fn read_only_in(
        &self,
        client: ClientId,
        txn: &mut Txn<'_, S>,
        req: Option<Request>,
    ) -> FsResult {
        let Some(req) = req.filter(|r| r.op.is_read_only()) else {
            return Err(Errno::EINVAL);
        };
        self.admit(client, &req)?;
        let outcome = inode::load_super(txn).and_then(|mut sb| {
            let now = Timestamp::from_micros(sb.clock_us);
            Exec {
                txn,
                sb: &mut sb,
                cfg: &self.cfg,
                cred: &req.cred,
                now,
                // Read-only operations take no locks; `Recalls` reads the caller's list.
                client,
                budget: 0,
                at: None,
                proofs_needed: Vec::new(),
            }
            .run_read_only(req.op)
        });
        match outcome {
            Ok(r) => Ok(r),
            Err(Fail::Errno(e)) => Err(e),
            Err(Fail::Store(e)) => Err(store_errno(&e)),
        }
    }

    /// Whether `client` may send `req` ([`crate::policy`]): `EPERM` if not.
    fn admit(&self, client: ClientId, req: &Request) -> Result<(), Errno> {
        self.grants.admit(
            &self.cfg.client_policy,
            client,
            &req.cred,
            &req.op,
            req.grant.as_ref(),
        )
    }

    fn local_failure(&mut self, f: Fail) -> FsResult {
        match f {
            Fail::Errno(e) => Err(e),
            Fail::Store(e) => {
                self.local_failures += 1;
                Err(store_errno(&e))
            }
        }
    }
}

/// The errno this replica answers for a local store failure.
fn store_errno(e: &StoreError) -> Errno {
    match e {
        StoreError::Full => Errno::ENOSPC,
        StoreError::Io(_) => Errno::EIO,
    }
}

impl<S: Store> Service for FileService<S> {
    /// getattr, lookup, access, readlink, read, readdir and statfs; anything undecodable is
    /// read-write (it executes as `EINVAL`).
    fn is_read_only(&self, op: &[u8]) -> bool {
        Request::decode(op).is_some_and(|r| r.op.is_read_only())
    }

    /// `max(now, last proposed + 1, last agreed + 1)` as 8 bytes LE.
    fn propose_nondet(&mut self, _seq: Seq, now: Time) -> Vec<u8> {
        let agreed = self.last_agreed_time();
        byzfs_bft::services::timestamp::propose(&mut self.last_proposed, agreed, now)
    }

    /// Exactly 8 bytes, above the last agreed timestamp, at most `clock_tolerance` after
    /// `now` and `clock_lag_tolerance` before it.
    fn check_nondet(&self, _seq: Seq, nondet: &[u8], now: Time) -> bool {
        let us = |d: core::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        byzfs_bft::services::timestamp::check_window(
            nondet,
            self.last_agreed_time(),
            now,
            us(self.cfg.clock_tolerance),
            us(self.cfg.clock_lag_tolerance),
        )
    }

    fn execute(&mut self, client: ClientId, op: &[u8], nondet: &[u8]) -> Vec<u8> {
        let r = self.execute_request_from(client, Request::decode(op), nondet);
        encode_result(&r)
    }

    fn execute_read_only(&self, client: ClientId, op: &[u8]) -> Vec<u8> {
        encode_result(&self.read_only_in(client, &mut Txn::new(&self.store), Request::decode(op)))
    }

    fn begin_batch(&mut self, seq: Seq, committed: Seq) {
        self.writes.begin_batch(seq, committed);
    }

    fn execute_read_only_committed(
        &self,
        client: ClientId,
        op: &[u8],
        committed: Seq,
    ) -> Option<Vec<u8>> {
        self.read_only_committed_from(client, Request::decode(op), committed)
            .map(|r| encode_result(&r))
    }

    fn partition_count(&self) -> u32 {
        self.store.partition_count()
    }

    fn checkpoint(&mut self, seq: Seq) -> Vec<Digest> {
        self.store.checkpoint(seq)
    }

    fn discard_checkpoints_below(&mut self, seq: Seq) {
        self.store.discard_checkpoints_below(seq)
    }

    fn rollback(&mut self) -> Option<Seq> {
        self.store.rollback()
    }

    fn current_partition_digests(&self) -> Vec<Digest> {
        self.store.current_digests()
    }

    fn checkpoint_partition_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        self.store.checkpoint_digests(seq)
    }

    fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>> {
        self.store.export_partition(seq, part)
    }

    fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool {
        self.store.import_partition(part, data, expected)
    }

    fn finish_import(&mut self, seq: Seq) -> Vec<Digest> {
        // The live state is now checkpoint `seq`, which is stable, so committed.
        self.writes.clear();
        self.store.finish_import(seq)
    }

    fn failure(&self) -> Option<String> {
        self.store.failure()
    }

    fn persists_state(&self) -> bool {
        self.store.persists()
    }

    fn persist(&mut self, stored: Seq) -> Result<Option<DiskWork>, String> {
        self.store.persist(stored).map_err(|e| e.to_string())
    }

    fn work_done(&mut self) -> Result<Option<DiskWork>, String> {
        self.store.work_done().map_err(|e| e.to_string())
    }

    fn recorded(&mut self, stored: Seq) -> Result<Option<DiskWork>, String> {
        self.store.recorded(stored).map_err(|e| e.to_string())
    }

    fn reopen(&mut self, seq: Seq) -> Result<Vec<Digest>, String> {
        self.writes.clear();
        self.store.reopen_at(seq).map_err(|e| e.to_string())
    }

    /// The store's ([`Store::counters`]).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.store.counters()
    }
}
