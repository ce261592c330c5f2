//! Several requests in flight per client (docs/PROTOCOL.md §1.6): the execution rule, the reply
//! cache per request and the window bound.

use super::*;

/// A correct client's request `rid` that follows `after` and acknowledges `acked`.
fn windowed(cfg: &Config, rid: u64, acked: u64, after: u64) -> Vec<u8> {
    let keys = TestKeys::new(1, cfg.n()).client(CLIENT);
    let body = encode_body(&Message::Request(Request {
        client: CLIENT,
        rid,
        acked,
        after,
        op: b"w".to_vec(),
    }));
    let env = Envelope {
        sender: Principal::Client(CLIENT),
        epoch: 0,
        flags: 0,
        replier: REPLIER_ALL,
    };
    let sk = keys.signing.clone().unwrap();
    encode_with_body(
        env,
        Tag::Request,
        &body,
        Digest::of(&body),
        Auth::SignedAuthenticator(&sk, &keys.to_replica),
    )
}

fn batch(requests: Vec<Vec<u8>>) -> BatchBody {
    BatchBody {
        requests,
        big: vec![],
        nondet: vec![1],
    }
}

/// The replies backup 1 sends while ordering a batch in view 0 with tentative execution.
fn replies(cfg: &Config, b: &mut Replica<Counter>, seq: Seq, requests: Vec<Vec<u8>>) -> Vec<Out> {
    order_in_view_0(cfg, b, Time(seq), seq, batch(requests), true);
    outputs(drain(b))
        .into_iter()
        .filter(|o| matches!(o, Out::Client(..)))
        .collect()
}

#[test]
fn a_request_ordered_before_the_one_it_follows_waits_for_its_retransmission() {
    // Request 2 reached the primary first (request 1 was lost and retransmitted): in one
    // batch [2, 1], 1 runs and 2 is skipped at every replica alike; the client's
    // retransmission of 2 runs in the next batch. The counter's result is its new value.
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let (r1, r2) = (windowed(&cfg, 1, 0, 0), windowed(&cfg, 2, 0, 1));
    assert_eq!(
        replies(&cfg, &mut b, 1, vec![r2.clone(), r1]),
        vec![reply_out(0, 1, 1, 1, true)]
    );
    assert_eq!(b.stats().requests_out_of_order, 1);
    assert_eq!(b.stats().requests_executed, 1);
    assert_eq!(
        replies(&cfg, &mut b, 2, vec![r2]),
        vec![reply_out(0, 1, 2, 2, true)]
    );
    assert_eq!(b.stats().requests_out_of_order, 1);
}

#[test]
fn the_reply_cache_keeps_every_result_the_client_may_still_wait_for() {
    // Requests 1 and 2 run in one batch; the client retransmits 1 (its replies were lost):
    // answered from the cache, committed. Request 3 acknowledges both: their results are
    // dropped, and an old copy of 1 is refused as stale.
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let r1 = windowed(&cfg, 1, 0, 0);
    assert_eq!(
        replies(&cfg, &mut b, 1, vec![r1.clone(), windowed(&cfg, 2, 0, 1)]),
        vec![reply_out(0, 1, 1, 1, true), reply_out(0, 1, 2, 2, true)]
    );
    assert_eq!(b.cached_results(CLIENT), 2);
    b.handle_message(Time(5), &r1);
    assert_eq!(outputs(drain(&mut b)), vec![reply_out(0, 1, 1, 1, false)]);
    assert_eq!(
        replies(&cfg, &mut b, 2, vec![windowed(&cfg, 3, 2, 0)]),
        vec![reply_out(0, 1, 3, 3, true)]
    );
    assert_eq!(b.cached_results(CLIENT), 1);
    b.handle_message(Time(6), &r1);
    assert_eq!(drain(&mut b), dropped(DropReason::Stale));
}

#[test]
fn a_request_beyond_the_window_is_refused_on_receipt_and_skipped_in_a_batch() {
    // rid - acked > client_window would let the cache grow without bound; a request whose
    // `acked` or `after` is not below its id is malformed.
    let cfg = config();
    let w = cfg.client_window;
    let too_far = windowed(&cfg, w + 1, 0, 0);
    for bad in [
        too_far.clone(),
        windowed(&cfg, 3, 3, 0),
        windowed(&cfg, 3, 2, 3),
    ] {
        let mut b = replica(1, &cfg);
        drain(&mut b);
        b.handle_message(Time(1), &bad);
        assert_eq!(drain(&mut b), dropped(DropReason::Invalid));
    }
    // A faulty primary proposes it anyway: it does not run (no reply), at any replica.
    let mut b = replica(1, &cfg);
    drain(&mut b);
    assert_eq!(
        replies(&cfg, &mut b, 1, vec![too_far, windowed(&cfg, w, 0, 0)]),
        vec![reply_out(0, 1, w, 1, true)]
    );
    assert_eq!(b.stats().requests_executed, 1);
}

#[test]
fn a_request_is_timed_only_once_the_one_it_follows_has_run() {
    // Request 2 follows request 1, which this backup has not seen: it is stored and
    // forwarded, but no view-change timer runs for it (a faulty client's request that
    // follows one it never sends would otherwise frame every primary). Once 1 runs (in a
    // batch), 2 can run, and its timer starts.
    let cfg = config();
    let mut b = replica(1, &cfg);
    drain(&mut b);
    b.handle_message(Time(1), &windowed(&cfg, 2, 1, 1));
    drain(&mut b);
    assert!(!b.timers.is_set(TimerKind::ViewChange));
    assert!(b.requests.pending.is_empty());
    replies(&cfg, &mut b, 1, vec![windowed(&cfg, 1, 0, 0)]);
    assert!(b.timers.is_set(TimerKind::ViewChange));
    assert_eq!(
        b.requests.pending.get(&CLIENT).map(|&(rid, _)| rid),
        Some(2)
    );
}

#[test]
fn a_client_gets_two_windows_of_requests_that_cannot_run_then_is_refused() {
    // Each request follows an id the client never sends: none can ever run. The store takes
    // two windows of them, then refuses the client (counted), and still takes a request of
    // that client that can run.
    let cfg = config();
    let w = cfg.client_window;
    let mut b = replica(1, &cfg);
    drain(&mut b);
    for k in 1..=2 * w {
        let rid = 2 * k;
        b.handle_message(Time(k), &windowed(&cfg, rid, rid - 1, rid - 1));
        drain(&mut b);
    }
    assert_eq!(b.stored_requests(CLIENT), 2 * w as usize);
    let rid = 2 * (2 * w + 1);
    b.handle_message(Time(100), &windowed(&cfg, rid, rid - 1, rid - 1));
    assert_eq!(drain(&mut b), dropped(DropReason::ClientQuota));
    b.handle_message(Time(101), &windowed(&cfg, rid + 1, rid, 0));
    drain(&mut b);
    assert_eq!(b.requests.store.len(), 2 * w as usize + 1);
    assert_eq!(b.stats().dropped.get(&DropReason::ClientQuota), Some(&1));
}
