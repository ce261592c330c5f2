//! Faulty clients (docs/PROTOCOL.md §1.14, §5.3, §6.4 S-CLIENT-FLOOD). A faulty client holds its own
//! MAC keys and signing key only, and attacks the signed-request scheme:
//!
//! * **partial MACs** over a good signature — valid for the primary only ("big MAC", so backups
//!   cannot authenticate the request the primary inlines), for a random subset, or for every
//!   backup but not the primary and sent to the backups only (so they forward it and start
//!   their view-change timers for a request the primary's MAC check would refuse);
//! * **bad signatures** under good MACs (signed with another key), to everyone, to the primary
//!   only, or with partial MACs; and "blacklist then frame": a bad signature to the primary only,
//!   then a valid request to the backups only;
//! * **another client's identity**: a request naming a correct client, authenticated with the
//!   faulty client's own keys (never recorded as issued: if it ever ran, INV-VALID fails);
//! * **MAC-only** requests without a signature;
//! * **equivocation**: two validly signed requests with the same id and different operations,
//!   one to the primary, the other to the backups;
//! * **window abuse**: a burst of requests all acknowledging the same old id, some beyond
//!   `Config::client_window` (refused; if they ran, the reply cache would grow without
//!   bound — the reply-cache checker catches it), and requests that follow one never sent
//!   (never run), alone or four windows at once (stored, they would fill the replicas'
//!   request stores: the request-store checker);
//! * duplicates of the latest request, stale request ids with new operations, verbatim replays
//!   of old requests, large requests (above the SRT threshold) with partial MACs, and some
//!   valid requests too.
//!
//! It writes only its own keys of the store (so the oracle can ignore its results).

use crate::kv::KvOp;
use crate::rng::SimRng;
use byzfs_bft::crypto::{MAC_LEN, SIG_LEN};
use byzfs_bft::message::{Message, Request};
use byzfs_bft::wire::{encode, Auth, AuthKind, Envelope, Frame, REPLIER_ALL};
use byzfs_bft::{ClientId, ClientKeys, Config, Principal, ReplicaId, RequestId, TestKeys};
use rand::Rng;
use std::collections::VecDeque;
use std::sync::Arc;

const HISTORY_MAX: usize = 32;

/// One request a faulty client sends.
#[derive(Clone, Debug)]
pub struct BadSend {
    /// The replicas it goes to.
    pub to: Vec<ReplicaId>,
    /// The frame.
    pub bytes: Arc<[u8]>,
    /// What it claims to be, `(rid, op)`, for the oracle; `None` for a frame that names
    /// another client (it must never run).
    pub issued: Option<(RequestId, Vec<u8>)>,
    /// What kind of misbehaviour (for traces).
    pub what: &'static str,
}

/// How a frame is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sig {
    /// With the client's own key.
    Good,
    /// With a key nobody knows.
    Bad,
    /// No signature: a plain authenticator.
    None,
}

/// A faulty client.
#[derive(Debug)]
pub struct BadClient {
    /// Its id.
    pub id: ClientId,
    keys: ClientKeys,
    /// Keys of an unrelated cluster: their signing key is not this client's (its "signatures"
    /// never verify).
    wrong: ClientKeys,
    /// A correct client whose identity it tries to use.
    victim: ClientId,
    epoch: u32,
    n: usize,
    window: u64,
    next_rid: RequestId,
    history: VecDeque<(Arc<[u8]>, RequestId, Vec<u8>)>,
}

impl BadClient {
    /// A faulty client with its own keys, trying to pass for `victim` now and then.
    pub fn new(
        id: ClientId,
        keys: ClientKeys,
        victim: ClientId,
        config: &Config,
        rng: &mut SimRng,
    ) -> BadClient {
        let n = config.n();
        BadClient {
            id,
            keys,
            wrong: TestKeys::new(rng.gen(), n).client(id),
            victim,
            epoch: config.epoch,
            n,
            window: config.client_window,
            next_rid: 1,
            history: VecDeque::new(),
        }
    }

