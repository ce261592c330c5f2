//! An encrypted mount's file contents (`crypt.rs`): reads open whole sealed blocks and
//! return the bytes asked for; writes, truncations and `fallocate` seal whole blocks,
//! reading and opening first the blocks they change only in part, and set the file's
//! sealed header when its size changes (in the same signed request).
//!
//! A block's bytes past the file's size are always zeros (a truncation seals its new last
//! block again with zeros past the size), so growing a file needs no block rewritten, and
//! blocks never written are holes that read as zeros.

use crate::crypt::{crypt_errno, Crypt};
use crate::crypt_nodes::FileNodes;
use crate::crypt_nodes::MISFIT;
use crate::transport::Transport;
use byzfs_crypt::file;
use byzfs_crypt::header::{FileHeader, WriterKey};
use byzfs_crypt::layout::{self, BLOCK, CHUNK_BLOCKS, ENTRY};
use byzfs_crypt::CryptError;
use byzfs_fs::proto::op::MAX_IO;
use byzfs_fs::{Credentials, Errno, Extent, FileHandle, FsResult, Op, Reply, SetAttr};
use std::collections::btree_map::{BTreeMap, Entry};
use std::collections::BTreeSet;

// The layout lines chunks up with the replicas' blocks (`byzfs_crypt::layout::STORE_BLOCK`).
const _: () = assert!(layout::STORE_BLOCK == byzfs_fs::data::BLOCK_SIZE);

/// Most blocks one `Op::ReadGather` asks for (with their entries, within `MAX_IO`).
const READ_BLOCKS: u64 = MAX_IO as u64 / (BLOCK + ENTRY as u64);

impl Crypt {
    /// [`Op::Read`] of plaintext `offset..offset + count`.
    pub(crate) fn read(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        fh: FileHandle,
        offset: u64,
        count: u32,
        read_only: bool,
    ) -> FsResult {
        let size = self.size_of(link, cred, fh)?;
        if offset >= size || count == 0 {
            return Ok(Reply::Read {
                data: Vec::new(),
                eof: offset >= size,
            });
        }
        let end = size.min(offset.saturating_add(u64::from(count)));
        let (first, last) = (offset / BLOCK, (end - 1) / BLOCK);
        let plain = self.read_blocks(link, cred, fh, first, last, read_only)?;
        let from = usize::try_from(offset - first * BLOCK).map_err(|_| Errno::EINVAL)?;
        let to = usize::try_from(end - first * BLOCK)
            .map_err(|_| Errno::EINVAL)?
            .min(plain.len());
        // In place: an aligned read (the kernel's) moves nothing.
        let mut data = plain;
        data.truncate(to);
        data.drain(..from.min(to));
        let eof = offset + data.len() as u64 >= size;
        Ok(Reply::Read { data, eof })
    }

    /// The plaintext of blocks `first..=last`, shorter if the stored file ends before.
    fn read_blocks(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        fh: FileHandle,
        first: u64,
        last: u64,
        read_only: bool,
    ) -> Result<Vec<u8>, Errno> {
        let id = file::file_id(fh.ino, fh.generation);
        let mut out = Vec::new();
        let mut at = first;
        while at <= last {
            // One request per run of blocks within a chunk: the data, and the nodes that
            // check it unless kept (`crypt_nodes.rs`).
            let chunk_end = (at / CHUNK_BLOCKS + 1) * CHUNK_BLOCKS;
            let n = (last - at + 1).min(READ_BLOCKS).min(chunk_end - at);
            let chunk = BTreeSet::from([at / CHUNK_BLOCKS]);
            // `n <= READ_BLOCKS`, so the count is within `MAX_IO`.
            let range = (layout::data_offset(at), (n * BLOCK) as u32);
            let data = self.load_nodes(link, cred, fh, &chunk, Some(range), read_only)?;
            // Blocks past the stored end are past the file's size: the caller asked for
            // blocks below it, so a shorter answer is a cut file.
            let whole = data.len() as u64 / BLOCK;
            if whole == 0 {
                tracing::warn!(
                    ino = fh.ino,
                    index = at,
                    "a stored file cut inside a block: EIO"
                );
                return Err(Errno::EIO);
            }
            let from = out.len();
            out.resize(from + (whole * BLOCK) as usize, 0);
            let mut opened = self.open_run(&id, fh.ino, at, &data, &mut out[from..]);
            if matches!(opened, Err((_, CryptError::NoSuchVersion { .. }))) && self.refresh(link)? {
                opened = self.open_run(&id, fh.ino, at, &data, &mut out[from..]);
            }
            if let Err((index, err)) = opened {
                tracing::warn!(ino = fh.ino, index, %err, "a block that does not open");
                return Err(match err {
                    CryptError::Tampered(_) | CryptError::Malformed(_) => MISFIT,
                    err => crypt_errno(&err),
                });
            }
            if whole < n {
                break;
            }
            at += n;
        }
        Ok(out)
    }

