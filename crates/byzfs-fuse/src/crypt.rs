//! The crypto layer of an encrypted mount (issue #28, docs/ENCRYPTION.md): between
//! every operation the mount sends and the wire, it turns plaintext into what the replicas
//! store (`byzfs_crypt::file`) and back, so the rest of the mount — gathered writes,
//! delegations, early answers, locks — works on plaintext as before.
//!
//! * **The group.** Every record the mount reads (at start, and again when the keys
//!   change) must carry the signature of the owner the mount expects (`Encryption::owner`)
//!   for this cluster and group id (`byzfs_fs::proto::group::authenticate`); the owner
//!   never changes while mounted. A record the replicas made up or another owner signed is
//!   refused (`EIO`), whatever lockbox it holds for this member.
//! * **The tree.** An encrypted mount shows one group's tree, the directory `g-<group id>`
//!   at the cluster's root (made and joined to the group, in one request, by the first
//!   writer that mounts it; `crypt_tree.rs`). The mount's root stands for it
//!   (`crypt_handles.rs`).
//! * **Names** of entries are sealed under their directory's name key of the key version
//!   the directory's header names (set when this layer makes the directory); link
//!   targets, extended attributes' names and values are sealed too.
//! * **Contents** are stored in sealed blocks; a write of part of a block reads the block,
//!   opens it and seals it again whole (`crypt_data.rs`). The plaintext size is in the
//!   file's sealed header, which the replicas return with every attribute.
//! * **Writers** sign every operation that may change the tree (`Op::Signed`) with the
//!   group's current writer key; a reader's mount sends them unsigned and every replica
//!   refuses them (`EACCES`). A proof made with an older key version (`EKEYEXPIRED`: the
//!   owner changed the group) makes the layer read the group again and try once more.
//! * **Hidden files** (open files removed, `O_TMPFILE`) go to the cluster root's orphan
//!   directory under their plain hidden names, as a plain mount's do (the name tells only
//!   the mount's session and the inode), so the replicas' sweep clears what a dead
//!   encrypted mount hid there (`byzfs_fs::orphan`); the files stay sealed.
//! * **Not done here:** `copy_file_range` and punching holes answer `EOPNOTSUPP` (the
//!   kernel and `cp` copy through reads and writes then), `SEEK_DATA`/`SEEK_HOLE`
//!   `ENOSYS` (the kernel then treats the file as all data).

use crate::crypt_handles::map_op;
use crate::crypt_nodes::{FileNodes, MISFIT};
use crate::transport::Transport;
use byzfs_crypt::file::{self, DirHeader};
use byzfs_crypt::member::{open_mine, GroupRef, Identity, MemberKeys};
use byzfs_crypt::regression::GroupKeys;
use byzfs_crypt::CryptError;
use byzfs_fs::proto::group::{authenticate, GroupRecord, SignedGroup};
use byzfs_fs::proto::signed::{checked, sign_with_headers};
use byzfs_fs::{Attr, Credentials, Errno, FileHandle, FileType, FsResult, Op, Reply};
use ed25519_dalek::SigningKey;
use std::collections::{BTreeMap, HashMap};

/// `ENOSYS`: the kernel stops asking (`lseek` then works on its own).
const ENOSYS: Errno = Errno(38);

/// What `byzfs mount --identity` gives the mount: who it is, which group's tree, and whose
/// group it must be.
#[derive(Clone, Debug)]
pub struct Encryption {
    /// The member's identity.
    pub identity: Identity,
    /// The group whose tree is mounted.
    pub group: [u8; 16],
    /// The Ed25519 key of the owner the group must have: the identity's own for a group
    /// it names, or the one given with `--owner`. A record signed by anyone else is
    /// refused.
    pub owner: [u8; 32],
}

/// `signed` as group `g`'s record, if `g.owner` signed it for `g`'s cluster and id; why
/// not otherwise (a record from the replicas is hostile until checked).
pub(crate) fn authenticated(g: &GroupRef, signed: SignedGroup) -> Result<GroupRecord, String> {
    if signed.record.owner != g.owner {
        return Err(format!(
            "the group's record names owner {}, not {}",
            hex::encode(signed.record.owner),
            hex::encode(g.owner)
        ));
    }
    match authenticate(&g.cluster, &g.group, &signed.record, &signed.signature) {
        Ok(()) => Ok(signed.record),
        Err(e) => Err(format!(
            "the group's record is not as its owner signed it for this cluster ({e:?})"
        )),
    }
}

