//! How an encrypted mount stores a file of a group at the replicas (docs/ENCRYPTION.md
//! "Data"): what each plaintext thing becomes.
//!
//! | plaintext | stored as |
//! |---|---|
//! | block `i` of a regular file (4096 bytes, the last one padded with zeros) | its data: 4096 bytes of XChaCha20 ciphertext ([`crate::block::seal_detached`], under the content key of the newest key version, bound to file, index and version) at [`data_offset`], a multiple of 4096 (so whole-block writes stay whole blocks at the replicas); its entry: key version ‖ nonce ‖ tag ‖ [`leaf`] at [`entry_offset`], 256 entries before each chunk of 256 blocks. A hole (entry and data all zeros) stays a hole and reads as zeros |
//! | the file's size | its [`Header`], sealed the same way at index [`HEADER_INDEX`], in the replicas' `Attr::crypt`; the stored size ends with the last block's data ([`sealed_size`]), so the size leaks rounded up to 4 KiB |
//! | a name in a directory | [`crate::names`] under the directory's name key of the key version its [`DirHeader`] names |
//! | a symbolic link's target | base64url of key version ‖ XChaCha20-Poly1305 under the group's link key |
//! | an extended attribute | name: `user.`/`trusted.` ‖ [`crate::names`] under the file's name key of version 1; value: key version ‖ XChaCha20-Poly1305 under the file's content key, bound to file and name |
//!
//! Nonces are random (192 bits) everywhere, so no rewrite repeats one.

use crate::layout::{BLOCK, ENTRY};
use crate::regression::GroupKeys;
use crate::{block, names, CryptError};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand_core::{CryptoRng, RngCore};

/// The block index a file's header is sealed at (no data block has it).
pub const HEADER_INDEX: u64 = u64::MAX;
/// Longest symbolic link target that seals within the 4095-byte limit on targets.
pub const TARGET_MAX: usize = 3_000;
/// Longest extended attribute value that seals within the 64 KiB limit on values.
pub const XATTR_VALUE_MAX: usize = 65_536 - 64;

/// A file's id for its keys: its inode number and generation.
pub fn file_id(ino: u64, generation: u64) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&ino.to_be_bytes());
    id[8..].copy_from_slice(&generation.to_be_bytes());
    id
}

/// The keys of `version` from `keys` (the newest a member holds).
fn keys_of(keys: &GroupKeys, version: u32) -> Result<GroupKeys, CryptError> {
    if version == keys.version() {
        Ok(keys.clone())
    } else {
        keys.older(version)
    }
}

fn split_version(sealed: &[u8]) -> Result<(u32, &[u8]), CryptError> {
    if sealed.len() < 4 {
        return Err(CryptError::Malformed("sealed data"));
    }
    let (v, rest) = sealed.split_at(4);
    let v = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
    Ok((v, rest))
}

/// A block as stored: its data where [`data_offset`] says, its entry where
/// [`entry_offset`] says.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SealedBlock {
    /// [`BLOCK`] bytes of ciphertext.
    pub data: Vec<u8>,
    /// Its metadata entry.
    pub entry: [u8; ENTRY],
}

/// The leaf of a block: BLAKE3 over its entry's first 44 bytes and its data, the leaf a
/// Merkle tree over the file's blocks is built from (docs/ENCRYPTION.md "Data").
pub fn leaf(head: &[u8], data: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("byzfs-crypt 2026-11 block leaf");
    // One contiguous update: BLAKE3 hashes whole 1 KiB chunks side by side only when they
    // lie together in one call; the 44-byte head ahead of the data misaligned every chunk
    // (2.5 µs a block against 1.0, `byzfs bench crypt`). The hash is the same.
    let mut joined = [0u8; LEAF_HEAD + block::BLOCK];
    let n = head.len() + data.len();
    if n <= joined.len() {
        joined[..head.len()].copy_from_slice(head);
        joined[head.len()..n].copy_from_slice(data);
        h.update(&joined[..n]);
    } else {
        h.update(head);
        h.update(data);
    }
    *h.finalize().as_bytes()
}

/// The entry's bytes a [`leaf`] covers: key version, nonce and tag.
const LEAF_HEAD: usize = 44;