    /// Opens the whole blocks of `data` (stored blocks from `at` on of file `ino`, id
    /// `id`) into `out`, against the entries kept for them (checked against the signed
    /// root when fetched, so [`file::VouchedBlocks`] applies); the first that does not
    /// open, and why.
    fn open_run(
        &self,
        id: &[u8; 16],
        ino: u64,
        at: u64,
        data: &[u8],
        out: &mut [u8],
    ) -> Result<(), (u64, CryptError)> {
        let nodes = self
            .files
            .get(&ino)
            .ok_or((at, CryptError::Malformed("no nodes kept")))?;
        let mut opener = file::VouchedBlocks::new(&self.keys, id);
        let b = BLOCK as usize;
        for (i, (d, o)) in data
            .chunks_exact(b)
            .zip(out.chunks_exact_mut(b))
            .enumerate()
        {
            let index = at + i as u64;
            let e = nodes
                .entry(index)
                .ok_or((index, CryptError::Malformed("no entry kept")))?;
            opener.open(d, e, o).map_err(|err| (index, err))?;
        }
        Ok(())
    }

    /// The plaintext of block `index` of `fh` before this request: from the request's own
    /// earlier writes, the replicas, or zeros past the size `size` it had.
    fn old_block(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        fh: FileHandle,
        index: u64,
        size: u64,
    ) -> Result<Vec<u8>, Errno> {
        if let Some(b) = self.overlay.get(&(fh.ino, index)) {
            return Ok(b.clone());
        }
        if index * BLOCK >= size {
            return Ok(vec![0; BLOCK as usize]);
        }
        let ro = self.reads_read_only(link);
        let mut b = self.read_blocks(link, cred, fh, index, index, ro)?;
        b.resize(BLOCK as usize, 0);
        Ok(b)
    }

