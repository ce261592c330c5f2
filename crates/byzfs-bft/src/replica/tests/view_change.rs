//! View changes (§3): the timer, VIEW-CHANGE, NEW-VIEW and what they must carry.

use super::*;

#[test]
fn backup_forwards_request_and_times_out_into_view_change() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let req = request(&cfg, 1, b"w", false);
    b.handle_message(Time(0), &req);
    let out = drain(&mut b);
    assert_eq!(
        out,
        vec![Action::Send {
            to: 0,
            bytes: req.into()
        }]
    );
    let deadline = b.poll_timeout().unwrap();
    assert!(
        deadline <= Time(0) + Duration::from_millis(150),
        "status timer first"
    );
    // Run timers until the view-change timer fires; until then only STATUS goes out.
    let ckpt0 = b.checkpoints.own[&0];
    let idle = [Out::Broadcast(status_msg(1, 0, true, 0, 0))];
    let (now, out) = fire_timers_until(
        &mut b,
        Time(0) + Duration::from_secs(5),
        |b| b.view() > 0,
        &idle,
    );
    assert!(now >= Time(0) + cfg.view_change_timeout);
    // The signature, deferred on receipt (the MAC vouched), was checked before blaming the
    // primary.
    assert_eq!(b.stats().client_signatures_deferred, 1);
    assert_eq!(b.stats().client_signatures_verified, 1);
    // Its VIEW-CHANGE reports checkpoint 0 and nothing prepared (the primary never
    // pre-prepared the request). Replica 1, primary of view 1,
    // has only its own VIEW-CHANGE of the 2f+1 a NEW-VIEW needs.
    assert_eq!(out, moves_to_view_1(1, ckpt0, None));
    assert_eq!(b.view(), 1);
    assert!(!b.has_new_view());
}

#[test]
fn view_change_after_primary_crash_keeps_committed_requests() {
    let mut c = Cluster::new(config());
    for rid in 1..=3 {
        let req = request(&c.cfg, rid, b"w", false);
        c.deliver_all(&req);
    }
    c.down[0] = true;
    let req = request(&c.cfg, 4, b"w", false);
    c.deliver_all(&req);
    c.advance(Duration::from_secs(3));
    for i in 1..4 {
        assert_eq!(c.r[i].view(), 1, "replica {i}");
        assert!(c.r[i].has_new_view());
        assert_eq!(c.r[i].last_executed(), 4, "replica {i}");
        assert_eq!(c.r[i].service().count(), 4);
    }
}

/// Backups defer the signature of a big request their MAC vouches for (sent to every replica,
/// never forwarded). A new primary checks it before proposing what it holds: a badly signed
/// request is never ordered (a backup whose MAC failed could not authenticate it), and its
/// client is blacklisted.
#[test]
fn a_new_primary_proposes_a_deferred_request_only_if_its_signature_verifies() {
    let mut c = Cluster::new(config());
    c.down[0] = true;
    let big = [b'w'; 100];
    let bad = client_request(&c.cfg, CLIENT, 1, &big, false, ReqAuth::BadSignature);
    c.deliver_all(&bad);
    let good = client_request(&c.cfg, CLIENT, 2, &big, false, ReqAuth::Signed);
    c.deliver_all(&good);
    for i in 1..4 {
        assert_eq!(c.r[i].stats().client_signatures_deferred, 2, "replica {i}");
        assert_eq!(c.r[i].stats().client_signatures_verified, 0, "replica {i}");
    }
    c.advance(Duration::from_secs(12));
    for i in 1..4 {
        assert_eq!(c.r[i].view(), 1, "replica {i}");
        assert!(c.r[i].has_new_view());
        assert_eq!(c.r[i].service().count(), 1, "only the good request ran");
    }
    // The new primary checked both on installing the view; the bad one blacklisted the client.
    assert!(c.r[1].is_blacklisted(CLIENT));
    assert!(c.r[1].stats().client_signatures_verified >= 2);
}

