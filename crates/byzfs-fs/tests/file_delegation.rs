//! File delegations (`byzfs_fs::file_delegation`): while one session holds a regular file,
//! every other session's operation on its contents or attributes by handle is recalled and
//! changes nothing; the holder is asked to give it back; a lapsed lease ends it; names are
//! not covered.

use crate::common;

use byzfs_bft::Service as _;
use byzfs_fs::proto::attr::SetAttr;
use byzfs_fs::{Credentials, Errno, FileHandle, Op, Reply};
use common::*;

/// The harness's own client (`Fs::run`, `Fs::dump`), so the holder can look at the tree.
const HOLDER: u64 = 9;
const OTHER: u64 = 8;

fn write(fh: FileHandle, data: &[u8]) -> Op {
    Op::Write {
        fh,
        offset: 0,
        data: data.to_vec(),
    }
}

#[test]
fn another_session_is_recalled_until_the_holder_gives_the_file_back() {
    let mut fs = Fs::new();
    let d = fs.mkdir(ROOT, "d").fh;
    let f = fs.create(d, "f").fh;
    let g = fs.create(d, "g").fh;
    delegated(fs.run_client(HOLDER, Op::DelegateFile { file: f }));
    // The holder works on it as usual.
    assert!(fs.run_client(HOLDER, write(f, b"holder's")).is_ok());
    let before = fs.dump();
    // Another session: recalled, whatever it does with `f`'s contents or attributes.
    let others = [
        Op::GetAttr { fh: f },
        Op::Read {
            fh: f,
            offset: 0,
            count: 8,
        },
        write(f, b"other's!"),
        Op::SetAttr {
            fh: f,
            set: SetAttr {
                size: Some(0),
                ..SetAttr::default()
            },
        },
        Op::Access { fh: f, mask: 4 },
        Op::Fsync { fh: f },
        Op::SetXattr {
            fh: f,
            name: b"user.x".to_vec(),
            value: b"v".to_vec(),
            how: byzfs_fs::proto::op::XattrSet::Any,
        },
        Op::CopyRange {
            from: g,
            from_offset: 0,
            to: f,
            to_offset: 0,
            len: 4,
        },
        // A batch that names `f` once is recalled before any member runs.
        Op::Batch(vec![write(g, b"first"), write(f, b"second")]),
        Op::DelegateFile { file: f },
        // A removal of its name, or a rename over it, may free it.
        Op::Remove {
            dir: d,
            name: b"f".to_vec(),
        },
        Op::Rename {
            from_dir: d,
            from_name: b"g".to_vec(),
            to_dir: d,
            to_name: b"f".to_vec(),
        },
        Op::Batch(vec![
            write(g, b"first"),
            Op::Remove {
                dir: d,
                name: b"f".to_vec(),
            },
        ]),
    ];
    for op in others {
        let name = op.name();
        assert_eq!(fs.run_client(OTHER, op), Ok(Reply::Recall), "{name}");
    }
    assert_eq!(fs.dump(), before);
    // A read-only one is recalled too (it cannot ask the holder: its mount sends it
    // again, ordered).
    let bytes = byzfs_fs::Request::new(fs.cred.clone(), Op::GetAttr { fh: f }).encode();
    let read_only = byzfs_fs::decode_result(&fs.s.execute_read_only(OTHER, &bytes));
    assert_eq!(read_only, Some(Ok(Reply::Recall)));
    // Other uses of its names are not covered (a lookup, a link, a rename of it); other
    // files are not concerned.
    assert!(fs
        .run_client(
            OTHER,
            Op::Lookup {
                dir: d,
                name: b"f".to_vec()
            }
        )
        .is_ok());
    let link = Op::Link {
        fh: f,
        dir: d,
        name: b"f2".to_vec(),
    };
    assert!(fs.run_client(OTHER, link).is_ok());
    let rename = Op::Rename {
        from_dir: d,
        from_name: b"f2".to_vec(),
        to_dir: d,
        to_name: b"f3".to_vec(),
    };
    assert!(fs.run_client(OTHER, rename).is_ok());
    assert!(fs.run_client(OTHER, write(g, b"free")).is_ok());
    // The holder is asked for `f`, gives it back, and the other session goes on.
    assert_eq!(recalls(&mut fs, HOLDER), [f.ino]);
    assert_eq!(
        fs.run_client(OTHER, Op::ReturnFile { file: f }),
        Err(Errno::ENOLCK)
    );
    assert_eq!(
        fs.run_client(HOLDER, Op::ReturnFile { file: f }),
        Ok(Reply::Done)
    );
    assert_eq!(recalls(&mut fs, HOLDER), Vec::<u64>::new());
    match fs.run_client(
        OTHER,
        Op::Read {
            fh: f,
            offset: 0,
            count: 8,
        },
    ) {
        Ok(Reply::Read { data, .. }) => assert_eq!(data, b"holder's"),
        other => panic!("{other:?}"),
    }
    delegated(fs.run_client(OTHER, Op::DelegateFile { file: f }));
    assert_eq!(
        fs.run_client(HOLDER, Op::GetAttr { fh: f }),
        Ok(Reply::Recall)
    );
}