    fn op(&self, rng: &mut SimRng) -> Vec<u8> {
        let key = format!("bad{}-{}", self.id, rng.gen_range(0..2)).into_bytes();
        let mut value = format!("b{}", rng.gen::<u16>()).into_bytes();
        if rng.gen_bool(0.2) {
            // Above the SRT threshold when it is 64: the body travels apart from the batch.
            value.resize(rng.gen_range(100..300), b'x');
        }
        if rng.gen_bool(0.5) {
            KvOp::Append { key, value }.encode()
        } else {
            KvOp::Put { key, value }.encode()
        }
    }

    /// A request frame naming `client`, signed as `sig` says, with the MACs of the replicas not
    /// in `good` spoiled (the MACs trail the frame, one per replica).
    fn frame(
        &self,
        client: ClientId,
        rid: RequestId,
        op: &[u8],
        sig: Sig,
        good: &[bool],
    ) -> Arc<[u8]> {
        self.frame_ids(client, (rid, rid.saturating_sub(1), 0), op, sig, good)
    }

    /// [`Self::frame`] with `(rid, acked, after)` chosen by the caller.
    fn frame_ids(
        &self,
        client: ClientId,
        (rid, acked, after): (RequestId, RequestId, RequestId),
        op: &[u8],
        sig: Sig,
        good: &[bool],
    ) -> Arc<[u8]> {
        let env = Envelope {
            sender: Principal::Client(client),
            epoch: self.epoch,
            flags: 0,
            replier: REPLIER_ALL,
        };
        let msg = Message::Request(Request {
            client,
            rid,
            acked,
            after,
            op: op.to_vec(),
        });
        let macs = &self.keys.to_replica;
        let key = match sig {
            Sig::Good => self.keys.signing.as_ref(),
            Sig::Bad | Sig::None => self.wrong.signing.as_ref(),
        };
        let auth = match (sig, key) {
            (Sig::Good | Sig::Bad, Some(k)) => Auth::SignedAuthenticator(k, macs),
            _ => Auth::Authenticator(macs),
        };
        let mut bytes = encode(env, &msg, auth);
        let start = bytes.len() - self.n * MAC_LEN;
        for (r, ok) in good.iter().enumerate() {
            if !ok {
                bytes[start + r * MAC_LEN] ^= 0xA5;
            }
        }
        bytes.into()
    }

    fn fresh(&mut self, rng: &mut SimRng) -> (RequestId, Vec<u8>) {
        let rid = self.next_rid;
        self.next_rid += 1;
        (rid, self.op(rng))
    }

    fn remember(&mut self, b: &Arc<[u8]>, rid: RequestId, op: &[u8]) {
        self.history.push_back((b.clone(), rid, op.to_vec()));
        if self.history.len() > HISTORY_MAX {
            self.history.pop_front();
        }
    }

