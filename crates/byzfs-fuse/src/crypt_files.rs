//! Loading an encrypted file's header and tree nodes into the crypto layer's books
//! ([`FileNodes`], `crypt_nodes.rs`): a header opened and checked once, the nodes a read
//! or write needs fetched in as few gathered reads as the limits allow and checked
//! against its root before anything is opened.

use crate::crypt::{crypt_errno, Crypt};
use crate::crypt_nodes::{FileNodes, Node};
use crate::transport::Transport;
use byzfs_crypt::file;
use byzfs_crypt::header::FileHeader;
use byzfs_crypt::CryptError;
use byzfs_fs::proto::op::{MAX_GATHER_READS, MAX_IO};
use byzfs_fs::{Credentials, Errno, FileHandle, Op, Reply};
use std::collections::BTreeSet;

/// Whether header `got` is older than `kept`: a stale answer (`Crypt::take_header`). An
/// answer with no header is taken: `f + 1` liars answering alike with a file's first,
/// headerless state are believed (`tests/encryption.rs`
/// `f_plus_one_replicas_rolling_back_alike_are_believed` shows it; STATUS Known gaps), and
/// a change built on it still expects what the mount believes, so the replicas refuse it.
fn older(kept: FileHeader, got: Option<FileHeader>) -> bool {
    got.is_some_and(|g| g.version < kept.version)
}

impl Crypt {
    /// The checked nodes of `fh` (its header from the attributes the replicas return).
    pub(crate) fn nodes(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        fh: FileHandle,
    ) -> Result<&mut FileNodes, Errno> {
        if !self.files.contains_key(&fh.ino) {
            self.size_of(link, cred, fh)?;
        }
        self.files.get_mut(&fh.ino).ok_or(Errno::EIO)
    }

    /// Fetches and checks the nodes that `chunks` of `fh` need, and, with them, `data`
    /// (`(offset, count)` of stored bytes): its bytes as read.
    pub(crate) fn load_nodes(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        fh: FileHandle,
        chunks: &BTreeSet<u64>,
        data: Option<(u64, u32)>,
        read_only: bool,
    ) -> Result<Vec<u8>, Errno> {
        let id = file::file_id(fh.ino, fh.generation);
        let nodes = self.nodes(link, cred, fh)?;
        let mut missing = nodes.missing(chunks);
        let ranges: Vec<(Node, (u64, u32))> =
            missing.drain(..).map(|n| (n, nodes.range(n))).collect();
        // In requests of at most MAX_GATHER_READS ranges and MAX_IO bytes, the data last.
        let data_len = data.map_or(0, |d| d.1);
        let mut batches: Vec<Vec<(Node, (u64, u32))>> = vec![Vec::new()];
        let mut bytes = data_len;
        for r in ranges {
            let full = batches.last().is_some_and(|b| {
                b.len() + 2 > MAX_GATHER_READS || bytes.saturating_add(r.1 .1) > MAX_IO
            });
            if full {
                batches.push(Vec::new());
                bytes = data_len;
            }
            bytes += r.1 .1;
            if let Some(b) = batches.last_mut() {
                b.push(r);
            }
        }
        let count = batches.len();
        let mut got = Vec::new();
        let mut out = Vec::new();
        for (i, batch) in batches.into_iter().enumerate() {
            let last = i + 1 == count;
            let mut want: Vec<(u64, u32)> = batch.iter().map(|(_, r)| *r).collect();
            match data {
                Some(d) if last => want.push(d),
                _ if want.is_empty() => continue,
                _ => {}
            }
            let op = Op::ReadGather { fh, ranges: want };
            let replies = match link.transmit(cred, op, read_only)? {
                Reply::Batch(r) => r,
                _ => return Err(Errno::EIO),
            };
            let mut replies = replies.into_iter();
            for (node, _) in batch {
                match replies.next() {
                    Some(Reply::Read { data, .. }) => got.push((node, data)),
                    _ => return Err(Errno::EIO),
                }
            }
            if last && data.is_some() {
                match replies.next() {
                    Some(Reply::Read { data, .. }) => out = data,
                    _ => return Err(Errno::EIO),
                }
            }
        }
        let nodes = self.files.get_mut(&fh.ino).ok_or(Errno::EIO)?;
        nodes.check(&id, got)?;
        Ok(out)
    }

    /// Opens attribute header `raw` of regular file `fh`: its checked nodes, kept (anew
    /// if the header changed).
    pub(crate) fn take_header(&mut self, fh: FileHandle, raw: &[u8]) -> Result<u64, Errno> {
        // A header seen before, or the one this request sets (signed here), is not
        // checked again.
        for n in [self.files.get(&fh.ino), self.pending.get(&fh.ino)]
            .into_iter()
            .flatten()
        {
            if n.raw == raw {
                return Ok(n.size());
            }
        }
        let id = file::file_id(fh.ino, fh.generation);
        let header =
            byzfs_crypt::header::open(&self.keys, &self.g, &id, raw).map_err(|e| match e {
                // Keys older than the header's: the caller reads the group again.
                CryptError::NoSuchVersion { .. } => Errno::EKEYEXPIRED,
                e => {
                    tracing::warn!(ino = fh.ino, %e, "a file header that does not open: EIO");
                    crypt_errno(&e)
                }
            })?;
        // Every change is signed over the header it was built on, one version up, so a
        // header older than the one kept (which the replicas accepted from this mount or
        // showed it) is a stale answer (a read-only reply from a state without that
        // change): the kept one stands, and a change is never built on the older one.
        let kept = self.files.get(&fh.ino).and_then(|n| n.header);
        if let Some(kept) = kept.filter(|&k| older(k, header)) {
            tracing::debug!(
                ino = fh.ino,
                kept = kept.version,
                got = header.map_or(0, |h| h.version),
                "an older header than the one kept: ignored"
            );
            return Ok(kept.size);
        }
        let nodes = FileNodes {
            raw: raw.to_vec(),
            header,
            ..FileNodes::empty()
        };
        let size = nodes.size();
        self.files.insert(fh.ino, nodes);
        Ok(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header the mount keeps is never replaced by an older one (a read-only answer from
    /// a state without this mount's last change): a change built on it would not fit the
    /// replicas' tree (`tests/mount.rs` git section, "a tree node that does not match").
    #[test]
    fn an_older_header_does_not_replace_the_kept_one() {
        let h = |version| FileHeader {
            key_version: 1,
            version,
            root: [0; 32],
            size: version,
        };
        let verdicts: Vec<bool> = [Some(h(4)), Some(h(5)), Some(h(6)), None]
            .into_iter()
            .map(|got| older(h(5), got))
            .collect();
        assert_eq!(verdicts, vec![true, false, false, false]);
    }
}
