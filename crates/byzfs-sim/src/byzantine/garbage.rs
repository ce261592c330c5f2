//! S-BADMSG (docs/PROTOCOL.md §6.4): to a random subset of replicas, frames are replaced (or
//! followed) by garbage — random bytes, truncated frames, bad MACs, corrupted headers,
//! declared lengths that do not add up, flipped body bits (bad body digest), unknown tags.

use super::{Ctx, Dest, Outgoing, Strategy};
use crate::rng::SimRng;
use byzfs_bft::wire::HEADER_LEN;
use byzfs_bft::{Config, ReplicaId};
use rand::Rng;
use std::sync::Arc;

/// The garbage sender.
#[derive(Debug)]
pub struct Garbage {
    victims: Vec<ReplicaId>,
}

impl Garbage {
    /// Picks a non-empty random subset of the other replicas as victims.
    pub fn new(me: ReplicaId, config: &Config, rng: &mut SimRng) -> Garbage {
        let others: Vec<ReplicaId> = (0..config.n() as ReplicaId).filter(|&r| r != me).collect();
        let mut victims: Vec<ReplicaId> = others
            .iter()
            .copied()
            .filter(|_| rng.gen_bool(0.5))
            .collect();
        if victims.is_empty() {
            victims.push(others[rng.gen_range(0..others.len())]);
        }
        Garbage { victims }
    }

    fn mangle(rng: &mut SimRng, b: &[u8]) -> Vec<u8> {
        let mut v = b.to_vec();
        match rng.gen_range(0..7) {
            0 => (0..rng.gen_range(0..300)).map(|_| rng.gen()).collect(),
            1 => {
                v.truncate(rng.gen_range(0..v.len().max(1)));
                v
            }
            2 => {
                // Bad MAC or signature: flip a bit in the trailing authentication bytes.
                let auth_len = v
                    .get(24..28)
                    .map_or(0, |a| u32::from_le_bytes([a[0], a[1], a[2], a[3]]) as usize);
                let len = v.len();
                if len > 0 {
                    let i = if auth_len > 0 && auth_len <= len {
                        len - 1 - rng.gen_range(0..auth_len)
                    } else {
                        len - 1
                    };
                    v[i] ^= 1 << rng.gen_range(0..8);
                }
                v
            }
            3 => {
                if v.len() > 3 {
                    v[3] = rng.gen_range(14..=255);
                }
                v
            }
            4 => {
                if v.len() >= 24 {
                    let bogus: u32 = rng.gen_range(0..1 << 20);
                    v[20..24].copy_from_slice(&bogus.to_le_bytes());
                }
                v
            }
            5 => {
                if v.len() > HEADER_LEN {
                    let i = rng.gen_range(HEADER_LEN..v.len());
                    v[i] ^= 0x40;
                }
                v
            }
            _ => {
                v.extend((0..rng.gen_range(1..64)).map(|_| rng.gen::<u8>()));
                v
            }
        }
    }
}

impl Strategy for Garbage {
    fn name(&self) -> &'static str {
        "garbage"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        let Dest::Replica(to) = out.to else {
            return vec![out];
        };
        if !self.victims.contains(&to) || !ctx.rng.gen_bool(0.7) {
            return vec![out];
        }
        let junk: Arc<[u8]> = Garbage::mangle(ctx.rng, &out.bytes).into();
        let junk = Outgoing {
            bytes: junk,
            ..out.clone()
        };
        if ctx.rng.gen_bool(0.3) {
            vec![junk, out]
        } else {
            vec![junk]
        }
    }
}
