//! Retransmission (STATUS): batch bodies asked for and kept.

use super::*;

/// Batch bodies a slot waited for are no longer asked for once the slot is gone (simulator:
/// crash 45). Here a NEW-VIEW names a batch the replica lacks, then a state transfer to
/// checkpoint 4 overtakes that slot. STATUS asks for at most 64 digests; stale ones that
/// nobody sends any more used to crowd out the ones a live slot needed, for ever.
#[test]
fn missing_batch_of_a_collected_slot_is_not_asked_for() {
    let cfg = config();
    // Replicas 0, 1 and 3 run ahead to checkpoint 4; replica 2 is the one under test.
    let mut c = Cluster::new(cfg.clone());
    c.down[2] = true;
    for rid in 1..=5 {
        c.deliver_all(&request(&cfg, rid, b"w", false));
    }
    assert_eq!(c.r[0].last_stable(), 4);
    let ckpt4 = c.r[0].checkpoints.own[&4];

    let mut t = replica(2, &cfg);
    drain(&mut t);
    let ckpt0 = t.checkpoints.own[&0];
    let lost = Digest([9; 32]);
    let vcs: Vec<Vec<u8>> = [0, 1, 3]
        .into_iter()
        .map(|j| view_change_with(&cfg, 1, j, ckpt0, (j != 3).then_some(lost)))
        .collect();
    let nv = Message::NewView(NewView {
        view: 1,
        view_changes: vcs,
        min: 0,
        min_digest: ckpt0,
        picks: vec![lost],
    });
    t.handle_message(Time(1), &from_replica(&cfg, 1, &nv));
    // It moves to view 1 as in any view change (the view durable, then its own VIEW-CHANGE)
    // and installs the NEW-VIEW at once; it lacks the pick's body, so no PREPARE yet.
    assert_eq!(outputs(drain(&mut t)), moves_to_view_1(2, ckpt0, None));
    assert!(t.has_new_view() && t.view() == 1);
    t.send_status();
    assert_eq!(
        outputs(drain(&mut t)),
        vec![Out::Broadcast(Message::Status(Status {
            missing_batches: vec![lost],
            ..status_of(2, 1, true, 0, 0)
        }))]
    );

    // f+1 stable claims for checkpoint 4: it fetches the state from the others.
    let stable_claim = |j: ReplicaId| {
        let cp = Message::Checkpoint(Checkpoint {
            seq: 4,
            digest: ckpt4,
            replica: j,
            stable: true,
        });
        from_replica(&cfg, j, &cp)
    };
    t.handle_message(Time(2), &stable_claim(0));
    assert_eq!(drain(&mut t), vec![], "one claim of f+1");
    t.handle_message(Time(2), &stable_claim(1));
    assert!(t.is_fetching());
    // The partition digests first, from one replier (§2.4).
    let replier = t.fetch.as_ref().unwrap().replier;
    let what = FetchWhat::StateMeta { seq: 4 };
    let mut from_t = drain(&mut t);
    assert_eq!(
        outputs(from_t.clone()),
        vec![Out::Send(
            replier,
            Message::Fetch(Fetch { replica: 2, what })
        )]
    );
    let mut to_t: Vec<Arc<[u8]>> = Vec::new();
    for _ in 0..100 {
        for a in std::mem::take(&mut from_t) {
            if let Action::Send { to, bytes } = a {
                c.r[to as usize].handle_message(Time(3), &bytes);
                for b in drain(&mut c.r[to as usize]) {
                    if let Action::Send { to: 2, bytes } = b {
                        to_t.push(bytes);
                    }
                }
            }
        }
        for bytes in std::mem::take(&mut to_t) {
            t.handle_message(Time(3), &bytes);
        }
        from_t = drain(&mut t);
        if !t.is_fetching() {
            break;
        }
    }
    assert!(!t.is_fetching());
    assert_eq!((t.last_stable(), t.last_executed()), (4, 4));
    // Seq 1 is below the stable checkpoint: its body is never needed again.
    t.send_status();
    assert_eq!(
        outputs(drain(&mut t)),
        vec![Out::Broadcast(status_msg(2, 1, true, 4, 4))]
    );
}

