//! One test (or a few) per operation, including the errno cases.

use crate::common;

use byzfs_bft::Service;
use byzfs_fs::data::BLOCK_SIZE;
use byzfs_fs::dir::MAX_DEPTH;
use byzfs_fs::proto::attr::MAX_FILE_SIZE;
use byzfs_fs::proto::op::{MAX_IO, R_OK, W_OK, X_OK};
use byzfs_fs::{
    Credentials, Errno, Extent, FileHandle, FileType, FsConfig, Op, Reply, SetAttr, SetTime,
    SpecialKind, Timestamp, MAX_SETATTRS,
};
use common::*;

#[test]
fn root_exists() {
    let mut fs = Fs::new();
    let a = fs.getattr(ROOT);
    assert_eq!(a.kind, FileType::Directory);
    assert_eq!(a.nlink, 2);
    assert_eq!(a.mode, 0o755);
    assert_eq!(Fs::entry(fs.lookup(ROOT, "..")).fh, ROOT);
    assert_eq!(Fs::entry(fs.lookup(ROOT, ".")).fh, ROOT);
}

#[test]
fn create_write_read_getattr() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "a");
    assert_eq!(f.kind, FileType::Regular);
    assert_eq!(f.size, 0);
    assert_ne!(f.fh, ROOT);
    assert_eq!(Fs::entry(fs.lookup(ROOT, "a")), f);
    let Ok(Reply::Write { count, attr }) = fs.write(f.fh, 0, b"hello world") else {
        panic!()
    };
    assert_eq!(count, 11);
    assert_eq!(attr.size, 11);
    assert_eq!(attr.used, 11);
    assert_eq!(fs.read(f.fh, 0, 100), b"hello world");
    assert_eq!(fs.read(f.fh, 6, 3), b"wor");
    assert_eq!(fs.read(f.fh, 11, 3), b"");
    assert_eq!(fs.read(f.fh, 1000, 3), b"");
    let r = fs.run(Op::Read {
        fh: f.fh,
        offset: 6,
        count: 100,
    });
    assert_eq!(
        r,
        Ok(Reply::Read {
            data: b"world".to_vec(),
            eof: true
        })
    );
    // Overwrite across a block boundary, then read it back.
    let big: Vec<u8> = (0..3 * BLOCK_SIZE as usize + 17).map(|i| i as u8).collect();
    fs.write(f.fh, 5, &big).unwrap();
    let mut want = b"hello".to_vec();
    want.extend_from_slice(&big);
    assert_eq!(fs.read(f.fh, 0, MAX_IO), want);
    assert_eq!(fs.getattr(f.fh).size, want.len() as u64);
}

#[test]
fn sparse_files_and_truncate() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "sparse");
    // A write 3 GiB in: the file is 3 GiB, but only one block is stored.
    let off = 3 << 30;
    fs.write(f.fh, off, b"tail").unwrap();
    let a = fs.getattr(f.fh);
    assert_eq!(a.size, off + 4);
    assert_eq!(a.used, 4);
    assert_eq!(fs.read(f.fh, off - 2, 10), b"\0\0tail");
    assert_eq!(fs.read(f.fh, 12345, 4), vec![0; 4]);
    // Truncate in the middle of the written data, then extend: zeros come back, not "il".
    fs.truncate(f.fh, off + 2).unwrap();
    assert_eq!(fs.getattr(f.fh).used, 2);
    fs.truncate(f.fh, off + 4).unwrap();
    assert_eq!(fs.read(f.fh, off, 10), b"ta\0\0");
    // Truncate to 0 frees everything.
    fs.truncate(f.fh, 0).unwrap();
    let a = fs.getattr(f.fh);
    assert_eq!((a.size, a.used), (0, 0));
    assert_eq!(fs.read(f.fh, 0, 10), b"");
    // Block-aligned truncation.
    let data = vec![7u8; 2 * BLOCK_SIZE as usize];
    fs.write(f.fh, 0, &data).unwrap();
    fs.truncate(f.fh, BLOCK_SIZE).unwrap();
    assert_eq!(fs.getattr(f.fh).used, BLOCK_SIZE);
    fs.truncate(f.fh, 2 * BLOCK_SIZE).unwrap();
    assert_eq!(
        fs.read(f.fh, BLOCK_SIZE - 1, 2),
        vec![7, 0],
        "no old data past a truncation"
    );
}

#[test]
fn allocate_grows_a_file_and_never_shrinks_it() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    fs.write(f.fh, 0, b"data").unwrap();
    let before = fs.getattr(f.fh);
    let allocate = |end| Op::Allocate { fh: f.fh, end };
    // Shorter than the file: nothing changes, not even the times.
    let Ok(Reply::Attr(a)) = fs.run(allocate(2)) else {
        panic!("allocate");
    };
    assert_eq!(a, before);
    // Longer: the file grows sparsely (nothing stored), the new range reads as zeros.
    let Ok(Reply::Attr(a)) = fs.run(allocate(3 * BLOCK_SIZE)) else {
        panic!("allocate");
    };
    assert_eq!((a.size, a.used), (3 * BLOCK_SIZE, 4));
    assert!(a.mtime > before.mtime && a.ctime > before.ctime);
    assert_eq!(fs.read(f.fh, 2, 4), b"ta\0\0");
    assert_eq!(fs.getattr(f.fh), a);
    // The errno cases of fallocate(2).
    assert_eq!(fs.run(allocate(MAX_FILE_SIZE + 1)), err(Errno::EFBIG));
    let d = fs.mkdir(ROOT, "d");
    let on_dir = Op::Allocate { fh: d.fh, end: 1 };
    assert_eq!(fs.run(on_dir), err(Errno::EISDIR));
    let user = Credentials::user(1000, 1000);
    assert_eq!(fs.run_as(&user, allocate(1 << 20)), err(Errno::EACCES));
    assert_eq!(
        fs.getattr(f.fh).size,
        3 * BLOCK_SIZE,
        "failed ops change nothing"
    );
}

#[test]
fn write_gather_applies_every_extent_in_order_or_none() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    let ext = |offset, data: &[u8]| Extent {
        offset,
        data: data.to_vec(),
    };
    let gather = |extents| Op::WriteGather { fh: f.fh, extents };
    // Scattered and overlapping: applied in order, the later bytes win.
    let Ok(Reply::Write { count, attr }) = fs.run(gather(vec![
        ext(6, b"world"),
        ext(0, b"hello "),
        ext(0, b"J"),
    ])) else {
        panic!("write_gather");
    };
    assert_eq!((count, attr.size), (12, 11));
    assert_eq!(fs.read(f.fh, 0, 20), b"Jello world");
    assert_eq!(fs.getattr(f.fh), attr);
    // One extent fails: none is applied, the errno is the failing one's.
    assert_eq!(
        fs.run(gather(vec![ext(0, b"X"), ext(MAX_FILE_SIZE, b"Y")])),
        err(Errno::EFBIG)
    );
    assert_eq!(fs.read(f.fh, 0, 20), b"Jello world");
    assert_eq!(fs.getattr(f.fh), attr, "failed ops change nothing");
    // No extent, or more than MAX_IO bytes in all: EINVAL.
    assert_eq!(fs.run(gather(vec![])), err(Errno::EINVAL));
    let half = vec![7u8; MAX_IO as usize / 2 + 1];
    assert_eq!(
        fs.run(gather(vec![ext(0, &half), ext(0, &half)])),
        err(Errno::EINVAL)
    );
    // The checks of a write: permission, file type, stale handle.
    let user = Credentials::user(1000, 1000);
    assert_eq!(
        fs.run_as(&user, gather(vec![ext(0, b"x")])),
        err(Errno::EACCES)
    );
    let d = fs.mkdir(ROOT, "d");
    let on_dir = Op::WriteGather {
        fh: d.fh,
        extents: vec![ext(0, b"x")],
    };
    assert_eq!(fs.run(on_dir), err(Errno::EISDIR));
    fs.run(Op::Remove {
        dir: ROOT,
        name: b"f".to_vec(),
    })
    .unwrap();
    assert_eq!(fs.run(gather(vec![ext(0, b"x")])), err(Errno::ESTALE));
}