/// The name of group `group`'s tree at the cluster's root.
pub fn tree_name(group: &[u8; 16]) -> Vec<u8> {
    format!("g-{}", hex::encode(group)).into_bytes()
}

/// What a reply needs to become plaintext again, per operation sent.
pub(crate) enum Shape {
    /// Attributes only.
    Plain,
    /// A write of this many plaintext bytes.
    Wrote(u32),
    /// A directory listing of this (real) directory.
    Listing(FileHandle),
    /// An extended attribute's value: the file and the attribute's stored name.
    XattrValue(FileHandle, Vec<u8>),
    /// A list of extended attribute names of this file.
    XattrNames(FileHandle),
    /// A link's target.
    Target,
    /// A batch's members.
    Batch(Vec<Shape>),
}

/// The crypto layer's state.
pub(crate) struct Crypt {
    pub(crate) identity: Identity,
    /// The cluster, group and owner: fixed for the mount's life.
    pub(crate) g: GroupRef,
    /// The newest keys this member holds.
    pub(crate) keys: GroupKeys,
    /// The writer key of `keys`' version and the owner's certificate of it, for writers.
    pub(crate) writer: Option<(SigningKey, [u8; 64])>,
    /// The tree's directory, which the mount's root stands for.
    pub(crate) top: FileHandle,
    /// This mount's client id (proofs are bound to it).
    pub(crate) client: u64,
    /// The last writer-proof sequence number used.
    pub(crate) seq: u64,
    /// Plaintext sizes of regular files, from their headers.
    pub(crate) sizes: HashMap<u64, u64>,
    /// Regular files' checked headers and tree nodes (`crypt_nodes.rs`).
    pub(crate) files: HashMap<u64, FileNodes>,
    /// What the request being built makes of them, kept once the replicas accept it.
    pub(crate) pending: HashMap<u64, FileNodes>,
    /// The headers the request being built expects its files to have.
    pub(crate) expect: Vec<(FileHandle, Vec<u8>)>,
    /// Name-key versions of directories, from their headers.
    pub(crate) dirs: HashMap<u64, DirHeader>,
    /// Plaintext blocks sealed in the request being built, by (inode, index): a batch may
    /// write a block the replicas do not have yet.
    pub(crate) overlay: BTreeMap<(u64, u64), Vec<u8>>,
    /// The cluster root's orphan directory, once looked up: names in it are plain.
    pub(crate) orphans: Option<FileHandle>,
    /// Send the layer's own reads (headers, nodes, old blocks) ordered: set while an
    /// operation is tried again after a misfit or a stale header, so the second try cannot
    /// be answered from the same state, one without this mount's last change, as the first.
    pub(crate) ordered: bool,
}

/// What a failure of the crypto is to the caller.
pub(crate) fn crypt_errno(e: &CryptError) -> Errno {
    match e {
        CryptError::NameTooLong(_) => Errno::ENAMETOOLONG,
        other => {
            tracing::warn!(error = %other, "refused data from the cluster or a bad name: EIO");
            Errno::EIO
        }
    }
}

impl Crypt {
    /// The layer of member `identity` of group `g` with its keys `mine`, for client
    /// `client` whose last writer-proof sequence number is `seq`, before its tree is found
    /// (`top` is the cluster's root until then: `crypt_tree::start`).
    pub(crate) fn new(
        identity: Identity,
        g: GroupRef,
        mine: MemberKeys,
        client: u64,
        seq: u64,
    ) -> Crypt {
        Crypt {
            identity,
            g,
            keys: mine.keys,
            writer: mine.writer,
            top: FileHandle::ROOT,
            client,
            seq,
            sizes: HashMap::new(),
            files: HashMap::new(),
            pending: HashMap::new(),
            expect: Vec::new(),
            dirs: HashMap::new(),
            overlay: BTreeMap::new(),
            orphans: None,
            ordered: false,
        }
    }

