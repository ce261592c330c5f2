//! The normal case (docs/PROTOCOL.md §1.5): ordering a request, PRE-PREPARE, PREPARE and COMMIT,
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
    let batch = batch_of(request(&cfg, 1, b"w", false));
    let d = batch_digest(&batch).unwrap();
    let pp = pre_prepare_msg(0, 1, batch);
    b.handle_message(Time(10), &from_replica(&cfg, 0, &pp));
    // Its first vote records a horizon a log window ahead, then the vote, then the PREPARE.
    assert_eq!(
        outputs(drain(&mut b)),
        prepare_vote(0, 1, d, 1, Some(1 + cfg.log_window))
    );

    // One more PREPARE (from replica 2) completes the certificate (2f = 2 with our own).
    b.handle_message(Time(11), &from_replica(&cfg, 2, &prepare_msg(0, 1, d, 2)));
    // Persist P-info, then the tentative reply (it waits for the durable P-info), then COMMIT.
    assert_eq!(
        outputs(drain(&mut b)),
        commit_vote(0, 1, d, 1, vec![reply_out(0, 1, 1, 1, true)])
    );
    assert_eq!((b.last_tentative(), b.last_executed()), (1, 0));

    // Commits from 0 and 2 complete the commit certificate (2f+1 = 3 with our own). The
    // batch ran tentatively already: committing it only marks the reply committed (§1.15
    // `execute_committed`; a client short of 2f+1 tentative replies retransmits and gets
    // the committed one), so the step outputs nothing but its events.
    b.handle_message(Time(12), &from_replica(&cfg, 0, &commit_msg(0, 1, d, 0)));
    assert_eq!(drain(&mut b), vec![], "2 COMMITs of 2f+1");
    b.handle_message(Time(12), &from_replica(&cfg, 2, &commit_msg(0, 1, d, 2)));
    assert_eq!(
        drain(&mut b),
        vec![
            Action::Event(Event::CommittedLocal {
                view: 0,
                seq: 1,
                digest: d
            }),
            Action::Event(Event::Committed { seq: 1, digest: d }),
        ]
    );
    assert_eq!(b.last_executed(), 1);
    assert_eq!(b.service().count(), 1, "executed exactly once");
}

#[test]
fn conflicting_pre_prepare_is_refused() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    let batch1 = batch_of(request(&cfg, 1, b"w", false));
    let d1 = batch_digest(&batch1).unwrap();
    let pp1 = pre_prepare_msg(0, 1, batch1);
    let pp2 = pre_prepare_msg(0, 1, batch_of(request(&cfg, 2, b"w", false)));
    b.handle_message(Time(1), &from_replica(&cfg, 0, &pp1));
    assert_eq!(
        outputs(drain(&mut b)),
        prepare_vote(0, 1, d1, 1, Some(1 + cfg.log_window))
    );
    b.handle_message(Time(2), &from_replica(&cfg, 0, &pp2));
    assert_eq!(drain(&mut b), dropped(DropReason::Invalid));
}

#[test]
fn pre_prepare_failing_nondet_is_accepted_once_f_other_backups_prepared_it() {
    // A replica catching up (or behind a slow link) receives a PRE-PREPARE whose (time-based)
    // choice it would refuse now; f = 1 other backup prepared it, which with the primary is
    // f+1 replicas: a faulty primary has at most f-1 faulty backups beside it, so a correct
    // one checked the choice.
    let cfg = config();
    let mut b = replica(3, &cfg);
    let batch = BatchBody {
        requests: vec![request(&cfg, 1, b"w", false)],
        big: vec![],
        nondet: vec![9],
    };
    let d = batch_digest(&batch).unwrap();
    let pp = from_replica(&cfg, 0, &pre_prepare_msg(0, 1, batch));
    let prepare = |j: u32| from_replica(&cfg, j, &prepare_msg(0, 1, d, j));
    // Its PREPARE is the second of the certificate (2f from backups): it prepares, executes
    // tentatively and commits in the same step.
    let mut vote = prepare_vote(0, 1, d, 3, Some(1 + cfg.log_window));
    vote.extend(commit_vote(0, 1, d, 3, vec![reply_out(0, 3, 1, 1, true)]));
    // The PRE-PREPARE first: the primary alone is not enough; it is kept aside, and the
    // PREPARE that vouches for it accepts it (at a slow link's backups the PREPAREs came
    // after it).
    let mut late = replica(3, &cfg);
    late.handle_message(Time(1), &pp);
    assert_eq!(drain(&mut late), dropped(DropReason::Nondet));
    late.handle_message(Time(1), &prepare(1));
    assert_eq!(outputs(drain(&mut late)), vote);
    // The PREPARE first: kept, then the PRE-PREPARE is accepted at once.
    b.handle_message(Time(1), &prepare(1));
    assert_eq!(
        drain(&mut b),
        vec![],
        "a PREPARE before its PRE-PREPARE is only kept"
    );
    b.handle_message(Time(1), &pp);
    assert_eq!(outputs(drain(&mut b)), vote);
    assert_eq!(b.last_tentative(), 1, "prepared and executed tentatively");
}