#[test]
fn write_setattr_applies_writes_then_changes_in_order_or_none() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    let user = Credentials::user(1000, 1000);
    let ext = |offset, data: &[u8]| Extent {
        offset,
        data: data.to_vec(),
    };
    let at = |secs| SetTime::At(Timestamp { secs, nsecs: 5 });
    let op = |extents, sets| Op::WriteSetAttr {
        fh: f.fh,
        extents,
        sets,
    };
    // `cp -p`: the data, then the times, the owner and the mode; the times set after the
    // writes stay (the writes' own mtime is overwritten).
    let Ok(Reply::Attr(a)) = fs.run(op(
        vec![ext(0, b"hello"), ext(5, b" world")],
        vec![
            SetAttr {
                atime: Some(at(100)),
                mtime: Some(at(200)),
                ..SetAttr::default()
            },
            SetAttr {
                uid: Some(0),
                gid: Some(0),
                ..SetAttr::default()
            },
            SetAttr {
                mode: Some(0o640),
                ..SetAttr::default()
            },
        ],
    )) else {
        panic!("write_setattr");
    };
    assert_eq!(fs.read(f.fh, 0, 20), b"hello world");
    assert_eq!(
        (a.size, a.mode, a.mtime.secs, a.atime.secs),
        (11, 0o640, 200, 100)
    );
    assert_eq!(fs.getattr(f.fh), a);
    // In order: a chown after a chmod clears the set-user-ID bit the chmod set...
    let Ok(Reply::Attr(b)) = fs.run(op(
        vec![ext(0, b"J")],
        vec![
            SetAttr {
                mode: Some(0o4755),
                ..SetAttr::default()
            },
            SetAttr {
                uid: Some(0),
                ..SetAttr::default()
            },
        ],
    )) else {
        panic!("write_setattr");
    };
    assert_eq!(b.mode, 0o755);
    // ...and a chmod after a chown keeps it.
    let Ok(Reply::Attr(c)) = fs.run(op(
        vec![ext(0, b"H")],
        vec![
            SetAttr {
                uid: Some(0),
                ..SetAttr::default()
            },
            SetAttr {
                mode: Some(0o4755),
                ..SetAttr::default()
            },
        ],
    )) else {
        panic!("write_setattr");
    };
    assert_eq!(c.mode, 0o4755);
    // A change that fails (only root gives a file away): nothing is applied, the writes
    // neither.
    fs.run(Op::SetAttr {
        fh: f.fh,
        set: SetAttr {
            uid: Some(1000),
            mode: Some(0o666),
            ..SetAttr::default()
        },
    })
    .unwrap();
    let before = fs.getattr(f.fh);
    let give_away = SetAttr {
        uid: Some(2000),
        ..SetAttr::default()
    };
    assert_eq!(
        fs.run_as(&user, op(vec![ext(0, b"X")], vec![give_away])),
        err(Errno::EPERM)
    );
    assert_eq!(fs.read(f.fh, 0, 20), b"Hello world");
    assert_eq!(fs.getattr(f.fh), before, "failed ops change nothing");
    // A write that fails: the changes are not applied either.
    let chmod = SetAttr {
        mode: Some(0o600),
        ..SetAttr::default()
    };
    assert_eq!(
        fs.run_as(
            &user,
            op(vec![ext(MAX_FILE_SIZE, b"Y")], vec![chmod.clone()])
        ),
        err(Errno::EFBIG)
    );
    assert_eq!(fs.getattr(f.fh), before, "failed ops change nothing");
    // No extent, no change, or more than MAX_SETATTRS changes: EINVAL.
    assert_eq!(fs.run(op(vec![], vec![chmod.clone()])), err(Errno::EINVAL));
    assert_eq!(fs.run(op(vec![ext(0, b"x")], vec![])), err(Errno::EINVAL));
    assert_eq!(
        fs.run(op(vec![ext(0, b"x")], vec![chmod; MAX_SETATTRS + 1])),
        err(Errno::EINVAL)
    );
    assert_eq!(fs.getattr(f.fh), before, "failed ops change nothing");
}

#[test]
fn read_gather_reads_each_range_as_a_read_would() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "g");
    fs.write(f.fh, 0, b"hello world").unwrap();
    fs.write(f.fh, 3 * BLOCK_SIZE, b"far").unwrap();
    let end = 3 * BLOCK_SIZE + 3;
    let mut gather = |ranges: Vec<(u64, u32)>| fs.run(Op::ReadGather { fh: f.fh, ranges });
    let read = |data: &[u8], eof: bool| Reply::Read {
        data: data.to_vec(),
        eof,
    };
    assert_eq!(
        gather(vec![
            (6, 5),
            (end - 3, 10),
            (0, 2),
            (BLOCK_SIZE, 4),
            (end, 1)
        ]),
        Ok(Reply::Batch(vec![
            read(b"world", false),
            read(b"far", true),
            read(b"he", false),
            read(&[0; 4], false),
            read(b"", true),
        ]))
    );
    assert_eq!(gather(vec![]), err(Errno::EINVAL));
    let max = byzfs_fs::proto::op::MAX_GATHER_READS;
    assert_eq!(gather(vec![(0, 1); max + 1]), err(Errno::EINVAL));
    assert!(gather(vec![(0, 1); max]).is_ok());
    assert_eq!(gather(vec![(0, MAX_IO), (0, 1)]), err(Errno::EINVAL));
    assert!(gather(vec![(0, MAX_IO - 1), (0, 1)]).is_ok());
    assert_eq!(fs.read(f.fh, 0, 5), b"hello", "reads change nothing");
    assert_eq!(
        fs.run(Op::ReadGather {
            fh: ROOT,
            ranges: vec![(0, 1)]
        }),
        err(Errno::EISDIR)
    );
}

