//! Faulty clients (§1.14, §5.3): MACs, signatures and blacklisting.

use super::*;

/// The view-0 primary's PRE-PREPARE of `req` alone at seq 1, and its digest.
fn pre_prepare_of(req: Vec<u8>) -> (Message, Digest) {
    let batch = batch_of(req);
    let d = batch_digest(&batch).unwrap();
    let pp = pre_prepare_msg(0, 1, batch);
    (pp, d)
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
    assert_eq!(outputs(drain(&mut p)), proposal_of(req.clone()));
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
    let (pp, d) = pre_prepare_of(req);
    for j in 1..4 {
        let mut b = replica(j, &cfg);
        drain(&mut b);
        b.handle_message(Time(1), &from_replica(&cfg, 0, &pp));
        assert_eq!(
            outputs(drain(&mut b)),
            prepare_vote(0, 1, d, j, Some(1 + cfg.log_window)),
            "backup {j}"
        );
        assert_eq!(b.stats().client_signatures_verified, 1);
    }
    // A correct backup whose MAC verifies does not pay for the signature.
    let (pp, d) = pre_prepare_of(request(&cfg, 2, b"w", false));
    let mut b = replica(1, &cfg);
    drain(&mut b);
    b.handle_message(Time(1), &from_replica(&cfg, 0, &pp));
    assert_eq!(
        outputs(drain(&mut b)),
        prepare_vote(0, 1, d, 1, Some(1 + cfg.log_window))
    );
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
    assert_eq!(drain(&mut p), dropped(DropReason::BadAuth));
    assert!(p.is_blacklisted(CLIENT));
    assert_eq!(p.stats().clients_blacklisted, 1);
    // A backup gets a small request only as a retransmission, which it forwards: it checks
    // the signature first, so a badly signed flood stops at the first frame (`bench attack`,
    // bad-signatures). Dropped, not forwarded, not timed; the client blacklisted.
    let mut s = replica(1, &cfg);
    drain(&mut s);
    s.handle_message(Time(1), &bad);
    assert_eq!(drain(&mut s), dropped(DropReason::BadAuth));
    assert!(!s.timers.is_set(TimerKind::ViewChange));
    assert!(s.is_blacklisted(CLIENT));
    assert_eq!(s.stats().client_signatures_verified, 1);
    // A big request (sent to every replica, never forwarded): the MAC vouches for it and the
    // signature check is deferred; the request is stored and timed. When the timer fires,
    // the signature is checked before the primary is blamed: no view change (it would frame
    // the primary), the request is forgotten and the client blacklisted.
    let bad = client_request(&cfg, CLIENT, 1, &[b'w'; 100], false, ReqAuth::BadSignature);
    let mut b = replica(1, &cfg);
    drain(&mut b);
    b.handle_message(Time(1), &bad);
    assert_eq!(drain(&mut b), vec![]);
    assert!(b.timers.is_set(TimerKind::ViewChange));
    assert_eq!(b.stats().client_signatures_deferred, 1);
    assert_eq!(b.stats().client_signatures_verified, 0);
    // Only STATUS goes out meanwhile; the step in which the timer fires sends nothing.
    let fire = Time(1) + cfg.view_change_timeout + Duration::from_secs(1);
    let idle = [Out::Broadcast(status_msg(1, 0, true, 0, 0))];
    let vc_timer_off = |b: &Replica<Counter>| !b.timers.is_set(TimerKind::ViewChange);
    let (_, out) = fire_timers_until(&mut b, fire, vc_timer_off, &idle);
    assert_eq!(out, vec![], "no VIEW-CHANGE");
    assert!(!b.timers.is_set(TimerKind::ViewChange));
    // Nor later: nothing pending, the timer is not armed again.
    let (_, out) = fire_timers_until(&mut b, fire, |_| false, &idle);
    assert_eq!(out, idle);
    assert_eq!(b.view(), 0);
    assert!(b.is_blacklisted(CLIENT));
    assert_eq!(b.stats().client_signatures_verified, 1);
    // Blacklisted, the client's MAC no longer vouches for anything: a read-only request needs
    // its signature, and an inlined request with a bad signature is held (§1.14).
    b.handle_message(
        Time(2),
        &client_request(&cfg, CLIENT, 5, b"r", true, ReqAuth::BadSignature),
    );
    assert_eq!(drain(&mut b), dropped(DropReason::BadAuth));
    b.handle_message(
        Time(2),
        &from_replica(&cfg, 0, &pre_prepare_of(bad.clone()).0),
    );
    assert_eq!(drain(&mut b), vec![], "held until f PREPAREs vouch for it");
    // Its validly signed requests are still processed: another replica may have forwarded
    // them, and dropping them would let the client frame a primary that blacklisted it.
    let good = request(&cfg, 2, b"w", false);
    p.handle_message(Time(3), &good);
    assert_eq!(outputs(drain(&mut p)), proposal_of(good));
    // A bad MAC over a bad signature proves nothing about the client: no blacklisting.
    let mut q = replica(2, &cfg);
    drain(&mut q);
    let mut spoiled = bad.clone();
    let at = spoiled.len() - 2 * crate::crypto::MAC_LEN; // replica 2's entry of 4
    spoiled[at] ^= 1;
    q.handle_message(Time(1), &spoiled);
    assert_eq!(drain(&mut q), dropped(DropReason::BadAuth));
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
    assert_eq!(drain(&mut p), dropped(DropReason::BadAuth));
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
    assert_eq!(drain(&mut p), dropped(DropReason::BadAuth));
    let mac_only = client_request(&cfg, other, 1, b"w", false, ReqAuth::MacOnly);
    p.handle_message(Time(3), &mac_only);
    assert_eq!(outputs(drain(&mut p)), proposal_of(mac_only));
    // Installed with its key, it must sign.
    p.add_client(other, to_c, from_c, Some(rk.client_public[&other]));
    p.handle_message(
        Time(4),
        &client_request(&cfg, other, 2, b"w", false, ReqAuth::MacOnly),
    );
    assert_eq!(drain(&mut p), dropped(DropReason::BadAuth));
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
        acked: 0,
        after: 0,
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
    assert_eq!(drain(&mut p), dropped(DropReason::BadAuth));
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
    let (out, bd) = body_after_pre_prepare(&cfg, &big);
    assert_eq!(out, prepare_vote(0, 1, bd, 1, Some(1 + cfg.log_window)));
}

