//! The async client: [`ByzClient`] drives the sans-IO [`byzfs_bft::Client`] over one TCP link
//! per replica, with its retransmission timers.

mod link;
mod unreplicated;

pub use unreplicated::UnreplicatedClient;

use crate::cert::{new_session, session_client_id, ClientCert};
use crate::clock::Clock;
use crate::cluster::ClusterConfig;
use crate::counters::{Counters, NetCounters};
use crate::error::SetupError;
use crate::kdf;
use crate::keyfile::ClientCredential;
use crate::queue::{out_queue, OutQueue};
use byzfs_bft::client::Access;
use byzfs_bft::{Client, ClientAction, ClientId, MacKey, ReplicaId, RequestId};
use core::time::Duration;
use rand_core::{OsRng, RngCore as _};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// Limits and timeouts of a client.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// How long [`ByzClient::connect`] waits for the links to settle.
    pub connect_timeout: Duration,
    /// Time allowed for one handshake.
    pub handshake_timeout: Duration,
    /// First reconnection delay (doubles, with jitter, up to the max).
    pub reconnect_min: Duration,
    /// Largest reconnection delay.
    pub reconnect_max: Duration,
    /// Frames queued per link.
    pub queue_frames: usize,
    /// Bytes queued per link.
    pub queue_bytes: usize,
    /// Frames received and not yet handled.
    pub inbox_frames: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(5),
            reconnect_min: Duration::from_millis(50),
            reconnect_max: Duration::from_secs(2),
            queue_frames: 64,
            queue_bytes: 16 << 20,
            inbox_frames: 1024,
        }
    }
}

/// Why the client failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Bad configuration or credential.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// Too few replicas could be reached.
    #[error("reached {up} of {n} replicas, need at least {need}: {details}")]
    Unreachable {
        /// Links up.
        up: usize,
        /// Replicas.
        n: usize,
        /// Links needed (`f+1`).
        need: usize,
        /// Per-replica reasons.
        details: String,
    },
    /// The operation exceeds `op_bytes_max`.
    #[error("operation of {len} bytes exceeds the cluster's op_bytes_max of {max}")]
    TooLarge {
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The window of outstanding requests is full (cannot happen: `invoke` and `submit`
    /// wait for room first).
    #[error("the client's window of outstanding requests is full")]
    Busy,
    /// [`ByzClient::wait`] for an id that was not submitted or was collected already.
    #[error("request {0} was not submitted, or its result was collected already")]
    UnknownRequest(RequestId),
    /// Every link task ended (cannot happen while the client lives, unless one panicked).
    #[error("the client's connections are gone")]
    Closed,
}

/// State of one link, for [`ByzClient::connect`] and diagnostics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// First attempt in progress.
    Connecting,
    /// Handshake done; requests flow.
    Up,
    /// Failed at least once; retrying with back-off.
    Down(String),
    /// The replica refused the credential; retrying with back-off.
    Rejected(String),
}

/// What the link tasks share.
pub(crate) struct Links {
    cluster: Arc<ClusterConfig>,
    client: ClientId,
    session: u64,
    cred_cert: ClientCert,
    hello_keys: Vec<MacKey>,
    options: ClientOptions,
    counters: Arc<Counters>,
    states: Mutex<Vec<LinkState>>,
    changed: watch::Sender<u64>,
}

impl Links {
    /// A fresh session of `cred` for `cluster`: the shared link state, the protocol client
    /// id and its MAC keys.
    pub(crate) fn new(
        cluster: Arc<ClusterConfig>,
        cred: &ClientCredential,
        options: ClientOptions,
    ) -> Result<(Arc<Links>, ClientId, byzfs_bft::ClientKeys), ClientError> {
        let n = cluster.n();
        let session = new_session();
        let id = session_client_id(cred.cert.client, session).ok_or_else(|| {
            SetupError::Usage(format!("client id {} is out of range", cred.cert.client))
        })?;
        let keys = kdf::client_keys(&cluster, cred, id)?;
        let salt = kdf::salt(&cluster.cluster_id, cluster.bft.epoch);
        let mut hello_keys = Vec::with_capacity(n);
        for r in &cluster.replicas {
            // `client_keys` above already refused non-contributory keys.
            let shared = kdf::shared_secret(&cred.x25519, &r.x25519_public).unwrap_or_default();
            hello_keys.push(kdf::client_hello_key(
                &shared,
                &salt,
                cred.cert.client,
                r.id,
            ));
        }
        let (changed, _) = watch::channel(0u64);
        let links = Arc::new(Links {
            cluster,
            client: id,
            session,
            cred_cert: cred.cert.clone(),
            hello_keys,
            options,
            counters: Arc::new(Counters::default()),
            states: Mutex::new(vec![LinkState::Connecting; n]),
            changed,
        });
        Ok((links, id, keys))
    }