#[test]
fn efbig_and_io_limits() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    assert_eq!(fs.write(f.fh, MAX_FILE_SIZE - 1, b"ab"), err(Errno::EFBIG));
    assert_eq!(fs.write(f.fh, u64::MAX, b"a"), err(Errno::EFBIG));
    fs.write(f.fh, MAX_FILE_SIZE - 1, b"a").unwrap();
    assert_eq!(fs.truncate(f.fh, MAX_FILE_SIZE + 1), err(Errno::EFBIG));
    assert_eq!(
        fs.getattr(f.fh).size,
        MAX_FILE_SIZE,
        "failed ops change nothing"
    );
    let too_big = vec![0u8; MAX_IO as usize + 1];
    assert_eq!(fs.write(f.fh, 0, &too_big), err(Errno::EINVAL));
    // Reads are shortened to MAX_IO.
    assert_eq!(fs.read(f.fh, 0, u32::MAX).len(), MAX_IO as usize);
    // Truncating the 1 TiB file back to 0 is bounded work and frees it.
    fs.truncate(f.fh, 0).unwrap();
    assert_eq!(fs.getattr(f.fh).used, 0);
}

#[test]
fn wrong_file_types() {
    let mut fs = Fs::new();
    let d = fs.mkdir(ROOT, "d");
    let f = fs.create(ROOT, "f");
    let l = Fs::entry(fs.run(Op::Symlink {
        dir: ROOT,
        name: "l".into(),
        target: "f".into(),
    }));
    assert_eq!(fs.write(d.fh, 0, b"x"), err(Errno::EISDIR));
    assert_eq!(
        fs.run(Op::Read {
            fh: d.fh,
            offset: 0,
            count: 1
        }),
        err(Errno::EISDIR)
    );
    assert_eq!(fs.write(l.fh, 0, b"x"), err(Errno::EINVAL));
    assert_eq!(fs.truncate(d.fh, 0), err(Errno::EISDIR));
    assert_eq!(fs.lookup(f.fh, "x"), err(Errno::ENOTDIR));
    assert_eq!(fs.lookup(f.fh, ".."), err(Errno::ENOTDIR));
    assert_eq!(
        fs.run(Op::Create {
            dir: f.fh,
            name: "x".into(),
            mode: 0o644,
            exclusive: false
        }),
        err(Errno::ENOTDIR)
    );
    assert_eq!(
        fs.run(Op::ReadDir {
            dir: f.fh,
            cookie: 0,
            max_entries: 10
        }),
        err(Errno::ENOTDIR)
    );
    assert_eq!(fs.run(Op::ReadLink { fh: f.fh }), err(Errno::EINVAL));
    assert_eq!(
        fs.run(Op::ReadLink { fh: l.fh }),
        Ok(Reply::ReadLink(b"f".to_vec()))
    );
    assert_eq!(
        fs.run(Op::Remove {
            dir: ROOT,
            name: "d".into()
        }),
        err(Errno::EISDIR)
    );
    assert_eq!(
        fs.run(Op::Rmdir {
            dir: ROOT,
            name: "f".into()
        }),
        err(Errno::ENOTDIR)
    );
    assert_eq!(
        fs.run(Op::Link {
            fh: d.fh,
            dir: ROOT,
            name: "d2".into()
        }),
        err(Errno::EPERM)
    );
}

#[test]
fn names_are_checked() {
    let mut fs = Fs::new();
    let mk = |fs: &mut Fs, name: &[u8]| {
        fs.run(Op::Create {
            dir: ROOT,
            name: name.to_vec(),
            mode: 0o644,
            exclusive: true,
        })
    };
    assert_eq!(mk(&mut fs, b"a/b"), err(Errno::EINVAL));
    assert_eq!(mk(&mut fs, b"a\0b"), err(Errno::EINVAL));
    assert_eq!(mk(&mut fs, b""), err(Errno::ENOENT));
    assert_eq!(mk(&mut fs, &[b'n'; 256]), err(Errno::ENAMETOOLONG));
    assert_eq!(mk(&mut fs, b"."), err(Errno::EEXIST));
    assert_eq!(mk(&mut fs, b".."), err(Errno::EEXIST));
    assert!(mk(&mut fs, &[b'n'; 255]).is_ok());
    assert!(
        mk(&mut fs, &[0xff, 0xfe]).is_ok(),
        "names are bytes, not UTF-8"
    );
    assert_eq!(fs.lookup(ROOT, &"n".repeat(256)), err(Errno::ENAMETOOLONG));
    assert_eq!(
        fs.run(Op::Lookup {
            dir: ROOT,
            name: b"x/y".to_vec()
        }),
        err(Errno::EINVAL)
    );
    assert_eq!(
        fs.run(Op::Symlink {
            dir: ROOT,
            name: "s".into(),
            target: vec![b'x'; 4096]
        }),
        err(Errno::ENAMETOOLONG)
    );
    assert_eq!(
        fs.run(Op::Symlink {
            dir: ROOT,
            name: "s".into(),
            target: vec![]
        }),
        err(Errno::ENOENT)
    );
    assert_eq!(fs.names(ROOT).len(), 2);
}

#[test]
fn create_exclusive_and_unchecked() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    fs.write(f.fh, 0, b"keep").unwrap();
    let again = |fs: &mut Fs, name: &str, exclusive| {
        fs.run(Op::Create {
            dir: ROOT,
            name: name.into(),
            mode: 0o600,
            exclusive,
        })
    };
    assert_eq!(again(&mut fs, "f", true), err(Errno::EEXIST));
    let a = Fs::entry(again(&mut fs, "f", false));
    assert_eq!(
        (a.fh, a.size, a.mode),
        (f.fh, 4, 0o644),
        "existing file returned as is"
    );
    fs.mkdir(ROOT, "d");
    assert_eq!(again(&mut fs, "d", false), err(Errno::EISDIR));
    assert_eq!(
        fs.run(Op::Mkdir {
            dir: ROOT,
            name: "f".into(),
            mode: 0o755
        }),
        err(Errno::EEXIST)
    );
}

#[test]
fn mkdir_rmdir_nlink() {
    let mut fs = Fs::new();
    let d = fs.mkdir(ROOT, "d");
    assert_eq!(d.nlink, 2);
    assert_eq!(fs.getattr(ROOT).nlink, 3);
    let sub = fs.mkdir(d.fh, "sub");
    assert_eq!(fs.getattr(d.fh).nlink, 3);
    assert_eq!(Fs::entry(fs.lookup(sub.fh, "..")).fh, d.fh);
    let rmdir = |fs: &mut Fs, dir: FileHandle, name: &str| {
        fs.run(Op::Rmdir {
            dir,
            name: name.into(),
        })
    };
    assert_eq!(rmdir(&mut fs, ROOT, "d"), err(Errno::ENOTEMPTY));
    assert_eq!(rmdir(&mut fs, ROOT, "nope"), err(Errno::ENOENT));
    assert_eq!(rmdir(&mut fs, d.fh, "."), err(Errno::EINVAL));
    assert_eq!(rmdir(&mut fs, d.fh, ".."), err(Errno::ENOTEMPTY));
    rmdir(&mut fs, d.fh, "sub").unwrap();
    assert_eq!(fs.getattr(d.fh).nlink, 2);
    assert_eq!(fs.run(Op::GetAttr { fh: sub.fh }), err(Errno::ESTALE));
    rmdir(&mut fs, ROOT, "d").unwrap();
    assert_eq!(fs.getattr(ROOT).nlink, 2);
    assert_eq!(fs.lookup(ROOT, "d"), err(Errno::ENOENT));
}

