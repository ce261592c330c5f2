//! The event loop: the only owner of the [`Replica`].
//!
//! Each turn: if the core's deadline has passed, `handle_timeout(now)`; otherwise wait for an
//! inbox input, the deadline, a status tick or shutdown. Inputs arriving together are handled
//! together (up to `turn_inputs_max`), then the actions are drained once:
//!
//! 1. every `Persist` of the drain is committed in one group ([`Durability::commit`]);
//! 2. then the sends are performed in order: `Send`/`Broadcast` into the bounded per-peer
//!    queues, `SendClient` into the client's connection queue (dropped and counted when full
//!    or when the client is not connected here);
//! 3. `Event`s become logs and metrics as they are drained.
//!
//! A core call that takes long (at least [`BUSY_REPORT_MIN`]; executing an expensive request
//! runs inside it, on this thread), or a drain of its actions that does (the write-ahead
//! log's sync on a saturated disk, a store compaction's copy), is reported to the core as
//! busy time
//! ([`Replica::busy_for`]), so that it does not count against the primary on the
//! view-change timer, and the next turn handles the input queued meanwhile (the COMMITs and
//! PRE-PREPAREs of the peers, busy executing the same request) before the deadlines that
//! expired meanwhile — once: the turn after it checks the deadlines first again.

use super::metrics::Metrics;
use super::shed::Origin;
use super::{Inbound, NodeError, Shared};
use crate::clock::Clock;
use crate::counters::NetDrop;
use crate::link_lane::PeerQueues;
use crate::queue::OutQueue;
use crate::status::{CoreCounters, NodeStatus};
use crate::storage::Durability;
use byzfs_bft::{
    Action, ClientId, Event, PersistRecord, Replica, ReplicaId, Seq, Service, StoreRecord,
};
use core::future::Future;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

/// Least time between two progress-triggered status publications.
const PROGRESS_PUBLISH_MIN: core::time::Duration = core::time::Duration::from_millis(10);

/// A core call at least this long is reported as busy time ([`Replica::busy_for`]). Shorter
/// ones are the normal cost of a step, far below any view-change timeout.
const BUSY_REPORT_MIN: core::time::Duration = core::time::Duration::from_millis(50);

/// The cheap fields that decide whether a new status is worth publishing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Progress {
    view: byzfs_bft::View,
    has_new_view: bool,
    last_executed: byzfs_bft::Seq,
    last_stable: byzfs_bft::Seq,
    fetching: bool,
}

/// A connected client.
struct ClientSlot {
    conn: u64,
    queue: OutQueue,
}

pub(super) struct EventLoop<S: Service> {
    replica: Replica<S>,
    shared: Arc<Shared>,
    /// Outbound queue per replica id (`None` for ourselves).
    peers: Vec<Option<PeerQueues>>,
    clients: HashMap<ClientId, ClientSlot>,
    /// When each client's oldest unanswered request arrived here (for the latency
    /// histogram): one entry per client that connected, kept past its disconnection.
    arrivals: HashMap<ClientId, std::time::Instant>,
    /// Reply keys of the admitted clients, kept only by a test liar
    /// ([`super::NodeOptions::lie_to_clients`]) to re-authenticate its lies.
    #[cfg(feature = "byzantine")]
    liar_keys: HashMap<ClientId, byzfs_bft::MacKey>,
    /// Flood protection's tallies (`shed.rs`).
    shedder: super::shed::Shedder,
    /// A test attacker's state ([`super::NodeOptions::attack`]).
    #[cfg(feature = "byzantine")]
    attacker: Option<super::attack::Attacker>,
    inbox: super::inbox::Inbox,
    durability: Box<dyn Durability>,
    status_tx: watch::Sender<NodeStatus>,
    clock: Clock,
    metrics: Metrics,
    /// When the status was last published, and the progress it showed.
    published: (tokio::time::Instant, Progress),
    /// The last computed state digest (hex) and the `last_tentative` it describes: only the
    /// periodic tick recomputes it (a partition-digest clone and its hash; computed on every
    /// early publication it was the largest BLAKE3 caller during a compile).
    digest: (Seq, String),
    /// Reused buffers of one drain.
    persists: Vec<PersistRecord>,
    /// The core asked for [`Action::Sync`] in this drain.
    sync: bool,
    stores: Vec<StoreRecord>,
    sends: Vec<Action>,
    /// A core call took long: the next turn takes queued input before expired deadlines.
    inbox_first: bool,
    /// The data directory's size on disk at the last status tick.
    data_bytes: u64,
    /// Which peers the core was last told are unreachable (`check_reachability`).
    unreachable: Vec<bool>,
    /// The service's disk work in flight (`disk_worker.rs`).
    disk: super::disk_worker::DiskWorker,
    /// Stable checkpoints' records waiting for the disk work that makes the service's own
    /// state at them durable, oldest first, each with the ticket it waits for
    /// (docs/PROTOCOL.md §2.7).
    held: std::collections::VecDeque<(u64, StoreRecord)>,
}

