//! The PBFT replica state machine (docs/PROTOCOL.md §1–3).
//!
//! Methods come in the four kinds of quinn-proto's `Connection` (docs/STYLE.md): getters;
//! `handle_*` for inputs (each takes `now`); `restart_from_durable` / `add_client` mutators;
//! and `poll_*` for outputs. After every `handle_*` call the driver reports a step that took
//! long (`busy_for`), drains `poll_action` in order (honouring the Persist-before-send
//! contract of [`crate::action`]) and re-arms its timer from `poll_timeout`.
//!
//! The implementation is split by protocol phase, one file each: `normal.rs` (requests,
//! PRE-PREPARE, PREPARE, COMMIT), `execute.rs` (tentative/committed/read-only execution and
//! replies), `checkpoint.rs`, `view_change.rs`, [`new_view`] (the pure decision procedure,
//! and NEW-VIEW's construction, checking and install), `state_transfer.rs`, `status.rs`
//! (retransmission), `auth.rs` (what each message kind must carry, client signatures),
//! `durable.rs` (the records a driver keeps) and `restart.rs` (rebuilding from them).
//!
//! The state is grouped by what each protocol step owns, one struct per group in its own
//! file, and a handler borrows its part (`self.log.slots`, `self.requests.pending`):
//! `view_status.rs` (the view, whether its NEW-VIEW is held, the low bound), `log.rs` (the
//! slots, each a `slot.rs` entry; the execution marks; the batch bodies; frames held for just
//! above the window), `requests.rs` (stored requests and their way to a sequence number:
//! queue, proposed, pending, big ones forwarded, blacklisted clients), `read_only.rs` (the
//! read-only floor and the reads waiting for it), `checkpoint.rs`, `view_change.rs`,
//! `state_transfer.rs` (the fetch, the lender), `catch_up.rs` (other views' COMMITs),
//! `peers.rs` (what the peers' STATUS reports, when to answer their asks), `storage.rs` (the
//! durable promises and what the driver stores), `monitor.rs` and `timers.rs`. `Replica`
//! itself keeps what every step shares: configuration, keys, the service and the library
//! state, the RNG, the time, counters and the output queue.

mod answer_gap;
mod auth;
mod catch_up;
mod checkpoint;
mod durable;
mod execute;
mod idle;
mod log;
mod monitor;
pub mod new_view;
mod normal;
mod peers;
mod read_only;
mod relay_fan_out;
mod reply_cache;
mod request_store;
mod requests;
mod restart;
mod slot;
mod state_transfer;
mod status;
mod storage;
mod timers;
mod uplink;
mod view_change;
mod view_status;
pub mod walk;

#[cfg(test)]
mod tests;

use crate::action::{Action, DropReason, Event};
use crate::config::Config;
use crate::crypto::{Digest, MacKey, ReplicaKeys};
use crate::ids::{ClientId, Principal, ReplicaId, RequestId, Seq, View};
use crate::message::Message;
use crate::service::{root_digest, Service};
use crate::state::PartitionedState;
use crate::time::Time;
use crate::wire::Frame;
use core::time::Duration;
use ed25519_dalek::VerifyingKey;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use auth::AuthChoice;
pub use durable::{record_seq, DurableState, RestoreError, StoredBatch, StoredCheckpoint};
use log::Log;
use peers::Peers;
use read_only::ReadOnly;
use requests::Requests;
use state_transfer::FetchState;
use storage::Storage;
use timers::{TimerKind, Timers};
use view_change::ViewChangeState;
use view_status::ViewStatus;

/// Partitions of the library's own checkpointed state (the reply cache).
const LIB_PARTITIONS: u32 = 16;
/// Bound on queued read-only requests.
const RO_QUEUE_MAX: usize = 4096;
/// Bound on big requests stored without being ordered yet.
const LOOSE_REQUESTS_MAX: usize = 65536;