    fn set(&self, replica: ReplicaId, s: LinkState) {
        if let Ok(mut states) = self.states.lock() {
            if let Some(slot) = states.get_mut(replica as usize) {
                *slot = s;
            }
        }
        self.changed.send_modify(|g| *g += 1);
    }

    fn states(&self) -> Vec<LinkState> {
        self.states.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// An async BFT client: invoke operations on a replicated service, one at a time.
///
/// Each [`ByzClient`] is a fresh client *session* (see [`crate::cert`]): its protocol client
/// id is the certificate's id with a new session number, so request ids never collide with an
/// earlier process using the same credential.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use byzfs_bft::services::kv::{KvOp, KvResult};
/// use byzfs_net::{ByzClient, ClientCredential, ClusterConfig};
///
/// let cluster = ClusterConfig::load("byzfs-cluster/cluster.toml".as_ref())?;
/// let cred = ClientCredential::load("byzfs-cluster/client-1.key".as_ref(), &cluster)?;
/// let mut client = ByzClient::connect(&cluster, &cred).await?;
///
/// let put = KvOp::Put { key: b"k".to_vec(), value: b"v".to_vec() };
/// client.invoke(put.encode(), false).await?;
/// let get = KvOp::Get { key: b"k".to_vec() };
/// let got = client.invoke(get.encode(), true).await?; // read-only
/// assert_eq!(KvResult::decode(&got), Some(KvResult::Value(Some(b"v".to_vec()))));
/// # Ok(()) }
/// ```
///
/// `invoke` retransmits (with the core client's back-off) until a reply certificate
/// completes; it has no deadline of its own — wrap it in `tokio::time::timeout`. Dropping an
/// `invoke` future leaves its request outstanding; its result is discarded when it comes.
/// Links reconnect by themselves; dropping the client closes them.
///
/// Several requests may be in flight (`Config::client_window`, docs/PROTOCOL.md §1.6):
/// [`ByzClient::submit`] sends one and returns its id at once, [`ByzClient::wait`] collects
/// its result. They run at the replicas in the order they were submitted.
///
/// ```no_run
/// # async fn f(client: &mut byzfs_net::ByzClient, ops: Vec<Vec<u8>>) -> Result<(), byzfs_net::ClientError> {
/// let mut ids = Vec::new();
/// for op in ops {
///     ids.push(client.submit(op, false).await?); // waits only while the window is full
/// }
/// for id in ids {
///     let _result = client.wait(id).await?;
/// }
/// # Ok(()) }
/// ```
pub struct ByzClient {
    id: ClientId,
    n: usize,
    client: Client,
    queues: Vec<OutQueue>,
    inbox: mpsc::Receiver<Vec<u8>>,
    links: Arc<Links>,
    clock: Clock,
    /// Requests submitted and not yet collected by [`ByzClient::wait`], with the result once
    /// it came.
    submitted: BTreeMap<RequestId, Option<Vec<u8>>>,
    _tasks: JoinSet<()>,
}

/// What [`ByzClient::drive`] runs until.
#[derive(Clone, Copy)]
enum Until {
    /// This request completed (its result is returned).
    Done(RequestId),
    /// The window has room for a request (read-only or not).
    Room(Access),
    /// Some submitted request completed (its result is kept for collection).
    Any,
}

impl ByzClient {
    /// Connects to the replicas of `cluster` with `cred` and default options.
    pub async fn connect(
        cluster: &ClusterConfig,
        cred: &ClientCredential,
    ) -> Result<ByzClient, ClientError> {
        Self::connect_with(cluster, cred, ClientOptions::default()).await
    }

    /// Connects with `options`. Returns once every link is up, or once every link has
    /// either come up or failed at least once with a quorum (`2f+1`) up, or once every link
    /// is up or rejected our credential, or once every link has failed at least once with
    /// fewer than `f+1` up, or at the connect timeout — then it succeeds if at least `f+1` links are up (links keep reconnecting in
    /// the background either way).
    pub async fn connect_with(
        cluster: &ClusterConfig,
        cred: &ClientCredential,
        options: ClientOptions,
    ) -> Result<ByzClient, ClientError> {
        let cluster = Arc::new(cluster.clone());
        let n = cluster.n();
        let (links, id, keys) = Links::new(cluster.clone(), cred, options.clone())?;
        let mut changed_rx = links.changed.subscribe();
        let (inbox_tx, inbox) = mpsc::channel(options.inbox_frames.max(1));
        let mut tasks = JoinSet::new();
        let mut queues = Vec::with_capacity(n);
        for r in &cluster.replicas {
            let (q, rx) = out_queue(options.queue_frames, options.queue_bytes);
            tasks.spawn(link::run(links.clone(), r.id, rx, inbox_tx.clone()));
            queues.push(q);
        }
        let quorum = cluster.bft.quorum();
        let weak = cluster.bft.weak();
        let settled = |s: &[LinkState]| {
            let up = s.iter().filter(|l| **l == LinkState::Up).count();
            let pending = s.contains(&LinkState::Connecting);
            // A rejection is final for this credential: no point waiting for the timeout.
            let decided = s
                .iter()
                .all(|l| matches!(l, LinkState::Up | LinkState::Rejected(_)));
            // Every link tried once and too few are up: report now rather than at the
            // timeout (links keep retrying only for a client that exists).
            up == s.len() || (!pending && (up >= quorum || decided || up < weak))
        };
        let _ = tokio::time::timeout(options.connect_timeout, async {
            loop {
                if settled(&links.states()) {
                    return;
                }
                if changed_rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        let states = links.states();
        let up = states.iter().filter(|l| **l == LinkState::Up).count();
        if up < weak {
            let details = states
                .iter()
                .enumerate()
                .filter(|(_, s)| **s != LinkState::Up)
                .map(|(i, s)| {
                    let why = match s {
                        LinkState::Connecting => "no answer".to_string(),
                        LinkState::Down(e) => e.clone(),
                        LinkState::Rejected(r) => format!("rejected: {r}"),
                        LinkState::Up => String::new(),
                    };
                    format!("replica {i}: {why}")
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(ClientError::Unreachable {
                up,
                n,
                need: weak,
                details,
            });
        }
        tracing::debug!(client = id, up, n, "client connected");
        let mut client = Client::new(cluster.bft.clone(), keys, OsRng.next_u64());
        // The session number may have been drawn before: see `crate::cert`.
        client.advance_next_rid(crate::cert::first_request_id());
        Ok(ByzClient {
            id,
            n,
            client,
            queues,
            inbox,
            links,
            clock: Clock::new(),
            submitted: BTreeMap::new(),
            _tasks: tasks,
        })
    }

    /// The protocol client id of this session.
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The state of each replica link.
    pub fn link_states(&self) -> Vec<LinkState> {
        self.links.states()
    }

    /// The runtime's counters for this client.
    pub fn net_counters(&self) -> NetCounters {
        self.links.counters.snapshot()
    }

    /// The core client's counters.
    pub fn stats(&self) -> byzfs_bft::client::ClientStats {
        *self.client.stats()
    }

    /// Invokes `op` and returns its result once a reply certificate completes.
    /// `read_only` asks for the read-only optimisation (replicas decide for themselves).
    pub async fn invoke(&mut self, op: Vec<u8>, read_only: bool) -> Result<Vec<u8>, ClientError> {
        let rid = self.start(op, read_only).await?;
        self.drive(Until::Done(rid)).await
    }

    /// Sends `op` without waiting for its result, and returns its id for
    /// [`ByzClient::wait`]. Waits only while the window of outstanding requests is full.
    /// Requests run at the replicas in the order they were submitted; a read submitted
    /// while a write is outstanding is ordered after it.
    pub async fn submit(&mut self, op: Vec<u8>, read_only: bool) -> Result<RequestId, ClientError> {
        let rid = self.start(op, read_only).await?;
        self.submitted.insert(rid, None);
        Ok(rid)
    }

    /// The result of submitted request `rid`, once its reply certificate completes. An id
    /// that was not submitted, or was collected already, is [`ClientError::UnknownRequest`].
    pub async fn wait(&mut self, rid: RequestId) -> Result<Vec<u8>, ClientError> {
        match self.submitted.get(&rid) {
            None => return Err(ClientError::UnknownRequest(rid)),
            Some(Some(_)) => {
                return Ok(self.submitted.remove(&rid).flatten().unwrap_or_default());
            }
            Some(None) => {}
        }
        let result = self.drive(Until::Done(rid)).await?;
        self.submitted.remove(&rid);
        Ok(result)
    }

    /// Whether the window has room for a request now ([`ByzClient::submit_now`]).
    pub fn has_room(&self, access: impl Into<Access>) -> bool {
        self.client.can_invoke(access)
    }

    /// [`ByzClient::submit`] without waiting: [`ClientError::Busy`] when the window is full
    /// ([`ByzClient::has_room`]). Not async, so a caller that must not lose a request to a
    /// cancelled future (the mount's leader: `byzfs-fuse` `wire.rs`) never holds one half
    /// sent.
    pub fn submit_now(
        &mut self,
        op: Vec<u8>,
        access: impl Into<Access>,
    ) -> Result<RequestId, ClientError> {
        let access = access.into();
        if !self.client.can_invoke(access) {
            return Err(ClientError::Busy);
        }
        let rid = self.invoke_now(op, access)?;
        self.submitted.insert(rid, None);
        Ok(rid)
    }

    /// The next submitted request to complete and its result, in the order they complete
    /// (not submitted): one that completed already first, else the first to complete from
    /// now. For a caller that waits for many at once (the mount's lanes). With nothing
    /// submitted left to collect, [`ClientError::UnknownRequest`] (0). Cancel-safe: a
    /// result is never lost by dropping the future.
    pub async fn next_completed(&mut self) -> Result<(RequestId, Vec<u8>), ClientError> {
        loop {
            let done = self
                .submitted
                .iter()
                .find(|(_, r)| r.is_some())
                .map(|(k, _)| *k);
            if let Some(rid) = done {
                let result = self.submitted.remove(&rid).flatten().unwrap_or_default();
                return Ok((rid, result));
            }
            if self.submitted.is_empty() {
                return Err(ClientError::UnknownRequest(0));
            }
            self.drive(Until::Any).await?;
        }
    }

    /// How many requests are outstanding.
    pub fn outstanding(&self) -> usize {
        self.client.outstanding()
    }

    /// Starts a request once the window has room.
    async fn start(&mut self, op: Vec<u8>, read_only: bool) -> Result<RequestId, ClientError> {
        let access = Access::from(read_only);
        if !self.client.can_invoke(access) {
            self.drive(Until::Room(access)).await?;
        }
        self.invoke_now(op, access)
    }

    /// Hands a request to the core client (the window has room).
    fn invoke_now(&mut self, op: Vec<u8>, access: Access) -> Result<RequestId, ClientError> {
        let len = op.len();
        self.client
            .invoke(self.clock.now(), op, access)
            .map_err(|e| match e {
                byzfs_bft::ClientError::TooLarge => ClientError::TooLarge {
                    len,
                    max: self.links.cluster.bft.op_bytes_max,
                },
                byzfs_bft::ClientError::Busy => ClientError::Busy,
            })
    }

    /// Runs the client until `until` holds. Results of submitted requests that complete
    /// meanwhile are kept for [`ByzClient::wait`]; others (of dropped `invoke` futures)
    /// are discarded.
    async fn drive(&mut self, until: Until) -> Result<Vec<u8>, ClientError> {
        let sleep = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(sleep);
        loop {
            while let Some(a) = self.client.poll_action() {
                match a {
                    ClientAction::Send { to, bytes } => self.send(to, bytes),
                    ClientAction::Broadcast { bytes } => {
                        for to in 0..self.n as ReplicaId {
                            self.send(to, bytes.clone());
                        }
                    }
                    ClientAction::Reissued { .. } => {}
                    ClientAction::Completed { rid, result } => {
                        if matches!(until, Until::Done(w) if w == rid) {
                            return Ok(result);
                        }
                        if let Some(slot) = self.submitted.get_mut(&rid) {
                            *slot = Some(result);
                        }
                    }
                }
            }
            match until {
                Until::Room(ro) if self.client.can_invoke(ro) => return Ok(Vec::new()),
                Until::Done(rid) if self.submitted.get(&rid).is_some_and(|r| r.is_some()) => {
                    return Ok(self.submitted.remove(&rid).flatten().unwrap_or_default());
                }
                Until::Any if self.submitted.values().any(Option::is_some) => {
                    return Ok(Vec::new());
                }
                _ => {}
            }
            let now = self.clock.now();
            match self.client.poll_timeout() {
                // Nothing outstanding: the request waited for completed already (a bug
                // elsewhere) or never existed; either way nothing more will come.
                None => {
                    return Err(ClientError::UnknownRequest(match until {
                        Until::Done(rid) => rid,
                        Until::Room(_) | Until::Any => 0,
                    }))
                }
                Some(t) if t <= now => {
                    self.client.handle_timeout(now);
                    continue;
                }
                Some(t) => sleep.as_mut().reset(self.clock.instant_of(t)),
            }
            tokio::select! {
                f = self.inbox.recv() => {
                    let Some(f) = f else { return Err(ClientError::Closed) };
                    self.client.handle_message(self.clock.now(), &f);
                    while let Ok(f) = self.inbox.try_recv() {
                        self.client.handle_message(self.clock.now(), &f);
                    }
                }
                _ = &mut sleep => {}
            }
        }
    }

    fn send(&self, to: ReplicaId, bytes: Arc<[u8]>) {
        if let Some(q) = self.queues.get(to as usize) {
            q.push(bytes, &self.links.counters);
        }
    }
}