    /// The real handle of `fh` (the root stands for the tree).
    pub(crate) fn out(&self, fh: FileHandle) -> FileHandle {
        if fh == FileHandle::ROOT {
            self.top
        } else {
            fh
        }
    }

    /// The handle the mount knows `fh` by.
    fn back(&self, fh: FileHandle) -> FileHandle {
        if fh == self.top {
            FileHandle::ROOT
        } else {
            fh
        }
    }

    /// Runs plaintext `op` through the layer.
    pub(crate) fn call(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        op: Op,
        read_only: bool,
    ) -> FsResult {
        if let Some(r) = self.orphan_dir(link, cred, &op, read_only) {
            return r;
        }
        let op = map_op(op, &|h| self.out(h));
        let r = self.call_settled(link, cred, op.clone(), read_only);
        let retry = match r {
            Err(Errno::EKEYEXPIRED) => self.refresh(link)?,
            // Another writer changed a file since this mount read its header: build the
            // change again on the new one (`Op::Signed`'s `expect`), or read again.
            Err(Errno::ESTALE) if self.writer.is_some() => true,
            Err(MISFIT) => true,
            _ => false,
        };
        if !retry {
            return r;
        }
        let again = matches!(r, Err(Errno::ESTALE) | Err(MISFIT));
        if again {
            self.files.clear();
            self.sizes.clear();
        }
        self.ordered = again;
        let r = self.call_settled(link, cred, op, read_only && !again);
        self.ordered = false;
        match r {
            Err(MISFIT) => Err(Errno::EIO),
            other => other,
        }
    }

    /// Whether the layer's own reads may use the read-only optimisation.
    pub(crate) fn reads_read_only(&self, link: &dyn Transport) -> bool {
        !link.strict() && !self.ordered
    }

    /// [`Self::call_mapped`], then what it made of files' nodes kept if it succeeded, or
    /// those files forgotten if not.
    fn call_settled(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        op: Op,
        read_only: bool,
    ) -> FsResult {
        let r = self.call_mapped(link, cred, op, read_only);
        self.overlay.clear();
        self.expect.clear();
        let pending = std::mem::take(&mut self.pending);
        for (ino, nodes) in pending {
            if r.is_ok() {
                self.files.insert(ino, nodes);
            } else {
                self.files.remove(&ino);
                self.sizes.remove(&ino);
            }
        }
        r
    }

    fn call_mapped(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        op: Op,
        read_only: bool,
    ) -> FsResult {
        match op {
            Op::Read { fh, offset, count } => self.read(link, cred, fh, offset, count, read_only),
            Op::CopyRange { .. } | Op::Punch { .. } => Err(Errno::EOPNOTSUPP),
            Op::Seek { .. } => Err(ENOSYS),
            Op::Mkdir { .. } => {
                // Made at a reserved handle, so the request that makes the directory also
                // sets its header (its names' key version: `seal`'s `MakeAt`); a second
                // request could fail and leave its names under version 1's key.
                let at = link.new_handle(cred)?;
                let op = Op::MakeAt {
                    time: None,
                    at,
                    make: Box::new(op),
                };
                self.call_mapped(link, cred, op, read_only)
            }
            other => {
                let mut headers = Vec::new();
                let (sealed, shape) = match self.seal(link, cred, other, &mut headers) {
                    Ok(s) => s,
                    Err(e) => {
                        self.sizes.clear();
                        return Err(e);
                    }
                };
                let r = match self.send(link, cred, sealed, headers, read_only) {
                    Ok(r) => r,
                    Err(e) => {
                        // Sizes were updated as the request was built.
                        self.sizes.clear();
                        return Err(e);
                    }
                };
                self.open(link, r, &shape)
            }
        }
    }