#[test]
fn remove_and_stale_handles() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    fs.write(f.fh, 0, &[1; 100_000]).unwrap();
    let remove = |fs: &mut Fs, name: &str| {
        fs.run(Op::Remove {
            dir: ROOT,
            name: name.into(),
        })
    };
    assert_eq!(remove(&mut fs, "nope"), err(Errno::ENOENT));
    remove(&mut fs, "f").unwrap();
    assert_eq!(fs.run(Op::GetAttr { fh: f.fh }), err(Errno::ESTALE));
    assert_eq!(fs.write(f.fh, 0, b"x"), err(Errno::ESTALE));
    // A new file never gets the old handle.
    let g = fs.create(ROOT, "f");
    assert_ne!(g.fh.ino, f.fh.ino);
    assert_ne!(g.fh.generation, f.fh.generation);
    // A handle with the right ino but another generation is stale.
    let forged = FileHandle {
        ino: g.fh.ino,
        generation: g.fh.generation + 1,
    };
    assert_eq!(fs.run(Op::GetAttr { fh: forged }), err(Errno::ESTALE));
    // Data was freed: statfs shows nothing used.
    let Ok(Reply::StatFs(st)) = fs.run(Op::StatFs) else {
        panic!()
    };
    assert_eq!(st.blocks, st.blocks_free);
    assert_eq!(st.files - st.files_free, 2, "root and g");
}

#[test]
fn hard_links() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    fs.write(f.fh, 0, b"data").unwrap();
    let d = fs.mkdir(ROOT, "d");
    let l = Fs::entry(fs.run(Op::Link {
        fh: f.fh,
        dir: d.fh,
        name: "l".into(),
    }));
    assert_eq!(l.fh, f.fh);
    assert_eq!(l.nlink, 2);
    assert_eq!(
        fs.run(Op::Link {
            fh: f.fh,
            dir: d.fh,
            name: "l".into()
        }),
        err(Errno::EEXIST)
    );
    fs.run(Op::Remove {
        dir: ROOT,
        name: "f".into(),
    })
    .unwrap();
    assert_eq!(fs.getattr(f.fh).nlink, 1);
    assert_eq!(fs.read(f.fh, 0, 10), b"data");
    fs.run(Op::Remove {
        dir: d.fh,
        name: "l".into(),
    })
    .unwrap();
    assert_eq!(fs.run(Op::GetAttr { fh: f.fh }), err(Errno::ESTALE));
}

/// Operations that make or remove a name answer the directory's attributes after the
/// operation (and, for a removal, the inode's if links remain), exactly what a getattr
/// right after would say: the mount caches them instead of asking.
#[test]
fn made_and_unlinked_carry_post_operation_attributes() {
    let mut fs = Fs::new();
    let made = |r: byzfs_fs::FsResult| match r {
        Ok(Reply::Made { entry, dir }) => (entry, dir),
        other => panic!("{other:?}"),
    };
    let (f, root) = made(fs.run(Op::Create {
        dir: ROOT,
        name: "f".into(),
        mode: 0o644,
        exclusive: true,
    }));
    assert_eq!(root, fs.getattr(ROOT));
    assert_eq!(f, fs.getattr(f.fh));
    let (d, root) = made(fs.run(Op::Mkdir {
        dir: ROOT,
        name: "d".into(),
        mode: 0o755,
    }));
    assert_eq!(root, fs.getattr(ROOT));
    assert_eq!(root.nlink, 3);
    let (l, dd) = made(fs.run(Op::Link {
        fh: f.fh,
        dir: d.fh,
        name: "l".into(),
    }));
    assert_eq!((l.nlink, l.clone()), (2, fs.getattr(f.fh)));
    assert_eq!(dd, fs.getattr(d.fh));
    // A non-exclusive create of an existing file changes nothing and says so.
    let (again, same_d) = made(fs.run(Op::Create {
        dir: d.fh,
        name: "l".into(),
        mode: 0o644,
        exclusive: false,
    }));
    assert_eq!((again, same_d), (fs.getattr(f.fh), fs.getattr(d.fh)));
    let r = fs.run(Op::Remove {
        dir: ROOT,
        name: "f".into(),
    });
    let Ok(Reply::Unlinked { dir, ino, left }) = r else {
        panic!("{r:?}")
    };
    assert_eq!((dir, ino), (fs.getattr(ROOT), f.fh.ino));
    assert_eq!(left, Some(fs.getattr(f.fh)));
    assert_eq!(left.map(|a| a.nlink), Some(1));
    let r = fs.run(Op::Remove {
        dir: d.fh,
        name: "l".into(),
    });
    assert!(
        matches!(&r, Ok(Reply::Unlinked { ino, left: None, .. }) if *ino == f.fh.ino),
        "{r:?}"
    );
    let r = fs.run(Op::Rmdir {
        dir: ROOT,
        name: "d".into(),
    });
    let Ok(Reply::Unlinked { dir, ino, left }) = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        (dir.nlink, dir, ino, left),
        (2, fs.getattr(ROOT), d.fh.ino, None)
    );
}

fn rename(fs: &mut Fs, from: FileHandle, a: &str, to: FileHandle, b: &str) -> byzfs_fs::FsResult {
    fs.run(Op::Rename {
        from_dir: from,
        from_name: a.into(),
        to_dir: to,
        to_name: b.into(),
    })
}

#[test]
fn rename_files() {
    let mut fs = Fs::new();
    let a = fs.create(ROOT, "a");
    let b = fs.create(ROOT, "b");
    fs.write(a.fh, 0, b"A").unwrap();
    // Onto an existing file: b is replaced and freed.
    rename(&mut fs, ROOT, "a", ROOT, "b").unwrap();
    assert_eq!(fs.names(ROOT), vec!["b"]);
    assert_eq!(Fs::entry(fs.lookup(ROOT, "b")).fh, a.fh);
    assert_eq!(fs.run(Op::GetAttr { fh: b.fh }), err(Errno::ESTALE));
    assert_eq!(rename(&mut fs, ROOT, "a", ROOT, "c"), err(Errno::ENOENT));
    // Across directories.
    let d = fs.mkdir(ROOT, "d");
    rename(&mut fs, ROOT, "b", d.fh, "moved").unwrap();
    assert_eq!(fs.names(ROOT), vec!["d"]);
    assert_eq!(fs.read(a.fh, 0, 1), b"A");
    // Onto itself and onto another link of itself: nothing happens.
    rename(&mut fs, d.fh, "moved", d.fh, "moved").unwrap();
    fs.run(Op::Link {
        fh: a.fh,
        dir: d.fh,
        name: "other".into(),
    })
    .unwrap();
    rename(&mut fs, d.fh, "moved", d.fh, "other").unwrap();
    assert_eq!(fs.names(d.fh), vec!["moved", "other"]);
    assert_eq!(fs.getattr(a.fh).nlink, 2);
    // A file onto a directory.
    fs.mkdir(d.fh, "sub");
    assert_eq!(
        rename(&mut fs, d.fh, "moved", d.fh, "sub"),
        err(Errno::EISDIR)
    );
    // Dots.
    assert_eq!(rename(&mut fs, d.fh, ".", ROOT, "x"), err(Errno::EINVAL));
    assert_eq!(
        rename(&mut fs, d.fh, "moved", ROOT, ".."),
        err(Errno::EINVAL)
    );
}

