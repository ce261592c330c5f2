//! File data in fixed blocks of [`BLOCK_SIZE`] bytes, one store record per block.
//!
//! * **Sparse:** a missing block is a hole and reads as zeros. Truncating up stores nothing.
//! * **Short blocks:** a stored block may be shorter than [`BLOCK_SIZE`]; the bytes after its
//!   end read as zeros. A block never extends past the file size (truncation cuts it), so
//!   extending a file later exposes zeros, never old data.
//! * **Why 16 KiB:** a 1 MiB write touches 64 records and a GB file 65,536, small enough to
//!   keep per-record overhead (key, digest leaf) negligible; small enough that a 4 KiB
//!   overwrite rewrites (and re-hashes) little. Small files store only their bytes.
//! * **Placement:** blocks go to partitions by groups of [`GROUP_BLOCKS`] (see `crate::key`).
//!
//! Cost: a read or write touches `len / BLOCK_SIZE + 2` blocks, and a write one group record
//! per group in which it stores a new block. Each group that holds blocks has a record with
//! its block count (`crate::key::group`), so truncation (and removing the last link of a
//! file) costs O(stored groups past the new size), never O(file size): a 1-byte write at
//! 1 TiB followed by a truncation to 0 is cheap, so no client can make every replica scan
//! a million empty groups.

use crate::attr::MAX_FILE_SIZE;
use crate::errno::{Errno, Res};
use crate::inode::Inode;
use crate::key;
use crate::store::{Store, StoreError, Txn};
use std::collections::BTreeMap;

/// Bytes per data block.
pub const BLOCK_SIZE: u64 = 16 * 1024;
/// Blocks per placement group (1 MiB of data share a partition).
pub const GROUP_BLOCKS: u64 = 64;

/// Reads up to `count` bytes at `offset` of file `ino`, clipped to its size; and whether the
/// read reached the end of the file.
pub(crate) fn read<S: Store + ?Sized>(
    txn: &Txn<'_, S>,
    ino: u64,
    inode: &Inode,
    offset: u64,
    count: u64,
) -> Res<(Vec<u8>, bool)> {
    if offset >= inode.size || count == 0 {
        return Ok((Vec::new(), offset >= inode.size));
    }
    let end = inode.size.min(offset.saturating_add(count));
    // `end - offset <= count`, which the caller bounds by `MAX_IO`.
    let mut out = vec![0u8; (end - offset) as usize];
    for idx in offset / BLOCK_SIZE..=(end - 1) / BLOCK_SIZE {
        let Some(block) = txn.get(&key::block(ino, idx))? else {
            continue;
        };
        let bstart = idx * BLOCK_SIZE;
        let lo = offset.max(bstart);
        let hi = end.min(bstart + block.len() as u64);
        if lo < hi {
            let src = &block[(lo - bstart) as usize..(hi - bstart) as usize];
            out[(lo - offset) as usize..(hi - offset) as usize].copy_from_slice(src);
        }
    }
    Ok((out, end == inode.size))
}

