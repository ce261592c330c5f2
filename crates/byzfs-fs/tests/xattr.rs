//! Extended attributes at the service: namespaces, flags, permissions, limits, and what a
//! file's removal or a failed operation leaves behind.

use crate::common;

use byzfs_fs::proto::op::XattrSet;
use byzfs_fs::xattr::{MAX_LIST, MAX_VALUE};
use byzfs_fs::{Credentials, Errno, FileHandle, FsResult, Op, Reply, SetAttr, StatFs};
use common::*;

fn set(fh: FileHandle, name: &str, value: &[u8], how: XattrSet) -> Op {
    Op::SetXattr {
        fh,
        name: name.into(),
        value: value.to_vec(),
        how,
    }
}

fn get(fh: FileHandle, name: &str) -> Op {
    Op::GetXattr {
        fh,
        name: name.into(),
    }
}

fn remove(fh: FileHandle, name: &str) -> Op {
    Op::RemoveXattr {
        fh,
        name: name.into(),
    }
}

fn value(r: FsResult) -> Vec<u8> {
    match r {
        Ok(Reply::Xattr(v)) => v,
        other => panic!("wanted a value, got {other:?}"),
    }
}

fn list(fs: &mut Fs, cred: &Credentials, fh: FileHandle) -> Vec<String> {
    let raw = value(fs.run_as(cred, Op::ListXattr { fh }));
    assert!(
        raw.is_empty() || raw.ends_with(&[0]),
        "NUL-terminated names"
    );
    raw.split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8(n.to_vec()).unwrap())
        .collect()
}

fn used(fs: &mut Fs) -> u64 {
    let Ok(Reply::StatFs(StatFs {
        blocks,
        blocks_free,
        block_size,
        ..
    })) = fs.run(Op::StatFs)
    else {
        panic!("statfs");
    };
    (blocks - blocks_free) * u64::from(block_size)
}

#[test]
fn set_get_list_remove_with_the_create_and_replace_flags() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f").fh;
    let root = Credentials::root();
    assert_eq!(fs.run(get(f, "user.a")), err(Errno::ENODATA));
    assert_eq!(
        fs.run(set(f, "user.a", b"1", XattrSet::Replace)),
        err(Errno::ENODATA)
    );
    let before = fs.getattr(f);
    assert_eq!(
        fs.run(set(f, "user.a", b"1", XattrSet::Create)),
        Ok(Reply::Done)
    );
    let after = fs.getattr(f);
    assert!(after.ctime > before.ctime, "ctime changes");
    assert_eq!(after.mtime, before.mtime, "mtime does not");
    assert_eq!(
        fs.run(set(f, "user.a", b"2", XattrSet::Create)),
        err(Errno::EEXIST)
    );
    assert_eq!(
        fs.run(set(f, "user.a", b"22", XattrSet::Replace)),
        Ok(Reply::Done)
    );
    assert_eq!(
        fs.run(set(f, "user.b", b"", XattrSet::Any)),
        Ok(Reply::Done)
    );
    assert_eq!(value(fs.run(get(f, "user.a"))), b"22");
    assert_eq!(value(fs.run(get(f, "user.b"))), b"");
    assert_eq!(list(&mut fs, &root, f), ["user.a", "user.b"]);
    assert_eq!(fs.run(remove(f, "user.a")), Ok(Reply::Done));
    assert_eq!(fs.run(remove(f, "user.a")), err(Errno::ENODATA));
    assert_eq!(list(&mut fs, &root, f), ["user.b"]);
    // Directories have them too.
    let d = fs.mkdir(ROOT, "d").fh;
    assert_eq!(
        fs.run(set(d, "user.x", b"y", XattrSet::Any)),
        Ok(Reply::Done)
    );
    assert_eq!(value(fs.run(get(d, "user.x"))), b"y");
}

