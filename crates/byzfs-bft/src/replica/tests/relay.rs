//! A big body the client sent to the primary alone (`FLAG_RELAY`, docs/PROTOCOL.md §1.10 "each
//! body once"): the primary relays it to every backup ahead of its PRE-PREPARE, once; a
//! backup neither passes on nor waits on a relayed copy (it keeps the client's flag) until
//! the client's own copy comes by its retransmission.

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
    // The client's own frame, byte for byte: its authenticator covers every backup.
    assert_eq!(
        out[0],
        Action::Broadcast {
            bytes: big.clone().into()
        }
    );
    let mut expected = vec![Out::Broadcast(decode(&big))];
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
    // the primary): the two look alike. Neither is passed on (every relayed copy would go
    // back to the primary: `bench bandwidth` measured 6 bodies between sites instead of 3)
    // nor waited on: it may cross a slow link ahead of the bodies relayed after it and of
    // the PRE-PREPARE naming them all, and timed from its arrival it voted out every
    // primary at 5 Mb/s (ARCHITECTURE.md Deviation 33).
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    b.handle_message(Time(1), &relayed(&cfg, 1, ReqAuth::Signed));
    assert_eq!(outputs(drain(&mut b)), vec![]);
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
