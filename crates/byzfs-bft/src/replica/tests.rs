//! Handler-level tests: each protocol step with its exact outputs (STYLE.md level 1), plus a
//! small synchronous cluster for multi-step paths (view change, checkpoints, state transfer).

use super::*;
use crate::action::{Action, Event, PersistRecord};
use crate::batch::batch_digest;
use crate::crypto::TestKeys;
use crate::message::*;
use crate::wire::{encode, encode_with_body, Auth, Envelope, Frame, REPLIER_ALL};

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
    fn persist(&mut self, stored: Seq) -> Result<(), String> {
        let Some(disk) = &self.disk else {
            return Ok(());
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
        Ok(())
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
    c
}

fn replica(i: ReplicaId, cfg: &Config) -> Replica<Counter> {
    let keys = TestKeys::new(1, cfg.n());
    Replica::new(
        cfg.clone(),
        keys.replica(i, [CLIENT]),
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
    let tk = TestKeys::new(1, cfg.n());
    let keys = tk.client(client);
    let body = encode_body(&Message::Request(Request {
        client,
        rid,
        op: op.to_vec(),
    }));
    let env = Envelope {
        sender: Principal::Client(client),
        epoch: 0,
        flags: read_only as u8,
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

fn decode(bytes: &[u8]) -> Message {
    Frame::parse(bytes, 1 << 24).unwrap().decode().unwrap()
}

fn sent(actions: &[Action]) -> Vec<Message> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { bytes, .. }
            | Action::Broadcast { bytes }
            | Action::SendClient { bytes, .. } => Some(decode(bytes)),
            _ => None,
        })
        .collect()
}

use crate::wire::encode_body;

#[test]
fn primary_orders_a_request_with_persist_then_pre_prepare() {
    let cfg = config();
    let mut p = replica(0, &cfg);
    drain(&mut p);
    let req = request(&cfg, 1, b"w", false);
    p.handle_message(Time(10), &req);
    let out = without_events(drain(&mut p));
    assert_eq!(out.len(), 2, "{out:?}");
    let Action::Broadcast { bytes } = &out[1] else {
        panic!("expected broadcast: {out:?}")
    };
    let Message::PrePrepare(pp) = decode(bytes) else {
        panic!()
    };
    assert_eq!(
        (
            pp.view,
            pp.seq,
            pp.batch.requests.len(),
            &pp.batch.nondet[..]
        ),
        (0, 1, 1, &[1u8][..])
    );
    assert_eq!(pp.batch.requests[0], req);
    let d = batch_digest(&pp.batch).unwrap();
    // The primary's promise, which a driver need not sync before the send.
    assert_eq!(
        out[0],
        Action::Persist(PersistRecord::Proposed {
            view: 0,
            seq: 1,
            digest: d
        })
    );
}

#[test]
fn backup_prepares_then_commits_then_executes() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let req = request(&cfg, 1, b"w", false);
    let batch = BatchBody {
        requests: vec![req],
        big: vec![],
        nondet: vec![1],
    };
    let d = batch_digest(&batch).unwrap();
    let pp = Message::PrePrepare(PrePrepare {
        view: 0,
        seq: 1,
        batch,
    });
    b.handle_message(Time(10), &from_replica(&cfg, 0, &pp));
    let out = drain(&mut b);
    assert_eq!(
        out[0],
        Action::Persist(PersistRecord::VoteHorizon(1 + cfg.log_window)),
        "its first vote records a horizon a log window ahead"
    );
    assert_eq!(
        out[1],
        Action::Persist(PersistRecord::Voted {
            view: 0,
            seq: 1,
            digest: d
        })
    );
    assert_eq!(
        sent(&out),
        vec![Message::Prepare(Prepare {
            view: 0,
            seq: 1,
            digest: d,
            replica: 1
        })]
    );

    // One more PREPARE (from replica 2) completes the certificate (2f = 2 with our own).
    b.handle_message(
        Time(11),
        &from_replica(
            &cfg,
            2,
            &Message::Prepare(Prepare {
                view: 0,
                seq: 1,
                digest: d,
                replica: 2,
            }),
        ),
    );
    let out = drain(&mut b);
    // Persist P-info, then tentative execution (reply, Executed event), then COMMIT.
    let committed_at = out
        .iter()
        .position(|a| matches!(a, Action::Persist(PersistRecord::Committed { seq: 1, .. })))
        .expect("P-info persisted");
    let reply_at = out
        .iter()
        .position(|a| matches!(a, Action::SendClient { .. }))
        .expect("tentative reply");
    assert!(
        committed_at < reply_at,
        "the tentative reply waits for durable P-info"
    );
    let msgs = sent(&out);
    assert!(
        matches!(&msgs[0], Message::Reply(r) if r.tentative && r.rid == 1 && r.result == Some(1u64.to_le_bytes().to_vec()))
    );
    assert_eq!(
        msgs[1],
        Message::Commit(Commit {
            view: 0,
            seq: 1,
            digest: d,
            replica: 1
        })
    );
    assert!(out.contains(&Action::Persist(PersistRecord::Committed {
        view: 0,
        seq: 1,
        digest: d
    })));
    assert_eq!((b.last_tentative(), b.last_executed()), (1, 0));

    // Commits from 0 and 2 complete the commit certificate (2f+1 = 3 with our own).
    for j in [0, 2] {
        b.handle_message(
            Time(12),
            &from_replica(
                &cfg,
                j,
                &Message::Commit(Commit {
                    view: 0,
                    seq: 1,
                    digest: d,
                    replica: j,
                }),
            ),
        );
    }
    let out = drain(&mut b);
    assert!(out.contains(&Action::Event(Event::Committed { seq: 1, digest: d })));
    assert_eq!(b.last_executed(), 1);
    assert_eq!(b.service().count(), 1, "executed exactly once");
}

#[test]
fn conflicting_pre_prepare_is_refused() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    let pp1 = Message::PrePrepare(PrePrepare {
        view: 0,
        seq: 1,
        batch: BatchBody {
            requests: vec![request(&cfg, 1, b"w", false)],
            big: vec![],
            nondet: vec![1],
        },
    });
    let pp2 = Message::PrePrepare(PrePrepare {
        view: 0,
        seq: 1,
        batch: BatchBody {
            requests: vec![request(&cfg, 2, b"w", false)],
            big: vec![],
            nondet: vec![1],
        },
    });
    b.handle_message(Time(1), &from_replica(&cfg, 0, &pp1));
    drain(&mut b);
    b.handle_message(Time(2), &from_replica(&cfg, 0, &pp2));
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::Invalid))]
    );
}

#[test]
fn pre_prepare_failing_nondet_is_accepted_once_f_plus_1_others_prepared_it() {
    // A replica catching up receives a retransmitted PRE-PREPARE whose (time-based) choice it
    // would refuse now; f+1 = 2 other backups prepared it, so a correct one checked it.
    let cfg = config();
    let mut b = replica(3, &cfg);
    let batch = BatchBody {
        requests: vec![request(&cfg, 1, b"w", false)],
        big: vec![],
        nondet: vec![9],
    };
    let d = batch_digest(&batch).unwrap();
    let pp = from_replica(
        &cfg,
        0,
        &Message::PrePrepare(PrePrepare {
            view: 0,
            seq: 1,
            batch,
        }),
    );
    let prepare = |j: u32| {
        from_replica(
            &cfg,
            j,
            &Message::Prepare(Prepare {
                view: 0,
                seq: 1,
                digest: d,
                replica: j,
            }),
        )
    };
    b.handle_message(Time(1), &prepare(1));
    drain(&mut b);
    b.handle_message(Time(1), &pp);
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::Nondet))],
        "one PREPARE (f) is not enough"
    );
    b.handle_message(Time(1), &prepare(2));
    drain(&mut b);
    b.handle_message(Time(1), &pp);
    let out = without_events(drain(&mut b));
    assert!(
        out.contains(&Action::Persist(PersistRecord::Voted {
            view: 0,
            seq: 1,
            digest: d
        })),
        "{out:?}"
    );
    assert_eq!(b.last_tentative(), 1, "prepared and executed tentatively");
}

#[test]
fn pre_prepare_from_non_primary_or_bad_nondet_is_refused() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    let batch = BatchBody {
        requests: vec![request(&cfg, 1, b"w", false)],
        big: vec![],
        nondet: vec![1],
    };
    b.handle_message(
        Time(1),
        &from_replica(
            &cfg,
            2,
            &Message::PrePrepare(PrePrepare {
                view: 0,
                seq: 1,
                batch: batch.clone(),
            }),
        ),
    );
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::Invalid))]
    );
    let bad = BatchBody {
        nondet: vec![9],
        ..batch
    };
    b.handle_message(
        Time(1),
        &from_replica(
            &cfg,
            0,
            &Message::PrePrepare(PrePrepare {
                view: 0,
                seq: 1,
                batch: bad,
            }),
        ),
    );
    // Counted apart from other invalid messages: a replica catching up sees many old
    // time-based choices, which are not a primary's fault.
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::Nondet))]
    );
}

#[test]
fn out_of_window_and_bad_mac_are_dropped_and_counted() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    let batch = BatchBody {
        requests: vec![request(&cfg, 1, b"w", false)],
        big: vec![],
        nondet: vec![1],
    };
    b.handle_message(
        Time(1),
        &from_replica(
            &cfg,
            0,
            &Message::PrePrepare(PrePrepare {
                view: 0,
                seq: 9,
                batch,
            }),
        ),
    );
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::OutOfWindow))]
    );
    let mut bytes = from_replica(
        &cfg,
        2,
        &Message::Prepare(Prepare {
            view: 0,
            seq: 1,
            digest: Digest::ZERO,
            replica: 2,
        }),
    );
    let slot1 = bytes.len() - 3 * 16; // replica 1's MAC in the 4-entry authenticator
    bytes[slot1] ^= 0xFF;
    b.handle_message(Time(1), &bytes);
    b.handle_message(Time(1), b"garbage");
    assert_eq!(b.stats().dropped[&DropReason::OutOfWindow], 1);
    assert_eq!(b.stats().dropped[&DropReason::BadAuth], 1);
    assert_eq!(b.stats().dropped[&DropReason::Malformed], 1);
}

#[test]
fn prepare_claiming_another_sender_is_refused() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    // Replica 2 signs a PREPARE that says it is from replica 3.
    b.handle_message(
        Time(1),
        &from_replica(
            &cfg,
            2,
            &Message::Prepare(Prepare {
                view: 0,
                seq: 1,
                digest: Digest::ZERO,
                replica: 3,
            }),
        ),
    );
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::Invalid))]
    );
}

#[test]
fn read_only_request_is_answered_without_ordering() {
    let cfg = config();
    let mut b = replica(2, &cfg);
    drain(&mut b);
    b.handle_message(Time(1), &request(&cfg, 1, b"r", true));
    let msgs = sent(&drain(&mut b));
    assert_eq!(msgs.len(), 1);
    let Message::Reply(r) = &msgs[0] else {
        panic!()
    };
    assert!(r.tentative);
    assert_eq!(r.result, Some(0u64.to_le_bytes().to_vec()));
    // A write flagged read-only by a lying client is ordered, not executed locally.
    b.handle_message(Time(1), &request(&cfg, 2, b"w", true));
    let msgs = sent(&drain(&mut b));
    assert!(
        msgs.iter().all(|m| !matches!(m, Message::Reply(_))),
        "{msgs:?}"
    );
}

