//! The replica runtime: one tokio `current_thread` runtime per replica driving the sans-IO
//! [`byzfs_bft::Replica`].
//!
//! Tasks of one node:
//! * the **accept loop** and one task per incoming connection: handshake, then read frames
//!   into the inbox (`inbox`: a lane per peer replica and one for all clients, each
//!   bounded; readers wait when their lane is full, so TCP pushes back, and the event loop
//!   serves the lanes in turn);
//! * one **peer link** per other replica: dial with back-off, handshake, then write frames
//!   from its bounded queue;
//! * the **event loop** (`event_loop`), the only owner of the replica: inbox frames →
//!   `handle_message`, deadlines → `handle_timeout`, then drain `poll_action`.
//!
//! No protocol logic lives here: the runtime moves bytes and performs actions.

mod accept;
#[cfg(feature = "byzantine")]
mod attack;
mod disk_worker;
mod event_loop;
mod inbox;
#[cfg(feature = "byzantine")]
mod liar;
mod listen;
mod metrics;
mod oplog;
mod peer;
mod shed;
mod unreplicated;

pub use metrics::BATCH_SIZE as BATCH_SIZE_METRIC;
pub use metrics::{
    DISK_WORK_DURATION as DISK_WORK_DURATION_METRIC, REQUEST_LATENCY as REQUEST_LATENCY_METRIC,
    TURN_DURATION as TURN_DURATION_METRIC,
};
pub use unreplicated::UnreplicatedNode;

use crate::cluster::ClusterConfig;
use crate::counters::Counters;
use crate::error::SetupError;
use crate::kdf;
use crate::keyfile::ReplicaSecret;
use crate::link_lane::{LinkLane, PeerQueues};
use crate::queue::OutQueue;
use crate::status::NodeStatus;
use crate::storage::{Durability, MemoryDurability};
use byzfs_bft::{ClientId, MacKey, ReplicaId, ReplicaKeys, Service};
use core::future::Future;
use core::time::Duration;
use rand_core::{OsRng, RngCore as _};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{oneshot, watch};

#[cfg(feature = "byzantine")]
pub use attack::ReplicaAttack;
#[cfg(feature = "byzantine")]
pub use liar::{CorruptResult, LieToClients, LiesTold};

/// Limits and intervals of a replica runtime.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// Frames queued per peer link and lane ([`crate::link_lane`]) before new ones are
    /// dropped.
    pub peer_queue_frames: usize,
    /// Bytes queued per peer link and lane before new frames are dropped.
    pub peer_queue_bytes: usize,
    /// Frames queued per client connection.
    pub client_queue_frames: usize,
    /// Bytes queued per client connection.
    pub client_queue_bytes: usize,
    /// Frames waiting for the event loop in each lane of the inbox (one lane per peer
    /// replica, one for all clients; `inbox.rs`).
    pub inbox_frames: usize,
    /// Bytes of the frames waiting in the whole inbox, split evenly between its lanes: a
    /// flood of large frames cannot fill memory, nor take another lane's share.
    pub inbox_bytes: usize,
    /// Inputs handled before the actions are drained (group commit across inputs).
    pub turn_inputs_max: usize,
    /// Open incoming connections (replicas, clients, status queries).
    pub connections_max: usize,
    /// Open incoming connections from one IP address: one host cannot take every slot.
    pub connections_per_address_max: usize,
    /// Time allowed for a handshake.
    pub handshake_timeout: Duration,
    /// First reconnection delay of a peer link (doubles, with jitter, up to the max).
    pub reconnect_min: Duration,
    /// Largest reconnection delay.
    pub reconnect_max: Duration,
    /// How often the status snapshot is refreshed.
    pub status_interval: Duration,
    /// How often metrics are exported.
    pub metrics_interval: Duration,
    /// Listen here instead of at the replica's address in the cluster file (a host behind
    /// NAT, whose public address is not its own: `0.0.0.0:7000`). Peers and clients still
    /// dial the cluster file's address.
    pub listen: Option<String>,
    /// **Test-only fault injection** (`None` in normal operation; only with the feature
    /// `byzantine`, which release builds lack): makes this replica a Byzantine liar towards
    /// its clients. See [`LieToClients`].
    #[cfg(feature = "byzantine")]
    pub lie_to_clients: Option<LieToClients>,
    /// **Test-only fault injection** (`None` in normal operation; only with the feature
    /// `byzantine`): makes this replica attack the others' throughput. See
    /// [`ReplicaAttack`].
    #[cfg(feature = "byzantine")]
    pub attack: Option<ReplicaAttack>,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            peer_queue_frames: 4096,
            peer_queue_bytes: 64 << 20,
            client_queue_frames: 256,
            client_queue_bytes: 16 << 20,
            inbox_frames: 4096,
            inbox_bytes: 256 << 20,
            turn_inputs_max: 256,
            connections_max: 1024,
            connections_per_address_max: 256,
            handshake_timeout: Duration::from_secs(5),
            reconnect_min: Duration::from_millis(50),
            reconnect_max: Duration::from_secs(2),
            status_interval: Duration::from_millis(100),
            metrics_interval: Duration::from_secs(1),
            listen: None,
            #[cfg(feature = "byzantine")]
            lie_to_clients: None,
            #[cfg(feature = "byzantine")]
            attack: None,
        }
    }
}