#[test]
fn a_lapsed_lease_ends_the_delegation() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f").fh;
    delegated(fs.run_client(HOLDER, Op::DelegateFile { file: f }));
    assert_eq!(fs.run_client(OTHER, write(f, b"x")), Ok(Reply::Recall));
    // The holder is silent for longer than a lease (30 s of agreed time).
    fs.clock_us += 31_000_000;
    assert!(fs.run_client(OTHER, write(f, b"x")).is_ok());
    // Asking again renews the lease: a new delegation under its new epoch.
    delegated(fs.run_client(HOLDER, Op::DelegateFile { file: f }));
    assert_eq!(fs.run_client(OTHER, write(f, b"y")), Ok(Reply::Recall));
}

#[test]
fn only_a_writer_of_a_regular_file_may_hold_it() {
    let mut fs = Fs::new();
    let d = fs.mkdir(ROOT, "d").fh;
    let f = fs.create(ROOT, "f").fh;
    assert_eq!(
        fs.run_client(HOLDER, Op::DelegateFile { file: d }),
        Err(Errno::EISDIR)
    );
    // `f` is root's, 0644: another user reads it but may not hold it.
    let user = Credentials {
        uid: 1000,
        gid: 1000,
        groups: Vec::new(),
    };
    assert_eq!(
        fs.run_as(&user, Op::DelegateFile { file: f }),
        Err(Errno::EACCES)
    );
    let stale = FileHandle {
        ino: f.ino,
        generation: f.generation + 1,
    };
    assert_eq!(
        fs.run_client(HOLDER, Op::DelegateFile { file: stale }),
        Err(Errno::ESTALE)
    );
}

#[test]
fn a_removed_file_takes_its_delegation_with_it() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f").fh;
    delegated(fs.run_client(HOLDER, Op::DelegateFile { file: f }));
    let remove = Op::Remove {
        dir: ROOT,
        name: b"f".to_vec(),
    };
    // Another session's removal waits for the holder to give the file back; then the file
    // goes, and its record with it; the holder's late writes find it gone.
    assert_eq!(fs.run_client(OTHER, remove.clone()), Ok(Reply::Recall));
    assert_eq!(recalls(&mut fs, HOLDER), [f.ino]);
    assert!(fs.run_client(HOLDER, write(f, b"in time")).is_ok());
    assert_eq!(
        fs.run_client(HOLDER, Op::ReturnFile { file: f }),
        Ok(Reply::Done)
    );
    delegated(fs.run_client(HOLDER, Op::DelegateFile { file: f }));
    // Held again and given up by a lapse this time: the removal goes on.
    fs.clock_us += 31_000_000;
    let removed = fs.run_client(OTHER, remove);
    assert!(
        matches!(removed, Ok(Reply::Unlinked { left: None, .. })),
        "{removed:?}"
    );
    assert_eq!(fs.run_client(HOLDER, write(f, b"late")), Err(Errno::ESTALE));
    assert_eq!(
        fs.run_client(HOLDER, Op::ReturnFile { file: f }),
        Err(Errno::ESTALE)
    );
}