/// A signing client's read-only request may come unsigned (MACs only): it is answered on the
/// MAC. Flagged read-only but not read-only for the service, it must be ordered, which needs
/// the signature: dropped, and the client (which proved nothing bad) is not blacklisted.
#[test]
fn unsigned_read_only_request_is_answered_on_its_mac_alone() {
    let cfg = config();
    let mut b = replica(2, &cfg);
    drain(&mut b);
    b.handle_message(
        Time(1),
        &client_request(&cfg, CLIENT, 1, b"r", true, ReqAuth::MacOnly),
    );
    let msgs = sent(&drain(&mut b));
    assert!(
        matches!(&msgs[..], [Message::Reply(r)] if r.tentative),
        "{msgs:?}"
    );
    assert_eq!(b.stats().client_signatures_verified, 0);
    // Not flagged read-only: a signing client's frame must be signed.
    b.handle_message(
        Time(1),
        &client_request(&cfg, CLIENT, 2, b"r", false, ReqAuth::MacOnly),
    );
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::BadAuth))]
    );
    // A write flagged read-only without a signature cannot be ordered.
    b.handle_message(
        Time(1),
        &client_request(&cfg, CLIENT, 3, b"w", true, ReqAuth::MacOnly),
    );
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::BadAuth))]
    );
    assert!(!b.is_blacklisted(CLIENT));
}

/// Clients accept a write on `f+1` committed replies even with the read-only optimisation on
/// (waiting for `2f+1` is not live: simulator twins 346, 1466, 1704, 1746, equivocate 1335).
/// Reads stay linearizable because a replica that sent a COMMIT for `n` answers no read that
/// arrives afterwards until it has executed `n`; a read that arrived earlier is not held back.
#[test]
fn read_only_waits_for_batches_this_replica_sent_commit_for() {
    let mut cfg = config();
    // Without tentative execution the prepared batch leaves the state untouched, so only the
    // read-only floor can hold the read back.
    cfg.tentative_execution = false;
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let batch = BatchBody {
        requests: vec![request(&cfg, 1, b"w", false)],
        big: vec![],
        nondet: vec![1],
    };
    let d = batch_digest(&batch).unwrap();
    let pp = Message::PrePrepare(PrePrepare {
        view: 0,
        seq: 1,
        batch,
    });
    b.handle_message(Time(1), &from_replica(&cfg, 0, &pp));
    // A read arriving while the batch is only pre-prepared is answered from the current state.
    b.handle_message(Time(2), &request(&cfg, 2, b"r", true));
    let replies: Vec<Reply> = sent(&drain(&mut b))
        .into_iter()
        .filter_map(|m| match m {
            Message::Reply(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0].result, Some(0u64.to_le_bytes().to_vec()));

    let prepare = Message::Prepare(Prepare {
        view: 0,
        seq: 1,
        digest: d,
        replica: 2,
    });
    b.handle_message(Time(3), &from_replica(&cfg, 2, &prepare));
    let msgs = sent(&drain(&mut b));
    assert!(
        msgs.iter()
            .any(|m| matches!(m, Message::Commit(c) if c.seq == 1)),
        "prepared: COMMIT sent {msgs:?}"
    );
    // COMMIT sent: the write may complete at a client from now on, so no read is answered
    // from the state without it.
    b.handle_message(Time(4), &request(&cfg, 3, b"r", true));
    let msgs = sent(&drain(&mut b));
    assert!(
        msgs.iter().all(|m| !matches!(m, Message::Reply(_))),
        "read answered from state older than a batch it sent COMMIT for: {msgs:?}"
    );
    for j in [0, 2] {
        let commit = Message::Commit(Commit {
            view: 0,
            seq: 1,
            digest: d,
            replica: j,
        });
        b.handle_message(Time(5), &from_replica(&cfg, j, &commit));
    }
    assert_eq!(b.last_executed(), 1);
    let reads: Vec<Reply> = sent(&drain(&mut b))
        .into_iter()
        .filter_map(|m| match m {
            Message::Reply(r) if r.rid == 3 => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(
        reads.len(),
        1,
        "the queued read runs once the batch executes"
    );
    assert_eq!(reads[0].result, Some(1u64.to_le_bytes().to_vec()));
}

/// Runs `batch` through a backup at `seq` (view 0): PRE-PREPARE from the primary, PREPARE
/// from replica 2, COMMITs from 0 and 2. Returns every action.
fn order_at_backup(
    cfg: &Config,
    b: &mut Replica<Counter>,
    seq: Seq,
    batch: BatchBody,
) -> Vec<Action> {
    let d = batch_digest(&batch).unwrap();
    let pp = Message::PrePrepare(PrePrepare {
        view: 0,
        seq,
        batch,
    });
    b.handle_message(Time(seq), &from_replica(cfg, 0, &pp));
    let prepare = Message::Prepare(Prepare {
        view: 0,
        seq,
        digest: d,
        replica: 2,
    });
    b.handle_message(Time(seq), &from_replica(cfg, 2, &prepare));
    for j in [0, 2] {
        let commit = Message::Commit(Commit {
            view: 0,
            seq,
            digest: d,
            replica: j,
        });
        b.handle_message(Time(seq), &from_replica(cfg, j, &commit));
    }
    drain(b)
}

/// A faulty primary orders a big request a second time, by digest, after the backup executed
/// it (and holds no body: here it came inlined, in the simulator it was garbage-collected).
/// The body a peer relays must be kept although the reply cache already answers it, or the
/// second batch never prepares and every later sequence number waits behind it, through every
/// view change (simulator: equivocate 1510).
#[test]
fn body_of_an_executed_request_is_kept_for_a_batch_that_names_it() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let mut op = b"w".to_vec();
    op.resize(cfg.big_request_threshold + 1, b'x');
    let req = request(&cfg, 1, &op, false);
    let d = Frame::parse(&req, 1 << 24).unwrap().header.body_digest;
    let inlined = BatchBody {
        requests: vec![req.clone()],
        big: vec![],
        nondet: vec![1],
    };
    order_at_backup(&cfg, &mut b, 1, inlined);
    assert_eq!((b.last_executed(), b.service().count()), (1, 1));

    let by_digest = BatchBody {
        requests: vec![],
        big: vec![d],
        nondet: vec![1],
    };
    let pp = Message::PrePrepare(PrePrepare {
        view: 0,
        seq: 2,
        batch: by_digest.clone(),
    });
    b.handle_message(Time(3), &from_replica(&cfg, 0, &pp));
    let msgs = sent(&drain(&mut b));
    assert!(
        !msgs.iter().any(|m| matches!(m, Message::Prepare(_))),
        "no PREPARE without the body: {msgs:?}"
    );
    // A peer answers our STATUS (missing request d) with the client's frame.
    b.handle_message(Time(4), &req);
    let msgs = sent(&drain(&mut b));
    assert!(
        msgs.iter()
            .any(|m| matches!(m, Message::Prepare(p) if p.seq == 2 && p.view == 0)),
        "the relayed body completes the batch: {msgs:?}"
    );
    order_at_backup(&cfg, &mut b, 2, by_digest);
    assert_eq!(b.last_executed(), 2);
    assert_eq!(b.service().count(), 1, "the request still executes once");
}

#[test]
fn backup_forwards_request_and_times_out_into_view_change() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let req = request(&cfg, 1, b"w", false);
    b.handle_message(Time(0), &req);
    let out = drain(&mut b);
    assert_eq!(
        out,
        vec![Action::Send {
            to: 0,
            bytes: req.into()
        }]
    );
    let deadline = b.poll_timeout().unwrap();
    assert!(
        deadline <= Time(0) + Duration::from_millis(150),
        "status timer first"
    );
    // Run timers until the view-change timer fires.
    let mut now = Time(0);
    while b.view() == 0 {
        now = b.poll_timeout().unwrap();
        b.handle_timeout(now);
    }
    assert!(now >= Time(0) + cfg.view_change_timeout);
    // The signature, deferred on receipt (the MAC vouched), was checked before blaming the
    // primary.
    assert_eq!(b.stats().client_signatures_deferred, 1);
    assert_eq!(b.stats().client_signatures_verified, 1);
    let out = drain(&mut b);
    assert!(out.contains(&Action::Persist(PersistRecord::View(1))));
    let vc = sent(&out)
        .into_iter()
        .find_map(|m| {
            if let Message::ViewChange(v) = m {
                Some(v)
            } else {
                None
            }
        })
        .unwrap();
    assert_eq!((vc.view, vc.replica, vc.last_stable), (1, 1, 0));
    assert_eq!(vc.checkpoints.len(), 1, "checkpoint 0");
    assert!(!b.has_new_view());
}

/// Delivers every frame instantly between replicas (a toy driver), collecting client replies.
struct Cluster {
    cfg: Config,
    r: Vec<Replica<Counter>>,
    down: Vec<bool>,
    now: Time,
    replies: Vec<Reply>,
    /// What a disk driver would hold for each replica that stores its state.
    disks: Vec<Option<DurableState>>,
    /// Frames of this kind are lost in transit.
    lose: Option<crate::message::Tag>,
}

impl Cluster {
    fn new(cfg: Config) -> Self {
        let r: Vec<_> = (0..cfg.n() as u32).map(|i| replica(i, &cfg)).collect();
        let down = vec![false; r.len()];
        let disks = vec![None; r.len()];
        Cluster {
            cfg,
            r,
            down,
            now: Time(0),
            replies: vec![],
            disks,
            lose: None,
        }
    }
    fn pump(&mut self) {
        let mut queue: Vec<(usize, Arc<[u8]>)> = Vec::new();
        loop {
            for i in 0..self.r.len() {
                for a in drain(&mut self.r[i]) {
                    match a {
                        Action::Send { to, bytes } => queue.push((to as usize, bytes)),
                        Action::Broadcast { bytes } => (0..self.r.len())
                            .filter(|&j| j != i)
                            .for_each(|j| queue.push((j, bytes.clone()))),
                        Action::SendClient { bytes, .. } => {
                            if let Message::Reply(r) = decode(&bytes) {
                                self.replies.push(r)
                            }
                        }
                        Action::Persist(rec) => {
                            if let Some(d) = &mut self.disks[i] {
                                d.apply_persist(rec);
                            }
                        }
                        Action::Store(rec) => {
                            if let StoreRecord::Checkpoint(img) = &rec {
                                // As the driver does, before its commit.
                                self.r[i].persist_service(img.seq).unwrap();
                            }
                            if let Some(d) = &mut self.disks[i] {
                                d.apply_store(&rec);
                            }
                        }
                        // Every record is durable at once here.
                        Action::Event(_) | Action::Sync => {}
                    }
                }
            }
            if queue.is_empty() {
                return;
            }
            for (to, bytes) in std::mem::take(&mut queue) {
                let lost = self.lose.is_some_and(|t| {
                    Frame::parse(&bytes, usize::MAX).is_ok_and(|f| f.header.tag == t)
                });
                if !self.down[to] && !lost {
                    self.r[to].handle_message(self.now, &bytes);
                }
            }
        }
    }
    fn deliver_all(&mut self, bytes: &[u8]) {
        for i in 0..self.r.len() {
            if !self.down[i] {
                self.r[i].handle_message(self.now, bytes);
            }
        }
        self.pump();
    }
    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            let next = self
                .r
                .iter()
                .enumerate()
                .filter(|(i, _)| !self.down[*i])
                .filter_map(|(_, r)| r.poll_timeout())
                .min();
            match next {
                Some(t) if t <= end => {
                    self.now = t;
                    for i in 0..self.r.len() {
                        if !self.down[i] && self.r[i].poll_timeout().is_some_and(|x| x <= t) {
                            self.r[i].handle_timeout(t);
                        }
                    }
                    self.pump();
                }
                _ => break,
            }
        }
        self.now = end;
    }
}