#[test]
fn superseded_big_body_named_by_a_batch_is_still_taken() {
    // Seq 1 runs rid 2; seq 2 (ordered before seq 1 executed) names the body of the older big
    // rid 1. The reply cache says rid 1 is stale, but without the body seq 2 can neither
    // prepare nor execute: refusing it stalled this replica forever (found by the simulator).
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let b1 = batch_of(request(&cfg, 2, b"w", false));
    order_in_view_0(&cfg, &mut b, Time(1), 1, b1, true);
    drain(&mut b);
    assert_eq!(b.last_executed(), 1);
    let big = request(&cfg, 1, &[b'w'; 100], false);
    let (b2, _) = big_batch_of(&big);
    let d2 = batch_digest(&b2).unwrap();
    b.handle_message(Time(4), &from_replica(&cfg, 0, &pre_prepare_msg(0, 2, b2)));
    assert_eq!(
        outputs(drain(&mut b)),
        vec![],
        "no PREPARE without the body"
    );
    // The body alone: no reply (rid 1 is superseded) and no forwarding; seq 2 is within the
    // vote horizon its PREPARE at seq 1 recorded.
    b.handle_message(Time(5), &big);
    assert_eq!(outputs(drain(&mut b)), prepare_vote(0, 2, d2, 1, None));
    // A stale request no batch needs is still refused.
    b.handle_message(Time(6), &request(&cfg, 1, &[b'v'; 100], false));
    assert_eq!(drain(&mut b), dropped(DropReason::Stale));
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
    // The first STATUS tick notes it late, the second forwards the client's own frame (its
    // authenticator covers the primary) before its STATUS, the third does not again.
    let status = Out::Broadcast(status_msg(1, 0, true, 0, 0));
    let tick = |b: &mut Replica<Counter>, k: u32| {
        b.handle_timeout(Time(0) + k * cfg.status_interval);
        drain(b)
    };
    assert_eq!(outputs(tick(&mut b, 1)), vec![status.clone()]);
    let out = tick(&mut b, 2);
    assert_eq!(
        out[0],
        Action::Send {
            to: 0,
            bytes: big.clone().into()
        }
    );
    assert_eq!(
        outputs(out),
        vec![Out::Send(0, decode(&big)), status.clone()]
    );
    assert_eq!(outputs(tick(&mut b, 3)), vec![status]);
}

/// With the links' rate stated, a backup forwards the body only once it has been late for
/// half a view-change timeout (500 ms here: the first STATUS tick, at 150 ms, finds it
/// late; the first tick 500 ms after that, at 750 ms, forwards it): a primary holds a big
/// request while its relayed copies cross, and every backup holding the body would send it
/// (`status.rs` `forward_late_big_requests`).
#[test]
fn with_the_rate_stated_a_late_big_request_is_forwarded_after_half_the_timeout() {
    let mut cfg = config();
    cfg.link_rate_kbps = 1_000;
    cfg.view_change_timeout = Duration::from_secs(1);
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let big = request(&cfg, 1, &[b'w'; 100], false);
    b.handle_message(Time(0), &big);
    drain(&mut b);
    let forwarded: Vec<u32> = (1..=8u32)
        .filter(|&k| {
            b.handle_timeout(Time(0) + k * cfg.status_interval);
            outputs(drain(&mut b)).contains(&Out::Send(0, decode(&big)))
        })
        .collect();
    assert_eq!(forwarded, [5]);
}