    /// Writes `extents`, then `sets` (truncations among them), of `fh`, sealed: the
    /// operation to send; the new header, if the size changes, added to `headers`.
    pub(crate) fn seal_content(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        fh: FileHandle,
        extents: Vec<Extent>,
        sets: Vec<SetAttr>,
        headers: &mut Vec<(FileHandle, Vec<u8>)>,
    ) -> Result<Op, Errno> {
        let before = self.size_of(link, cred, fh)?;
        let mut size = before;
        let mut blocks: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for e in &extents {
            if e.data.is_empty() {
                continue;
            }
            let end = e
                .offset
                .checked_add(e.data.len() as u64)
                .ok_or(Errno::EFBIG)?;
            for index in e.offset / BLOCK..=(end - 1) / BLOCK {
                let (b_start, b_end) = (index * BLOCK, (index + 1) * BLOCK);
                if let Entry::Vacant(v) = blocks.entry(index) {
                    // Old bytes are needed where this write leaves a part of the block
                    // that held data.
                    let keeps = e.offset > b_start || end < b_end.min(before);
                    let old = if keeps {
                        self.old_block(link, cred, fh, index, before)?
                    } else {
                        vec![0; BLOCK as usize]
                    };
                    v.insert(old);
                }
                let b = blocks.get_mut(&index).ok_or(Errno::EIO)?;
                let from = e.offset.max(b_start);
                let to = end.min(b_end);
                let src = &e.data[(from - e.offset) as usize..(to - e.offset) as usize];
                b[(from - b_start) as usize..(to - b_start) as usize].copy_from_slice(src);
            }
            size = size.max(end);
        }
        let mut sealed_sets = Vec::with_capacity(sets.len());
        // The lowest size a truncation leaves, for the entries to clear.
        let mut low = before;
        for set in sets {
            if let Some(s) = set.size {
                low = low.min(s);
                if s < size {
                    let keep = s.div_ceil(BLOCK);
                    blocks.retain(|i, _| *i < keep);
                    if s % BLOCK != 0 {
                        let k = s / BLOCK;
                        if let Entry::Vacant(v) = blocks.entry(k) {
                            v.insert(self.old_block(link, cred, fh, k, before)?);
                        }
                        if let Some(b) = blocks.get_mut(&k) {
                            b[(s % BLOCK) as usize..].fill(0);
                        }
                    }
                }
                size = s;
                sealed_sets.push(SetAttr {
                    size: Some(layout::sealed_size(s)),
                    ..set
                });
            } else {
                sealed_sets.push(set);
            }
        }
        // Seal the blocks within the final size, in runs of consecutive blocks of one
        // chunk: one extent of data and one of entries each.
        let id = file::file_id(fh.ino, fh.generation);
        let keep = size.div_ceil(BLOCK);
        let mut sealed: Vec<Extent> = Vec::new();
        let mut entries = Vec::new();
        let mut next = None;
        for (index, plain) in blocks.into_iter().filter(|(i, _)| *i < keep) {
            let b = file::seal_block(&self.keys, &id, index, &plain, &mut rand_core::OsRng);
            entries.push((index, b.entry));
            let run_goes_on = next == Some(index) && index % CHUNK_BLOCKS != 0;
            match sealed.len() {
                n if run_goes_on && n >= 2 => {
                    sealed[n - 2].data.extend(b.entry);
                    sealed[n - 1].data.extend(b.data);
                }
                _ => {
                    sealed.push(Extent {
                        offset: layout::entry_offset(index),
                        data: b.entry.to_vec(),
                    });
                    sealed.push(Extent {
                        offset: layout::data_offset(index),
                        data: b.data,
                    });
                }
            }
            next = Some(index + 1);
            self.overlay.insert((fh.ino, index), plain);
        }
        // A file cut inside a chunk clears the entries after its new end in that chunk,
        // which stay below the stored size (the data after it is cut); sealed blocks are
        // all below the cut.
        let (cut, had) = (low.div_ceil(BLOCK), before.div_ceil(BLOCK));
        if cut < had && cut % CHUNK_BLOCKS != 0 {
            let chunk_end = (cut / CHUNK_BLOCKS + 1) * CHUNK_BLOCKS;
            let clear = chunk_end.min(had) - cut;
            sealed.push(Extent {
                offset: layout::entry_offset(cut),
                data: vec![0; clear as usize * ENTRY],
            });
        }
        self.seal_change(link, cred, fh, &entries, low, size, &mut sealed, headers)?;
        Ok(match (sealed.len(), sealed_sets.is_empty()) {
            (0, true) => Op::Write {
                fh,
                offset: 0,
                data: Vec::new(),
            },
            (1, true) => {
                let e = sealed.remove(0);
                Op::Write {
                    fh,
                    offset: e.offset,
                    data: e.data,
                }
            }
            (_, true) => Op::WriteGather {
                fh,
                extents: sealed,
            },
            (0, false) if sealed_sets.len() == 1 => Op::SetAttr {
                fh,
                set: sealed_sets.remove(0),
            },
            (n, false) => Op::WriteSetAttr {
                fh,
                extents: if n == 0 {
                    vec![Extent {
                        offset: 0,
                        data: Vec::new(),
                    }]
                } else {
                    sealed
                },
                sets: sealed_sets,
            },
        })
    }

