use super::*;
use crate::crypto::{TestKeys, MAC_LEN, SIG_LEN};
use crate::ids::ClientId;
use crate::responsive::PROBE_MIN_US;
use crate::wire::{Auth, Envelope};
use core::time::Duration;

const C: ClientId = 7;
const KEY_SEED: u64 = 11;

struct Harness {
    config: Config,
    keys: TestKeys,
    client: Client,
}

impl Harness {
    fn new(f: u32) -> Harness {
        Harness::with_seed(f, 1)
    }

    fn with_seed(f: u32, seed: u64) -> Harness {
        let config = Config::new(f);
        let keys = TestKeys::new(KEY_SEED, config.n());
        let client = Client::new(config.clone(), keys.client(C), seed);
        Harness {
            config,
            keys,
            client,
        }
    }

    fn n(&self) -> u32 {
        self.config.n() as u32
    }

    /// A REPLY frame from replica `j`, MAC'd with `j`'s key for client `C`.
    fn frame(&self, j: ReplicaId, reply: &Reply) -> Vec<u8> {
        let rk = self.keys.replica(j, [C]);
        wire::encode(
            Envelope::new(Principal::Replica(j), self.config.epoch),
            &Message::Reply(reply.clone()),
            Auth::Mac(&rk.clients[&C].0),
        )
    }

    fn deliver(&mut self, j: ReplicaId, reply: &Reply) {
        let bytes = self.frame(j, reply);
        self.client.handle_message(Time::ZERO, &bytes);
    }

    fn actions(&mut self) -> Vec<ClientAction> {
        std::iter::from_fn(|| self.client.poll_action()).collect()
    }

    fn completed(&mut self) -> Option<(RequestId, Vec<u8>)> {
        let mut done = None;
        for a in self.actions() {
            if let ClientAction::Completed { rid, result } = a {
                assert!(done.is_none(), "completed twice");
                done = Some((rid, result));
            }
        }
        done
    }

    /// Invokes and returns the first transmission's frames, by destination.
    fn invoke_sends(&mut self, op: &[u8], read_only: bool) -> (RequestId, Vec<Sent>) {
        let rid = self
            .client
            .invoke(Time::ZERO, op.to_vec(), read_only)
            .unwrap();
        let sent = self
            .actions()
            .into_iter()
            .map(|a| match a {
                ClientAction::Send { to, bytes } => (to, bytes),
                other => panic!("expected sends, got {other:?}"),
            })
            .collect();
        (rid, sent)
    }

    /// Invokes a read sent to every replica and returns its one frame.
    fn invoke_sends_broadcast(&mut self, op: &[u8]) -> (RequestId, Arc<[u8]>) {
        let rid = self.client.invoke(Time::ZERO, op.to_vec(), true).unwrap();
        match self.actions().as_slice() {
            [ClientAction::Broadcast { bytes }] => (rid, bytes.clone()),
            other => panic!("expected one broadcast, got {other:?}"),
        }
    }

    /// Completes one read-write request with replies of `view`, so that the client
    /// knows the view (a fresh client broadcasts).
    fn learn_view(&mut self, view: View) {
        let rid = self.invoke(b"learn", false);
        for j in 0..=2 * self.config.f as ReplicaId {
            self.deliver(j, &reply(j, rid, view, true, b"ok", true));
        }
        assert!(self.completed().is_some(), "learn_view");
        assert!(self.client.view_known);
    }

    /// Invokes and drains the first transmission.
    fn invoke(&mut self, op: &[u8], read_only: bool) -> RequestId {
        let rid = self
            .client
            .invoke(Time::ZERO, op.to_vec(), read_only)
            .unwrap();
        self.actions();
        rid
    }

    /// Fires the retransmission timer and returns the one frame broadcast.
    fn retransmit(&mut self) -> (Time, Arc<[u8]>) {
        let at = self.client.poll_timeout().expect("armed");
        self.client.handle_timeout(at);
        match self.actions().as_slice() {
            [ClientAction::Broadcast { bytes }] => (at, bytes.clone()),
            other => panic!("expected one broadcast, got {other:?}"),
        }
    }
}

/// A frame sent to one replica.
type Sent = (ReplicaId, Arc<[u8]>);

fn reply(
    j: ReplicaId,
    rid: RequestId,
    view: View,
    tentative: bool,
    result: &[u8],
    full: bool,
) -> Reply {
    Reply {
        view,
        rid,
        client: C,
        replica: j,
        tentative,
        result_digest: Digest::of(result),
        result: full.then(|| result.to_vec()),
    }
}

fn body(bytes: &[u8]) -> &[u8] {
    let f = Frame::parse(bytes, 1 << 24).unwrap();
    f.body
}

fn header(bytes: &[u8]) -> wire::Header {
    Frame::parse(bytes, 1 << 24).unwrap().header
}

fn only_frame(actions: &[ClientAction]) -> Arc<[u8]> {
    match actions {
        [ClientAction::Send { bytes, .. }] | [ClientAction::Broadcast { bytes }] => bytes.clone(),
        other => panic!("expected one frame, got {other:?}"),
    }
}

#[test]
fn first_send_read_write_goes_to_primary_only_once_the_view_is_known() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        h.learn_view(0);
        h.client.invoke(Time::ZERO, b"w".to_vec(), false).unwrap();
        match h.actions().as_slice() {
            [ClientAction::Send { to: 0, .. }] => {}
            other => panic!("f={f}: {other:?}"),
        }
    }
}

/// A fresh client does not know the primary: the view-0 primary may be down. Its
/// read-write requests go to everyone until one completes and shows the view.
#[test]
fn a_fresh_client_broadcasts_read_write_requests_until_one_completes() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let rid = h.client.invoke(Time::ZERO, b"w".to_vec(), false).unwrap();
        let a = h.actions();
        assert!(
            matches!(a.as_slice(), [ClientAction::Broadcast { .. }]),
            "f={f}: {a:?}"
        );
        // Completed in view 1 by 2f+1 tentative replies: the next goes to replica 1 only.
        for j in 0..=2 * f {
            h.deliver(j, &reply(j, rid, 1, true, b"ok", true));
        }
        assert!(h.completed().is_some());
        h.client.invoke(Time::ZERO, b"w2".to_vec(), false).unwrap();
        match h.actions().as_slice() {
            [ClientAction::Send { to: 1, .. }] => {}
            other => panic!("f={f}: {other:?}"),
        }
    }
}

