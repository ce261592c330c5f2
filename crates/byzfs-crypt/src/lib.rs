//! ByzFS's client-side cryptography: the Plutus layer of issue #28, on modern primitives
//! (design: `docs/ENCRYPTION.md`). The replicas never hold any key this crate
//! makes; they store what it seals.
//!
//! - [`block`]: 4 KiB blocks sealed with XChaCha20-Poly1305 under a per-file content key,
//!   bound to their file, index and key version.
//! - [`file`](mod@file): how an encrypted mount stores a file: sealed blocks and their entries, the
//!   tree's nodes, names, link targets and extended attributes.
//! - [`layout`]: where blocks, entries and the tree's nodes lie in the stored file.
//! - [`tree`]: the BLAKE3 Merkle tree over a file's blocks (chunks, groups, root), whose
//!   nodes live beside the blocks.
//! - [`header`]: a file's `(key version, file version, root, sealed size)`, signed by the
//!   group's writer key of that version (Ed25519), with the owner's certificate of that key.
//! - [`lockbox`]: a group's keys sealed to one member's X25519 public key.
//! - [`member`]: members' identities, the lockboxes of a group's record, and an owner's
//!   keys derived from its identity alone.
//! - [`regression`]: the group seed of each key version, a hash chain that lets members
//!   derive older versions and no newer one (key regression, for lazy revocation).
//! - [`names`]: directory entries' names under AES-256-SIV (deterministic, so lookups stay
//!   exact-match lookups), padded to 16 bytes and base64url-encoded.
//!
//! ```
//! use byzfs_crypt::{block, regression::Owner};
//!
//! let owner = Owner::new(&mut rand_core::OsRng);
//! let keys = owner.group_keys(1).unwrap();
//! let file = [7u8; 16];
//! let sealed = block::seal(&keys.content_key(&file), &file, 0, 1, b"hello", &mut rand_core::OsRng);
//! let opened = block::open(&keys.content_key(&file), &file, 0, 1, &sealed).unwrap();
//! assert_eq!(opened, b"hello");
//! ```

pub mod block;
pub mod file;
pub mod header;
pub mod layout;
pub mod lockbox;
pub mod member;
pub mod names;
pub mod regression;
pub mod tree;

/// Why sealed data was refused. Nothing this crate refuses is ever returned as plaintext.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CryptError {
    /// The ciphertext, its tag, or what it is bound to (file, block, version) does not
    /// match: tampered, misplaced, or sealed under another key.
    #[error("authentication failed: {0}")]
    Tampered(&'static str),
    /// The input is too short or too long to be what it claims.
    #[error("malformed: {0}")]
    Malformed(&'static str),
    /// A signature does not verify under the key it must verify under.
    #[error("bad signature on {0}")]
    BadSignature(&'static str),
    /// A key version outside what the holder can derive.
    #[error("key version {asked} is not available (have up to {have})")]
    NoSuchVersion {
        /// Asked for.
        asked: u32,
        /// The newest the holder can derive.
        have: u32,
    },
    /// A name too long to encrypt within the file system's 255-byte limit.
    /// The identity has no lockbox in the group's record.
    #[error("not a member of the group")]
    NotMember,
    #[error("name of {0} bytes is too long to encrypt (at most {max})", max = names::PLAIN_NAME_MAX)]
    NameTooLong(usize),
}