    /// A lookup or creation of the orphan directory at the mount's root: at the cluster's
    /// root, as a plain mount's (module documentation). `None` for any other operation.
    fn orphan_dir(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        op: &Op,
        read_only: bool,
    ) -> Option<FsResult> {
        let (Op::Lookup { dir, name } | Op::Mkdir { dir, name, .. }) = op else {
            return None;
        };
        if *dir != FileHandle::ROOT || name != byzfs_fs::orphan::ORPHAN_DIR {
            return None;
        }
        let r = link.transmit(cred, op.clone(), read_only);
        Some(match r {
            Ok(Reply::Entry(a)) => {
                self.orphans = Some(a.fh);
                Ok(Reply::Entry(a))
            }
            Ok(Reply::Made { entry, .. }) => {
                self.orphans = Some(entry.fh);
                // The tree's attributes stand for the root's, not the cluster root's.
                let ro = self.reads_read_only(link);
                let top = link.transmit(cred, Op::GetAttr { fh: self.top }, ro);
                match top {
                    Ok(Reply::Attr(a)) => self.attr(link, a).map(|dir| Reply::Made { entry, dir }),
                    Ok(_) => Err(Errno::EIO),
                    Err(e) => Err(e),
                }
            }
            other => other,
        })
    }

    /// Sends a sealed operation, signed (with `headers`) if it may change the tree and this
    /// member writes.
    fn send(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        op: Op,
        headers: Vec<(FileHandle, Vec<u8>)>,
        read_only: bool,
    ) -> FsResult {
        let (cred, signed) = self.sign(link, cred, op, headers);
        link.transmit(&cred, signed, read_only)
    }

    /// A sealed operation as it is sent, and the credentials it goes with: signed (with
    /// `headers` and the headers it expects) if it may change the tree and this member
    /// writes.
    pub(crate) fn sign(
        &mut self,
        link: &dyn Transport,
        cred: &Credentials,
        op: Op,
        headers: Vec<(FileHandle, Vec<u8>)>,
    ) -> (Credentials, Op) {
        let expect = std::mem::take(&mut self.expect);
        // The proof binds the credentials the request carries: mapped into the grant first.
        let cred = link.granted(cred);
        let signed = match &self.writer {
            Some((w, _)) if checked(&op) || !headers.is_empty() => {
                self.seq += 1;
                sign_with_headers(
                    w,
                    &self.g.cluster,
                    &[self.g.group],
                    self.keys.version(),
                    self.client,
                    self.seq,
                    &cred,
                    op,
                    headers,
                    expect,
                )
            }
            _ => op,
        };
        (cred, signed)
    }

    /// Reads the group again; whether the keys changed. The record must be signed by the
    /// owner the mount started with ([`authenticated`]): the owner never changes.
    pub(crate) fn refresh(&mut self, link: &mut dyn Transport) -> Result<bool, Errno> {
        let cred = crate::own_credentials();
        let get = Op::GroupGet {
            group: self.g.group,
        };
        let signed = match link.transmit(&cred, get, true)? {
            Reply::Group(Some(r)) => r,
            _ => return Err(Errno::EIO),
        };
        let record = authenticated(&self.g, signed).map_err(|why| {
            tracing::warn!(%why, "refusing the group's record: EIO");
            Errno::EIO
        })?;
        if record.version <= self.keys.version() {
            return Ok(false);
        }
        match open_mine(
            &self.identity,
            &self.g,
            &record.lockboxes,
            record.version,
            &record.writer,
        ) {
            Ok(k) => {
                tracing::info!(version = record.version, "the group changed: new keys");
                self.keys = k.keys;
                self.writer = k.writer;
                Ok(true)
            }
            Err(CryptError::NotMember) => {
                tracing::warn!("removed from the group: reading what was written before only");
                self.writer = None;
                Ok(false)
            }
            Err(e) => Err(crypt_errno(&e)),
        }
    }

    /// A directory's header, from the cache or the cluster.
    fn dir_header(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        dir: FileHandle,
    ) -> Result<DirHeader, Errno> {
        if let Some(h) = self.dirs.get(&dir.ino) {
            return Ok(*h);
        }
        let ro = self.reads_read_only(link);
        let r = link.transmit(cred, Op::GetAttr { fh: dir }, ro)?;
        self.open(link, r, &Shape::Plain)?;
        self.dirs.get(&dir.ino).copied().ok_or(Errno::ENOTDIR)
    }

