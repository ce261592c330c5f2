//! A big body the client sent to the primary alone (`FLAG_RELAY`, docs/PROTOCOL.md §1.10 "each
//! body once"): the primary relays it to the backups of its fan-out ahead of its
//! PRE-PREPARE, once; each backup passes it on once, down the fan-out, but does not wait on
//! a relayed copy (it keeps the client's flag) until the client's own copy comes by its
//! retransmission.

use super::*;
use crate::client::FLAG_RELAY;

fn relayed(cfg: &Config, rid: u64, how: ReqAuth) -> Vec<u8> {
    flagged_request(cfg, CLIENT, rid, &[b'w'; 100], FLAG_RELAY, how)
}

/// What a view-0 primary outputs when it orders big request `req` alone at seq 1.
fn big_proposal_of(req: &[u8]) -> Vec<Out> {
    proposal_of_batch(big_batch_of(req).0)
}

/// Backup `b`'s outputs at its STATUS ticks `ticks` (intervals after time 1).
fn status_ticks(
    cfg: &Config,
    b: &mut Replica<Counter>,
    ticks: std::ops::RangeInclusive<u32>,
) -> Vec<Vec<Out>> {
    ticks
        .map(|k| {
            b.handle_timeout(Time(1) + k * cfg.status_interval);
            outputs(drain(b))
        })
        .collect()
}

#[test]
fn the_primary_relays_a_body_sent_to_it_alone_before_its_pre_prepare() {
    let cfg = config();
    let mut p = replica(0, &cfg);
    drain(&mut p);
    let big = relayed(&cfg, 1, ReqAuth::Signed);
    p.handle_message(Time(1), &big);
    let out = drain(&mut p);
    // The client's own frame, byte for byte (its authenticator covers every backup), to the
    // `2f` backups of the default fan-out: backup 1 passes it on to backup 3.
    assert_eq!(
        out[..2],
        [1, 2].map(|to| Action::Send {
            to,
            bytes: big.clone().into()
        })
    );
    let mut expected = vec![Out::Send(1, decode(&big)), Out::Send(2, decode(&big))];
    expected.extend(big_proposal_of(&big));
    assert_eq!(outputs(out), expected);
    assert_eq!(p.stats().bodies_relayed, 1);
    // Not timed until the client retransmits it (Deviation 33: the body may take longer to
    // reach the backups than the view-change timeout).
    assert!(p.requests.pending.is_empty());
    assert!(!p.timers.is_set(TimerKind::ViewChange));
    // The same frame again (a duplicate): held already, not relayed twice.
    p.handle_message(Time(2), &big);
    assert_eq!(outputs(drain(&mut p)), vec![]);
    assert_eq!(p.stats().bodies_relayed, 1);
}

#[test]
fn a_body_sent_to_every_replica_is_not_relayed() {
    let cfg = config();
    let mut p = replica(0, &cfg);
    drain(&mut p);
    let big = request(&cfg, 1, &[b'w'; 100], false);
    p.handle_message(Time(1), &big);
    assert_eq!(outputs(drain(&mut p)), big_proposal_of(&big));
    assert_eq!(p.stats().bodies_relayed, 0);
}

#[test]
fn a_backup_waits_on_a_relayed_body_only_when_its_client_retransmits() {
    // The primary's relayed copy, or a client's whose view is behind (it took backup 1 for
    // the primary): the two look alike. Either is passed on down the fan-out only (never
    // back to the primary: `bench bandwidth` once measured 6 bodies between sites instead
    // of 3 when backups passed relayed copies to it), and not waited on: it may cross a
    // slow link ahead of the bodies relayed after it and of the PRE-PREPARE naming them
    // all, and timed from its arrival it voted out every primary at 5 Mb/s (ARCHITECTURE.md
    // Deviation 33).
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let big = relayed(&cfg, 1, ReqAuth::Signed);
    b.handle_message(Time(1), &big);
    assert_eq!(outputs(drain(&mut b)), vec![Out::Send(3, decode(&big))]);
    assert_eq!(b.stats().bodies_passed_on, 1);
    let status = Out::Broadcast(status_msg(1, 0, true, 0, 0));
    assert_eq!(
        status_ticks(&cfg, &mut b, 1..=3),
        vec![vec![status.clone()]; 3]
    );
    assert!(b.requests.pending.is_empty());
    assert!(!b.timers.is_set(TimerKind::ViewChange));
    // The client's retransmission (to everyone, unflagged, the same body): waited on, and
    // forwarded to the primary if it still has not proposed it a STATUS interval later.
    let own = flagged_request(&cfg, CLIENT, 1, &[b'w'; 100], 0, ReqAuth::Signed);
    b.handle_message(Time(1) + 3 * cfg.status_interval, &own);
    assert_eq!(outputs(drain(&mut b)), vec![]);
    assert!(b.timers.is_set(TimerKind::ViewChange));
    assert_eq!(
        status_ticks(&cfg, &mut b, 4..=6),
        vec![
            vec![status.clone()],
            vec![Out::Send(0, decode(&own)), status.clone()],
            vec![status],
        ]
    );
    assert_eq!(b.stats().bodies_relayed, 0);
    assert_eq!(b.stats().bodies_passed_on, 1);
}