#[test]
fn cluster_commits_checkpoints_and_garbage_collects() {
    let mut c = Cluster::new(config());
    for rid in 1..=9 {
        let req = request(&c.cfg, rid, b"w", false);
        c.deliver_all(&req);
    }
    for r in &c.r {
        assert_eq!(r.last_executed(), 9);
        assert_eq!(r.last_stable(), 8, "checkpoint every 4, stable with 2f+1");
        assert_eq!(r.service().count(), 9);
    }
    let d = c.r[0].state_digest();
    assert!(c.r.iter().all(|r| r.state_digest() == d));
}

#[test]
fn view_change_after_primary_crash_keeps_committed_requests() {
    let mut c = Cluster::new(config());
    for rid in 1..=3 {
        let req = request(&c.cfg, rid, b"w", false);
        c.deliver_all(&req);
    }
    c.down[0] = true;
    let req = request(&c.cfg, 4, b"w", false);
    c.deliver_all(&req);
    c.advance(Duration::from_secs(3));
    for i in 1..4 {
        assert_eq!(c.r[i].view(), 1, "replica {i}");
        assert!(c.r[i].has_new_view());
        assert_eq!(c.r[i].last_executed(), 4, "replica {i}");
        assert_eq!(c.r[i].service().count(), 4);
    }
}

/// Backups defer the signature of a request their MAC vouches for. A new primary checks it
/// before proposing what it holds: a badly signed request is never ordered (a backup whose MAC
/// failed could not authenticate it), and its client is blacklisted.
#[test]
fn a_new_primary_proposes_a_deferred_request_only_if_its_signature_verifies() {
    let mut c = Cluster::new(config());
    c.down[0] = true;
    let bad = client_request(&c.cfg, CLIENT, 1, b"w", false, ReqAuth::BadSignature);
    c.deliver_all(&bad);
    let good = client_request(&c.cfg, CLIENT, 2, b"w", false, ReqAuth::Signed);
    c.deliver_all(&good);
    for i in 1..4 {
        assert_eq!(c.r[i].stats().client_signatures_deferred, 2, "replica {i}");
        assert_eq!(c.r[i].stats().client_signatures_verified, 0, "replica {i}");
    }
    c.advance(Duration::from_secs(12));
    for i in 1..4 {
        assert_eq!(c.r[i].view(), 1, "replica {i}");
        assert!(c.r[i].has_new_view());
        assert_eq!(c.r[i].service().count(), 1, "only the good request ran");
    }
    // The new primary checked both on installing the view; the bad one blacklisted the client.
    assert!(c.r[1].is_blacklisted(CLIENT));
    assert!(c.r[1].stats().client_signatures_verified >= 2);
}

#[test]
fn lagging_replica_catches_up_by_state_transfer() {
    let mut c = Cluster::new(config());
    c.down[3] = true;
    for rid in 1..=13 {
        let req = request(&c.cfg, rid, b"w", false);
        c.deliver_all(&req);
    }
    assert_eq!(c.r[0].last_stable(), 12);
    c.down[3] = false;
    c.advance(Duration::from_secs(1));
    assert!(c.r[3].stats().state_transfers >= 1);
    assert_eq!(c.r[3].last_executed(), 13);
    assert_eq!(c.r[3].state_digest(), c.r[0].state_digest());
}

/// A cluster of 72 KiB messages and 36 KiB state chunks that ran 60 writes of 6 KiB values
/// (about 90 KiB per partition of the counter's 4) while replica 3 was down; it is up again.
fn cluster_with_a_replica_behind_big_partitions() -> Cluster {
    let mut cfg = config();
    cfg.op_bytes_max = 8 * 1024;
    cfg.batch_bytes_max = 8 * 1024;
    cfg.message_bytes_max = 72 * 1024;
    cfg.state_chunk_bytes = 36 * 1024;
    cfg.validate().unwrap();
    let mut c = Cluster::new(cfg);
    c.down[3] = true;
    for rid in 1..=60u64 {
        let mut op = vec![b'w'];
        op.extend((0..6 * 1024).map(|i| (rid as usize * 31 + i) as u8));
        let req = request(&c.cfg, rid, &op, false);
        c.deliver_all(&req);
    }
    c.down[3] = false;
    c
}

/// Partitions larger than a message travel in chunks, joined and checked as a whole.
#[test]
fn state_transfer_moves_partitions_larger_than_a_message_in_chunks() {
    let mut c = cluster_with_a_replica_behind_big_partitions();
    let chunk = c.cfg.state_chunk_bytes;
    let seq = c.r[0].last_stable();
    let biggest = (0..4)
        .filter_map(|p| c.r[0].service().export_partition(seq, p))
        .map(|d| d.len())
        .max()
        .unwrap();
    assert!(
        biggest > 2 * chunk,
        "{biggest} bytes: at least three chunks"
    );
    c.advance(Duration::from_secs(1));
    assert!(c.r[3].stats().state_transfers >= 1);
    assert_eq!(c.r[3].last_executed(), c.r[0].last_executed());
    assert_eq!(c.r[3].state_digest(), c.r[0].state_digest());
    assert_eq!(c.r[3].service().count(), 60);
    let st = c.r[3].stats();
    assert!(
        st.state_chunks_fetched > st.state_parts_fetched + 4,
        "{} chunks for {} partitions",
        st.state_chunks_fetched,
        st.state_parts_fetched
    );
    assert_eq!(
        c.r[3]
            .stats()
            .dropped
            .get(&DropReason::Invalid)
            .copied()
            .unwrap_or(0),
        0,
        "no chunk refused"
    );
}

/// A replier's chunk that claims more than a partition may hold, or that is shorter than the
/// agreed chunk length, is refused and the replier replaced; the fetch completes from another.
#[test]
fn a_chunk_with_a_false_total_is_refused_and_the_replier_replaced() {
    let mut c = cluster_with_a_replica_behind_big_partitions();
    // Let replica 3 learn the target and ask its replier for the partition digests, then
    // hand it the replier's first chunk of a partition, with forged totals.
    c.lose = Some(Tag::StatePart);
    c.advance(Duration::from_millis(400));
    let f = c.r[3].fetch.clone().expect("fetching");
    assert!(f.parts.is_some(), "partition digests accepted");
    let part = *f.needed.first().expect("a partition to fetch");
    let seq = f.seq;
    let tk = TestKeys::new(1, c.cfg.n());
    let forge = |replier: ReplicaId, total: u64, len: usize| {
        let m = Message::StatePart(StatePart {
            replica: replier,
            seq,
            part,
            offset: 0,
            total,
            data: vec![0; len],
        });
        let rk = tk.replica(replier, [CLIENT]);
        encode(
            Envelope::new(Principal::Replica(replier), 0),
            &m,
            Auth::Mac(&rk.to_replica[3]),
        )
    };
    let chunk = c.cfg.state_chunk_bytes;
    let too_big = forge(f.replier, state_transfer::PARTITION_BYTES_MAX + 1, chunk);
    c.r[3].handle_message(c.now, &too_big);
    assert_eq!(c.r[3].stats().dropped[&DropReason::Invalid], 1);
    let second = c.r[3].fetch.as_ref().unwrap().replier;
    assert_ne!(second, f.replier, "the lying replier was replaced");
    // A drip of 100-byte chunks of a 1 MiB partition: refused too.
    c.r[3].handle_message(c.now, &forge(second, 1 << 20, 100));
    assert_eq!(c.r[3].stats().dropped[&DropReason::Invalid], 2);
    assert_ne!(c.r[3].fetch.as_ref().unwrap().replier, second);
    c.lose = None;
    c.advance(Duration::from_secs(2));
    assert_eq!(c.r[3].state_digest(), c.r[0].state_digest());
}

#[test]
fn restart_from_durable_state_rejoins() {
    let mut c = Cluster::new(config());
    c.write_all(1..=6, b"w");
    let r2 = std::mem::replace(&mut c.r[2], replica(2, &c.cfg));
    c.r[2] = r2.restart_from_durable(c.now);
    assert_eq!(c.r[2].last_executed(), 4, "back to its latest checkpoint");
    c.assert_keeps_up(2);
}

impl Cluster {
    /// Every replica executes the writes `rids` (operation `op`) to completion.
    fn write_all(&mut self, rids: std::ops::RangeInclusive<u64>, op: &[u8]) {
        for rid in rids {
            let req = request(&self.cfg, rid, op, false);
            self.deliver_all(&req);
        }
    }
    /// Three more writes (7..=9); replica `i` executes them and ends with the others' state.
    fn assert_keeps_up(&mut self, i: usize) {
        self.write_all(7..=9, b"w");
        self.advance(Duration::from_secs(1));
        assert_eq!(self.r[i].last_executed(), 9);
        assert_eq!(self.r[i].state_digest(), self.r[0].state_digest());
    }
    /// Replica `i` loses power: restored from its disk, which may lack its unsynced votes.
    fn power_cut(&mut self, i: usize) {
        self.disks[i]
            .as_mut()
            .expect("replica has a disk")
            .proposals_durable = false;
        self.crash_and_restore(i);
        self.pump();
    }
    /// A cluster whose every replica stores its state on a simulated disk.
    fn on_disks(cfg: Config) -> Self {
        let mut c = Cluster::new(cfg);
        for i in 0..c.r.len() {
            c.with_disk(i);
        }
        c
    }
    /// Replica `i` stores its state on a simulated disk from now on.
    fn with_disk(&mut self, i: usize) {
        self.r[i].set_store_state(true);
        self.disks[i] = Some(DurableState::default());
    }
    /// Replica `i` crashes (everything volatile lost) and is rebuilt from its disk.
    fn crash_and_restore(&mut self, i: usize) {
        let keys = TestKeys::new(1, self.cfg.n()).replica(i as u32, [CLIENT]);
        let disk = self.disks[i].clone().expect("replica has a disk");
        self.r[i] = Replica::restore(
            self.cfg.clone(),
            keys,
            Counter::new(),
            disk,
            1000 + i as u64,
            self.now,
        )
        .expect("restores");
    }
}

#[test]
fn restore_replays_executed_batches_above_the_stored_checkpoint() {
    let mut c = Cluster::new(config());
    c.with_disk(2);
    c.write_all(1..=6, b"w");
    assert_eq!(c.r[2].last_stable(), 4);
    let disk = c.disks[2].as_ref().unwrap();
    assert_eq!(disk.checkpoint.as_ref().map(|k| k.seq), Some(4));
    assert!(
        disk.records
            .iter()
            .all(|r| record_seq(*r).is_none_or(|s| s > 4)),
        "records at or below the stored checkpoint are dropped: {:?}",
        disk.records
    );
    let before = c.r[2].state_digest();
    c.crash_and_restore(2);
    assert_eq!(c.r[2].last_stable(), 4, "the stored checkpoint");
    assert_eq!(
        c.r[2].last_executed(),
        6,
        "5 and 6 re-executed from the log"
    );
    assert_eq!(c.r[2].service().count(), 6);
    assert_eq!(c.r[2].state_digest(), before);
    // Re-execution sends no replies; the restored replica keeps working.
    assert!(!drain(&mut c.r[2])
        .iter()
        .any(|a| matches!(a, Action::SendClient { .. })));
    c.assert_keeps_up(2);
}

