//! The normal case (PROTOCOL.md §2): ordering a request, PRE-PREPARE, PREPARE and COMMIT,
//! and what each refuses.

use super::*;

#[test]
fn primary_orders_a_request_with_persist_then_pre_prepare() {
    let cfg = config();
    let mut p = replica(0, &cfg);
    drain(&mut p);
    let req = request(&cfg, 1, b"w", false);
    p.handle_message(Time(10), &req);
    assert_eq!(outputs(drain(&mut p)), proposal_of(req));
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
    // Its first vote records a horizon a log window ahead, then the vote, then the PREPARE.
    assert_eq!(
        outputs(drain(&mut b)),
        vec![
            Out::Persist(PersistRecord::VoteHorizon(1 + cfg.log_window)),
            Out::Persist(PersistRecord::Voted {
                view: 0,
                seq: 1,
                digest: d
            }),
            Out::Broadcast(Message::Prepare(Prepare {
                view: 0,
                seq: 1,
                digest: d,
                replica: 1
            })),
        ]
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
    // Persist P-info, then the tentative reply (it waits for the durable P-info), then COMMIT.
    let result = 1u64.to_le_bytes().to_vec();
    assert_eq!(
        outputs(drain(&mut b)),
        vec![
            Out::Persist(PersistRecord::Committed {
                view: 0,
                seq: 1,
                digest: d
            }),
            Out::Client(
                CLIENT,
                Message::Reply(Reply {
                    view: 0,
                    rid: 1,
                    client: CLIENT,
                    replica: 1,
                    tentative: true,
                    result_digest: Digest::of(&result),
                    result: Some(result),
                })
            ),
            Out::Broadcast(Message::Commit(Commit {
                view: 0,
                seq: 1,
                digest: d,
                replica: 1
            })),
        ]
    );
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

/// Runs `batch` through a backup at `seq` (view 0): PRE-PREPARE from the primary, PREPARE
/// from replica 2, COMMITs from 0 and 2. Returns every action.
pub(super) fn order_at_backup(
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