    /// The next misbehaviour, given who the primary probably is.
    pub fn tick(&mut self, rng: &mut SimRng, primary: ReplicaId) -> Vec<BadSend> {
        let n = self.n;
        let all: Vec<ReplicaId> = (0..n as ReplicaId).collect();
        let backups: Vec<ReplicaId> = all.iter().copied().filter(|&r| r != primary).collect();
        let all_good = vec![true; n];
        let only_primary: Vec<bool> = (0..n).map(|r| r as ReplicaId == primary).collect();
        let but_primary: Vec<bool> = (0..n).map(|r| r as ReplicaId != primary).collect();
        let send = |to: Vec<ReplicaId>, bytes, rid, op, what| BadSend {
            to,
            bytes,
            issued: Some((rid, op)),
            what,
        };
        let choice = rng.gen_range(0..16);
        let sends = match choice {
            0 => {
                let (rid, op) = self.fresh(rng);
                let b = self.frame(self.id, rid, &op, Sig::Good, &only_primary);
                self.remember(&b, rid, &op);
                vec![send(vec![primary], b, rid, op, "big-mac")]
            }
            1 => {
                let (rid, op) = self.fresh(rng);
                let good: Vec<bool> = (0..n).map(|_| rng.gen_bool(0.5)).collect();
                let b = self.frame(self.id, rid, &op, Sig::Good, &good);
                self.remember(&b, rid, &op);
                vec![send(all.clone(), b, rid, op, "partial-auth")]
            }
            2 => {
                let (rid, op) = self.fresh(rng);
                let b = self.frame(self.id, rid, &op, Sig::Good, &but_primary);
                self.remember(&b, rid, &op);
                vec![send(backups.clone(), b, rid, op, "frame-primary")]
            }
            3 => {
                let (rid, op) = self.fresh(rng);
                let to = if rng.gen_bool(0.5) {
                    all.clone()
                } else {
                    vec![primary]
                };
                let b = self.frame(self.id, rid, &op, Sig::Bad, &all_good);
                vec![send(to, b, rid, op, "bad-sig")]
            }
            4 => {
                let (rid, op) = self.fresh(rng);
                let good = if rng.gen_bool(0.5) {
                    only_primary.clone()
                } else {
                    (0..n).map(|_| rng.gen_bool(0.5)).collect()
                };
                let b = self.frame(self.id, rid, &op, Sig::Bad, &good);
                vec![send(all.clone(), b, rid, op, "bad-sig-partial")]
            }
            5 => {
                // Get blacklisted at the primary, then ask the backups to wait for a request.
                let (rid, op) = self.fresh(rng);
                let bad = self.frame(self.id, rid, &op, Sig::Bad, &all_good);
                let (rid2, op2) = self.fresh(rng);
                let good = self.frame(self.id, rid2, &op2, Sig::Good, &all_good);
                self.remember(&good, rid2, &op2);
                vec![
                    send(vec![primary], bad, rid, op, "blacklist-me"),
                    send(backups.clone(), good, rid2, op2, "then-frame"),
                ]
            }
            6 => {
                // Another client's identity, our own keys: never valid, never recorded.
                let rid = rng.gen_range(1..1_000);
                let op = self.op(rng);
                let sig = if rng.gen_bool(0.5) {
                    Sig::Good
                } else {
                    Sig::Bad
                };
                let b = self.frame(self.victim, rid, &op, sig, &all_good);
                vec![BadSend {
                    to: all.clone(),
                    bytes: b,
                    issued: None,
                    what: "other-client",
                }]
            }
            7 => {
                let (rid, op) = self.fresh(rng);
                let b = self.frame(self.id, rid, &op, Sig::None, &all_good);
                vec![send(all.clone(), b, rid, op, "mac-only")]
            }
            8 => {
                // Same request id, two operations: one for the primary, one for the backups.
                let (rid, op) = self.fresh(rng);
                let op2 = self.op(rng);
                let a = self.frame(self.id, rid, &op, Sig::Good, &all_good);
                let b = self.frame(self.id, rid, &op2, Sig::Good, &all_good);
                self.remember(&a, rid, &op);
                vec![
                    send(vec![primary], a, rid, op, "equivocate"),
                    send(backups.clone(), b, rid, op2, "equivocate"),
                ]
            }
            9 => match self.history.back().cloned() {
                Some((b, rid, op)) => vec![send(all.clone(), b, rid, op, "duplicate")],
                None => Vec::new(),
            },
            10 if self.next_rid > 2 => {
                let rid = rng.gen_range(1..self.next_rid - 1);
                let op = self.op(rng);
                let b = self.frame(self.id, rid, &op, Sig::Good, &all_good);
                vec![send(all.clone(), b, rid, op, "stale-rid")]
            }
            14 => {
                // Two more than the window, all acknowledging the id before the first.
                let acked = self.next_rid - 1;
                (0..self.window + 2)
                    .map(|_| {
                        let (rid, op) = self.fresh(rng);
                        let b = self.frame_ids(self.id, (rid, acked, 0), &op, Sig::Good, &all_good);
                        send(all.clone(), b, rid, op, "window-burst")
                    })
                    .collect()
            }
            15 if rng.gen_bool(0.25) => {
                // A pile: four windows of requests, each following an id it never sends.
                // None ever runs; stored, they would fill every replica's request store.
                (0..4 * self.window)
                    .map(|_| {
                        self.next_rid += 1;
                        let (rid, op) = self.fresh(rng);
                        let ids = (rid, rid - 2, rid - 1);
                        let b = self.frame_ids(self.id, ids, &op, Sig::Good, &all_good);
                        send(all.clone(), b, rid, op, "gap-pile")
                    })
                    .collect()
            }
            15 => {
                // Follows an id it never sends.
                self.next_rid += 1;
                let (rid, op) = self.fresh(rng);
                let b = self.frame_ids(self.id, (rid, rid - 2, rid - 1), &op, Sig::Good, &all_good);
                vec![send(all.clone(), b, rid, op, "gap")]
            }
            11 if !self.history.is_empty() => {
                let i = rng.gen_range(0..self.history.len());
                let (b, rid, op) = self.history[i].clone();
                vec![send(all.clone(), b, rid, op, "replay")]
            }
            _ => {
                let (rid, op) = self.fresh(rng);
                let b = self.frame(self.id, rid, &op, Sig::Good, &all_good);
                self.remember(&b, rid, &op);
                vec![send(all.clone(), b, rid, op, "valid")]
            }
        };
        debug_assert!(sends.iter().all(|s| {
            let f = Frame::parse(&s.bytes, usize::MAX).expect("well formed");
            f.auth.len()
                == n * MAC_LEN
                    + if f.header.auth == AuthKind::Authenticator {
                        0
                    } else {
                        SIG_LEN
                    }
        }));
        sends
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Purpose};