/// A batch may name a big request that was already executed (a faulty primary proposes it
/// again; the copy runs as a no-op), after its body was garbage-collected. The body that peers
/// send back in answer to STATUS must be kept, not dropped by the reply-cache check, or the
/// batch never prepares (simulator: byzzfuzz 1583).
#[test]
fn executed_big_request_named_again_is_stored_when_it_arrives() {
    let cfg = config();
    let mut c = Cluster::new(cfg.clone());
    let big = request(&cfg, 1, &[b'w'; 100], false); // above the 64-byte SRT threshold
    let (batch, d) = big_batch_of(&big);
    c.deliver_all(&big);
    for rid in 2..=4 {
        c.deliver_all(&request(&cfg, rid, b"w", false));
    }
    let b = &mut c.r[1];
    assert_eq!((b.last_executed(), b.last_stable()), (4, 4));
    assert!(
        !b.requests.store.contains_key(&d),
        "executed, below the checkpoint: collected"
    );

    let bd = batch_digest(&batch).unwrap();
    let pp = pre_prepare_msg(0, 5, batch);
    b.handle_message(Time(1), &from_replica(&cfg, 0, &pp));
    assert_eq!(outputs(drain(b)), vec![], "no PREPARE without the body");
    b.send_status();
    assert_eq!(
        outputs(drain(b)),
        vec![Out::Broadcast(Message::Status(Status {
            missing_requests: vec![d],
            ..status_of(1, 0, true, 4, 4)
        }))]
    );

    // A peer relays the client's frame: it completes the batch. No reply (the client did not
    // ask); seq 5 is within the vote horizon its PREPARE at seq 1 recorded (1 + 8).
    b.handle_message(Time(2), &big);
    assert_eq!(outputs(drain(b)), prepare_vote(0, 5, bd, 1, None));
}

/// A body a peer keeps asking for (it is still crossing a slow link) is sent again only
/// once the copy sent may have crossed (a 100-byte body: two STATUS intervals) and after
/// a gap that doubles: two intervals, then four. Answering every ask filled 1 Mb/s links
/// with copies the receivers dropped as stale.
#[test]
fn a_body_asked_for_again_is_resent_after_a_doubling_gap() {
    let cfg = config();
    let mut r = replica(2, &cfg);
    drain(&mut r);
    let big = request(&cfg, 1, &[b'w'; 100], false);
    r.handle_message(Time(1), &big);
    drain(&mut r);
    let (_, d) = big_batch_of(&big);
    let ask = from_replica(
        &cfg,
        1,
        &Message::Status(Status {
            missing_requests: vec![d],
            ..status_of(1, 0, true, 0, 0)
        }),
    );
    let i = cfg.status_interval;
    let answered: Vec<bool> = [0, 1, 2, 3, 4, 5, 6, 7]
        .into_iter()
        .map(|k| {
            r.handle_message(Time(1) + k * i, &ask);
            outputs(drain(&mut r)).contains(&Out::Send(1, decode(&big)))
        })
        .collect();
    assert_eq!(
        answered,
        [true, false, true, false, true, false, false, false]
    );
}

/// Bodies queue behind each other on the holder's link: at 1 Mb/s a 60 KB body answered
/// behind two others of 60 KB is not sent again while they may be crossing (0.96 s) and
/// then it (five intervals of 150 ms: 1.71 s in all), so at the twelfth interval, where a
/// lone one would have been at the fifth (`uplink.rs`; at `slow-5` the primary sent a 1 MB
/// body 13 more times while it crossed).
#[test]
fn a_body_sent_behind_others_is_not_sent_again_while_they_cross() {
    let mut cfg = config();
    cfg.link_rate_kbps = 1_000;
    cfg.view_change_timeout = Duration::from_secs(30);
    cfg.op_bytes_max = 1 << 20;
    let mut r = replica(2, &cfg);
    drain(&mut r);
    let bodies: Vec<_> = (1..=3)
        .map(|c| request(&cfg, c, &vec![b'w'; 60_000], false))
        .collect();
    for b in &bodies {
        r.handle_message(Time(1), b);
    }
    drain(&mut r);
    let digests: Vec<_> = bodies.iter().map(|b| big_batch_of(b).1).collect();
    let ask = from_replica(
        &cfg,
        1,
        &Message::Status(Status {
            missing_requests: digests.clone(),
            ..status_of(1, 0, true, 0, 0)
        }),
    );
    let i = cfg.status_interval;
    let last = decode(&bodies[2]);
    let answered: Vec<u32> = (0..20u32)
        .filter(|&k| {
            r.handle_message(Time(1) + k * i, &ask);
            outputs(drain(&mut r)).contains(&Out::Send(1, last.clone()))
        })
        .collect();
    assert_eq!(answered, [0, 12]);
}

