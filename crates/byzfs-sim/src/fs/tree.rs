//! A canonical dump of a file tree (sorted lines: path, type, permission bits, links, for
//! files the size and a digest of the content, for symbolic links the target, then a line
//! per extended attribute), made the same way from the model
//! ([`super::model::FsModel::tree`]) and from a replica's checkpoint ([`checkpoint_tree`]).
//!
//! A checkpoint is read from what the replica would send a fetcher: its partitions as of that
//! checkpoint (`Service::export_partition`), loaded into a fresh in-memory store and walked
//! through the service's own read-only operations. So the dump shows the content the
//! checkpoint holds, not what its digests claim.

use byzfs_bft::{Digest, Seq, Service};
use byzfs_fs::store::{MemStore, Store, WriteSet};
use byzfs_fs::{
    Credentials, FileHandle, FileService, FileType, FsConfig, FsResult, Op, Reply, Request,
};
use std::collections::BTreeMap;

/// A directory's line.
pub fn dir_line(path: &str, mode: u32, nlink: u32) -> String {
    format!("{path} dir {mode:o} nlink={nlink}")
}

/// A regular file's line.
pub fn file_line(path: &str, mode: u32, nlink: u32, data: &[u8]) -> String {
    format!(
        "{path} file {mode:o} nlink={nlink} size={} {:?}",
        data.len(),
        Digest::of(data)
    )
}

/// A symbolic link's line.
pub fn symlink_line(path: &str, mode: u32, nlink: u32, target: &[u8]) -> String {
    format!(
        "{path} symlink {mode:o} nlink={nlink} -> {}",
        String::from_utf8_lossy(target)
    )
}

/// An extended attribute's line (after its file's or directory's).
pub fn xattr_line(path: &str, name: &[u8], value: &[u8]) -> String {
    format!(
        "{path} xattr {} {:?}",
        String::from_utf8_lossy(name),
        Digest::of(value)
    )
}

/// The tree of checkpoint `seq` held by `service`, or `None` if it does not hold it. `Err`
/// says what made it unreadable (a partition that does not decode, a walk that fails).
pub fn checkpoint_tree<S: Service>(service: &S, seq: Seq) -> Option<Result<Vec<String>, String>> {
    Some(export(service, seq)?.and_then(|parts| tree_of(&parts, seq)))
}

/// Every partition of checkpoint `seq` as `service` would send it to a fetcher.
fn export<S: Service>(service: &S, seq: Seq) -> Option<Result<Vec<Vec<u8>>, String>> {
    service.checkpoint_partition_digests(seq)?;
    let parts = (0..service.partition_count())
        .map(|p| {
            service
                .export_partition(seq, p)
                .ok_or_else(|| format!("partition {p} of checkpoint {seq} not exported"))
        })
        .collect();
    Some(parts)
}

/// The tree of the exported partitions `parts` of checkpoint `seq`.
fn tree_of(parts: &[Vec<u8>], seq: Seq) -> Result<Vec<String>, String> {
    let mut writes = WriteSet::new();
    for (p, data) in parts.iter().enumerate() {
        let Ok(items) = postcard::from_bytes::<Vec<(Vec<u8>, Vec<u8>)>>(data) else {
            return Err(format!("partition {p} of checkpoint {seq} does not decode"));
        };
        writes.extend(items.into_iter().map(|(k, v)| (k, Some(v))));
    }
    if writes.is_empty() {
        return Err(format!("checkpoint {seq} is empty"));
    }
    // `parts` came from a `u32` partition count.
    let count = parts.len() as u32;
    let mut store = MemStore::new(count);
    store
        .apply(writes)
        .map_err(|e| format!("checkpoint {seq}: {e}"))?;
    let cfg = FsConfig {
        partitions: count,
        ..FsConfig::trusted()
    };
    let fs = FileService::with_store(store, cfg).map_err(|e| format!("checkpoint {seq}: {e}"))?;
    service_tree(&fs)
}

/// Reads checkpoints as trees, remembering the tree of each content it read: replicas
/// hold the same checkpoint, and the walk costs more than the export.
#[derive(Debug, Default)]
pub struct Reader {
    trees: BTreeMap<Digest, Result<Vec<String>, String>>,
}

