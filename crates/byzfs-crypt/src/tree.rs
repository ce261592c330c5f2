//! The Merkle tree over a file's blocks (docs/ENCRYPTION.md "Data"): BLAKE3,
//! three levels above the blocks' leaves, each node a flat hash of its children.
//!
//! | level | node | children | stored at ([`crate::file`]) |
//! |---|---|---|---|
//! | chunk | [`chunk_hash`] of a chunk's 256 entries (each with its block's leaf) | 256 blocks | its hash in a *slot*, [`crate::file::slot_offset`] |
//! | group | [`group_hash`] of 416 chunks' slots | 416 chunks (416 MiB) | its hash in the group list, [`crate::file::group_offset`] |
//! | root | [`root`] of the file's chunk count and the group hashes | up to 416 groups | in the writer-signed header ([`crate::header`]) |
//!
//! A node whose children are all zeros (a hole: a chunk never written, a group of such
//! chunks) hashes to zeros, so a sparse file's holes need no stored node at all; every
//! other hash is domain-separated and names the file and the node's place, so no node
//! can stand for another file's or another place's. A reader checks a block against the
//! root with its chunk's entries, its group's slots and the group list (a file of one
//! group needs no list: its one group hash is computed from the slots).

use crate::file::{CHUNK_BLOCKS, ENTRY};

/// A 32-byte BLAKE3 hash.
pub type Hash = [u8; 32];

/// Bytes of a chunk's entries.
pub const REGION: usize = CHUNK_BLOCKS as usize * ENTRY;
/// Chunks per group: as many slots as fit beside a chunk's entries in its 32 KiB of
/// metadata.
pub const GROUP_CHUNKS: u64 = ((32 * 1024 - REGION) / 32) as u64;
/// Most groups a file has: as many as fit in one chunk's spare room, which bounds an
/// encrypted file to 416 × 416 MiB (169 GiB).
pub const MAX_GROUPS: u64 = GROUP_CHUNKS;

fn is_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

fn hash_padded(context: &str, file: &[u8; 16], place: u64, bytes: &[u8], len: usize) -> Hash {
    let mut h = blake3::Hasher::new_derive_key(context);
    h.update(file);
    h.update(&place.to_be_bytes());
    h.update(bytes);
    h.update(&vec![0u8; len.saturating_sub(bytes.len())]);
    *h.finalize().as_bytes()
}

/// The hash of chunk `c` of `file` from its entries (`region`: at most [`REGION`] bytes,
/// the rest zeros); zeros for a chunk with no block.
pub fn chunk_hash(file: &[u8; 16], c: u64, region: &[u8]) -> Hash {
    if is_zero(region) {
        return [0; 32];
    }
    hash_padded("byzfs-crypt 2026-11 chunk node", file, c, region, REGION)
}

/// The hash of group `g` of `file` from its chunks' hashes (at most [`GROUP_CHUNKS`], the
/// rest zeros); zeros for a group with no block.
pub fn group_hash(file: &[u8; 16], g: u64, slots: &[Hash]) -> Hash {
    let flat: Vec<u8> = slots.concat();
    if is_zero(&flat) {
        return [0; 32];
    }
    hash_padded(
        "byzfs-crypt 2026-11 group node",
        file,
        g,
        &flat,
        GROUP_CHUNKS as usize * 32,
    )
}

/// The root of `file` of `chunks` chunks from its groups' hashes.
pub fn root(file: &[u8; 16], chunks: u64, groups: &[Hash]) -> Hash {
    hash_padded(
        "byzfs-crypt 2026-11 file root",
        file,
        chunks,
        &groups.concat(),
        0,
    )
}

/// The chunks of a file of `size` plaintext bytes.
pub fn chunks_of(size: u64) -> u64 {
    size.div_ceil(crate::file::BLOCK).div_ceil(CHUNK_BLOCKS)
}

/// The groups of a file of `chunks` chunks.
pub fn groups_of(chunks: u64) -> u64 {
    chunks.div_ceil(GROUP_CHUNKS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_hash_to_zeros_and_every_node_names_its_file_and_place() {
        let (f, g) = ([1; 16], [2; 16]);
        assert_eq!((REGION, GROUP_CHUNKS, MAX_GROUPS), (19_456, 416, 416));
        assert_eq!(chunk_hash(&f, 3, &[0; 100]), [0; 32]);
        assert_eq!(group_hash(&f, 3, &[[0; 32]; 5]), [0; 32]);
        let r = [7u8; 76];
        let c = chunk_hash(&f, 3, &r);
        assert_ne!(c, [0; 32]);
        assert_ne!(c, chunk_hash(&g, 3, &r), "another file");
        assert_ne!(c, chunk_hash(&f, 4, &r), "another place");
        let mut padded = r.to_vec();
        padded.resize(REGION, 0);
        assert_eq!(
            c,
            chunk_hash(&f, 3, &padded),
            "zeros after the entries read"
        );
        let mut longer = r.to_vec();
        longer.push(1);
        assert_ne!(c, chunk_hash(&f, 3, &longer));
        let s = group_hash(&f, 0, &[c]);
        assert_eq!(s, group_hash(&f, 0, &[c, [0; 32]]));
        assert_ne!(s, group_hash(&f, 1, &[c]));
        assert_ne!(s, group_hash(&f, 0, &[[0; 32], c]), "order");
        assert_ne!(root(&f, 1, &[s]), root(&f, 2, &[s]), "the chunk count");
        assert_ne!(root(&f, 1, &[s]), root(&g, 1, &[s]));
        assert_eq!((chunks_of(0), chunks_of(1), chunks_of(1 << 20)), (0, 1, 1));
        assert_eq!(chunks_of((1 << 20) + 1), 2);
        assert_eq!((groups_of(0), groups_of(416), groups_of(417)), (0, 1, 2));
    }
}
