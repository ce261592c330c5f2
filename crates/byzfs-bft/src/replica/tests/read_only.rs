//! Read-only requests (§1.8): answered without ordering, and the read-only floor.

use super::*;

#[test]
fn read_only_request_is_answered_without_ordering() {
    let cfg = config();
    let mut b = replica(2, &cfg);
    drain(&mut b);
    b.handle_message(Time(1), &request(&cfg, 1, b"r", true));
    // One reply, marked tentative (the client needs 2f+1 of them), and nothing else.
    assert_eq!(outputs(drain(&mut b)), vec![reply_out(0, 2, 1, 0, true)]);
    // A write flagged read-only by a lying client is ordered, not executed locally: the
    // backup forwards the client's frame to the primary, as any write (§1.5).
    let lying = request(&cfg, 2, b"w", true);
    b.handle_message(Time(1), &lying);
    assert_eq!(
        drain(&mut b),
        vec![Action::Send {
            to: 0,
            bytes: lying.into()
        }]
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
    assert_eq!(outputs(drain(&mut b)), vec![reply_out(0, 2, 1, 0, true)]);
    assert_eq!(b.stats().client_signatures_verified, 0);
    // Not flagged read-only: a signing client's frame must be signed.
    b.handle_message(
        Time(1),
        &client_request(&cfg, CLIENT, 2, b"r", false, ReqAuth::MacOnly),
    );
    assert_eq!(drain(&mut b), dropped(DropReason::BadAuth));
    // A write flagged read-only without a signature cannot be ordered.
    b.handle_message(
        Time(1),
        &client_request(&cfg, CLIENT, 3, b"w", true, ReqAuth::MacOnly),
    );
    assert_eq!(drain(&mut b), dropped(DropReason::BadAuth));
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
    let batch = batch_of(request(&cfg, 1, b"w", false));
    let d = batch_digest(&batch).unwrap();
    let pp = pre_prepare_msg(0, 1, batch);
    b.handle_message(Time(1), &from_replica(&cfg, 0, &pp));
    assert_eq!(
        outputs(drain(&mut b)),
        prepare_vote(0, 1, d, 1, Some(1 + cfg.log_window))
    );
    // A read arriving while the batch is only pre-prepared is answered from the current state.
    b.handle_message(Time(2), &request(&cfg, 2, b"r", true));
    assert_eq!(outputs(drain(&mut b)), vec![reply_out(0, 1, 2, 0, true)]);

    // Prepared: P-info and COMMIT, no tentative execution (so no reply).
    b.handle_message(Time(3), &from_replica(&cfg, 2, &prepare_msg(0, 1, d, 2)));
    assert_eq!(outputs(drain(&mut b)), commit_vote(0, 1, d, 1, vec![]));
    // COMMIT sent: the write may complete at a client from now on, so no read is answered
    // from the state without it.
    b.handle_message(Time(4), &request(&cfg, 3, b"r", true));
    assert_eq!(
        drain(&mut b),
        vec![],
        "read answered from state older than a batch it sent COMMIT for"
    );
    b.handle_message(Time(5), &from_replica(&cfg, 0, &commit_msg(0, 1, d, 0)));
    assert_eq!(drain(&mut b), vec![], "two COMMITs of 2f+1");
    b.handle_message(Time(5), &from_replica(&cfg, 2, &commit_msg(0, 1, d, 2)));
    assert_eq!(b.last_executed(), 1);
    // The write's committed reply, then the queued read, which runs once the batch executes.
    assert_eq!(
        outputs(drain(&mut b)),
        vec![reply_out(0, 1, 1, 1, false), reply_out(0, 1, 3, 1, true)]
    );
}