#[test]
fn backups_follow_a_primary_that_gives_its_view_up_at_once() {
    // The view-0 primary restarts after a power cut (its proposals not vouched for) and
    // gives view 0 up. Its VIEW-CHANGE tells the backups that no one will propose in view 0
    // again: they move to view 1 without waiting for a request to time out.
    let mut c = Cluster::on_disks(config());
    c.write_all(1..=1, b"w");
    c.power_cut(0);
    for r in &c.r {
        assert_eq!((r.view(), r.has_new_view()), (1, true), "replica {}", r.me);
    }
    c.write_all(2..=2, b"w");
    assert!(c.r.iter().all(|r| r.last_executed() == 2));
}

#[test]
fn view_change_must_be_signed() {
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let vc = ViewChange {
        view: 1,
        replica: 2,
        last_stable: 0,
        checkpoints: vec![],
        prepared: vec![],
        pre_prepared: vec![],
    };
    // MAC-authenticated instead of signed: it must not be stored (it could not be forwarded).
    let keys = TestKeys::new(1, cfg.n()).replica(2, [CLIENT]);
    let bytes = encode(
        Envelope::new(Principal::Replica(2), 0),
        &Message::ViewChange(vc),
        Auth::Authenticator(&keys.to_replica),
    );
    b.handle_message(Time(1), &bytes);
    assert_eq!(drain(&mut b), dropped(DropReason::BadAuth));
}

/// The VIEW-CHANGE for `view` of `j` at checkpoint 0 (`ckpt0`, its only one), reporting `d`
/// prepared and pre-prepared at seq 1 in view 0 (P- and Q-info, §3.2), or nothing.
pub(super) fn view_change_msg(
    view: View,
    j: ReplicaId,
    ckpt0: Digest,
    d: Option<Digest>,
) -> Message {
    let prepared = d
        .map(|digest| PreparedEntry {
            seq: 1,
            view: 0,
            digest,
        })
        .into_iter()
        .collect();
    let pre_prepared = d
        .map(|digest| PrePreparedEntry {
            seq: 1,
            view: 0,
            digest,
        })
        .into_iter()
        .collect();
    Message::ViewChange(ViewChange {
        view,
        replica: j,
        last_stable: 0,
        checkpoints: vec![(0, ckpt0)],
        prepared,
        pre_prepared,
    })
}

/// What replica `j` outputs as it moves from view 0 to view 1 (§3.2): the new view, durable
/// before its signed [`view_change_msg`] (nothing prepared, or `d` at seq 1).
pub(super) fn moves_to_view_1(j: ReplicaId, ckpt0: Digest, d: Option<Digest>) -> Vec<Out> {
    vec![
        Out::Persist(PersistRecord::View(1)),
        Out::Broadcast(view_change_msg(1, j, ckpt0, d)),
    ]
}

/// [`view_change_msg`] as replica `j` signs it.
pub(super) fn view_change_with(
    cfg: &Config,
    view: View,
    j: ReplicaId,
    ckpt0: Digest,
    d: Option<Digest>,
) -> Vec<u8> {
    from_replica(cfg, j, &view_change_msg(view, j, ckpt0, d))
}