#[test]
fn restore_reopens_a_service_that_persists_its_state() {
    let mut c = Cluster::new(config());
    let disk = ServiceDisk::default();
    let keys = TestKeys::new(1, c.cfg.n());
    c.r[2] = Replica::new(
        c.cfg.clone(),
        keys.replica(2, [CLIENT]),
        Counter::persisting(&disk),
        2,
        c.now,
    );
    c.with_disk(2);
    c.write_all(1..=6, b"wxyz");
    assert_eq!(c.r[2].last_stable(), 4);
    // The replica's image holds the service's digests only, the reply cache in full.
    let stored = c.disks[2].clone().unwrap();
    let img = stored.checkpoint.as_ref().unwrap();
    assert_eq!(img.seq, 4);
    let svc = c.r[2].service().partition_count() as usize;
    assert!(img.parts[..svc].iter().all(|(_, data)| data.is_empty()));
    assert!(img.parts[svc..].iter().any(|(_, data)| !data.is_empty()));
    assert!(disk.borrow().contains_key(&4));
    let before = c.r[2].state_digest();
    let restore = |service: Counter| {
        Replica::restore(
            c.cfg.clone(),
            keys.replica(2, [CLIENT]),
            service,
            stored.clone(),
            7,
            c.now,
        )
    };
    let r = restore(Counter::persisting(&disk)).expect("reopens");
    assert_eq!((r.last_stable(), r.last_executed()), (4, 6));
    assert_eq!(r.service().count(), 6);
    assert_eq!(r.state_digest(), before);
    // A service whose store lost the checkpoint is refused, saying so.
    match restore(Counter::persisting(&ServiceDisk::default())) {
        Err(RestoreError::ServiceState { seq: 4, why }) => assert!(why.contains("no checkpoint")),
        other => panic!("restored without the service's state: {:?}", other.err()),
    }
    c.r[2] = r;
    c.assert_keeps_up(2);
}

#[test]
fn a_service_that_now_persists_its_state_still_imports_an_older_full_image() {
    // A data directory written before the service persisted its state (every partition's
    // content in the image): the upgrade imports it.
    let mut c = Cluster::new(config());
    c.with_disk(2);
    c.write_all(1..=6, b"w");
    let before = c.r[2].state_digest();
    let stored = c.disks[2].clone().unwrap();
    let keys = TestKeys::new(1, c.cfg.n());
    let r = Replica::restore(
        c.cfg.clone(),
        keys.replica(2, [CLIENT]),
        Counter::persisting(&ServiceDisk::default()),
        stored,
        7,
        c.now,
    )
    .expect("imports the full image");
    assert_eq!((r.last_stable(), r.last_executed()), (4, 6));
    assert_eq!(r.state_digest(), before);
}

#[test]
fn restore_every_replica_keeps_every_committed_write() {
    let mut c = Cluster::on_disks(config());
    c.write_all(1..=6, b"w");
    let digest = c.r[0].state_digest();
    for i in 0..4 {
        c.crash_and_restore(i);
        assert_eq!(c.r[i].last_executed(), 6);
        assert_eq!(c.r[i].state_digest(), digest);
    }
    c.replies.clear();
    let req = request(&c.cfg, 7, b"w", false);
    c.deliver_all(&req);
    c.advance(Duration::from_secs(2));
    assert!(c.r.iter().all(|r| r.last_executed() == 7));
    assert!(c
        .replies
        .iter()
        .any(|r| r.rid == 7 && r.result.as_deref() == Some(&7u64.to_le_bytes()[..])));
}

#[test]
fn tentatively_acknowledged_write_survives_a_crash_of_every_replica() {
    // Write 7 is prepared everywhere and executed tentatively (the client has its 2f+1
    // tentative replies), but every COMMIT is lost, then all four replicas crash. Only the
    // promises and the stored batch body remember it: a view change must bring it back.
    let mut c = Cluster::on_disks(config());
    c.write_all(1..=6, b"w");
    c.lose = Some(crate::message::Tag::Commit);
    c.replies.clear();
    let req7 = request(&c.cfg, 7, b"w", false);
    c.deliver_all(&req7);
    let tentative = c
        .replies
        .iter()
        .filter(|r| r.rid == 7 && r.tentative)
        .count();
    assert!(tentative >= 3, "acknowledged by 2f+1 tentative replies");
    assert!(c.r.iter().all(|r| r.last_executed() == 6));
    for i in 0..4 {
        c.crash_and_restore(i);
        assert_eq!(c.r[i].last_executed(), 6, "write 7 never committed here");
    }
    c.lose = None;
    // The client retransmits to everyone.
    c.deliver_all(&req7);
    c.advance(Duration::from_secs(5));
    for r in &c.r {
        assert!(r.view() >= 1, "recovered by a view change");
        assert!(r.last_executed() >= 7);
        assert_eq!(r.service().count(), 7, "write 7 executed exactly once");
    }
}

impl Cluster {
    /// Every replica has a disk, votes in view 1 (after replica 0 was down for a view
    /// change), and has executed five writes.
    fn voted_in_view_one(&mut self) {
        for i in 0..self.r.len() {
            self.with_disk(i);
        }
        self.write_all(1..=2, b"w");
        self.down[0] = true;
        let req = request(&self.cfg, 3, b"w", false);
        self.deliver_all(&req);
        self.advance(Duration::from_secs(3));
        self.down[0] = false;
        self.write_all(4..=5, b"w");
        self.advance(Duration::from_secs(1));
        for r in &self.r {
            assert_eq!((r.view(), r.last_executed()), (1, 5), "voted in view 1");
        }
    }
}

#[test]
fn every_replica_restarted_after_voting_in_view_one_leaves_it() {
    // Every replica voted in view 1 and then crashed: no one holds view 1's NEW-VIEW (it is
    // volatile), and no VIEW-CHANGE for view 1 may carry view-1 votes. Their STATUS messages
    // must start the view-change timer and move them to view 2, rather than leave them
    // waiting for each other.
    let mut c = Cluster::new(config());
    c.voted_in_view_one();
    for i in 0..4 {
        c.crash_and_restore(i);
    }
    let req6 = request(&c.cfg, 6, b"w", false);
    c.deliver_all(&req6);
    c.advance(Duration::from_secs(5));
    for r in &c.r {
        assert!(r.has_new_view(), "replica {} installed a view", r.me);
        assert_eq!(r.view(), 2);
        assert_eq!(r.last_executed(), 6);
        assert_eq!(r.service().count(), 6, "every write once");
    }
}

#[test]
fn a_lone_backup_restarted_after_voting_in_view_one_rejoins_it() {
    // Its peers still hold view 1's NEW-VIEW: it gets it again and stays in view 1 rather
    // than moving on to view 2 alone (the timer that ends a view no one installed does not
    // start: its peers' STATUS messages say they hold the NEW-VIEW).
    let mut c = Cluster::new(config());
    c.voted_in_view_one();
    c.crash_and_restore(2);
    assert!(!c.r[2].has_new_view());
    c.advance(Duration::from_secs(10));
    assert_eq!(c.r[2].view(), 1);
    assert!(c.r[2].has_new_view());
    assert!(c.r.iter().all(|r| r.view() == 1), "no view change");
    c.write_all(6..=6, b"w");
    c.advance(Duration::from_secs(1));
    assert_eq!(c.r[2].last_executed(), 6);
    assert_eq!(c.r[2].state_digest(), c.r[1].state_digest());
}

#[test]
fn a_checkpoint_is_announced_only_after_a_sync() {
    // The `Executed` records a driver may keep unsynced must be durable before the
    // CHECKPOINT that vouches for them, and only a replica that stores its state asks.
    for stored in [false, true] {
        let cfg = config();
        let mut r = replica(1, &cfg);
        r.set_store_state(stored);
        r.make_checkpoint(cfg.checkpoint_interval);
        let out = drain(&mut r);
        let sync = out.iter().position(|a| matches!(a, Action::Sync));
        let announce = out
            .iter()
            .position(|a| matches!(a, Action::Broadcast { bytes } if matches!(decode(bytes), Message::Checkpoint(_))))
            .expect("the CHECKPOINT is broadcast");
        match sync {
            Some(s) => assert!(stored && s < announce, "{out:?}"),
            None => assert!(!stored, "no sync before the CHECKPOINT: {out:?}"),
        }
    }
}

#[test]
fn a_checkpoint_a_new_view_chose_survives_a_restart_before_its_state_transfer() {
    // Replica 3 misses writes 1..=6 (checkpoint 4 becomes stable at the others), then helps
    // install view 1, whose NEW-VIEW chooses checkpoint 4. Its state transfer cannot finish
    // (every STATE-PART is lost), and it crashes: it must still vouch for checkpoint 4.
    let mut c = Cluster::on_disks(config());
    c.down[3] = true;
    c.write_all(1..=6, b"w");
    c.down[3] = false;
    c.down[0] = true;
    c.lose = Some(crate::message::Tag::StatePart);
    let req = request(&c.cfg, 7, b"w", false);
    c.deliver_all(&req);
    c.advance(Duration::from_secs(3));
    let four = c.r[1]
        .checkpoints
        .own
        .get(&4)
        .copied()
        .expect("stable at 1");
    assert_eq!((c.r[3].view(), c.r[3].last_stable()), (1, 0));
    assert!(c.r[3].has_new_view());
    assert_eq!(c.r[3].certified_checkpoint(), Some((4, four)));
    assert!(c.disks[3]
        .as_ref()
        .unwrap()
        .records
        .contains(&PersistRecord::Certified {
            seq: 4,
            digest: four
        }));
    c.crash_and_restore(3);
    assert_eq!(c.r[3].last_stable(), 0);
    assert_eq!(
        c.r[3].certified_checkpoint(),
        Some((4, four)),
        "kept across the restart"
    );
    // Once the transfer completes, the checkpoint is its own stable one.
    c.lose = None;
    c.down[0] = false;
    c.advance(Duration::from_secs(5));
    assert!(c.r[3].last_stable() >= 4);
    assert_eq!(c.r[3].certified_checkpoint(), None);
}

#[test]
fn restore_from_an_empty_disk_is_a_fresh_replica() {
    let cfg = config();
    let keys = TestKeys::new(1, cfg.n());
    let r = Replica::restore(
        cfg.clone(),
        keys.replica(1, [CLIENT]),
        Counter::new(),
        DurableState::default(),
        1,
        Time::ZERO,
    )
    .expect("restores");
    assert_eq!(r.state_digest(), replica(1, &cfg).state_digest());
    assert_eq!((r.view(), r.last_executed(), r.last_stable()), (0, 0, 0));
}

#[test]
fn restore_keeps_promises_and_a_restored_primary_gives_up_its_view() {
    let cfg = config();
    let keys = TestKeys::new(1, cfg.n());
    // Replica 1 is the primary of view 1; it promised a digest at seq 3.
    let d = Digest::of(b"batch");
    let durable = DurableState {
        records: vec![
            PersistRecord::View(1),
            PersistRecord::Prepared {
                view: 1,
                seq: 3,
                digest: d,
            },
        ],
        ..DurableState::default()
    };
    let mut r = Replica::restore(
        cfg.clone(),
        keys.replica(1, [CLIENT]),
        Counter::new(),
        durable,
        1,
        Time::ZERO,
    )
    .expect("restores");
    assert_eq!(r.view(), 2, "gave up view 1");
    assert!(!r.has_new_view());
    let out = drain(&mut r);
    assert!(out.contains(&Action::Persist(PersistRecord::View(2))));
}

