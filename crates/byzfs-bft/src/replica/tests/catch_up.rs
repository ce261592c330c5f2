//! Catching up on batches committed in a view the replica has left (§3.8, `catch_up.rs`).

use super::*;

/// Backup 1 alone in view 1 (its VIEW-CHANGE sent, no NEW-VIEW) while view 0 runs on.
fn alone_in_view_1(cfg: &Config) -> Replica<Counter> {
    let mut b = replica(1, cfg);
    drain(&mut b);
    let ckpt0 = b.checkpoints.own[&0];
    b.start_view_change(1);
    assert_eq!(outputs(drain(&mut b)), moves_to_view_1(1, ckpt0, None));
    assert!(b.view() == 1 && !b.has_new_view());
    b
}

/// Its STATUS (its VIEW-CHANGE, rebroadcast after doubling gaps, left out).
fn status_of_alone(b: &mut Replica<Counter>) -> Vec<Out> {
    b.send_status();
    outputs(drain(b))
        .into_iter()
        .filter(|o| !matches!(o, Out::Broadcast(Message::ViewChange(_))))
        .collect()
}

/// `2f+1` COMMITs of view 0 certify the batch at seq 1: the replica in view 1 runs it once
/// it has the body (asked for in STATUS, sent as BATCH-DATA), and replies, without a vote
/// of its own. `2f` are not enough.
#[test]
fn a_replica_alone_in_a_higher_view_runs_what_2f_plus_1_commits_of_the_old_view_certify() {
    let cfg = config();
    let mut b = alone_in_view_1(&cfg);
    let req = request(&cfg, 1, b"w", false);
    let batch = batch_of(req);
    let d = batch_digest(&batch).unwrap();
    for j in [0, 2] {
        b.handle_message(Time(1), &from_replica(&cfg, j, &commit_msg(0, 1, d, j)));
        assert_eq!(outputs(drain(&mut b)), vec![], "COMMIT of replica {j}");
    }
    assert_eq!(
        status_of_alone(&mut b),
        vec![Out::Broadcast(status_msg(1, 1, false, 0, 0))],
        "2f COMMITs certify nothing: nothing asked for"
    );
    // The third: certified, but the body is missing.
    b.handle_message(Time(2), &from_replica(&cfg, 3, &commit_msg(0, 1, d, 3)));
    assert_eq!(outputs(drain(&mut b)), vec![]);
    assert_eq!(b.last_executed(), 0);
    assert_eq!(
        status_of_alone(&mut b),
        vec![Out::Broadcast(Message::Status(Status {
            missing_batches: vec![d],
            ..status_of(1, 1, false, 0, 0)
        }))]
    );
    let data = Message::BatchData(BatchData {
        replica: 2,
        batch: batch.clone(),
    });
    // Point to point, with a MAC for replica 1 (as replica 2 answers a STATUS).
    let data = replica(2, &cfg).encode(&data, AuthChoice::MacTo(1));
    b.handle_message(Time(3), &data);
    // It runs the batch and replies (a committed reply, in its own view); no PREPARE or
    // COMMIT: it does not vote in view 0.
    assert_eq!(outputs(drain(&mut b)), vec![reply_out(1, 1, 1, 1, false)]);
    assert_eq!(b.last_executed(), 1);
    assert_eq!(b.service().count(), 1);
    assert_eq!(b.stats().batches_caught_up, 1);
    assert!(b.view() == 1 && !b.has_new_view());
}

/// COMMITs of one view only: three replicas' COMMITs for one digest split across views 0
/// and 1 (each replica's latest) certify nothing, and a COMMIT of a view above ours is not
/// kept.
#[test]
fn commits_of_different_views_do_not_make_a_certificate() {
    let cfg = config();
    let mut b = alone_in_view_1(&cfg);
    let batch = batch_of(request(&cfg, 1, b"w", false));
    let d = batch_digest(&batch).unwrap();
    b.handle_message(Time(1), &from_replica(&cfg, 0, &commit_msg(0, 1, d, 0)));
    b.handle_message(Time(1), &from_replica(&cfg, 2, &commit_msg(0, 1, d, 2)));
    b.handle_message(Time(1), &from_replica(&cfg, 2, &commit_msg(1, 1, d, 2)));
    b.handle_message(Time(1), &from_replica(&cfg, 3, &commit_msg(2, 1, d, 3)));
    assert_eq!(
        drain(&mut b),
        dropped(DropReason::OutOfWindow),
        "view 2 is above ours"
    );
    b.handle_message(Time(1), &from_replica(&cfg, 3, &commit_msg(0, 1, d, 3)));
    assert_eq!(
        status_of_alone(&mut b),
        vec![Out::Broadcast(status_msg(1, 1, false, 0, 0))],
        "replica 2's latest COMMIT is of view 1: two of view 0 and one of view 1"
    );
    assert_eq!(b.last_executed(), 0);
}

/// A replica of view 0 that sees in STATUS a peer in view 1 without its NEW-VIEW and behind
/// it resends its own COMMITs of the slots the peer lacks, after doubling gaps like every
/// answer.
#[test]
fn a_peer_resends_its_commits_to_a_replica_alone_in_a_higher_view_behind_it() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let mut digests = Vec::new();
    for seq in 1..=2 {
        let batch = batch_of(request(&cfg, seq, b"w", false));
        digests.push(batch_digest(&batch).unwrap());
        order_in_view_0(&cfg, &mut b, Time(1), seq, batch, true);
    }
    assert_eq!(b.last_executed(), 2);
    drain(&mut b);
    let st = from_replica(&cfg, 3, &status_msg(3, 1, false, 0, 1));
    b.handle_message(Time(2), &st);
    assert_eq!(
        outputs(drain(&mut b)),
        vec![Out::Send(3, commit_msg(0, 2, digests[1], 1))]
    );
    // Asked again at once: not answered before the gap.
    b.handle_message(Time(3), &st);
    assert_eq!(outputs(drain(&mut b)), vec![]);
    // A peer in view 1 that has its NEW-VIEW is not sent COMMITs of view 0.
    let st = from_replica(&cfg, 2, &status_msg(2, 1, true, 0, 1));
    b.handle_message(Time(4), &st);
    assert_eq!(outputs(drain(&mut b)), vec![]);
}