/// A big request that took 640 ms teaches the client to wait twice as long before it
/// retransmits the next of its size (and its body) to everyone; a small request waits
/// `client_retransmit` after the bytes sent before it crossed (`retransmit_timeout.rs`).
#[test]
fn a_big_request_waits_twice_as_long_as_the_last_of_its_size_took() {
    let mut h = Harness::new(1);
    h.learn_view(0);
    let op = vec![b'w'; 64 << 10];
    let rid = h.invoke(&op, false);
    let took = Time::from_micros(640_000);
    for j in 0..3 {
        let bytes = h.frame(j, &reply(j, rid, 0, true, b"ok", true));
        h.client.handle_message(took, &bytes);
    }
    assert!(h.completed().is_some());
    // The body is 65 KiB with its header fields: 640,000 / 65 = 9,846 µs a KiB.
    h.client.invoke(took, op, false).unwrap();
    h.actions();
    let big_at = Time::from_micros(640_000 + 2 * 9_846 * 65);
    assert_eq!(h.client.poll_timeout(), Some(big_at));
    h.client.invoke(took, b"small".to_vec(), false).unwrap();
    h.actions();
    // A small one sent behind it waits for its bytes to cross too, then its own timeout.
    let small_at = Time::from_micros(640_000 + 9_846 * 65 + micros(h.config.client_retransmit));
    assert_eq!(h.client.poll_timeout(), Some(small_at));
}

/// A big read-write request goes once, to the primary, flagged for it to relay
/// (docs/PROTOCOL.md §1.10 "each body once"); its retransmission goes to everyone, the same
/// body unflagged. A read-only one, or any while the view is unknown or relaying is off,
/// goes to everyone from the start.
#[test]
fn a_big_request_goes_to_the_primary_alone_until_it_is_retransmitted() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        h.learn_view(1);
        let big = vec![9u8; h.config.big_request_threshold + 1];
        let (_, sent) = h.invoke_sends(&big, false);
        let [(1, first)] = sent.as_slice() else {
            panic!("f={f}: {sent:?}");
        };
        assert_eq!(header(first).flags, FLAG_RELAY);
        let (_, again) = h.retransmit();
        assert_eq!(header(&again).flags, 0);
        assert_eq!(body(&again), body(first));
        assert_eq!(header(&again).body_digest, header(first).body_digest);
        // Later retransmissions stay unflagged.
        let (_, third) = h.retransmit();
        assert_eq!(header(&third).flags, 0);

        let mut off = Harness::new(f);
        off.client.config.relay_big_requests = false;
        off.learn_view(1);
        off.client.invoke(Time::ZERO, big.clone(), false).unwrap();
        let a = off.actions();
        assert!(
            matches!(a.as_slice(), [ClientAction::Broadcast { .. }]),
            "f={f}: {a:?}"
        );
        assert_eq!(header(&only_frame(&a)).flags, 0);

        let mut ro = Harness::new(f);
        ro.learn_view(1);
        ro.client.config.read_only_to_quorum = false;
        let mut op = big.clone();
        op[0] = b'r';
        ro.client.invoke(Time::ZERO, op, true).unwrap();
        let a = ro.actions();
        assert!(
            matches!(a.as_slice(), [ClientAction::Broadcast { .. }]),
            "f={f}: {a:?}"
        );
        assert_eq!(header(&only_frame(&a)).flags, FLAG_READ_ONLY);
    }
}

#[test]
fn first_send_read_only_or_big_is_broadcast() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        h.client.config.read_only_to_quorum = false;
        h.client.invoke(Time::ZERO, b"r".to_vec(), true).unwrap();
        let a = h.actions();
        assert!(
            matches!(a.as_slice(), [ClientAction::Broadcast { .. }]),
            "{a:?}"
        );
        assert_eq!(
            header(&only_frame(&a)).flags & FLAG_READ_ONLY,
            FLAG_READ_ONLY
        );

        let mut h = Harness::new(f);
        let big = vec![9u8; h.config.big_request_threshold + 1];
        h.client.invoke(Time::ZERO, big, false).unwrap();
        let a = h.actions();
        assert!(
            matches!(a.as_slice(), [ClientAction::Broadcast { .. }]),
            "{a:?}"
        );
        assert_eq!(header(&only_frame(&a)).flags & FLAG_READ_ONLY, 0);

        let mut h = Harness::new(f);
        h.learn_view(0);
        let small = vec![9u8; h.config.big_request_threshold];
        h.client.invoke(Time::ZERO, small, false).unwrap();
        assert!(matches!(
            h.actions().as_slice(),
            [ClientAction::Send { to: 0, .. }]
        ));
    }
}