#[test]
fn a_primary_restored_without_all_its_proposals_gives_up_view_0() {
    let cfg = config();
    let keys = TestKeys::new(1, cfg.n());
    let d = Digest::of(b"batch");
    // Replica 0, primary of view 0, had proposed (at least) seq 3; the record was synced.
    let durable = |proposals_durable| DurableState {
        records: vec![PersistRecord::Proposed {
            view: 0,
            seq: 3,
            digest: d,
        }],
        proposals_durable,
        ..DurableState::default()
    };
    let restore = |d: DurableState| {
        Replica::restore(
            cfg.clone(),
            keys.replica(0, [CLIENT]),
            Counter::new(),
            d,
            1,
            Time::ZERO,
        )
        .expect("restores")
    };
    // After a crash, a later proposal may have been lost with the unsynced log tail: it
    // must not assign sequence numbers in view 0 again.
    let mut r = restore(durable(false));
    assert_eq!(r.view(), 1, "gave up view 0");
    assert!(drain(&mut r).contains(&Action::Persist(PersistRecord::View(1))));
    let req = request(&cfg, 1, b"w", false);
    r.handle_message(Time(10), &req);
    assert!(
        !drain(&mut r)
            .iter()
            .any(|a| matches!(a, Action::Persist(PersistRecord::Proposed { .. }))),
        "no proposal after the restart"
    );
    // After a clean stop every proposal is on disk: it stays the primary (and assigns
    // nothing at or below seq 3 again: `seqno` starts at its highest vote).
    let mut r = restore(durable(true));
    assert_eq!(r.view(), 0);
    assert!(!drain(&mut r)
        .iter()
        .any(|a| matches!(a, Action::Persist(PersistRecord::View(_)))));
}

#[test]
fn a_primary_that_keeps_its_view_sends_its_pre_prepares_again() {
    let cfg = config();
    let keys = TestKeys::new(1, cfg.n());
    let body = BatchBody {
        requests: vec![],
        big: vec![],
        nondet: vec![1],
    };
    let d = batch_digest(&body).unwrap();
    // Replica 0 proposed seq 1 and stopped cleanly before any backup saw it.
    let durable = DurableState {
        records: vec![PersistRecord::Proposed {
            view: 0,
            seq: 1,
            digest: d,
        }],
        batches: vec![crate::replica::StoredBatch {
            seq: 1,
            digest: d,
            body: body.clone(),
            big: vec![],
        }],
        proposals_durable: true,
        ..DurableState::default()
    };
    let mut r = Replica::restore(
        cfg.clone(),
        keys.replica(0, [CLIENT]),
        Counter::new(),
        durable,
        1,
        Time::ZERO,
    )
    .expect("restores");
    assert_eq!(r.view(), 0);
    let sent: Vec<PrePrepare> = drain(&mut r)
        .iter()
        .filter_map(|a| match a {
            Action::Broadcast { bytes } => match decode(bytes) {
                Message::PrePrepare(pp) => Some(pp),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!((sent[0].view, sent[0].seq, &sent[0].batch), (0, 1, &body));
}

impl Cluster {
    /// Every replica crashes and is rebuilt from its disk, as after a kill on a machine
    /// that did not restart (its driver vouches for the proposals).
    fn restart_all_keeping_proposals(&mut self) {
        for i in 0..self.r.len() {
            if let Some(d) = &mut self.disks[i] {
                d.proposals_durable = true;
            }
            self.crash_and_restore(i);
        }
    }
}

#[test]
fn a_backup_that_missed_a_batch_catches_up_after_a_whole_cluster_restart() {
    // Replica 3 misses write 1, which the others execute; then every replica restarts. No
    // one holds a vote for it any more except as a durable promise: the primary's rebuilt
    // PRE-PREPARE and the backups' rebuilt PREPAREs and COMMITs, resent on replica 3's
    // STATUS, must let it execute write 1 in view 0 rather than wait for a checkpoint or
    // start a view change alone.
    let mut c = Cluster::on_disks(config());
    c.down[3] = true;
    c.write_all(1..=1, b"w");
    c.down[3] = false;
    assert_eq!(c.r[3].last_executed(), 0);
    c.restart_all_keeping_proposals();
    let req = request(&c.cfg, 2, b"w", false);
    c.deliver_all(&req);
    c.advance(Duration::from_secs(2));
    for r in &c.r {
        assert_eq!((r.view(), r.last_executed()), (0, 2), "replica {}", r.me);
    }
    assert_eq!(c.r[3].state_digest(), c.r[1].state_digest());
}

#[test]
fn a_primary_that_missed_the_commit_catches_up_from_its_backups_rebuilt_votes() {
    // The primary proposes write 1 and goes down; the backups execute it. Every replica
    // restarts, and every PRE-PREPARE is lost from then on, so the backups cannot prepare
    // it again: only their rebuilt PREPAREs and COMMITs, resent on the primary's STATUS,
    // can bring the primary to write 1.
    let mut c = Cluster::on_disks(config());
    let req = request(&c.cfg, 1, b"w", false);
    c.r[0].handle_message(c.now, &req);
    c.down[0] = true;
    c.pump();
    c.down[0] = false;
    assert_eq!(c.r[0].last_executed(), 0);
    assert!(c.r[1..].iter().all(|r| r.last_executed() == 1));
    c.restart_all_keeping_proposals();
    c.lose = Some(crate::message::Tag::PrePrepare);
    c.advance(Duration::from_millis(450));
    assert_eq!((c.r[0].view(), c.r[0].last_executed()), (0, 1));
    c.lose = None;
    c.write_all(2..=2, b"w");
    for r in &c.r {
        assert_eq!((r.view(), r.last_executed()), (0, 2), "replica {}", r.me);
    }
}

#[test]
fn a_backup_whose_votes_are_not_vouched_for_abstains_up_to_its_horizon_across_restarts() {
    // Replica 2's unsynced `Voted` records may have been lost (a power cut), all at or below
    // its durable vote horizon (9: its first vote, at 1, recorded 1 + the log window of 8).
    // Restored in view 0, it must send no PREPARE there up to 9, even after a later restart
    // that kept everything, yet still commit and execute from the others' PREPAREs; above 9,
    // and in the next view, it votes.
    let mut c = Cluster::on_disks(config());
    c.write_all(1..=1, b"w");
    let votes_of = |c: &Cluster, seq: u64| -> Vec<View> {
        c.disks[2]
            .as_ref()
            .unwrap()
            .records
            .iter()
            .filter_map(|r| match *r {
                PersistRecord::Voted { view, seq: s, .. } if s == seq => Some(view),
                _ => None,
            })
            .collect()
    };
    assert_eq!(votes_of(&c, 1), vec![0], "a backup's PREPARE record");
    c.power_cut(2);
    assert!(c.disks[2]
        .as_ref()
        .unwrap()
        .records
        .contains(&PersistRecord::AbstainUpTo { view: 0, seq: 9 }));
    c.write_all(2..=2, b"w");
    assert_eq!(votes_of(&c, 2), Vec::<View>::new(), "no PREPARE in view 0");
    assert!(
        c.disks[2]
            .as_ref()
            .unwrap()
            .batches
            .iter()
            .any(|b| b.seq == 2),
        "the body of what it committed is stored with its first vote"
    );
    assert_eq!(
        c.r[2].last_executed(),
        2,
        "committed from the others' PREPAREs"
    );
    // A kill on the same machine keeps every append: the abstention still holds.
    c.disks[2].as_mut().unwrap().proposals_durable = true;
    c.crash_and_restore(2);
    c.write_all(3..=3, b"w");
    assert_eq!(votes_of(&c, 3), Vec::<View>::new(), "still none in view 0");
    assert_eq!(c.r[2].last_executed(), 3);
    // Above the horizon, in view 0 still, it votes again.
    c.write_all(4..=10, b"w");
    assert_eq!(c.r[2].view(), 0);
    assert_eq!(
        votes_of(&c, 9),
        Vec::<View>::new(),
        "none up to the horizon"
    );
    assert_eq!(votes_of(&c, 10), vec![0], "a PREPARE above the horizon");
    assert_eq!(c.r[2].last_executed(), 10);
    // View 1 (replica 0 down for a view change): it votes there too.
    c.down[0] = true;
    let req = request(&c.cfg, 11, b"w", false);
    c.deliver_all(&req);
    c.advance(Duration::from_secs(3));
    c.down[0] = false;
    // Two writes: the checkpoint at 12 drops the records at or below it.
    c.write_all(12..=13, b"w");
    c.advance(Duration::from_secs(1));
    assert_eq!(c.r[2].view(), 1);
    let in_view_1 = c.disks[2]
        .as_ref()
        .unwrap()
        .records
        .iter()
        .filter(|r| matches!(r, PersistRecord::Voted { view: 1, .. }))
        .count();
    assert!(
        in_view_1 > 0,
        "PREPAREs in view 1: {:?}",
        c.disks[2].as_ref().unwrap().records
    );
    assert_eq!(c.r[2].state_digest(), c.r[3].state_digest());
}

#[test]
fn a_batch_an_abstaining_backup_committed_but_could_not_execute_survives_its_crash() {
    // Replica 2 abstains in view 0 (restored from records that may lack votes), so no
    // PREPARE of its own stores the bodies it commits. It misses batch 2, then commits batch
    // 3, which cannot execute before 2: the body must reach its disk with the COMMIT's record,
    // or the crash that follows leaves it a commitment it holds no batch for.
    let mut c = Cluster::on_disks(config());
    c.write_all(1..=1, b"w");
    c.power_cut(2);
    c.down[2] = true;
    c.write_all(2..=2, b"w");
    c.down[2] = false;
    c.write_all(3..=3, b"w");
    assert_eq!(c.r[0].last_executed(), 3);
    assert_eq!(c.r[2].last_executed(), 1, "batch 3 waits for batch 2");
    let disk = c.disks[2].as_ref().unwrap();
    let committed = disk
        .records
        .iter()
        .find_map(|r| match *r {
            PersistRecord::Committed { seq: 3, digest, .. } => Some(digest),
            _ => None,
        })
        .expect("batch 3 committed at replica 2");
    assert!(
        !disk
            .records
            .iter()
            .any(|r| matches!(r, PersistRecord::Voted { seq: 3, .. })),
        "replica 2 abstained: {:?}",
        disk.records
    );
    assert!(
        disk.batches
            .iter()
            .any(|b| b.seq == 3 && b.digest == committed),
        "the body is stored with the COMMIT's record"
    );
    c.disks[2].as_mut().unwrap().proposals_durable = true;
    c.crash_and_restore(2);
    c.advance(Duration::from_secs(1));
    assert_eq!(c.r[2].last_executed(), 3);
    assert_eq!(c.r[2].state_digest(), c.r[0].state_digest());
}

#[test]
fn backups_follow_a_primary_that_gives_its_view_up_at_once() {
    // The view-0 primary restarts after a power cut (its proposals not vouched for) and
    // gives view 0 up. Its VIEW-CHANGE tells the backups that no one will propose in view 0
    // again: they move to view 1 without waiting for a request to time out.
    let mut c = Cluster::on_disks(config());
    c.write_all(1..=1, b"w");
    c.power_cut(0);
    for r in &c.r {
        assert_eq!((r.view(), r.has_new_view()), (1, true), "replica {}", r.me);
    }
    c.write_all(2..=2, b"w");
    assert!(c.r.iter().all(|r| r.last_executed() == 2));
}

#[test]
fn restore_refuses_a_corrupt_checkpoint() {
    let mut c = Cluster::new(config());
    c.with_disk(1);
    for rid in 1..=4 {
        let req = request(&c.cfg, rid, b"w", false);
        c.deliver_all(&req);
    }
    let good = c.disks[1].clone().unwrap();
    let keys = || TestKeys::new(1, 4).replica(1, [CLIENT]);
    let restore = |d: DurableState| {
        Replica::restore(c.cfg.clone(), keys(), Counter::new(), d, 1, Time::ZERO).err()
    };
    assert_eq!(restore(good.clone()), None);
    // A changed byte in a partition's content.
    let mut bad = good.clone();
    let ck = bad.checkpoint.as_mut().unwrap();
    let i = ck.parts.iter().position(|(_, p)| p.len() > 1).unwrap();
    let last = ck.parts[i].1.len() - 1;
    ck.parts[i].1[last] ^= 1;
    assert_eq!(restore(bad), Some(RestoreError::BadPartition(i as u32)));
    // A changed partition digest no longer adds up to the root.
    let mut bad = good.clone();
    bad.checkpoint.as_mut().unwrap().parts[0].0 = Digest::of(b"x");
    assert_eq!(restore(bad), Some(RestoreError::BadCheckpoint(4)));
    // Missing partitions.
    let mut bad = good;
    bad.checkpoint.as_mut().unwrap().parts.pop();
    assert!(matches!(
        restore(bad),
        Some(RestoreError::PartitionCount { .. })
    ));
}

#[test]
fn view_change_must_be_signed() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let vc = ViewChange {
        view: 1,
        replica: 2,
        last_stable: 0,
        checkpoints: vec![],
        prepared: vec![],
        pre_prepared: vec![],
    };
    // MAC-authenticated instead of signed: it must not be stored (it could not be forwarded).
    let keys = TestKeys::new(1, cfg.n()).replica(2, [CLIENT]);
    let bytes = encode(
        Envelope::new(Principal::Replica(2), 0),
        &Message::ViewChange(vc),
        Auth::Authenticator(&keys.to_replica),
    );
    b.handle_message(Time(1), &bytes);
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::BadAuth))]
    );
}

