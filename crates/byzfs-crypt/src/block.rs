//! Sealed blocks: `nonce (24 bytes) ‖ XChaCha20-Poly1305(content key, nonce, plaintext)`,
//! the associated data binding the block to its file, index and key version, so a replica
//! cannot move a block to another file or place, or pass an old version's block for a new
//! one, without the open failing.
//!
//! The nonce is random (192 bits): a rewrite of a block, a truncate and regrow, or a client
//! restored from a backup never repeats one, where a nonce derived from `(file, block,
//! version)` would repeat at every rewrite under one key version (docs/ENCRYPTION.md).

use crate::CryptError;
use chacha20poly1305::aead::{Aead, AeadInPlace, KeyInit, Payload};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use rand_core::{CryptoRng, RngCore};

/// Plaintext bytes per block; a file's last block may be shorter.
pub const BLOCK: usize = 4096;
/// Bytes a sealed block adds: the nonce and the tag.
pub const OVERHEAD: usize = 24 + 16;

fn aad(file: &[u8; 16], index: u64, version: u32) -> [u8; 40] {
    let mut a = [0u8; 40];
    a[..12].copy_from_slice(b"byzfs-block1");
    a[12..28].copy_from_slice(file);
    a[28..36].copy_from_slice(&index.to_le_bytes());
    a[36..40].copy_from_slice(&version.to_le_bytes());
    a
}

/// Seals block `index` of `file` (at most [`BLOCK`] bytes) under `key`, the file's content
/// key of key version `version`.
pub fn seal(
    key: &[u8; 32],
    file: &[u8; 16],
    index: u64,
    version: u32,
    plaintext: &[u8],
    rng: &mut (impl RngCore + CryptoRng),
) -> Vec<u8> {
    debug_assert!(plaintext.len() <= BLOCK);
    let mut nonce = [0u8; 24];
    rng.fill_bytes(&mut nonce);
    let cipher = XChaCha20Poly1305::new(key.into());
    let aad = aad(file, index, version);
    let sealed = cipher
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: plaintext,
                aad: &aad,
            },
        )
        // XChaCha20-Poly1305 refuses only messages beyond 256 GiB.
        .unwrap_or_default();
    let mut out = Vec::with_capacity(OVERHEAD + plaintext.len());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    out
}

/// Opens a sealed block; fails unless it was sealed under `key` for this file, index and
/// version and is unchanged.
pub fn open(
    key: &[u8; 32],
    file: &[u8; 16],
    index: u64,
    version: u32,
    sealed: &[u8],
) -> Result<Vec<u8>, CryptError> {
    if sealed.len() < OVERHEAD || sealed.len() > OVERHEAD + BLOCK {
        return Err(CryptError::Malformed("sealed block length"));
    }
    let (nonce, body) = sealed.split_at(24);
    let cipher = XChaCha20Poly1305::new(key.into());
    let aad = aad(file, index, version);
    cipher
        .decrypt(
            XNonce::from_slice(nonce),
            Payload {
                msg: body,
                aad: &aad,
            },
        )
        .map_err(|_| CryptError::Tampered("block"))
}

/// Seals `buf` (at most [`BLOCK`] bytes: block `index` of `file`, key version `version`)
/// in place, under `key`: the ciphertext is as long as the plaintext, and the nonce and
/// tag are returned apart, so a file's sealed blocks keep its blocks' alignment
/// ([`crate::file`]).
pub fn seal_detached(
    key: &[u8; 32],
    file: &[u8; 16],
    index: u64,
    version: u32,
    buf: &mut [u8],
    rng: &mut (impl RngCore + CryptoRng),
) -> ([u8; 24], [u8; 16]) {
    debug_assert!(buf.len() <= BLOCK);
    let mut nonce = [0u8; 24];
    rng.fill_bytes(&mut nonce);
    let cipher = XChaCha20Poly1305::new(key.into());
    let tag = cipher
        .encrypt_in_place_detached(XNonce::from_slice(&nonce), &aad(file, index, version), buf)
        // XChaCha20-Poly1305 refuses only messages beyond 256 GiB.
        .map(|t| t.into())
        .unwrap_or_default();
    (nonce, tag)
}

