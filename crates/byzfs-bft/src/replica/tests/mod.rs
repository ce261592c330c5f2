//! Handler-level tests: each protocol step with its exact outputs (docs/STYLE.md level 1), one
//! file per protocol step, plus a small synchronous cluster (`cluster.rs`) for multi-step
//! paths (view change, checkpoints, state transfer). The helpers here build replicas,
//! requests and frames.

mod busy;
mod catch_up;
mod clients;
mod cluster;
mod idle;
mod monitor;
mod normal;
mod read_only;
mod relay;
mod restart;
mod status;
mod transfer;
mod view_change;
mod window;

use super::*;
use crate::action::{Action, Event, PersistRecord, StoreRecord};
use crate::batch::batch_digest;
use crate::crypto::TestKeys;
use crate::message::*;
use crate::wire::{encode, encode_with_body, Auth, Envelope, Frame, REPLIER_ALL};
use cluster::Cluster;
use view_change::{moves_to_view_1, view_change_with};

/// A counter service over `PartitionedState`: op `w…` increments and returns the count (and
/// keeps whatever follows the `w` under a key of its own), op `r…` reads it (read-only).
struct Counter {
    state: PartitionedState,
    /// A service that persists its own state (`Service::persists_state`) keeps here, as a
    /// disk would, the checkpoints `persist` made durable.
    disk: Option<ServiceDisk>,
}

/// A persisting [`Counter`]'s durable checkpoints: seq → partitions (digest, content).
type ServiceDisk = std::rc::Rc<std::cell::RefCell<BTreeMap<Seq, Vec<(Digest, Vec<u8>)>>>>;

impl Counter {
    fn new() -> Self {
        Counter {
            state: PartitionedState::new(4),
            disk: None,
        }
    }
    /// A counter that persists its state in `disk` (shared across its restarts).
    fn persisting(disk: &ServiceDisk) -> Self {
        Counter {
            disk: Some(disk.clone()),
            ..Counter::new()
        }
    }
    fn count(&self) -> u64 {
        self.state
            .get(b"n")
            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()))
    }
}

impl Service for Counter {
    fn is_read_only(&self, op: &[u8]) -> bool {
        op.first() == Some(&b'r')
    }
    fn propose_nondet(&mut self, _seq: Seq, _now: Time) -> Vec<u8> {
        vec![1]
    }
    fn check_nondet(&self, _seq: Seq, nondet: &[u8], _now: Time) -> bool {
        nondet == [1]
    }
    fn execute(&mut self, _c: ClientId, op: &[u8], _nondet: &[u8]) -> Vec<u8> {
        let n = self.count() + 1;
        self.state.put(b"n".to_vec(), n.to_le_bytes().to_vec());
        if op.len() > 1 {
            self.state
                .put(format!("v{n}").into_bytes(), op[1..].to_vec());
        }
        n.to_le_bytes().to_vec()
    }
    fn execute_read_only(&self, _c: ClientId, _op: &[u8]) -> Vec<u8> {
        self.count().to_le_bytes().to_vec()
    }
    fn persists_state(&self) -> bool {
        self.disk.is_some()
    }
    fn persist(&mut self, stored: Seq) -> Result<Option<crate::service::DiskWork>, String> {
        let Some(disk) = &self.disk else {
            return Ok(None);
        };
        let digests = self
            .state
            .checkpoint_digests(stored)
            .ok_or("checkpoint not held")?;
        let parts = (0u32..)
            .zip(digests)
            .map(|(p, d)| (d, self.state.export_partition(stored, p).unwrap()))
            .collect();
        let mut disk = disk.borrow_mut();
        // Keep the checkpoint of the previous call: the driver's record names it until its
        // own commit.
        let prev = disk.keys().next_back().copied();
        disk.retain(|&s, _| Some(s) == prev);
        disk.insert(stored, parts);
        Ok(None)
    }
    fn reopen(&mut self, seq: Seq) -> Result<Vec<Digest>, String> {
        let disk = self.disk.as_ref().ok_or("nothing persists")?.borrow();
        let parts = disk.get(&seq).ok_or(format!("no checkpoint {seq}"))?;
        for (p, (d, data)) in (0u32..).zip(parts) {
            assert!(self.state.import_partition(p, data, *d));
        }
        Ok(self.state.finish_import(seq))
    }
    crate::delegate_state!(state);
}

const CLIENT: ClientId = 77;