#[test]
fn namespaces_and_limits() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f").fh;
    for name in ["security.capability", "system.posix_acl_access", "other.x"] {
        assert_eq!(
            fs.run(set(f, name, b"v", XattrSet::Any)),
            err(Errno::EOPNOTSUPP)
        );
        assert_eq!(fs.run(get(f, name)), err(Errno::EOPNOTSUPP));
    }
    assert_eq!(
        fs.run(set(f, "user.", b"v", XattrSet::Any)),
        err(Errno::EINVAL)
    );
    let long = format!("user.{}", "n".repeat(251));
    assert_eq!(
        fs.run(set(f, &long, b"v", XattrSet::Any)),
        err(Errno::ERANGE)
    );
    let big = vec![7u8; MAX_VALUE + 1];
    assert_eq!(
        fs.run(set(f, "user.big", &big, XattrSet::Any)),
        err(Errno::E2BIG)
    );
    assert_eq!(
        fs.run(set(f, "user.big", &big[1..], XattrSet::Any)),
        Ok(Reply::Done)
    );
    assert_eq!(value(fs.run(get(f, "user.big"))), big[1..]);
    // The list of names is bounded: 64 KiB of NUL-terminated names, then ENOSPC.
    let g = fs.create(ROOT, "g").fh;
    let name = |i: usize| format!("user.{i:0>250}");
    let fit = MAX_LIST / 256;
    for i in 0..fit {
        assert_eq!(
            fs.run(set(g, &name(i), b"", XattrSet::Any)),
            Ok(Reply::Done)
        );
    }
    assert_eq!(
        fs.run(set(g, &name(fit), b"", XattrSet::Any)),
        err(Errno::ENOSPC)
    );
    // Replacing an existing one still works at the limit.
    assert_eq!(
        fs.run(set(g, &name(0), b"v", XattrSet::Any)),
        Ok(Reply::Done)
    );
}

#[test]
fn permissions_follow_linux() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f").fh;
    let chmod = |fh, mode| Op::SetAttr {
        fh,
        set: SetAttr {
            mode: Some(mode),
            uid: Some(1000),
            ..SetAttr::default()
        },
    };
    fs.run(chmod(f, 0o644)).unwrap();
    let owner = Credentials::user(1000, 1000);
    let other = Credentials::user(2000, 2000);
    assert_eq!(
        fs.run_as(&owner, set(f, "user.a", b"1", XattrSet::Any)),
        Ok(Reply::Done)
    );
    // Others may read (r--) but not write.
    assert_eq!(value(fs.run_as(&other, get(f, "user.a"))), b"1");
    assert_eq!(
        fs.run_as(&other, set(f, "user.a", b"2", XattrSet::Any)),
        err(Errno::EACCES)
    );
    assert_eq!(fs.run_as(&other, remove(f, "user.a")), err(Errno::EACCES));
    fs.run(chmod(f, 0o600)).unwrap();
    assert_eq!(fs.run_as(&other, get(f, "user.a")), err(Errno::EACCES));
    // trusted.: root only, and hidden from others' lists.
    assert_eq!(
        fs.run_as(&owner, set(f, "trusted.t", b"1", XattrSet::Any)),
        err(Errno::EPERM)
    );
    assert_eq!(
        fs.run(set(f, "trusted.t", b"1", XattrSet::Any)),
        Ok(Reply::Done)
    );
    assert_eq!(fs.run_as(&owner, get(f, "trusted.t")), err(Errno::ENODATA));
    assert_eq!(list(&mut fs, &owner, f), ["user.a"]);
    assert_eq!(
        list(&mut fs, &Credentials::root(), f),
        ["trusted.t", "user.a"]
    );
    // user.: not on symlinks or special files.
    let l = Fs::entry(fs.run(Op::Symlink {
        dir: ROOT,
        name: "l".into(),
        target: "f".into(),
    }))
    .fh;
    assert_eq!(
        fs.run(set(l, "user.a", b"1", XattrSet::Any)),
        err(Errno::EPERM)
    );
    assert_eq!(fs.run(get(l, "user.a")), err(Errno::ENODATA));
    // A sticky directory: only its owner (or root) changes its user. attributes.
    let d = fs.mkdir(ROOT, "tmp").fh;
    fs.run(chmod(d, 0o1777)).unwrap();
    assert_eq!(
        fs.run_as(&other, set(d, "user.a", b"1", XattrSet::Any)),
        err(Errno::EPERM)
    );
    assert_eq!(
        fs.run_as(&owner, set(d, "user.a", b"1", XattrSet::Any)),
        Ok(Reply::Done)
    );
}

#[test]
fn attributes_count_as_stored_bytes_and_go_with_the_file() {
    let mut fs = Fs::new();
    let empty = used(&mut fs);
    let records = fs.records();
    let f = fs.create(ROOT, "f").fh;
    let v = vec![1u8; 10_000];
    fs.run(set(f, "user.a", &v, XattrSet::Any)).unwrap();
    assert_eq!(fs.getattr(f).used, 10_006);
    fs.run(set(f, "user.a", b"x", XattrSet::Any)).unwrap();
    assert_eq!(fs.getattr(f).used, 7);
    fs.run(set(f, "user.a", &v, XattrSet::Any)).unwrap();
    assert!(used(&mut fs) > empty);
    // Removing the file removes its attributes: a new file with the same inode number
    // would otherwise inherit them, and the space would never come back.
    fs.run(Op::Remove {
        dir: ROOT,
        name: "f".into(),
    })
    .unwrap();
    assert_eq!(used(&mut fs), empty);
    assert_eq!(fs.records(), records, "no record of the file is left");
}