/// Why a replica stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The listening socket could not be opened.
    #[error(
        "cannot listen on {addr}: {error}; is another replica running there, or is that \
         address not this host's (behind NAT: `byzfs replica --listen 0.0.0.0:PORT`)?"
    )]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// A promise could not be made durable: the replica stops rather than vote unbacked.
    #[error("durability failure: {0}")]
    Storage(std::io::Error),
    /// The tokio runtime or thread could not be created.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// The replica thread panicked.
    #[error("the replica thread panicked")]
    Panicked,
    /// The stored state does not restore (corrupt, or another service's).
    #[error("cannot restore the stored state: {0}; delete the data directory to rejoin through state transfer")]
    Restore(byzfs_bft::replica::RestoreError),
    /// The service reported a local failure it cannot continue after (`Service::failure`,
    /// e.g. its disk filled up during a checkpoint); nothing of that step was sent.
    #[error("{0}")]
    Service(String),
    /// The unreplicated server's stored state does not restore.
    #[error("cannot restore the unreplicated server's stored state: {0}; the data directory is damaged or belongs to another service (deleting it loses the stored files)")]
    UnreplicatedRestore(String),
}

/// Inputs of the event loop.
pub(crate) enum Inbound {
    /// A frame from some connection (the core authenticates it), with its share of the
    /// inbox's byte budget (released when the event loop is done with it) and where it
    /// came from: a client's own connection, or a peer's (which may forward a client's
    /// request).
    Frame(Vec<u8>, tokio::sync::OwnedSemaphorePermit, shed::Origin),
    /// A client connection passed the handshake.
    ClientUp {
        admission: accept::ClientAdmission,
        queue: OutQueue,
        conn: u64,
    },
    /// A peer replica introduced a client (its certificate verified): install its keys.
    ClientKnown(accept::ClientAdmission),
    /// That connection ended.
    ClientDown { client: ClientId, conn: u64 },
}

/// What the connection tasks of a node share.
/// Connected clients' introduction frames, with their connection numbers.
pub(crate) type Intros = std::collections::BTreeMap<ClientId, (u64, Arc<[u8]>)>;