/// With `read_only_to_quorum`, a read goes to `2f+1` replicas, the
/// designated replier among them and the primary left out unless it is the replier; the
/// other `f` get the same frame when the hedge fires; a retransmission goes to everyone.
#[test]
fn read_only_goes_to_2f_plus_1_and_the_others_only_when_replies_are_late() {
    for f in [1, 2] {
        for seed in 0..20 {
            let mut h = Harness::with_seed(f, seed);
            h.client.config.read_only_to_quorum = true;
            let (rid, sent) = h.invoke_sends(b"r", true);
            assert_eq!(sent.len(), 2 * f as usize + 1, "f={f} seed={seed}");
            let replier = header(&sent[0].1).replier as ReplicaId;
            let to: Vec<ReplicaId> = sent.iter().map(|(t, _)| *t).collect();
            assert!(to.contains(&replier), "the replier is asked: {to:?}");
            assert_eq!(to.contains(&0), replier == 0, "primary left out: {to:?}");
            assert!(sent.iter().all(|(_, b)| b == &sent[0].1), "one frame");
            // The hedge: before the retransmission, the same frame to the others.
            let hedge = h.client.poll_timeout().unwrap();
            h.client.handle_timeout(hedge);
            let late: Vec<ReplicaId> = h
                .actions()
                .iter()
                .map(|a| match a {
                    ClientAction::Send { to, bytes } if bytes == &sent[0].1 => *to,
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(late.len(), f as usize);
            assert!(late.iter().all(|r| !to.contains(r)));
            assert_eq!(h.client.stats().read_only_hedged, 1);
            // Then the retransmission, to everyone.
            let (_, again) = h.retransmit();
            assert_eq!(header(&again).flags & FLAG_READ_ONLY, FLAG_READ_ONLY);
            // 2f+1 matching read-only replies complete it.
            for &j in &to {
                let full = j == replier;
                h.deliver(j, &reply(j, rid, 0, true, b"v", full));
            }
            assert_eq!(h.completed(), Some((rid, b"v".to_vec())));
        }
    }
}

/// Replies in time: no hedge, and the hedge delay follows the measured read latency.
#[test]
fn a_read_answered_in_time_sends_nothing_more() {
    let mut h = Harness::new(1);
    h.client.config.read_only_to_quorum = true;
    let (rid, frames) = h.invoke_sends(b"r", true);
    let sent: Vec<ReplicaId> = frames.iter().map(|(t, _)| *t).collect();
    let replier = header(&frames[0].1).replier as ReplicaId;
    for &j in &sent {
        h.deliver(j, &reply(j, rid, 0, true, b"v", j == replier));
    }
    assert_eq!(h.completed(), Some((rid, b"v".to_vec())));
    assert_eq!(h.client.poll_timeout(), None);
    assert_eq!(h.client.stats().read_only_hedged, 0);
    assert_eq!(h.client.stats().read_only_to_quorum, 1);
}

#[test]
fn request_frame_is_authenticated_for_every_replica() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let rid = h.client.invoke(Time::ZERO, b"op".to_vec(), false).unwrap();
        let bytes = only_frame(&h.actions());
        let frame = Frame::parse(&bytes, h.config.message_bytes_max).unwrap();
        let hd = frame.header;
        assert_eq!(hd.tag, Tag::Request);
        assert_eq!(hd.sender, Principal::Client(C));
        assert_eq!(hd.epoch, h.config.epoch);
        assert_eq!(hd.flags, 0);
        assert!((hd.replier as u32) < h.n());
        assert_eq!(hd.auth, AuthKind::SignedAuthenticator);
        assert_eq!(hd.auth_len as usize, SIG_LEN + h.config.n() * MAC_LEN);
        assert_eq!(
            frame.decode().unwrap(),
            Message::Request(Request {
                client: C,
                rid,
                acked: rid - 1,
                after: 0,
                op: b"op".to_vec()
            })
        );
        for j in 0..h.n() {
            let rk = h.keys.replica(j, [C]);
            assert!(frame.verify_mac(&rk.clients[&C].1, j as usize), "slot {j}");
            let other = (j as usize + 1) % h.config.n();
            assert!(!frame.verify_mac(&rk.clients[&C].1, other), "slot {other}");
            assert!(!frame.verify_mac(&rk.clients[&C].0, j as usize));
            assert!(frame.verify_signed_authenticator(&rk.client_public[&C]));
        }
    }
}

#[test]
fn mac_only_client_sends_a_plain_authenticator() {
    let config = Config::new(1);
    let mut keys = TestKeys::new(KEY_SEED, config.n()).client(C);
    keys.signing = None;
    let mut client = Client::new(config.clone(), keys, 1);
    client.invoke(Time::ZERO, b"op".to_vec(), false).unwrap();
    let actions: Vec<ClientAction> = std::iter::from_fn(|| client.poll_action()).collect();
    let bytes = only_frame(&actions);
    let frame = Frame::parse(&bytes, config.message_bytes_max).unwrap();
    assert_eq!(frame.header.auth, AuthKind::Authenticator);
    assert_eq!(frame.header.auth_len as usize, config.n() * MAC_LEN);
}

#[test]
fn f_plus_one_committed_complete_and_f_do_not() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let rid = h.invoke(b"w", false);
        for j in 0..f {
            h.deliver(j, &reply(j, rid, 0, false, b"ok", j == 0));
        }
        assert_eq!(h.completed(), None, "f={f}");
        assert_eq!(h.client.outstanding(), 1);
        h.deliver(f, &reply(f, rid, 0, false, b"ok", false));
        assert_eq!(h.completed(), Some((rid, b"ok".to_vec())), "f={f}");
        assert_eq!(h.client.outstanding(), 0);
        assert_eq!(h.client.poll_timeout(), None);
        assert_eq!(h.client.stats().replies_accepted, f as u64 + 1);
    }
}

#[test]
fn with_read_only_optimisation_writes_complete_on_f_plus_1_committed() {
    // Waiting for 2f+1 would stall whenever a faulty primary keeps one correct replica
    // behind; the replicas' read-only floor keeps reads linearizable instead.
    for f in [1, 2] {
        let mut h = Harness::new(f);
        h.client.config.read_only_optimisation = true;
        let rid = h.invoke(b"w", false);
        for j in 0..f {
            h.deliver(j, &reply(j, rid, 0, false, b"ok", j == 0));
        }
        assert_eq!(
            h.completed(),
            None,
            "f={f}: f committed replies are not enough"
        );
        h.deliver(f, &reply(f, rid, 0, false, b"ok", false));
        assert_eq!(h.completed(), Some((rid, b"ok".to_vec())), "f={f}");
    }
}

#[test]
fn two_f_plus_one_tentative_complete_and_2f_do_not() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let rid = h.invoke(b"r", true);
        for j in 0..2 * f {
            h.deliver(j, &reply(j, rid, 0, true, b"val", true));
        }
        assert_eq!(h.completed(), None, "f={f}");
        h.deliver(2 * f, &reply(2 * f, rid, 0, true, b"val", false));
        assert_eq!(h.completed(), Some((rid, b"val".to_vec())), "f={f}");
    }
}

#[test]
fn tentative_and_committed_count_together_towards_2f_plus_1() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let rid = h.invoke(b"w", false);
        // f committed (one short of f+1) plus f+1 tentative: 2f+1 matching.
        for j in 0..f {
            h.deliver(j, &reply(j, rid, 0, false, b"ok", false));
        }
        for j in f..2 * f {
            h.deliver(j, &reply(j, rid, 0, true, b"ok", true));
        }
        assert_eq!(h.completed(), None, "f={f}");
        h.deliver(2 * f, &reply(2 * f, rid, 0, true, b"ok", false));
        assert_eq!(h.completed(), Some((rid, b"ok".to_vec())), "f={f}");
    }
}

