//! Reserved inode numbers (`byzfs_fs::reserve`): a client session creates entries with
//! handles it reserved, each handle at most once, in increasing order, and only its own.

use crate::common;

use byzfs_fs::reserve::MAX_RESERVE;
use byzfs_fs::{Errno, FileHandle, Op, Reply};
use common::*;

const ME: u64 = 7;
const OTHER: u64 = 8;

fn reserve(fs: &mut Fs, client: u64, count: u32) -> FileHandle {
    match fs.run_client(client, Op::ReserveInodes { count }) {
        Ok(Reply::Reserved { first, count: c }) => {
            assert_eq!(c, count);
            first
        }
        other => panic!("reserve: {other:?}"),
    }
}

fn nth(first: FileHandle, k: u64) -> FileHandle {
    FileHandle {
        ino: first.ino + k,
        generation: first.generation + k,
    }
}

fn mkdir_at(fs: &mut Fs, client: u64, at: FileHandle, name: &str) -> Result<FileHandle, Errno> {
    let make = Box::new(Op::Mkdir {
        dir: ROOT,
        name: name.into(),
        mode: 0o755,
    });
    fs.run_client(
        client,
        Op::MakeAt {
            at,
            make,
            time: None,
        },
    )
    .map(|r| Fs::entry(Ok(r)).fh)
}

#[test]
fn reserved_handles_are_used_once_in_order_by_their_session_only() {
    let mut fs = Fs::new();
    let first = reserve(&mut fs, ME, 4);
    // A plain creation afterwards gets the next number after the range.
    let plain = fs.mkdir(ROOT, "plain").fh;
    assert_eq!(plain, nth(first, 4));
    assert_eq!(
        mkdir_at(&mut fs, OTHER, first, "x"),
        Err(Errno::EINVAL),
        "not its range"
    );
    assert_eq!(mkdir_at(&mut fs, ME, first, "a"), Ok(first));
    assert_eq!(
        mkdir_at(&mut fs, ME, first, "b"),
        Err(Errno::EINVAL),
        "used"
    );
    // Skipping one spends it.
    assert_eq!(mkdir_at(&mut fs, ME, nth(first, 2), "c"), Ok(nth(first, 2)));
    assert_eq!(
        mkdir_at(&mut fs, ME, nth(first, 1), "d"),
        Err(Errno::EINVAL),
        "skipped"
    );
    let wrong_generation = FileHandle {
        generation: first.generation + 2,
        ..nth(first, 3)
    };
    assert_eq!(
        mkdir_at(&mut fs, ME, wrong_generation, "e"),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        mkdir_at(&mut fs, ME, nth(first, 4), "f"),
        Err(Errno::EINVAL),
        "past the end"
    );
    // The entries are what they say, and lookups find them by their handles.
    assert_eq!(Fs::entry(fs.lookup(ROOT, "a")).fh, first);
    assert_eq!(Fs::entry(fs.lookup(ROOT, "c")).fh, nth(first, 2));
    assert_eq!(fs.names(ROOT), ["plain", "a", "c"]);
}

#[test]
fn a_failed_creation_spends_nothing_and_every_kind_can_be_made_at_a_handle() {
    let mut fs = Fs::new();
    let first = reserve(&mut fs, ME, 8);
    fs.mkdir(ROOT, "taken");
    // EEXIST fails the operation: the handle is still unspent.
    assert_eq!(mkdir_at(&mut fs, ME, first, "taken"), Err(Errno::EEXIST));
    let makes = [
        Op::Create {
            dir: ROOT,
            name: b"file".to_vec(),
            mode: 0o644,
            exclusive: true,
        },
        Op::Mkdir {
            dir: ROOT,
            name: b"dir".to_vec(),
            mode: 0o755,
        },
        Op::Symlink {
            dir: ROOT,
            name: b"link".to_vec(),
            target: b"file".to_vec(),
        },
        Op::Mknod {
            dir: ROOT,
            name: b"fifo".to_vec(),
            kind: byzfs_fs::SpecialKind::Fifo,
            mode: 0o600,
        },
    ];
    for (k, make) in makes.into_iter().enumerate() {
        let at = nth(first, k as u64);
        let made = fs.run_client(
            ME,
            Op::MakeAt {
                time: None,
                at,
                make: Box::new(make),
            },
        );
        assert_eq!(Fs::entry(made).fh, at);
    }
    // Only creations may name a handle.
    let not_a_creation = Op::MakeAt {
        time: None,
        at: nth(first, 4),
        make: Box::new(Op::Remove {
            dir: ROOT,
            name: b"file".to_vec(),
        }),
    };
    assert_eq!(fs.run_client(ME, not_a_creation), Err(Errno::EINVAL));
}

