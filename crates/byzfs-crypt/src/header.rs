//! A regular file's header, what the replicas keep beside it and return in every `Attr`
//! (docs/ENCRYPTION.md "Data", "Freshness"): its key version, a version that grows
//! at every change, the root of its tree ([`crate::tree`]) and its size, sealed; signed by
//! the group's writer key of that key version, with the owner's certificate of that key
//! ([`crate::member::writer_cert`]). A reader checks certificate and signature with the
//! owner's public key alone, then each block it reads against the root, so a holder of the
//! read keys cannot make a block or a size another reader accepts (Plutus's
//! writer-signed hashes); which header is current comes from a reply quorum (the BFT
//! layer: freshness, which a signature alone cannot give).
//!
//! | bytes | what |
//! |---|---|
//! | 0..4 | key version `v` (big-endian) |
//! | 4..12 | file version (big-endian) |
//! | 12..44 | root |
//! | 44..92 | the size: nonce ‖ XChaCha20-Poly1305 of 8 bytes, under `v`'s content key of the file, bound to the file and [`crate::file::HEADER_INDEX`] |
//! | 92..124 | writer public key of `v` |
//! | 124..188 | the owner's certificate of it |
//! | 188..252 | the writer's signature over a context, the cluster, the group, the file and bytes 0..188 |

use crate::member::{verify_writer_cert, GroupRef};
use crate::regression::GroupKeys;
use crate::tree::Hash;
use crate::{block, CryptError};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use rand_core::{CryptoRng, RngCore};

/// Encoded length of a signed header.
pub const SIGNED_LEN: usize = 252;
const BODY: usize = 188;

/// What a writer signs about a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// The key version the header is sealed and signed under (the writer's).
    pub key_version: u32,
    /// One more than the header it replaces (0 for a file never written).
    pub version: u64,
    /// The root of the file's tree ([`crate::tree::root`]).
    pub root: Hash,
    /// The plaintext size in bytes.
    pub size: u64,
}

/// A writer's key of one version and the owner's certificate of it.
pub struct WriterKey<'a> {
    /// The signing key.
    pub key: &'a SigningKey,
    /// [`crate::member::writer_cert`] of its public key.
    pub cert: &'a [u8; 64],
}

fn signed_message(g: &GroupRef, file: &[u8; 16], body: &[u8]) -> Vec<u8> {
    let mut m = b"byzfs-crypt 2026-12 file header\0".to_vec();
    m.extend_from_slice(&g.cluster);
    m.extend_from_slice(&g.group);
    m.extend_from_slice(file);
    m.extend_from_slice(body);
    m
}

fn keys_of(keys: &GroupKeys, v: u32) -> Result<GroupKeys, CryptError> {
    if v == keys.version() {
        Ok(keys.clone())
    } else {
        keys.older(v)
    }
}

/// `h` of `file` in group `g`, sealed under the newest version of `keys` (its
/// `key_version` is that version) and signed by `writer`: [`SIGNED_LEN`] bytes.
pub fn seal(
    keys: &GroupKeys,
    g: &GroupRef,
    file: &[u8; 16],
    h: &FileHeader,
    writer: &WriterKey<'_>,
    rng: &mut (impl RngCore + CryptoRng),
) -> Vec<u8> {
    let v = keys.version();
    let mut out = Vec::with_capacity(SIGNED_LEN);
    out.extend_from_slice(&v.to_be_bytes());
    out.extend_from_slice(&h.version.to_be_bytes());
    out.extend_from_slice(&h.root);
    out.extend(block::seal(
        &keys.content_key(file),
        file,
        crate::file::HEADER_INDEX,
        v,
        &h.size.to_be_bytes(),
        rng,
    ));
    out.extend_from_slice(&writer.key.verifying_key().to_bytes());
    out.extend_from_slice(writer.cert);
    let sig = writer.key.sign(&signed_message(g, file, &out));
    out.extend_from_slice(&sig.to_bytes());
    out
}