#[test]
fn tentative_replies_of_different_views_do_not_complete() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let rid = h.invoke(b"w", false);
        // 2f tentative in view 0 and one in view 1: no 2f+1 of one view.
        for j in 0..2 * f {
            h.deliver(j, &reply(j, rid, 0, true, b"ok", true));
        }
        h.deliver(2 * f, &reply(2 * f, rid, 1, true, b"ok", true));
        assert_eq!(h.completed(), None, "f={f}: views mixed");
        // The last replica's view-0 reply completes it (2f+1 in view 0)…
        h.deliver(3 * f, &reply(3 * f, rid, 0, true, b"ok", false));
        assert_eq!(h.completed(), Some((rid, b"ok".to_vec())), "f={f}");
    }
}

#[test]
fn committed_replies_of_any_view_count_with_tentative_ones_of_one_view() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let rid = h.invoke(b"w", false);
        // f committed in view 3, f+1 tentative in view 1: 2f+1, sound (see `certified`).
        for j in 0..f {
            h.deliver(j, &reply(j, rid, 3, false, b"ok", false));
        }
        for j in f..2 * f {
            h.deliver(j, &reply(j, rid, 1, true, b"ok", true));
        }
        assert_eq!(h.completed(), None, "f={f}");
        h.deliver(2 * f, &reply(2 * f, rid, 1, true, b"ok", false));
        assert_eq!(h.completed(), Some((rid, b"ok".to_vec())), "f={f}");
    }
}

#[test]
fn mixed_digests_do_not_complete() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let rid = h.invoke(b"w", false);
        // Every replica answers in full, half of them committed, but each digest gathers
        // at most f replies.
        let n = h.n();
        let results: Vec<&[u8]> = vec![b"a", b"b", b"c", b"d"];
        for j in 0..n {
            let r = results[(j / f) as usize % results.len()];
            h.deliver(j, &reply(j, rid, 0, j % 2 == 0, r, true));
        }
        assert_eq!(h.completed(), None, "f={f}");

        // f committed "x" + f committed "y": 2f >= f+1 replies, but mismatched.
        let mut h = Harness::new(f);
        let rid = h.invoke(b"w", false);
        for j in 0..f {
            h.deliver(j, &reply(j, rid, 0, false, b"x", true));
        }
        for j in f..2 * f {
            h.deliver(j, &reply(j, rid, 0, false, b"y", true));
        }
        assert_eq!(h.completed(), None, "f={f}");
        // And 2f tentative "x" + 1 tentative "y" is not 2f+1 matching.
        let mut h = Harness::new(f);
        let rid = h.invoke(b"r", true);
        for j in 0..2 * f {
            h.deliver(j, &reply(j, rid, 0, true, b"x", true));
        }
        h.deliver(2 * f, &reply(2 * f, rid, 0, true, b"y", true));
        assert_eq!(h.completed(), None, "f={f}");
    }
}

#[test]
fn bad_frames_are_dropped_and_counted() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let rid = h.invoke(b"w", false);
        let good = reply(1, rid, 0, false, b"ok", true);

        // Bad MAC: replica 1's reply MAC'd with replica 2's key.
        let rk2 = h.keys.replica(2, [C]);
        let forged = wire::encode(
            Envelope::new(Principal::Replica(1), h.config.epoch),
            &Message::Reply(good.clone()),
            Auth::Mac(&rk2.clients[&C].0),
        );
        h.client.handle_message(Time::ZERO, &forged);
        // Unauthenticated and authenticator-carrying replies.
        let none = wire::encode(
            Envelope::new(Principal::Replica(1), h.config.epoch),
            &Message::Reply(good.clone()),
            Auth::None,
        );
        h.client.handle_message(Time::ZERO, &none);
        assert_eq!(h.client.stats().dropped_bad_auth, 2);

        // Wrong rid: stale.
        h.deliver(1, &reply(1, rid + 1, 0, false, b"ok", true));
        h.deliver(1, &reply(1, rid - 1, 0, false, b"ok", true));
        // Wrong epoch: stale.
        let rk1 = h.keys.replica(1, [C]);
        let other_epoch = wire::encode(
            Envelope::new(Principal::Replica(1), h.config.epoch + 1),
            &Message::Reply(good.clone()),
            Auth::Mac(&rk1.clients[&C].0),
        );
        h.client.handle_message(Time::ZERO, &other_epoch);
        assert_eq!(h.client.stats().dropped_stale, 3);

        // Wrong client, sender/replica mismatch, mismatching full result, garbage,
        // a non-reply, a replica id out of range.
        h.deliver(
            1,
            &Reply {
                client: C + 1,
                ..good.clone()
            },
        );
        h.deliver(
            1,
            &Reply {
                replica: 2,
                ..good.clone()
            },
        );
        h.deliver(
            1,
            &Reply {
                result: Some(b"forged".to_vec()),
                ..good.clone()
            },
        );
        h.client.handle_message(Time::ZERO, b"garbage");
        h.client.handle_message(Time::ZERO, &[0u8; 200]);
        let mut truncated = h.frame(1, &good);
        truncated.pop();
        h.client.handle_message(Time::ZERO, &truncated);
        let prepare = wire::encode(
            Envelope::new(Principal::Replica(1), h.config.epoch),
            &Message::Prepare(crate::message::Prepare {
                view: 0,
                seq: 1,
                digest: Digest::ZERO,
                replica: 1,
            }),
            Auth::Mac(&rk1.clients[&C].0),
        );
        h.client.handle_message(Time::ZERO, &prepare);
        let far = wire::encode(
            Envelope::new(Principal::Replica(h.n()), h.config.epoch),
            &Message::Reply(Reply {
                replica: h.n(),
                ..good.clone()
            }),
            Auth::Mac(&rk1.clients[&C].0),
        );
        h.client.handle_message(Time::ZERO, &far);
        assert_eq!(h.client.stats().dropped_malformed, 8);

        assert_eq!(h.client.stats().replies_accepted, 0);
        // None of it counted: f more good committed replies still do not complete.
        for j in 0..f {
            h.deliver(j, &reply(j, rid, 0, false, b"ok", true));
        }
        assert_eq!(h.completed(), None);
        h.deliver(f, &reply(f, rid, 0, false, b"ok", true));
        assert_eq!(h.completed(), Some((rid, b"ok".to_vec())));
    }
}