/// The primary runs the view-change timer too (simulator: byzzfuzz 823 and 1173, crash 45).
/// Its view cannot commit seq 1: backup 3 is faulty and silent, backup 2 prepared and then left
/// for view 1 alone, and backup 1 has nothing pending (in the simulator it had executed every
/// request in an earlier view). One VIEW-CHANGE for view 1 is below the `f+1` join rule, so
/// the second must come from the primary, the one correct replica that knows its view is
/// stuck; without it every correct replica waits for ever.
#[test]
fn primary_with_a_stuck_request_leaves_its_view() {
    // As in byzzfuzz 1173. (With tentative execution the three replicas that prepared would
    // answer the client tentatively: 2f+1 tentative replies complete the request.)
    let mut cfg = config();
    cfg.tentative_execution = false;
    let mut p = replica(0, &cfg);
    drain(&mut p);
    let req = request(&cfg, 1, b"w", false);
    p.handle_message(Time(1), &req);
    assert_eq!(outputs(drain(&mut p)), proposal_of(req.clone()));
    let d = batch_digest(&batch_of(req)).unwrap();
    p.handle_message(Time(2), &from_replica(&cfg, 1, &prepare_msg(0, 1, d, 1)));
    assert_eq!(drain(&mut p), vec![], "one PREPARE of 2f");
    // Prepared: P-info, then COMMIT; no tentative execution, so no reply.
    p.handle_message(Time(2), &from_replica(&cfg, 2, &prepare_msg(0, 1, d, 2)));
    assert_eq!(outputs(drain(&mut p)), commit_vote(0, 1, d, 0, vec![]));
    p.handle_message(Time(3), &from_replica(&cfg, 1, &commit_msg(0, 1, d, 1)));
    assert_eq!(drain(&mut p), vec![], "two COMMITs of 2f+1");
    let ckpt0 = p.checkpoints.own[&0];
    p.handle_message(Time(4), &view_change_with(&cfg, 1, 2, ckpt0, Some(d)));
    assert_eq!(drain(&mut p), vec![], "one VIEW-CHANGE of f+1");
    assert_eq!((p.view(), p.last_executed()), (0, 0));
    let idle = [Out::Broadcast(status_msg(0, 0, true, 0, 0))];
    let (now, out) = fire_timers_until(
        &mut p,
        Time(0) + Duration::from_secs(5),
        |p| p.view() > 0,
        &idle,
    );
    assert_eq!(p.view(), 1, "the primary gives up its stuck view");
    assert!(now <= Time(4) + cfg.view_change_timeout + Duration::from_millis(100));
    // Its VIEW-CHANGE carries the batch it prepared (P-info) and pre-prepared (Q-info): the
    // second of the f+1 that move the others on. Two of 2f+1 for view 1: no timer for the
    // NEW-VIEW yet, and replica 1, not it, builds the NEW-VIEW.
    assert_eq!(out, moves_to_view_1(0, ckpt0, Some(d)));
}

#[test]
fn a_new_view_contradicting_a_batch_accepted_in_its_view_before_a_restart_is_refused() {
    // A replica restarted in view 1 holds, from its durable votes, that it pre-prepared
    // batch `a` at seq 3 in view 1 (the NEW-VIEW it installed is gone). A second NEW-VIEW
    // for view 1 from an equivocating primary that picks another batch there must not be
    // installed; one that agrees, or that picks in another view, may be.
    use crate::replica::new_view::Decision;
    let cfg = config();
    let mut r = replica(2, &cfg);
    let (a, b) = (Digest::of(b"a"), Digest::of(b"b"));
    r.log.slots.entry(3).or_default().note_pre_prepared(a, 1);
    r.log.slots.entry(2).or_default().note_pre_prepared(b, 0);
    let dec = |picks: Vec<Digest>| Decision {
        min: 0,
        min_digest: Digest::of(b"ckpt"),
        picks,
    };
    let null = crate::batch::null_digest();
    assert_eq!(
        r.new_view_contradicts_promises(1, &dec(vec![a, null, null])),
        Some(3)
    );
    assert_eq!(
        r.new_view_contradicts_promises(1, &dec(vec![a, a, b])),
        Some(3)
    );
    assert_eq!(
        r.new_view_contradicts_promises(1, &dec(vec![b, null, a])),
        None
    );
    assert_eq!(
        r.new_view_contradicts_promises(1, &dec(vec![b, a])),
        None,
        "seq 3 not picked"
    );
    assert_eq!(
        r.new_view_contradicts_promises(2, &dec(vec![b, null, null])),
        None,
        "other view"
    );
    // Slots at or below the stable checkpoint are not decided by the NEW-VIEW.
    r.log.last_stable = 3;
    assert_eq!(
        r.new_view_contradicts_promises(1, &dec(vec![a, null, null])),
        None
    );
}