/// Writes `data` at `offset` of file `ino`, updating `inode`'s size and `used`. Returns the change in stored bytes. `EFBIG` past [`MAX_FILE_SIZE`].
pub(crate) fn write<S: Store + ?Sized>(
    txn: &mut Txn<'_, S>,
    ino: u64,
    inode: &mut Inode,
    offset: u64,
    data: &[u8],
) -> Res<i64> {
    let end = offset
        .checked_add(data.len() as u64)
        .filter(|&e| e <= MAX_FILE_SIZE)
        .ok_or(Errno::EFBIG)?;
    if data.is_empty() {
        return Ok(0);
    }
    let mut delta: i64 = 0;
    let mut new_blocks: BTreeMap<u64, u64> = BTreeMap::new();
    let last = (end - 1) / BLOCK_SIZE;
    for idx in offset / BLOCK_SIZE..=last {
        let bstart = idx * BLOCK_SIZE;
        let lo = offset.max(bstart) - bstart;
        let hi = end.min(bstart + BLOCK_SIZE) - bstart;
        let k = key::block(ino, idx);
        let mut block = match txn.get(&k)? {
            Some(b) => b,
            None => {
                *new_blocks.entry(idx / GROUP_BLOCKS).or_default() += 1;
                Vec::new()
            }
        };
        let old_len = block.len();
        // `hi <= BLOCK_SIZE`, so these fit `usize`.
        if block.len() < hi as usize {
            block.resize(hi as usize, 0);
        }
        let src_lo = (bstart + lo - offset) as usize;
        block[lo as usize..hi as usize].copy_from_slice(&data[src_lo..src_lo + (hi - lo) as usize]);
        delta += block.len() as i64 - old_len as i64;
        txn.put(k, block);
    }
    for (g, n) in new_blocks {
        let count = group_count(txn, ino, g)? + n;
        txn.put(key::group(ino, g), count.to_le_bytes().to_vec());
    }
    inode.size = inode.size.max(end);
    inode.used = inode.used.saturating_add_signed(delta);
    Ok(delta)
}

/// Sets the size of file `ino` to `size`: cuts the block containing the new end and deletes
/// every block after it. Returns the change in stored bytes. `EFBIG` past [`MAX_FILE_SIZE`].
pub(crate) fn truncate<S: Store + ?Sized>(
    txn: &mut Txn<'_, S>,
    ino: u64,
    inode: &mut Inode,
    size: u64,
) -> Res<i64> {
    if size > MAX_FILE_SIZE {
        return Err(Errno::EFBIG.into());
    }
    let mut delta: i64 = 0;
    if size < inode.size {
        let first_dead = size.div_ceil(BLOCK_SIZE);
        let cut = size % BLOCK_SIZE;
        if cut != 0 {
            let k = key::block(ino, size / BLOCK_SIZE);
            if let Some(mut b) = txn.get(&k)? {
                if b.len() as u64 > cut {
                    delta -= (b.len() as u64 - cut) as i64;
                    b.truncate(cut as usize);
                    txn.put(k, b);
                }
            }
        }
        // Every stored group from the one holding `first_dead` on.
        let start = key::group(ino, first_dead / GROUP_BLOCKS);
        let end = key::group(ino, u64::MAX);
        for (gk, count) in txn.range(&start, &end, usize::MAX)? {
            let g = tail_u64(&gk);
            let mut left = decode_count(&count)?;
            let from = first_dead.max(g * GROUP_BLOCKS);
            let to = g * GROUP_BLOCKS + GROUP_BLOCKS - 1;
            let bstart = key::block(ino, from);
            // Just past `block(ino, to)`: same placement, so one partition is scanned.
            let mut bend = key::block(ino, to);
            bend.push(0);
            for (k, v) in txn.range(&bstart, &bend, usize::MAX)? {
                delta -= v.len() as i64;
                left = left.saturating_sub(1);
                txn.delete(k);
            }
            if left == 0 {
                txn.delete(gk);
            } else {
                txn.put(gk, left.to_le_bytes().to_vec());
            }
        }
    }
    inode.size = size;
    inode.used = inode.used.saturating_add_signed(delta);
    Ok(delta)
}

/// The last 8 bytes of a key as a big-endian `u64` (the group or block index).
fn tail_u64(k: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&k[k.len() - 8..]);
    u64::from_be_bytes(b)
}

fn decode_count(v: &[u8]) -> Result<u64, StoreError> {
    <[u8; 8]>::try_from(v)
        .map(u64::from_le_bytes)
        .map_err(|_| StoreError::Io("corrupt group record".into()))
}

/// Stored blocks of group `g` of file `ino`.
fn group_count<S: Store + ?Sized>(txn: &Txn<'_, S>, ino: u64, g: u64) -> Res<u64> {
    match txn.get(&key::group(ino, g))? {
        Some(v) => Ok(decode_count(&v)?),
        None => Ok(0),
    }
}