/// A peer whose STATUS shows no progress is resent the slots it lacks, again only after a
/// gap that doubles while it stays stuck (at 1 Mb/s the resends every 150 ms took the link
/// a stuck backup waited on).
#[test]
fn a_stuck_peer_is_resent_its_slots_after_a_doubling_gap() {
    let cfg = config();
    let mut p = replica(0, &cfg);
    drain(&mut p);
    let req = request(&cfg, 1, b"w", false);
    p.handle_message(Time(1), &req);
    drain(&mut p);
    let resend = Out::Send(1, pre_prepare_msg(0, 1, batch_of(req)));
    let i = cfg.status_interval;
    let resent_at = |p: &mut Replica<Counter>, k: u32, executed: Seq| {
        let st = from_replica(&cfg, 1, &status_msg(1, 0, true, 0, executed));
        p.handle_message(Time(1) + k * i, &st);
        outputs(drain(p)).contains(&resend)
    };
    // The first STATUS sets what it executed; each later one with the same shows it stuck.
    let stuck: Vec<bool> = (0..10).map(|k| resent_at(&mut p, k, 0)).collect();
    assert_eq!(
        stuck,
        [false, true, true, false, true, false, false, false, true, false]
    );
}

/// A batch body a peer keeps asking for, and the NEW-VIEW a peer behind the view keeps
/// lacking, are sent again only after doubling gaps (`answer_gap.rs`): at 1 Mb/s a backup
/// asking for 64 batches was sent 4,352 BATCH-DATA frames in 10 s, and 29 NEW-VIEWs.
#[test]
fn batches_and_new_views_asked_for_again_are_resent_after_doubling_gaps() {
    let mut c = Cluster::new(config());
    let req = request(&c.cfg, 1, b"w", false);
    c.deliver_all(&req);
    c.down[0] = true;
    c.deliver_all(&request(&c.cfg, 2, b"w", false));
    c.advance(Duration::from_secs(3));
    let p = &mut c.r[1];
    assert!(p.view() == 1 && p.has_new_view(), "replica 1 leads view 1");
    drain(p);
    let d = batch_digest(&batch_of(req)).expect("a well-formed batch");
    assert!(
        p.log.batches.contains_key(&d),
        "replica 1 holds the first batch"
    );
    let cfg = c.cfg.clone();
    // Replica 0 is back, still in view 0, and asks for the batch.
    let ask = from_replica(
        &cfg,
        0,
        &Message::Status(Status {
            missing_batches: vec![d],
            ..status_of(0, 0, true, 0, 0)
        }),
    );
    let i = cfg.status_interval;
    let start = c.now;
    let answered: Vec<(bool, bool)> = (0..8u32)
        .map(|k| {
            p.handle_message(start + k * i, &ask);
            let out = outputs(drain(p));
            (
                out.iter()
                    .any(|o| matches!(o, Out::Send(0, Message::BatchData(b)) if batch_digest(&b.batch) == Some(d))),
                out.iter()
                    .any(|o| matches!(o, Out::Send(0, Message::NewView(nv)) if nv.view == 1)),
            )
        })
        .collect();
    let gaps = [true, true, false, true, false, false, false, true];
    assert_eq!(answered, gaps.map(|g| (g, g)));
}
