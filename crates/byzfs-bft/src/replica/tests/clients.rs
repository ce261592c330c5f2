//! Faulty clients (§1.14, §5.3): MACs, signatures and blacklisting.

use super::*;

pub(super) fn pre_prepare_of(requests: Vec<Vec<u8>>) -> Message {
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

pub(super) fn prepares(out: &[Action]) -> usize {
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