/// Counters kept by the core; the driver exports them as metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests executed in committed batches.
    pub requests_executed: u64,
    /// Requests of committed batches skipped because the client's earlier request they
    /// must follow had not run (docs/PROTOCOL.md §1.6, "several requests in flight").
    pub requests_out_of_order: u64,
    /// Read-only requests executed without ordering.
    pub read_only_executed: u64,
    /// Of those, answered while a batch had executed only tentatively (the service showed
    /// they read nothing it wrote).
    pub read_only_on_tentative: u64,
    /// Read-only requests that could not run on arrival and were queued.
    pub read_only_queued: u64,
    /// Batches committed.
    pub batches_committed: u64,
    /// Of those, batches run on `2f+1` COMMITs of a view this replica had left
    /// (`catch_up.rs`, docs/PROTOCOL.md §3.8).
    pub batches_caught_up: u64,
    /// Pre-prepares sent (as primary).
    pub pre_prepares_sent: u64,
    /// Quiet spells this replica, as primary, ended with null batches up to the next
    /// checkpoint (`replica/idle.rs`).
    pub idle_checkpoints: u64,
    /// PREPAREs sent (as a backup; retransmissions not counted).
    pub prepares_sent: u64,
    /// PREPAREs withheld: slots a backup restored after a power cut did not vote in, at or
    /// below its vote horizon ([`PersistRecord::AbstainUpTo`]).
    ///
    /// [`PersistRecord::AbstainUpTo`]: crate::action::PersistRecord::AbstainUpTo
    pub prepares_withheld: u64,
    /// [`PersistRecord::VoteHorizon`] records written (each costs its vote a sync).
    ///
    /// [`PersistRecord::VoteHorizon`]: crate::action::PersistRecord::VoteHorizon
    pub vote_horizons: u64,
    /// Requests in those pre-prepares (batch sizes).
    pub batched_requests: u64,
    /// View changes started.
    pub view_changes: u64,
    /// NEW-VIEWs installed.
    pub views_installed: u64,
    /// Checkpoints that became stable.
    pub checkpoints_stable: u64,
    /// State transfers completed.
    pub state_transfers: u64,
    /// Partition chunks received and accepted during state transfer (a partition larger than
    /// `state_chunk_bytes` takes several).
    pub state_chunks_fetched: u64,
    /// Partitions imported during state transfer.
    pub state_parts_fetched: u64,
    /// Tentative executions rolled back.
    pub rollbacks: u64,
    /// Inputs dropped, all reasons together (the sum of `dropped`; a driver compares it
    /// around a call to tell whether the input was of any use).
    pub inputs_dropped: u64,
    /// View changes this replica started because the primary's throughput fell short
    /// under load (`replica/monitor.rs`).
    pub monitor_complaints: u64,
    /// Steps the driver reported as having kept the replica busy ([`Replica::busy_for`]).
    pub busy_steps: u64,
    /// Inputs dropped, by reason.
    pub dropped: BTreeMap<DropReason, u64>,
    /// Client request signatures verified (docs/PROTOCOL.md §5.3; the MAC is checked first).
    pub client_signatures_verified: u64,
    /// Client request signatures a backup did not check on receipt: its MAC vouched for the
    /// request and the backup neither orders nor vouches for it (see `on_request`).
    pub client_signatures_deferred: u64,
    /// Big request bodies this replica relayed as primary, for a client that sent them to it
    /// alone (`Config::relay_big_requests`), to the backups of its fan-out.
    pub bodies_relayed: u64,
    /// Relayed bodies this replica passed on as a backup, to the backup its fan-out's
    /// places after it (`Config::relay_fan_out`).
    pub bodies_passed_on: u64,
    /// Clients blacklisted: a request whose MAC verified carried a bad signature.
    pub clients_blacklisted: u64,
}