#[test]
fn digest_only_certificate_waits_for_a_full_reply() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let rid = h.invoke(b"w", false);
        for j in 0..=f {
            h.deliver(j, &reply(j, rid, 0, false, b"big result", false));
        }
        assert_eq!(h.completed(), None, "f={f}");
        // The retransmission asks every replica for the full result.
        let (_, bytes) = h.retransmit();
        assert_eq!(header(&bytes).replier, REPLIER_ALL);
        // A full reply with another digest does not help.
        h.deliver(f + 1, &reply(f + 1, rid, 0, false, b"other", true));
        assert_eq!(h.completed(), None, "f={f}");
        // The same replica upgrading to a full reply completes it.
        h.deliver(0, &reply(0, rid, 0, false, b"big result", true));
        assert_eq!(h.completed(), Some((rid, b"big result".to_vec())), "f={f}");
    }
}

/// Issue #47: with the designated replier dead, the digests certify the result at once;
/// every replica is asked for it in full after the grace (not the retransmission
/// timeout), and a replica silent past the grace is neither designated nor among a
/// read's first `2f+1` until it answers again (then it is counted on at once).
#[test]
fn a_dead_designated_replier_is_not_chosen_again() {
    let f = 1;
    let mut h = Harness::with_seed(f, 3);
    h.client.config.read_only_to_quorum = true;
    let (rid, sent) = h.invoke_sends(b"r", true);
    let dead = header(&sent[0].1).replier as ReplicaId;
    for &(j, _) in sent.iter().filter(|(j, _)| *j != dead) {
        h.deliver(j, &reply(j, rid, 0, true, b"v", false));
    }
    // The left-out replica answers the hedge with a digest too: 2f+1 digests, no result.
    let hedge = h.client.poll_timeout().expect("hedge armed");
    h.client.handle_timeout(hedge);
    for a in h.actions() {
        let ClientAction::Send { to, .. } = a else {
            panic!("{a:?}")
        };
        h.deliver(to, &reply(to, rid, 0, true, b"v", false));
    }
    assert_eq!(h.completed(), None);
    let grace = Responsiveness::grace_us(READ_US_INITIAL);
    let deadline = h.client.out[&rid].deadline;
    let reask = h.client.poll_timeout().expect("re-ask armed");
    assert_eq!(
        reask,
        Time::from_micros(grace),
        "the grace after the certificate"
    );
    assert!(reask < deadline);
    h.client.handle_timeout(reask);
    let bytes = match h.actions().as_slice() {
        [ClientAction::Broadcast { bytes }] => bytes.clone(),
        other => panic!("expected one broadcast, got {other:?}"),
    };
    assert_eq!(header(&bytes).replier, REPLIER_ALL);
    assert_eq!(h.client.stats().full_result_reasks, 1);
    // The live replicas answer in full.
    for j in (0..h.n()).filter(|&j| j != dead) {
        h.client
            .handle_message(reask, &h.frame(j, &reply(j, rid, 0, true, b"v", true)));
    }
    assert_eq!(h.completed(), Some((rid, b"v".to_vec())));
    // From now on the dead replica is not designated, nor asked first.
    let later = Time::from_micros(2 * grace + 1);
    for _ in 0..40 {
        let rid = h.client.invoke(later, b"r".to_vec(), true).unwrap();
        let sent: Vec<Sent> = h
            .actions()
            .into_iter()
            .map(|a| match a {
                ClientAction::Send { to, bytes } => (to, bytes),
                other => panic!("{other:?}"),
            })
            .collect();
        let replier = header(&sent[0].1).replier as ReplicaId;
        assert_ne!(replier, dead);
        let to: Vec<ReplicaId> = sent.iter().map(|(t, _)| *t).collect();
        // Asked only when its turn to be probed comes (never here: the first gap is
        // 100 ms); it does not answer.
        assert!(!to.contains(&dead), "{to:?}");
        for &j in &to {
            h.client.handle_message(
                later,
                &h.frame(j, &reply(j, rid, 0, true, b"v", j == replier)),
            );
        }
        assert_eq!(h.completed(), Some((rid, b"v".to_vec())));
    }
    assert_eq!(h.client.stats().silent_probes, 0);
    // Its turn to be asked again comes 100 ms after it was first left out.
    let probe = Time::from_micros(later.as_micros() + PROBE_MIN_US);
    h.client.invoke(probe, b"r".to_vec(), true).unwrap();
    let to: Vec<ReplicaId> = h
        .actions()
        .into_iter()
        .map(|a| match a {
            ClientAction::Send { to, .. } => to,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(to.contains(&dead), "probed: {to:?}");
    assert_eq!(h.client.stats().silent_probes, 1);
    // It answers again (a late reply counts): counted on at once.
    h.client.handle_message(
        later,
        &h.frame(dead, &reply(dead, rid, 0, true, b"v", false)),
    );
    assert!(h.client.responsive.counted_on(dead, later, grace));
}

/// A replica whose reply contradicted a certificate is not designated for a while.
#[test]
fn a_replica_that_contradicted_a_certificate_is_not_designated() {
    let f = 1;
    let mut h = Harness::with_seed(f, 5);
    let rid = h.invoke(b"r", true);
    h.deliver(3, &reply(3, rid, 0, true, b"lie", true));
    for j in 0..3 {
        h.deliver(j, &reply(j, rid, 0, true, b"v", true));
    }
    assert_eq!(h.completed(), Some((rid, b"v".to_vec())));
    for _ in 0..40 {
        let (rid, sent) = h.invoke_sends_broadcast(b"r");
        assert_ne!(header(&sent).replier, 3);
        for j in 0..4 {
            h.deliver(j, &reply(j, rid, 0, true, b"v", true));
        }
        assert_eq!(h.completed(), Some((rid, b"v".to_vec())));
    }
}

#[test]
fn tentative_reply_upgrades_to_committed_but_not_back() {
    let f = 1;
    let mut h = Harness::new(f);
    let rid = h.invoke(b"w", false);
    // Replica 0: full tentative, then digest-only committed (keeps its full result).
    h.deliver(0, &reply(0, rid, 0, true, b"ok", true));
    h.deliver(0, &reply(0, rid, 0, false, b"ok", false));
    // Replica 1: committed, then a reordered tentative reply (must not downgrade).
    h.deliver(1, &reply(1, rid, 0, false, b"ok", false));
    assert_eq!(h.completed(), Some((rid, b"ok".to_vec())));

    let mut h = Harness::new(f);
    let rid = h.invoke(b"w", false);
    h.deliver(0, &reply(0, rid, 0, false, b"ok", true));
    h.deliver(0, &reply(0, rid, 0, true, b"ok", false));
    h.deliver(1, &reply(1, rid, 0, false, b"ok", false));
    assert_eq!(h.completed(), Some((rid, b"ok".to_vec())));

    // A replica repeating itself counts once.
    let mut h = Harness::new(f);
    let rid = h.invoke(b"w", false);
    for _ in 0..5 {
        h.deliver(0, &reply(0, rid, 0, false, b"ok", true));
    }
    assert_eq!(h.completed(), None);
}

#[test]
fn retransmissions_back_off_and_broadcast() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        h.client.invoke(Time::ZERO, b"w".to_vec(), false).unwrap();
        let first = only_frame(&h.actions());
        let base = micros(h.config.client_retransmit);
        let max = micros(h.config.client_retransmit_max);
        assert_eq!(h.client.poll_timeout(), Some(Time::from_micros(base)));
        // Early timeouts do nothing.
        h.client.handle_timeout(Time::from_micros(base - 1));
        assert!(h.actions().is_empty());
        assert_eq!(h.client.stats().retransmissions, 0);

        let mut last = Time::ZERO;
        let mut intervals = Vec::new();
        for k in 1..=12u64 {
            let (at, bytes) = h.retransmit();
            intervals.push(at.as_micros() - last.as_micros());
            last = at;
            assert_eq!(h.client.stats().retransmissions, k);
            // Same body, same digest: only the authentication may differ.
            let (a, b) = (header(&first), header(&bytes));
            assert_eq!(a.body_digest, b.body_digest);
            assert_eq!(body(&first), body(&bytes));
        }
        assert_eq!(intervals[0], base);
        for w in intervals.windows(2) {
            assert!(w[0] <= w[1], "{intervals:?}");
            assert!(w[1] <= max, "{intervals:?}");
        }
        assert!(intervals[1] > intervals[0], "{intervals:?}");
        assert_eq!(*intervals.last().unwrap(), max, "{intervals:?}");
    }
}

