//! The unreplicated baseline (issue #3 item 7): one process serving a [`Service`] over the
//! same transport as a replica — the same listener, handshake (admin-signed client
//! certificates), framing, bounded queues and wire format — but with no agreement: each
//! request is executed as it arrives and answered by one REPLY.
//!
//! With MACs (the default), a request must carry one MAC (`AuthKind::Mac`) under the
//! client's key for this server and the reply carries one MAC back, so the baseline pays the
//! same per-message authentication as a PBFT reply path (PBFT OSDI'99 Table 1's
//! "unreplicated with MACs"). Without MACs, requests and replies are unauthenticated
//! (`AuthKind::None`); the header still binds the body through its BLAKE3 digest, as on
//! every frame of the wire format. Exactly-once holds per client session, across
//! reconnections and (with `disk` durability) restarts: a retransmitted request gets the
//! cached result, an older one is dropped.
//!
//! Durability ([`UnreplicatedNode::with_durability`]) is the replicas': in `disk` mode every
//! executed read-write request is in the turn's one fsync'd log frame before any reply
//! of the turn leaves, with a checkpoint image every `checkpoint_interval` operations
//! (`oplog.rs`); in `memory` mode (the default) nothing is written.
//!
//! The server plays "replica 0" of a cluster file, so `byzfs keygen` output (keys, client
//! credentials) works unchanged; only replica 0's address and key are used.

use super::oplog::{OpLog, ReplyCache};
use super::{accept, Inbound, NodeError, NodeOptions, Shared};
use crate::cluster::ClusterConfig;
use crate::error::SetupError;
use crate::keyfile::ReplicaSecret;
use crate::queue::OutQueue;
use crate::status::{drop_reason_name, NodeStatus};
use crate::storage::{Durability, MemoryDurability};
use byzfs_bft::message::{Message, Reply, RequestView, Tag};
use byzfs_bft::wire::{self, Auth, AuthKind, Envelope, Frame};
use byzfs_bft::{ClientId, Digest, DropReason, MacKey, Principal, Service};
use core::future::Future;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// Request flag bit: read-only (same as the core's).
const FLAG_READ_ONLY: u8 = 1;

/// A connected client session.
struct Session {
    conn: u64,
    to_client: MacKey,
    from_client: MacKey,
    queue: OutQueue,
}

/// The unreplicated server, ready to run.
pub struct UnreplicatedNode<S: Service> {
    cluster: Arc<ClusterConfig>,
    secret: ReplicaSecret,
    service: S,
    macs: bool,
    options: NodeOptions,
    durability: Box<dyn Durability>,
    listeners: super::listen::Bound,
    status_tx: watch::Sender<NodeStatus>,
    status_rx: watch::Receiver<NodeStatus>,
}

impl<S: Service> UnreplicatedNode<S> {
    /// Serves `service` at replica 0's address of `cluster` with replica 0's `secret`;
    /// `macs` chooses authenticated (one MAC each way) or plain requests and replies.
    pub fn new(
        cluster: ClusterConfig,
        secret: ReplicaSecret,
        service: S,
        macs: bool,
    ) -> Result<Self, SetupError> {
        if secret.id != 0 {
            return Err(SetupError::Usage(format!(
                "the unreplicated server plays replica 0 of the cluster file; pass replica 0's key, not replica {}'s",
                secret.id
            )));
        }
        // Refuses low-order keys, as a replica would.
        crate::kdf::replica_keys(&cluster, &secret)?;
        let (status_tx, status_rx) = watch::channel(NodeStatus {
            replica: 0,
            durability: "memory".into(),
            ..NodeStatus::default()
        });
        Ok(UnreplicatedNode {
            cluster: Arc::new(cluster),
            secret,
            service,
            macs,
            options: NodeOptions::default(),
            durability: Box::new(MemoryDurability),
            listeners: Default::default(),
            status_tx,
            status_rx,
        })
    }

    /// Keeps executed requests and the service state in `durability` (default: memory, nothing
    /// written); a [`crate::storage::DiskDurability`] holding an earlier run's state is
    /// restored when [`Self::run`] starts.
    pub fn with_durability(mut self, durability: Box<dyn Durability>) -> Self {
        self.durability = durability;
        self
    }

