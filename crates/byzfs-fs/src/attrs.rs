//! The attributes family ([`Family::Attrs`](crate::proto::family::Family::Attrs)): a file's
//! attributes (`getattr`, `setattr`, `access`), a symlink's target, and extended attributes
//! ([`crate::xattr`]).

use crate::exec::{kill_suid, misrouted, need_regular, Exec};
use crate::fail::Res;
use crate::perm;
use crate::proto::attr::{FileType, SetAttr, SetTime, MODE_MASK, S_ISGID, S_ISUID};
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::{Op, W_OK};
use crate::proto::reply::Reply;
use crate::store::Store;

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// Runs an operation of the attributes family.
    pub(crate) fn run_attrs(&mut self, op: Op) -> Res<Reply> {
        match op {
            Op::GetAttr { fh } => Ok(Reply::Attr(self.resolve(fh)?.attr(fh.ino))),
            Op::SetAttr { fh, set } => self.setattr(fh, set),
            Op::Access { fh, mask } => {
                let i = self.resolve(fh)?;
                perm::check(self.cred, &i, mask)?;
                Ok(Reply::Done)
            }
            Op::ReadLink { fh } => {
                let i = self.resolve(fh)?;
                if i.kind != FileType::Symlink {
                    return Err(Errno::EINVAL.into());
                }
                Ok(Reply::ReadLink(i.target))
            }
            Op::GetXattr { fh, name } => self.getxattr(fh, &name),
            Op::ListXattr { fh } => self.listxattr(fh),
            Op::SetXattr {
                fh,
                name,
                value,
                how,
            } => self.setxattr(fh, &name, &value, how),
            Op::RemoveXattr { fh, name } => self.removexattr(fh, &name),
            other => misrouted(&other),
        }
    }

    pub(crate) fn setattr(&mut self, fh: FileHandle, set: SetAttr) -> Res<Reply> {
        let mut i = self.resolve(fh)?;
        let cred = self.cred;
        if let Some(mode) = set.mode {
            if !perm::owner_or_root(cred, &i) {
                return Err(Errno::EPERM.into());
            }
            let mut m = mode & MODE_MASK;
            if cred.uid != 0 && !i.is_dir() && !perm::in_group(cred, i.gid) {
                m &= !S_ISGID;
            }
            i.mode = m;
        }
        if set.uid.is_some() || set.gid.is_some() {
            if let Some(uid) = set.uid {
                if uid != i.uid && cred.uid != 0 {
                    return Err(Errno::EPERM.into());
                }
            }
            if let Some(gid) = set.gid {
                if gid != i.gid
                    && cred.uid != 0
                    && !(cred.uid == i.uid && perm::in_group(cred, gid))
                {
                    return Err(Errno::EPERM.into());
                }
            }
            if !i.is_dir() {
                i.mode &= !S_ISUID;
                if i.mode & 0o010 != 0 {
                    i.mode &= !S_ISGID;
                }
            }
            i.uid = set.uid.unwrap_or(i.uid);
            i.gid = set.gid.unwrap_or(i.gid);
        }
        if let Some(size) = set.size {
            need_regular(&i)?;
            perm::check_io(cred, &i, W_OK)?;
            let delta = self.resize(fh.ino, &mut i, size)?;
            self.charge(delta)?;
            kill_suid(cred, &mut i);
            i.mtime = self.now;
        }
        for (which, t) in [(0, set.atime), (1, set.mtime)] {
            let Some(t) = t else { continue };
            let value = match t {
                SetTime::Now => {
                    if !perm::owner_or_root(cred, &i) {
                        perm::check(cred, &i, W_OK)?;
                    }
                    self.now
                }
                SetTime::At(ts) => {
                    if !perm::owner_or_root(cred, &i) {
                        return Err(Errno::EPERM.into());
                    }
                    if ts.nsecs >= 1_000_000_000 {
                        return Err(Errno::EINVAL.into());
                    }
                    ts
                }
            };
            if which == 0 {
                i.atime = value;
            } else {
                i.mtime = value;
            }
        }
        i.ctime = self.now;
        self.save(fh.ino, &i);
        Ok(Reply::Attr(i.attr(fh.ino)))
    }
}