impl Reader {
    /// As [`checkpoint_tree`].
    pub fn read<S: Service>(
        &mut self,
        service: &S,
        seq: Seq,
    ) -> Option<Result<Vec<String>, String>> {
        let parts = match export(service, seq)? {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let key = Digest::of_parts(&slices);
        let tree = self
            .trees
            .entry(key)
            .or_insert_with(|| tree_of(&parts, seq));
        Some(tree.clone())
    }
}

/// The live tree of `fs`, read as root through read-only operations.
pub fn service_tree<S: Store>(fs: &FileService<S>) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    walk(fs, FileHandle::ROOT, "", &mut out, 0)?;
    Ok(out)
}

fn ask<S: Store>(fs: &FileService<S>, op: Op) -> FsResult {
    fs.execute_request_read_only(Some(Request::new(Credentials::root(), op)))
}

/// Deeper than the service lets any tree grow: only a cycle in a corrupt checkpoint gets here.
const DEPTH_MAX: usize = byzfs_fs::dir::MAX_DEPTH as usize + 1;

fn walk<S: Store>(
    fs: &FileService<S>,
    dir: FileHandle,
    path: &str,
    out: &mut Vec<String>,
    depth: usize,
) -> Result<(), String> {
    if depth > DEPTH_MAX {
        return Err(format!("{path}: nested deeper than {DEPTH_MAX}"));
    }
    let mut entries = Vec::new();
    let mut cookie = 0;
    loop {
        match ask(
            fs,
            Op::ReadDir {
                dir,
                cookie,
                max_entries: 64,
            },
        ) {
            Ok(Reply::ReadDir { entries: e, eof }) => {
                let Some(last) = e.last() else {
                    break;
                };
                cookie = last.cookie;
                entries.extend(e.into_iter().filter(|e| e.name != b"." && e.name != b".."));
                if eof {
                    break;
                }
            }
            other => return Err(format!("{path}/: readdir gave {other:?}")),
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        let p = format!("{path}/{}", String::from_utf8_lossy(&e.name));
        let a = match ask(fs, Op::GetAttr { fh: e.fh }) {
            Ok(Reply::Attr(a)) => a,
            other => return Err(format!("{p}: getattr gave {other:?}")),
        };
        match a.kind {
            FileType::Directory => {
                out.push(dir_line(&p, a.mode, a.nlink));
                xattrs(fs, e.fh, &p, out)?;
                walk(fs, e.fh, &p, out, depth + 1)?;
            }
            FileType::Regular => {
                let data = match ask(
                    fs,
                    Op::Read {
                        fh: e.fh,
                        offset: 0,
                        count: byzfs_fs::proto::op::MAX_IO,
                    },
                ) {
                    Ok(Reply::Read { data, .. }) => data,
                    other => return Err(format!("{p}: read gave {other:?}")),
                };
                if data.len() as u64 != a.size {
                    return Err(format!(
                        "{p}: size {} but {} bytes read",
                        a.size,
                        data.len()
                    ));
                }
                out.push(file_line(&p, a.mode, a.nlink, &data));
                xattrs(fs, e.fh, &p, out)?;
            }
            FileType::Symlink => match ask(fs, Op::ReadLink { fh: e.fh }) {
                Ok(Reply::ReadLink(target)) => out.push(symlink_line(&p, a.mode, a.nlink, &target)),
                other => return Err(format!("{p}: readlink gave {other:?}")),
            },
            k => out.push(format!("{p} {k:?}")),
        }
    }
    Ok(())
}

/// Appends the lines of `fh`'s extended attributes, listed as root (every namespace).
fn xattrs<S: Store>(
    fs: &FileService<S>,
    fh: FileHandle,
    path: &str,
    out: &mut Vec<String>,
) -> Result<(), String> {
    let list = match ask(fs, Op::ListXattr { fh }) {
        Ok(Reply::Xattr(list)) => list,
        other => return Err(format!("{path}: listxattr gave {other:?}")),
    };
    for name in list.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = name.to_vec();
        match ask(
            fs,
            Op::GetXattr {
                fh,
                name: name.clone(),
            },
        ) {
            Ok(Reply::Xattr(value)) => out.push(xattr_line(path, &name, &value)),
            other => return Err(format!("{path}: getxattr gave {other:?}")),
        }
    }
    Ok(())
}
