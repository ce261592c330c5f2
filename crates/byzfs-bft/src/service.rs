//! The boundary between the replication library and the replicated service
//! (docs/ARCHITECTURE.md "Crates, and what may depend on what": the file service sits behind
//! this trait, and the runtime drives any `Service`). The library knows nothing about files
//! or keys.
//!
//! State is exposed as a fixed number of *partitions*, each with a digest maintained
//! incrementally, so a checkpoint costs O(changes) and state transfer fetches only the
//! partitions that differ. The checkpoint digest is [`root_digest`] over the partition digests
//! (the library appends its own partitions — the reply cache — after the service's).

use crate::crypto::Digest;
use crate::ids::{ClientId, Seq};
use crate::time::Time;

/// Disk work a service that keeps its own state hands its driver (the `fdatasync` of what
/// it wrote, say): the driver runs it away from its event loop, one work at a time in the
/// order handed out, and reports each with [`Service::work_done`]. An error stops the
/// replica (its disk failed).
///
/// ```
/// use byzfs_bft::service::DiskWork;
/// let work = DiskWork::new(|| Ok(()));
/// assert_eq!(work.run(), Ok(()));
/// ```
pub struct DiskWork(Box<dyn FnOnce() -> Result<(), String> + Send>);

impl DiskWork {
    /// A work that runs `f`.
    pub fn new(f: impl FnOnce() -> Result<(), String> + Send + 'static) -> DiskWork {
        DiskWork(Box::new(f))
    }

    /// Runs it (on whatever thread the driver chooses).
    pub fn run(self) -> Result<(), String> {
        (self.0)()
    }
}

/// Runs `work`, and every work it leads to, on the caller's thread, reporting each to
/// `service` ([`Service::work_done`]): for a driver with no worker of its own (the
/// unreplicated server, the store benchmark). The first error stops it.
pub fn run_in_line<S: Service + ?Sized>(
    service: &mut S,
    mut work: Option<DiskWork>,
) -> Result<(), String> {
    while let Some(w) = work {
        w.run()?;
        work = service.work_done()?;
    }
    Ok(())
}

impl core::fmt::Debug for DiskWork {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("DiskWork")
    }
}

/// A deterministic state machine replicated by the library.
///
/// Every method must be a deterministic function of the state and its arguments: no clocks
/// (the agreed `nondet` carries time), no randomness, no host-specific data, no iteration over
/// unordered containers. Invalid operations must produce the same error result everywhere.
pub trait Service {
    /// Whether `op` only reads state. Decided from the operation itself, never from the
    /// client's read-only flag.
    fn is_read_only(&self, op: &[u8]) -> bool;

    /// Non-deterministic input the primary proposes for the batch at `seq` (e.g. a timestamp);
    /// `now` is the primary's clock. May return an empty vector.
    fn propose_nondet(&mut self, seq: Seq, now: Time) -> Vec<u8>;

    /// Whether a backup accepts the primary's proposal; `now` is the backup's clock.
    fn check_nondet(&self, seq: Seq, nondet: &[u8], now: Time) -> bool;

    /// Executes an ordered operation with the agreed non-deterministic input of its batch.
    fn execute(&mut self, client: ClientId, op: &[u8], nondet: &[u8]) -> Vec<u8>;

    /// Executes a read-only operation against the current state, without changing it.
    fn execute_read_only(&self, client: ClientId, op: &[u8]) -> Vec<u8>;

    /// Batch `seq` is about to execute (tentatively, committed, or replayed after a
    /// rollback); every batch up to `committed` is committed. A service that answers reads
    /// during tentative execution ([`Service::execute_read_only_committed`]) records from here
    /// which batch writes what (see [`crate::write_tracker::WriteTracker`]). Default: nothing.
    fn begin_batch(&mut self, _seq: Seq, _committed: Seq) {}