#[test]
fn rename_directories() {
    let mut fs = Fs::new();
    let a = fs.mkdir(ROOT, "a");
    let b = fs.mkdir(ROOT, "b");
    let a1 = fs.mkdir(a.fh, "a1");
    let a2 = fs.mkdir(a1.fh, "a2");
    // Into its own subtree, or onto itself as a child.
    assert_eq!(rename(&mut fs, ROOT, "a", a2.fh, "x"), err(Errno::EINVAL));
    assert_eq!(rename(&mut fs, ROOT, "a", a.fh, "x"), err(Errno::EINVAL));
    // A directory onto a file, and onto a non-empty directory.
    fs.create(b.fh, "file");
    assert_eq!(
        rename(&mut fs, ROOT, "a", b.fh, "file"),
        err(Errno::ENOTDIR)
    );
    assert_eq!(
        rename(&mut fs, a.fh, "a1", ROOT, "b"),
        err(Errno::ENOTEMPTY)
    );
    // Onto an empty directory, across directories: nlink and `..` follow.
    let empty = fs.mkdir(b.fh, "empty");
    assert_eq!(fs.getattr(b.fh).nlink, 3);
    rename(&mut fs, a.fh, "a1", b.fh, "empty").unwrap();
    assert_eq!(fs.run(Op::GetAttr { fh: empty.fh }), err(Errno::ESTALE));
    assert_eq!(fs.getattr(a.fh).nlink, 2);
    assert_eq!(fs.getattr(b.fh).nlink, 3);
    assert_eq!(Fs::entry(fs.lookup(a1.fh, "..")).fh, b.fh);
    assert_eq!(Fs::entry(fs.lookup(b.fh, "empty")).fh, a1.fh);
    // Now a is no longer an ancestor of a2, so this works.
    rename(&mut fs, ROOT, "a", a2.fh, "x").unwrap();
    assert_eq!(Fs::entry(fs.lookup(a.fh, "..")).fh, a2.fh);
    assert_eq!(fs.getattr(ROOT).nlink, 3);
    let Ok(Reply::StatFs(st)) = fs.run(Op::StatFs) else {
        panic!()
    };
    assert_eq!(st.files - st.files_free, 6, "root b a1 a2 a file");
}

fn exchange(fs: &mut Fs, a: FileHandle, x: &str, b: FileHandle, y: &str) -> byzfs_fs::FsResult {
    fs.run(Op::Exchange {
        a_dir: a,
        a_name: x.into(),
        b_dir: b,
        b_name: y.into(),
    })
}

#[test]
fn rename_noreplace() {
    let mut fs = Fs::new();
    let a = fs.create(ROOT, "a");
    let b = fs.create(ROOT, "b");
    let no_replace = |fs: &mut Fs, x: &str, y: &str| {
        fs.run(Op::RenameNoReplace {
            from_dir: ROOT,
            from_name: x.into(),
            to_dir: ROOT,
            to_name: y.into(),
        })
    };
    assert_eq!(no_replace(&mut fs, "a", "b"), err(Errno::EEXIST));
    // Even onto itself: the target exists (Linux answers EEXIST too).
    assert_eq!(no_replace(&mut fs, "a", "a"), err(Errno::EEXIST));
    assert_eq!(no_replace(&mut fs, "nothing", "c"), err(Errno::ENOENT));
    assert_eq!(fs.names(ROOT), vec!["a", "b"]);
    no_replace(&mut fs, "a", "c").unwrap();
    assert_eq!(fs.names(ROOT), vec!["b", "c"]);
    assert_eq!(Fs::entry(fs.lookup(ROOT, "c")).fh, a.fh);
    assert_eq!(fs.getattr(b.fh).nlink, 1);
}

#[test]
fn exchange_swaps_names_atomically() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    let g = fs.create(ROOT, "g");
    // Two files in one directory.
    exchange(&mut fs, ROOT, "f", ROOT, "g").unwrap();
    assert_eq!(Fs::entry(fs.lookup(ROOT, "f")).fh, g.fh);
    assert_eq!(Fs::entry(fs.lookup(ROOT, "g")).fh, f.fh);
    assert_eq!((fs.getattr(f.fh).nlink, fs.getattr(g.fh).nlink), (1, 1));
    // Both names must exist.
    assert_eq!(
        exchange(&mut fs, ROOT, "f", ROOT, "none"),
        err(Errno::ENOENT)
    );
    assert_eq!(
        exchange(&mut fs, ROOT, "none", ROOT, "f"),
        err(Errno::ENOENT)
    );
    assert_eq!(exchange(&mut fs, ROOT, "f", ROOT, ".."), err(Errno::EINVAL));
    // A directory for a file, across directories: nlink and `..` follow.
    let d = fs.mkdir(ROOT, "d");
    let sub = fs.mkdir(d.fh, "sub");
    let e = fs.mkdir(ROOT, "e");
    assert_eq!(fs.getattr(ROOT).nlink, 4);
    assert_eq!(fs.getattr(d.fh).nlink, 3);
    exchange(&mut fs, d.fh, "sub", ROOT, "f").unwrap();
    assert_eq!(Fs::entry(fs.lookup(ROOT, "f")).fh, sub.fh);
    assert_eq!(Fs::entry(fs.lookup(d.fh, "sub")).fh, g.fh);
    assert_eq!(Fs::entry(fs.lookup(sub.fh, "..")).fh, ROOT);
    assert_eq!(fs.getattr(d.fh).nlink, 2, "d lost its subdirectory");
    assert_eq!(fs.getattr(ROOT).nlink, 5, "root gained one");
    // Two directories across parents: counts unchanged, both `..` swapped.
    exchange(&mut fs, ROOT, "e", ROOT, "f").unwrap();
    assert_eq!(Fs::entry(fs.lookup(ROOT, "f")).fh, e.fh);
    exchange(&mut fs, ROOT, "e", d.fh, "sub").unwrap();
    assert_eq!(Fs::entry(fs.lookup(d.fh, "sub")).fh, sub.fh);
    assert_eq!(Fs::entry(fs.lookup(sub.fh, "..")).fh, d.fh);
    // A directory with its own descendant: EINVAL either way round.
    let inner = fs.mkdir(sub.fh, "inner");
    assert_eq!(
        exchange(&mut fs, d.fh, "sub", sub.fh, "inner"),
        err(Errno::EINVAL)
    );
    assert_eq!(
        exchange(&mut fs, sub.fh, "inner", d.fh, "sub"),
        err(Errno::EINVAL)
    );
    assert_eq!(Fs::entry(fs.lookup(sub.fh, "inner")).fh, inner.fh);
    // Two links of one file: nothing happens.
    fs.run(Op::Link {
        fh: f.fh,
        dir: ROOT,
        name: "f2".into(),
    })
    .unwrap();
    let before = fs.names(ROOT);
    let file_name = if Fs::entry(fs.lookup(ROOT, "g")).fh == f.fh {
        "g"
    } else {
        "f"
    };
    exchange(&mut fs, ROOT, file_name, ROOT, "f2").unwrap();
    assert_eq!(fs.names(ROOT), before);
}