fn config() -> Config {
    let mut c = Config::new(1);
    c.checkpoint_interval = 4;
    c.log_window = 8;
    c.big_request_threshold = 64;
    c.view_change_timeout = Duration::from_millis(500);
    // Off: these tests count the slots and messages a few requests make; `idle.rs` turns
    // it on.
    c.idle_checkpoint = Duration::ZERO;
    c
}

fn replica(i: ReplicaId, cfg: &Config) -> Replica<Counter> {
    replica_with(i, cfg, [CLIENT])
}

/// Replica `i` that knows `clients`' keys.
fn replica_with<const N: usize>(
    i: ReplicaId,
    cfg: &Config,
    clients: [ClientId; N],
) -> Replica<Counter> {
    let keys = TestKeys::new(1, cfg.n());
    Replica::new(
        cfg.clone(),
        keys.replica(i, clients),
        Counter::new(),
        i as u64,
        Time::ZERO,
    )
}

fn drain(r: &mut Replica<Counter>) -> Vec<Action> {
    std::iter::from_fn(|| r.poll_action()).collect()
}

fn without_events(v: Vec<Action>) -> Vec<Action> {
    v.into_iter()
        .filter(|a| !matches!(a, Action::Event(_)))
        .collect()
}

fn request(cfg: &Config, rid: u64, op: &[u8], read_only: bool) -> Vec<u8> {
    client_request(cfg, CLIENT, rid, op, read_only, ReqAuth::Signed)
}

/// How a test request is authenticated.
#[derive(Clone, Copy, Debug)]
enum ReqAuth {
    /// Signature and every MAC good (a correct client).
    Signed,
    /// Good signature; the MACs of the replicas in the mask (bit `j` = replica `j`) spoiled.
    SignedMacsSpoiled(u32),
    /// Every MAC good over a bad signature (the client signed with another key).
    BadSignature,
    /// A plain authenticator, no signature (a MAC-only client).
    MacOnly,
}

fn client_request(
    cfg: &Config,
    client: ClientId,
    rid: u64,
    op: &[u8],
    read_only: bool,
    how: ReqAuth,
) -> Vec<u8> {
    flagged_request(cfg, client, rid, op, read_only as u8, how)
}

/// A request with header `flags` ([`crate::client::FLAG_READ_ONLY`], `FLAG_RELAY`).
fn flagged_request(
    cfg: &Config,
    client: ClientId,
    rid: u64,
    op: &[u8],
    flags: u8,
    how: ReqAuth,
) -> Vec<u8> {
    let tk = TestKeys::new(1, cfg.n());
    let keys = tk.client(client);
    let body = encode_body(&Message::Request(Request {
        client,
        rid,
        acked: rid - 1,
        after: 0,
        op: op.to_vec(),
    }));
    let env = Envelope {
        sender: Principal::Client(client),
        epoch: 0,
        flags,
        replier: REPLIER_ALL,
    };
    let own = keys.signing.clone().unwrap();
    let other = tk.client_signing(client + 1000);
    let auth = match how {
        ReqAuth::Signed | ReqAuth::SignedMacsSpoiled(_) => {
            Auth::SignedAuthenticator(&own, &keys.to_replica)
        }
        ReqAuth::BadSignature => Auth::SignedAuthenticator(&other, &keys.to_replica),
        ReqAuth::MacOnly => Auth::Authenticator(&keys.to_replica),
    };
    let mut bytes = encode_with_body(env, Tag::Request, &body, Digest::of(&body), auth);
    if let ReqAuth::SignedMacsSpoiled(mask) = how {
        let start = bytes.len() - cfg.n() * crate::crypto::MAC_LEN;
        for j in 0..cfg.n() {
            if mask & (1 << j) != 0 {
                bytes[start + j * crate::crypto::MAC_LEN] ^= 0xA5;
            }
        }
    }
    bytes
}

fn from_replica(cfg: &Config, j: ReplicaId, msg: &Message) -> Vec<u8> {
    let keys = TestKeys::new(1, cfg.n()).replica(j, [CLIENT]);
    let auth = match msg {
        Message::ViewChange(_) | Message::NewView(_) => Auth::Signature(&keys.signing),
        _ => Auth::Authenticator(&keys.to_replica),
    };
    encode(Envelope::new(Principal::Replica(j), 0), msg, auth)
}

/// One action as a handler test states it: frames decoded into their messages, so a test
/// compares a step's complete output with one `assert_eq!` (as openraft's engine tests do).
#[derive(Clone, Debug, PartialEq)]
enum Out {
    Persist(PersistRecord),
    Send(ReplicaId, Message),
    Broadcast(Message),
    Client(ClientId, Message),
    Other(Action),
}