    /// A regular file's plaintext size, from the cache or the cluster.
    pub(crate) fn size_of(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        fh: FileHandle,
    ) -> Result<u64, Errno> {
        if let Some(s) = self.sizes.get(&fh.ino) {
            return Ok(*s);
        }
        let ro = self.reads_read_only(link);
        let r = link.transmit(cred, Op::GetAttr { fh }, ro)?;
        self.open(link, r, &Shape::Plain)?;
        self.sizes.get(&fh.ino).copied().ok_or(Errno::EISDIR)
    }

    /// The stored name of `name` in `dir` (`.` and `..` as they are).
    fn name(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        dir: FileHandle,
        name: Vec<u8>,
    ) -> Result<Vec<u8>, Errno> {
        if name == b"." || name == b".." || Some(dir) == self.orphans {
            return Ok(name);
        }
        let h = self.dir_header(link, cred, dir)?;
        file::seal_name(
            &self.keys,
            &file::file_id(dir.ino, dir.generation),
            h,
            &name,
        )
        .map_err(|e| crypt_errno(&e))
    }

    /// The stored names of a rename's or an exchange's two `(directory, name)`.
    fn two_names(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        a: (FileHandle, Vec<u8>),
        b: (FileHandle, Vec<u8>),
    ) -> Result<(Vec<u8>, Vec<u8>), Errno> {
        Ok((
            self.name(link, cred, a.0, a.1)?,
            self.name(link, cred, b.0, b.1)?,
        ))
    }