/// A request the replica holds: the client's authenticated frame and its decoded fields.
#[derive(Clone, Debug)]
pub(crate) struct StoredRequest {
    pub frame: Arc<[u8]>,
    pub client: ClientId,
    pub rid: RequestId,
    /// The client's request this one must follow ([`crate::message::Request::after`]).
    pub after: RequestId,
    pub digest: Digest,
    pub big: bool,
    /// Whether the frame's client signature was verified (or its client does not sign): a
    /// backup defers the check until the request must be transferable (`signature_checked`).
    pub sig_checked: bool,
    /// Only a copy flagged [`crate::client::FLAG_RELAY`] reached this replica: no replica
    /// waits on it (no view-change timer, no demand for `monitor.rs`) until the client's
    /// own copy arrives by its retransmission (ARCHITECTURE.md Deviation 33).
    pub relayed: bool,
}

/// A PBFT replica.
pub struct Replica<S: Service> {
    config: Config,
    keys: ReplicaKeys,
    me: ReplicaId,
    service: S,
    /// Library state inside every checkpoint: the reply cache (docs/PROTOCOL.md §1.6).
    lib: PartitionedState,
    rng: ChaCha8Rng,
    now: Time,
    stats: Stats,
    out: VecDeque<Action>,
    timers: Timers,
    #[cfg(feature = "mutations")]
    mutation: Option<crate::mutation::Mutation>,

    /// The current view and whether it is installed (`view_status.rs`).
    view: ViewStatus,
    /// The slots, the execution marks and the batch bodies (`log.rs`).
    log: Log,
    /// Client requests and their ordering bookkeeping (`requests.rs`).
    requests: Requests,
    /// Reads waiting to run, and their floor (`read_only.rs`).
    read_only: ReadOnly,

    // Checkpoints.
    checkpoints: checkpoint::Checkpoints,

    // View change.
    vc: ViewChangeState,

    // State transfer.
    fetch: Option<FetchState>,
    /// What this replica serves to fetchers: the partition being sent in chunks, and the
    /// checkpoints lent to lagging replicas (held a while past their stability).
    lender: state_transfer::Lender,
    /// COMMITs of other views for the slots just above what we executed (`catch_up.rs`).
    foreign: catch_up::ForeignCommits,

    /// The peers' reported progress, and the pace of our answers to them (`peers.rs`).
    peers: Peers,
    /// What was made durable through the driver (`storage.rs`).
    storage: Storage,
    /// The watch on the primary's throughput.
    monitor: monitor::Monitor,
}

impl<S: Service> Replica<S> {
    /// A fresh replica (empty log, view 0) over `service` in its initial state. All correct
    /// replicas must start from the same initial service state.
    pub fn new(config: Config, keys: ReplicaKeys, service: S, rng_seed: u64, now: Time) -> Self {
        let mut r = Self::blank(
            config,
            keys,
            service,
            PartitionedState::new(LIB_PARTITIONS),
            rng_seed,
            now,
        );
        // The initial state is checkpoint 0, identical at every correct replica; it anchors
        // the first view change and state transfer.
        let digest = r.take_checkpoint(0);
        r.checkpoints.set_own(0, digest);
        r.timers
            .set(TimerKind::Status, now + r.config.status_interval);
        r.monitor_view_start();
        r
    }

    fn blank(
        config: Config,
        keys: ReplicaKeys,
        service: S,
        lib: PartitionedState,
        rng_seed: u64,
        now: Time,
    ) -> Self {
        let me = keys.me;
        let vc_timeout = config.view_change_timeout;
        Replica {
            me,
            keys,
            service,
            lib,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            now,
            stats: Stats::default(),
            out: VecDeque::new(),
            timers: Timers::default(),
            #[cfg(feature = "mutations")]
            mutation: None,
            view: ViewStatus::default(),
            log: Log::default(),
            requests: Requests::default(),
            read_only: ReadOnly::default(),
            checkpoints: checkpoint::Checkpoints::default(),
            vc: ViewChangeState::new(vc_timeout),
            fetch: None,
            lender: state_transfer::Lender::default(),
            foreign: catch_up::ForeignCommits::default(),
            peers: Peers::default(),
            storage: Storage::default(),
            monitor: monitor::Monitor::default(),
            config,
        }
    }

