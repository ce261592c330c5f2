//! The Merkle tree over a file's blocks (docs/ENCRYPTION.md "Data"): BLAKE3,
//! three levels above the blocks' leaves, each node a flat hash of its children.
//!
//! | level | node | children | stored at ([`crate::file`]) |
//! |---|---|---|---|
//! | chunk | [`chunk_hash`] of a chunk's 256 entries (each with its block's leaf) | 256 blocks | its hash in a *slot*, [`crate::layout::slot_offset`] |
//! | group | [`group_hash`] of 416 chunks' slots | 416 chunks (416 MiB) | its hash in the group list, [`crate::layout::group_offset`] |
//! | root | [`root`] of the file's chunk count and the group hashes | up to 416 groups | in the writer-signed header ([`crate::header`]) |
//!
//! A node whose children are all zeros (a hole: a chunk never written, a group of such
//! chunks) hashes to zeros, so a sparse file's holes need no stored node at all; every
//! other hash is domain-separated and names the file and the node's place, so no node
//! can stand for another file's or another place's. A reader checks a block against the
//! root with its chunk's entries, its group's slots and the group list (a file of one
//! group needs no list: its one group hash is computed from the slots).

use crate::layout::{GROUP_CHUNKS, REGION};

/// A 32-byte BLAKE3 hash.
pub type Hash = [u8; 32];

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::REGION;

    #[test]
    fn holes_hash_to_zeros_and_every_node_names_its_file_and_place() {
        let (f, g) = ([1; 16], [2; 16]);
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
    }
}