#[test]
fn readdir_cookies_are_stable() {
    let mut fs = Fs::new();
    for i in 0..10 {
        fs.create(ROOT, &format!("f{i}"));
    }
    // First page (with . and ..), then change the directory, then continue.
    let Ok(Reply::ReadDir { entries, eof }) = fs.run(Op::ReadDir {
        dir: ROOT,
        cookie: 0,
        max_entries: 5,
    }) else {
        panic!()
    };
    assert!(!eof);
    let names: Vec<_> = entries.iter().map(|e| e.name.clone()).collect();
    assert_eq!(
        names,
        vec![
            b".".to_vec(),
            b"..".to_vec(),
            b"f0".to_vec(),
            b"f1".to_vec(),
            b"f2".to_vec()
        ]
    );
    assert_eq!(entries[0].kind, FileType::Directory);
    let cookie = entries[4].cookie;
    // Remove an entry already listed and one not yet listed; add one.
    for n in ["f1", "f5"] {
        fs.run(Op::Remove {
            dir: ROOT,
            name: n.into(),
        })
        .unwrap();
    }
    fs.create(ROOT, "new");
    let mut rest = Vec::new();
    let mut c = cookie;
    loop {
        let Ok(Reply::ReadDir { entries, eof }) = fs.run(Op::ReadDir {
            dir: ROOT,
            cookie: c,
            max_entries: 2,
        }) else {
            panic!()
        };
        if let Some(l) = entries.last() {
            c = l.cookie;
        }
        rest.extend(
            entries
                .into_iter()
                .map(|e| String::from_utf8(e.name).unwrap()),
        );
        if eof {
            break;
        }
    }
    assert_eq!(rest, vec!["f3", "f4", "f6", "f7", "f8", "f9", "new"]);
    // A zero-sized page is refused; a page of 1 works.
    assert_eq!(
        fs.run(Op::ReadDir {
            dir: ROOT,
            cookie: 0,
            max_entries: 0
        }),
        err(Errno::EINVAL)
    );
    assert_eq!(fs.list(ROOT, 1).len(), 9);
}

#[test]
fn symlink_and_mknod() {
    let mut fs = Fs::new();
    let l = Fs::entry(fs.run(Op::Symlink {
        dir: ROOT,
        name: "l".into(),
        target: "../some/where".into(),
    }));
    assert_eq!((l.kind, l.size, l.mode), (FileType::Symlink, 13, 0o777));
    let p = Fs::entry(fs.run(Op::Mknod {
        dir: ROOT,
        name: "p".into(),
        kind: SpecialKind::Fifo,
        mode: 0o600,
    }));
    assert_eq!(p.kind, FileType::Fifo);
    let s = Fs::entry(fs.run(Op::Mknod {
        dir: ROOT,
        name: "s".into(),
        kind: SpecialKind::Socket,
        mode: 0o600,
    }));
    assert_eq!(s.kind, FileType::Socket);
    assert_eq!(fs.write(p.fh, 0, b"x"), err(Errno::EINVAL));
    let kinds: Vec<_> = fs.list(ROOT, 10).into_iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![FileType::Symlink, FileType::Fifo, FileType::Socket]
    );
}

#[test]
fn device_nodes_keep_their_number_and_need_root() {
    let mut fs = Fs::new();
    let c = Fs::entry(fs.run(Op::Mknod {
        dir: ROOT,
        name: "null".into(),
        kind: SpecialKind::CharDevice(0x0103),
        mode: 0o666,
    }));
    assert_eq!(
        (c.kind, c.rdev, c.mode),
        (FileType::CharDevice, 0x0103, 0o666)
    );
    let b = Fs::entry(fs.run(Op::Mknod {
        dir: ROOT,
        name: "sda".into(),
        kind: SpecialKind::BlockDevice(0x0800),
        mode: 0o660,
    }));
    assert_eq!((b.kind, b.rdev), (FileType::BlockDevice, 0x0800));
    assert_eq!(fs.getattr(c.fh).rdev, 0x0103, "kept");
    assert_eq!(fs.write(c.fh, 0, b"x"), err(Errno::EINVAL));
    // Anyone may make fifos in a directory they can write; only root makes devices.
    let alice = Credentials::user(1000, 1000);
    let tmp = Fs::entry(fs.run(Op::Mkdir {
        dir: ROOT,
        name: "tmp".into(),
        mode: 0o1777,
    }));
    let dev = Op::Mknod {
        dir: tmp.fh,
        name: "d".into(),
        kind: SpecialKind::CharDevice(1),
        mode: 0o600,
    };
    assert_eq!(fs.run_as(&alice, dev), err(Errno::EPERM));
    let fifo = Op::Mknod {
        dir: tmp.fh,
        name: "f".into(),
        kind: SpecialKind::Fifo,
        mode: 0o600,
    };
    assert_eq!(Fs::entry(fs.run_as(&alice, fifo)).rdev, 0);
}