pub(crate) struct Shared {
    pub cluster: Arc<ClusterConfig>,
    pub me: ReplicaId,
    pub x25519: x25519_dalek::StaticSecret,
    pub salt: Vec<u8>,
    /// `hello_in[j]`: key of replica j's handshake proofs towards us.
    pub hello_in: Vec<MacKey>,
    /// `hello_out[j]`: key of our handshake proofs towards replica j.
    pub hello_out: Vec<MacKey>,
    pub counters: Arc<Counters>,
    pub status: watch::Receiver<NodeStatus>,
    pub options: NodeOptions,
    /// Generation of the inbound connection from each replica, per lane
    /// ([`crate::link_lane::LinkLane::index`]): a newer one closes the older.
    pub inbound_gen: Vec<[watch::Sender<u64>; 2]>,
    /// Whether our outbound connections to each replica are up, per lane.
    pub peers_up: Vec<[AtomicBool; 2]>,
    /// Whether the last attempt to connect to each replica failed (its control lane's):
    /// reported to the core ([`byzfs_bft::Replica::handle_reachability`]) by the event
    /// loop, which `reachability` wakes at each change.
    pub peers_unreachable: Vec<AtomicBool>,
    pub reachability: tokio::sync::Notify,
    pub next_conn: AtomicU64,
    /// The introduction frame of every client connected to us, by client (with its
    /// connection number): a peer link that comes up sends them all first, so a peer that
    /// restarted (and forgot every introduction) can again authenticate the requests we
    /// forward or pre-prepare — found by the kill-and-restart test on the mount, where a
    /// restarted replica could not accept a big request's body and stayed behind.
    pub intros: std::sync::Mutex<Intros>,
    /// Sources shed for flooding (`shed.rs`), until when: their handshakes are refused.
    pub shed: std::sync::Mutex<Shed>,
}

/// Peers and client sessions refused until the instants given.
#[derive(Debug, Default)]
pub(crate) struct Shed {
    pub peers: std::collections::HashMap<ReplicaId, std::time::Instant>,
    /// Client sessions.
    pub clients: std::collections::HashMap<ClientId, std::time::Instant>,
    /// Client certificates (every session of them).
    pub certs: std::collections::HashMap<ClientId, std::time::Instant>,
}

impl Shared {
    /// Whether peer `j` is shed now.
    pub fn peer_shed(&self, j: ReplicaId) -> bool {
        self.shed.lock().is_ok_and(|s| {
            s.peers
                .get(&j)
                .is_some_and(|&t| t > std::time::Instant::now())
        })
    }

    /// Whether client session `c`, or its certificate, is shed now.
    pub fn client_shed(&self, c: ClientId) -> bool {
        let now = std::time::Instant::now();
        let cert = crate::cert::certificate_of(c);
        self.shed.lock().is_ok_and(|s| {
            s.clients.get(&c).is_some_and(|&t| t > now)
                || s.certs.get(&cert).is_some_and(|&t| t > now)
        })
    }
}

impl Shared {
    /// What the connection tasks of replica `secret.id` share (handshake keys derived here).
    pub fn new(
        cluster: Arc<ClusterConfig>,
        secret: &ReplicaSecret,
        options: NodeOptions,
        status: watch::Receiver<NodeStatus>,
    ) -> Arc<Shared> {
        let me = secret.id;
        let n = cluster.n();
        let salt = kdf::salt(&cluster.cluster_id, cluster.bft.epoch);
        let mut hello_in = Vec::with_capacity(n);
        let mut hello_out = Vec::with_capacity(n);
        for r in &cluster.replicas {
            // `replica_keys` (run by every node constructor) already refused
            // non-contributory keys.
            let shared = kdf::shared_secret(&secret.x25519, &r.x25519_public).unwrap_or_default();
            hello_in.push(kdf::replica_hello_key(&shared, &salt, r.id, me));
            hello_out.push(kdf::replica_hello_key(&shared, &salt, me, r.id));
        }
        Arc::new(Shared {
            cluster,
            me,
            x25519: secret.x25519.clone(),
            salt,
            hello_in,
            hello_out,
            counters: Arc::new(Counters::default()),
            status,
            options,
            inbound_gen: (0..n)
                .map(|_| [watch::channel(0).0, watch::channel(0).0])
                .collect(),
            peers_up: (0..n)
                .map(|_| [AtomicBool::new(false), AtomicBool::new(false)])
                .collect(),
            peers_unreachable: (0..n).map(|_| AtomicBool::new(false)).collect(),
            reachability: tokio::sync::Notify::new(),
            next_conn: AtomicU64::new(1),
            intros: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            shed: std::sync::Mutex::default(),
        })
    }