    /// Handles one received frame (from a replica or a client). Invalid input is dropped and
    /// counted; it never panics.
    pub fn handle_message(&mut self, now: Time, bytes: &[u8]) {
        self.now = now;
        self.handle_frame(bytes);
        self.handle_ahead();
    }

    /// [`Replica::handle_message`] for one frame.
    fn handle_frame(&mut self, bytes: &[u8]) {
        let frame = match Frame::parse(bytes, self.config.message_bytes_max) {
            Ok(f) => f,
            Err(_) => return self.drop_input(DropReason::Malformed),
        };
        if frame.header.epoch != self.config.epoch {
            return self.drop_input(DropReason::WrongEpoch);
        }
        if !self.authentic(&frame) {
            return self.drop_input(DropReason::BadAuth);
        }
        let msg = match frame.decode() {
            Ok(m) => m,
            Err(_) => return self.drop_input(DropReason::Malformed),
        };
        // The body must name the authenticated sender: a replica cannot speak for another.
        let sender_ok = match (&msg, frame.header.sender) {
            (Message::Request(m), Principal::Client(c)) => m.client == c,
            (Message::Reply(_), _) => false,
            (Message::PrePrepare(_), Principal::Replica(_)) => true,
            (Message::Prepare(m), Principal::Replica(j)) => m.replica == j,
            (Message::Commit(m), Principal::Replica(j)) => m.replica == j,
            (Message::Checkpoint(m), Principal::Replica(j)) => m.replica == j,
            (Message::ViewChange(m), Principal::Replica(j)) => m.replica == j,
            (Message::NewView(_), Principal::Replica(_)) => true,
            (Message::Status(m), Principal::Replica(j)) => m.replica == j,
            (Message::Fetch(m), Principal::Replica(j)) => m.replica == j,
            (Message::BatchData(m), Principal::Replica(j)) => m.replica == j,
            (Message::StateMeta(m), Principal::Replica(j)) => m.replica == j,
            (Message::StatePart(m), Principal::Replica(j)) => m.replica == j,
            _ => false,
        };
        if !sender_ok {
            return self.drop_input(DropReason::Invalid);
        }
        if self.hold_ahead(&msg, frame.header.sender, bytes) {
            return self.drop_input(DropReason::OutOfWindow);
        }
        match msg {
            Message::Request(m) => self.on_request(&frame, m, bytes),
            Message::PrePrepare(m) => self.on_pre_prepare(&frame, m, bytes),
            Message::Prepare(m) => self.on_prepare(m),
            Message::Commit(m) => self.on_commit(m),
            Message::Checkpoint(m) => self.on_checkpoint(m, bytes),
            Message::ViewChange(m) => self.on_view_change(m, bytes),
            Message::NewView(m) => self.on_new_view(&frame, m, bytes),
            Message::Status(m) => self.on_status(m),
            Message::Fetch(m) => self.on_fetch(m),
            Message::BatchData(m) => self.on_batch_data(m),
            Message::StateMeta(m) => self.on_state_meta(m),
            Message::StatePart(m) => self.on_state_part(m),
            Message::Reply(_) => self.drop_input(DropReason::Invalid),
        }
        self.check_invariants();
    }

