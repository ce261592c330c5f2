//! The mount's transport: the cluster client, shared by every thread of the mount (issue #45
//! items 1–2).
//!
//! A call is submitted ([`Wire::call`]) and waited for apart ([`Ticket::wait`]), so a
//! caller can let go of the mount's state while its request is at the replicas. Calls are
//! handed to the client in the order they were submitted, up to the client's window of
//! requests in flight (`client_window`, docs/PROTOCOL.md §1.6), and the replicas run a
//! client's requests in that order: a caller that submits while holding the mount's lock
//! fixes its operation's place among the mount's others, as one that waited would.
//!
//! **Who drives the client.** No thread of its own: a waiting caller drives it (sends the
//! queued calls, reads the replies, hands each result to its caller) until its own result
//! is in, then lets another waiting caller take over — the *leader* (`Leader`, behind an
//! async mutex). Alone, a caller sends and receives on its own thread with no hand-off (one
//! process on a mount is as fast as before lanes); with several, the leader passes the
//! others' results on. All callers block on one current-thread runtime, which lets any of
//! them drive its I/O in turn (tokio's `block_on` hands the runtime's core over). Between
//! calls the background thread drives it briefly (`background.rs`, [`Wire::drive_for`]), so
//! the links notice a restarted replica.
//!
//! The unreplicated client (NO-REP) has no window: a call is sent when its caller waits for
//! it, one at a time, each driven by its own caller (the order is that of the waits).

use crate::fsclient::{FsClient, Signer};
use byzfs_bft::client::{Access, ClientStats};
use byzfs_bft::RequestId;
use byzfs_fs::{Credentials, Grant, Op};
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::ClientCredential;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// How often a hard mount reports an operation still waiting for the cluster.
pub(crate) const STILL_WAITING: Duration = Duration::from_secs(10);

/// What a call ends with: the result bytes, or why there are none.
pub(crate) type Outcome = Result<Vec<u8>, String>;

/// One call, queued for the client.
struct Call {
    bytes: Vec<u8>,
    access: Access,
    done: oneshot::Sender<Outcome>,
}

/// The client and what the leader keeps between turns.
struct Leader {
    client: FsClient,
    /// Calls submitted, in order.
    calls: mpsc::UnboundedReceiver<Call>,
    /// Calls taken from `calls` that wait for room in the window.
    queued: VecDeque<Call>,
    /// Calls at the replicas, by request id.
    waiting: HashMap<RequestId, oneshot::Sender<Outcome>>,
}

/// The handle every thread of the mount holds.
pub(crate) struct Wire {
    rt: tokio::runtime::Runtime,
    mode: Mode,
    /// For encoding requests on the caller's thread: the grant and the client id.
    signer: Signer,
    /// The client's counters as of the last result handed over.
    stats: Arc<Mutex<Option<ClientStats>>>,
    /// Results handed over so far, told to threads waiting for any ([`Wire::await_answer`]).
    answers: Arc<Answers>,
}

/// How many results the leader handed over, and a wake-up at each.
#[derive(Default)]
struct Answers {
    count: std::sync::atomic::AtomicU64,
    told: tokio::sync::Notify,
    /// Threads in [`Wire::await_answer`] now.
    awaiting: std::sync::atomic::AtomicUsize,
}

impl Answers {
    /// One more result handed over.
    fn one(&self) {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        self.told.notify_waiters();
    }