#[test]
fn a_relayed_body_with_a_bad_signature_goes_no_further() {
    // The primary checks the signature before it relays: nothing leaves, the client is
    // blacklisted (its MAC vouched for a bad signature).
    let cfg = config();
    let mut p = replica(0, &cfg);
    drain(&mut p);
    p.handle_message(Time(1), &relayed(&cfg, 1, ReqAuth::BadSignature));
    assert_eq!(drain(&mut p), dropped(DropReason::BadAuth));
    assert_eq!(p.stats().bodies_relayed, 0);
    // A backup defers the check (its MAC vouches, it vouches to no one) and makes it before
    // the body goes anywhere: the client's own copy, late, is dropped instead of forwarded.
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let own = flagged_request(&cfg, CLIENT, 1, &[b'w'; 100], 0, ReqAuth::BadSignature);
    b.handle_message(Time(1), &own);
    assert_eq!(outputs(drain(&mut b)), vec![]);
    let status = Out::Broadcast(status_msg(1, 0, true, 0, 0));
    assert_eq!(
        status_ticks(&cfg, &mut b, 1..=2),
        vec![vec![status.clone()], vec![status]]
    );
}

/// Who sends a relayed body to whom, for each fan-out, in view 0 (primary 0): each backup
/// receives it once and passes it on once at most.
fn relay_hops(fan_out: u32) -> Vec<(u32, Vec<Out>)> {
    let mut cfg = config();
    cfg.relay_fan_out = fan_out;
    let big = relayed(&cfg, 1, ReqAuth::Signed);
    (0..4)
        .map(|i| {
            let mut r = replica(i, &cfg);
            drain(&mut r);
            r.handle_message(Time(1), &big);
            let sent: Vec<Out> = outputs(drain(&mut r))
                .into_iter()
                .filter(|o| matches!(o, Out::Send(_, Message::Request(_))))
                .collect();
            // A second copy (another holder's answer to an ask): passed on no further.
            r.handle_message(Time(2), &big);
            assert_eq!(
                outputs(drain(&mut r)),
                vec![],
                "replica {i}, fan-out {fan_out}"
            );
            (i, sent)
        })
        .collect()
}

#[test]
fn a_relayed_body_goes_down_the_fan_out_once_per_backup() {
    let cfg = config();
    let body = decode(&relayed(&cfg, 1, ReqAuth::Signed));
    let to = |j: u32| Out::Send(j, body.clone());
    // 1: a chain, one copy on each replica's link.
    assert_eq!(
        relay_hops(1),
        vec![
            (0, vec![to(1)]),
            (1, vec![to(2)]),
            (2, vec![to(3)]),
            (3, vec![])
        ]
    );
    // 0, the default: 2f = 2 from the primary (the backups a prepare quorum needs).
    assert_eq!(
        relay_hops(0),
        vec![
            (0, vec![to(1), to(2)]),
            (1, vec![to(3)]),
            (2, vec![]),
            (3, vec![])
        ]
    );
    // 3f or more: the primary sends it to every backup, as PBFT's client would.
    assert_eq!(
        relay_hops(7),
        vec![
            (0, vec![to(1), to(2), to(3)]),
            (1, vec![]),
            (2, vec![]),
            (3, vec![])
        ]
    );
}