    /// Uses an already bound listener instead of binding replica 0's address (tests bind
    /// port 0 first, then write the configuration).
    pub fn with_listener(mut self, listener: std::net::TcpListener) -> Self {
        self.listeners = super::listen::Bound::with_tcp(listener);
        self
    }

    /// Binds replica 0's address now (if not yet bound) and returns it.
    pub fn bind(&mut self) -> Result<SocketAddr, NodeError> {
        // A loaded `ClusterConfig` lists 3f+1 >= 4 replicas, so replica 0 exists.
        self.listeners.bind(&self.cluster.replicas[0], None)
    }

    /// Serves until `shutdown` completes. Must run inside a tokio runtime with I/O and time
    /// enabled (one `current_thread` runtime, like a replica).
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), NodeError> {
        self.bind()?;
        // Replica 0 exists: see `bind`.
        let listeners =
            std::mem::take(&mut self.listeners).into_listeners(&self.cluster.replicas[0])?;
        let shared = Shared::new(
            self.cluster.clone(),
            &self.secret,
            self.options.clone(),
            self.status_rx.clone(),
        );
        let mut log = OpLog::new(self.durability, self.cluster.bft.checkpoint_interval);
        let mut replies = ReplyCache::new();
        let replayed = log
            .restore(
                &mut self.service,
                &mut replies,
                self.cluster.bft.message_bytes_max,
            )
            .map_err(NodeError::UnreplicatedRestore)?;
        if replayed > 0 || log.stable() > 0 {
            tracing::info!(
                checkpoint = log.stable(),
                replayed,
                "restored the stored state"
            );
        }
        self.status_tx
            .send_modify(|s| s.durability = log.mode().to_string());
        // Clients only: one lane.
        let (inbox_tx, inbox) =
            super::inbox::inbox(1, self.options.inbox_frames, self.options.inbox_bytes);
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(accept::accept_loop(listeners, shared.clone(), inbox_tx));
        tracing::info!(macs = self.macs, "unreplicated server started");
        let mut server = Server {
            service: self.service,
            macs: self.macs,
            shared,
            sessions: HashMap::new(),
            log,
            replies,
            held: Vec::new(),
            executed: 0,
            read_only: 0,
            dropped: BTreeMap::new(),
            status_tx: self.status_tx,
            clock: crate::clock::Clock::new(),
        };
        let r = server.run(inbox, shutdown).await;
        tasks.shutdown().await;
        tracing::info!("unreplicated server stopped");
        r
    }
}

struct Server<S: Service> {
    service: S,
    macs: bool,
    shared: Arc<Shared>,
    sessions: HashMap<ClientId, Session>,
    log: OpLog,
    /// Each client's last executed request and result (exactly-once).
    replies: ReplyCache,
    /// Replies of this turn, sent once the turn is durable.
    held: Vec<(ClientId, Arc<[u8]>)>,
    executed: u64,
    read_only: u64,
    /// Dropped requests by reason (the core's reason names).
    dropped: BTreeMap<&'static str, u64>,
    status_tx: watch::Sender<NodeStatus>,
    /// The service's non-deterministic input (e.g. the file service's timestamps) comes
    /// from this clock, as a replicated primary's would.
    clock: crate::clock::Clock,
}

