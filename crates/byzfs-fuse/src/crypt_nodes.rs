//! Each encrypted file's checked header and tree nodes (`byzfs_crypt::tree`,
//! `byzfs_crypt::header`), as an encrypted mount keeps them: a header is checked once (the
//! owner's certificate, the writer's signature) when it first arrives in an attribute; the
//! nodes a read or a write needs — a chunk's entries, a group's slots, the group list —
//! are fetched with the data and checked against the header's root before any block is
//! opened, then kept until the header changes. A change computes the new nodes from the
//! kept ones (`FileNodes::change`) and writes only what changed, with the new header.

use byzfs_crypt::header::FileHeader;
use byzfs_crypt::layout::{self, BLOCK, CHUNK_BLOCKS, ENTRY, GROUP_CHUNKS, REGION};
use byzfs_crypt::tree::{self, Hash};
use byzfs_fs::{Errno, Extent};
use std::collections::{BTreeMap, BTreeSet};

/// Data that does not fit the nodes kept for its file, found before anything was sent:
/// the file may have changed since its header was read (another mount wrote it), so
/// `Crypt::call` (`crypt.rs`) reads the header again and tries once more; what still does
/// not fit is `EIO`. Never leaves the crypto layer.
pub(crate) const MISFIT: Errno = Errno(74);

/// A file's header and the nodes of its tree checked against it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FileNodes {
    /// The header as the replicas hold it (empty: never written).
    pub raw: Vec<u8>,
    /// It, opened and checked.
    pub header: Option<FileHeader>,
    /// The group hashes, once checked.
    pub groups: Option<Vec<Hash>>,
    /// Per group: its chunks' hashes.
    pub slots: BTreeMap<u64, Vec<Hash>>,
    /// Per chunk: its entries ([`REGION`] bytes).
    pub regions: BTreeMap<u64, Vec<u8>>,
}

/// The chunks of group `g` in a file of `chunks` chunks.
fn group_len(g: u64, chunks: u64) -> u64 {
    chunks.saturating_sub(g * GROUP_CHUNKS).min(GROUP_CHUNKS)
}

/// The blocks of chunk `c` in a file of `size` bytes.
fn chunk_len(c: u64, size: u64) -> u64 {
    size.div_ceil(BLOCK)
        .saturating_sub(c * CHUNK_BLOCKS)
        .min(CHUNK_BLOCKS)
}

/// `b` cut or padded with zeros to `n` bytes.
fn padded(mut b: Vec<u8>, n: usize) -> Vec<u8> {
    b.resize(n, 0);
    b
}

fn hashes(b: &[u8]) -> Vec<Hash> {
    b.chunks_exact(32)
        .map(|h| h.try_into().unwrap_or([0; 32]))
        .collect()
}

impl FileNodes {
    /// A file never written.
    pub(crate) fn empty() -> FileNodes {
        FileNodes::default()
    }

    /// The plaintext size.
    pub(crate) fn size(&self) -> u64 {
        self.header.map_or(0, |h| h.size)
    }

    fn chunks(&self) -> u64 {
        layout::chunks_of(self.size())
    }

    /// The reads that fetch what checking `chunks` needs and is not kept.
    pub(crate) fn missing(&self, chunks: &BTreeSet<u64>) -> Vec<Node> {
        let n = self.chunks();
        let ng = layout::groups_of(n);
        let mut out = Vec::new();
        if n == 0 {
            return out;
        }
        if self.groups.is_none() && ng > 1 {
            out.push(Node::Groups);
        }
        let mut groups: BTreeSet<u64> = chunks
            .iter()
            .filter(|&&c| c < n)
            .map(|c| c / GROUP_CHUNKS)
            .collect();
        if self.groups.is_none() && ng == 1 && n > 1 {
            // The one group's hash comes from its slots.
            groups.insert(0);
        }
        let mut chunks = chunks.clone();
        if self.groups.is_none() && n == 1 {
            // A file of one chunk stores no slot: its root comes from the chunk's entries.
            chunks.insert(0);
        }
        let chunks = &chunks;
        for g in groups {
            if !self.slots.contains_key(&g) && n > 1 {
                out.push(Node::Slots(g));
            }
        }
        for &c in chunks.iter().filter(|&&c| c < n) {
            if !self.regions.contains_key(&c) {
                out.push(Node::Region(c));
            }
        }
        out
    }