/// Seals block `index` of `file` (`plain`: at most [`BLOCK`] bytes, padded with zeros)
/// under the newest version of `keys`.
pub fn seal_block(
    keys: &GroupKeys,
    file: &[u8; 16],
    index: u64,
    plain: &[u8],
    rng: &mut (impl RngCore + CryptoRng),
) -> SealedBlock {
    let mut data = plain.to_vec();
    data.resize(block::BLOCK, 0);
    let v = keys.version();
    let (nonce, tag) =
        block::seal_detached(&keys.content_key(file), file, index, v, &mut data, rng);
    let mut entry = [0u8; ENTRY];
    entry[..4].copy_from_slice(&v.to_be_bytes());
    entry[4..28].copy_from_slice(&nonce);
    entry[28..44].copy_from_slice(&tag);
    let l = leaf(&entry[..LEAF_HEAD], &data);
    entry[LEAF_HEAD..].copy_from_slice(&l);
    SealedBlock { data, entry }
}

/// Opens stored block `index` of `file` from its `data` and `entry`: [`BLOCK`] bytes. A
/// hole (entry and data all zeros) reads as zeros; data without an entry, a leaf that does
/// not match, or a block that does not open is refused. A block of a newer key version
/// than `keys` is `NoSuchVersion` (the member's keys are stale: read the group again).
pub fn open_block(
    keys: &GroupKeys,
    file: &[u8; 16],
    index: u64,
    data: &[u8],
    entry: &[u8],
) -> Result<Vec<u8>, CryptError> {
    if data.len() as u64 != BLOCK || entry.len() != ENTRY {
        return Err(CryptError::Malformed("sealed block length"));
    }
    if entry.iter().all(|&b| b == 0) {
        if data.iter().all(|&b| b == 0) {
            return Ok(vec![0; block::BLOCK]);
        }
        return Err(CryptError::Tampered("block data without its entry"));
    }
    if leaf(&entry[..LEAF_HEAD], data) != entry[LEAF_HEAD..] {
        return Err(CryptError::Tampered("block leaf"));
    }
    let (v, rest) = split_version(entry)?;
    let k = keys_of(keys, v)?;
    let nonce: [u8; 24] = rest[..24]
        .try_into()
        .map_err(|_| CryptError::Malformed("entry"))?;
    let tag: [u8; 16] = rest[24..40]
        .try_into()
        .map_err(|_| CryptError::Malformed("entry"))?;
    let mut out = data.to_vec();
    block::open_detached(&k.content_key(file), file, index, v, &nonce, &tag, &mut out)?;
    Ok(out)
}

/// Opens the blocks of one file whose entries its signed tree vouches for (a mount's
/// read: every entry checked against the header's root first, the mount's
/// `crypt_nodes.rs`). The leaf, in the entry, covers the nonce, the tag and the
/// ciphertext, and the tree covers the leaf: a block that matches its leaf is the one the
/// header's writer sealed, so its Poly1305 tag adds nothing and is not computed again;
/// only the XChaCha20 stream is applied (about 2.9 µs a block instead of 6.8,
/// `byzfs bench crypt`). [`open_block`] checks the tag, for entries nothing vouches for.
/// The content key of each key version met is derived once.
pub struct VouchedBlocks<'a> {
    keys: &'a GroupKeys,
    file: [u8; 16],
    key: Option<(u32, ContentKey)>,
}

/// A file's content key of one version, wiped when dropped.
struct ContentKey([u8; 32]);