impl<S: Service> EventLoop<S> {
    pub fn new(
        replica: Replica<S>,
        shared: Arc<Shared>,
        peers: Vec<Option<PeerQueues>>,
        inbox: super::inbox::Inbox,
        durability: Box<dyn Durability>,
        status_tx: watch::Sender<NodeStatus>,
        clock: Clock,
    ) -> Self {
        let metrics = Metrics::new(replica.id());
        let disk = super::disk_worker::DiskWorker::new(replica.id());
        EventLoop {
            replica,
            shared,
            peers,
            clients: HashMap::new(),
            arrivals: HashMap::new(),
            #[cfg(feature = "byzantine")]
            liar_keys: HashMap::new(),
            shedder: super::shed::Shedder::default(),
            #[cfg(feature = "byzantine")]
            attacker: None,
            inbox,
            durability,
            status_tx,
            clock,
            metrics,
            published: (tokio::time::Instant::now(), Progress::default()),
            digest: (0, String::new()),
            persists: Vec::new(),
            sync: false,
            stores: Vec::new(),
            sends: Vec::new(),
            inbox_first: false,
            data_bytes: 0,
            unreachable: Vec::new(),
            disk,
            held: std::collections::VecDeque::new(),
        }
    }

    fn me(&self) -> ReplicaId {
        self.replica.id()
    }

    /// Makes this replica a test attacker ([`super::NodeOptions::attack`]).
    #[cfg(feature = "byzantine")]
    pub fn set_attacker(&mut self, attacker: Option<super::attack::Attacker>) {
        self.attacker = attacker;
    }