#[test]
fn read_only_falls_back_after_more_than_one_retransmission() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        h.client.config.read_only_to_quorum = false;
        let rid = h.invoke(b"r", true);
        let first_replier = {
            // Rebuild the first frame's header from a fresh client with the same seed.
            let mut g = Harness::new(f);
            g.client.config.read_only_to_quorum = false;
            g.client.invoke(Time::ZERO, b"r".to_vec(), true).unwrap();
            header(&only_frame(&g.actions())).replier
        };
        // A read-only (tentative) reply arrives before the fallback.
        h.deliver(0, &reply(0, rid, 0, true, b"new", true));
        let (_, one) = h.retransmit();
        assert_eq!(header(&one).flags & FLAG_READ_ONLY, FLAG_READ_ONLY);
        assert_eq!(header(&one).replier, first_replier);
        // Read-only frames carry MACs only; the ordered fallback is signed.
        assert_eq!(header(&one).auth, AuthKind::Authenticator);
        assert_eq!(h.client.stats().read_only_fallbacks, 0);
        let at = h.client.poll_timeout().unwrap();
        h.client.handle_timeout(at);
        let two = match h.actions().as_slice() {
            [ClientAction::Reissued { issued, rid: new }, ClientAction::Broadcast { bytes }] => {
                assert_eq!((*issued, *new), (rid, rid + 1));
                bytes.clone()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(header(&two).auth, AuthKind::SignedAuthenticator);
        assert_eq!(header(&two).flags & FLAG_READ_ONLY, 0);
        assert_ne!(header(&two).replier, first_replier);
        assert!((header(&two).replier as u32) < h.n());
        // Ordered under a new id (the read's id was never ordered, and requests sent
        // since may count it as done), which follows nothing outstanding.
        let ordered = rid + 1;
        assert_eq!(
            Frame::parse(&two, 1 << 24).unwrap().decode().unwrap(),
            Message::Request(Request {
                client: C,
                rid: ordered,
                acked: ordered - 1,
                after: 0,
                op: b"r".to_vec()
            })
        );
        assert_eq!(h.client.next_rid(), ordered + 1);
        assert_eq!(h.client.stats().read_only_fallbacks, 1);
        let (_, three) = h.retransmit();
        assert_eq!(header(&three).flags & FLAG_READ_ONLY, 0);
        assert_eq!(header(&three).body_digest, header(&two).body_digest);
        assert_eq!(h.client.stats().read_only_fallbacks, 1);
        // Replies to the read's id are stale now; the read-only reply was discarded at
        // the fallback (library `t_reps.clear()`): 2f ordered tentative replies do not
        // complete until replica 0 answers the ordered request too. The caller sees the
        // id it was given.
        h.deliver(1, &reply(1, rid, 0, true, b"new", true));
        assert_eq!(h.client.stats().dropped_stale, 1);
        for j in 1..=2 * f {
            h.deliver(j, &reply(j, ordered, 0, true, b"new", true));
        }
        assert_eq!(h.completed(), None);
        h.deliver(0, &reply(0, ordered, 0, true, b"new", true));
        assert_eq!(h.completed(), Some((rid, b"new".to_vec())));
    }
}

/// The read's id and the id it went ordered under, if the client fell back at `at`.
fn fell_back_at(h: &mut Harness, at: Time) -> Option<(RequestId, RequestId)> {
    h.client.handle_timeout(at);
    h.actions().into_iter().find_map(|a| match a {
        ClientAction::Reissued { issued, rid } => Some((issued, rid)),
        _ => None,
    })
}