/// Opens, in place, what [`seal_detached`] sealed; `buf` is left as it was if it fails.
pub fn open_detached(
    key: &[u8; 32],
    file: &[u8; 16],
    index: u64,
    version: u32,
    nonce: &[u8; 24],
    tag: &[u8; 16],
    buf: &mut [u8],
) -> Result<(), CryptError> {
    if buf.len() > BLOCK {
        return Err(CryptError::Malformed("sealed block length"));
    }
    let cipher = XChaCha20Poly1305::new(key.into());
    cipher
        .decrypt_in_place_detached(
            XNonce::from_slice(nonce),
            &aad(file, index, version),
            buf,
            Tag::from_slice(tag),
        )
        .map_err(|_| CryptError::Tampered("block"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::OsRng;

    #[test]
    fn a_block_opens_only_where_and_how_it_was_sealed() {
        let key = [3u8; 32];
        let file = [9u8; 16];
        let data = vec![0x5a; BLOCK];
        let s = seal(&key, &file, 7, 2, &data, &mut OsRng);
        assert_eq!(s.len(), BLOCK + OVERHEAD);
        assert_eq!(open(&key, &file, 7, 2, &s), Ok(data.clone()));
        let refused = Err(CryptError::Tampered("block"));
        assert_eq!(open(&[4u8; 32], &file, 7, 2, &s), refused, "another key");
        assert_eq!(open(&key, &[8u8; 16], 7, 2, &s), refused, "another file");
        assert_eq!(open(&key, &file, 6, 2, &s), refused, "another place");
        assert_eq!(open(&key, &file, 7, 1, &s), refused, "another version");
        for i in [0, 23, 24, s.len() - 1] {
            let mut t = s.clone();
            t[i] ^= 1;
            assert_eq!(open(&key, &file, 7, 2, &t), refused, "bit flipped at {i}");
        }
        assert_eq!(
            open(&key, &file, 7, 2, &s[..OVERHEAD - 1]),
            Err(CryptError::Malformed("sealed block length"))
        );
        // Sealing the same block twice never repeats a nonce or a ciphertext.
        let again = seal(&key, &file, 7, 2, &data, &mut OsRng);
        assert_ne!(again[..24], s[..24]);
        assert_ne!(again, s);
        // An empty block (a file's empty tail) seals and opens too.
        let empty = seal(&key, &file, 0, 1, b"", &mut OsRng);
        assert_eq!(open(&key, &file, 0, 1, &empty), Ok(Vec::new()));
    }

    #[test]
    fn a_detached_block_keeps_its_length_and_opens_only_unchanged() {
        let (key, file) = ([3u8; 32], [9u8; 16]);
        let plain = vec![0x5a; BLOCK];
        let mut buf = plain.clone();
        let (nonce, tag) = seal_detached(&key, &file, 7, 2, &mut buf, &mut OsRng);
        assert_eq!(buf.len(), BLOCK);
        assert_ne!(buf, plain);
        let sealed = buf.clone();
        assert_eq!(
            open_detached(&key, &file, 7, 2, &nonce, &tag, &mut buf),
            Ok(())
        );
        assert_eq!(buf, plain);
        let refused = Err(CryptError::Tampered("block"));
        let try_open = |k: &[u8; 32], f: &[u8; 16], i, v, n: &[u8; 24], t: &[u8; 16], b: &[u8]| {
            let mut out = b.to_vec();
            let r = open_detached(k, f, i, v, n, t, &mut out);
            assert!(r.is_ok() || out == b, "left as it was on failure");
            r
        };
        assert_eq!(
            try_open(&[4; 32], &file, 7, 2, &nonce, &tag, &sealed),
            refused
        );
        assert_eq!(
            try_open(&key, &[8; 16], 7, 2, &nonce, &tag, &sealed),
            refused
        );
        assert_eq!(try_open(&key, &file, 6, 2, &nonce, &tag, &sealed), refused);
        assert_eq!(try_open(&key, &file, 7, 1, &nonce, &tag, &sealed), refused);
        let mut n2 = nonce;
        n2[0] ^= 1;
        assert_eq!(try_open(&key, &file, 7, 2, &n2, &tag, &sealed), refused);
        let mut t2 = tag;
        t2[15] ^= 1;
        assert_eq!(try_open(&key, &file, 7, 2, &nonce, &t2, &sealed), refused);
        for i in [0, 100, BLOCK - 1] {
            let mut b = sealed.clone();
            b[i] ^= 1;
            assert_eq!(
                try_open(&key, &file, 7, 2, &nonce, &tag, &b),
                refused,
                "bit {i}"
            );
        }
    }
}