impl Drop for ContentKey {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

impl<'a> VouchedBlocks<'a> {
    /// The opener of `file`'s blocks with the member's newest `keys`.
    pub fn new(keys: &'a GroupKeys, file: &[u8; 16]) -> VouchedBlocks<'a> {
        VouchedBlocks {
            keys,
            file: *file,
            key: None,
        }
    }

    /// Opens a block from its `data` ([`BLOCK`] bytes) and its vouched `entry` into `out`
    /// ([`BLOCK`] bytes): zeros for a hole; refused as [`open_block`] refuses, but for the
    /// tag. The block's place needs no check here: the tree's nodes name their file and
    /// place, so the entry vouched for at a place is the one sealed there.
    pub fn open(&mut self, data: &[u8], entry: &[u8], out: &mut [u8]) -> Result<(), CryptError> {
        use chacha20::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
        if data.len() as u64 != BLOCK || entry.len() != ENTRY || out.len() != data.len() {
            return Err(CryptError::Malformed("sealed block length"));
        }
        if entry.iter().all(|&b| b == 0) {
            if data.iter().all(|&b| b == 0) {
                out.fill(0);
                return Ok(());
            }
            return Err(CryptError::Tampered("block data without its entry"));
        }
        if leaf(&entry[..LEAF_HEAD], data) != entry[LEAF_HEAD..] {
            return Err(CryptError::Tampered("block leaf"));
        }
        let (v, rest) = split_version(entry)?;
        let key = match &self.key {
            Some((kv, k)) if *kv == v => &k.0,
            _ => {
                let k = ContentKey(keys_of(self.keys, v)?.content_key(&self.file));
                &self.key.insert((v, k)).1 .0
            }
        };
        let nonce: &[u8; 24] = rest[..24]
            .try_into()
            .map_err(|_| CryptError::Malformed("entry"))?;
        out.copy_from_slice(data);
        // XChaCha20-Poly1305's ciphertext is the stream from its second 64-byte block on
        // (the first keys Poly1305): `a_vouched_block_opens_as_the_aead_opens_it`.
        let mut stream = chacha20::XChaCha20::new(key.into(), nonce.into());
        stream.seek(64u64);
        stream.apply_keystream(out);
        Ok(())
    }
}

/// What the header of a regular file holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Header {
    /// The plaintext size.
    pub size: u64,
}

/// Seals `h` for `file` under the newest version of `keys`.
pub fn seal_header(
    keys: &GroupKeys,
    file: &[u8; 16],
    h: Header,
    rng: &mut (impl RngCore + CryptoRng),
) -> Vec<u8> {
    let mut plain = h.size.to_be_bytes().to_vec();
    plain.extend_from_slice(&[0; 8]);
    let v = keys.version();
    let mut out = v.to_be_bytes().to_vec();
    out.extend(block::seal(
        &keys.content_key(file),
        file,
        HEADER_INDEX,
        v,
        &plain,
        rng,
    ));
    out
}

/// Opens a file's sealed header; none (empty) is an empty file's.
pub fn open_header(keys: &GroupKeys, file: &[u8; 16], sealed: &[u8]) -> Result<Header, CryptError> {
    if sealed.is_empty() {
        return Ok(Header::default());
    }
    let (v, rest) = split_version(sealed)?;
    let k = keys_of(keys, v)?;
    let plain = block::open(&k.content_key(file), file, HEADER_INDEX, v, rest)?;
    let size: [u8; 8] = plain
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or(CryptError::Malformed("header"))?;
    Ok(Header {
        size: u64::from_be_bytes(size),
    })
}

/// What the header of a directory holds: the key version of its names' key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DirHeader {
    /// Names in the directory are sealed under this version's name key.
    pub names: u32,
}

/// Seals a directory's header for `dir` under the newest version of `keys`.
pub fn seal_dir_header(
    keys: &GroupKeys,
    dir: &[u8; 16],
    h: DirHeader,
    rng: &mut (impl RngCore + CryptoRng),
) -> Vec<u8> {
    seal_header(
        keys,
        dir,
        Header {
            size: u64::from(h.names),
        },
        rng,
    )
}

/// Opens a directory's header; none (empty) means version 1.
pub fn open_dir_header(
    keys: &GroupKeys,
    dir: &[u8; 16],
    sealed: &[u8],
) -> Result<DirHeader, CryptError> {
    if sealed.is_empty() {
        return Ok(DirHeader { names: 1 });
    }
    let h = open_header(keys, dir, sealed)?;
    let names = u32::try_from(h.size).map_err(|_| CryptError::Malformed("directory header"))?;
    Ok(DirHeader { names })
}

/// The stored name of `name` in directory `dir` whose header is `h`.
pub fn seal_name(
    keys: &GroupKeys,
    dir: &[u8; 16],
    h: DirHeader,
    name: &[u8],
) -> Result<Vec<u8>, CryptError> {
    let k = keys_of(keys, h.names)?;
    Ok(names::seal(&k.name_key(dir), name)?.into_bytes())
}