#[test]
fn a_read_whose_replies_disagree_goes_ordered_without_two_retransmissions() {
    // Replicas answer a read from the state each reached; while writes run they differ.
    // Three different answers of four: no result can reach 2f+1, ordered at once.
    let mut h = Harness::new(1);
    h.client.config.read_only_to_quorum = false;
    let rid = h.invoke(b"r", true);
    for (j, v) in [(0, b"a"), (1, b"b"), (2, b"c")] {
        h.deliver(j, &reply(j, rid, 0, true, v, true));
    }
    assert_eq!(h.client.poll_timeout(), Some(Time::ZERO));
    assert_eq!(fell_back_at(&mut h, Time::ZERO), Some((rid, rid + 1)));
    assert_eq!(h.client.stats().read_only_fallbacks, 1);

    // Two and one: the fourth may still agree, for the grace the others have to answer.
    let grace = Responsiveness::grace_us(READ_US_INITIAL);
    let mut h = Harness::new(1);
    h.client.config.read_only_to_quorum = false;
    let rid = h.invoke(b"r", true);
    for (j, v) in [(0, b"a"), (1, b"a"), (2, b"b")] {
        h.deliver(j, &reply(j, rid, 0, true, v, true));
    }
    assert_eq!(h.client.poll_timeout(), Some(Time::from_micros(grace)));
    assert_eq!(
        fell_back_at(&mut h, Time::from_micros(grace)),
        Some((rid, rid + 1))
    );
    // … and if it does agree meanwhile, the read completes as read-only.
    let mut h = Harness::new(1);
    h.client.config.read_only_to_quorum = false;
    let rid = h.invoke(b"r", true);
    for (j, v) in [(0, b"a"), (1, b"a"), (2, b"b"), (3, b"a")] {
        h.deliver(j, &reply(j, rid, 0, true, v, true));
    }
    assert_eq!(h.completed(), Some((rid, b"a".to_vec())));
    assert_eq!(h.client.stats().read_only_fallbacks, 0);
}

#[test]
fn a_read_sent_before_an_ordered_request_that_completed_goes_ordered() {
    // A `lookup` sent just before a `reclaim`: once the replicas execute the reclaim they
    // drop the read's id as stale (their reply cache answers ids up to the client's last
    // executed one), so retransmitting it read-only would reach no one who answers.
    let mut h = Harness::new(1);
    h.client.config.read_only_to_quorum = false;
    let read = h.invoke(b"r", true);
    let write = h.invoke(b"w", false);
    for j in 0..3 {
        h.deliver(j, &reply(j, write, 0, true, b"ok", true));
    }
    assert_eq!(h.completed(), Some((write, b"ok".to_vec())));
    // … after the grace the replicas that got it in time have to answer, not its own
    // retransmission timeout.
    let grace = Responsiveness::grace_us(READ_US_INITIAL);
    let at = h.client.poll_timeout().expect("the read is timed");
    assert_eq!(at, Time::from_micros(grace));
    assert_eq!(fell_back_at(&mut h, at), Some((read, write + 1)));
    assert_eq!(h.client.stats().read_only_fallbacks, 1);
    // A read sent with no ordered request after it is retransmitted read-only first.
    let mut h = Harness::new(1);
    h.client.config.read_only_to_quorum = false;
    h.invoke(b"r", true);
    let (_, again) = h.retransmit();
    assert_eq!(header(&again).flags & FLAG_READ_ONLY, FLAG_READ_ONLY);
}

