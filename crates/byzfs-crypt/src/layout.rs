//! Where each thing of an encrypted file lies in the file the replicas store
//! (docs/ENCRYPTION.md "Data"): blocks of 4 KiB in chunks of 256, each chunk's metadata
//! entries before its data, the tree's slots and group list in the spare room after the
//! entries. [`crate::file`] seals what goes there; [`crate::tree`] hashes it.

/// Plaintext bytes per block.
pub const BLOCK: u64 = crate::block::BLOCK as u64;
/// Blocks per chunk (1 MiB): a chunk's blocks' metadata entries lie together before its
/// data.
pub const CHUNK_BLOCKS: u64 = 256;
/// Bytes of one block's metadata entry: key version (4, big-endian) ‖ nonce (24) ‖ tag
/// (16) ‖ leaf (32, [`crate::file::leaf`]); all zeros for a hole.
pub const ENTRY: usize = 4 + 24 + 16 + 32;
/// The replicas' block size (`byzfs_fs::data::BLOCK_SIZE`, checked by the mount's tests):
/// chunks and their data start at multiples of it, so a write of whole replica blocks
/// needs no read at the replicas.
pub const STORE_BLOCK: u64 = 16 * 1024;
/// Stored 4 KiB blocks a chunk's metadata takes: 256 entries (19,456 bytes), rounded up
/// to whole replica blocks (32 KiB).
pub const META_BLOCKS: u64 =
    (CHUNK_BLOCKS * ENTRY as u64).div_ceil(STORE_BLOCK) * (STORE_BLOCK / BLOCK);
/// Stored bytes per chunk: its metadata, then its blocks.
pub const CHUNK_SPAN: u64 = (META_BLOCKS + CHUNK_BLOCKS) * BLOCK;
/// Where block `index`'s metadata entry is stored.
pub fn entry_offset(index: u64) -> u64 {
    (index / CHUNK_BLOCKS) * CHUNK_SPAN + (index % CHUNK_BLOCKS) * ENTRY as u64
}

/// Where block `index`'s sealed data is stored: at a multiple of [`BLOCK`], so a write of
/// whole blocks covers whole blocks of the replicas' store.
pub fn data_offset(index: u64) -> u64 {
    (index / CHUNK_BLOCKS) * CHUNK_SPAN + (META_BLOCKS + index % CHUNK_BLOCKS) * BLOCK
}

/// Where the hash of chunk `c` is stored (its *slot*, [`crate::tree`]): in the spare room
/// after the entries of the first chunk of its group.
pub fn slot_offset(c: u64) -> u64 {
    let g = GROUP_CHUNKS;
    (c / g * g) * CHUNK_SPAN + REGION as u64 + (c % g) * 32
}

/// Where the hash of group `g` is stored: in the spare room of chunk 1, which starts no
/// group (a file of one group stores no group hash).
pub fn group_offset(g: u64) -> u64 {
    CHUNK_SPAN + REGION as u64 + g * 32
}

/// The largest plaintext size of an encrypted file ([`MAX_GROUPS`] groups).
pub const MAX_SIZE: u64 = MAX_GROUPS * GROUP_CHUNKS * CHUNK_BLOCKS * BLOCK;

/// The stored size of a file of `plain` bytes: to the end of its last block's data.
pub fn sealed_size(plain: u64) -> u64 {
    match plain.checked_sub(1) {
        None => 0,
        Some(last) => data_offset(last / BLOCK) + BLOCK,
    }
}

/// Bytes of a chunk's entries.
pub const REGION: usize = CHUNK_BLOCKS as usize * ENTRY;
/// Chunks per group: as many slots as fit beside a chunk's entries in its 32 KiB of
/// metadata.
pub const GROUP_CHUNKS: u64 = ((32 * 1024 - REGION) / 32) as u64;
/// Most groups a file has: as many as fit in one chunk's spare room, which bounds an
/// encrypted file to 416 × 416 MiB (169 GiB).
pub const MAX_GROUPS: u64 = GROUP_CHUNKS;

/// The chunks of a file of `size` plaintext bytes.
pub fn chunks_of(size: u64) -> u64 {
    size.div_ceil(BLOCK).div_ceil(CHUNK_BLOCKS)
}

/// The groups of a file of `chunks` chunks.
pub fn groups_of(chunks: u64) -> u64 {
    chunks.div_ceil(GROUP_CHUNKS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_keeps_data_aligned_and_entries_before_their_chunk() {
        assert_eq!((META_BLOCKS, CHUNK_SPAN), (8, 264 * 4096));
        assert_eq!((entry_offset(0), data_offset(0)), (0, 8 * 4096));
        assert_eq!((entry_offset(1), data_offset(1)), (76, 9 * 4096));
        assert_eq!(entry_offset(255), 255 * 76);
        assert_eq!(data_offset(255), 263 * 4096);
        assert_eq!(entry_offset(256), CHUNK_SPAN);
        assert_eq!(data_offset(256), CHUNK_SPAN + 8 * 4096);
        for i in [0, 1, 4, 255, 256, 1 << 30] {
            // Four plaintext blocks from a multiple of four fill one replica block.
            let first = i / 4 * 4;
            assert_eq!(data_offset(first) % STORE_BLOCK, 0, "aligned: {i}");
            assert_eq!(data_offset(first + 3), data_offset(first) + 3 * BLOCK);
            let chunk = (i / CHUNK_BLOCKS) * CHUNK_SPAN;
            assert!(entry_offset(i) + ENTRY as u64 <= chunk + META_BLOCKS * BLOCK);
        }
        assert_eq!(sealed_size(0), 0);
        assert_eq!(sealed_size(1), 9 * 4096);
        assert_eq!(sealed_size(4096), 9 * 4096);
        assert_eq!(sealed_size(4097), 10 * 4096);
        assert_eq!(sealed_size(256 * 4096), CHUNK_SPAN);
        assert_eq!(sealed_size(256 * 4096 + 1), CHUNK_SPAN + 9 * 4096);
        // Slots and the group list fill each chunk's spare room and meet nothing else.
        assert_eq!(slot_offset(0), 19_456);
        assert_eq!(slot_offset(415) + 32, 8 * 4096);
        assert_eq!(slot_offset(416), 416 * CHUNK_SPAN + 19_456);
        assert_eq!(group_offset(0), CHUNK_SPAN + 19_456);
        assert_eq!(group_offset(415) + 32, CHUNK_SPAN + 8 * 4096);
        assert_eq!(MAX_SIZE, (416 * 416) << 20);
    }

    #[test]
    fn the_tree_fits_in_a_chunks_spare_room() {
        assert_eq!((REGION, GROUP_CHUNKS, MAX_GROUPS), (19_456, 416, 416));
        assert_eq!((chunks_of(0), chunks_of(1), chunks_of(1 << 20)), (0, 1, 1));
        assert_eq!(chunks_of((1 << 20) + 1), 2);
        assert_eq!((groups_of(0), groups_of(416), groups_of(417)), (0, 1, 2));
    }
}