    #[test]
    fn attacks_verify_only_where_intended() {
        let tk = TestKeys::new(3, 4);
        let mut rng = stream(1, Purpose::BadClients);
        let mut c = BadClient::new(900, tk.client(900), 100, &Config::new(1), &mut rng);
        let replicas: Vec<_> = (0..4u32).map(|r| tk.replica(r, [900, 100])).collect();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..400 {
            for s in c.tick(&mut rng, 2) {
                seen.insert(s.what);
                let f = Frame::parse(&s.bytes, usize::MAX).expect("well formed");
                let Principal::Client(named) = f.header.sender else {
                    panic!("a client frame")
                };
                let macs: Vec<bool> = (0..4u32)
                    .map(|r| f.verify_mac(&replicas[r as usize].clients[&named].1, r as usize))
                    .collect();
                let sig = f.verify_signed_authenticator(&replicas[0].client_public[&named]);
                match s.what {
                    "big-mac" => {
                        assert_eq!((macs, sig), (vec![false, false, true, false], true));
                        assert_eq!(s.to, vec![2]);
                    }
                    "frame-primary" => {
                        assert_eq!((macs, sig), (vec![true, true, false, true], true));
                        assert_eq!(s.to, vec![0, 1, 3]);
                    }
                    "bad-sig" | "blacklist-me" => assert_eq!((macs, sig), (vec![true; 4], false)),
                    "bad-sig-partial" => assert!(!sig),
                    "other-client" => {
                        assert_eq!((named, macs, sig), (100, vec![false; 4], false));
                        assert!(s.issued.is_none());
                    }
                    "mac-only" => {
                        assert_eq!(f.header.auth, AuthKind::Authenticator);
                        assert_eq!(macs, vec![true; 4]);
                    }
                    "valid" | "then-frame" | "equivocate" => {
                        assert_eq!((macs, sig), (vec![true; 4], true))
                    }
                    "window-burst" | "gap" | "gap-pile" => {
                        assert_eq!((macs, sig), (vec![true; 4], true));
                        let Ok(Message::Request(r)) = f.decode() else {
                            panic!("a request")
                        };
                        if s.what != "window-burst" {
                            assert_eq!((r.acked, r.after), (r.rid - 2, r.rid - 1));
                        } else {
                            assert!(r.acked < r.rid && r.after == 0);
                        }
                    }
                    _ => {}
                }
            }
        }
        for what in [
            "big-mac",
            "partial-auth",
            "frame-primary",
            "bad-sig",
            "bad-sig-partial",
            "blacklist-me",
            "other-client",
            "mac-only",
            "equivocate",
            "valid",
            "window-burst",
            "gap",
            "gap-pile",
        ] {
            assert!(seen.contains(what), "{what} never drawn");
        }
    }
}
