//! Digests, MACs and signatures (docs/PROTOCOL.md §1.2).
//!
//! * Digest: BLAKE3, 32 bytes, computed once per buffer.
//! * MAC: keyed BLAKE3 truncated to 16 bytes, one key per ordered pair of principals. Chosen over
//!   HMAC-SHA256 because BLAKE3 is already our digest (one primitive, one crate) and a keyed
//!   BLAKE3 over a 64-byte header costs less than one HMAC-SHA256 compression pair.
//! * Signatures: Ed25519 for VIEW-CHANGE and NEW-VIEW (see `docs/ARCHITECTURE.md`), and on
//!   client requests beside the MAC authenticator (docs/PROTOCOL.md §0 item 3, §1.14, §5.3: a
//!   signature is transferable, so a request one correct replica accepts every correct replica
//!   can verify).
//!
//! The core holds keys as plain values; nothing here reads randomness or the clock.

use crate::ids::{ClientId, ReplicaId};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Length of a MAC, in bytes.
pub const MAC_LEN: usize = 16;
/// Length of an Ed25519 signature, in bytes.
pub const SIG_LEN: usize = 64;

/// A 32-byte BLAKE3 digest.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The all-zero digest, used as "none".
    pub const ZERO: Digest = Digest([0; 32]);

    /// Digest of one buffer.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(*blake3::hash(bytes).as_bytes())
    }

    /// Digest of a sequence of buffers, as if concatenated with length prefixes (so that
    /// different splits never collide).
    pub fn of_parts(parts: &[&[u8]]) -> Digest {
        let mut h = blake3::Hasher::new();
        for p in parts {
            h.update(&(p.len() as u64).to_le_bytes());
            h.update(p);
        }
        Digest(*h.finalize().as_bytes())
    }
}

impl core::fmt::Debug for Digest {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for b in &self.0[..6] {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// A truncated MAC.
pub type Mac = [u8; MAC_LEN];

/// A symmetric MAC key for one direction between two principals.
#[derive(Clone, PartialEq, Eq)]
pub struct MacKey([u8; 32]);

impl core::fmt::Debug for MacKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("MacKey(..)")
    }
}

impl MacKey {
    /// Wraps raw key bytes (from key agreement or a test derivation).
    pub fn from_bytes(bytes: [u8; 32]) -> MacKey {
        MacKey(bytes)
    }

    /// MAC of `data` under this key.
    pub fn mac(&self, data: &[u8]) -> Mac {
        let full = blake3::keyed_hash(&self.0, data);
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&full.as_bytes()[..MAC_LEN]);
        out
    }

    /// MAC of the concatenation `a ‖ b` (a signed request's header and signature).
    pub fn mac2(&self, a: &[u8], b: &[u8]) -> Mac {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(a);
        h.update(b);
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&h.finalize().as_bytes()[..MAC_LEN]);
        out
    }

    /// Constant-time check of `mac` over `a ‖ b`.
    pub fn verify2(&self, a: &[u8], b: &[u8], mac: &[u8]) -> bool {
        mac.len() == MAC_LEN && ct_eq(&self.mac2(a, b), mac)
    }

    /// Constant-time check of `mac` over `data`.
    pub fn verify(&self, data: &[u8], mac: &[u8]) -> bool {
        if mac.len() != MAC_LEN {
            return false;
        }
        ct_eq(&self.mac(data), mac)
    }
}

fn ct_eq(a: &Mac, b: &[u8]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    diff == 0
}

/// Everything a replica needs to authenticate its traffic.
#[derive(Clone, Debug)]
pub struct ReplicaKeys {
    /// This replica.
    pub me: ReplicaId,
    /// `to_replica[j]`: key for messages from `me` to replica `j`.
    pub to_replica: Vec<MacKey>,
    /// `from_replica[j]`: key for messages from replica `j` to `me`.
    pub from_replica: Vec<MacKey>,
    /// Per-client keys `(me → client, client → me)`. Clients are added by the driver (after it
    /// has checked the client's certificate); the core never invents keys.
    pub clients: BTreeMap<ClientId, (MacKey, MacKey)>,
    /// Per-client Ed25519 keys that verify request signatures. Every correct replica must hold
    /// the same key for a client (it comes from the client's certificate). A client without
    /// one is *MAC-only*: its requests carry an authenticator alone, and it is exposed to the
    /// partial-authenticator attacks of docs/PROTOCOL.md §1.14 (a legacy mode for drivers whose
    /// credentials carry no signing key yet).
    pub client_public: BTreeMap<ClientId, VerifyingKey>,
    /// This replica's signing key (VIEW-CHANGE, NEW-VIEW).
    pub signing: SigningKey,
    /// Every replica's verifying key, by id.
    pub replica_public: Vec<VerifyingKey>,
}

/// Everything a client needs to authenticate its traffic.
#[derive(Clone, Debug)]
pub struct ClientKeys {
    /// This client.
    pub me: ClientId,
    /// `to_replica[j]`: key for messages from this client to replica `j`.
    pub to_replica: Vec<MacKey>,
    /// `from_replica[j]`: key for messages from replica `j` to this client.
    pub from_replica: Vec<MacKey>,
    /// The key that signs this client's requests; `None` for a MAC-only client (see
    /// [`ReplicaKeys::client_public`]).
    pub signing: Option<SigningKey>,
}

/// Signs `data` with `key`.
pub fn sign(key: &SigningKey, data: &[u8]) -> [u8; SIG_LEN] {
    key.sign(data).to_bytes()
}

