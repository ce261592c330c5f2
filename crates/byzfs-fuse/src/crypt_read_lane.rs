//! An encrypted mount's read in a lane (issue #45 items 1 and 5): planned under the
//! mount's lock from what the crypto layer keeps ([`Crypt::plan_read`]: one gathered read
//! of the blocks and the tree nodes not kept yet), sent, and waited for without the lock
//! (`lib.rs` `read_encrypted_in_lane`); its nodes checked under the lock again
//! ([`Crypt::sealed_read`]); its blocks opened with no lock held ([`SealedRead::open`]),
//! so several FUSE threads open different reads' blocks on several cores while others
//! fetch theirs. Only the plain case takes a lane: a file whose size the layer knows, a
//! read within one chunk, the nodes in the same request; anything else — a header changed
//! meanwhile, a node or a block that does not fit, an error — goes through the locked
//! path (`Crypt::call`), which reads headers, retries and refreshes the keys as before.

use crate::crypt::Crypt;
use crate::crypt_nodes::Node;
use byzfs_crypt::file::{self, VouchedBlocks};
use byzfs_crypt::layout::{self, BLOCK, CHUNK_BLOCKS, ENTRY};
use byzfs_crypt::regression::GroupKeys;
use byzfs_fs::proto::op::{MAX_GATHER_READS, MAX_IO};
use byzfs_fs::{FileHandle, FsResult, Op, Reply};
use std::collections::BTreeSet;

/// A read of plaintext planned for a lane: the request, and what its answer is checked
/// against.
pub(crate) struct ReadPlan {
    /// The gathered read to send: the nodes first, the blocks' data last.
    pub(crate) op: Op,
    fh: FileHandle,
    /// The file's header as the layer held it, and its size.
    raw: Vec<u8>,
    size: u64,
    /// The nodes asked for, in the request's order.
    nodes: Vec<Node>,
    /// The first block, and how many.
    at: u64,
    blocks: u64,
    /// The plaintext asked for: `offset..end`.
    offset: u64,
    end: u64,
}

/// A read's sealed blocks with their checked entries, to be opened without the mount's
/// lock.
pub(crate) struct SealedRead {
    keys: GroupKeys,
    id: [u8; 16],
    data: Vec<u8>,
    entries: Vec<u8>,
    /// The plaintext asked for, from the first block's start, and the file's size.
    from: usize,
    to: usize,
    eof: bool,
}

impl Crypt {
    /// The lane's plan for plaintext [`Op::Read`] `op`, if the layer knows enough to send
    /// it as one request; `None`: the locked path. `op` is the mount's, before the layer
    /// maps its handle; what must reach the replicas before it went already.
    pub(crate) fn plan_read(&self, op: &Op) -> Option<ReadPlan> {
        let Op::Read { fh, offset, count } = *op else {
            return None;
        };
        if fh == FileHandle::ROOT {
            return None;
        }
        let size = *self.sizes.get(&fh.ino)?;
        let nodes = self.files.get(&fh.ino)?;
        if offset >= size || count == 0 || nodes.size() != size {
            return None;
        }
        let end = size.min(offset.saturating_add(u64::from(count)));
        let (at, last) = (offset / BLOCK, (end - 1) / BLOCK);
        let blocks = last - at + 1;
        let bytes = blocks * BLOCK;
        if at / CHUNK_BLOCKS != last / CHUNK_BLOCKS || bytes > u64::from(MAX_IO) {
            return None;
        }
        let wanted = nodes.missing(&BTreeSet::from([at / CHUNK_BLOCKS]));
        let mut ranges: Vec<(u64, u32)> = wanted.iter().map(|n| nodes.range(*n)).collect();
        let total = ranges
            .iter()
            .map(|r| u64::from(r.1))
            .sum::<u64>()
            .saturating_add(bytes);
        if ranges.len() + 1 > MAX_GATHER_READS || total > u64::from(MAX_IO) {
            return None;
        }
        ranges.push((layout::data_offset(at), bytes as u32));
        Some(ReadPlan {
            op: Op::ReadGather { fh, ranges },
            fh,
            raw: nodes.raw.clone(),
            size,
            nodes: wanted,
            at,
            blocks,
            offset,
            end,
        })
    }

    /// The lane's answer `result` to `plan`, the mount's lock taken again: the nodes it
    /// brought checked against the file's root and kept, and its blocks with their
    /// entries to open. `None` — the file's header or size changed since the plan, a node
    /// does not fit, the stored file is cut, or any error — sends the read through the
    /// locked path.
    pub(crate) fn sealed_read(&mut self, plan: ReadPlan, result: FsResult) -> Option<SealedRead> {
        let Ok(Reply::Batch(replies)) = result else {
            return None;
        };
        let ino = plan.fh.ino;
        if self.sizes.get(&ino) != Some(&plan.size) {
            return None;
        }
        let nodes = self.files.get_mut(&ino).filter(|n| n.raw == plan.raw)?;
        if replies.len() != plan.nodes.len() + 1 {
            return None;
        }
        let mut replies = replies.into_iter();
        let mut got = Vec::with_capacity(plan.nodes.len());
        for node in plan.nodes {
            match replies.next() {
                Some(Reply::Read { data, .. }) => got.push((node, data)),
                _ => return None,
            }
        }
        let Some(Reply::Read { mut data, .. }) = replies.next() else {
            return None;
        };
        let id = file::file_id(plan.fh.ino, plan.fh.generation);
        nodes.check(&id, got).ok()?;
        // Every block asked for is below the size: a shorter answer is a cut file.
        if data.len() as u64 != plan.blocks * BLOCK {
            return None;
        }
        let mut entries = Vec::with_capacity(plan.blocks as usize * ENTRY);
        for index in plan.at..plan.at + plan.blocks {
            entries.extend_from_slice(nodes.entry(index)?);
        }
        let from = usize::try_from(plan.offset - plan.at * BLOCK).ok()?;
        let to = usize::try_from(plan.end - plan.at * BLOCK).ok()?;
        data.truncate(plan.blocks as usize * BLOCK as usize);
        Some(SealedRead {
            keys: self.keys.clone(),
            id,
            data,
            entries,
            from,
            to,
            eof: plan.end >= plan.size,
        })
    }
}

impl SealedRead {
    /// The plaintext asked for, its blocks opened here (no lock held): `None` if one does
    /// not open (the locked path then reads the file's header again, or the group).
    pub(crate) fn open(self) -> Option<Reply> {
        let mut opener = VouchedBlocks::new(&self.keys, &self.id);
        let mut out = vec![0; self.data.len()];
        let b = BLOCK as usize;
        let blocks = self.data.chunks_exact(b).zip(out.chunks_exact_mut(b));
        for ((d, o), e) in blocks.zip(self.entries.chunks_exact(ENTRY)) {
            if let Err(err) = opener.open(d, e, o) {
                tracing::debug!(%err, "a block read in a lane does not open: the locked path");
                return None;
            }
        }
        out.truncate(self.to);
        out.drain(..self.from.min(self.to));
        Some(Reply::Read {
            data: out,
            eof: self.eof,
        })
    }
}