#[test]
fn big_request_body_after_pre_prepare_still_prepares() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let big = request(&cfg, 1, &[b'w'; 100], false); // above the 64-byte SRT threshold
    let d = Frame::parse(&big, 1 << 20).unwrap().header.body_digest;
    let batch = BatchBody {
        requests: vec![],
        big: vec![d],
        nondet: vec![1],
    };
    let bd = batch_digest(&batch).unwrap();
    b.handle_message(
        Time(1),
        &from_replica(
            &cfg,
            0,
            &Message::PrePrepare(PrePrepare {
                view: 0,
                seq: 1,
                batch,
            }),
        ),
    );
    assert!(
        sent(&drain(&mut b)).is_empty(),
        "no PREPARE without the body"
    );
    b.handle_message(Time(2), &big);
    let msgs = sent(&drain(&mut b));
    assert_eq!(
        msgs,
        vec![Message::Prepare(Prepare {
            view: 0,
            seq: 1,
            digest: bd,
            replica: 1
        })]
    );
}

/// The first message of kind `pick` among the sent frames.
fn first_sent<T>(actions: &[Action], pick: impl Fn(Message) -> Option<T>) -> Option<T> {
    sent(actions).into_iter().find_map(pick)
}

/// A VIEW-CHANGE for `view` from `j`, reporting `d` prepared at seq 1 in view 0.
fn view_change_with(
    cfg: &Config,
    view: View,
    j: ReplicaId,
    ckpt0: Digest,
    d: Option<Digest>,
) -> Vec<u8> {
    let prepared = d
        .map(|digest| PreparedEntry {
            seq: 1,
            view: 0,
            digest,
        })
        .into_iter()
        .collect();
    let pre_prepared = d
        .map(|digest| PrePreparedEntry {
            seq: 1,
            view: 0,
            digest,
        })
        .into_iter()
        .collect();
    from_replica(
        cfg,
        j,
        &Message::ViewChange(ViewChange {
            view,
            replica: j,
            last_stable: 0,
            checkpoints: vec![(0, ckpt0)],
            prepared,
            pre_prepared,
        }),
    )
}

/// The primary runs the view-change timer too (simulator: byzzfuzz 823 and 1173, crash 45).
/// Its view cannot commit seq 1: backup 3 is faulty and silent, backup 2 prepared and then left
/// for view 1 alone, and backup 1 has nothing pending (in the simulator it had executed every
/// request in an earlier view). One VIEW-CHANGE for view 1 is below the `f+1` join rule, so
/// the second must come from the primary, the one correct replica that knows its view is
/// stuck; without it every correct replica waits for ever.
#[test]
fn primary_with_a_stuck_request_leaves_its_view() {
    // As in byzzfuzz 1173. (With tentative execution the three replicas that prepared would
    // answer the client tentatively: 2f+1 tentative replies complete the request.)
    let mut cfg = config();
    cfg.tentative_execution = false;
    let mut p = replica(0, &cfg);
    drain(&mut p);
    p.handle_message(Time(1), &request(&cfg, 1, b"w", false));
    let pp = first_sent(&drain(&mut p), |m| match m {
        Message::PrePrepare(pp) => Some(pp),
        _ => None,
    })
    .expect("pre-prepare");
    let d = batch_digest(&pp.batch).unwrap();
    for j in [1, 2] {
        let prepare = Message::Prepare(Prepare {
            view: 0,
            seq: 1,
            digest: d,
            replica: j,
        });
        p.handle_message(Time(2), &from_replica(&cfg, j, &prepare));
    }
    let commit = Message::Commit(Commit {
        view: 0,
        seq: 1,
        digest: d,
        replica: 1,
    });
    p.handle_message(Time(3), &from_replica(&cfg, 1, &commit));
    let ckpt0 = p.checkpoints.own[&0];
    p.handle_message(Time(4), &view_change_with(&cfg, 1, 2, ckpt0, Some(d)));
    drain(&mut p);
    assert_eq!(
        (p.view(), p.last_executed()),
        (0, 0),
        "two COMMITs of 2f+1, one VIEW-CHANGE of f+1"
    );
    let mut out = Vec::new();
    let mut now = Time(4);
    while p.view() == 0 && now < Time(0) + Duration::from_secs(5) {
        now = p.poll_timeout().unwrap();
        p.handle_timeout(now);
        out.extend(drain(&mut p));
    }
    assert_eq!(p.view(), 1, "the primary gives up its stuck view");
    assert!(now <= Time(4) + cfg.view_change_timeout + Duration::from_millis(100));
    let vc = first_sent(&out, |m| match m {
        Message::ViewChange(vc) => Some(vc),
        _ => None,
    })
    .expect("VIEW-CHANGE");
    assert_eq!((vc.view, vc.replica), (1, 0));
    assert_eq!(
        vc.prepared,
        vec![PreparedEntry {
            seq: 1,
            view: 0,
            digest: d
        }]
    );
}

/// Batch bodies a slot waited for are no longer asked for once the slot is gone (simulator:
/// crash 45). Here a NEW-VIEW names a batch the replica lacks, then a state transfer to
/// checkpoint 4 overtakes that slot. STATUS asks for at most 64 digests; stale ones that
/// nobody sends any more used to crowd out the ones a live slot needed, for ever.
#[test]
fn missing_batch_of_a_collected_slot_is_not_asked_for() {
    let cfg = config();
    // Replicas 0, 1 and 3 run ahead to checkpoint 4; replica 2 is the one under test.
    let mut c = Cluster::new(cfg.clone());
    c.down[2] = true;
    for rid in 1..=5 {
        c.deliver_all(&request(&cfg, rid, b"w", false));
    }
    assert_eq!(c.r[0].last_stable(), 4);
    let ckpt4 = c.r[0].checkpoints.own[&4];

    let mut t = replica(2, &cfg);
    drain(&mut t);
    let ckpt0 = t.checkpoints.own[&0];
    let lost = Digest([9; 32]);
    let vcs: Vec<Vec<u8>> = [0, 1, 3]
        .into_iter()
        .map(|j| view_change_with(&cfg, 1, j, ckpt0, (j != 3).then_some(lost)))
        .collect();
    let nv = Message::NewView(NewView {
        view: 1,
        view_changes: vcs,
        min: 0,
        min_digest: ckpt0,
        picks: vec![lost],
    });
    t.handle_message(Time(1), &from_replica(&cfg, 1, &nv));
    assert!(t.has_new_view() && t.view() == 1);
    let status = |t: &mut Replica<Counter>| {
        t.send_status();
        first_sent(&drain(t), |m| match m {
            Message::Status(s) => Some(s),
            _ => None,
        })
        .expect("STATUS")
    };
    assert_eq!(status(&mut t).missing_batches, vec![lost]);

    // f+1 stable claims for checkpoint 4: it fetches the state from the others.
    for j in [0, 1] {
        let cp = Message::Checkpoint(Checkpoint {
            seq: 4,
            digest: ckpt4,
            replica: j,
            stable: true,
        });
        t.handle_message(Time(2), &from_replica(&cfg, j, &cp));
    }
    assert!(t.is_fetching());
    let mut to_t: Vec<Arc<[u8]>> = Vec::new();
    for _ in 0..100 {
        for a in drain(&mut t) {
            if let Action::Send { to, bytes } = a {
                c.r[to as usize].handle_message(Time(3), &bytes);
                for b in drain(&mut c.r[to as usize]) {
                    if let Action::Send { to: 2, bytes } = b {
                        to_t.push(bytes);
                    }
                }
            }
        }
        for bytes in std::mem::take(&mut to_t) {
            t.handle_message(Time(3), &bytes);
        }
        if !t.is_fetching() {
            break;
        }
    }
    assert!(!t.is_fetching());
    assert_eq!((t.last_stable(), t.last_executed()), (4, 4));
    assert_eq!(
        status(&mut t).missing_batches,
        Vec::<Digest>::new(),
        "seq 1 is below the stable checkpoint: its body is never needed again"
    );
}

/// A batch may name a big request that was already executed (a faulty primary proposes it
/// again; the copy runs as a no-op), after its body was garbage-collected. The body that peers
/// send back in answer to STATUS must be kept, not dropped by the reply-cache check, or the
/// batch never prepares (simulator: byzzfuzz 1583).
#[test]
fn executed_big_request_named_again_is_stored_when_it_arrives() {
    let cfg = config();
    let mut c = Cluster::new(cfg.clone());
    let big = request(&cfg, 1, &[b'w'; 100], false); // above the 64-byte SRT threshold
    let d = Frame::parse(&big, 1 << 20).unwrap().header.body_digest;
    c.deliver_all(&big);
    for rid in 2..=4 {
        c.deliver_all(&request(&cfg, rid, b"w", false));
    }
    let b = &mut c.r[1];
    assert_eq!((b.last_executed(), b.last_stable()), (4, 4));
    assert!(
        !b.requests.contains_key(&d),
        "executed, below the checkpoint: collected"
    );

    let batch = BatchBody {
        requests: vec![],
        big: vec![d],
        nondet: vec![1],
    };
    let bd = batch_digest(&batch).unwrap();
    let pp = Message::PrePrepare(PrePrepare {
        view: 0,
        seq: 5,
        batch,
    });
    b.handle_message(Time(1), &from_replica(&cfg, 0, &pp));
    assert!(sent(&drain(b)).is_empty(), "no PREPARE without the body");
    b.send_status();
    let st = first_sent(&drain(b), |m| match m {
        Message::Status(s) => Some(s),
        _ => None,
    })
    .unwrap();
    assert_eq!(st.missing_requests, vec![d]);

    // A peer relays the client's frame.
    b.handle_message(Time(2), &big);
    let prepare = first_sent(&drain(b), |m| match m {
        Message::Prepare(p) => Some(p),
        _ => None,
    });
    assert_eq!(
        prepare,
        Some(Prepare {
            view: 0,
            seq: 5,
            digest: bd,
            replica: 1
        })
    );
}