    /// Handles timer expiry (call when `now >= poll_timeout()`).
    pub fn handle_timeout(&mut self, now: Time) {
        self.now = now;
        for kind in self.timers.expired(now) {
            match kind {
                TimerKind::Status => {
                    self.send_status();
                    self.timers
                        .set(TimerKind::Status, now + self.config.status_interval);
                    // A primary that held its batches while its bodies crossed
                    // (`uplink.rs`: only when the links' rate is stated) looks again.
                    if self.config.link_rate_stated() {
                        self.try_send_pre_prepare();
                    }
                }
                TimerKind::ViewChange => self.on_view_change_timeout(),
                TimerKind::Fetch => self.on_fetch_timer(),
                TimerKind::Monitor => self.on_monitor_timeout(),
                TimerKind::Idle => self.on_idle_timeout(),
            }
        }
        self.check_invariants();
        self.handle_ahead();
    }

    /// Keeps a PRE-PREPARE, PREPARE or COMMIT of our view for a slot above the log window
    /// but within one checkpoint interval of the stable checkpoint's window: the next stable
    /// checkpoint (or the record of this one, §2.7) will move the window over it, often a moment later (the others' CHECKPOINTs are on the way). Dropped,
    /// it came back only when our STATUS showed no progress, and a replica that had just
    /// executed a long request could not show that before its view-change timer ran out
    /// (simulator: slow-execution 985, a PRE-PREPARE 223 µs ahead of the window). Bounded:
    /// one frame per slot, sender and kind. Handled as new when the window reaches it.
    fn hold_ahead(&mut self, msg: &Message, sender: Principal, bytes: &[u8]) -> bool {
        let Principal::Replica(from) = sender else {
            return false;
        };
        let (view, seq, tag) = match msg {
            Message::PrePrepare(m) => (m.view, m.seq, 0),
            Message::Prepare(m) => (m.view, m.seq, 1),
            Message::Commit(m) => (m.view, m.seq, 2),
            _ => return false,
        };
        let high = self.window_base() + self.config.log_window;
        // One interval past the stable checkpoint's window; the window may also wait for
        // that checkpoint's record (docs/PROTOCOL.md §2.7).
        let reach = self.log.last_stable + self.config.log_window + self.config.checkpoint_interval;
        if view != self.view.current || seq <= high || seq > reach {
            return false;
        }
        self.log.ahead.insert((seq, from, tag), Arc::from(bytes));
        true
    }

    /// Handles the held frames the log window now covers (see `hold_ahead`).
    fn handle_ahead(&mut self) {
        let high = self.window_base() + self.config.log_window;
        while let Some(e) = self.log.ahead.first_entry() {
            if e.key().0 > high {
                break;
            }
            let bytes = e.remove();
            self.handle_frame(&bytes);
        }
    }

    /// Tells the replica that the driver cannot reach replica `peer` (`reachable` false:
    /// a connection attempt to it was refused or failed, as when its process died) or can
    /// again (true). While the primary of the installed view is unreachable, a request
    /// waiting here moves this replica to the next view after
    /// [`Config::unreachable_primary_timeout`] instead of the whole view-change timeout
    /// (docs/PROTOCOL.md §3.1, "An unreachable primary"); reported reachable again before
    /// then, the timer goes back to where it stood. A false report costs at most a view
    /// change this replica starts early; it never blames the primary for others.
    ///
    /// ```
    /// # use byzfs_bft::{Replica, Time};
    /// # fn driver<S: byzfs_bft::Service>(r: &mut Replica<S>, now: Time) {
    /// // The outbound link to replica 0 failed to reconnect: connection refused.
    /// r.handle_reachability(now, 0, false);
    /// // … and later came up again.
    /// r.handle_reachability(now, 0, true);
    /// # }
    /// ```
    pub fn handle_reachability(&mut self, now: Time, peer: ReplicaId, reachable: bool) {
        self.now = now;
        self.on_reachability(peer, reachable);
        self.check_invariants();
    }