#[test]
fn reservations_are_bounded() {
    let mut fs = Fs::new();
    for bad in [0, MAX_RESERVE + 1] {
        assert_eq!(
            fs.run_client(ME, Op::ReserveInodes { count: bad }),
            Err(Errno::EINVAL)
        );
    }
    // A session keeps two ranges: a third drops the oldest.
    let a = reserve(&mut fs, ME, 2);
    let b = reserve(&mut fs, ME, 2);
    let c = reserve(&mut fs, ME, 2);
    assert_eq!(mkdir_at(&mut fs, ME, a, "a"), Err(Errno::EINVAL), "dropped");
    assert_eq!(mkdir_at(&mut fs, ME, b, "b"), Ok(b));
    assert_eq!(mkdir_at(&mut fs, ME, c, "c"), Ok(c));
}

/// A creation at a reserved handle is made at the time its mount answered it with (the
/// entry's times, its directory's `mtime` and `ctime`) if that is within
/// `MAKE_AT_SKEW_SECS` of the agreed time, and at the agreed time otherwise.
#[test]
fn a_creation_takes_its_mounts_time_within_the_bound() {
    use byzfs_fs::reserve::MAKE_AT_SKEW_SECS;
    use byzfs_fs::Timestamp;
    let mut fs = Fs::new();
    let first = reserve(&mut fs, ME, 8);
    let make = |fs: &mut Fs, k: u64, time: Option<Timestamp>| {
        let make = Box::new(Op::Create {
            dir: ROOT,
            name: format!("f{k}").into_bytes(),
            mode: 0o644,
            exclusive: true,
        });
        let at = nth(first, k);
        match fs.run_client(ME, Op::MakeAt { at, make, time }) {
            Ok(Reply::Made { entry, dir }) => {
                // What the replicas keep is what they replied.
                assert_eq!(fs.getattr(entry.fh), entry);
                [entry.atime, entry.mtime, entry.ctime, dir.mtime, dir.ctime]
            }
            other => panic!("{k}: {other:?}"),
        }
    };
    // The agreed time: the harness's clock moves 1 s per ordered operation.
    let agreed = make(&mut fs, 0, None)[0];
    let at = |k: u64| Timestamp {
        secs: agreed.secs + k as i64,
        ..agreed
    };
    let skew = MAKE_AT_SKEW_SECS as i64;
    let mine = |k: u64, off: i64| Timestamp {
        secs: at(k).secs + off,
        nsecs: 7,
    };
    let extreme = Timestamp {
        secs: i64::MIN,
        nsecs: 7,
    };
    let cases = [
        (1, Some(mine(1, -skew)), mine(1, -skew)),
        (2, Some(mine(2, skew)), mine(2, skew)),
        (3, Some(mine(3, -skew - 1)), at(3)),
        (4, Some(mine(4, skew + 1)), at(4)),
        (5, Some(extreme), at(5)),
        (6, None, at(6)),
    ];
    for (k, time, want) in cases {
        assert_eq!(make(&mut fs, k, time), [want; 5], "case {k}: {time:?}");
    }
}