    /// `op` as the replicas store it, with the headers to set and how to open its reply.
    pub(crate) fn seal(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        op: Op,
        headers: &mut Vec<(FileHandle, Vec<u8>)>,
    ) -> Result<(Op, Shape), Errno> {
        let rng = &mut rand_core::OsRng;
        Ok(match op {
            Op::Lookup { dir, name } => {
                let name = self.name(link, cred, dir, name)?;
                (Op::Lookup { dir, name }, Shape::Plain)
            }
            Op::Create {
                dir,
                name,
                mode,
                exclusive,
            } => {
                let name = self.name(link, cred, dir, name)?;
                let op = Op::Create {
                    dir,
                    name,
                    mode,
                    exclusive,
                };
                (op, Shape::Plain)
            }
            Op::Mkdir { dir, name, mode } => {
                let name = self.name(link, cred, dir, name)?;
                (Op::Mkdir { dir, name, mode }, Shape::Plain)
            }
            Op::Symlink { dir, name, target } => {
                let name = self.name(link, cred, dir, name)?;
                let target =
                    file::seal_target(&self.keys, &target, rng).map_err(|e| crypt_errno(&e))?;
                (Op::Symlink { dir, name, target }, Shape::Plain)
            }
            Op::Mknod {
                dir,
                name,
                kind,
                mode,
            } => {
                let name = self.name(link, cred, dir, name)?;
                let op = Op::Mknod {
                    dir,
                    name,
                    kind,
                    mode,
                };
                (op, Shape::Plain)
            }
            Op::Remove { dir, name } => {
                let name = self.name(link, cred, dir, name)?;
                (Op::Remove { dir, name }, Shape::Plain)
            }
            Op::Rmdir { dir, name } => {
                let name = self.name(link, cred, dir, name)?;
                (Op::Rmdir { dir, name }, Shape::Plain)
            }
            Op::Rename {
                from_dir,
                from_name,
                to_dir,
                to_name,
            } => {
                let (from_name, to_name) =
                    self.two_names(link, cred, (from_dir, from_name), (to_dir, to_name))?;
                let op = Op::Rename {
                    from_dir,
                    from_name,
                    to_dir,
                    to_name,
                };
                (op, Shape::Plain)
            }
            Op::RenameNoReplace {
                from_dir,
                from_name,
                to_dir,
                to_name,
            } => {
                let (from_name, to_name) =
                    self.two_names(link, cred, (from_dir, from_name), (to_dir, to_name))?;
                let op = Op::RenameNoReplace {
                    from_dir,
                    from_name,
                    to_dir,
                    to_name,
                };
                (op, Shape::Plain)
            }
            Op::Exchange {
                a_dir,
                a_name,
                b_dir,
                b_name,
            } => {
                let (a_name, b_name) =
                    self.two_names(link, cred, (a_dir, a_name), (b_dir, b_name))?;
                let op = Op::Exchange {
                    a_dir,
                    a_name,
                    b_dir,
                    b_name,
                };
                (op, Shape::Plain)
            }
            Op::Link { fh, dir, name } => {
                let name = self.name(link, cred, dir, name)?;
                (Op::Link { fh, dir, name }, Shape::Plain)
            }
            Op::ReadDir { dir, .. } => (op, Shape::Listing(dir)),
            Op::ReadLink { .. } => (op, Shape::Target),
            Op::GetXattr { fh, name } => {
                let name = self.xattr_name(fh, &name)?;
                let shape = Shape::XattrValue(fh, name.clone());
                (Op::GetXattr { fh, name }, shape)
            }
            Op::ListXattr { fh } => (op, Shape::XattrNames(fh)),
            Op::SetXattr {
                fh,
                name,
                value,
                how,
            } => {
                let name = self.xattr_name(fh, &name)?;
                let id = file::file_id(fh.ino, fh.generation);
                let value = file::seal_xattr_value(&self.keys, &id, &name, &value, rng)
                    .map_err(|_| Errno::E2BIG)?;
                let op = Op::SetXattr {
                    fh,
                    name,
                    value,
                    how,
                };
                (op, Shape::Plain)
            }
            Op::RemoveXattr { fh, name } => {
                let name = self.xattr_name(fh, &name)?;
                (Op::RemoveXattr { fh, name }, Shape::Plain)
            }
            Op::Write { fh, offset, data } => {
                let n = u32::try_from(data.len()).map_err(|_| Errno::EINVAL)?;
                let extents = vec![byzfs_fs::Extent { offset, data }];
                let op = self.seal_content(link, cred, fh, extents, Vec::new(), headers)?;
                (op, Shape::Wrote(n))
            }
            Op::WriteGather { fh, extents } => {
                let n: usize = extents.iter().map(|e| e.data.len()).sum();
                let n = u32::try_from(n).map_err(|_| Errno::EINVAL)?;
                let op = self.seal_content(link, cred, fh, extents, Vec::new(), headers)?;
                (op, Shape::Wrote(n))
            }
            Op::WriteSetAttr { fh, extents, sets } => {
                let op = self.seal_content(link, cred, fh, extents, sets, headers)?;
                (op, Shape::Plain)
            }
            Op::SetAttr { fh, set } if set.size.is_some() => {
                let op = self.seal_content(link, cred, fh, Vec::new(), vec![set], headers)?;
                (op, Shape::Plain)
            }
            Op::Allocate { fh, end } => {
                let op = self.seal_allocate(link, cred, fh, end, headers)?;
                (op, Shape::Plain)
            }
            Op::MakeAt { at, make, time } => {
                let is_dir = matches!(*make, Op::Mkdir { .. });
                let is_file = matches!(*make, Op::Create { .. });
                let (make, shape) = self.seal(link, cred, *make, headers)?;
                if is_dir {
                    let h = DirHeader {
                        names: self.keys.version(),
                    };
                    let id = file::file_id(at.ino, at.generation);
                    headers.push((at, file::seal_dir_header(&self.keys, &id, h, rng)));
                    self.dirs.insert(at.ino, h);
                }
                if is_file {
                    self.sizes.insert(at.ino, 0);
                    self.files.insert(at.ino, FileNodes::empty());
                }
                let op = Op::MakeAt {
                    time,
                    at,
                    make: Box::new(make),
                };
                (op, shape)
            }
            Op::Batch(ops) => {
                let mut sealed = Vec::with_capacity(ops.len());
                let mut shapes = Vec::with_capacity(ops.len());
                for op in ops {
                    let (o, s) = self.seal(link, cred, op, headers)?;
                    sealed.push(o);
                    shapes.push(s);
                }
                (Op::Batch(sealed), Shape::Batch(shapes))
            }
            Op::CopyRange { .. } | Op::Punch { .. } => return Err(Errno::EOPNOTSUPP),
            Op::Seek { .. } => return Err(ENOSYS),
            // Never made for an encrypted mount (`gather.rs` `at_its_time` is a plain
            // mount's): its write would go as it is.
            Op::WriteAt { .. } => {
                tracing::warn!("a timed write on an encrypted mount: refused");
                return Err(Errno::EIO);
            }
            other => (other, Shape::Plain),
        })
    }

