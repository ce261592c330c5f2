//! Key regression (docs/PROTOCOL.md §7.1 "Applying Plutus on a BFT-replicated server"): the group
//! seed of version `v` is `s_v`, with `s_{v-1} = H(s_v)` (BLAKE3 in key-derivation mode). The
//! owner keeps the chain's head `s_MAX` and hands members `s_v` for the current `v`; from it
//! a member derives every older seed — files still sealed under an older version stay
//! readable — and, the hash being one-way, no newer one: a removed member learns nothing
//! sealed after the rotation. This replaces Plutus's RSA key rotation.

use crate::CryptError;
use rand_core::{CryptoRng, RngCore};
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Key versions a group can go through (one per revocation); the owner computes `s_v` with
/// at most this many hashes (about 10 ms).
pub const MAX_VERSION: u32 = 65_536;

const BACK: &str = "byzfs-crypt 2026-11 key regression: one version back";
const CONTENT: &str = "byzfs-crypt 2026-11 content key of a file";
const NAMES: &str = "byzfs-crypt 2026-11 name key of a directory";

/// A group owner's secret: the head of the seed chain.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Owner {
    head: [u8; 32],
}

impl Owner {
    /// A new chain with a random head.
    pub fn new(rng: &mut (impl RngCore + CryptoRng)) -> Owner {
        let mut head = [0u8; 32];
        rng.fill_bytes(&mut head);
        Owner { head }
    }

    /// The owner's secret as stored in its key file.
    pub fn from_bytes(head: [u8; 32]) -> Owner {
        Owner { head }
    }

    /// The secret, for the owner's key file.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.head
    }

    /// The keys of version `v` (1..=[`MAX_VERSION`]).
    pub fn group_keys(&self, v: u32) -> Result<GroupKeys, CryptError> {
        if v == 0 || v > MAX_VERSION {
            return Err(CryptError::NoSuchVersion {
                asked: v,
                have: MAX_VERSION,
            });
        }
        let mut seed = self.head;
        for _ in v..MAX_VERSION {
            seed = back(&seed);
        }
        Ok(GroupKeys { version: v, seed })
    }
}

fn back(seed: &[u8; 32]) -> [u8; 32] {
    blake3::derive_key(BACK, seed)
}

/// A member's keys of one version: the seed `s_v`, from which every older version and the
/// per-file and per-directory keys derive.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct GroupKeys {
    version: u32,
    seed: [u8; 32],
}

impl std::fmt::Debug for GroupKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupKeys")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl GroupKeys {
    /// Keys received in a lockbox.
    pub fn from_parts(version: u32, seed: [u8; 32]) -> GroupKeys {
        GroupKeys { version, seed }
    }

    /// The version and seed, to seal in a lockbox.
    pub fn to_parts(&self) -> (u32, [u8; 32]) {
        (self.version, self.seed)
    }

    /// The key version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The keys of an older (or this) version `v`.
    pub fn older(&self, v: u32) -> Result<GroupKeys, CryptError> {
        if v == 0 || v > self.version {
            return Err(CryptError::NoSuchVersion {
                asked: v,
                have: self.version,
            });
        }
        let mut seed = self.seed;
        for _ in v..self.version {
            seed = back(&seed);
        }
        Ok(GroupKeys { version: v, seed })
    }

    /// The content key of file `file` (its blocks, [`crate::block`]).
    pub fn content_key(&self, file: &[u8; 16]) -> [u8; 32] {
        derive(CONTENT, &self.seed, file)
    }

    /// The name key of directory `dir` (its entries, [`crate::names`]): 64 bytes, AES-256-SIV.
    pub fn name_key(&self, dir: &[u8; 16]) -> [u8; 64] {
        let mut k = [0u8; 64];
        let mut h = blake3::Hasher::new_derive_key(NAMES);
        h.update(&self.seed);
        h.update(dir);
        h.finalize_xof().fill(&mut k);
        k
    }
}

fn derive(context: &str, seed: &[u8; 32], id: &[u8; 16]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key(context);
    h.update(seed);
    h.update(id);
    *h.finalize().as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::OsRng;

    #[test]
    fn members_derive_older_versions_and_never_newer_ones() {
        let owner = Owner::new(&mut OsRng);
        let v5 = owner.group_keys(5).unwrap();
        for v in 1..=5 {
            assert_eq!(
                v5.older(v).unwrap(),
                owner.group_keys(v).unwrap(),
                "version {v}"
            );
        }
        assert_eq!(
            v5.older(6),
            Err(CryptError::NoSuchVersion { asked: 6, have: 5 })
        );
        assert_eq!(
            owner.group_keys(0).map(|k| k.version()),
            Err(CryptError::NoSuchVersion {
                asked: 0,
                have: MAX_VERSION
            })
        );
        // Each version's keys differ, and per file and per directory.
        let f = [1u8; 16];
        let g = [2u8; 16];
        let v4 = owner.group_keys(4).unwrap();
        assert_ne!(v5.content_key(&f), v4.content_key(&f));
        assert_ne!(v5.content_key(&f), v5.content_key(&g));
        assert_ne!(v5.name_key(&f), v4.name_key(&f));
        // The owner's secret round-trips through its key file.
        let again = Owner::from_bytes(owner.to_bytes());
        assert_eq!(again.group_keys(5).unwrap(), v5);
        assert_eq!(format!("{v5:?}"), "GroupKeys { version: 5, .. }");
    }
}