    /// Where `node` is stored and how many bytes it takes.
    pub(crate) fn range(&self, node: Node) -> (u64, u32) {
        let n = self.chunks();
        let (at, len) = match node {
            Node::Groups => (layout::group_offset(0), layout::groups_of(n) * 32),
            Node::Slots(g) => (layout::slot_offset(g * GROUP_CHUNKS), group_len(g, n) * 32),
            Node::Region(c) => (
                layout::entry_offset(c * CHUNK_BLOCKS),
                chunk_len(c, self.size()) * ENTRY as u64,
            ),
        };
        // At most 13 KiB (a group list or a group's slots) or 19 KiB (a chunk's entries).
        (at, len as u32)
    }

    /// Checks fetched nodes against the root and keeps them; `EIO` if one does not fit.
    pub(crate) fn check(&mut self, id: &[u8; 16], got: Vec<(Node, Vec<u8>)>) -> Result<(), Errno> {
        let Some(h) = self.header else {
            return Ok(());
        };
        let n = self.chunks();
        let mut got: BTreeMap<Node, Vec<u8>> = got.into_iter().collect();
        if self.groups.is_none() {
            let groups = match got.remove(&Node::Groups) {
                Some(b) => hashes(&padded(b, layout::groups_of(n) as usize * 32)),
                None if n == 1 => {
                    let region = got
                        .get(&Node::Region(0))
                        .map(|b| padded(b.clone(), REGION))
                        .unwrap_or_else(|| vec![0; REGION]);
                    let slots = vec![tree::chunk_hash(id, 0, &region)];
                    let groups = vec![tree::group_hash(id, 0, &slots)];
                    // Kept only once the root is checked below.
                    if tree::root(id, n, &groups) == h.root {
                        self.slots.insert(0, slots);
                    }
                    groups
                }
                None => {
                    let b = got.get(&Node::Slots(0)).cloned().unwrap_or_default();
                    let slots = hashes(&padded(b, group_len(0, n) as usize * 32));
                    vec![tree::group_hash(id, 0, &slots)]
                }
            };
            if tree::root(id, n, &groups) != h.root {
                return Err(mismatch(id, "root"));
            }
            self.groups = Some(groups);
        }
        let groups = self.groups.clone().unwrap_or_default();
        let mut regions = Vec::new();
        for (node, b) in got {
            match node {
                Node::Groups => {}
                Node::Slots(g) => {
                    let slots = hashes(&padded(b, group_len(g, n) as usize * 32));
                    let want = groups.get(g as usize).copied().unwrap_or([0; 32]);
                    if tree::group_hash(id, g, &slots) != want {
                        return Err(mismatch(id, "group"));
                    }
                    self.slots.insert(g, slots);
                }
                Node::Region(c) => regions.push((c, b)),
            }
        }
        for (c, b) in regions {
            let region = padded(b, REGION);
            let g = c / GROUP_CHUNKS;
            let want = self
                .slots
                .get(&g)
                .and_then(|s| s.get((c % GROUP_CHUNKS) as usize))
                .copied()
                .unwrap_or([0; 32]);
            if tree::chunk_hash(id, c, &region) != want {
                return Err(mismatch(id, "chunk"));
            }
            self.regions.insert(c, region);
        }
        Ok(())
    }

    /// The entry of block `index`, from a kept region.
    pub(crate) fn entry(&self, index: u64) -> Option<&[u8]> {
        let r = self.regions.get(&(index / CHUNK_BLOCKS))?;
        let at = (index % CHUNK_BLOCKS) as usize * ENTRY;
        r.get(at..at + ENTRY)
    }

