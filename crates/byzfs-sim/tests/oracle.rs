//! The oracle wired end to end with hand-made replica and client event streams: a consistent
//! history passes; each kind of divergence is caught by the right checker.

use byzfs_bft::{Digest, Event, PersistRecord, Time};
use byzfs_sim::checker::{self, Oracle, Role, Stub};
use byzfs_sim::kv::{KvOp, KvResult};

fn d(b: u8) -> Digest {
    Digest([b; 32])
}

fn oracle() -> Oracle {
    Oracle::new(
        7,
        "hand-made",
        vec![Role::Correct, Role::Correct, Role::Correct, Role::Byzantine],
        1 << 20,
        true,
    )
}

fn append(v: &str) -> Vec<u8> {
    KvOp::Append {
        key: b"k".to_vec(),
        value: v.as_bytes().to_vec(),
    }
    .encode()
}

fn commit(o: &mut Oracle, inst: usize, seq: u64, digest: Digest, reqs: &[(u64, u64)]) {
    let nondet = 1000u64.to_le_bytes().to_vec();
    o.event(
        Time(seq),
        inst,
        &Event::Executed {
            seq,
            digest,
            nondet,
            requests: reqs.to_vec(),
            // Not what clients sent: no frame is on record here (`exactly_once` checks
            // content only where the replica named it).
            request_digests: Vec::new(),
            tentative: false,
        },
    );
    o.event(Time(seq), inst, &Event::Committed { seq, digest });
    let stub = Stub {
        last_executed: seq,
        last_tentative: seq,
        digest: d(seq as u8),
        ..Stub::default()
    };
    o.step_end(Time(seq), inst, &stub);
}

#[test]
fn consistent_history_passes() {
    let mut o = oracle();
    o.issue(Time(0), 100, 1, &append("a"), true);
    o.issue(Time(0), 101, 1, &append("b"), true);
    for inst in 0..3 {
        commit(&mut o, inst, 1, d(1), &[(100, 1)]);
        commit(&mut o, inst, 2, d(2), &[(101, 1)]);
    }
    // The Byzantine replica's divergent commit is ignored.
    commit(&mut o, 3, 1, d(9), &[(100, 1)]);
    o.complete(
        Time(5),
        100,
        1,
        &KvResult::Value(Some(b"a".to_vec())).encode(),
    );
    o.complete(
        Time(5),
        101,
        1,
        &KvResult::Value(Some(b"ab".to_vec())).encode(),
    );
    o.finish(Time(10));
    assert!(!o.sink.any(), "{:?}", o.sink.violations());
    assert_eq!(o.results.checked, 2);
}

#[test]
fn two_correct_replicas_committing_different_digests_is_caught() {
    let mut o = oracle();
    o.issue(Time(0), 100, 1, &append("a"), true);
    commit(&mut o, 0, 1, d(1), &[(100, 1)]);
    commit(&mut o, 1, 1, d(2), &[(100, 1)]);
    assert_eq!(o.sink.violations()[0].checker, checker::agreement::NAME);
}

#[test]
fn wrong_accepted_result_is_caught() {
    let mut o = oracle();
    o.issue(Time(0), 100, 1, &append("a"), true);
    commit(&mut o, 0, 1, d(1), &[(100, 1)]);
    o.complete(
        Time(5),
        100,
        1,
        &KvResult::Value(Some(b"zz".to_vec())).encode(),
    );
    assert_eq!(o.sink.violations()[0].checker, checker::results::NAME);
}

#[test]
fn request_executed_twice_is_caught() {
    let mut o = oracle();
    o.issue(Time(0), 100, 1, &append("a"), true);
    commit(&mut o, 0, 1, d(1), &[(100, 1)]);
    commit(&mut o, 0, 2, d(2), &[(100, 1)]);
    assert_eq!(o.sink.violations()[0].checker, checker::exactly_once::NAME);
}