    /// A test attacker's sends to the peers (`true` if it took `a` over).
    #[cfg(feature = "byzantine")]
    fn attack(&mut self, a: &Action) -> bool {
        let Some(att) = self.attacker.as_mut() else {
            return false;
        };
        let (to, bytes) = match a {
            Action::Send { to, bytes } => (Some(*to), bytes.clone()),
            Action::Broadcast { bytes } => (None, bytes.clone()),
            _ => return false,
        };
        let counters = &self.shared.counters;
        let outs = att.outgoing(to, bytes, self.replica.view(), &self.peers, counters);
        for o in outs {
            let Some(Some(q)) = self.peers.get(o.to as usize) else {
                continue;
            };
            if o.delay.is_zero() {
                q.push(o.bytes, counters);
            } else {
                let (q, counters) = (q.clone(), counters.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(o.delay).await;
                    q.push(o.bytes, &counters);
                });
            }
        }
        true
    }

    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), NodeError> {
        tokio::pin!(shutdown);
        let sleep = tokio::time::sleep(core::time::Duration::ZERO);
        tokio::pin!(sleep);
        let mut status_tick = tokio::time::interval(self.shared.options.status_interval);
        status_tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut metrics_tick = tokio::time::interval(self.shared.options.metrics_interval);
        metrics_tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let shared = self.shared.clone();
        // The core may have queued actions at construction.
        self.drain()?;
        self.publish_status(true);
        loop {
            if std::mem::take(&mut self.inbox_first) {
                // After a long core call, what arrived meanwhile first; the deadlines that
                // expired meanwhile on the next turn, whatever this one takes.
                if let Some(input) = self.inbox.try_next() {
                    self.input_turn(input)?;
                    self.inbox_first = false;
                    continue;
                }
            }
            // Compare the clock with the deadline on every turn; the timer only wakes us.
            let now = self.clock.now();
            if let Some(deadline) = self.replica.poll_timeout() {
                if deadline <= now {
                    let started = std::time::Instant::now();
                    self.replica.handle_timeout(now);
                    self.core_call_took(started);
                    self.drain()?;
                    self.publish_progress();
                    continue;
                }
                sleep.as_mut().reset(self.clock.instant_of(deadline));
            } else {
                let far = tokio::time::Instant::now() + core::time::Duration::from_secs(3600);
                sleep.as_mut().reset(far);
            }
            // Unbiased: under a constant stream of inputs the ticks still get their turn.
            tokio::select! {
                _ = &mut shutdown => break,
                input = self.inbox.next() => {
                    let Some(input) = input else { break };
                    self.input_turn(input)?;
                }
                _ = &mut sleep => {}
                _ = shared.reachability.notified() => self.check_reachability()?,
                done = self.disk.next_done() => self.on_disk_done(done)?,
                _ = status_tick.tick() => self.publish_status(true),
                _ = metrics_tick.tick() => {
                    self.publish_status(true);
                    self.metrics.publish(&self.status_tx.borrow());
                }
            }
        }
        #[cfg(feature = "byzantine")]
        if let Some(att) = &self.attacker {
            tracing::info!(
                replica = self.me(),
                acts = att.acts,
                "byzantine test mode: attack acts"
            );
        }
        // The disk work in flight, and the records that wait for it, finish first: the next
        // start then replays less.
        while self.disk.busy() {
            let done = self.disk.next_done().await;
            self.on_disk_done(done)?;
        }
        // Nothing more will be committed or sent: the next start may trust its records.
        self.durability.close().map_err(NodeError::Storage)?;
        self.publish_status(true);
        self.metrics.publish(&self.status_tx.borrow());
        Ok(())
    }

    /// One turn of input: `first` and whatever else is queued (up to `turn_inputs_max`),
    /// then one drain.
    fn input_turn(&mut self, first: Inbound) -> Result<(), NodeError> {
        let turn = std::time::Instant::now();
        self.on_input(first);
        for _ in 1..self.shared.options.turn_inputs_max {
            match self.inbox.try_next() {
                Some(input) => self.on_input(input),
                None => break,
            }
        }
        self.drain()?;
        self.publish_progress();
        self.metrics.turn(turn.elapsed());
        Ok(())
    }

    /// Tells the core which peers became unreachable or reachable since it was last told
    /// ([`Shared::peers_unreachable`]).
    fn check_reachability(&mut self) -> Result<(), NodeError> {
        let now = self.clock.now();
        let flags = &self.shared.peers_unreachable;
        self.unreachable.resize(flags.len(), false);
        let mut told = false;
        for (peer, flag) in flags.iter().enumerate() {
            let unreachable = flag.load(std::sync::atomic::Ordering::Relaxed);
            if self.unreachable[peer] != unreachable {
                self.unreachable[peer] = unreachable;
                self.replica
                    .handle_reachability(now, peer as ReplicaId, !unreachable);
                told = true;
            }
        }
        if told {
            self.drain()?;
        }
        Ok(())
    }

    /// Reports a core call begun at `started` that took long as busy time: time spent in it
    /// (executing, mostly) is not the primary's fault (see [`Replica::busy_for`]).
    fn core_call_took(&mut self, started: std::time::Instant) {
        let busy = started.elapsed();
        if busy < BUSY_REPORT_MIN {
            return;
        }
        self.replica.busy_for(busy);
        self.inbox_first = true;
        tracing::debug!(
            replica = self.me(),
            busy_ms = busy.as_millis() as u64,
            "long step reported as busy time"
        );
    }

    fn on_input(&mut self, input: Inbound) {
        match input {
            Inbound::Frame(bytes, _budget, origin) => {
                let arrived = std::time::Instant::now();
                if self.shedder.is_shed(origin, arrived) {
                    self.shared.counters.dropped(NetDrop::Shed);
                    return;
                }
                let from_client = matches!(origin, Origin::Client { .. });
                if tracing::enabled!(tracing::Level::TRACE) {
                    trace_frame(
                        self.me(),
                        "in",
                        &bytes,
                        self.shared.cluster.bft.message_bytes_max,
                    );
                }
                // A request a peer forwards (a client's first requests go to every replica)
                // may arrive after this replica answered it: not a new request to time.
                if from_client {
                    // A client proven faulty is not heard on its own connection (copies
                    // forwarded by peers still reach the core, which checks their signatures:
                    // `Replica::is_blacklisted`).
                    if sender_client(&bytes).is_some_and(|c| self.replica.is_blacklisted(c)) {
                        self.shared.counters.dropped(NetDrop::BlacklistedClient);
                        self.note_useless(origin, true, arrived);
                        return;
                    }
                    self.note_request_arrival(&bytes);
                }
                let drops = self.replica.stats().inputs_dropped;
                self.replica.handle_message(self.clock.now(), &bytes);
                let useless = self.replica.stats().inputs_dropped > drops;
                self.core_call_took(arrived);
                self.note_useless(origin, useless, arrived);
            }
            Inbound::ClientUp {
                admission,
                queue,
                conn,
            } => {
                // Introduce the client to the peers before any of its requests can reach them
                // through us (same FIFO queue), so they can authenticate what we forward or
                // pre-prepare (see `crate::intro`).
                let intro: Arc<[u8]> = admission.intro.encode().into();
                for q in self.peers.iter().flatten() {
                    q.push(intro.clone(), &self.shared.counters);
                }
                let client = admission.client;
                if let Ok(mut m) = self.shared.intros.lock() {
                    m.insert(client, (conn, intro));
                }
                self.install_client(admission);
                self.clients.insert(client, ClientSlot { conn, queue });
            }
            Inbound::ClientKnown(admission) => self.install_client(admission),
            Inbound::ClientDown { client, conn } => {
                if self.clients.get(&client).is_some_and(|c| c.conn == conn) {
                    self.clients.remove(&client);
                }
                if let Ok(mut m) = self.shared.intros.lock() {
                    if m.get(&client).is_some_and(|(c, _)| *c == conn) {
                        m.remove(&client);
                    }
                }
            }
        }
    }

    /// Counts a frame of `origin` for flood protection (`shed.rs`) and sheds the source when
    /// it crosses the bar: a peer's inbound link closes and its handshakes are refused, a
    /// client session's connection closes and it is refused, for the back-off.
    fn note_useless(&mut self, origin: Origin, useless: bool, now: std::time::Instant) {
        let Some(backoff) = self.shedder.note(origin, useless, now) else {
            return;
        };
        self.shared.counters.dropped(NetDrop::Shed);
        let until = now + backoff;
        match origin {
            Origin::Replica(j) => {
                tracing::warn!(
                    replica = self.me(),
                    peer = j,
                    backoff_s = backoff.as_secs(),
                    "peer floods useless frames; shedding its link"
                );
                if let Ok(mut s) = self.shared.shed.lock() {
                    s.peers.insert(j, until);
                }
                // A newer generation closes the current inbound connections (`accept.rs`).
                for g in self
                    .shared
                    .inbound_gen
                    .get(j as usize)
                    .into_iter()
                    .flatten()
                {
                    g.send_modify(|g| *g += 1);
                }
            }
            Origin::Client { client, conn } => {
                tracing::warn!(
                    replica = self.me(),
                    client,
                    backoff_s = backoff.as_secs(),
                    "client floods useless frames; shedding its session"
                );
                let cert = crate::cert::certificate_of(client);
                let cert_backoff = self.shedder.cert_strike(cert, now);
                if let Ok(mut s) = self.shared.shed.lock() {
                    s.clients.retain(|_, t| *t > now);
                    s.clients.insert(client, until);
                    if let Some(b) = cert_backoff {
                        s.certs.insert(cert, now + b);
                    }
                }
                // Dropping its queue's sender ends the connection's writer, and with it the
                // connection (`accept.rs`).
                if self.clients.get(&client).is_some_and(|c| c.conn == conn) {
                    self.clients.remove(&client);
                }
                if let Some(b) = cert_backoff {
                    tracing::warn!(
                        replica = self.me(),
                        certificate = cert,
                        backoff_s = b.as_secs(),
                        "sessions of one client certificate keep flooding; shedding the certificate"
                    );
                    self.clients
                        .retain(|&c, _| crate::cert::certificate_of(c) != cert);
                }
            }
        }
        self.shedder.prune(now);
    }

    fn install_client(&mut self, a: super::accept::ClientAdmission) {
        #[cfg(feature = "byzantine")]
        if self.shared.options.lie_to_clients.is_some() {
            self.liar_keys.insert(a.client, a.to_client.clone());
        }
        self.replica
            .add_client(a.client, a.to_client, a.from_client, Some(a.verifying));
    }

    /// Starts the latency clock of a connected client's request (read from the header
    /// without authenticating it: only the timing is affected, and only for that client;
    /// one request per client is timed at a time, so the bookkeeping is bounded).
    fn note_request_arrival(&mut self, bytes: &[u8]) {
        let Some(id) = sender_client(bytes) else {
            return;
        };
        if self.clients.contains_key(&id) {
            self.arrivals
                .entry(id)
                .or_insert_with(std::time::Instant::now);
        }
    }

    /// Drains the core's actions: group-commit the promises, then send.
    fn drain(&mut self) -> Result<(), NodeError> {
        // The disk work below (the write-ahead log's sync, a checkpoint record's commit,
        // compaction's copy at its turn) is busy time as much as executing is; a stable
        // checkpoint's store sync is not here (`disk_worker.rs`).
        let started = std::time::Instant::now();
        // Again while a checkpoint's record landed: the window it moved may let held frames
        // in (`Replica::checkpoint_recorded`).
        let r = loop {
            match self.drain_actions() {
                Ok(true) => continue,
                other => break other.map(|_| ()),
            }
        };
        self.core_call_took(started);
        r
    }

    /// One pass over the core's actions; whether a checkpoint's record landed in it (the
    /// core may then have more to do).
    fn drain_actions(&mut self) -> Result<bool, NodeError> {
        while let Some(a) = self.replica.poll_action() {
            match a {
                Action::Persist(rec) => self.persists.push(rec),
                Action::Store(rec) => self.stores.push(rec),
                Action::Sync => self.sync = true,
                Action::Event(e) => self.on_event(e),
                send => self.sends.push(send),
            }
        }
        if let Some(msg) = self.replica.service().failure() {
            // The step ran on a store that failed under it: nothing of it may leave.
            return Err(self.stop(msg));
        }
        let stored = self
            .stores
            .iter()
            .filter_map(|s| match s {
                StoreRecord::Checkpoint(img) => Some(img.seq),
                StoreRecord::Batch { .. } => None,
            })
            .max();
        let mut recorded_now = None;
        if let Some(seq) = stored {
            // A service that keeps its own state makes it durable first: the record must
            // never name a checkpoint its store could lose. That takes a sync, which runs on
            // the disk worker while later batches execute; the record waits for it, and so
            // does any record behind one already waiting (docs/PROTOCOL.md §2.7).
            let work = self
                .replica
                .persist_service(seq)
                .map_err(|m| self.stop(m))?;
            let ticket = match work {
                Some(w) => Some(self.disk.hand(w).map_err(|m| self.stop(m))?),
                None if self.disk.busy() => Some(self.disk.handed()),
                None => None,
            };
            match ticket {
                Some(t) => {
                    for rec in std::mem::take(&mut self.stores) {
                        match rec {
                            StoreRecord::Checkpoint(_) => self.held.push_back((t, rec)),
                            batch => self.stores.push(batch),
                        }
                    }
                }
                None => recorded_now = Some(seq),
            }
        }
        if !self.persists.is_empty() || !self.stores.is_empty() {
            // Group commit: every promise and stored record of this drain is durable before
            // any of its sends.
            self.durability
                .commit(&self.persists, &self.stores)
                .map_err(NodeError::Storage)?;
            self.persists.clear();
            self.stores.clear();
        }
        if let Some(seq) = recorded_now {
            // The record is durable: the store may drop what only the previous one kept.
            self.service_recorded(seq)?;
        }
        if std::mem::take(&mut self.sync) {
            // Every send of this drain follows it, the CHECKPOINT that asked for it too.
            self.durability.sync().map_err(NodeError::Storage)?;
        }
        let mut sends = std::mem::take(&mut self.sends);
        for a in sends.drain(..) {
            self.perform(a);
        }
        self.sends = sends;
        if let Some(seq) = recorded_now {
            // After the sends: what the moved window lets in is the next pass's.
            self.replica.checkpoint_recorded(seq);
        }
        Ok(recorded_now.is_some())
    }

    /// Logs why the service cannot go on; the error that stops the replica.
    fn stop(&self, msg: String) -> NodeError {
        tracing::error!(replica = self.replica.id(), "{msg}; stopping");
        NodeError::Service(msg)
    }

    /// Tells the service its record of `seq` is durable, and hands over any work it gives.
    fn service_recorded(&mut self, seq: Seq) -> Result<(), NodeError> {
        let work = self
            .replica
            .service_recorded(seq)
            .map_err(|m| self.stop(m))?;
        self.hand_work(work)
    }

    fn hand_work(&mut self, work: Option<byzfs_bft::service::DiskWork>) -> Result<(), NodeError> {
        if let Some(w) = work {
            self.disk.hand(w).map_err(|m| self.stop(m))?;
        }
        Ok(())
    }

    /// A disk work ran: the service learns it, then the checkpoint records that waited for
    /// it are committed (in one commit, oldest first) and the service told of each.
    fn on_disk_done(&mut self, done: super::disk_worker::Done) -> Result<(), NodeError> {
        let started = std::time::Instant::now();
        self.metrics.disk_work(done.took);
        done.result.map_err(|m| self.stop(m))?;
        let work = self.replica.service_work_done().map_err(|m| self.stop(m))?;
        self.hand_work(work)?;
        let mut ready = Vec::new();
        while self.held.front().is_some_and(|(t, _)| *t <= done.ticket) {
            if let Some((_, rec)) = self.held.pop_front() {
                ready.push(rec);
            }
        }
        if !ready.is_empty() {
            self.durability
                .commit(&[], &ready)
                .map_err(NodeError::Storage)?;
            for rec in &ready {
                if let StoreRecord::Checkpoint(img) = rec {
                    self.service_recorded(img.seq)?;
                    self.replica.checkpoint_recorded(img.seq);
                }
            }
            // The window moved: frames held above it may now be handled.
            self.drain()?;
            self.publish_progress();
        }
        self.metrics.turn(started.elapsed());
        Ok(())
    }

    fn perform(&mut self, a: Action) {
        if tracing::enabled!(tracing::Level::TRACE) {
            if let Action::Send { bytes, .. }
            | Action::Broadcast { bytes }
            | Action::SendClient { bytes, .. } = &a
            {
                trace_frame(self.me(), "out", bytes, usize::MAX);
            }
        }
        #[cfg(feature = "byzantine")]
        if self.attack(&a) {
            return;
        }
        let counters = &self.shared.counters;
        if let Action::Send { bytes, .. }
        | Action::Broadcast { bytes }
        | Action::SendClient { bytes, .. } = &a
        {
            if bytes.len() > self.shared.cluster.bft.message_bytes_max {
                // The receiver would close the connection over it: drop it here instead.
                counters.dropped(NetDrop::Oversized);
                tracing::warn!(
                    replica = self.replica.id(),
                    len = bytes.len(),
                    "core produced a frame above message_bytes_max; dropped"
                );
                return;
            }
        }
        match a {
            Action::Send { to, bytes } => {
                if let Some(Some(q)) = self.peers.get(to as usize) {
                    q.push(bytes, counters);
                }
            }
            Action::Broadcast { bytes } => {
                for q in self.peers.iter().flatten() {
                    q.push(bytes.clone(), counters);
                }
            }
            Action::SendClient { client, bytes } => {
                // Counted even if the client has gone: it may have completed on other
                // replicas' replies and closed the connection before ours.
                if let Some(t) = self.arrivals.remove(&client) {
                    self.metrics.request_answered(t.elapsed());
                }
                match self.clients.get_mut(&client) {
                    Some(slot) => {
                        #[cfg(feature = "byzantine")]
                        let bytes = match &self.shared.options.lie_to_clients {
                            Some(liar) => super::liar::lie(
                                liar,
                                self.liar_keys.get(&client),
                                &self.shared,
                                bytes,
                            ),
                            None => bytes,
                        };
                        slot.queue.push(bytes, counters);
                    }
                    None => counters.dropped(NetDrop::NoClientConnection),
                }
            }
            // Sorted out in `drain`.
            Action::Persist(_) | Action::Store(_) | Action::Event(_) | Action::Sync => {}
        }
    }

    fn on_event(&mut self, e: Event) {
        let (me, view) = (self.me(), self.replica.view());
        match e {
            Event::Executed {
                seq,
                requests,
                tentative,
                ..
            } => {
                self.metrics.batch_executed(requests.len());
                tracing::trace!(
                    replica = me,
                    view,
                    seq,
                    requests = requests.len(),
                    tentative,
                    "executed"
                );
            }
            Event::Prepared { seq, .. } => tracing::trace!(replica = me, view, seq, "prepared"),
            Event::CommittedLocal { seq, .. } => {
                tracing::trace!(replica = me, view, seq, "commit certificate")
            }
            Event::Committed { seq, .. } => tracing::trace!(replica = me, view, seq, "committed"),
            Event::RolledBack { to } => {
                tracing::info!(replica = me, view, to, "tentative execution rolled back")
            }
            Event::CheckpointTaken { seq, .. } => {
                tracing::trace!(replica = me, view, seq, "checkpoint taken")
            }
            Event::CheckpointStable { seq, .. } => {
                tracing::debug!(replica = me, view, seq, "checkpoint stable")
            }
            Event::PrimaryTooSlow {
                view: judged,
                units,
                required,
            } => tracing::warn!(
                replica = me,
                view = judged,
                primary = self.replica.primary(),
                units,
                required,
                "the primary's throughput fell short under load; voting it out"
            ),
            Event::ViewChangeStarted { view: to } => {
                tracing::info!(replica = me, view, to, "view change started")
            }
            Event::ViewInstalled { view: v, min } => {
                tracing::info!(
                    replica = me,
                    view = v,
                    primary = self.replica.primary(),
                    min,
                    "new view installed"
                )
            }
            Event::StateTransferred { seq, .. } => {
                tracing::info!(replica = me, view, seq, "state transfer completed")
            }
            Event::ReadOnlyExecuted {
                client,
                rid,
                committed,
                on_tentative,
                ..
            } => tracing::trace!(
                replica = me,
                client,
                rid,
                committed,
                on_tentative,
                "read-only request answered"
            ),
            Event::Dropped(why) => tracing::trace!(replica = me, view, ?why, "input dropped"),
        }
    }

    fn progress(&self) -> Progress {
        let r = &self.replica;
        Progress {
            view: r.view(),
            has_new_view: r.has_new_view(),
            last_executed: r.last_executed(),
            last_stable: r.last_stable(),
            fetching: r.is_fetching(),
        }
    }

    /// Publishes the status early when progress was made, at most every
    /// [`PROGRESS_PUBLISH_MIN`] (snapshots allocate; the periodic tick publishes the rest).
    fn publish_progress(&mut self) {
        let p = self.progress();
        if p != self.published.1 && self.published.0.elapsed() >= PROGRESS_PUBLISH_MIN {
            self.publish_status(false);
        }
    }

    /// Publishes a snapshot; `fresh_digest` recomputes the state digest, otherwise the last
    /// one is shown with the sequence number it describes (`state_digest_at`).
    fn publish_status(&mut self, fresh_digest: bool) {
        self.published = (tokio::time::Instant::now(), self.progress());
        let r = &self.replica;
        if fresh_digest {
            self.digest = (r.last_tentative(), ::hex::encode(r.state_digest().0));
            self.data_bytes = self.durability.dir().map_or(0, crate::storage::disk_bytes);
        }
        let status = NodeStatus {
            replica: r.id(),
            view: r.view(),
            has_new_view: r.has_new_view(),
            primary: r.primary(),
            last_executed: r.last_executed(),
            last_tentative: r.last_tentative(),
            last_stable: r.last_stable(),
            fetching: r.is_fetching(),
            peers_connected: self.shared.peers_connected(),
            clients_connected: self.clients.len() as u32,
            durability: self.durability.name().to_string(),
            state_digest: self.digest.1.clone(),
            state_digest_at: self.digest.0,
            stable_digest: r
                .stable_digest()
                .map(|d| ::hex::encode(d.0))
                .unwrap_or_default(),
            core: CoreCounters::from(r.stats()),
            net: self.shared.counters.snapshot(),
            withholds_prepares_up_to: r.withholds_prepares_up_to(),
            data_bytes: self.data_bytes,
            disk: self.durability.counters(),
            service: r
                .service()
                .counters()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        };
        self.status_tx.send_replace(status);
    }
}

/// The client a REQUEST frame's header names (unauthenticated), if it is one.
fn sender_client(bytes: &[u8]) -> Option<ClientId> {
    let h = bytes.get(..16)?;
    if h[3] != byzfs_bft::message::Tag::Request as u8 || h[4] != 1 {
        return None;
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&h[8..16]);
    Some(u64::from_le_bytes(id))
}

/// Logs a frame's header at trace level (debugging aid; parsing hashes the body).
fn trace_frame(me: ReplicaId, dir: &'static str, bytes: &[u8], max: usize) {
    match byzfs_bft::wire::Frame::parse(bytes, max) {
        Ok(f) => tracing::trace!(
            replica = me,
            dir,
            tag = ?f.header.tag,
            sender = ?f.header.sender,
            len = bytes.len(),
            "frame"
        ),
        Err(e) => {
            tracing::trace!(replica = me, dir, error = %e, len = bytes.len(), "unparsable frame")
        }
    }
}