    /// These nodes after a change that sealed `entries` (block index, entry), after
    /// truncations that took the file down to `low` bytes at the least, leaving it at
    /// `size` bytes; and the extents that store the changed slots and group list. The
    /// nodes of every chunk the change touches must be kept ([`Crypt::load_nodes`]).
    /// Entries themselves, and the entries a cut clears, are written by the caller.
    pub(crate) fn change(
        &self,
        id: &[u8; 16],
        entries: &[(u64, [u8; ENTRY])],
        low: u64,
        size: u64,
    ) -> (FileNodes, Hash, Vec<Extent>) {
        let old_n = self.chunks();
        let low_n = layout::chunks_of(low.min(self.size()));
        let new_n = layout::chunks_of(size);
        let mut next = self.clone();
        let mut touched: BTreeSet<u64> = BTreeSet::new();
        // The cut: chunks after it go; the chunk it falls in loses its later entries.
        if low < self.size() {
            next.regions.retain(|&c, _| c < low_n);
            let keep = low.div_ceil(BLOCK);
            if !keep.is_multiple_of(CHUNK_BLOCKS) {
                let c = keep / CHUNK_BLOCKS;
                if let Some(r) = next.regions.get_mut(&c) {
                    r[(keep % CHUNK_BLOCKS) as usize * ENTRY..].fill(0);
                }
                touched.insert(c);
            }
            for c in low_n..old_n {
                touched.insert(c);
            }
        }
        for (index, entry) in entries {
            let c = index / CHUNK_BLOCKS;
            let r = next.regions.entry(c).or_insert_with(|| vec![0; REGION]);
            let at = (index % CHUNK_BLOCKS) as usize * ENTRY;
            r[at..at + ENTRY].copy_from_slice(entry);
            touched.insert(c);
        }
        // Slots of every group a touched chunk is in, sized for the new chunk count; the
        // changed ones stored, and zeros over those of chunks cut whose group stays.
        let groups_touched: BTreeSet<u64> = touched.iter().map(|c| c / GROUP_CHUNKS).collect();
        let mut stored: BTreeMap<u64, Hash> = BTreeMap::new();
        for &g in &groups_touched {
            let mut slots = next.slots.get(&g).cloned().unwrap_or_default();
            slots.resize(group_len(g, new_n) as usize, [0; 32]);
            for &c in touched.iter().filter(|&&c| c / GROUP_CHUNKS == g) {
                if c < new_n {
                    let region = next.regions.get(&c).map_or(&[][..], |r| r);
                    let h = tree::chunk_hash(id, c, region);
                    slots[(c % GROUP_CHUNKS) as usize] = h;
                    stored.insert(c, h);
                } else if g * GROUP_CHUNKS < new_n {
                    stored.insert(c, [0; 32]);
                }
            }
            if slots.is_empty() {
                next.slots.remove(&g);
            } else {
                next.slots.insert(g, slots);
            }
        }
        // A file of one chunk stores no slot (its root comes from the chunk's entries);
        // grown past one, it stores its first group's slots whole, over whatever an
        // earlier, longer life of the file left there.
        if new_n <= 1 {
            stored.clear();
        } else if old_n <= 1 {
            let mut slots = next.slots.get(&0).cloned().unwrap_or_default();
            slots.resize(group_len(0, new_n) as usize, [0; 32]);
            for (c, h) in slots.iter().enumerate() {
                stored.insert(c as u64, *h);
            }
        }
        let mut extents: Vec<Extent> = Vec::new();
        let mut last = None;
        for (c, h) in stored {
            match extents.last_mut() {
                Some(e) if last == Some(c.wrapping_sub(1)) && c % GROUP_CHUNKS != 0 => {
                    e.data.extend_from_slice(&h)
                }
                _ => extents.push(Extent {
                    offset: layout::slot_offset(c),
                    data: h.to_vec(),
                }),
            }
            last = Some(c);
        }
        // Chunks cut and grown again are holes now, kept as such (a change built on these
        // nodes must not take them from the replicas' older state).
        for &c in touched.iter().filter(|&&c| c < new_n) {
            next.regions.entry(c).or_insert_with(|| vec![0; REGION]);
        }
        next.regions.retain(|&c, _| c < new_n);
        let new_ng = layout::groups_of(new_n);
        let mut groups = next.groups.clone().unwrap_or_default();
        groups.resize(new_ng as usize, [0; 32]);
        for &g in groups_touched.iter().filter(|&&g| g < new_ng) {
            let slots = next.slots.get(&g).cloned().unwrap_or_default();
            groups[g as usize] = tree::group_hash(id, g, &slots);
        }
        if new_ng > 1
            && (Some(&groups) != self.groups.as_ref() || new_ng != layout::groups_of(old_n))
        {
            let mut bytes = groups.concat();
            bytes.resize((layout::groups_of(old_n) as usize * 32).max(bytes.len()), 0);
            extents.push(Extent {
                offset: layout::group_offset(0),
                data: bytes,
            });
        }
        let root = tree::root(id, new_n, &groups);
        next.groups = Some(groups);
        (next, root, extents)
    }
}