    /// [`Op::Allocate`] to plaintext `end`.
    pub(crate) fn seal_allocate(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        fh: FileHandle,
        end: u64,
        headers: &mut Vec<(FileHandle, Vec<u8>)>,
    ) -> Result<Op, Errno> {
        let before = self.size_of(link, cred, fh)?;
        if end > before {
            let mut none = Vec::new();
            self.seal_change(link, cred, fh, &[], before, end, &mut none, headers)?;
        }
        Ok(Op::Allocate {
            fh,
            end: layout::sealed_size(end),
        })
    }

    /// A change to `fh` that sealed `entries`, cut it to `low` bytes at the least and
    /// leaves it at `size`: the tree nodes it changes appended to `extents`, its new
    /// header to `headers` (expecting the header the replicas hold, the first time in a
    /// request), and the nodes it leaves kept as pending (`crypt.rs`).
    #[allow(clippy::too_many_arguments)]
    fn seal_change(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        fh: FileHandle,
        entries: &[(u64, [u8; ENTRY])],
        low: u64,
        size: u64,
        extents: &mut Vec<Extent>,
        headers: &mut Vec<(FileHandle, Vec<u8>)>,
    ) -> Result<(), Errno> {
        // A reader cannot sign a header: the replicas refuse its changes alike.
        let Some((key, cert)) = self.writer.clone() else {
            return Err(Errno::EACCES);
        };
        let id = file::file_id(fh.ino, fh.generation);
        let committed = self.nodes(link, cred, fh)?.clone();
        let base_size = self
            .pending
            .get(&fh.ino)
            .map_or(committed.size(), FileNodes::size);
        if entries.is_empty() && low >= base_size && size == base_size {
            // Nothing changes (an empty write, a truncation to the size the file has): the
            // header stays, but the request still expects it. Were the mount's header stale,
            // a truncation sent without one would have the replicas cut data under the old
            // header, which no reader could check again; with it they answer `ESTALE` and
            // the change is built again on what they hold (`Crypt::call`).
            if !self.pending.contains_key(&fh.ino) {
                self.expect.push((fh, committed.raw.clone()));
            }
            return Ok(());
        }
        let mut chunks: BTreeSet<u64> = entries.iter().map(|(i, _)| i / CHUNK_BLOCKS).collect();
        if low < base_size {
            let keep = low.div_ceil(BLOCK);
            chunks.insert(keep / CHUNK_BLOCKS);
            chunks.extend(keep.checked_sub(1).map(|k| k / CHUNK_BLOCKS));
        }
        // What this request has not changed yet is as the replicas hold it.
        let pending = self.pending.get(&fh.ino);
        chunks.retain(|c| pending.is_none_or(|p| !p.regions.contains_key(c)));
        let ro = self.reads_read_only(link);
        self.load_nodes(link, cred, fh, &chunks, None, ro)?;
        let committed = self.files.get(&fh.ino).cloned().unwrap_or_default();
        let mut base = self
            .pending
            .get(&fh.ino)
            .cloned()
            .unwrap_or_else(|| committed.clone());
        let n = byzfs_crypt::layout::chunks_of(base.size());
        for (c, r) in committed.regions.iter().filter(|(c, _)| **c < n) {
            base.regions.entry(*c).or_insert_with(|| r.clone());
        }
        for (g, sl) in &committed.slots {
            base.slots.entry(*g).or_insert_with(|| sl.clone());
        }
        if base.groups.is_none() {
            base.groups = committed.groups.clone();
        }
        let (mut next, root, tree) = base.change(&id, entries, low, size);
        extents.extend(tree);
        let header = FileHeader {
            key_version: self.keys.version(),
            version: base.header.map_or(1, |h| h.version + 1),
            root,
            size,
        };
        let writer = WriterKey {
            key: &key,
            cert: &cert,
        };
        let raw = byzfs_crypt::header::seal(
            &self.keys,
            &self.g,
            &id,
            &header,
            &writer,
            &mut rand_core::OsRng,
        );
        if !self.pending.contains_key(&fh.ino) {
            self.expect.push((fh, committed.raw.clone()));
        }
        next.raw = raw.clone();
        next.header = Some(header);
        self.pending.insert(fh.ino, next);
        headers.push((fh, raw));
        self.sizes.insert(fh.ino, size);
        Ok(())
    }
}