#[test]
fn a_write_at_the_mounts_time_keeps_it_within_the_skew() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f").fh;
    let at = |secs: i64, op: Op| Op::WriteAt {
        time: byzfs_fs::Timestamp { secs, nsecs: 5 },
        write: Box::new(op),
    };
    // The harness's agreed time moves 1 s a request from its start; near it: taken.
    let now = fs.getattr(f).mtime.secs;
    let near = now + 30;
    let r = fs.run_client(HOLDER, at(near, write(f, b"near")));
    match r {
        Ok(Reply::Write { attr, count }) => {
            assert_eq!(count, 4);
            assert_eq!(
                (attr.mtime, attr.ctime),
                (
                    attr.ctime,
                    byzfs_fs::Timestamp {
                        secs: near,
                        nsecs: 5
                    }
                )
            );
        }
        other => panic!("{other:?}"),
    }
    // Far from it: the agreed time instead.
    let far = now - 3600;
    let r = fs.run_client(HOLDER, at(far, write(f, b"far!")));
    let Ok(Reply::Write { attr, .. }) = r else {
        panic!("{r:?}");
    };
    assert!(attr.mtime.secs > now, "{:?}", attr.mtime);
    // Only a write is carried (a request nested otherwise does not decode).
    let bytes = byzfs_fs::Request::new(fs.cred.clone(), at(near, Op::Fsync { fh: f })).encode();
    assert_eq!(byzfs_fs::Request::decode(&bytes), None);
    // A batch counts the bytes it carries: no more than one operation's in all.
    let big = || {
        at(
            near,
            Op::Write {
                fh: f,
                offset: 0,
                data: vec![1; byzfs_fs::proto::op::MAX_IO as usize],
            },
        )
    };
    assert_eq!(
        fs.run_client(HOLDER, Op::Batch(vec![big(), big()])),
        Err(Errno::EINVAL)
    );
    // It is recalled as the write it carries.
    delegated(fs.run_client(HOLDER, Op::DelegateFile { file: f }));
    assert_eq!(
        fs.run_client(OTHER, at(near, write(f, b"x"))),
        Ok(Reply::Recall)
    );
}

/// A holder that renews its lease but never gives a recalled file back: the delegation
/// stops counting two leases (60 s of agreed time) after the first recall, the others go
/// on, the holder's give-back is `ENOLCK`, and it may not take the file back for as long
/// again (`byzfs_fs::delegation` "Revocation").
#[test]
fn a_recalled_file_not_given_back_is_revoked_after_two_leases() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f").fh;
    delegated(fs.run_client(HOLDER, Op::DelegateFile { file: f }));
    assert_eq!(fs.run_client(OTHER, write(f, b"x")), Ok(Reply::Recall));
    let recalled = fs.clock_us;
    // The holder keeps its lease (every 10 s); the file is still its own until 60 s
    // after the recall, a later recall moving nothing.
    while fs.clock_us + 11_000_000 < recalled + 60_000_000 {
        fs.clock_us += 10_000_000;
        assert!(fs.run_client(HOLDER, Op::RenewLease).is_ok());
        assert_eq!(fs.run_client(OTHER, write(f, b"x")), Ok(Reply::Recall));
    }
    assert_eq!(recalls(&mut fs, HOLDER), [f.ino]);
    fs.clock_us = fs.clock_us.max(recalled + 60_000_000);
    assert!(fs.run_client(HOLDER, Op::RenewLease).is_ok());
    assert!(fs.run_client(OTHER, write(f, b"other's")).is_ok());
    // Revoked: the holder's own operations run as anyone's, its give-back is refused,
    // and it may not hold the file again until two more leases have passed.
    assert_eq!(
        fs.run_client(HOLDER, Op::DelegateFile { file: f }),
        Ok(Reply::Recall)
    );
    assert_eq!(
        fs.run_client(HOLDER, Op::ReturnFile { file: f }),
        Err(Errno::ENOLCK)
    );
    fs.clock_us = recalled + 121_000_000;
    delegated(fs.run_client(HOLDER, Op::DelegateFile { file: f }));
    assert_eq!(fs.run_client(OTHER, write(f, b"y")), Ok(Reply::Recall));
}