/// A node of a file's tree as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Node {
    Groups,
    Slots(u64),
    Region(u64),
}

fn mismatch(id: &[u8; 16], what: &str) -> Errno {
    tracing::warn!(
        file = hex::encode(id),
        node = what,
        "a tree node that does not match the signed root"
    );
    MISFIT
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: u64) -> [u8; ENTRY] {
        let mut e = [0u8; ENTRY];
        e[..8].copy_from_slice(&(i + 1).to_be_bytes());
        e
    }

    /// The nodes of a file whose blocks `blocks` have entries `entry(i)`, computed from
    /// scratch: what any sequence of changes must end in.
    fn from_scratch(id: &[u8; 16], blocks: &[u64], size: u64) -> (Hash, FileNodes) {
        let n = layout::chunks_of(size);
        let mut regions: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for &i in blocks.iter().filter(|&&i| i < size.div_ceil(BLOCK)) {
            let r = regions
                .entry(i / CHUNK_BLOCKS)
                .or_insert_with(|| vec![0; REGION]);
            let at = (i % CHUNK_BLOCKS) as usize * ENTRY;
            r[at..at + ENTRY].copy_from_slice(&entry(i));
        }
        let mut groups = Vec::new();
        for g in 0..layout::groups_of(n) {
            let slots: Vec<Hash> = (g * GROUP_CHUNKS..g * GROUP_CHUNKS + group_len(g, n))
                .map(|c| tree::chunk_hash(id, c, regions.get(&c).map_or(&[][..], |r| r)))
                .collect();
            groups.push(tree::group_hash(id, g, &slots));
        }
        let root = tree::root(id, n, &groups);
        (
            root,
            FileNodes {
                groups: Some(groups),
                regions,
                ..FileNodes::default()
            },
        )
    }

    #[test]
    fn changes_end_in_the_nodes_and_root_computed_from_scratch() {
        let id = [4u8; 16];
        let mib = CHUNK_BLOCKS * BLOCK;
        let big = GROUP_CHUNKS * mib;
        // (blocks written, low, size after) in order, from an empty file.
        let steps: Vec<(Vec<u64>, u64, u64)> = vec![
            (vec![0, 1], u64::MAX, 2 * BLOCK),
            (vec![300], u64::MAX, 301 * BLOCK),
            (vec![], 5000, 5000),
            (vec![3], u64::MAX, 3 * mib),
            (
                vec![GROUP_CHUNKS * CHUNK_BLOCKS + 7],
                u64::MAX,
                big + 8 * BLOCK,
            ),
            (vec![2], u64::MAX, big + 8 * BLOCK),
            (vec![], mib + 1, 2 * big),
            (vec![], 0, 0),
            (vec![9], u64::MAX, 10 * BLOCK),
        ];
        let mut nodes = FileNodes::empty();
        let mut live: BTreeSet<u64> = BTreeSet::new();
        let mut size = 0;
        for (k, (blocks, low, after)) in steps.into_iter().enumerate() {
            let low = low.min(size);
            live.retain(|&i| i < low.div_ceil(BLOCK));
            let entries: Vec<_> = blocks.iter().map(|&i| (i, entry(i))).collect();
            let (next, root, _) = nodes.change(&id, &entries, low, after);
            live.extend(blocks);
            size = after;
            let (want_root, want) =
                from_scratch(&id, &live.iter().copied().collect::<Vec<_>>(), size);
            assert_eq!(root, want_root, "step {k}");
            assert_eq!(next.groups, want.groups, "step {k}");
            for (c, r) in &want.regions {
                assert_eq!(next.regions.get(c), Some(r), "step {k} chunk {c}");
            }
            nodes = FileNodes {
                header: Some(FileHeader {
                    key_version: 1,
                    version: k as u64 + 1,
                    root,
                    size,
                }),
                ..next
            };
        }
    }

    /// The stored bytes of `nodes`' group list, slots of group `g` and region of chunk `c`.
    fn stored(nodes: &FileNodes, g: u64, c: u64) -> Vec<(Node, Vec<u8>)> {
        let groups = nodes.groups.clone().unwrap_or_default();
        let mut out = vec![(Node::Region(c), nodes.regions[&c].clone())];
        if groups.len() > 1 {
            out.push((Node::Groups, groups.concat()));
        }
        out.push((Node::Slots(g), nodes.slots[&g].concat()));
        if g != 0 {
            out.push((Node::Slots(0), nodes.slots[&0].concat()));
        }
        out
    }

    #[test]
    fn nodes_that_do_not_fit_the_root_are_refused_and_not_kept() {
        let id = [4u8; 16];
        let big = GROUP_CHUNKS * CHUNK_BLOCKS * BLOCK;
        for size in [3 * BLOCK, 2 * big] {
            let last = size / BLOCK - 1;
            let entries = [(0, entry(0)), (last, entry(last))];
            let (written, root, _) = FileNodes::empty().change(&id, &entries, 0, size);
            let header = FileHeader {
                key_version: 1,
                version: 1,
                root,
                size,
            };
            let fresh = || FileNodes {
                header: Some(header),
                ..FileNodes::empty()
            };
            let (c, g) = (last / CHUNK_BLOCKS, last / CHUNK_BLOCKS / GROUP_CHUNKS);
            let good = stored(&written, g, c);
            let mut n = fresh();
            assert_eq!(n.check(&id, good.clone()), Ok(()), "size {size}");
            assert_eq!(n.entry(last), Some(&entry(last)[..]));
            // Every byte of every node flipped, one at a time (a sample of each's bytes).
            for k in 0..good.len() {
                let len = good[k].1.len();
                for at in [0, len / 2, len - 1] {
                    let mut bad = good.clone();
                    bad[k].1[at] ^= 1;
                    let mut n = fresh();
                    assert_eq!(n.check(&id, bad), Err(MISFIT), "{:?} byte {at}", good[k].0);
                    assert!(n.regions.is_empty(), "nothing kept");
                }
            }
            // Another file's nodes, or the nodes under an older root.
            let mut n = fresh();
            assert_eq!(n.check(&[5; 16], good.clone()), Err(MISFIT));
            let old = FileHeader {
                root: [9; 32],
                ..header
            };
            let mut n = FileNodes {
                header: Some(old),
                ..FileNodes::empty()
            };
            assert_eq!(n.check(&id, good), Err(MISFIT));
        }
    }
}