#[test]
fn view_is_learned_from_f_plus_one_replies() {
    for f in [1, 2] {
        let mut h = Harness::new(f);
        let n = h.n();
        let rid = h.invoke(b"w", false);
        // One liar reports a huge view (committed, so that it counts towards the
        // certificate whatever its view); the others report view n+1.
        h.deliver(0, &reply(0, rid, u64::MAX, false, b"ok", true));
        for j in 1..=2 * f {
            h.deliver(j, &reply(j, rid, n as u64 + 1, true, b"ok", false));
        }
        assert!(h.completed().is_some());
        assert_eq!(h.client.view(), n as u64 + 1, "f={f}");
        // The next request goes to the new primary only.
        h.client.invoke(Time::ZERO, b"w2".to_vec(), false).unwrap();
        match h.actions().as_slice() {
            [ClientAction::Send { to: 1, .. }] => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(h.config.primary(h.client.view()), 1);

        // f liars alone cannot move the view forward; the view never goes backwards.
        let mut h = Harness::new(f);
        let rid = h.invoke(b"w", false);
        for j in 0..f {
            h.deliver(j, &reply(j, rid, 1000, false, b"ok", true));
        }
        h.deliver(f, &reply(f, rid, 2, false, b"ok", true));
        assert!(h.completed().is_some());
        assert_eq!(h.client.view(), 2, "f={f}");
        let rid = h.invoke(b"w", false);
        for j in 0..=f {
            h.deliver(j, &reply(j, rid, 1, false, b"ok", true));
        }
        assert!(h.completed().is_some());
        assert_eq!(h.client.view(), 2, "f={f}");
    }
}

#[test]
fn busy_too_large_and_increasing_rids() {
    let mut h = Harness::new(1);
    h.client.config.client_window = 1;
    assert_eq!(h.client.next_rid(), 1);
    let max = h.config.op_bytes_max;
    assert_eq!(
        h.client.invoke(Time::ZERO, vec![0; max + 1], false),
        Err(ClientError::TooLarge)
    );
    let rid = h.invoke(b"a", false);
    assert_eq!(rid, 1);
    assert_eq!(h.client.outstanding(), 1);
    assert_eq!(
        h.client.invoke(Time::ZERO, b"b".to_vec(), false),
        Err(ClientError::Busy)
    );
    assert!(h.actions().is_empty());
    for j in 0..2 {
        h.deliver(j, &reply(j, rid, 0, false, b"ok", true));
    }
    assert_eq!(h.completed(), Some((1, b"ok".to_vec())));
    // Anything after completion is stale and ignored.
    h.deliver(2, &reply(2, rid, 0, false, b"ok", true));
    h.client.handle_timeout(Time::from_micros(u64::MAX));
    assert!(h.actions().is_empty());
    assert_eq!(h.client.stats().dropped_stale, 1);
    assert_eq!(h.invoke(b"b", false), 2);
    assert_eq!(h.client.next_rid(), 3);
    assert_eq!(
        h.client.invoke(Time::ZERO, b"c".to_vec(), false),
        Err(ClientError::Busy)
    );
    assert_eq!(h.client.next_rid(), 3);
}

/// `(rid, acked, after, read-only flag)` of a request frame.
fn ids(bytes: &[u8]) -> (RequestId, RequestId, RequestId, bool) {
    let frame = Frame::parse(bytes, 1 << 24).unwrap();
    let ro = frame.header.flags & FLAG_READ_ONLY != 0;
    match frame.decode().unwrap() {
        Message::Request(r) => (r.rid, r.acked, r.after, ro),
        other => panic!("{other:?}"),
    }
}

/// Several requests in flight (docs/PROTOCOL.md §1.6): each follows the last, `acked` stays
/// below the oldest outstanding, the window bounds both the count and `rid - acked`,
/// and each completes on its own certificate.
#[test]
fn a_window_of_requests_each_following_the_last() {
    let mut h = Harness::new(1);
    h.client.config.client_window = 3;
    h.learn_view(0);
    let mut sent = Vec::new();
    for op in [b"a", b"b", b"c"] {
        let (_, s) = h.invoke_sends(op, false);
        sent.push(ids(&s[0].1));
    }
    assert_eq!(
        sent,
        vec![(2, 1, 0, false), (3, 1, 2, false), (4, 1, 3, false)]
    );
    assert_eq!(h.client.outstanding(), 3);
    assert_eq!(
        h.client.invoke(Time::ZERO, b"d".to_vec(), false),
        Err(ClientError::Busy)
    );
    // 3 completes first: a fourth may not go yet, its id would be 4 beyond `acked`.
    for j in 0..2 {
        h.deliver(j, &reply(j, 3, 0, false, b"ok", true));
    }
    assert_eq!(h.completed(), Some((3, b"ok".to_vec())));
    assert!(!h.client.can_invoke(false));
    for j in 0..2 {
        h.deliver(j, &reply(j, 2, 0, false, b"ok", true));
    }
    assert_eq!(h.completed(), Some((2, b"ok".to_vec())));
    let (_, s) = h.invoke_sends(b"d", false);
    assert_eq!(ids(&s[0].1), (5, 3, 4, false));
    // Each outstanding request is retransmitted on its own timer.
    let at = h.client.poll_timeout().unwrap();
    h.client.handle_timeout(at);
    let again: Vec<_> = h
        .actions()
        .iter()
        .map(|a| match a {
            ClientAction::Broadcast { bytes } => ids(bytes),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(again, vec![(4, 1, 3, false), (5, 3, 4, false)]);
}

/// A read goes read-only only when no ordered request is outstanding (it could run
/// before that write); a write follows no read-only request and counts it as done (it is
/// never ordered under its id).
#[test]
fn reads_and_writes_in_flight_together() {
    let mut h = Harness::new(1);
    h.client.config.read_only_to_quorum = false;
    h.learn_view(0);
    let one = |h: &mut Harness, op: &[u8], ro: bool| {
        let rid = h.client.invoke(Time::ZERO, op.to_vec(), ro).unwrap();
        let a = h.actions();
        (rid, ids(&only_frame(&a)))
    };
    assert_eq!(one(&mut h, b"r", true), (2, (2, 1, 0, true)));
    assert_eq!(one(&mut h, b"w", false), (3, (3, 2, 0, false)));
    assert_eq!(one(&mut h, b"r2", true), (4, (4, 2, 3, false)));
    assert_eq!(h.client.outstanding(), 3);
}

/// Runs a fixed scenario and returns every action.
fn trace(seed: u64) -> Vec<ClientAction> {
    let mut h = Harness::with_seed(2, seed);
    let mut out = Vec::new();
    for round in 0..4u64 {
        h.client
            .invoke(
                Time::from_micros(round),
                vec![round as u8; 10],
                round % 2 == 0,
            )
            .unwrap();
        out.extend(h.actions());
        for _ in 0..5 {
            let at = h.client.poll_timeout().unwrap();
            h.client.handle_timeout(at);
            out.extend(h.actions());
        }
        let rid = *h.client.out.keys().next().unwrap();
        for j in 0..3 {
            h.deliver(j, &reply(j, rid, 0, false, b"ok", true));
        }
        out.extend(h.actions());
    }
    out
}

#[test]
fn same_seed_same_frames() {
    let a = trace(5);
    assert_eq!(a, trace(5));
    assert!(
        a.iter()
            .filter(|x| matches!(x, ClientAction::Completed { .. }))
            .count()
            == 4
    );
    assert_ne!(a, trace(6));
}

#[test]
fn zero_timeouts_still_make_progress() {
    let mut config = Config::new(1);
    config.client_retransmit = Duration::ZERO;
    config.client_retransmit_max = Duration::ZERO;
    let keys = TestKeys::new(KEY_SEED, config.n());
    let mut c = Client::new(config, keys.client(C), 3);
    c.invoke(Time::ZERO, b"w".to_vec(), false).unwrap();
    assert_eq!(c.poll_timeout(), Some(Time::from_micros(1)));
    c.handle_timeout(Time::from_micros(1));
    assert_eq!(c.poll_timeout(), Some(Time::from_micros(2)));
}

/// A read while an ordered request is outstanding (docs/PROTOCOL.md §1.8): a plain read goes
/// ordered after it; one read apart ([`Access::ReadApart`]) goes read-only at once, and
/// the next ordered request follows the last ordered one, not the read.
#[test]
fn a_read_apart_goes_read_only_while_an_ordered_request_is_outstanding() {
    let mut h = Harness::new(1);
    h.client.config.client_window = 8;
    h.client.config.read_only_optimisation = true;
    h.learn_view(0);
    let (_, w) = h.invoke_sends(b"w", false);
    let read = |h: &mut Harness, access: Access| -> Vec<_> {
        h.client.invoke(Time::ZERO, b"r".to_vec(), access).unwrap();
        h.actions()
            .iter()
            .map(|a| match a {
                ClientAction::Send { bytes, .. } | ClientAction::Broadcast { bytes } => ids(bytes),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let plain = read(&mut h, Access::Read);
    let apart = read(&mut h, Access::ReadApart);
    let (_, w2) = h.invoke_sends(b"w2", false);
    assert_eq!(
        (ids(&w[0].1), plain[0], apart[0], ids(&w2[0].1)),
        (
            (2, 1, 0, false),
            // Ordered, after the write.
            (3, 1, 2, false),
            // Read-only: the replicas answer it from their state now (a read-only
            // request never waits for the `after` it names: `execute.rs` `on_read_only`).
            (4, 1, 3, true),
            // The next write follows the last ordered request, not the read.
            (5, 1, 3, false),
        )
    );
    // Without the optimisation a read apart is ordered as any read.
    h.client.config.read_only_optimisation = false;
    assert!(!read(&mut h, Access::ReadApart)[0].3);
}