/// `actions` as [`Out`]s, events left out (they are observations, not outputs).
fn outputs(actions: Vec<Action>) -> Vec<Out> {
    without_events(actions)
        .into_iter()
        .map(|a| match a {
            Action::Persist(rec) => Out::Persist(rec),
            Action::Send { to, bytes } => Out::Send(to, decode(&bytes)),
            Action::Broadcast { bytes } => Out::Broadcast(decode(&bytes)),
            Action::SendClient { client, bytes } => Out::Client(client, decode(&bytes)),
            other => Out::Other(other),
        })
        .collect()
}

/// What a view-0 primary outputs when it orders `req` alone at seq 1: its promise (a driver
/// need not sync it before the send), then the PRE-PREPARE.
fn proposal_of(req: Vec<u8>) -> Vec<Out> {
    proposal_of_batch(batch_of(req))
}

/// What a view-0 primary outputs when it proposes `batch` at seq 1 (as [`proposal_of`]).
fn proposal_of_batch(batch: BatchBody) -> Vec<Out> {
    let digest = batch_digest(&batch).unwrap();
    vec![
        Out::Persist(PersistRecord::Proposed {
            view: 0,
            seq: 1,
            digest,
        }),
        Out::Broadcast(pre_prepare_msg(0, 1, batch)),
    ]
}

/// The batch a correct primary proposes for the lone request `req` (the counter's choice is
/// `[1]`, §1.13).
fn batch_of(req: Vec<u8>) -> BatchBody {
    BatchBody {
        requests: vec![req],
        big: vec![],
        nondet: vec![1],
    }
}

/// PRE-PREPARE of `batch` at `(view, seq)`.
fn pre_prepare_msg(view: View, seq: Seq, batch: BatchBody) -> Message {
    Message::PrePrepare(PrePrepare { view, seq, batch })
}

/// The batch that names big request `req` by its digest alone (§1.10), and that digest.
fn big_batch_of(req: &[u8]) -> (BatchBody, Digest) {
    let d = Frame::parse(req, usize::MAX).unwrap().header.body_digest;
    let batch = BatchBody {
        requests: vec![],
        big: vec![d],
        nondet: vec![1],
    };
    (batch, d)
}

/// A fresh backup 1 gets the view-0 primary's PRE-PREPARE at seq 1 of the batch that names
/// big request `big` by digest, before the body: it waits for the body (§1.10
/// `is_pp_complete`), sending nothing. Then `big` arrives. Returns that step's outputs and
/// the batch digest.
fn body_after_pre_prepare(cfg: &Config, big: &[u8]) -> (Vec<Out>, Digest) {
    let mut b = replica(1, cfg);
    drain(&mut b);
    let (batch, _) = big_batch_of(big);
    let bd = batch_digest(&batch).unwrap();
    b.handle_message(
        Time(1),
        &from_replica(cfg, 0, &pre_prepare_msg(0, 1, batch)),
    );
    assert_eq!(
        outputs(drain(&mut b)),
        vec![],
        "no PREPARE without the body"
    );
    b.handle_message(Time(2), big);
    (outputs(drain(&mut b)), bd)
}

/// PREPARE of `replica` for `digest` at `(view, seq)`.
fn prepare_msg(view: View, seq: Seq, digest: Digest, replica: ReplicaId) -> Message {
    Message::Prepare(Prepare {
        view,
        seq,
        digest,
        replica,
    })
}

/// COMMIT of `replica` for `digest` at `(view, seq)`.
fn commit_msg(view: View, seq: Seq, digest: Digest, replica: ReplicaId) -> Message {
    Message::Commit(Commit {
        view,
        seq,
        digest,
        replica,
    })
}

/// What backup `me` outputs when it accepts the PRE-PREPARE of `digest` at `(view, seq)`
/// (§1.5): `horizon`, when `seq` is above its durable vote horizon, a new one (a log window
/// ahead, synced before the sends that follow); its vote (not synced, see
/// `PersistRecord::Voted`); then its PREPARE.
fn prepare_vote(
    view: View,
    seq: Seq,
    digest: Digest,
    me: ReplicaId,
    horizon: Option<Seq>,
) -> Vec<Out> {
    let horizon = horizon.map(|h| Out::Persist(PersistRecord::VoteHorizon(h)));
    horizon
        .into_iter()
        .chain([
            Out::Persist(PersistRecord::Voted { view, seq, digest }),
            Out::Broadcast(prepare_msg(view, seq, digest, me)),
        ])
        .collect()
}

