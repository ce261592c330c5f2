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
//! Cost: a read or write touches `len / BLOCK_SIZE + 2` blocks. Truncation (and removing the
//! last link of a file) deletes blocks with one range scan per 1 MiB group between the new
//! size and the highest block ever written, so at most 2^20 scans at [`MAX_FILE_SIZE`].

use crate::attr::MAX_FILE_SIZE;
use crate::errno::{Errno, Res};
use crate::inode::Inode;
use crate::key;
use crate::store::{Store, Txn};

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

/// Writes `data` at `offset` of file `ino`, updating `inode`'s size, `used` and
/// `alloc_end`. Returns the change in stored bytes. `EFBIG` past [`MAX_FILE_SIZE`].
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
    let last = (end - 1) / BLOCK_SIZE;
    for idx in offset / BLOCK_SIZE..=last {
        let bstart = idx * BLOCK_SIZE;
        let lo = offset.max(bstart) - bstart;
        let hi = end.min(bstart + BLOCK_SIZE) - bstart;
        let k = key::block(ino, idx);
        let mut block = txn.get(&k)?.unwrap_or_default();
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
    inode.size = inode.size.max(end);
    inode.alloc_end = inode.alloc_end.max(last + 1);
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
        if first_dead < inode.alloc_end {
            let last = inode.alloc_end - 1;
            for g in first_dead / GROUP_BLOCKS..=last / GROUP_BLOCKS {
                let from = first_dead.max(g * GROUP_BLOCKS);
                let to = last.min(g * GROUP_BLOCKS + GROUP_BLOCKS - 1);
                let start = key::block(ino, from);
                // Just past `block(ino, to)`: same placement, so one partition is scanned.
                let mut end = key::block(ino, to);
                end.push(0);
                for (k, v) in txn.range(&start, &end, usize::MAX)? {
                    delta -= v.len() as i64;
                    txn.delete(k);
                }
            }
        }
        inode.alloc_end = inode.alloc_end.min(first_dead);
    }
    inode.size = size;
    inode.used = inode.used.saturating_add_signed(delta);
    Ok(delta)
}