impl<S: Service> Server<S> {
    async fn run(
        &mut self,
        mut inbox: super::inbox::Inbox,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), NodeError> {
        tokio::pin!(shutdown);
        let mut tick = tokio::time::interval(self.shared.options.status_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                input = inbox.next() => {
                    let Some(input) = input else { break };
                    self.on_input(input);
                    for _ in 1..self.shared.options.turn_inputs_max {
                        match inbox.try_next() {
                            Some(input) => self.on_input(input),
                            None => break,
                        }
                    }
                    self.end_turn()?;
                }
                _ = tick.tick() => self.publish_status(),
            }
        }
        self.publish_status();
        Ok(())
    }

    /// Makes the turn durable (one group commit), then sends its replies. A storage failure
    /// stops the server: it must not answer what it could forget.
    fn end_turn(&mut self) -> Result<(), NodeError> {
        if let Some(msg) = self.service.failure() {
            tracing::error!("{msg}; stopping");
            return Err(NodeError::Service(msg));
        }
        if let Err(e) = self.log.commit(&mut self.service, &self.replies) {
            tracing::error!(error = %e, "cannot store executed requests; stopping");
            return Err(NodeError::Storage(e));
        }
        let counters = &self.shared.counters;
        for (client, frame) in self.held.drain(..) {
            if let Some(s) = self.sessions.get(&client) {
                s.queue.push(frame, counters);
            }
        }
        Ok(())
    }

    fn publish_status(&self) {
        let core = crate::status::CoreCounters {
            // As a replica counts them: read-only requests apart.
            requests_executed: self.executed.saturating_sub(self.read_only),
            read_only_executed: self.read_only,
            dropped: self
                .dropped
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            ..Default::default()
        };
        self.status_tx.send_modify(|s| {
            s.last_executed = self.executed;
            s.clients_connected = self.sessions.len() as u32;
            s.has_new_view = true;
            s.core = core;
            s.net = self.shared.counters.snapshot();
            s.disk = self.log.disk_counters();
            s.service = self
                .service
                .counters()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
        });
    }

    fn on_input(&mut self, input: Inbound) {
        match input {
            Inbound::Frame(bytes, _budget, _) => self.on_frame(&bytes),
            Inbound::ClientUp {
                admission,
                queue,
                conn,
            } => {
                self.sessions.insert(
                    admission.client,
                    Session {
                        conn,
                        to_client: admission.to_client,
                        from_client: admission.from_client,
                        queue,
                    },
                );
            }
            // No peers: nobody introduces clients to a lone server.
            Inbound::ClientKnown(_) => {}
            Inbound::ClientDown { client, conn } => {
                if self.sessions.get(&client).is_some_and(|s| s.conn == conn) {
                    self.sessions.remove(&client);
                }
            }
        }
    }

    fn on_frame(&mut self, bytes: &[u8]) {
        let max = self.shared.cluster.bft.message_bytes_max;
        let drops = &mut self.dropped;
        let mut reject = |why: DropReason| *drops.entry(drop_reason_name(why)).or_insert(0) += 1;
        let Ok(frame) = Frame::parse(bytes, max) else {
            return reject(DropReason::Malformed);
        };
        let h = frame.header;
        if h.epoch != self.shared.cluster.bft.epoch {
            return reject(DropReason::WrongEpoch);
        }
        let (Principal::Client(client), Tag::Request) = (h.sender, h.tag) else {
            return reject(DropReason::Invalid);
        };
        let Some(session) = self.sessions.get_mut(&client) else {
            return reject(DropReason::BadAuth); // No keys for it: not connected here.
        };
        if self.macs && (h.auth != AuthKind::Mac || !frame.verify_mac(&session.from_client, 0)) {
            return reject(DropReason::BadAuth);
        }
        let Some(req) = RequestView::decode(frame.body) else {
            return reject(DropReason::Malformed);
        };
        if req.client != client {
            return reject(DropReason::Invalid);
        }
        let to_client = session.to_client.clone();
        let cached = match self.replies.get(&client) {
            Some((rid, result)) if req.rid == *rid => Some(result.clone()),
            Some((rid, _)) if req.rid < *rid => return reject(DropReason::Stale),
            _ => None,
        };
        let result = match cached {
            // A retransmission: the cached result again (it may be in this turn, not yet
            // durable: `held` keeps the order, so the copy leaves after the commit too).
            Some(result) => result,
            None => {
                let read_only = h.flags & FLAG_READ_ONLY != 0 && self.service.is_read_only(req.op);
                let result = if read_only {
                    self.read_only += 1;
                    self.service.execute_read_only(client, req.op)
                } else {
                    let nondet = self
                        .service
                        .propose_nondet(self.executed + 1, self.clock.now());
                    let result = self.service.execute(client, req.op, &nondet);
                    self.log.record(bytes, &nondet);
                    self.replies.insert(client, (req.rid, result.clone()));
                    result
                };
                self.executed += 1;
                result
            }
        };
        let reply = Message::Reply(Reply {
            view: 0,
            rid: req.rid,
            client,
            replica: 0,
            tentative: false,
            result_digest: Digest::of(&result),
            result: Some(result),
        });
        let env = Envelope::new(Principal::Replica(0), h.epoch);
        let auth = if self.macs {
            Auth::Mac(&to_client)
        } else {
            Auth::None
        };
        let frame: Arc<[u8]> = Arc::from(wire::encode(env, &reply, auth));
        self.held.push((client, frame));
    }
}
