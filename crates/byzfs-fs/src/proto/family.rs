//! The families of operations: which part of the file system an operation concerns. The
//! replicas run each family in the files that hold it (`crate::route` routes by
//! [`Op::family`]), and a client tells lock operations apart by it ([`Op::is_lock`]).

use super::op::Op;

/// What an operation concerns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Family {
    /// A file's attributes, extended attributes and link target.
    Attrs,
    /// A file's contents: reads, writes, sizes, byte ranges, durability.
    Data,
    /// Names in directories: lookups, creations (at reserved handles too), links, removals,
    /// renames, listings, directory delegations and the sweeps of hidden files.
    Dirs,
    /// Record locks, their leases and delegations, and blocking lock requests.
    Locks,
    /// Encryption groups, the groups and headers of files, writer proofs.
    Crypt,
    /// The file system's space: statistics, the replicas' capacity reports, and blocks
    /// given back.
    Space,
    /// Several operations as one.
    Batch,
}

impl Op {
    /// The family this operation belongs to.
    pub fn family(&self) -> Family {
        match self {
            Op::GetAttr { .. }
            | Op::SetAttr { .. }
            | Op::Access { .. }
            | Op::ReadLink { .. }
            | Op::GetXattr { .. }
            | Op::ListXattr { .. }
            | Op::SetXattr { .. }
            | Op::RemoveXattr { .. } => Family::Attrs,
            Op::Read { .. }
            | Op::ReadGather { .. }
            | Op::Write { .. }
            | Op::WriteGather { .. }
            | Op::WriteSetAttr { .. }
            | Op::Allocate { .. }
            | Op::Fsync { .. }
            | Op::CopyRange { .. }
            | Op::Punch { .. }
            | Op::Seek { .. }
            | Op::WriteAt { .. } => Family::Data,
            Op::Lookup { .. }
            | Op::Create { .. }
            | Op::Mkdir { .. }
            | Op::Symlink { .. }
            | Op::Mknod { .. }
            | Op::Link { .. }
            | Op::ReadDir { .. }
            | Op::Remove { .. }
            | Op::Rmdir { .. }
            | Op::Rename { .. }
            | Op::RenameNoReplace { .. }
            | Op::Exchange { .. }
            | Op::ReserveInodes { .. }
            | Op::MakeAt { .. }
            | Op::DelegateDir { .. }
            | Op::ReturnDir { .. }
            | Op::SweepOrphans { .. }
            | Op::SweepDir { .. } => Family::Dirs,
            Op::GetLk { .. }
            | Op::SetLk(_)
            | Op::ReleaseLocks { .. }
            | Op::RenewLease
            | Op::LockDelegate(_)
            | Op::ReturnDelegation { .. }
            | Op::Recalls
            | Op::SetLkWait(_)
            | Op::CancelWait { .. }
            | Op::DelegateFile { .. }
            | Op::ReturnFile { .. } => Family::Locks,
            Op::GroupPut { .. }
            | Op::GroupGet { .. }
            | Op::SetGroup { .. }
            | Op::FileGroup { .. }
            | Op::WriterSeq
            | Op::Signed { .. } => Family::Crypt,
            Op::StatFs | Op::ReportCapacity { .. } | Op::Reclaim { .. } => Family::Space,
            Op::Batch(_) => Family::Batch,
        }
    }

    /// Whether this is a lock operation ([`crate::lock`]): it changes no file, only the
    /// lock table, so a client's caches of files and attributes stay valid.
    pub fn is_lock(&self) -> bool {
        self.family() == Family::Locks
    }
}