    /// The introductions of the clients connected to us (see [`Shared::intros`]).
    pub fn intro_frames(&self) -> Vec<Arc<[u8]>> {
        self.intros
            .lock()
            .map(|m| m.values().map(|(_, f)| f.clone()).collect())
            .unwrap_or_default()
    }

    /// Records whether connecting to `peer` just failed; wakes the event loop on a change.
    pub fn set_unreachable(&self, peer: ReplicaId, unreachable: bool) {
        let Some(flag) = self.peers_unreachable.get(peer as usize) else {
            return;
        };
        if flag.swap(unreachable, Ordering::Relaxed) != unreachable {
            self.reachability.notify_one();
        }
    }

    /// Peers both of whose outbound connections are up.
    pub fn peers_connected(&self) -> u32 {
        self.peers_up
            .iter()
            .filter(|u| u.iter().all(|u| u.load(Ordering::Relaxed)))
            .count() as u32
    }
}

/// A replica ready to run.
pub struct ReplicaNode<S: Service> {
    cluster: Arc<ClusterConfig>,
    secret: ReplicaSecret,
    keys: ReplicaKeys,
    service: S,
    options: NodeOptions,
    listeners: listen::Bound,
    durability: Box<dyn Durability>,
    status_tx: watch::Sender<NodeStatus>,
    status_rx: watch::Receiver<NodeStatus>,
}

impl<S: Service> ReplicaNode<S> {
    /// Replica `secret.id` of `cluster` over `service` (in its initial state), memory
    /// durability, default options.
    pub fn new(
        cluster: ClusterConfig,
        secret: ReplicaSecret,
        service: S,
    ) -> Result<Self, SetupError> {
        cluster.replica(secret.id)?;
        let keys = kdf::replica_keys(&cluster, &secret)?;
        let (status_tx, status_rx) = watch::channel(NodeStatus {
            replica: secret.id,
            ..NodeStatus::default()
        });
        Ok(ReplicaNode {
            cluster: Arc::new(cluster),
            secret,
            keys,
            service,
            options: NodeOptions::default(),
            listeners: Default::default(),
            durability: Box::new(MemoryDurability),
            status_tx,
            status_rx,
        })
    }

    /// Replaces the options.
    pub fn with_options(mut self, options: NodeOptions) -> Self {
        self.options = options;
        self
    }

    /// Uses an already bound listener instead of binding the configured address (tests
    /// bind port 0 first, then write the configuration).
    pub fn with_listener(mut self, listener: std::net::TcpListener) -> Self {
        self.listeners = listen::Bound::with_tcp(listener);
        self
    }

    /// Replaces the durability backend.
    pub fn with_durability(mut self, d: Box<dyn Durability>) -> Self {
        self.durability = d;
        self
    }

    /// This replica's id.
    pub fn id(&self) -> ReplicaId {
        self.secret.id
    }

    /// A receiver of the replica's status snapshots.
    pub fn status(&self) -> watch::Receiver<NodeStatus> {
        self.status_rx.clone()
    }

    /// Binds the configured address now (if no listener was given) and returns it, so an
    /// address conflict is reported before the replica starts.
    pub fn bind(&mut self) -> Result<SocketAddr, NodeError> {
        self.listeners.bind(
            &self.cluster.replicas[self.secret.id as usize],
            self.options.listen.as_deref(),
        )
    }

