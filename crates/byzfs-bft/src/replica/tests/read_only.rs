//! Read-only requests (§1.8): answered without ordering, and the read-only floor.

use super::*;

#[test]
fn read_only_request_is_answered_without_ordering() {
    let cfg = config();
    let mut b = replica(2, &cfg);
    drain(&mut b);
    b.handle_message(Time(1), &request(&cfg, 1, b"r", true));
    let result = 0u64.to_le_bytes().to_vec();
    // One reply, marked tentative (the client needs 2f+1 of them), and nothing else.
    assert_eq!(
        outputs(drain(&mut b)),
        vec![Out::Client(
            CLIENT,
            Message::Reply(Reply {
                view: 0,
                rid: 1,
                client: CLIENT,
                replica: 2,
                tentative: true,
                result_digest: Digest::of(&result),
                result: Some(result),
            })
        )]
    );
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
