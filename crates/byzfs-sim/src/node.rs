//! The simulated nodes: replica instances (honest, Byzantine, twin; up or crashed) and clients
//! (correct, driven by the workload; or faulty). Nodes own their clocks, timers and durable
//! records; the simulator ([`crate::run()`]) moves frames between them.

use crate::byzantine::bad_client::BadClient;
use crate::byzantine::forge::Forger;
use crate::byzantine::Strategy;
use crate::checker::Role;
use crate::clock::Clock;
use crate::fs::FsWorkload;
use crate::kv::{KvOp, KvResult};
use crate::rng::SimRng;
use crate::service::SimService;
use crate::workload::Workload;
use byzfs_bft::replica::DurableState;
use byzfs_bft::{
    Client, ClientId, Config, PersistRecord, Replica, ReplicaId, ReplicaKeys, RequestId,
    StoreRecord, Time,
};
use std::collections::BTreeMap;

/// A Byzantine replica's adversary state.
pub struct Adversary {
    /// The strategy.
    pub strategy: Box<dyn Strategy>,
    /// Its keys, for re-authentication.
    pub forger: Forger,
    /// Its random stream.
    pub rng: SimRng,
}

/// One replica instance.
pub struct ReplicaNode {
    /// Replica id (twins share one).
    pub id: ReplicaId,
    /// How the oracle judges it.
    pub role: Role,
    /// The state machine (kept while crashed, for a restart with state).
    pub replica: Replica<SimService>,
    /// Running (not crashed, started).
    pub up: bool,
    /// Crash just before the next send.
    pub crash_at_next_send: bool,
    /// Crash just after the next PREPARE sent, and restart after this downtime (µs); with
    /// the time of the order, which its lapse names.
    pub crash_after_prepare: Option<(u64, Time)>,
    /// Crash just after the next PRE-PREPARE sent, and restart after this downtime (µs);
    /// with the time of the order, which its lapse names.
    pub crash_after_proposal: Option<(u64, Time)>,
    /// Power-cut every replica this long (µs) after this one next installs a fetched
    /// checkpoint, all down for the second (µs), the third losing its disk; with the time
    /// of the order, which its lapse names.
    pub cut_all_after_transfer: Option<(u64, u64, Option<usize>, Time)>,
    /// Restart mode decided at crash time.
    pub restart_with_state: bool,
    /// Its clock.
    pub clock: Clock,
    /// The clock offset its next restart reads, if it steps then.
    pub clock_at_restart: Option<i64>,
    /// The armed timer (global time) and its generation.
    pub timer: Option<Time>,
    /// Generation of the armed timer; stale timer events carry an older one.
    pub timer_gen: u64,
    /// Adversary, for Byzantine replicas.
    pub adversary: Option<Adversary>,
    /// Its keys (restarts).
    pub keys: ReplicaKeys,
    /// Restarts so far (derives fresh RNG seeds).
    pub restarts: u64,
    /// Base RNG seed.
    pub seed: u64,
    /// Its disk: every `Persist` and `Store` record drained so far (lost on an amnesia
    /// restart), except those in `unsynced`.
    pub disk: DurableState,
    /// Log appends not yet synced, as `byzfs-net`'s disk driver leaves them: `Executed`
    /// records, and the primary's `Proposed` records with the bodies stored with them. The
    /// next synced append makes them durable; a crash keeps only a prefix of them (a torn log
    /// tail).
    pub unsynced: Vec<Unsynced>,
    /// Whether this drain's last promise was a `Proposed`: the driver appends its batch
    /// bodies without a sync too.
    pub lazy_turn: bool,
    /// Whether its last crash kept every unsynced append, as a killed process on a machine
    /// that did not restart does: the disk driver then vouches for its proposals
    /// (`DurableState::proposals_durable`, the same boot id), and a restarted primary keeps
    /// its view.
    pub kept_all: bool,
    /// The disk under its file service's store (`fs-disk-…` families; unused by the others).
    pub store_disk: crate::fs::disk::SimDisk,
    /// Its service's disk work, run after a delay as the disk driver's worker runs it
    /// away from the event loop (`byzfs-net` `disk_worker.rs`), and the stable checkpoints'
    /// records waiting for it (`run/disk_work.rs`).
    pub disk_work: crate::disk_queue::DiskWorkQueue,
}

/// One unsynced log append.
#[derive(Clone, Debug)]
pub enum Unsynced {
    /// A record.
    Persist(PersistRecord),
    /// A batch body.
    Store(StoreRecord),
}

/// One correct client.
pub struct ClientNode {
    /// Its id.
    pub id: ClientId,
    /// The state machine.
    pub client: Client,
    /// Its operation generator.
    pub workload: Load,
    /// The outstanding requests by the id `invoke` returned: invocation time, encoded
    /// operation.
    pub outstanding: BTreeMap<RequestId, (Time, Vec<u8>)>,
    /// How many requests it keeps in flight (1 is one at a time; at most
    /// `Config::client_window`).
    pub window: usize,
    /// Operations completed.
    pub completed: u64,
    /// Operations invoked.
    pub invoked: u64,
    /// Invocations refused by the client.
    pub refused: u64,
    /// Completions needed by the end of the liveness phase (set when it starts).
    pub target: u64,
    /// Armed timer and generation.
    pub timer: Option<Time>,
    /// Generation of the armed timer.
    pub timer_gen: u64,
    /// A think event is pending.
    pub thinking: bool,
}

/// A correct client's operation generator, for the service the run replicates.
#[derive(Debug)]
pub enum Load {
    /// Key-value operations.
    Kv(Workload),
    /// File operations.
    Fs(FsWorkload),
}

impl Load {
    /// Think time before the next operation, µs; with `pacing`, sometimes a longer pause.
    pub fn think_us(&mut self, pacing: bool) -> u64 {
        match self {
            Load::Kv(w) => w.think_us(pacing),
            Load::Fs(w) => w.think_us(pacing),
        }
    }

    /// The next operation, encoded, and whether to send it read-only.
    pub fn next_op(&mut self) -> (Vec<u8>, bool) {
        match self {
            Load::Kv(w) => {
                let (op, ro) = w.next_op();
                (op.encode(), ro)
            }
            Load::Fs(w) => w.next_op(),
        }
    }

    /// Learns from a completed operation.
    pub fn observe(&mut self, op: &[u8], result: &[u8]) {
        match self {
            Load::Kv(w) => {
                if let (Some(op), Some(res)) = (KvOp::decode(op), KvResult::decode(result)) {
                    w.observe(&op, &res);
                }
            }
            Load::Fs(w) => w.observe(result),
        }
    }
}

/// One faulty client.
pub struct BadClientNode {
    /// The adversary.
    pub client: BadClient,
    /// Period between misbehaviours, µs.
    pub period_us: u64,
}

/// Crash and restart keeping what the replica persisted: it is rebuilt from its disk
/// (`Replica::restore`: stored stable checkpoint, batch bodies, promises, committed batches
/// re-executed) over a fresh `service`; everything else it held is lost.
pub fn restart_with_state(
    config: &Config,
    keys: &ReplicaKeys,
    service: SimService,
    disk: &DurableState,
    seed: u64,
    now: Time,
) -> Replica<SimService> {
    match Replica::restore(
        config.clone(),
        keys.clone(),
        service,
        disk.clone(),
        seed,
        now,
    ) {
        Ok(r) => r,
        // The simulated disk holds exactly what the replica emitted: a failure is a bug.
        Err(e) => panic!("restore from the simulated disk failed: {e}"),
    }
}