    fn count(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// The replicated client, led by its waiting callers; or the unreplicated one.
enum Mode {
    Windowed {
        calls: mpsc::UnboundedSender<Call>,
        leader: Arc<tokio::sync::Mutex<Leader>>,
    },
    Serial(Arc<tokio::sync::Mutex<FsClient>>),
}

impl Ticket {
    /// The result if it is in (a waiting caller or the background thread drove the
    /// client), without waiting; `None` if not yet, or never here (an unsent or taken one).
    pub(crate) fn ready(&mut self) -> Option<Outcome> {
        let Ticket::Sent(rx) = self else {
            return None;
        };
        let r = match rx.try_recv() {
            Ok(r) => r,
            Err(oneshot::error::TryRecvError::Empty) => return None,
            Err(oneshot::error::TryRecvError::Closed) => {
                Err("the mount's client is closed".to_string())
            }
        };
        *self = Ticket::Done;
        Some(r)
    }
}

/// A submitted call's result, to wait for.
pub(crate) enum Ticket {
    /// With the client: its result comes here.
    Sent(oneshot::Receiver<Outcome>),
    /// The unreplicated client's: sent when waited for.
    Unsent { bytes: Vec<u8>, read_only: bool },
    /// Waited for already.
    Done,
}

impl Wire {
    /// Connects to `cluster` (or its unreplicated server) as `cred`.
    pub(crate) fn connect(
        cluster: &ClusterConfig,
        cred: &ClientCredential,
        unreplicated: bool,
    ) -> anyhow::Result<Wire> {
        use anyhow::Context as _;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the mount's runtime")?;
        let client = rt
            .block_on(FsClient::connect(cluster, cred, unreplicated))
            .context("cannot connect to the cluster")?;
        let signer = client.signer();
        let mode = if client.windowed() {
            let (calls, rx) = mpsc::unbounded_channel();
            Mode::Windowed {
                calls,
                leader: Arc::new(tokio::sync::Mutex::new(Leader {
                    client,
                    calls: rx,
                    queued: VecDeque::new(),
                    waiting: HashMap::new(),
                })),
            }
        } else {
            Mode::Serial(Arc::new(tokio::sync::Mutex::new(client)))
        };
        Ok(Wire {
            rt,
            mode,
            signer,
            stats: Arc::new(Mutex::new(None)),
            answers: Arc::default(),
        })
    }

    /// Whether a call goes to the client when submitted, so it may be left in flight and
    /// waited for later (the replicated client's window); the unreplicated client sends a
    /// call only when it is waited for.
    pub(crate) fn windowed(&self) -> bool {
        matches!(self.mode, Mode::Windowed { .. })
    }

    /// Submits an encoded request ([`Wire::request`]); its place among this mount's
    /// requests is fixed now.
    pub(crate) fn call(&self, bytes: Vec<u8>, access: Access) -> Ticket {
        let Mode::Windowed { calls, .. } = &self.mode else {
            let read_only = access.is_read_only();
            return Ticket::Unsent { bytes, read_only };
        };
        let (done, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError(c)) = calls.send(Call {
            bytes,
            access,
            done,
        }) {
            let _ = c.done.send(Err("the mount's client is closed".into()));
        }
        Ticket::Sent(rx)
    }

    /// Drives the client for `d` (no call of this thread waiting): replies that came late,
    /// reconnections, calls left in flight. Returns at once, `false`, if another thread
    /// drives it.
    pub(crate) fn drive_for(&self, d: Duration) -> bool {
        let (stats, answers) = (Arc::clone(&self.stats), Arc::clone(&self.answers));
        match &self.mode {
            Mode::Windowed { leader, .. } => self.rt.block_on(async move {
                let Ok(mut l) = leader.try_lock() else {
                    return false;
                };
                let _ = tokio::time::timeout(d, l.lead(&stats, &answers)).await;
                true
            }),
            // The unreplicated client's link runs on the runtime: let it.
            // (The timer is made inside the runtime: outside it there is no timer to use.)
            Mode::Serial(_) => self.rt.block_on(async move {
                tokio::time::sleep(d).await;
                true
            }),
        }
    }

    /// Waits for `ticket`'s result, leading the client meanwhile whenever no other thread
    /// does, or up to `timeout` (a soft mount's; `None`: for ever, saying every
    /// [`STILL_WAITING`] that it still waits). `None` at the timeout: the request stays
    /// with the client, whose result is then dropped.
    pub(crate) fn wait(
        &self,
        ticket: Ticket,
        timeout: Option<Duration>,
        name: &'static str,
    ) -> Option<Outcome> {
        let gone = || Err("the mount's client is closed".to_string());
        let (leader, mut done) = match (&self.mode, ticket) {
            (Mode::Windowed { leader, .. }, Ticket::Sent(done)) => (Arc::clone(leader), done),
            (Mode::Serial(client), Ticket::Unsent { bytes, read_only }) => {
                return self
                    .rt
                    .block_on(serial(client, bytes, read_only, timeout, name))
            }
            _ => return Some(gone()),
        };
        let (stats, answers) = (Arc::clone(&self.stats), Arc::clone(&self.answers));
        self.rt.block_on(async move {
            let start = Instant::now();
            loop {
                let nap = nap(start, timeout)?;
                let sleep = tokio::time::sleep(nap);
                tokio::pin!(sleep);
                tokio::select! {
                    biased;
                    r = &mut done => return Some(r.unwrap_or_else(|_| gone())),
                    mut l = leader.lock() => {
                        tokio::select! {
                            biased;
                            r = &mut done => return Some(r.unwrap_or_else(|_| gone())),
                            () = l.lead(&stats, &answers) => return Some(gone()),
                            () = &mut sleep => {}
                        }
                    }
                    () = &mut sleep => {}
                }
                if timeout.is_none_or(|t| start.elapsed() < t) {
                    tracing::warn!(
                        op = name,
                        waited_s = start.elapsed().as_secs(),
                        "still waiting for the cluster to answer (hard mount: retrying)"
                    );
                }
            }
        })
    }

    /// How many results were handed over so far: read before looking at the calls one
    /// waits for, then given to [`Wire::await_answer`].
    pub(crate) fn answers(&self) -> u64 {
        self.answers.count()
    }

    /// Waits until a result beyond the first `seen` is handed over (to anyone), or up to
    /// `most`, leading the client meanwhile whenever no other thread does: for a thread
    /// that waits for calls it does not hold the tickets of (the write-back in flight, kept
    /// in the mount's books: `unlocked.rs`), without the mount's lock.
    pub(crate) fn await_answer(&self, seen: u64, most: Duration) {
        let Mode::Windowed { leader, .. } = &self.mode else {
            return;
        };
        let leader = Arc::clone(leader);
        let (stats, answers) = (Arc::clone(&self.stats), Arc::clone(&self.answers));
        use std::sync::atomic::Ordering::AcqRel;
        self.answers.awaiting.fetch_add(1, AcqRel);
        self.rt.block_on(async move {
            let told = answers.told.notified();
            tokio::pin!(told);
            // Registered before the count is read: a result handed over in between wakes it.
            told.as_mut().enable();
            if answers.count() > seen {
                return;
            }
            let sleep = tokio::time::sleep(most);
            tokio::pin!(sleep);
            tokio::select! {
                biased;
                () = &mut told => {}
                mut l = leader.lock() => {
                    tokio::select! {
                        biased;
                        () = &mut told => {}
                        () = l.lead(&stats, &answers) => {}
                        () = &mut sleep => {}
                    }
                }
                () = &mut sleep => {}
            }
        });
        self.answers.awaiting.fetch_sub(1, AcqRel);
    }

    /// How many threads wait in [`Wire::await_answer`] now (without the mount's lock).
    pub(crate) fn awaiting(&self) -> usize {
        self.answers
            .awaiting
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The encoded request running `op` as `cred` ([`Signer::request`]).
    pub(crate) fn request(&self, cred: &Credentials, op: Op) -> Vec<u8> {
        self.signer.request(cred, op)
    }

    /// `cred` mapped into the credential's grant ([`Signer::granted`]).
    pub(crate) fn granted(&self, cred: &Credentials) -> Credentials {
        self.signer.granted(cred)
    }

    /// The grant.
    pub(crate) fn grant(&self) -> &Grant {
        self.signer.grant()
    }

    /// The protocol client id of this session.
    pub(crate) fn id(&self) -> byzfs_bft::ClientId {
        self.signer.id()
    }

    /// The BFT client's counters, or `None` for the unreplicated client.
    pub(crate) fn stats(&self) -> Option<ClientStats> {
        self.stats.lock().ok().and_then(|s| *s)
    }
}

/// How long to wait before saying a call started at `start` still waits; `None` once
/// `timeout` (a soft mount's) has passed.
fn nap(start: Instant, timeout: Option<Duration>) -> Option<Duration> {
    let waited = start.elapsed();
    match timeout {
        Some(t) if waited >= t => None,
        Some(t) => Some(STILL_WAITING.min(t - waited)),
        None => Some(STILL_WAITING),
    }
}

/// The unreplicated client's call: sent and waited for (as [`Wire::wait`]).
async fn serial(
    client: &tokio::sync::Mutex<FsClient>,
    bytes: Vec<u8>,
    read_only: bool,
    timeout: Option<Duration>,
    name: &'static str,
) -> Option<Outcome> {
    let start = Instant::now();
    let mut client = client.lock().await;
    let call = client.invoke(bytes, read_only);
    tokio::pin!(call);
    loop {
        let nap = nap(start, timeout)?;
        tokio::select! {
            r = &mut call => return Some(r.map_err(|e| e.to_string())),
            () = tokio::time::sleep(nap) => {
                if timeout.is_none_or(|t| start.elapsed() < t) {
                    tracing::warn!(op = name, waited_s = start.elapsed().as_secs(),
                        "still waiting for the cluster to answer (hard mount: retrying)");
                }
            }
        }
    }
}

impl Leader {
    /// Submits calls as they come and room allows, hands results over as they complete;
    /// returns only when the client is closed. Cancel-safe (the leader changes by dropping
    /// this future): every await is on a channel or on the client's `next_completed`, and
    /// a call taken from the channel is kept in `queued` until the client has it.
    async fn lead(&mut self, stats: &Mutex<Option<ClientStats>>, answers: &Answers) {
        loop {
            while let Some(c) = self.queued.front() {
                if !self.client.has_room(c.access) {
                    break;
                }
                let Some(c) = self.queued.pop_front() else {
                    break;
                };
                match self.client.submit_now(c.bytes, c.access) {
                    Ok(rid) => {
                        self.waiting.insert(rid, c.done);
                    }
                    Err(e) => {
                        let _ = c.done.send(Err(e.to_string()));
                        answers.one();
                    }
                }
            }
            tokio::select! {
                biased;
                c = self.calls.recv() => match c {
                    Some(c) => self.queued.push_back(c),
                    None => return,
                },
                r = self.client.next_completed(), if !self.waiting.is_empty() => match r {
                    Ok((rid, result)) => {
                        if let Some(done) = self.waiting.remove(&rid) {
                            let _ = done.send(Ok(result));
                            answers.one();
                        }
                        if let Ok(mut s) = stats.lock() {
                            *s = self.client.stats();
                        }
                    }
                    Err(e) => {
                        // The client closed: every waiting call fails.
                        let why = e.to_string();
                        for (_, done) in self.waiting.drain() {
                            let _ = done.send(Err(why.clone()));
                        }
                        answers.one();
                        return;
                    }
                },
            }
        }
    }
}