#[test]
fn vote_before_persist_is_caught_and_byzantine_sends_are_not_checked() {
    use byzfs_bft::message::{Commit, Message};
    use byzfs_bft::wire::{encode, Auth, Envelope};
    use byzfs_bft::Principal;
    let mut o = oracle();
    let commit_by = |r: u32| {
        encode(
            Envelope::new(Principal::Replica(r), 0),
            &Message::Commit(Commit {
                view: 0,
                seq: 1,
                digest: d(1),
                replica: r,
            }),
            Auth::None,
        )
    };
    let c = commit_by(0);
    o.send(Time(1), 3, &commit_by(3));
    assert!(!o.sink.any());
    o.persist(
        0,
        PersistRecord::Committed {
            view: 0,
            seq: 1,
            digest: d(1),
        },
    );
    o.send(Time(1), 0, &c);
    assert!(!o.sink.any());
    // Replica 1 relaying replica 0's COMMIT is fine; its own COMMIT without the record is not.
    o.send(Time(1), 1, &c);
    assert!(!o.sink.any());
    o.send(Time(1), 1, &commit_by(1));
    assert_eq!(o.sink.violations()[0].checker, checker::persist::NAME);
}

#[test]
fn diverging_state_and_view_regression_are_caught() {
    let mut o = oracle();
    o.step_end(
        Time(1),
        0,
        &Stub {
            last_executed: 4,
            last_tentative: 4,
            digest: d(1),
            view: 2,
            ..Stub::default()
        },
    );
    o.step_end(
        Time(1),
        1,
        &Stub {
            last_executed: 4,
            last_tentative: 4,
            digest: d(2),
            ..Stub::default()
        },
    );
    assert_eq!(o.sink.violations()[0].checker, checker::prefix::NAME);
    o.step_end(
        Time(2),
        0,
        &Stub {
            last_executed: 4,
            last_tentative: 4,
            digest: d(1),
            view: 1,
            ..Stub::default()
        },
    );
    assert_eq!(o.sink.violations()[1].checker, checker::view::NAME);
}

/// A correct replica's read-only answer of `value` for `(client, rid)` over committed prefix
/// `committed`.
fn answer(o: &mut Oracle, inst: usize, client: u64, rid: u64, committed: u64, value: Option<&str>) {
    let result = KvResult::Value(value.map(|v| v.as_bytes().to_vec())).encode();
    o.event(
        Time(50),
        inst,
        &Event::ReadOnlyExecuted {
            client,
            rid,
            committed,
            on_tentative: true,
            result_digest: Digest::of(&result),
        },
    );
}

#[test]
fn read_only_answers_must_come_from_the_committed_prefix() {
    let get = KvOp::Get { key: b"k".to_vec() }.encode();
    let mut o = oracle();
    o.issue(Time(0), 100, 1, &append("a"), true);
    o.issue(Time(0), 100, 2, &append("b"), true);
    o.issue(Time(0), 101, 1, &get, true);
    o.issue(Time(0), 101, 2, &get, true);
    o.issue(Time(0), 101, 3, &get, true);
    for inst in 0..3 {
        commit(&mut o, inst, 1, d(1), &[(100, 1)]);
    }
    // After 1..=1 the key holds "a": right, then wrong (the uncommitted "ab").
    answer(&mut o, 0, 101, 1, 1, Some("a"));
    assert!(!o.sink.any(), "{:?}", o.sink.violations());
    answer(&mut o, 1, 101, 2, 1, Some("ab"));
    assert_eq!(
        o.sink.violations()[0].checker,
        checker::read_only::NAME,
        "{:?}",
        o.sink.violations()
    );
    // A prefix the history does not reach yet is judged once it does.
    answer(&mut o, 2, 101, 3, 2, Some("a"));
    assert_eq!(o.sink.violations().len(), 1);
    for inst in 0..3 {
        commit(&mut o, inst, 2, d(2), &[(100, 2)]);
    }
    assert_eq!(o.sink.violations().len(), 2, "{:?}", o.sink.violations());
    assert_eq!(o.read_only.checked, 3);
}