    /// Tells the replica that its last step — the `handle_*` call just made — kept it busy
    /// for `busy` (wall time the driver measured), time in which it could take no input.
    /// A driver calls it after a step that took long, typically one that executed an
    /// expensive request, before it re-arms its timer from [`Self::poll_timeout`].
    ///
    /// A replica that is executing is not a faulty primary. Execution runs inside the step,
    /// and the core never reads a clock (ARCHITECTURE.md, "The sans-IO contract"): the step
    /// armed its timers from the `now` it was given, and the view-change timer armed before
    /// it kept running through it. Every replica executes the same request and is busy about
    /// as long, so after such a step the view-change timer would expire at once, before the
    /// COMMITs and the next PRE-PREPARE that arrived meanwhile were processed, and blame a
    /// correct primary for time spent executing (docs/PROTOCOL.md §3.1: the timer waits for a
    /// request to *execute*; tentative execution does not stop it). So the running
    /// view-change timer is pushed back by `busy`.
    ///
    /// Only that timer, the one whose expiry blames another replica. The STATUS and fetch
    /// timers retransmit or rotate the replier: firing late, or at once after a long step,
    /// blames no one.
    ///
    /// The cap: each arming of the view-change timer (each progress, each view change)
    /// may be pushed back by at most `view_change_timeout_max` in all, so a replica that is
    /// busy for ever — or a driver that over-reports — still replaces a silent primary, at
    /// most that much later.
    pub fn busy_for(&mut self, busy: Duration) {
        if busy.is_zero() {
            return;
        }
        self.stats.busy_steps += 1;
        self.push_back_vtimer(busy);
        self.monitor_busy();
    }