// ---- faulty clients (PROTOCOL.md §1.14, §5.3): signed requests ----------------------------

fn pre_prepare_of(requests: Vec<Vec<u8>>) -> Message {
    Message::PrePrepare(PrePrepare {
        view: 0,
        seq: 1,
        batch: BatchBody {
            requests,
            big: vec![],
            nondet: vec![1],
        },
    })
}

fn prepares(out: &[Action]) -> usize {
    sent(out)
        .iter()
        .filter(|m| matches!(m, Message::Prepare(_)))
        .count()
}

#[test]
fn request_with_a_bad_mac_but_a_good_signature_is_forwarded_and_ordered() {
    // The client spoils the MAC of the primary (0) and of backup 1: backup 1 accepts it on the
    // signature, forwards it and starts its timer; the primary accepts the forwarded copy on the
    // signature too and orders it, so backups never wait for a request the primary drops.
    let cfg = config();
    let req = client_request(
        &cfg,
        CLIENT,
        1,
        b"w",
        false,
        ReqAuth::SignedMacsSpoiled(0b11),
    );
    let mut b = replica(1, &cfg);
    drain(&mut b);
    b.handle_message(Time(0), &req);
    assert_eq!(
        drain(&mut b),
        vec![Action::Send {
            to: 0,
            bytes: req.clone().into()
        }]
    );
    assert!(b.timers.is_set(TimerKind::ViewChange));
    let mut p = replica(0, &cfg);
    drain(&mut p);
    p.handle_message(Time(1), &req);
    let msgs = sent(&drain(&mut p));
    assert!(
        matches!(&msgs[..], [Message::PrePrepare(pp)] if pp.batch.requests == vec![req.clone()]),
        "{msgs:?}"
    );
    assert_eq!(p.stats().client_signatures_verified, 1);
    assert!(!p.is_blacklisted(CLIENT));
}

#[test]
fn inlined_request_whose_mac_fails_is_prepared_on_its_signature() {
    // "Big MAC": only the primary's MAC is good. Backups accept the pre-prepare at once on the
    // signature instead of waiting for f PREPAREs that would never come (§1.14).
    let cfg = config();
    let req = client_request(
        &cfg,
        CLIENT,
        1,
        b"w",
        false,
        ReqAuth::SignedMacsSpoiled(0b1110),
    );
    for j in 1..4 {
        let mut b = replica(j, &cfg);
        drain(&mut b);
        b.handle_message(
            Time(1),
            &from_replica(&cfg, 0, &pre_prepare_of(vec![req.clone()])),
        );
        assert_eq!(prepares(&drain(&mut b)), 1, "backup {j}");
        assert_eq!(b.stats().client_signatures_verified, 1);
    }
    // A correct backup whose MAC verifies does not pay for the signature.
    let good = request(&cfg, 2, b"w", false);
    let mut b = replica(1, &cfg);
    drain(&mut b);
    b.handle_message(Time(1), &from_replica(&cfg, 0, &pre_prepare_of(vec![good])));
    assert_eq!(prepares(&drain(&mut b)), 1);
    assert_eq!(b.stats().client_signatures_verified, 0);
}

#[test]
fn good_mac_over_a_bad_signature_blacklists_the_client() {
    let cfg = config();
    let bad = client_request(&cfg, CLIENT, 1, b"w", false, ReqAuth::BadSignature);
    // At the primary: dropped, not ordered, client blacklisted.
    let mut p = replica(0, &cfg);
    drain(&mut p);
    p.handle_message(Time(1), &bad);
    assert_eq!(
        drain(&mut p),
        vec![Action::Event(Event::Dropped(DropReason::BadAuth))]
    );
    assert!(p.is_blacklisted(CLIENT));
    assert_eq!(p.stats().clients_blacklisted, 1);
    // At a backup the MAC vouches for it and the signature check is deferred: the request is
    // forwarded (the primary checks the signature itself) and timed. When the timer fires, the
    // signature is checked before the primary is blamed: no view change (it would frame the
    // primary), the request is forgotten and the client blacklisted.
    let mut b = replica(1, &cfg);
    drain(&mut b);
    b.handle_message(Time(1), &bad);
    assert_eq!(
        drain(&mut b),
        vec![Action::Send {
            to: 0,
            bytes: bad.clone().into()
        }]
    );
    assert!(b.timers.is_set(TimerKind::ViewChange));
    assert_eq!(b.stats().client_signatures_deferred, 1);
    assert_eq!(b.stats().client_signatures_verified, 0);
    let fire = Time(1) + cfg.view_change_timeout + Duration::from_secs(1);
    while let Some(t) = b.poll_timeout().filter(|&t| t <= fire) {
        b.handle_timeout(t);
    }
    assert_eq!(b.view(), 0);
    assert!(!b.timers.is_set(TimerKind::ViewChange));
    assert!(sent(&drain(&mut b))
        .iter()
        .all(|m| !matches!(m, Message::ViewChange(_))));
    assert!(b.is_blacklisted(CLIENT));
    assert_eq!(b.stats().client_signatures_verified, 1);
    // Blacklisted, the client's MAC no longer vouches for anything: a read-only request needs
    // its signature, and an inlined request with a bad signature is held (§1.14).
    b.handle_message(
        Time(2),
        &client_request(&cfg, CLIENT, 5, b"r", true, ReqAuth::BadSignature),
    );
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::BadAuth))]
    );
    b.handle_message(
        Time(2),
        &from_replica(&cfg, 0, &pre_prepare_of(vec![bad.clone()])),
    );
    assert_eq!(prepares(&drain(&mut b)), 0);
    // Its validly signed requests are still processed: another replica may have forwarded
    // them, and dropping them would let the client frame a primary that blacklisted it.
    let good = request(&cfg, 2, b"w", false);
    p.handle_message(Time(3), &good);
    assert!(matches!(
        &sent(&drain(&mut p))[..],
        [Message::PrePrepare(_)]
    ));
    // A bad MAC over a bad signature proves nothing about the client: no blacklisting.
    let mut q = replica(2, &cfg);
    drain(&mut q);
    let mut spoiled = bad.clone();
    let at = spoiled.len() - 2 * crate::crypto::MAC_LEN; // replica 2's entry of 4
    spoiled[at] ^= 1;
    q.handle_message(Time(1), &spoiled);
    assert_eq!(
        drain(&mut q),
        vec![Action::Event(Event::Dropped(DropReason::BadAuth))]
    );
    assert!(!q.is_blacklisted(CLIENT));
}

#[test]
fn a_signing_client_cannot_fall_back_to_mac_only_but_a_mac_only_client_can() {
    let cfg = config();
    let mut p = replica(0, &cfg);
    drain(&mut p);
    p.handle_message(
        Time(1),
        &client_request(&cfg, CLIENT, 1, b"w", false, ReqAuth::MacOnly),
    );
    assert_eq!(
        drain(&mut p),
        vec![Action::Event(Event::Dropped(DropReason::BadAuth))]
    );
    // A client installed without a public key is MAC-only (the legacy mode).
    let other: ClientId = 78;
    let tk = TestKeys::new(1, cfg.n());
    let rk = tk.replica(0, [other]);
    let (to_c, from_c) = rk.clients[&other].clone();
    p.add_client(other, to_c.clone(), from_c.clone(), None);
    p.handle_message(
        Time(2),
        &client_request(&cfg, other, 1, b"w", false, ReqAuth::Signed),
    );
    assert_eq!(
        drain(&mut p),
        vec![Action::Event(Event::Dropped(DropReason::BadAuth))]
    );
    p.handle_message(
        Time(3),
        &client_request(&cfg, other, 1, b"w", false, ReqAuth::MacOnly),
    );
    assert!(matches!(
        &sent(&drain(&mut p))[..],
        [Message::PrePrepare(_)]
    ));
    // Installed with its key, it must sign.
    p.add_client(other, to_c, from_c, Some(rk.client_public[&other]));
    p.handle_message(
        Time(4),
        &client_request(&cfg, other, 2, b"w", false, ReqAuth::MacOnly),
    );
    assert_eq!(
        drain(&mut p),
        vec![Action::Event(Event::Dropped(DropReason::BadAuth))]
    );
}

#[test]
fn a_request_signed_for_another_client_is_refused_without_blaming_it() {
    // Client 78 (faulty) takes client 77's id: it can produce neither 77's MACs nor 77's
    // signature, so the frame is dropped and 77 is not blacklisted.
    let cfg = config();
    let tk = TestKeys::new(1, cfg.n());
    let thief = tk.client(78);
    let body = encode_body(&Message::Request(Request {
        client: CLIENT,
        rid: 1,
        op: b"w".to_vec(),
    }));
    let env = Envelope::new(Principal::Client(CLIENT), 0);
    let forged = encode_with_body(
        env,
        Tag::Request,
        &body,
        Digest::of(&body),
        Auth::SignedAuthenticator(thief.signing.as_ref().unwrap(), &thief.to_replica),
    );
    let mut p = replica(0, &cfg);
    drain(&mut p);
    p.handle_message(Time(1), &forged);
    assert_eq!(
        drain(&mut p),
        vec![Action::Event(Event::Dropped(DropReason::BadAuth))]
    );
    assert!(!p.is_blacklisted(CLIENT));
}

#[test]
fn big_request_body_is_fetchable_by_a_replica_whose_mac_fails() {
    // A body sent with replica 1's MAC spoiled reaches it again through another replica (STATUS
    // resends the client's frame): the signature makes it acceptable, so the batch prepares
    // instead of waiting forever for a body replica 1 could never authenticate.
    let cfg = config();
    let big = client_request(
        &cfg,
        CLIENT,
        1,
        &[b'w'; 100],
        false,
        ReqAuth::SignedMacsSpoiled(0b10),
    );
    let d = Frame::parse(&big, 1 << 20).unwrap().header.body_digest;
    let batch = BatchBody {
        requests: vec![],
        big: vec![d],
        nondet: vec![1],
    };
    let mut b = replica(1, &cfg);
    drain(&mut b);
    b.handle_message(
        Time(1),
        &from_replica(
            &cfg,
            0,
            &Message::PrePrepare(PrePrepare {
                view: 0,
                seq: 1,
                batch,
            }),
        ),
    );
    assert_eq!(prepares(&drain(&mut b)), 0, "no PREPARE without the body");
    b.handle_message(Time(2), &big);
    assert_eq!(prepares(&drain(&mut b)), 1);
}

