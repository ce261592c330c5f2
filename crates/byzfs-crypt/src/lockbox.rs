//! Lockboxes: a group's keys sealed to one member. `ephemeral X25519 public key (32) ‖
//! nonce (24) ‖ XChaCha20-Poly1305(HKDF-SHA256(ECDH), nonce, payload)`, the associated data
//! binding both public keys and what the caller binds it to (a group's cluster, id, owner,
//! version and the member's role: `crate::member`), so a lockbox moved to another record
//! does not open. Anyone may store or serve a lockbox; only the member's X25519 secret
//! opens it.

use crate::CryptError;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use rand_core::{CryptoRng, RngCore};
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};

const INFO: &[u8] = b"byzfs-crypt 2026-12 lockbox";
/// Bytes a lockbox adds to its payload.
pub const OVERHEAD: usize = 32 + 24 + 16;

fn key_and_aad(
    shared: &[u8; 32],
    eph: &PublicKey,
    member: &PublicKey,
    bound: &[u8],
) -> ([u8; 32], Vec<u8>) {
    let mut aad = Vec::with_capacity(64 + bound.len());
    aad.extend_from_slice(eph.as_bytes());
    aad.extend_from_slice(member.as_bytes());
    let mut key = [0u8; 32];
    // A 32-byte output is always within HKDF-SHA256's limit.
    let _ = Hkdf::<Sha256>::new(Some(&aad), shared).expand(INFO, &mut key);
    aad.extend_from_slice(bound);
    (key, aad)
}

/// Seals `payload` to `member`, bound to `bound` ([`open`] must be given the same).
pub fn seal(
    member: &PublicKey,
    bound: &[u8],
    payload: &[u8],
    rng: &mut (impl RngCore + CryptoRng),
) -> Vec<u8> {
    let eph = StaticSecret::random_from_rng(&mut *rng);
    let eph_pub = PublicKey::from(&eph);
    let shared = eph.diffie_hellman(member);
    let (key, aad) = key_and_aad(shared.as_bytes(), &eph_pub, member, bound);
    let mut nonce = [0u8; 24];
    rng.fill_bytes(&mut nonce);
    let sealed = XChaCha20Poly1305::new(&key.into())
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: payload,
                aad: &aad,
            },
        )
        .unwrap_or_default();
    let mut out = Vec::with_capacity(OVERHEAD + payload.len());
    out.extend_from_slice(eph_pub.as_bytes());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    out
}

/// Opens a lockbox with the member's secret, if it was sealed bound to `bound`.
pub fn open(me: &StaticSecret, bound: &[u8], lockbox: &[u8]) -> Result<Vec<u8>, CryptError> {
    if lockbox.len() < OVERHEAD {
        return Err(CryptError::Malformed("lockbox length"));
    }
    let eph: [u8; 32] = lockbox[..32]
        .try_into()
        .map_err(|_| CryptError::Malformed("lockbox"))?;
    let eph = PublicKey::from(eph);
    let shared = me.diffie_hellman(&eph);
    if !shared.was_contributory() {
        // A low-order ephemeral key: every secret gives the same shared value.
        return Err(CryptError::Tampered("lockbox key exchange"));
    }
    let (key, aad) = key_and_aad(shared.as_bytes(), &eph, &PublicKey::from(me), bound);
    XChaCha20Poly1305::new(&key.into())
        .decrypt(
            XNonce::from_slice(&lockbox[32..56]),
            Payload {
                msg: &lockbox[56..],
                aad: &aad,
            },
        )
        .map_err(|_| CryptError::Tampered("lockbox"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::OsRng;

    #[test]
    fn only_the_member_opens_its_lockbox() {
        let alice = StaticSecret::random_from_rng(OsRng);
        let bob = StaticSecret::random_from_rng(OsRng);
        let b = seal(&PublicKey::from(&alice), b"g1", b"group keys", &mut OsRng);
        assert_eq!(b.len(), OVERHEAD + 10);
        assert_eq!(open(&alice, b"g1", &b), Ok(b"group keys".to_vec()));
        assert_eq!(open(&bob, b"g1", &b), Err(CryptError::Tampered("lockbox")));
        // Bound elsewhere (another group, owner, version or cluster: `member`).
        assert_eq!(
            open(&alice, b"g2", &b),
            Err(CryptError::Tampered("lockbox"))
        );
        for i in [0, 40, b.len() - 1] {
            let mut t = b.clone();
            t[i] ^= 1;
            assert!(open(&alice, b"g1", &t).is_err(), "byte {i}");
        }
        // An all-zero (low-order) ephemeral key is refused before any decryption.
        let mut z = b.clone();
        z[..32].fill(0);
        assert_eq!(
            open(&alice, b"g1", &z),
            Err(CryptError::Tampered("lockbox key exchange"))
        );
        assert_eq!(
            open(&alice, b"g1", &b[..10]),
            Err(CryptError::Malformed("lockbox length"))
        );
    }
}