/// Verifies an Ed25519 signature strictly (no malleable encodings).
pub fn verify_signature(key: &VerifyingKey, data: &[u8], sig: &[u8]) -> bool {
    let Ok(bytes) = <[u8; SIG_LEN]>::try_from(sig) else {
        return false;
    };
    let sig = ed25519_dalek::Signature::from_bytes(&bytes);
    key.verify_strict(data, &sig).is_ok()
}

/// Deterministic keys derived from one seed, for the simulator and tests. A simulated
/// Byzantine replica receives only its own keys, so it can forge exactly what a real one could.
#[derive(Clone, Debug)]
pub struct TestKeys {
    seed: u64,
    n: usize,
}

impl TestKeys {
    /// Keys for a cluster of `n` replicas derived from `seed`.
    pub fn new(seed: u64, n: usize) -> TestKeys {
        TestKeys { seed, n }
    }

    fn derive(&self, what: &str, a: u64, b: u64) -> [u8; 32] {
        let mut material = Vec::with_capacity(24);
        material.extend_from_slice(&self.seed.to_le_bytes());
        material.extend_from_slice(&a.to_le_bytes());
        material.extend_from_slice(&b.to_le_bytes());
        blake3::derive_key(&format!("byzfs test keys 2026 {what}"), &material)
    }

    fn replica_pair(&self, from: ReplicaId, to: ReplicaId) -> MacKey {
        MacKey(self.derive("replica mac", from as u64, to as u64))
    }

    fn client_pair(&self, client: ClientId, replica: ReplicaId, to_client: bool) -> MacKey {
        let what = if to_client {
            "replica->client mac"
        } else {
            "client->replica mac"
        };
        MacKey(self.derive(what, client, replica as u64))
    }

    /// The signing key of replica `r`.
    pub fn signing(&self, r: ReplicaId) -> SigningKey {
        SigningKey::from_bytes(&self.derive("replica signing", r as u64, 0))
    }

    /// The request-signing key of client `c`.
    pub fn client_signing(&self, c: ClientId) -> SigningKey {
        SigningKey::from_bytes(&self.derive("client signing", c, 0))
    }

    /// The keys of replica `r`, knowing the given clients.
    pub fn replica(
        &self,
        r: ReplicaId,
        clients: impl IntoIterator<Item = ClientId>,
    ) -> ReplicaKeys {
        let n = self.n as ReplicaId;
        let clients: Vec<ClientId> = clients.into_iter().collect();
        ReplicaKeys {
            me: r,
            to_replica: (0..n).map(|j| self.replica_pair(r, j)).collect(),
            from_replica: (0..n).map(|j| self.replica_pair(j, r)).collect(),
            client_public: clients
                .iter()
                .map(|&c| (c, self.client_signing(c).verifying_key()))
                .collect(),
            clients: clients
                .into_iter()
                .map(|c| {
                    (
                        c,
                        (self.client_pair(c, r, true), self.client_pair(c, r, false)),
                    )
                })
                .collect(),
            signing: self.signing(r),
            replica_public: (0..n).map(|j| self.signing(j).verifying_key()).collect(),
        }
    }

    /// The keys of client `c`.
    pub fn client(&self, c: ClientId) -> ClientKeys {
        let n = self.n as ReplicaId;
        ClientKeys {
            me: c,
            to_replica: (0..n).map(|j| self.client_pair(c, j, false)).collect(),
            from_replica: (0..n).map(|j| self.client_pair(c, j, true)).collect(),
            signing: Some(self.client_signing(c)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_round_trip_and_rejects_tamper() {
        let k = MacKey::from_bytes([7; 32]);
        let m = k.mac(b"header");
        assert!(k.verify(b"header", &m));
        assert!(!k.verify(b"headex", &m));
        assert!(!k.verify(b"header", &m[..15]));
        assert!(!MacKey::from_bytes([8; 32]).verify(b"header", &m));
    }

    #[test]
    fn test_keys_are_pairwise_consistent() {
        let t = TestKeys::new(9, 4);
        let r1 = t.replica(1, [5]);
        let r2 = t.replica(2, [5]);
        let c = t.client(5);
        assert_eq!(r1.to_replica[2], r2.from_replica[1]);
        assert_ne!(r1.to_replica[2], r2.to_replica[1]);
        assert_eq!(c.to_replica[1], r1.clients[&5].1);
        assert_eq!(c.from_replica[2], r2.clients[&5].0);
        let sig = sign(&r1.signing, b"vc");
        assert!(verify_signature(&r2.replica_public[1], b"vc", &sig));
        assert!(!verify_signature(&r2.replica_public[2], b"vc", &sig));
        let csig = sign(c.signing.as_ref().expect("test clients sign"), b"req");
        assert!(verify_signature(&r1.client_public[&5], b"req", &csig));
        assert_ne!(
            t.client_signing(5).verifying_key(),
            t.client_signing(6).verifying_key()
        );
        assert_ne!(t.client_signing(5).verifying_key(), r1.replica_public[1]);
        let k = MacKey::from_bytes([1; 32]);
        assert!(k.verify2(b"ab", b"cd", &k.mac2(b"ab", b"cd")));
        assert!(!k.verify2(b"ab", b"ce", &k.mac2(b"ab", b"cd")));
    }

    #[test]
    fn digest_parts_are_unambiguous() {
        assert_ne!(
            Digest::of_parts(&[b"ab", b"c"]),
            Digest::of_parts(&[b"a", b"bc"])
        );
    }
}