/// What replica `me` outputs when `(view, seq)` prepares at it (`send_commit`, §1.5): its
/// P-info, durable before the `replies` of the tentative execution it then runs (§1.7; 2f+1
/// tentative replies acknowledge the write), then its COMMIT.
fn commit_vote(view: View, seq: Seq, digest: Digest, me: ReplicaId, replies: Vec<Out>) -> Vec<Out> {
    std::iter::once(Out::Persist(PersistRecord::Committed { view, seq, digest }))
        .chain(replies)
        .chain([Out::Broadcast(commit_msg(view, seq, digest, me))])
        .collect()
}

/// The REPLY replica `replica` (in `view`) sends [`CLIENT`] for request `rid` whose result is
/// the count `n`: the counter's results are 8 bytes, below `full_reply_threshold`, so every
/// replica sends them in full (§1.12).
fn reply_out(view: View, replica: ReplicaId, rid: RequestId, n: u64, tentative: bool) -> Out {
    let result = n.to_le_bytes().to_vec();
    Out::Client(
        CLIENT,
        Message::Reply(Reply {
            view,
            rid,
            client: CLIENT,
            replica,
            tentative,
            result_digest: Digest::of(&result),
            result: Some(result),
        }),
    )
}

/// The whole output of a step that refuses its input for `why`: nothing but the
/// [`Event::Dropped`] (compared as actions, events included, since [`outputs`] leaves events
/// out).
fn dropped(why: DropReason) -> Vec<Action> {
    vec![Action::Event(Event::Dropped(why))]
}

/// Orders `batch` at backup 1 in view 0 at `seq`, all at `now`: the PRE-PREPARE, then the
/// PREPARE of replica 2 that completes the prepared certificate (a tentative execution
/// runs in that step), then, unless `commits` is false, the COMMITs of replicas 0 and 2 (a
/// committed execution runs in the last step).
fn order_in_view_0(
    cfg: &Config,
    b: &mut Replica<Counter>,
    now: Time,
    seq: Seq,
    batch: BatchBody,
    commits: bool,
) {
    let d = batch_digest(&batch).unwrap();
    let pp = pre_prepare_msg(0, seq, batch);
    b.handle_message(now, &from_replica(cfg, 0, &pp));
    b.handle_message(now, &from_replica(cfg, 2, &prepare_msg(0, seq, d, 2)));
    if commits {
        deliver_commits(cfg, b, now, seq, d);
    }
}

/// The COMMITs of replicas 0 and 2 for `d` at `(0, seq)`: with its own, backup 1's commit
/// certificate.
fn deliver_commits(cfg: &Config, b: &mut Replica<Counter>, now: Time, seq: Seq, d: Digest) {
    for j in [0, 2] {
        b.handle_message(now, &from_replica(cfg, j, &commit_msg(0, seq, d, j)));
    }
}

/// STATUS of `replica` (§1.3) that asks for nothing: no missing batch or big request.
fn status_of(
    replica: ReplicaId,
    view: View,
    has_new_view: bool,
    last_stable: Seq,
    last_executed: Seq,
) -> Status {
    Status {
        replica,
        view,
        has_new_view,
        last_stable,
        last_executed,
        missing_batches: vec![],
        missing_requests: vec![],
    }
}

/// [`status_of`] as a message.
fn status_msg(
    replica: ReplicaId,
    view: View,
    has_new_view: bool,
    last_stable: Seq,
    last_executed: Seq,
) -> Message {
    Message::Status(status_of(
        replica,
        view,
        has_new_view,
        last_stable,
        last_executed,
    ))
}

/// Fires `r`'s timers in deadline order, one step per deadline, until `stop(r)` holds or the
/// next deadline is after `end`. Every step but the last must output exactly `idle` (as a
/// rule the periodic STATUS) or nothing (the throughput watch's period ends); returns the last
/// step's time and outputs.
fn fire_timers_until(
    r: &mut Replica<Counter>,
    end: Time,
    stop: impl Fn(&Replica<Counter>) -> bool,
    idle: &[Out],
) -> (Time, Vec<Out>) {
    let mut last: Option<(Time, Vec<Out>)> = None;
    while let Some(now) = r.poll_timeout().filter(|&t| t <= end && !stop(r)) {
        if let Some((at, out)) = &last {
            if !out.is_empty() {
                assert_eq!(out.as_slice(), idle, "at {at:?}");
            }
        }
        r.handle_timeout(now);
        last = Some((now, outputs(drain(r))));
    }
    last.expect("a timer fired")
}

fn decode(bytes: &[u8]) -> Message {
    Frame::parse(bytes, 1 << 24).unwrap().decode().unwrap()
}

use crate::wire::encode_body;
