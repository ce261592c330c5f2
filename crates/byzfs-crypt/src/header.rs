//! A file's header: `(file id, file version, plaintext size, key version, Merkle root)`,
//! signed with the group's writer key of that key version (Ed25519). Readers check the
//! signature, then blocks against the root ([`crate::merkle`]); the replicas keep the
//! header in replicated state, so a reader that takes it from a reply certificate gets the
//! latest one (freshness, which Plutus's signature alone cannot give).

use crate::merkle::Hash;
use crate::CryptError;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

/// Encoded header length.
pub const HEADER_LEN: usize = 16 + 8 + 8 + 4 + 32;
/// Encoded signed header length.
pub const SIGNED_LEN: usize = HEADER_LEN + 64;

/// What a writer signs about a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// The file's random id (binds blocks and keys to it).
    pub file: [u8; 16],
    /// Incremented at every write that changes the root.
    pub version: u64,
    /// Plaintext size in bytes (the replicas see whole blocks only).
    pub size: u64,
    /// The group key version the blocks were sealed under.
    pub key_version: u32,
    /// Merkle root over the sealed blocks.
    pub root: Hash,
}

impl FileHeader {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..16].copy_from_slice(&self.file);
        b[16..24].copy_from_slice(&self.version.to_le_bytes());
        b[24..32].copy_from_slice(&self.size.to_le_bytes());
        b[32..36].copy_from_slice(&self.key_version.to_le_bytes());
        b[36..].copy_from_slice(&self.root);
        b
    }

    fn decode(b: &[u8]) -> Option<FileHeader> {
        Some(FileHeader {
            file: b.get(..16)?.try_into().ok()?,
            version: u64::from_le_bytes(b.get(16..24)?.try_into().ok()?),
            size: u64::from_le_bytes(b.get(24..32)?.try_into().ok()?),
            key_version: u32::from_le_bytes(b.get(32..36)?.try_into().ok()?),
            root: b.get(36..HEADER_LEN)?.try_into().ok()?,
        })
    }

    /// The header signed by `writer`, encoded ([`SIGNED_LEN`] bytes).
    pub fn sign(&self, writer: &SigningKey) -> Vec<u8> {
        let body = self.encode();
        let sig = writer.sign(&with_context(&body));
        let mut out = Vec::with_capacity(SIGNED_LEN);
        out.extend_from_slice(&body);
        out.extend_from_slice(&sig.to_bytes());
        out
    }

    /// Decodes a signed header and checks its signature under `writer`.
    pub fn verify(signed: &[u8], writer: &VerifyingKey) -> Result<FileHeader, CryptError> {
        if signed.len() != SIGNED_LEN {
            return Err(CryptError::Malformed("signed header length"));
        }
        let (body, sig) = signed.split_at(HEADER_LEN);
        let sig = Signature::from_slice(sig).map_err(|_| CryptError::Malformed("signature"))?;
        writer
            .verify(&with_context(body), &sig)
            .map_err(|_| CryptError::BadSignature("file header"))?;
        FileHeader::decode(body).ok_or(CryptError::Malformed("header"))
    }
}

/// Signatures are over a context string and the header, so a header signature can never be
/// taken for another signed object of the system.
fn with_context(body: &[u8]) -> Vec<u8> {
    let mut m = b"byzfs-crypt 2026-11 file header\0".to_vec();
    m.extend_from_slice(body);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::OsRng;

    #[test]
    fn a_header_verifies_only_under_its_writer_and_unchanged() {
        let writer = SigningKey::generate(&mut OsRng);
        let h = FileHeader {
            file: [1; 16],
            version: 3,
            size: 10_000,
            key_version: 2,
            root: [7; 32],
        };
        let s = h.sign(&writer);
        assert_eq!(s.len(), SIGNED_LEN);
        assert_eq!(FileHeader::verify(&s, &writer.verifying_key()), Ok(h));
        let other = SigningKey::generate(&mut OsRng).verifying_key();
        assert_eq!(
            FileHeader::verify(&s, &other),
            Err(CryptError::BadSignature("file header"))
        );
        for i in [0, 20, 40, HEADER_LEN + 3] {
            let mut t = s.clone();
            t[i] ^= 1;
            assert!(
                FileHeader::verify(&t, &writer.verifying_key()).is_err(),
                "byte {i}"
            );
        }
        assert_eq!(
            FileHeader::verify(&s[1..], &writer.verifying_key()),
            Err(CryptError::Malformed("signed header length"))
        );
    }
}