/// A backup whose driver reports the primary unreachable (its port refuses connections)
/// leaves the view `unreachable_primary_timeout` after the report, not the whole timeout;
/// a report about another backup changes nothing, a report made before the request
/// arrives applies from the request on, and the primary reachable again puts the timer
/// back where it stood (§3.1, "An unreachable primary").
#[test]
fn an_unreachable_primary_is_left_after_the_short_timeout() {
    let mut cfg = config();
    cfg.view_change_timeout = Duration::from_secs(5);
    cfg.unreachable_primary_timeout = Duration::from_millis(300);
    let ms = Duration::from_millis;
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let ckpt0 = b.checkpoints.own[&0];
    b.handle_message(Time(0), &request(&cfg, 1, b"w", false));
    drain(&mut b);
    let normal = b.timers.get(TimerKind::ViewChange).unwrap();
    assert!(normal >= Time(0) + Duration::from_secs(5), "{normal:?}");
    b.handle_reachability(Time(0) + ms(10), 2, false);
    assert_eq!(
        b.timers.get(TimerKind::ViewChange),
        Some(normal),
        "a backup"
    );
    let reported = Time(0) + ms(20);
    b.handle_reachability(reported, 0, false);
    assert_eq!(drain(&mut b), vec![]);
    assert_eq!(
        b.timers.get(TimerKind::ViewChange),
        Some(reported + ms(300))
    );
    let idle = [Out::Broadcast(status_msg(1, 0, true, 0, 0))];
    let (now, out) = fire_timers_until(&mut b, normal, |b| b.view() > 0, &idle);
    assert_eq!(now, reported + ms(300));
    assert_eq!(out, moves_to_view_1(1, ckpt0, None));

    // Reported first, then a request: the timer is armed short.
    let mut c = replica(2, &cfg);
    drain(&mut c);
    c.handle_reachability(Time(0), 0, false);
    c.handle_message(Time(0) + ms(50), &request(&cfg, 1, b"w", false));
    drain(&mut c);
    assert_eq!(c.timers.get(TimerKind::ViewChange), Some(Time(0) + ms(350)));
    // Reachable again before the short timer fires: the timer goes back to the whole
    // timeout of its arming, and a later arming is the whole timeout too.
    c.handle_reachability(Time(0) + ms(60), 0, true);
    let back = c.timers.get(TimerKind::ViewChange).unwrap();
    assert!(
        back >= Time(0) + ms(50) + Duration::from_secs(5),
        "{back:?}"
    );
    c.restart_vtimer();
    let at = c.timers.get(TimerKind::ViewChange).unwrap();
    assert!(at >= Time(0) + ms(60) + Duration::from_secs(5), "{at:?}");
    // A report about a backup coming back leaves a hastened timer alone.
    c.handle_reachability(Time(0) + ms(70), 0, false);
    assert_eq!(c.timers.get(TimerKind::ViewChange), Some(Time(0) + ms(370)));
    c.handle_reachability(Time(0) + ms(80), 3, true);
    assert_eq!(c.timers.get(TimerKind::ViewChange), Some(Time(0) + ms(370)));
    c.handle_reachability(Time(0) + ms(90), 0, true);
    assert_eq!(c.timers.get(TimerKind::ViewChange), Some(at));
}

/// With the links' rate stated (1 Mb/s: 125,000 bytes a second), a backup holding a 50 KB
/// body its client sent to every replica gives the primary, on top of the view-change
/// timeout, the time three copies of it take at that rate (the client's to the primary
/// and the primary's to the two backups of its fan-out): 1.2 s more
/// (`view_change.rs` `bodies_to_cross`). Unstated, nothing more.
#[test]
fn a_backups_timer_waits_for_the_bodies_waiting_here_at_the_stated_rate() {
    let armed = |kbps: u64| {
        let mut cfg = config();
        cfg.link_rate_kbps = kbps;
        let mut b = replica(1, &cfg);
        drain(&mut b);
        let big = request(&cfg, 1, &[b'w'; 50_000], false);
        b.handle_message(Time(0), &big);
        drain(&mut b);
        let at = b
            .timers
            .get(TimerKind::ViewChange)
            .expect("the request is timed");
        (big.len() as u64, at.as_micros())
    };
    let (len, unstated) = armed(0);
    let (_, stated) = armed(1_000);
    assert_eq!(stated - unstated, 3 * len * 1_000_000 / 125_000);
    assert!(stated - unstated > 1_200_000);
}