/// Opens `file`'s header `signed` of group `g`: `None` for a file never written (no
/// header). Refused unless `g.owner` certified the writer key of its version for this
/// cluster and group, that key signed it for this cluster, group and file, and its size
/// opens.
pub fn open(
    keys: &GroupKeys,
    g: &GroupRef,
    file: &[u8; 16],
    signed: &[u8],
) -> Result<Option<FileHeader>, CryptError> {
    if signed.is_empty() {
        return Ok(None);
    }
    if signed.len() != SIGNED_LEN {
        return Err(CryptError::Malformed("file header length"));
    }
    let field = |r: std::ops::Range<usize>| &signed[r];
    let v = u32::from_be_bytes(field(0..4).try_into().unwrap_or_default());
    let writer: [u8; 32] = field(92..124).try_into().unwrap_or_default();
    let cert: [u8; 64] = field(124..188).try_into().unwrap_or([0; 64]);
    let sig: [u8; 64] = field(188..252).try_into().unwrap_or([0; 64]);
    verify_writer_cert(g, v, &writer, &cert)?;
    VerifyingKey::from_bytes(&writer)
        .map_err(|_| CryptError::Malformed("writer key"))?
        .verify_strict(
            &signed_message(g, file, field(0..BODY)),
            &Signature::from_bytes(&sig),
        )
        .map_err(|_| CryptError::BadSignature("file header"))?;
    let k = keys_of(keys, v)?;
    let size = block::open(
        &k.content_key(file),
        file,
        crate::file::HEADER_INDEX,
        v,
        field(44..92),
    )?;
    Ok(Some(FileHeader {
        key_version: v,
        version: u64::from_be_bytes(field(4..12).try_into().unwrap_or_default()),
        root: field(12..44).try_into().unwrap_or_default(),
        size: u64::from_be_bytes(
            size.as_slice()
                .try_into()
                .map_err(|_| CryptError::Malformed("file header size"))?,
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::{open_mine, seal_record, Identity, Role};
    use rand_core::OsRng;

    #[test]
    fn a_header_opens_only_as_its_writer_signed_it() {
        let owner = Identity::generate(&mut OsRng);
        let bob = Identity::generate(&mut OsRng);
        let g = owner.group_ref(&[3; 16], "team");
        let members = [
            (owner.member_key(), Role::Writer),
            (bob.member_key(), Role::Reader),
        ];
        let (w1, boxes) = seal_record(&owner, &g, 1, &members, &mut OsRng).unwrap();
        let mine = open_mine(&owner, &g, &boxes, 1, &w1).unwrap();
        let (key, cert) = mine.writer.unwrap();
        let reader = open_mine(&bob, &g, &boxes, 1, &w1).unwrap().keys;
        let w = WriterKey {
            key: &key,
            cert: &cert,
        };
        let f = [5; 16];
        let h = FileHeader {
            key_version: 1,
            version: 9,
            root: [3; 32],
            size: 12_345,
        };
        let s = seal(&mine.keys, &g, &f, &h, &w, &mut OsRng);
        assert_eq!(s.len(), SIGNED_LEN);
        assert_eq!(open(&reader, &g, &f, &s), Ok(Some(h)));
        assert_eq!(open(&reader, &g, &f, &[]), Ok(None));
        // Another file, group, owner or cluster; any bit flipped; cut short.
        assert!(open(&reader, &g, &[6; 16], &s).is_err());
        let others = [
            GroupRef {
                group: [0; 16],
                ..g
            },
            GroupRef {
                owner: bob.owner_key(),
                ..g
            },
            GroupRef {
                cluster: [4; 16],
                ..g
            },
        ];
        for other in others {
            assert_eq!(
                open(&reader, &other, &f, &s),
                Err(CryptError::BadSignature("writer certificate")),
                "{other:?}"
            );
        }
        for i in 0..s.len() {
            let mut t = s.clone();
            t[i] ^= 1;
            assert!(open(&reader, &g, &f, &t).is_err(), "bit {i}");
        }
        assert_eq!(
            open(&reader, &g, &f, &s[1..]),
            Err(CryptError::Malformed("file header length"))
        );
        // A reader holds the content key, not a writer key: a header it signs with a key
        // of its own fails the certificate.
        let forger = SigningKey::from_bytes(&[8; 32]);
        let forged = seal(
            &reader,
            &g,
            &f,
            &FileHeader { size: 1, ..h },
            &WriterKey {
                key: &forger,
                cert: &cert,
            },
            &mut OsRng,
        );
        assert_eq!(
            open(&reader, &g, &f, &forged),
            Err(CryptError::BadSignature("writer certificate"))
        );
    }
}