#[test]
fn superseded_big_body_named_by_a_batch_is_still_taken() {
    // Seq 1 runs rid 2; seq 2 (ordered before seq 1 executed) names the body of the older big
    // rid 1. The reply cache says rid 1 is stale, but without the body seq 2 can neither
    // prepare nor execute: refusing it stalled this replica forever (found by the simulator).
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let b1 = BatchBody {
        requests: vec![request(&cfg, 2, b"w", false)],
        big: vec![],
        nondet: vec![1],
    };
    let d1 = batch_digest(&b1).unwrap();
    b.handle_message(
        Time(1),
        &from_replica(
            &cfg,
            0,
            &Message::PrePrepare(PrePrepare {
                view: 0,
                seq: 1,
                batch: b1,
            }),
        ),
    );
    let vote = |j: ReplicaId, commit: bool| {
        let (view, seq, digest, replica) = (0, 1, d1, j);
        let m = if commit {
            Message::Commit(Commit {
                view,
                seq,
                digest,
                replica,
            })
        } else {
            Message::Prepare(Prepare {
                view,
                seq,
                digest,
                replica,
            })
        };
        from_replica(&cfg, j, &m)
    };
    b.handle_message(Time(2), &vote(2, false));
    b.handle_message(Time(3), &vote(0, true));
    b.handle_message(Time(3), &vote(2, true));
    assert_eq!(b.last_executed(), 1);
    let big = request(&cfg, 1, &[b'w'; 100], false);
    let d = Frame::parse(&big, 1 << 20).unwrap().header.body_digest;
    let b2 = BatchBody {
        requests: vec![],
        big: vec![d],
        nondet: vec![1],
    };
    b.handle_message(
        Time(4),
        &from_replica(
            &cfg,
            0,
            &Message::PrePrepare(PrePrepare {
                view: 0,
                seq: 2,
                batch: b2,
            }),
        ),
    );
    drain(&mut b);
    b.handle_message(Time(5), &big);
    assert_eq!(prepares(&drain(&mut b)), 1);
    // A stale request no batch needs is still refused.
    b.handle_message(Time(6), &request(&cfg, 1, &[b'v'; 100], false));
    assert_eq!(
        drain(&mut b),
        vec![Action::Event(Event::Dropped(DropReason::Stale))]
    );
}

#[test]
fn big_request_the_primary_never_pre_prepares_is_forwarded_once() {
    // A faulty client sends a big request to the backups only. A backup times it; after a whole
    // STATUS interval without a pre-prepare it forwards the body to the primary, once.
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let big = request(&cfg, 1, &[b'w'; 100], false);
    b.handle_message(Time(0), &big);
    assert!(
        drain(&mut b).is_empty(),
        "big bodies are not forwarded at once"
    );
    let forwarded = |out: &[Action]| {
        out.iter()
            .filter(|a| matches!(a, Action::Send { to: 0, bytes } if **bytes == *big))
            .count()
    };
    let mut total = 0;
    let mut now = Time(0);
    for _ in 0..3 {
        now = now + cfg.status_interval;
        b.handle_timeout(now);
        total += forwarded(&drain(&mut b));
    }
    assert_eq!(total, 1);
}

#[test]
fn a_new_view_contradicting_a_batch_accepted_in_its_view_before_a_restart_is_refused() {
    // A replica restarted in view 1 holds, from its durable votes, that it pre-prepared
    // batch `a` at seq 3 in view 1 (the NEW-VIEW it installed is gone). A second NEW-VIEW
    // for view 1 from an equivocating primary that picks another batch there must not be
    // installed; one that agrees, or that picks in another view, may be.
    use crate::replica::new_view::Decision;
    let cfg = config();
    let mut r = replica(2, &cfg);
    let (a, b) = (Digest::of(b"a"), Digest::of(b"b"));
    r.log.entry(3).or_default().note_pre_prepared(a, 1);
    r.log.entry(2).or_default().note_pre_prepared(b, 0);
    let dec = |picks: Vec<Digest>| Decision {
        min: 0,
        min_digest: Digest::of(b"ckpt"),
        picks,
    };
    let null = crate::batch::null_digest();
    assert_eq!(
        r.new_view_contradicts_promises(1, &dec(vec![a, null, null])),
        Some(3)
    );
    assert_eq!(
        r.new_view_contradicts_promises(1, &dec(vec![a, a, b])),
        Some(3)
    );
    assert_eq!(
        r.new_view_contradicts_promises(1, &dec(vec![b, null, a])),
        None
    );
    assert_eq!(
        r.new_view_contradicts_promises(1, &dec(vec![b, a])),
        None,
        "seq 3 not picked"
    );
    assert_eq!(
        r.new_view_contradicts_promises(2, &dec(vec![b, null, null])),
        None,
        "other view"
    );
    // Slots at or below the stable checkpoint are not decided by the NEW-VIEW.
    r.last_stable = 3;
    assert_eq!(
        r.new_view_contradicts_promises(1, &dec(vec![a, null, null])),
        None
    );
}

// ----- busy time (`Replica::busy_for`) ------------------------------------------------------

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
    let pp = Message::PrePrepare(PrePrepare {
        view: 0,
        seq,
        batch,
    });
    b.handle_message(now, &from_replica(cfg, 0, &pp));
    let prepare = Message::Prepare(Prepare {
        view: 0,
        seq,
        digest: d,
        replica: 2,
    });
    b.handle_message(now, &from_replica(cfg, 2, &prepare));
    if commits {
        deliver_commits(cfg, b, now, seq, d);
    }
}

fn deliver_commits(cfg: &Config, b: &mut Replica<Counter>, now: Time, seq: Seq, d: Digest) {
    for j in [0, 2] {
        let commit = Message::Commit(Commit {
            view: 0,
            seq,
            digest: d,
            replica: j,
        });
        b.handle_message(now, &from_replica(cfg, j, &commit));
    }
}

fn batch_of(req: Vec<u8>) -> BatchBody {
    BatchBody {
        requests: vec![req],
        big: vec![],
        nondet: vec![1],
    }
}

/// What a driver does once a step that took `busy` of wall time ends at `end`: it reports
/// the busy time (if `report`), then handles the deadlines that passed meanwhile before the
/// input queued meanwhile (as byzfs-net's event loop does at the top of every turn).
fn end_long_step(b: &mut Replica<Counter>, busy: Duration, end: Time, report: bool) {
    if report {
        b.busy_for(busy);
    }
    drain(b);
    if b.poll_timeout().is_some_and(|t| t <= end) {
        b.handle_timeout(end);
    }
    drain(b);
}

/// A backup whose view-change timer runs for a pending request executes that request
/// tentatively in a step that takes `2T` (every replica does the same, so the COMMITs come
/// only after it). Returns the backup after the step's end and the COMMITs.
fn slow_tentative_execution(report: bool) -> Replica<Counter> {
    let cfg = config();
    assert!(cfg.tentative_execution);
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let req = request(&cfg, 1, b"w", false);
    b.handle_message(Time(0), &req);
    assert!(b.timers.is_set(TimerKind::ViewChange), "a pending request");
    let start = Time(0) + Duration::from_millis(10);
    let batch = batch_of(req);
    let d = batch_digest(&batch).unwrap();
    order_in_view_0(&cfg, &mut b, start, 1, batch, false);
    assert_eq!((b.last_tentative(), b.last_executed()), (1, 0));
    let busy = 2 * cfg.view_change_timeout;
    let end = start + busy;
    end_long_step(&mut b, busy, end, report);
    deliver_commits(&cfg, &mut b, end, 1, d);
    drain(&mut b);
    b
}

/// The livelock of a request that takes long to execute everywhere (an `rm` of a 1 GiB
/// file took ~48 s): the view-change timer armed before the step expired during it, fired
/// as soon as the step ended, and rolled the tentative execution back — view after view.
#[test]
fn a_backup_busy_executing_tentatively_does_not_blame_the_primary() {
    let b = slow_tentative_execution(false);
    assert_eq!(
        b.view(),
        1,
        "unreported, the step's time counts against the primary"
    );
    assert_eq!(b.stats().rollbacks, 1, "the execution is rolled back");
    assert_eq!(b.last_executed(), 0);

    let b = slow_tentative_execution(true);
    assert_eq!((b.view(), b.has_new_view()), (0, true));
    assert_eq!(b.stats().view_changes, 0);
    assert_eq!(b.stats().rollbacks, 0);
    assert_eq!(b.stats().busy_steps, 1);
    assert_eq!(b.last_executed(), 1, "the request commits normally");
    assert_eq!(b.service().count(), 1);
    assert!(!b.timers.is_set(TimerKind::ViewChange), "nothing pending");
}

/// A committed execution is progress, but the step restarts the view-change timer from the
/// `now` it was given — stale by the time the step ends. With another client's request
/// pending (the primary proposes it once it has executed the first one too), unreported
/// busy time makes the timer fire at the step's end.
fn slow_committed_execution(report: bool) -> Replica<Counter> {
    let mut cfg = config();
    cfg.tentative_execution = false;
    let other = CLIENT + 1;
    let keys = TestKeys::new(1, cfg.n());
    let mut b = Replica::new(
        cfg.clone(),
        keys.replica(1, [CLIENT, other]),
        Counter::new(),
        1,
        Time::ZERO,
    );
    drain(&mut b);
    let r1 = request(&cfg, 1, b"w", false);
    let r2 = client_request(&cfg, other, 1, b"w", false, ReqAuth::Signed);
    b.handle_message(Time(0), &r1);
    let start = Time(0) + Duration::from_millis(10);
    b.handle_message(start, &r2);
    order_in_view_0(&cfg, &mut b, start, 1, batch_of(r1), true);
    assert_eq!(b.last_executed(), 1);
    assert!(b.timers.is_set(TimerKind::ViewChange), "r2 still pending");
    let busy = 2 * cfg.view_change_timeout;
    let end = start + busy;
    end_long_step(&mut b, busy, end, report);
    // The primary, free again too, proposes r2.
    order_in_view_0(&cfg, &mut b, end, 2, batch_of(r2), true);
    drain(&mut b);
    b
}

#[test]
fn a_backup_busy_executing_a_committed_request_does_not_blame_the_primary() {
    let b = slow_committed_execution(false);
    assert_eq!(
        b.view(),
        1,
        "unreported, the step's time counts against the primary"
    );
    assert_eq!(b.last_executed(), 1, "r2 is not executed in view 0");

    let b = slow_committed_execution(true);
    assert_eq!((b.view(), b.stats().view_changes), (0, 0));
    assert_eq!(b.last_executed(), 2, "r2 commits normally");
    assert!(!b.timers.is_set(TimerKind::ViewChange), "nothing pending");
}

/// The cap: a replica that says it is busy after every step (or a driver that
/// over-reports) still leaves a silent primary's view, `view_change_timeout_max` late at
/// most — a faulty primary is still replaced.
#[test]
fn a_replica_busy_for_ever_still_replaces_a_silent_primary() {
    let cfg = config();
    let jitter = Duration::from_millis(100); // VTIMER_JITTER
    let mut b = replica(1, &cfg);
    drain(&mut b);
    b.handle_message(Time(0), &request(&cfg, 1, b"w", false));
    let for_ever = Duration::from_secs(3600);
    b.busy_for(for_ever);
    drain(&mut b);
    let bound = Time(0) + cfg.view_change_timeout + jitter + cfg.view_change_timeout_max;
    let mut now = Time(0);
    while b.view() == 0 && now <= bound {
        now = b.poll_timeout().unwrap();
        b.handle_timeout(now);
        if b.view() == 0 {
            b.busy_for(for_ever);
        }
        drain(&mut b);
    }
    assert_eq!(b.view(), 1, "the silent primary is replaced");
    assert!(
        now >= Time(0) + cfg.view_change_timeout + cfg.view_change_timeout_max,
        "pushed back by the whole allowance first (view change at {now:?})"
    );
    assert!(b.stats().busy_steps > 1);
    // Its VIEW-CHANGE went out (with the request) like any other.
    assert!(!b.has_new_view());
    assert_eq!(b.stats().view_changes, 1);
}