    /// Executes a read-only operation while the live state holds batches after `committed`
    /// that executed only tentatively. Returns the result only if it equals the result on the
    /// committed state — the operation read nothing those batches wrote — and `None`
    /// otherwise; the replica then answers once they commit (docs/PROTOCOL.md §1.8, per-object
    /// floor). Returning a result that depends on an uncommitted write is unsafe
    /// (ARCHITECTURE.md Deviations 6a has the counterexample). Default: `None`, always wait.
    fn execute_read_only_committed(
        &self,
        _client: ClientId,
        _op: &[u8],
        _committed: Seq,
    ) -> Option<Vec<u8>> {
        None
    }

    /// Number of state partitions (constant for the life of the service).
    fn partition_count(&self) -> u32;

    /// Takes a checkpoint of the current state at `seq` and returns its partition digests.
    /// Must cost O(changes since the previous checkpoint) (plus O(partitions)).
    fn checkpoint(&mut self, seq: Seq) -> Vec<Digest>;

    /// Forgets checkpoints older than `seq` (the new stable checkpoint).
    fn discard_checkpoints_below(&mut self, seq: Seq);

    /// Restores the state of the most recent checkpoint, undoing everything executed since
    /// (tentative execution). Returns that checkpoint's sequence number, or `None` if none is
    /// held (then the state is unchanged).
    fn rollback(&mut self) -> Option<Seq>;

    /// Partition digests of the current (live) state.
    fn current_partition_digests(&self) -> Vec<Digest>;

    /// Partition digests of a held checkpoint.
    fn checkpoint_partition_digests(&self, seq: Seq) -> Option<Vec<Digest>>;

    /// The content of partition `part` as of held checkpoint `seq`, encoded for transfer.
    fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>>;

    /// Replaces partition `part` of the live state with `data` if `data` decodes and its
    /// digest equals `expected`; returns whether it did. On `false` nothing changed.
    fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool;

    /// Ends a state transfer: the live state now equals checkpoint `seq`. Drops every other
    /// checkpoint, records this one, and returns its partition digests.
    fn finish_import(&mut self, seq: Seq) -> Vec<Digest>;

    /// A local failure after which this replica cannot continue consistently (say, the disk
    /// under the state failed inside `checkpoint`, which has no error channel), or `None`.
    /// A driver checks it after every step and, when set, stops the replica with this
    /// message before any of that step's actions are performed. Default: never.
    fn failure(&self) -> Option<String> {
        None
    }

    /// Whether the service keeps its own state durably and reopens it at start (a disk
    /// store), rather than having a disk driver store a copy of each stable checkpoint's
    /// content. When `true`, the replica's stored checkpoint images carry only this
    /// service's partition digests (the library's own partitions in full), the driver calls
    /// [`Service::persist`] before it records a stable checkpoint, and
    /// [`crate::Replica::restore`] calls [`Service::reopen`]. Default: `false`.
    fn persists_state(&self) -> bool {
        false
    }

    /// Makes the live state and every held checkpoint durable, or begins to. The driver
    /// calls it when a stable checkpoint `stored` is to be recorded (its
    /// [`crate::action::StoreRecord::Checkpoint`]) and commits that record only once this
    /// is done: at once with `Ok(None)`; with `Ok(Some(work))`, after `work` has run (the
    /// driver runs it away from its event loop, so that batches keep executing meanwhile,
    /// then calls [`Service::work_done`]). Until [`Service::recorded`] names a later
    /// checkpoint, the service must keep, through any crash, the checkpoint the previous
    /// `recorded` named (the driver's record names it until then), so that
    /// [`Service::reopen`] can return to it (docs/PROTOCOL.md §2.7). Default: nothing to do.
    #[must_use = "the work must run, and be reported, before the record it guards"]
    fn persist(&mut self, _stored: Seq) -> Result<Option<DiskWork>, String> {
        Ok(None)
    }

    /// The oldest [`DiskWork`] this service handed out (from any method) ran without an
    /// error; works run one at a time, in the order handed out. May hand out another.
    /// Default: nothing to do.
    #[must_use = "the work must run, and be reported, before the record it guards"]
    fn work_done(&mut self) -> Result<Option<DiskWork>, String> {
        Ok(None)
    }

