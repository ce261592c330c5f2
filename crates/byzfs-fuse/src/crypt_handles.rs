//! An encrypted mount shows its group's tree as its root (`crypt.rs`): every handle of
//! the root in an operation stands for the tree's directory, and that directory's handle
//! in a reply for the root. Everything above this layer keeps using `FileHandle::ROOT`.

use byzfs_fs::proto::lock::LockReq;
use byzfs_fs::{FileHandle, Op};

/// `op` with `f` applied to every handle it names.
pub(crate) fn map_op(op: Op, f: &impl Fn(FileHandle) -> FileHandle) -> Op {
    let lock = |r: LockReq| LockReq { fh: f(r.fh), ..r };
    match op {
        Op::GetAttr { fh } => Op::GetAttr { fh: f(fh) },
        Op::SetAttr { fh, set } => Op::SetAttr { fh: f(fh), set },
        Op::Lookup { dir, name } => Op::Lookup { dir: f(dir), name },
        Op::Access { fh, mask } => Op::Access { fh: f(fh), mask },
        Op::ReadLink { fh } => Op::ReadLink { fh: f(fh) },
        Op::Read { fh, offset, count } => Op::Read {
            fh: f(fh),
            offset,
            count,
        },
        Op::Write { fh, offset, data } => Op::Write {
            fh: f(fh),
            offset,
            data,
        },
        Op::Create {
            dir,
            name,
            mode,
            exclusive,
        } => Op::Create {
            dir: f(dir),
            name,
            mode,
            exclusive,
        },
        Op::Mkdir { dir, name, mode } => Op::Mkdir {
            dir: f(dir),
            name,
            mode,
        },
        Op::Symlink { dir, name, target } => Op::Symlink {
            dir: f(dir),
            name,
            target,
        },
        Op::Mknod {
            dir,
            name,
            kind,
            mode,
        } => Op::Mknod {
            dir: f(dir),
            name,
            kind,
            mode,
        },
        Op::Remove { dir, name } => Op::Remove { dir: f(dir), name },
        Op::Rmdir { dir, name } => Op::Rmdir { dir: f(dir), name },
        Op::Rename {
            from_dir,
            from_name,
            to_dir,
            to_name,
        } => Op::Rename {
            from_dir: f(from_dir),
            from_name,
            to_dir: f(to_dir),
            to_name,
        },
        Op::Link { fh, dir, name } => Op::Link {
            fh: f(fh),
            dir: f(dir),
            name,
        },
        Op::ReadDir {
            dir,
            cookie,
            max_entries,
        } => Op::ReadDir {
            dir: f(dir),
            cookie,
            max_entries,
        },
        Op::Fsync { fh } => Op::Fsync { fh: f(fh) },
        Op::RenameNoReplace {
            from_dir,
            from_name,
            to_dir,
            to_name,
        } => Op::RenameNoReplace {
            from_dir: f(from_dir),
            from_name,
            to_dir: f(to_dir),
            to_name,
        },
        Op::Exchange {
            a_dir,
            a_name,
            b_dir,
            b_name,
        } => Op::Exchange {
            a_dir: f(a_dir),
            a_name,
            b_dir: f(b_dir),
            b_name,
        },
        Op::Allocate { fh, end } => Op::Allocate { fh: f(fh), end },
        Op::GetXattr { fh, name } => Op::GetXattr { fh: f(fh), name },
        Op::ListXattr { fh } => Op::ListXattr { fh: f(fh) },
        Op::SetXattr {
            fh,
            name,
            value,
            how,
        } => Op::SetXattr {
            fh: f(fh),
            name,
            value,
            how,
        },
        Op::RemoveXattr { fh, name } => Op::RemoveXattr { fh: f(fh), name },
        Op::WriteGather { fh, extents } => Op::WriteGather { fh: f(fh), extents },
        Op::WriteSetAttr { fh, extents, sets } => Op::WriteSetAttr {
            fh: f(fh),
            extents,
            sets,
        },
        Op::GetLk {
            fh,
            owner,
            kind,
            start,
            end,
        } => Op::GetLk {
            fh: f(fh),
            owner,
            kind,
            start,
            end,
        },
        Op::SetLk(r) => Op::SetLk(lock(r)),
        Op::ReleaseLocks { fh, owner } => Op::ReleaseLocks { fh: f(fh), owner },
        Op::LockDelegate(r) => Op::LockDelegate(lock(r)),
        Op::ReturnDelegation { fh, locks } => Op::ReturnDelegation { fh: f(fh), locks },
        Op::SetLkWait(r) => Op::SetLkWait(lock(r)),
        Op::CancelWait { fh, owner } => Op::CancelWait { fh: f(fh), owner },
        Op::SweepDir { dir, after } => Op::SweepDir { dir: f(dir), after },
        Op::Reclaim { file } => Op::Reclaim { file: file.map(f) },
        Op::CopyRange {
            from,
            from_offset,
            to,
            to_offset,
            len,
        } => Op::CopyRange {
            from: f(from),
            from_offset,
            to: f(to),
            to_offset,
            len,
        },
        Op::Punch {
            fh,
            offset,
            len,
            keep_size,
        } => Op::Punch {
            fh: f(fh),
            offset,
            len,
            keep_size,
        },
        Op::Seek { fh, offset, hole } => Op::Seek {
            fh: f(fh),
            offset,
            hole,
        },
        Op::ReadGather { fh, ranges } => Op::ReadGather { fh: f(fh), ranges },
        Op::MakeAt { at, make, time } => Op::MakeAt {
            time,
            at: f(at),
            make: Box::new(map_op(*make, f)),
        },
        Op::Batch(ops) => Op::Batch(ops.into_iter().map(|o| map_op(o, f)).collect()),
        Op::DelegateDir { dir } => Op::DelegateDir { dir: f(dir) },
        Op::ReturnDir { dir } => Op::ReturnDir { dir: f(dir) },
        Op::DelegateFile { file } => Op::DelegateFile { file: f(file) },
        Op::ReturnFile { file } => Op::ReturnFile { file: f(file) },
        Op::WriteAt { time, write } => Op::WriteAt {
            time,
            write: Box::new(map_op(*write, f)),
        },
        Op::SetGroup { dir, group } => Op::SetGroup { dir: f(dir), group },
        Op::FileGroup { fh } => Op::FileGroup { fh: f(fh) },
        Op::Signed {
            seq,
            proofs,
            op,
            headers,
            expect,
        } => Op::Signed {
            seq,
            proofs,
            op: Box::new(map_op(*op, f)),
            headers: headers.into_iter().map(|(h, b)| (f(h), b)).collect(),
            expect: expect.into_iter().map(|(h, b)| (f(h), b)).collect(),
        },
        other @ (Op::StatFs
        | Op::RenewLease
        | Op::Recalls
        | Op::SweepOrphans { .. }
        | Op::ReportCapacity { .. }
        | Op::ReserveInodes { .. }
        | Op::GroupPut { .. }
        | Op::GroupGet { .. }
        | Op::WriterSeq) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_handle_is_mapped_and_nothing_else_changes() {
        let a = FileHandle {
            ino: 1,
            generation: 1,
        };
        let b = FileHandle {
            ino: 9,
            generation: 2,
        };
        let f = |h: FileHandle| if h == a { b } else { h };
        let op = Op::Batch(vec![
            Op::Rename {
                from_dir: a,
                from_name: b"x".to_vec(),
                to_dir: a,
                to_name: b"y".to_vec(),
            },
            Op::MakeAt {
                time: None,
                at: FileHandle {
                    ino: 40,
                    generation: 3,
                },
                make: Box::new(Op::Mkdir {
                    dir: a,
                    name: b"d".to_vec(),
                    mode: 0o755,
                }),
            },
        ]);
        let want = Op::Batch(vec![
            Op::Rename {
                from_dir: b,
                from_name: b"x".to_vec(),
                to_dir: b,
                to_name: b"y".to_vec(),
            },
            Op::MakeAt {
                time: None,
                at: FileHandle {
                    ino: 40,
                    generation: 3,
                },
                make: Box::new(Op::Mkdir {
                    dir: b,
                    name: b"d".to_vec(),
                    mode: 0o755,
                }),
            },
        ]);
        assert_eq!(map_op(op, &f), want);
        assert_eq!(map_op(Op::StatFs, &f), Op::StatFs);
    }
}