/// The plain name of stored name `entry` in directory `dir` whose header is `h`.
pub fn open_name(
    keys: &GroupKeys,
    dir: &[u8; 16],
    h: DirHeader,
    entry: &[u8],
) -> Result<Vec<u8>, CryptError> {
    let k = keys_of(keys, h.names)?;
    let text = std::str::from_utf8(entry).map_err(|_| CryptError::Malformed("name"))?;
    names::open(&k.name_key(dir), text)
}

fn seal_bytes(
    key: &[u8; 32],
    aad: &[u8],
    version: u32,
    plain: &[u8],
    rng: &mut (impl RngCore + CryptoRng),
) -> Vec<u8> {
    let mut nonce = [0u8; 24];
    rng.fill_bytes(&mut nonce);
    let sealed = XChaCha20Poly1305::new(key.into())
        .encrypt(XNonce::from_slice(&nonce), Payload { msg: plain, aad })
        // Refused only beyond 256 GiB.
        .unwrap_or_default();
    let mut out = version.to_be_bytes().to_vec();
    out.extend_from_slice(&nonce);
    out.extend(sealed);
    out
}

fn open_bytes(
    key: &[u8; 32],
    aad: &[u8],
    rest: &[u8],
    what: &'static str,
) -> Result<Vec<u8>, CryptError> {
    if rest.len() < 24 + 16 {
        return Err(CryptError::Malformed(what));
    }
    let (nonce, body) = rest.split_at(24);
    XChaCha20Poly1305::new(key.into())
        .decrypt(XNonce::from_slice(nonce), Payload { msg: body, aad })
        .map_err(|_| CryptError::Tampered(what))
}

/// The id the group's link key derives from (a link's target is sealed before its inode
/// exists, so it is bound to the group, not to the link).
const LINKS: [u8; 16] = *b"byzfs-symlinks-1";
/// Bound to a link's sealed target (2: padded like names, `names::pad`).
const LINK_AAD: &[u8] = b"byzfs-link2";

