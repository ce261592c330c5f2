//! Faulty clients (PROTOCOL.md §1.14, §6.4 S-CLIENT-FLOOD): requests whose authenticator is
//! valid for some replicas only (the "big MAC" attack when only the primary's entry is good),
//! duplicates of the latest request, stale request ids with new operations, verbatim replays
//! of old requests, and some valid requests too. A faulty client uses its own keys and writes
//! only its own keys of the store (so the oracle can ignore its results).

use crate::kv::KvOp;
use crate::rng::SimRng;
use byzfs_bft::message::{Message, Request};
use byzfs_bft::wire::{encode, Auth, AuthKind, Envelope, Frame, REPLIER_ALL};
use byzfs_bft::{ClientId, ClientKeys, Principal, ReplicaId, RequestId};
use rand::Rng;
use std::collections::VecDeque;
use std::sync::Arc;

const HISTORY_MAX: usize = 32;

/// One request a faulty client sends.
#[derive(Clone, Debug)]
pub struct BadSend {
    /// `None`: every replica; `Some(r)`: replica `r` only.
    pub to: Option<ReplicaId>,
    /// The frame.
    pub bytes: Arc<[u8]>,
    /// What it claims to be: `(rid, op)` for the oracle.
    pub issued: (RequestId, Vec<u8>),
    /// What kind of misbehaviour (for traces).
    pub what: &'static str,
}

/// A faulty client.
#[derive(Debug)]
pub struct BadClient {
    /// Its id.
    pub id: ClientId,
    keys: ClientKeys,
    epoch: u32,
    n: usize,
    next_rid: RequestId,
    history: VecDeque<(Arc<[u8]>, RequestId, Vec<u8>)>,
}

impl BadClient {
    /// A faulty client with its own keys.
    pub fn new(id: ClientId, keys: ClientKeys, epoch: u32, n: usize) -> BadClient {
        BadClient {
            id,
            keys,
            epoch,
            n,
            next_rid: 1,
            history: VecDeque::new(),
        }
    }

    fn op(&self, rng: &mut SimRng) -> Vec<u8> {
        let key = format!("bad{}-{}", self.id, rng.gen_range(0..2)).into_bytes();
        let value = format!("b{}", rng.gen::<u16>()).into_bytes();
        if rng.gen_bool(0.5) {
            KvOp::Append { key, value }.encode()
        } else {
            KvOp::Put { key, value }.encode()
        }
    }

    fn frame(&self, rid: RequestId, op: &[u8], good: &[bool]) -> Arc<[u8]> {
        let env = Envelope {
            sender: Principal::Client(self.id),
            epoch: self.epoch,
            flags: 0,
            replier: REPLIER_ALL,
        };
        let msg = Message::Request(Request {
            client: self.id,
            rid,
            op: op.to_vec(),
        });
        let mut bytes = encode(env, &msg, Auth::Authenticator(&self.keys.to_replica));
        // Spoil the MACs of the replicas not in `good` (the MACs trail the frame, one per replica).
        let mac_len = byzfs_bft::crypto::MAC_LEN;
        let start = bytes.len() - self.n * mac_len;
        for (r, ok) in good.iter().enumerate() {
            if !ok {
                bytes[start + r * mac_len] ^= 0xA5;
            }
        }
        debug_assert!(Frame::parse(&bytes, usize::MAX)
            .is_ok_and(|f| f.header.auth == AuthKind::Authenticator));
        bytes.into()
    }

    /// The next misbehaviour, given who the primary probably is.
    pub fn tick(&mut self, rng: &mut SimRng, primary: ReplicaId) -> Vec<BadSend> {
        let all_good = vec![true; self.n];
        let choice = rng.gen_range(0..6);
        let (to, bytes, rid, op, what) = match choice {
            0 | 1 => {
                // Valid for a random subset, or for the primary only (big MAC).
                let rid = self.next_rid;
                self.next_rid += 1;
                let op = self.op(rng);
                let good: Vec<bool> = if choice == 0 {
                    (0..self.n).map(|r| r as ReplicaId == primary).collect()
                } else {
                    (0..self.n).map(|_| rng.gen_bool(0.5)).collect()
                };
                let b = self.frame(rid, &op, &good);
                self.history.push_back((b.clone(), rid, op.clone()));
                let to = if choice == 0 { Some(primary) } else { None };
                (
                    to,
                    b,
                    rid,
                    op,
                    if choice == 0 {
                        "big-mac"
                    } else {
                        "partial-auth"
                    },
                )
            }
            2 => match self.history.back().cloned() {
                Some((b, rid, op)) => (None, b, rid, op, "duplicate"),
                None => return Vec::new(),
            },
            3 if self.next_rid > 2 => {
                let rid = rng.gen_range(1..self.next_rid - 1);
                let op = self.op(rng);
                (None, self.frame(rid, &op, &all_good), rid, op, "stale-rid")
            }
            4 if !self.history.is_empty() => {
                let i = rng.gen_range(0..self.history.len());
                let (b, rid, op) = self.history[i].clone();
                (None, b, rid, op, "replay")
            }
            _ => {
                let rid = self.next_rid;
                self.next_rid += 1;
                let op = self.op(rng);
                let b = self.frame(rid, &op, &all_good);
                self.history.push_back((b.clone(), rid, op.clone()));
                (None, b, rid, op, "valid")
            }
        };
        if self.history.len() > HISTORY_MAX {
            self.history.pop_front();
        }
        vec![BadSend {
            to,
            bytes,
            issued: (rid, op),
            what,
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Purpose};
    use byzfs_bft::TestKeys;

    #[test]
    fn partial_authenticators_verify_only_where_intended() {
        let tk = TestKeys::new(3, 4);
        let mut c = BadClient::new(900, tk.client(900), 0, 4);
        let mut rng = stream(1, Purpose::BadClients);
        let mut saw_big_mac = false;
        for _ in 0..50 {
            for s in c.tick(&mut rng, 2) {
                let f = Frame::parse(&s.bytes, usize::MAX).expect("well formed");
                let ok: Vec<bool> = (0..4u32)
                    .map(|r| f.verify_mac(&tk.replica(r, [900]).clients[&900].1, r as usize))
                    .collect();
                if s.what == "big-mac" {
                    saw_big_mac = true;
                    assert_eq!(ok, vec![false, false, true, false]);
                    assert_eq!(s.to, Some(2));
                }
                if s.what == "valid" {
                    assert!(ok.iter().all(|&b| b));
                }
            }
        }
        assert!(saw_big_mac);
    }
}