#[test]
fn permissions_by_mode_and_owner() {
    let mut fs = Fs::new();
    let alice = Credentials::user(1000, 1000);
    let bob = Credentials::user(1001, 1001);
    let d = fs.mkdir(ROOT, "home");
    // Root's directory is not writable by alice.
    assert_eq!(
        fs.run_as(
            &alice,
            Op::Mkdir {
                dir: ROOT,
                name: "x".into(),
                mode: 0o755
            }
        ),
        err(Errno::EACCES)
    );
    // chown: only root.
    let give = Op::SetAttr {
        fh: d.fh,
        set: SetAttr {
            uid: Some(1000),
            gid: Some(1000),
            ..SetAttr::default()
        },
    };
    assert_eq!(fs.run_as(&alice, give.clone()), err(Errno::EPERM));
    fs.run(give).unwrap();
    let f = Fs::entry(fs.run_as(
        &alice,
        Op::Create {
            dir: d.fh,
            name: "f".into(),
            mode: 0o600,
            exclusive: true,
        },
    ));
    assert_eq!((f.uid, f.gid), (1000, 1000));
    fs.run_as(
        &alice,
        Op::Write {
            fh: f.fh,
            offset: 0,
            data: b"secret".to_vec(),
        },
    )
    .unwrap();
    // Bob can search home (0755) but not read a 0600 file, nor write the directory.
    assert_eq!(
        Fs::entry(fs.run_as(
            &bob,
            Op::Lookup {
                dir: d.fh,
                name: "f".into()
            }
        ))
        .fh,
        f.fh
    );
    assert_eq!(
        fs.run_as(
            &bob,
            Op::Read {
                fh: f.fh,
                offset: 0,
                count: 10
            }
        ),
        err(Errno::EACCES)
    );
    assert_eq!(
        fs.run_as(
            &bob,
            Op::Write {
                fh: f.fh,
                offset: 0,
                data: b"x".to_vec()
            }
        ),
        err(Errno::EACCES)
    );
    assert_eq!(
        fs.run_as(
            &bob,
            Op::Remove {
                dir: d.fh,
                name: "f".into()
            }
        ),
        err(Errno::EACCES)
    );
    assert_eq!(
        fs.run_as(
            &bob,
            Op::Access {
                fh: f.fh,
                mask: R_OK
            }
        ),
        err(Errno::EACCES)
    );
    assert_eq!(
        fs.run_as(
            &alice,
            Op::Access {
                fh: f.fh,
                mask: R_OK | W_OK
            }
        ),
        Ok(Reply::Done)
    );
    assert_eq!(
        fs.run_as(
            &alice,
            Op::Access {
                fh: f.fh,
                mask: X_OK
            }
        ),
        err(Errno::EACCES)
    );
    // chmod: owner only.
    let chmod = |m| Op::SetAttr {
        fh: f.fh,
        set: SetAttr {
            mode: Some(m),
            ..SetAttr::default()
        },
    };
    assert_eq!(fs.run_as(&bob, chmod(0o644)), err(Errno::EPERM));
    // Owner override: alice writes her 0400 file (as after open(O_CREAT, 0400)).
    fs.run_as(&alice, chmod(0o400)).unwrap();
    fs.run_as(
        &alice,
        Op::Write {
            fh: f.fh,
            offset: 6,
            data: b"!".to_vec(),
        },
    )
    .unwrap();
    fs.run_as(&alice, chmod(0o644)).unwrap();
    assert_eq!(
        fs.run_as(
            &bob,
            Op::Read {
                fh: f.fh,
                offset: 0,
                count: 10
            }
        ),
        Ok(Reply::Read {
            data: b"secret!".to_vec(),
            eof: true
        })
    );
    // Explicit times: owner only; "now": owner or writer.
    let at = Op::SetAttr {
        fh: f.fh,
        set: SetAttr {
            mtime: Some(SetTime::At(Timestamp { secs: 5, nsecs: 0 })),
            ..SetAttr::default()
        },
    };
    assert_eq!(fs.run_as(&bob, at.clone()), err(Errno::EPERM));
    fs.run_as(&alice, at).unwrap();
    assert_eq!(fs.getattr(f.fh).mtime, Timestamp { secs: 5, nsecs: 0 });
    let now = Op::SetAttr {
        fh: f.fh,
        set: SetAttr {
            mtime: Some(SetTime::Now),
            ..SetAttr::default()
        },
    };
    assert_eq!(fs.run_as(&bob, now), err(Errno::EACCES));
    // chgrp to a group alice is not in.
    let chgrp = Op::SetAttr {
        fh: f.fh,
        set: SetAttr {
            gid: Some(7),
            ..SetAttr::default()
        },
    };
    assert_eq!(fs.run_as(&alice, chgrp), err(Errno::EPERM));
    // Sticky directory: bob may not remove alice's file from a shared 1777 directory.
    let tmp = fs.mkdir(ROOT, "tmp");
    fs.run(Op::SetAttr {
        fh: tmp.fh,
        set: SetAttr {
            mode: Some(0o1777),
            ..SetAttr::default()
        },
    })
    .unwrap();
    fs.run_as(
        &alice,
        Op::Create {
            dir: tmp.fh,
            name: "mine".into(),
            mode: 0o644,
            exclusive: true,
        },
    )
    .unwrap();
    assert_eq!(
        fs.run_as(
            &bob,
            Op::Remove {
                dir: tmp.fh,
                name: "mine".into()
            }
        ),
        err(Errno::EPERM)
    );
    assert_eq!(
        fs.run_as(
            &bob,
            Op::Rename {
                from_dir: tmp.fh,
                from_name: "mine".into(),
                to_dir: tmp.fh,
                to_name: "his".into()
            }
        ),
        err(Errno::EPERM)
    );
    fs.run_as(
        &alice,
        Op::Remove {
            dir: tmp.fh,
            name: "mine".into(),
        },
    )
    .unwrap();
}

#[test]
fn times_come_from_the_agreed_clock() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    let created = Timestamp::from_micros(fs.clock_us);
    assert_eq!((f.mtime, f.ctime, f.atime), (created, created, created));
    assert_eq!(fs.getattr(ROOT).mtime, created, "parent modified");
    fs.write(f.fh, 0, b"x").unwrap();
    let written = Timestamp::from_micros(fs.clock_us);
    assert_ne!(written, created);
    let a = fs.getattr(f.fh);
    assert_eq!((a.mtime, a.ctime, a.atime), (written, written, created));
    // Reads do not change atime (not maintained).
    fs.read(f.fh, 0, 1);
    assert_eq!(fs.getattr(f.fh).atime, created);
    // A batch timestamp below the agreed clock does not move time backwards: the clock
    // moves on by one microsecond, so every change has its own mtime.
    let bytes = byzfs_fs::Request::new(
        Credentials::root(),
        Op::Write {
            fh: f.fh,
            offset: 0,
            data: b"y".to_vec(),
        },
    )
    .encode();
    fs.s.execute(1, &bytes, &1u64.to_le_bytes());
    let next = Timestamp::from_micros(fs.clock_us + 1);
    assert_eq!(fs.getattr(f.fh).mtime, next);
    assert_eq!(fs.s.last_agreed_time(), fs.clock_us + 1);
    // Two operations of one batch (same agreed time) get two times too.
    fs.s.execute(1, &bytes, &1u64.to_le_bytes());
    assert_eq!(
        fs.getattr(f.fh).mtime,
        Timestamp::from_micros(fs.clock_us + 2)
    );
}

#[test]
fn read_only_classification() {
    let fs = Fs::new();
    let enc = |op| byzfs_fs::Request::new(Credentials::root(), op).encode();
    let fh = ROOT;
    for op in [
        Op::GetAttr { fh },
        Op::Lookup {
            dir: fh,
            name: "x".into(),
        },
        Op::Access { fh, mask: 0 },
        Op::ReadLink { fh },
        Op::Read {
            fh,
            offset: 0,
            count: 1,
        },
        Op::ReadDir {
            dir: fh,
            cookie: 0,
            max_entries: 1,
        },
        Op::StatFs,
    ] {
        assert!(fs.s.is_read_only(&enc(op)));
    }
    for op in [
        Op::Fsync { fh },
        Op::Write {
            fh,
            offset: 0,
            data: vec![],
        },
        Op::Mkdir {
            dir: fh,
            name: "x".into(),
            mode: 0,
        },
        Op::SetAttr {
            fh,
            set: SetAttr::default(),
        },
    ] {
        assert!(!fs.s.is_read_only(&enc(op.clone())));
        // A mutating op on the read-only path is refused without effect.
        assert_eq!(
            byzfs_fs::decode_result(&fs.s.execute_read_only(1, &enc(op))),
            Some(err(Errno::EINVAL))
        );
    }
    assert!(!fs.s.is_read_only(b"garbage"));
}