#[test]
fn a_holder_leaves_an_ask_unanswered_while_the_body_is_on_its_way() {
    // Backup 3 gets the PRE-PREPARE from the primary before the body backup 1 passes on,
    // and asks for it in its STATUS: answering at once put a second copy on the links the
    // fan-out spares. The primary answers once the body had time for its two hops behind
    // its other copy on its own link (a 100-byte body: one STATUS interval, plus one per
    // hop, plus the moment the copy ahead takes; the view-change timeout long enough not
    // to bound the wait), and then not while its answer may be crossing (two intervals).
    let mut cfg = config();
    cfg.view_change_timeout = Duration::from_secs(5);
    let mut p = replica(0, &cfg);
    drain(&mut p);
    let big = relayed(&cfg, 1, ReqAuth::Signed);
    p.handle_message(Time(1), &big);
    drain(&mut p);
    let (_, d) = big_batch_of(&big);
    let ask = from_replica(
        &cfg,
        3,
        &Message::Status(Status {
            missing_requests: vec![d],
            ..status_of(3, 0, true, 0, 0)
        }),
    );
    let i = cfg.status_interval;
    let answered: Vec<bool> = (0..6)
        .map(|k| {
            p.handle_message(Time(1) + k * i, &ask);
            outputs(drain(&mut p)).contains(&Out::Send(3, decode(&big)))
        })
        .collect();
    assert_eq!(answered, [false, false, false, false, true, false]);
}

#[test]
fn a_backup_behind_on_a_prepared_body_does_not_leave_the_view() {
    // Backup 3 holds the PRE-PREPARE of seq 1 and PREPAREs from backups 1 and 2, but not the
    // body (backup 1, busy executing, has not passed it on yet). The client's next request,
    // retransmitted to everyone, is timed here but cannot run before seq 1: the primary
    // ordered seq 1 and two others prepared it, so the timer waits instead of starting a
    // view change (simulator: slow-execution 1213).
    let cfg = config();
    let big = relayed(&cfg, 1, ReqAuth::Signed);
    let next = flagged_request(&cfg, CLIENT, 2, b"w", 0, ReqAuth::Signed);
    let behind = |prepared_by: &[u32]| {
        let mut b = replica(3, &cfg);
        drain(&mut b);
        let (batch, _) = big_batch_of(&big);
        let bd = batch_digest(&batch).unwrap();
        b.handle_message(
            Time(1),
            &from_replica(&cfg, 0, &pre_prepare_msg(0, 1, batch)),
        );
        for &j in prepared_by {
            b.handle_message(Time(1), &from_replica(&cfg, j, &prepare_msg(0, 1, bd, j)));
        }
        b.handle_message(Time(2), &next);
        drain(&mut b);
        let at = b
            .timers
            .get(TimerKind::ViewChange)
            .expect("the request is timed");
        b.handle_timeout(at);
        drain(&mut b);
        (
            b.stats().view_changes,
            b.timers.is_set(TimerKind::ViewChange),
        )
    };
    assert_eq!(behind(&[1, 2]), (0, true), "prepared by 2f others: waits");
    // One PREPARE does not show the body exists at a correct replica: it leaves the view.
    assert_eq!(behind(&[1]), (1, false));
}

/// At 1 Mb/s a 100 KB body relayed to two backups needs 1.6 s of the primary's link; with a
/// 2 s view-change timeout the primary proposes it only once what is left needs at most
/// 1 s (the fifth STATUS tick, 750 ms: the frame is a little over 100 KB), so its PRE-PREPARE does not wait behind the bodies
/// past the clock tolerance (`uplink.rs`). A small request of another client that came
/// after it is proposed at once: holding every batch while bodies cross let clients that
/// kept sending bodies hold the primary for ever (simulator, `thin-links`).
#[test]
fn a_primary_holds_a_big_request_while_its_copies_cross_and_proposes_the_rest() {
    let mut cfg = config();
    cfg.link_rate_kbps = 1_000;
    cfg.view_change_timeout = Duration::from_secs(2);
    cfg.batch_window = 4;
    let other = CLIENT + 1;
    let mut p = replica_with(0, &cfg, [CLIENT, other]);
    drain(&mut p);
    let big = flagged_request(
        &cfg,
        CLIENT,
        1,
        &[b'w'; 100_000],
        FLAG_RELAY,
        ReqAuth::Signed,
    );
    p.handle_message(Time(1), &big);
    let relayed: Vec<Out> = outputs(drain(&mut p));
    assert_eq!(
        relayed,
        vec![Out::Send(1, decode(&big)), Out::Send(2, decode(&big))]
    );
    let small = client_request(&cfg, other, 1, b"w", false, ReqAuth::Signed);
    p.handle_message(Time(2), &small);
    assert_eq!(outputs(drain(&mut p)), proposal_of(small));
    let proposed: Vec<u32> = (1..=8u32)
        .filter(|&k| {
            p.handle_timeout(Time(1) + k * cfg.status_interval);
            outputs(drain(&mut p))
                .iter()
                .any(|o| matches!(o, Out::Broadcast(Message::PrePrepare(_))))
        })
        .collect();
    assert_eq!(proposed, [5]);
    assert_eq!(p.stats().pre_prepares_sent, 2);
}