    /// The earliest deadline at which `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.timers.next()
    }

    /// The next output, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.out.pop_front()
    }

    /// Installs a client's keys: its MAC keys (`to_client`: replica → client; `from_client`:
    /// client → replica) and the Ed25519 key that verifies its request signatures (`public`,
    /// from its certificate: every replica must install the same one). The driver calls it
    /// once it has checked the client's credentials. A client installed without a public key
    /// is MAC-only (see [`ReplicaKeys::client_public`]).
    pub fn add_client(
        &mut self,
        client: ClientId,
        to_client: MacKey,
        from_client: MacKey,
        public: Option<VerifyingKey>,
    ) {
        self.keys.clients.insert(client, (to_client, from_client));
        match public {
            Some(k) => self.keys.client_public.insert(client, k),
            None => self.keys.client_public.remove(&client),
        };
    }

    /// Forgets a client's keys (a disconnected session); its reply-cache entry, which is
    /// replicated state, stays, and so does a blacklisting.
    pub fn remove_client(&mut self, client: ClientId) {
        self.keys.clients.remove(&client);
        self.keys.client_public.remove(&client);
    }

    /// Whether this replica holds proof that `client` is faulty (a request whose MAC verified
    /// carried a bad signature). The core keeps processing the client's validly signed
    /// requests, since other replicas may have forwarded them (dropping them would let the
    /// client frame this replica as a primary that ignores requests); a driver may shed the
    /// client's own connection.
    pub fn is_blacklisted(&self, client: ClientId) -> bool {
        self.requests.blacklist.contains(&client)
    }

    /// This replica's id.
    pub fn id(&self) -> ReplicaId {
        self.me
    }
    /// Current view.
    pub fn view(&self) -> View {
        self.view.current
    }
    /// Whether the replica holds the NEW-VIEW of its current view (not in view-change limbo).
    pub fn has_new_view(&self) -> bool {
        self.view.has_new_view
    }
    /// The sequence number up to which it withholds its PREPAREs in its view, restored after
    /// a power cut ([`PersistRecord::AbstainUpTo`]); `None` once it has executed past it, or
    /// if it does not abstain. Meanwhile the cluster tolerates one faulty backup fewer.
    ///
    /// [`PersistRecord::AbstainUpTo`]: crate::action::PersistRecord::AbstainUpTo
    pub fn withholds_prepares_up_to(&self) -> Option<Seq> {
        self.storage
            .durable
            .abstain
            .filter(|&(v, up_to)| v == self.view.current && up_to > self.log.last_executed)
            .map(|(_, up_to)| up_to)
    }
    /// Last committed-and-executed sequence number.
    pub fn last_executed(&self) -> Seq {
        self.log.last_executed
    }
    /// Last tentatively executed sequence number (≥ `last_executed`).
    pub fn last_tentative(&self) -> Seq {
        self.log.last_tentative
    }
    /// Last stable checkpoint `h`.
    pub fn last_stable(&self) -> Seq {
        self.log.last_stable
    }
    /// Whether the replica is fetching state.
    pub fn is_fetching(&self) -> bool {
        self.fetch.is_some()
    }
    /// Digest of the live state (service and reply cache), as a checkpoint taken now would have.
    pub fn state_digest(&self) -> Digest {
        let mut parts = self.service.current_partition_digests();
        parts.extend(self.lib.current_digests());
        root_digest(&parts)
    }
    /// Digest of the last stable checkpoint (`None` only while a state transfer replaces it).
    pub fn stable_digest(&self) -> Option<Digest> {
        self.checkpoints.own.get(&self.log.last_stable).copied()
    }
    /// The partition digests of held checkpoint `seq` — the service's, then the library's —
    /// as a STATE-META for it carries them; their [`root_digest`] is the checkpoint digest.
    pub fn checkpoint_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        let mut parts = self.service.checkpoint_partition_digests(seq)?;
        parts.extend(self.lib.checkpoint_digests(seq)?);
        Some(parts)
    }
    /// How many requests of client `c` count against its share of the request store
    /// (`replica::request_store`): those stored that cannot run here yet — the request they
    /// follow has not run — and are not bodies a logged batch names (the simulator checks
    /// the share).
    pub fn stored_requests(&self, c: ClientId) -> usize {
        let last = reply_cache::last(&self.lib, c).map_or(0, |(rid, _)| rid);
        self.requests
            .store
            .after(c, last)
            .filter(|r| r.after > last && !(r.big && self.body_in_log(&r.digest)))
            .count()
    }
    /// Requests a client may have stored here: [`request_store::STORED_PER_WINDOW`] windows.
    fn client_share(&self) -> usize {
        request_store::STORED_PER_WINDOW * self.config.client_window as usize
    }
    /// The service.
    pub fn service(&self) -> &S {
        &self.service
    }
    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// The primary of the current view.
    pub fn primary(&self) -> ReplicaId {
        self.config.primary(self.view.current)
    }
    /// Switches a deliberately broken rule on (test-only).
    #[cfg(feature = "mutations")]
    pub fn set_mutation(&mut self, m: Option<crate::mutation::Mutation>) {
        self.mutation = m;
    }

    // ----- helpers shared by the phase modules -----

    #[cfg(feature = "mutations")]
    pub(crate) fn mutated(&self, m: crate::mutation::Mutation) -> bool {
        self.mutation == Some(m)
    }

    #[cfg(not(feature = "mutations"))]
    #[inline(always)]
    pub(crate) fn mutated(&self, _m: MutationStub) -> bool {
        false
    }

    /// Whether it sends no new PREPARE at `seq` in its view: it was restored in this view
    /// from records that may lack a vote at `seq` (`PersistRecord::AbstainUpTo`).
    fn abstains_at(&self, seq: Seq) -> bool {
        self.storage
            .durable
            .abstain
            .is_some_and(|(v, up_to)| v == self.view.current && seq <= up_to)
            && !self.mutated(M::VoteAfterUntrustedRestore)
    }

    fn is_primary(&self) -> bool {
        self.primary() == self.me
    }

    fn n(&self) -> usize {
        self.config.n()
    }

    fn f(&self) -> usize {
        self.config.f as usize
    }

    fn drop_input(&mut self, why: DropReason) {
        *self.stats.dropped.entry(why).or_insert(0) += 1;
        self.stats.inputs_dropped += 1;
        tracing::debug!(replica = self.me, ?why, "dropped input");
        self.out.push_back(Action::Event(Event::Dropped(why)));
    }

    fn event(&mut self, e: Event) {
        self.out.push_back(Action::Event(e));
    }

    fn broadcast(&mut self, msg: &Message) -> Arc<[u8]> {
        let bytes = self.encode(msg, AuthChoice::Authenticator);
        self.out.push_back(Action::Broadcast {
            bytes: bytes.clone(),
        });
        bytes
    }

    fn send_to(&mut self, to: ReplicaId, msg: &Message) {
        let bytes = self.encode(msg, AuthChoice::MacTo(to));
        self.out.push_back(Action::Send { to, bytes });
    }

    fn send_frame(&mut self, to: ReplicaId, bytes: Arc<[u8]>) {
        if to != self.me {
            self.out.push_back(Action::Send { to, bytes });
        }
    }

    fn in_window(&self, seq: Seq) -> bool {
        seq > self.log.last_stable && seq <= self.window_base() + self.config.log_window
    }

    /// Checkpoint of the live state at `seq` (service + reply cache) → its digest.
    fn take_checkpoint(&mut self, seq: Seq) -> Digest {
        let mut parts = self.service.checkpoint(seq);
        parts.extend(self.lib.checkpoint(seq));
        root_digest(&parts)
    }

    /// Invariants that must hold after every handler (docs/STYLE.md §10). A violation is a bug in
    /// this replica, not bad input, so it stops the process.
    fn check_invariants(&self) {
        debug_assert!(self.log.last_stable <= self.log.last_executed || self.fetch.is_some());
        debug_assert!(self.log.last_executed <= self.log.last_tentative);
        debug_assert!(
            self.log.last_tentative <= self.log.last_executed + 1 || self.mutation_active()
        );
        debug_assert!(self
            .log
            .slots
            .keys()
            .next()
            .is_none_or(|&s| s > self.log.last_stable));
    }

    #[cfg(feature = "mutations")]
    fn mutation_active(&self) -> bool {
        self.mutation.is_some()
    }
    #[cfg(not(feature = "mutations"))]
    fn mutation_active(&self) -> bool {
        false
    }

    /// A duration drawn uniformly from `[0, max)` with the replica's seeded RNG.
    fn jitter(&mut self, max: Duration) -> Duration {
        use rand::Rng;
        let us = max.as_micros() as u64;
        if us == 0 {
            return Duration::ZERO;
        }
        Duration::from_micros(self.rng.gen_range(0..us))
    }
}