#[test]
fn pre_prepare_from_non_primary_or_bad_nondet_is_refused() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    let batch = batch_of(request(&cfg, 1, b"w", false));
    b.handle_message(
        Time(1),
        &from_replica(&cfg, 2, &pre_prepare_msg(0, 1, batch.clone())),
    );
    assert_eq!(drain(&mut b), dropped(DropReason::Invalid));
    let bad = BatchBody {
        nondet: vec![9],
        ..batch
    };
    b.handle_message(Time(1), &from_replica(&cfg, 0, &pre_prepare_msg(0, 1, bad)));
    // Counted apart from other invalid messages: a replica catching up sees many old
    // time-based choices, which are not a primary's fault.
    assert_eq!(drain(&mut b), dropped(DropReason::Nondet));
}

#[test]
fn out_of_window_and_bad_mac_are_dropped_and_counted() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    let batch = batch_of(request(&cfg, 1, b"w", false));
    b.handle_message(
        Time(1),
        &from_replica(&cfg, 0, &pre_prepare_msg(0, 9, batch)),
    );
    assert_eq!(drain(&mut b), dropped(DropReason::OutOfWindow));
    let mut bytes = from_replica(&cfg, 2, &prepare_msg(0, 1, Digest::ZERO, 2));
    let slot1 = bytes.len() - 3 * 16; // replica 1's MAC in the 4-entry authenticator
    bytes[slot1] ^= 0xFF;
    b.handle_message(Time(1), &bytes);
    assert_eq!(drain(&mut b), dropped(DropReason::BadAuth));
    b.handle_message(Time(1), b"garbage");
    assert_eq!(drain(&mut b), dropped(DropReason::Malformed));
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
        &from_replica(&cfg, 2, &prepare_msg(0, 1, Digest::ZERO, 3)),
    );
    assert_eq!(drain(&mut b), dropped(DropReason::Invalid));
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
    let inlined = batch_of(req.clone());
    order_in_view_0(&cfg, &mut b, Time(1), 1, inlined, true);
    drain(&mut b);
    assert_eq!((b.last_executed(), b.service().count()), (1, 1));

    let (by_digest, _) = big_batch_of(&req);
    let pp = pre_prepare_msg(0, 2, by_digest.clone());
    b.handle_message(Time(3), &from_replica(&cfg, 0, &pp));
    assert_eq!(
        outputs(drain(&mut b)),
        vec![],
        "no PREPARE without the body"
    );
    // A peer answers our STATUS (missing request d) with the client's frame. Only a body:
    // no reply (the client did not ask), and the horizon recorded at seq 1 covers seq 2.
    b.handle_message(Time(4), &req);
    let bd = batch_digest(&by_digest).unwrap();
    assert_eq!(
        outputs(drain(&mut b)),
        prepare_vote(0, 2, bd, 1, None),
        "the relayed body completes the batch"
    );
    order_in_view_0(&cfg, &mut b, Time(5), 2, by_digest, true);
    assert_eq!(b.last_executed(), 2);
    assert_eq!(b.service().count(), 1, "the request still executes once");
}

#[test]
fn big_request_body_after_pre_prepare_still_prepares() {
    let cfg = config();
    // Above the 64-byte SRT threshold, the client sends the body to every replica: not
    // forwarded (§1.10), it completes the batch.
    let big = request(&cfg, 1, &[b'w'; 100], false);
    let (out, bd) = body_after_pre_prepare(&cfg, &big);
    assert_eq!(out, prepare_vote(0, 1, bd, 1, Some(1 + cfg.log_window)));
}

/// A PRE-PREPARE a moment ahead of the log window is kept and handled once the next stable
/// checkpoint moves the window over it (simulator: slow-execution 985, where the dropped one
/// came back only after the replica's view-change timer had run out). One further than a
/// checkpoint interval beyond the window is dropped for good.
#[test]
fn a_pre_prepare_just_ahead_of_the_window_is_handled_when_the_window_moves() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let high = cfg.log_window;
    let early = batch_of(request(&cfg, 9, b"w9", false));
    let d_early = batch_digest(&early).unwrap();
    let pp = |seq: Seq, batch: BatchBody| from_replica(&cfg, 0, &pre_prepare_msg(0, seq, batch));
    b.handle_message(Time(1), &pp(high + 1, early));
    assert_eq!(drain(&mut b), dropped(DropReason::OutOfWindow));
    let too_far = high + cfg.checkpoint_interval + 1;
    b.handle_message(
        Time(1),
        &pp(too_far, batch_of(request(&cfg, 10, b"w10", false))),
    );
    assert_eq!(drain(&mut b), dropped(DropReason::OutOfWindow));
    // Seqs 1..=K run; the checkpoint at K becomes stable with the votes of 0 and 2.
    let k = cfg.checkpoint_interval;
    for seq in 1..=k {
        let batch = batch_of(request(&cfg, seq, format!("w{seq}").as_bytes(), false));
        order_in_view_0(&cfg, &mut b, Time(2), seq, batch, true);
    }
    assert_eq!(b.last_executed(), k);
    drain(&mut b);
    let own = b.checkpoints.own[&k];
    for j in [0, 2] {
        let cp = Message::Checkpoint(Checkpoint {
            seq: k,
            digest: own,
            replica: j,
            stable: false,
        });
        b.handle_message(Time(3), &from_replica(&cfg, j, &cp));
    }
    assert_eq!(b.last_stable(), k);
    let votes: Vec<Out> = outputs(drain(&mut b))
        .into_iter()
        .filter(|o| matches!(o, Out::Broadcast(Message::Prepare(_))))
        .collect();
    assert_eq!(
        votes,
        vec![Out::Broadcast(prepare_msg(0, high + 1, d_early, 1))]
    );
    assert!(!b.log.slots.contains_key(&too_far));
}
