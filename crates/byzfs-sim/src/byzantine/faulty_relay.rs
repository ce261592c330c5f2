//! A faulty first receiver (issue #30, docs/PROTOCOL.md §1.10 "each body once"): a replica that
//! mishandles the client frames its honest code passes on — the big bodies it relays as
//! primary, the requests it forwards or resends as a backup. It withholds them, corrupts
//! them (a flipped bit in header, body or authenticator), or passes them to some replicas
//! only; everything else it sends honestly. Correct replicas must drop the corrupt copies
//! without blaming the client, fetch a withheld body from whoever holds it, and the client's
//! retransmission to every replica must keep the cluster live.

use super::{Ctx, Outgoing, Strategy};
use crate::rng::SimRng;
use byzfs_bft::message::Tag;
use rand::Rng;
use std::sync::Arc;

/// What the faulty first receiver does with a client's frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Never passes it on.
    Withhold,
    /// Passes on a copy with one bit flipped.
    Corrupt,
    /// Passes it on to each replica with probability ½.
    Some,
}

/// The faulty first receiver.
#[derive(Debug)]
pub struct FaultyRelay {
    mode: Mode,
}

impl FaultyRelay {
    /// Draws its mode.
    pub fn new(rng: &mut SimRng) -> FaultyRelay {
        let mode = [Mode::Withhold, Mode::Corrupt, Mode::Some][rng.gen_range(0..3)];
        FaultyRelay { mode }
    }

    /// Its mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }
}

/// Whether `b` is a client's REQUEST frame (tag, sender kind 1 = client).
fn client_request(b: &[u8]) -> bool {
    b.get(3) == Some(&(Tag::Request as u8)) && b.get(4) == Some(&1)
}

impl Strategy for FaultyRelay {
    fn name(&self) -> &'static str {
        "faulty-relay"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        if !client_request(&out.bytes) {
            return vec![out];
        }
        match self.mode {
            Mode::Withhold => vec![],
            Mode::Some if ctx.rng.gen_bool(0.5) => vec![],
            Mode::Some => vec![out],
            Mode::Corrupt => {
                let mut v = out.bytes.to_vec();
                let i = ctx.rng.gen_range(0..v.len());
                v[i] ^= 1 << ctx.rng.gen_range(0..8);
                vec![Outgoing {
                    bytes: Arc::from(v),
                    ..out
                }]
            }
        }
    }
}