/// Stand-in for the mutation enum when the `mutations` feature is off, so call sites compile
/// unchanged and the checks fold to `false`.
#[cfg(not(feature = "mutations"))]
#[derive(Clone, Copy)]
#[allow(dead_code)]
pub(crate) enum MutationStub {
    CommitQuorum2f,
    AcceptSecondPrePrepare,
    NewViewLowestView,
    PrepareWithoutDigest,
    TentativeBeforeCommitted,
    ReadOnlyOnTentative,
    VoteAfterUntrustedRestore,
    ExecuteGaps,
    IgnoreAckedBound,
    JoinViewOnOneVc,
    SkipReplicaAuth,
    StableCheckpointWeak,
    TrustNewView,
    NewViewA2One,
    TrustOneStableClaim,
    SkipStateMetaCheck,
    IgnoreReadOnlyFloor,
    NoClientQuota,
    NoPrimaryMonitor,
    ForeignCommitQuorumF1,
    NoCheckpointLoans,
    NoIdleCheckpoint,
    ExecuteBeforeTransferRecorded,
    VouchOnFewer,
    WalkPastCertificates,
    ZyzzyvaHighestCertificate,
}

/// The mutation type call sites name (`M::CommitQuorum2f`).
#[cfg(feature = "mutations")]
pub(crate) use crate::mutation::Mutation as M;
#[cfg(not(feature = "mutations"))]
pub(crate) use MutationStub as M;