/// The stored target of a symbolic link: base64url, at most 4095 bytes.
pub fn seal_target(
    keys: &GroupKeys,
    target: &[u8],
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<Vec<u8>, CryptError> {
    if target.len() > TARGET_MAX {
        return Err(CryptError::NameTooLong(target.len()));
    }
    let sealed = seal_bytes(
        &keys.content_key(&LINKS),
        LINK_AAD,
        keys.version(),
        &names::pad(target),
        rng,
    );
    Ok(URL_SAFE_NO_PAD.encode(sealed).into_bytes())
}

/// The plain target of a stored one.
pub fn open_target(keys: &GroupKeys, stored: &[u8]) -> Result<Vec<u8>, CryptError> {
    let sealed = URL_SAFE_NO_PAD
        .decode(stored)
        .map_err(|_| CryptError::Malformed("link target encoding"))?;
    let (v, rest) = split_version(&sealed)?;
    let k = keys_of(keys, v)?;
    let padded = open_bytes(&k.content_key(&LINKS), LINK_AAD, rest, "link target")?;
    names::unpad(padded, "link target padding")
}

/// What `lstat` shows for a stored target of `stored` bytes: the longest plain target it
/// may hold (targets are padded to 16 bytes, so the exact length is known only to readers
/// of the target; a size above the target's length is what `readlink` callers tolerate).
pub fn target_len(stored: u64) -> u64 {
    // base64 without padding: 4 characters per 3 bytes, 2 or 3 for a last 1 or 2.
    let bytes = stored / 4 * 3 + (stored % 4).saturating_sub(1);
    // The padding is at least the 0x80 byte.
    bytes.saturating_sub(4 + 24 + 16 + 1)
}

/// The stored name of extended attribute `name` (`namespace.rest`) of `file`; names
/// without a namespace stay as they are (the replicas refuse them).
pub fn seal_xattr_name(
    keys: &GroupKeys,
    file: &[u8; 16],
    name: &[u8],
) -> Result<Vec<u8>, CryptError> {
    let Some(dot) = name.iter().position(|&b| b == b'.') else {
        return Ok(name.to_vec());
    };
    let k = keys_of(keys, 1)?;
    let mut out = name[..=dot].to_vec();
    out.extend(names::seal(&k.name_key(file), &name[dot + 1..])?.into_bytes());
    Ok(out)
}

/// The plain name of a stored extended attribute name.
pub fn open_xattr_name(
    keys: &GroupKeys,
    file: &[u8; 16],
    stored: &[u8],
) -> Result<Vec<u8>, CryptError> {
    let dot = stored
        .iter()
        .position(|&b| b == b'.')
        .ok_or(CryptError::Malformed("attribute name"))?;
    let k = keys_of(keys, 1)?;
    let text = std::str::from_utf8(&stored[dot + 1..])
        .map_err(|_| CryptError::Malformed("attribute name"))?;
    let mut out = stored[..=dot].to_vec();
    out.extend(names::open(&k.name_key(file), text)?);
    Ok(out)
}

fn xattr_aad(file: &[u8; 16], stored_name: &[u8]) -> Vec<u8> {
    // 2: values padded like names (`names::pad`).
    let mut aad = b"byzfs-xattr2".to_vec();
    aad.extend_from_slice(file);
    aad.extend_from_slice(stored_name);
    aad
}

/// The stored value of extended attribute `stored_name` of `file`.
pub fn seal_xattr_value(
    keys: &GroupKeys,
    file: &[u8; 16],
    stored_name: &[u8],
    value: &[u8],
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<Vec<u8>, CryptError> {
    if value.len() > XATTR_VALUE_MAX {
        return Err(CryptError::Malformed("attribute value too long"));
    }
    let aad = xattr_aad(file, stored_name);
    Ok(seal_bytes(
        &keys.content_key(file),
        &aad,
        keys.version(),
        &names::pad(value),
        rng,
    ))
}

/// The plain value of a stored one.
pub fn open_xattr_value(
    keys: &GroupKeys,
    file: &[u8; 16],
    stored_name: &[u8],
    stored: &[u8],
) -> Result<Vec<u8>, CryptError> {
    let (v, rest) = split_version(stored)?;
    let k = keys_of(keys, v)?;
    let padded = open_bytes(
        &k.content_key(file),
        &xattr_aad(file, stored_name),
        rest,
        "attribute value",
    )?;
    names::unpad(padded, "attribute value padding")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regression::Owner;
    use rand_core::OsRng;

    fn keys(v: u32) -> GroupKeys {
        Owner::from_bytes([5; 32]).group_keys(v).unwrap()
    }

    #[test]
    fn a_vouched_block_opens_as_the_aead_opens_it() {
        let f = file_id(7, 1);
        let k3 = keys(3);
        let mut opener = VouchedBlocks::new(&k3, &f);
        let mut out = vec![0xee; BLOCK as usize];
        // Versions met in turn (the key cached per version), short and whole blocks.
        for (i, (v, len)) in [(1, 1), (3, 4096), (1, 4095), (2, 0), (3, 17)]
            .into_iter()
            .enumerate()
        {
            let plain: Vec<u8> = (0..len).map(|b| (b * 7 + i) as u8).collect();
            let s = seal_block(&keys(v), &f, i as u64, &plain, &mut OsRng);
            let want = open_block(&k3, &f, i as u64, &s.data, &s.entry).unwrap();
            assert_eq!(opener.open(&s.data, &s.entry, &mut out), Ok(()));
            assert_eq!(out, want, "version {v}, {len} bytes");
        }
        // A hole is zeros; data without an entry, and every flipped bit of data or entry,
        // are refused (the leaf covers version, nonce, tag and data).
        let zeros = vec![0; BLOCK as usize];
        assert_eq!(opener.open(&zeros, &[0; ENTRY], &mut out), Ok(()));
        assert_eq!(out, zeros);
        let s = seal_block(&k3, &f, 9, b"abc", &mut OsRng);
        assert_eq!(
            opener.open(&s.data, &[0; ENTRY], &mut out),
            Err(CryptError::Tampered("block data without its entry"))
        );
        for i in (0..s.data.len()).step_by(61) {
            let mut t = s.data.clone();
            t[i] ^= 0x10;
            assert_eq!(
                opener.open(&t, &s.entry, &mut out),
                Err(CryptError::Tampered("block leaf")),
                "data bit {i}"
            );
        }
        for i in 0..ENTRY {
            let mut e = s.entry;
            e[i] ^= 0x10;
            assert!(opener.open(&s.data, &e, &mut out).is_err(), "entry bit {i}");
        }
        // A version newer than the member's keys, and wrong lengths.
        let s4 = seal_block(&keys(4), &f, 9, b"new", &mut OsRng);
        assert_eq!(
            opener.open(&s4.data, &s4.entry, &mut out),
            Err(CryptError::NoSuchVersion { asked: 4, have: 3 })
        );
        assert!(opener.open(&s.data[1..], &s.entry, &mut out).is_err());
        assert!(opener.open(&s.data, &s.entry, &mut out[1..]).is_err());
    }

    #[test]
    fn the_leaf_is_the_hash_of_head_then_data_at_any_length() {
        for (h, d) in [
            (44, 4096),
            (0, 0),
            (44, 100),
            (10, 5000),
            (4140, 0),
            (4141, 0),
        ] {
            let head: Vec<u8> = (0..h).map(|b| b as u8).collect();
            let data: Vec<u8> = (0..d).map(|b| (b * 3) as u8).collect();
            let mut two = blake3::Hasher::new_derive_key("byzfs-crypt 2026-11 block leaf");
            two.update(&head);
            two.update(&data);
            assert_eq!(leaf(&head, &data), *two.finalize().as_bytes(), "{h} + {d}");
        }
    }

    #[test]
    fn blocks_open_under_their_own_version_and_holes_read_as_zeros() {
        let (f, g) = (file_id(7, 1), file_id(8, 1));
        let s = seal_block(&keys(1), &f, 3, b"abc", &mut OsRng);
        assert_eq!(s.data.len() as u64, BLOCK);
        let mut want = b"abc".to_vec();
        want.resize(4096, 0);
        // A member at version 2 opens a version-1 block; one at version 1 cannot open
        // version 2's.
        assert_eq!(open_block(&keys(2), &f, 3, &s.data, &s.entry), Ok(want));
        let s2 = seal_block(&keys(2), &f, 3, b"new", &mut OsRng);
        assert_eq!(
            open_block(&keys(1), &f, 3, &s2.data, &s2.entry),
            Err(CryptError::NoSuchVersion { asked: 2, have: 1 })
        );
        let zeros = vec![0; BLOCK as usize];
        assert_eq!(
            open_block(&keys(1), &f, 3, &zeros, &[0; ENTRY]),
            Ok(zeros.clone())
        );
        assert_eq!(
            open_block(&keys(1), &f, 3, &s.data, &[0; ENTRY]),
            Err(CryptError::Tampered("block data without its entry"))
        );
        // Moved to another index or file, a flipped bit anywhere, or cut short: refused.
        let k2 = keys(2);
        assert!(open_block(&k2, &f, 4, &s.data, &s.entry).is_err());
        assert!(open_block(&k2, &g, 3, &s.data, &s.entry).is_err());
        for i in 0..s.data.len() {
            let mut t = s.data.clone();
            t[i] ^= 0x10;
            assert!(
                open_block(&k2, &f, 3, &t, &s.entry).is_err(),
                "data bit {i}"
            );
        }
        for i in 0..ENTRY {
            let mut e = s.entry;
            e[i] ^= 0x10;
            assert!(
                open_block(&k2, &f, 3, &s.data, &e).is_err(),
                "entry bit {i}"
            );
        }
        // Data changed without its entry: caught by the leaf before the block is opened.
        // (A holder of the content key can compute a leaf too: what stops a reader is the
        // writer-signed root over the leaves, docs/ENCRYPTION.md "Data".)
        let mut forged = s.data.clone();
        forged[0] ^= 1;
        assert_eq!(
            open_block(&k2, &f, 3, &forged, &s.entry),
            Err(CryptError::Tampered("block leaf"))
        );
        assert!(open_block(&k2, &f, 3, &s.data[1..], &s.entry).is_err());
        assert!(open_block(&k2, &f, 3, &s.data, &s.entry[1..]).is_err());
    }

    #[test]
    fn headers_names_targets_and_attributes_round_trip_and_refuse_tampering() {
        let (k, f, d) = (keys(3), file_id(7, 1), file_id(2, 1));
        let h = seal_header(&k, &f, Header { size: 12345 }, &mut OsRng);
        assert_eq!(open_header(&k, &f, &h), Ok(Header { size: 12345 }));
        assert_eq!(open_header(&k, &f, &[]), Ok(Header { size: 0 }));
        assert!(
            open_header(&k, &file_id(7, 2), &h).is_err(),
            "another file's"
        );
        let dh = seal_dir_header(&k, &d, DirHeader { names: 2 }, &mut OsRng);
        let dh = open_dir_header(&k, &d, &dh).unwrap();
        assert_eq!(dh, DirHeader { names: 2 });
        assert_eq!(open_dir_header(&k, &d, &[]), Ok(DirHeader { names: 1 }));
        let n = seal_name(&k, &d, dh, b"notes.txt").unwrap();
        assert_eq!(
            n,
            seal_name(&k, &d, dh, b"notes.txt").unwrap(),
            "deterministic"
        );
        assert_ne!(
            n,
            seal_name(&k, &d, DirHeader { names: 3 }, b"notes.txt").unwrap()
        );
        assert_eq!(open_name(&k, &d, dh, &n), Ok(b"notes.txt".to_vec()));
        assert!(open_name(&k, &file_id(3, 1), dh, &n).is_err());
        let t = seal_target(&k, b"../some/where", &mut OsRng).unwrap();
        assert!(!t.contains(&0) && !t.contains(&b'/'));
        assert_eq!(
            target_len(t.len() as u64),
            15,
            "13 bytes padded to 16, less 0x80"
        );
        assert_eq!(open_target(&keys(4), &t), Ok(b"../some/where".to_vec()));
        assert!(seal_target(&k, &[b'a'; TARGET_MAX + 1], &mut OsRng).is_err());
        let long = seal_target(&k, &[b'a'; TARGET_MAX], &mut OsRng).unwrap();
        assert!(long.len() <= 4095);
        assert_eq!(target_len(long.len() as u64), TARGET_MAX as u64 + 7);
        let xn = seal_xattr_name(&k, &f, b"user.mime").unwrap();
        assert!(xn.starts_with(b"user.") && !xn.ends_with(b"mime"));
        assert_eq!(open_xattr_name(&k, &f, &xn), Ok(b"user.mime".to_vec()));
        let xv = seal_xattr_value(&k, &f, &xn, b"text/plain", &mut OsRng).unwrap();
        assert_eq!(
            open_xattr_value(&k, &f, &xn, &xv),
            Ok(b"text/plain".to_vec())
        );
        assert!(
            open_xattr_value(&k, &f, b"user.other", &xv).is_err(),
            "moved to another name"
        );
        let mut bad = xv.clone();
        bad[10] ^= 1;
        assert!(open_xattr_value(&k, &f, &xn, &bad).is_err());
    }

    /// Issue #43 item 5 (8): link targets and attribute values leak their length rounded
    /// up to 16 bytes, as names do.
    #[test]
    fn targets_and_attribute_values_leak_only_their_length_rounded_to_16_bytes() {
        let (k, f) = (keys(3), file_id(7, 1));
        let target_len_of = |n: usize| seal_target(&k, &vec![b'a'; n], &mut OsRng).unwrap().len();
        let value_len_of = |n: usize| {
            seal_xattr_value(&k, &f, b"user.x", &vec![7; n], &mut OsRng)
                .unwrap()
                .len()
        };
        let lens = |of: &dyn Fn(usize) -> usize| [0, 1, 15, 16, 31, 32].map(of);
        assert_eq!(lens(&target_len_of), [80, 80, 80, 102, 102, 123]);
        assert_eq!(lens(&value_len_of), [60, 60, 60, 76, 76, 92]);
        for n in [0, 1, 15, 16, 31, 32] {
            let t = seal_target(&k, &vec![b'a'; n], &mut OsRng).unwrap();
            assert_eq!(open_target(&k, &t), Ok(vec![b'a'; n]));
            let v = seal_xattr_value(&k, &f, b"user.x", &vec![7; n], &mut OsRng).unwrap();
            assert_eq!(open_xattr_value(&k, &f, b"user.x", &v), Ok(vec![7; n]));
        }
    }
}