    fn xattr_name(&self, fh: FileHandle, name: &[u8]) -> Result<Vec<u8>, Errno> {
        let id = file::file_id(fh.ino, fh.generation);
        file::seal_xattr_name(&self.keys, &id, name).map_err(|e| match e {
            CryptError::NameTooLong(_) => Errno::ERANGE,
            other => crypt_errno(&other),
        })
    }

    /// A reply as the mount expects it: plaintext sizes, names, targets and values.
    pub(crate) fn open(&mut self, link: &mut dyn Transport, r: Reply, shape: &Shape) -> FsResult {
        Ok(match (r, shape) {
            (Reply::Attr(a), _) => Reply::Attr(self.attr(link, a)?),
            (Reply::Entry(a), _) => Reply::Entry(self.attr(link, a)?),
            (Reply::Write { count, attr }, s) => Reply::Write {
                count: match s {
                    Shape::Wrote(n) => *n,
                    _ => count,
                },
                attr: self.attr(link, attr)?,
            },
            (Reply::Made { entry, dir }, _) => Reply::Made {
                entry: self.attr(link, entry)?,
                dir: self.attr(link, dir)?,
            },
            (Reply::Unlinked { dir, ino, left }, _) => Reply::Unlinked {
                dir: self.attr(link, dir)?,
                ino,
                left: match left {
                    Some(a) => Some(self.attr(link, a)?),
                    None => None,
                },
            },
            (Reply::Delegated { lapsed, attr, mine }, _) => Reply::Delegated {
                lapsed,
                attr: self.attr(link, attr)?,
                mine,
            },
            (Reply::ReadDir { entries, eof }, Shape::Listing(dir)) => {
                let id = file::file_id(dir.ino, dir.generation);
                let h = self
                    .dirs
                    .get(&dir.ino)
                    .copied()
                    .unwrap_or(DirHeader { names: 1 });
                let mut out = Vec::with_capacity(entries.len());
                let plain = Some(*dir) == self.orphans;
                for mut e in entries {
                    if e.name != b"." && e.name != b".." && !plain {
                        match file::open_name(&self.keys, &id, h, &e.name) {
                            Ok(n) => e.name = n,
                            Err(err) => {
                                tracing::warn!(error = %err, dir = dir.ino, "an entry whose name does not open: not listed");
                                continue;
                            }
                        }
                    }
                    e.fh = self.back(e.fh);
                    out.push(e);
                }
                Reply::ReadDir { entries: out, eof }
            }
            (Reply::ReadLink(t), _) => {
                Reply::ReadLink(file::open_target(&self.keys, &t).map_err(|e| crypt_errno(&e))?)
            }
            (Reply::Xattr(v), Shape::XattrValue(fh, name)) => {
                let id = file::file_id(fh.ino, fh.generation);
                let v = file::open_xattr_value(&self.keys, &id, name, &v)
                    .map_err(|e| crypt_errno(&e))?;
                Reply::Xattr(v)
            }
            (Reply::Xattr(list), Shape::XattrNames(fh)) => {
                let id = file::file_id(fh.ino, fh.generation);
                let mut out = Vec::new();
                for n in list.split(|&b| b == 0).filter(|n| !n.is_empty()) {
                    match file::open_xattr_name(&self.keys, &id, n) {
                        Ok(p) => {
                            out.extend(p);
                            out.push(0);
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "an attribute name that does not open: not listed")
                        }
                    }
                }
                Reply::Xattr(out)
            }
            (Reply::Batch(replies), Shape::Batch(shapes)) => {
                let mut out = Vec::with_capacity(replies.len());
                for (r, s) in replies.into_iter().zip(shapes) {
                    out.push(self.open(link, r, s)?);
                }
                Reply::Batch(out)
            }
            (other, _) => other,
        })
    }

    /// Attributes as the mount shows them: the root for the tree, plaintext sizes.
    fn attr(&mut self, link: &mut dyn Transport, mut a: Attr) -> Result<Attr, Errno> {
        let id = file::file_id(a.fh.ino, a.fh.generation);
        match a.kind {
            FileType::Regular => {
                let size = match self.take_header(a.fh, &a.crypt) {
                    Err(Errno::EKEYEXPIRED) if self.refresh(link)? => {
                        self.take_header(a.fh, &a.crypt)
                    }
                    other => other,
                }
                .map_err(|e| {
                    if e == Errno::EKEYEXPIRED {
                        Errno::EIO
                    } else {
                        e
                    }
                })?;
                if a.crypt.is_empty() && a.size > 0 {
                    tracing::warn!(ino = a.fh.ino, "a file with data but no header: EIO");
                    return Err(Errno::EIO);
                }
                a.size = size;
                self.sizes.insert(a.fh.ino, size);
            }
            FileType::Directory => {
                let h = match file::open_dir_header(&self.keys, &id, &a.crypt) {
                    Err(CryptError::NoSuchVersion { .. }) if self.refresh(link)? => {
                        file::open_dir_header(&self.keys, &id, &a.crypt)
                    }
                    other => other,
                }
                .map_err(|e| crypt_errno(&e))?;
                self.dirs.insert(a.fh.ino, h);
            }
            FileType::Symlink => a.size = file::target_len(a.size),
            _ => {}
        }
        a.crypt = Vec::new();
        a.fh = self.back(a.fh);
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_fs::proto::group::signed_bytes;
    use ed25519_dalek::Signer as _;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    /// Version `version` of `owner`'s group `name`, signed by `signer` for `cluster`.
    fn record(
        owner: &SigningKey,
        signer: &SigningKey,
        cluster: [u8; 16],
        name: &str,
        version: u32,
    ) -> SignedGroup {
        let o = owner.verifying_key().to_bytes();
        let record = GroupRecord {
            owner: o,
            name: name.into(),
            version,
            writer: key(9).verifying_key().to_bytes(),
            lockboxes: vec![vec![1; 100]],
        };
        let group = byzfs_fs::proto::group::group_id(&o, name);
        let signature = signer
            .sign(&signed_bytes(&cluster, &group, &record))
            .to_bytes()
            .to_vec();
        SignedGroup { record, signature }
    }

    /// Issue #43 item 5 (1–3, 5): the mount takes only a record its expected owner signed
    /// for this cluster and group, at start and on every refresh; a later version signed
    /// by anyone else (a squatter, or replicas making one up) does not change the owner.
    #[test]
    fn the_mount_takes_only_records_its_owner_signed_for_this_cluster() {
        let (victim, squatter) = (key(1), key(2));
        let cluster = [5; 16];
        let g = GroupRef {
            cluster,
            group: byzfs_fs::proto::group::group_id(&victim.verifying_key().to_bytes(), "team"),
            owner: victim.verifying_key().to_bytes(),
        };
        let good = record(&victim, &victim, cluster, "team", 2);
        assert_eq!(authenticated(&g, good.clone()), Ok(good.record.clone()));
        let theirs = record(&squatter, &squatter, cluster, "team", 3);
        assert_eq!(
            authenticated(&g, theirs.clone()),
            Err(format!(
                "the group's record names owner {}, not {}",
                hex::encode(theirs.record.owner),
                hex::encode(g.owner)
            ))
        );
        let not_as_signed = "the group's record is not as its owner signed it for this cluster";
        let cases = [
            // Naming the victim, signed by the squatter.
            ("forged", record(&victim, &squatter, cluster, "team", 3)),
            // The victim's, for another cluster.
            ("elsewhere", record(&victim, &victim, [6; 16], "team", 3)),
            // The victim's other group, served as this one.
            ("misplaced", record(&victim, &victim, cluster, "other", 3)),
        ];
        for (what, r) in cases {
            assert_eq!(
                authenticated(&g, r),
                Err(format!("{not_as_signed} ({:?})", Errno::EACCES)),
                "{what}"
            );
        }
        let mut changed = good;
        changed.record.lockboxes[0][0] ^= 1;
        assert!(authenticated(&g, changed).is_err(), "lockboxes changed");
    }
}