    /// Runs the replica until `shutdown` completes (or a durability failure). Must be called
    /// inside a tokio runtime with I/O and time enabled; one `current_thread` runtime per
    /// replica is the intended shape. Every task it spawned is stopped when it returns.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), NodeError> {
        let me = self.secret.id;
        self.bind()?;
        let listeners = std::mem::take(&mut self.listeners)
            .into_listeners(&self.cluster.replicas[me as usize])?;
        let cluster = self.cluster.clone();
        let n = cluster.n();
        let shared = Shared::new(
            cluster.clone(),
            &self.secret,
            self.options.clone(),
            self.status_rx.clone(),
        );
        let (inbox_tx, inbox_rx) =
            inbox::inbox(n, self.options.inbox_frames, self.options.inbox_bytes);
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(accept::accept_loop(listeners, shared.clone(), inbox_tx));
        let mut peers = Vec::with_capacity(n);
        for r in &cluster.replicas {
            if r.id == me {
                peers.push(None);
                continue;
            }
            let lanes = LinkLane::ALL.map(|lane| {
                let (q, rx) = crate::queue::out_queue(
                    self.options.peer_queue_frames,
                    self.options.peer_queue_bytes,
                );
                tasks.spawn(peer::peer_link(shared.clone(), r.id, lane, rx));
                q
            });
            peers.push(Some(PeerQueues { lanes }));
        }
        let clock = crate::clock::Clock::new();
        #[cfg(feature = "byzantine")]
        let attacker = self.options.attack.map(|kind| {
            attack::Attacker::new(
                kind,
                self.keys.clone(),
                cluster.bft.epoch,
                n,
                cluster.bft.view_change_timeout,
            )
        });
        let replica = match self.durability.take_loaded() {
            Some(stored) => byzfs_bft::Replica::restore(
                cluster.bft.clone(),
                self.keys,
                self.service,
                stored,
                OsRng.next_u64(),
                clock.now(),
            )
            .map_err(NodeError::Restore)?,
            None => byzfs_bft::Replica::new(
                cluster.bft.clone(),
                self.keys,
                self.service,
                OsRng.next_u64(),
                clock.now(),
            ),
        };
        tracing::info!(
            replica = me,
            view = replica.view(),
            last_executed = replica.last_executed(),
            last_stable = replica.last_stable(),
            n,
            durability = self.durability.name(),
            "replica started"
        );
        #[allow(unused_mut)]
        let mut ev = event_loop::EventLoop::new(
            replica,
            shared,
            peers,
            inbox_rx,
            self.durability,
            self.status_tx,
            clock,
        );
        #[cfg(feature = "byzantine")]
        ev.set_attacker(attacker);
        let result = ev.run(shutdown).await;
        tasks.shutdown().await;
        tracing::info!(replica = me, "replica stopped");
        result
    }
}

/// A replica running on its own thread with its own `current_thread` runtime (tests, and
/// anything that hosts several replicas in one process).
pub struct NodeHandle {
    id: ReplicaId,
    addr: SocketAddr,
    status: watch::Receiver<NodeStatus>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), NodeError>>>,
}

impl NodeHandle {
    /// Binds the node's address and starts it on a new thread.
    pub fn spawn<S: Service + Send + 'static>(
        mut node: ReplicaNode<S>,
    ) -> Result<NodeHandle, NodeError> {
        let id = node.id();
        let addr = node.bind()?;
        let status = node.status();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("replica-{id}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(NodeError::Runtime)?;
                rt.block_on(node.run(async {
                    let _ = stop_rx.await;
                }))
                // Dropping the runtime here cancels whatever is left and closes its sockets.
            })
            .map_err(NodeError::Runtime)?;
        Ok(NodeHandle {
            id,
            addr,
            status,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The replica's id.
    pub fn id(&self) -> ReplicaId {
        self.id
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The latest status snapshot.
    pub fn status(&self) -> NodeStatus {
        self.status.borrow().clone()
    }

    /// A receiver of status snapshots.
    pub fn watch(&self) -> watch::Receiver<NodeStatus> {
        self.status.clone()
    }

    /// Stops the replica (its sockets close) and waits for its thread.
    pub fn stop(mut self) -> Result<(), NodeError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), NodeError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| NodeError::Panicked)?,
            None => Ok(()),
        }
    }
}

impl Drop for NodeHandle {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}