    /// The driver's commit that records stable checkpoint `stored` is durable (after
    /// [`Service::persist`]`(stored)` and its work): the service keeps that checkpoint from
    /// now on and may drop what only the previously recorded one kept. Without this call
    /// that waits for the next stable checkpoint, which an idle cluster does not reach
    /// (docs/PROTOCOL.md §2.6). May hand out [`DiskWork`]. Default: nothing to do.
    #[must_use = "the work must run, and be reported, before the record it guards"]
    fn recorded(&mut self, _stored: Seq) -> Result<Option<DiskWork>, String> {
        Ok(None)
    }

    /// At start, before anything else: returns the reopened state to checkpoint `seq` (the
    /// one the driver recorded), which becomes the only held checkpoint, and returns its
    /// partition digests. Default: an error (nothing persists).
    fn reopen(&mut self, seq: Seq) -> Result<Vec<Digest>, String> {
        Err(format!(
            "the service keeps no state across a restart (asked for checkpoint {seq})"
        ))
    }

    /// The service's own counters, as named running totals (for instance what its store
    /// wrote): drivers show them beside the core's [`crate::replica::Stats`]. Never part of
    /// the replicated state (they may differ between replicas). Default: none.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// The checkpoint digest over a list of partition digests.
pub fn root_digest(parts: &[Digest]) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(b"byzfs state root v1");
    h.update(&(parts.len() as u64).to_le_bytes());
    for p in parts {
        h.update(&p.0);
    }
    Digest(*h.finalize().as_bytes())
}

/// Implements the state methods of [`Service`] (`partition_count` … `finish_import`) by
/// delegating to a [`crate::state::PartitionedState`] field: the services built on it differ
/// only in their operations.
///
/// ```
/// use byzfs_bft::service::Service;
/// use byzfs_bft::state::PartitionedState;
/// use byzfs_bft::{ClientId, Seq, Time};
///
/// struct Counter {
///     state: PartitionedState,
/// }
///
/// impl Service for Counter {
///     fn is_read_only(&self, op: &[u8]) -> bool {
///         op.is_empty()
///     }
///     fn propose_nondet(&mut self, _seq: Seq, _now: Time) -> Vec<u8> {
///         Vec::new()
///     }
///     fn check_nondet(&self, _seq: Seq, nondet: &[u8], _now: Time) -> bool {
///         nondet.is_empty()
///     }
///     fn execute(&mut self, _c: ClientId, _op: &[u8], _nondet: &[u8]) -> Vec<u8> {
///         let n = self.state.get(b"n").map_or(0, |v| v.len());
///         self.state.put(b"n".to_vec(), vec![0; n + 1]);
///         Vec::new()
///     }
///     fn execute_read_only(&self, _c: ClientId, _op: &[u8]) -> Vec<u8> {
///         Vec::new()
///     }
///     byzfs_bft::delegate_state!(state);
/// }
/// ```
#[macro_export]
macro_rules! delegate_state {
    ($field:ident) => {
        fn partition_count(&self) -> u32 {
            self.$field.partition_count()
        }
        fn checkpoint(&mut self, seq: $crate::ids::Seq) -> Vec<$crate::crypto::Digest> {
            self.$field.checkpoint(seq)
        }
        fn discard_checkpoints_below(&mut self, seq: $crate::ids::Seq) {
            self.$field.discard_checkpoints_below(seq)
        }
        fn rollback(&mut self) -> Option<$crate::ids::Seq> {
            self.$field.rollback()
        }
        fn current_partition_digests(&self) -> Vec<$crate::crypto::Digest> {
            self.$field.current_digests()
        }
        fn checkpoint_partition_digests(
            &self,
            seq: $crate::ids::Seq,
        ) -> Option<Vec<$crate::crypto::Digest>> {
            self.$field.checkpoint_digests(seq)
        }
        fn export_partition(&self, seq: $crate::ids::Seq, part: u32) -> Option<Vec<u8>> {
            self.$field.export_partition(seq, part)
        }
        fn import_partition(
            &mut self,
            part: u32,
            data: &[u8],
            expected: $crate::crypto::Digest,
        ) -> bool {
            self.$field.import_partition(part, data, expected)
        }
        fn finish_import(&mut self, seq: $crate::ids::Seq) -> Vec<$crate::crypto::Digest> {
            self.$field.finish_import(seq)
        }
    };
}
