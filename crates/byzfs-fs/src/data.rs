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
//! its block count (`crate::key::group`), so finding the blocks past a size costs
//! O(stored groups), never O(file size): a 1-byte write at 1 TiB followed by a truncation to
//! 0 is cheap, so no client can make every replica scan a million empty groups. Deleting
//! them (`delete_from`) takes a budget: a truncation or removal that would delete more
//! leaves the rest to the reclaim queue ([`crate::reclaim`]), so no operation's cost grows
//! with the file's size.
//!
//! Blocks are keyed by the file's *data id* (`reclaim::DataRec`): its inode number,
//! or a fresh one after a truncation to zero of a large file, whose old blocks then go as a
//! whole.

use crate::fail::Res;
use crate::inode::Inode;
use crate::key;
use crate::proto::attr::MAX_FILE_SIZE;
use crate::proto::errno::Errno;
use crate::store::{Store, StoreError, Txn};
use std::collections::BTreeMap;

/// Bytes per data block.
pub const BLOCK_SIZE: u64 = 16 * 1024;
pub use crate::key::GROUP_BLOCKS;

/// Reads up to `count` bytes at `offset` of the file whose blocks are under data id
/// `data`, clipped to its size; and whether the read reached the end of the file.
pub(crate) fn read<S: Store + ?Sized>(
    txn: &Txn<'_, S>,
    data: u64,
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
        let Some(block) = txn.get(&key::block(data, idx))? else {
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

/// Writes `bytes` at `offset` of the file whose blocks are under data id `data`, updating
/// `inode`'s size and `used`. Returns the change in stored bytes. `EFBIG` past
/// [`MAX_FILE_SIZE`].
pub(crate) fn write<S: Store + ?Sized>(
    txn: &mut Txn<'_, S>,
    data: u64,
    inode: &mut Inode,
    offset: u64,
    bytes: &[u8],
) -> Res<i64> {
    let end = offset
        .checked_add(bytes.len() as u64)
        .filter(|&e| e <= MAX_FILE_SIZE)
        .ok_or(Errno::EFBIG)?;
    if bytes.is_empty() {
        return Ok(0);
    }
    let mut delta: i64 = 0;
    let mut new_blocks: BTreeMap<u64, u64> = BTreeMap::new();
    let last = (end - 1) / BLOCK_SIZE;
    for idx in offset / BLOCK_SIZE..=last {
        let bstart = idx * BLOCK_SIZE;
        let lo = offset.max(bstart) - bstart;
        let hi = end.min(bstart + BLOCK_SIZE) - bstart;
        let k = key::block(data, idx);
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
        block[lo as usize..hi as usize]
            .copy_from_slice(&bytes[src_lo..src_lo + (hi - lo) as usize]);
        delta += block.len() as i64 - old_len as i64;
        txn.put(k, block);
    }
    for (g, n) in new_blocks {
        let count = group_count(txn, data, g)? + n;
        txn.put(key::group(data, g), count.to_le_bytes().to_vec());
    }
    inode.size = inode.size.max(end);
    inode.used = inode.used.saturating_add_signed(delta);
    Ok(delta)
}

/// Cuts the block of data id `data` that holds byte `size` to end there, if it is stored
/// and longer. Returns the change in stored bytes (zero or negative). One block: the rest of
/// a shrinking file's tail goes by [`delete_from`], inline or in reclaim steps.
pub(crate) fn cut_block<S: Store + ?Sized>(txn: &mut Txn<'_, S>, data: u64, size: u64) -> Res<i64> {
    let cut = size % BLOCK_SIZE;
    if cut == 0 {
        return Ok(0);
    }
    let k = key::block(data, size / BLOCK_SIZE);
    match txn.get(&k)? {
        Some(mut b) if b.len() as u64 > cut => {
            let delta = -((b.len() as u64 - cut) as i64);
            b.truncate(cut as usize);
            txn.put(k, b);
            Ok(delta)
        }
        _ => Ok(0),
    }
}

/// The first block index wholly past byte `size`.
pub(crate) fn first_block_past(size: u64) -> u64 {
    size.div_ceil(BLOCK_SIZE)
}

/// An upper bound on the blocks of data id `data` stored at index `from` or above, exact
/// up to `limit`: the answer is `limit + 1` as soon as it is known to exceed `limit`. Reads
/// at most `limit + 2` group records, whatever the file's size.
pub(crate) fn count_from<S: Store + ?Sized>(
    txn: &Txn<'_, S>,
    data: u64,
    from: u64,
    limit: u64,
) -> Res<u64> {
    let start = key::group(data, from / GROUP_BLOCKS);
    let end = key::group(data, u64::MAX);
    let cap = usize::try_from(limit.saturating_add(2)).unwrap_or(usize::MAX);
    let mut n: u64 = 0;
    for (_, count) in txn.range(&start, &end, cap)? {
        // The first group may also count blocks below `from`: an upper bound.
        n = n.saturating_add(decode_count(&count)?);
        if n > limit {
            return Ok(limit + 1);
        }
    }
    Ok(n)
}

/// What [`delete_from`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Deleted {
    /// Blocks deleted.
    pub blocks: u64,
    /// Bytes they held.
    pub bytes: u64,
    /// No block at or above `from` is left.
    pub done: bool,
}

/// Deletes up to `budget` blocks of data id `data` at index `from` or above, lowest first,
/// keeping the group records exact. Reads at most `budget + 2` group records and `budget`
/// blocks: bounded work whatever the file's size (ARCHITECTURE.md "Bounded work").
pub(crate) fn delete_from<S: Store + ?Sized>(
    txn: &mut Txn<'_, S>,
    data: u64,
    from: u64,
    budget: u64,
) -> Res<Deleted> {
    let mut out = Deleted::default();
    let start = key::group(data, from / GROUP_BLOCKS);
    let end = key::group(data, u64::MAX);
    let cap = usize::try_from(budget.saturating_add(2)).unwrap_or(usize::MAX);
    let groups = txn.range(&start, &end, cap)?;
    let scanned_all = groups.len() < cap;
    for (gk, count) in groups {
        let left_budget = budget - out.blocks;
        if left_budget == 0 {
            return Ok(out);
        }
        let g = tail_u64(&gk);
        let mut left = decode_count(&count)?;
        let lo = from.max(g * GROUP_BLOCKS);
        let bstart = key::block(data, lo);
        // Just past `block(data, last of g)`: same placement, so one partition is scanned.
        let mut bend = key::block(data, g * GROUP_BLOCKS + GROUP_BLOCKS - 1);
        bend.push(0);
        // One more than the budget tells whether the group is finished.
        let cap = usize::try_from(left_budget.saturating_add(1)).unwrap_or(usize::MAX);
        let blocks = txn.range(&bstart, &bend, cap)?;
        let more_here = blocks.len() as u64 > left_budget;
        let mut gone = 0;
        for (k, v) in blocks.into_iter().take(cap - 1) {
            out.bytes += v.len() as u64;
            gone += 1;
            txn.delete(k);
        }
        out.blocks += gone;
        left = left.saturating_sub(gone);
        if left == 0 {
            txn.delete(gk);
        } else if gone > 0 {
            txn.put(gk, left.to_le_bytes().to_vec());
        }
        if more_here {
            return Ok(out);
        }
    }
    out.done = scanned_all;
    Ok(out)
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

/// Stored blocks of group `g` of data id `data`.
fn group_count<S: Store + ?Sized>(txn: &Txn<'_, S>, data: u64, g: u64) -> Res<u64> {
    match txn.get(&key::group(data, g))? {
        Some(v) => Ok(decode_count(&v)?),
        None => Ok(0),
    }
}

/// Where [`seek`] stopped: the answer, or where to go on from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seek {
    /// The offset `lseek` returns.
    At(u64),
    /// None within `size`: `ENXIO`.
    Nothing,
    /// Not found within the scan's bound: ask again from this offset.
    From(u64),
}

/// `SEEK_DATA` (`hole` false) or `SEEK_HOLE` (`hole` true) from `offset` (below `size`) in the
/// blocks of data id `data`, at block granularity: a stored block is data (its bytes past
/// its length read as zeros), a missing one a hole, and the end of the file is a hole.
/// Looks at no more than `groups` group records, and reads the blocks of one group at most.
pub(crate) fn seek<S: Store + ?Sized>(
    txn: &Txn<'_, S>,
    data: u64,
    size: u64,
    offset: u64,
    hole: bool,
    groups: u64,
) -> Res<Seek> {
    let last = (size - 1) / BLOCK_SIZE;
    let mut idx = offset / BLOCK_SIZE;
    let mut scanned = false;
    for _ in 0..groups {
        if idx > last {
            return Ok(if hole { Seek::At(size) } else { Seek::Nothing });
        }
        let g = idx / GROUP_BLOCKS;
        let mut group_end = key::block(data, g * GROUP_BLOCKS + GROUP_BLOCKS - 1);
        group_end.push(0);
        if hole {
            // A full group has no hole: its record says so without reading its blocks. One
            // group's blocks at most are read per call.
            if group_count(txn, data, g)? == GROUP_BLOCKS {
                idx = (g + 1) * GROUP_BLOCKS;
                continue;
            }
            if scanned {
                return Ok(Seek::From(idx * BLOCK_SIZE));
            }
            scanned = true;
            // The first index from `idx` on that is not stored.
            let stored = txn.range(&key::block(data, idx), &group_end, GROUP_BLOCKS as usize)?;
            let mut next = idx;
            for (k, _) in &stored {
                if tail_u64(k) != next {
                    break;
                }
                next += 1;
            }
            if next < (g + 1) * GROUP_BLOCKS {
                return Ok(Seek::At((next * BLOCK_SIZE).clamp(offset, size)));
            }
            idx = (g + 1) * GROUP_BLOCKS;
        } else {
            // The next group holding blocks, then its first block from `idx` on.
            let next_group = txn.range(&key::group(data, g), &key::group(data, u64::MAX), 1)?;
            let Some((gk, _)) = next_group.first() else {
                return Ok(Seek::Nothing);
            };
            let g = tail_u64(gk);
            let from = idx.max(g * GROUP_BLOCKS);
            let mut group_end = key::block(data, g * GROUP_BLOCKS + GROUP_BLOCKS - 1);
            group_end.push(0);
            let first = txn.range(&key::block(data, from), &group_end, 1)?;
            match first.first().map(|(k, _)| tail_u64(k)) {
                Some(b) if b > last => return Ok(Seek::Nothing),
                Some(b) => return Ok(Seek::At((b * BLOCK_SIZE).max(offset))),
                None => idx = (g + 1) * GROUP_BLOCKS,
            }
        }
    }
    Ok(if idx > last {
        if hole {
            Seek::At(size)
        } else {
            Seek::Nothing
        }
    } else {
        Seek::From(idx * BLOCK_SIZE)
    })
}

/// Makes bytes `lo..hi` of the file whose blocks are under data id `data` read as zeros:
/// deletes the blocks wholly inside, zeroes the stored bytes of the others. `hi` is at most
/// the file's size and `hi - lo` small (the caller bounds it by `MAX_IO`). Returns the
/// change in stored bytes and updates `inode.used`.
pub(crate) fn zero<S: Store + ?Sized>(
    txn: &mut Txn<'_, S>,
    data: u64,
    inode: &mut Inode,
    lo: u64,
    hi: u64,
) -> Res<i64> {
    if lo >= hi {
        return Ok(0);
    }
    let mut delta: i64 = 0;
    let mut dropped: BTreeMap<u64, u64> = BTreeMap::new();
    for idx in lo / BLOCK_SIZE..=(hi - 1) / BLOCK_SIZE {
        let k = key::block(data, idx);
        let Some(mut b) = txn.get(&k)? else {
            continue;
        };
        let bstart = idx * BLOCK_SIZE;
        if lo <= bstart && bstart + BLOCK_SIZE <= hi {
            delta -= b.len() as i64;
            *dropped.entry(idx / GROUP_BLOCKS).or_default() += 1;
            txn.delete(k);
            continue;
        }
        // `lo - bstart` and `hi - bstart` are below `BLOCK_SIZE` here, so they fit `usize`.
        let from = (lo.max(bstart) - bstart) as usize;
        let to = ((hi - bstart) as usize).min(b.len());
        if from < to {
            b[from..to].fill(0);
            txn.put(k, b);
        }
    }
    for (g, n) in dropped {
        let left = group_count(txn, data, g)?.saturating_sub(n);
        if left == 0 {
            txn.delete(key::group(data, g));
        } else {
            txn.put(key::group(data, g), left.to_le_bytes().to_vec());
        }
    }
    inode.used = inode.used.saturating_add_signed(delta);
    Ok(delta)
}