#[test]
fn garbage_ops_get_einval_everywhere() {
    let mut a = Fs::new();
    let mut b = Fs::new();
    for junk in [&b""[..], b"\xff\xff\xff", b"\x00\x00\x00\x01\x02"] {
        let ra = a.s.execute(1, junk, &T0.to_le_bytes());
        let rb = b.s.execute(1, junk, &T0.to_le_bytes());
        assert_eq!(ra, rb);
        assert_eq!(byzfs_fs::decode_result(&ra), Some(err(Errno::EINVAL)));
        assert_eq!(
            byzfs_fs::decode_result(&a.s.execute_read_only(1, junk)),
            Some(err(Errno::EINVAL))
        );
    }
    assert_eq!(
        a.s.current_partition_digests(),
        b.s.current_partition_digests()
    );
}

#[test]
fn ordered_read_only_ops_answer_the_same() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    fs.write(f.fh, 0, b"abc").unwrap();
    let op = Op::Read {
        fh: f.fh,
        offset: 1,
        count: 5,
    };
    assert_eq!(fs.run(op.clone()), fs.run_ordered(op));
}

#[test]
fn replicated_capacity_gives_enospc() {
    let mut fs = Fs::with_config(FsConfig {
        capacity_bytes: 10_000,
        max_inodes: 3,
        ..small_config()
    });
    let f = fs.create(ROOT, "f");
    fs.write(f.fh, 0, &[1; 9_000]).unwrap();
    assert_eq!(fs.write(f.fh, 9_000, &[1; 2_000]), err(Errno::ENOSPC));
    assert_eq!(
        fs.getattr(f.fh).size,
        9_000,
        "nothing of the failed write stored"
    );
    // Overwriting in place needs no new space.
    fs.write(f.fh, 0, &[2; 9_000]).unwrap();
    fs.create(ROOT, "g");
    assert_eq!(
        fs.run(Op::Mkdir {
            dir: ROOT,
            name: "h".into(),
            mode: 0o755
        }),
        err(Errno::ENOSPC)
    );
    let Ok(Reply::StatFs(st)) = fs.run(Op::StatFs) else {
        panic!()
    };
    assert_eq!((st.files, st.files_free), (3, 0));
    assert_eq!(st.blocks_free, 0, "1000 bytes free < one 4 KiB unit");
}

#[test]
fn depth_is_bounded() {
    let mut fs = Fs::new();
    let mut d = ROOT;
    for _ in 0..MAX_DEPTH {
        d = fs.mkdir(d, "d").fh;
    }
    assert_eq!(
        fs.run(Op::Mkdir {
            dir: d,
            name: "d".into(),
            mode: 0o755
        }),
        err(Errno::ENAMETOOLONG)
    );
    // Files may still be created at the deepest level.
    fs.create(d, "f");
    // Moving a directory there is refused too.
    let other = fs.mkdir(ROOT, "other");
    assert_eq!(
        fs.run(Op::Rename {
            from_dir: ROOT,
            from_name: "other".into(),
            to_dir: d,
            to_name: "o".into()
        }),
        err(Errno::ENAMETOOLONG)
    );
    assert_eq!(fs.getattr(other.fh).nlink, 2);
}

#[test]
fn stale_handles_everywhere() {
    let mut fs = Fs::new();
    let gone = FileHandle {
        ino: 999,
        generation: 1,
    };
    for op in [
        Op::GetAttr { fh: gone },
        Op::Lookup {
            dir: gone,
            name: "x".into(),
        },
        Op::Write {
            fh: gone,
            offset: 0,
            data: b"x".to_vec(),
        },
        Op::Create {
            dir: gone,
            name: "x".into(),
            mode: 0,
            exclusive: true,
        },
        Op::Rename {
            from_dir: ROOT,
            from_name: "x".into(),
            to_dir: gone,
            to_name: "y".into(),
        },
        Op::Link {
            fh: ROOT,
            dir: gone,
            name: "x".into(),
        },
        Op::Fsync { fh: gone },
    ] {
        let r = fs.run(op.clone());
        assert!(
            r == err(Errno::ESTALE) || r == err(Errno::EPERM),
            "{op:?}: {r:?}"
        );
    }
    assert_eq!(fs.run(Op::Fsync { fh: ROOT }), Ok(Reply::Done));
}

#[test]
fn truncation_leaves_no_records_and_costs_stored_groups_only() {
    // Two files with different histories but the same final content give the same state:
    // nothing is left behind by truncation (no block, no group record).
    let far = MAX_FILE_SIZE - 1;
    let mut a = Fs::new();
    let mut b = Fs::new();
    let fa = a.create(ROOT, "f");
    let fb = b.create(ROOT, "f");
    a.write(fa.fh, far, b"x").unwrap();
    a.write(fa.fh, 5 * BLOCK_SIZE, &[1; 100]).unwrap();
    b.write(fb.fh, 0, b"y").unwrap();
    b.write(fb.fh, 1, b"z").unwrap();
    // Cheap: one range scan over the file's two stored groups, not 2^20 group probes.
    a.truncate(fa.fh, 0).unwrap();
    b.truncate(fb.fh, 0).unwrap();
    assert_eq!(
        a.s.current_partition_digests(),
        b.s.current_partition_digests()
    );
    // Partial truncation keeps the group's remaining blocks counted.
    let big = vec![9u8; 4 * BLOCK_SIZE as usize];
    a.write(fa.fh, 0, &big).unwrap();
    b.write(fb.fh, 0, &big).unwrap();
    a.truncate(fa.fh, BLOCK_SIZE + 1).unwrap();
    b.truncate(fb.fh, 2 * BLOCK_SIZE).unwrap();
    a.truncate(fa.fh, 0).unwrap();
    b.truncate(fb.fh, 0).unwrap();
    assert_eq!(
        a.s.current_partition_digests(),
        b.s.current_partition_digests()
    );
}

/// A backup accepts an agreed timestamp at most `clock_tolerance` ahead of its clock and
/// `clock_lag_tolerance` behind it: a PRE-PREPARE can leave seconds after its primary took
/// the time (a stable-checkpoint sync), and a clock held back only ends leases late.
#[test]
fn proposed_times_may_lag_more_than_they_may_lead() {
    use byzfs_bft::{Service, Time};
    let mut fs = Fs::new();
    fs.create(ROOT, "f");
    let last = fs.s.last_agreed_time();
    let now = last + 60_000_000;
    let verdicts: Vec<bool> = [
        -10_000_001i64,
        -10_000_000,
        -2_000_000,
        0,
        1_000_000,
        1_000_001,
    ]
    .into_iter()
    .map(|d| {
        let ts = now.saturating_add_signed(d);
        fs.s.check_nondet(1, &ts.to_le_bytes(), Time(now))
    })
    .collect();
    assert_eq!(verdicts, [false, true, true, true, true, false]);
    // Never at or below the last agreed time, whatever the clocks say.
    assert!(!fs.s.check_nondet(1, &last.to_le_bytes(), Time(last)));
}
