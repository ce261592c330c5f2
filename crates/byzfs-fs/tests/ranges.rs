//! `copy_file_range`, hole punching and zeroing, and `SEEK_DATA`/`SEEK_HOLE` at the replicas
//! (`byzfs_fs::ranges`).

use crate::common;

use byzfs_fs::data::BLOCK_SIZE;
use byzfs_fs::proto::op::MAX_IO;
use byzfs_fs::ranges::SEEK_GROUPS;
use byzfs_fs::{Errno, FileHandle, Op, Reply};
use common::*;

const B: u64 = BLOCK_SIZE;

fn seek(fs: &mut Fs, fh: FileHandle, offset: u64, hole: bool) -> Result<u64, Errno> {
    let mut at = offset;
    loop {
        match fs.run(Op::Seek {
            fh,
            offset: at,
            hole,
        }) {
            Ok(Reply::Seek { at: a, done: true }) => return Ok(a),
            Ok(Reply::Seek { at: a, done: false }) => {
                assert!(a > at, "no progress");
                at = a;
            }
            Ok(other) => panic!("{other:?}"),
            Err(e) => return Err(e),
        }
    }
}

#[test]
fn seek_data_and_hole_follow_the_stored_blocks() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "sparse");
    // Data in blocks 2 and 3, a hole in 4..100, data in block 100, size ends in a hole.
    fs.write(f.fh, 2 * B + 10, &vec![1; (2 * B) as usize])
        .unwrap();
    fs.write(f.fh, 100 * B, b"x").unwrap();
    fs.truncate(f.fh, 300 * B).unwrap();
    assert_eq!(seek(&mut fs, f.fh, 0, false), Ok(2 * B));
    assert_eq!(seek(&mut fs, f.fh, 0, true), Ok(0));
    assert_eq!(seek(&mut fs, f.fh, 2 * B + 5, false), Ok(2 * B + 5));
    assert_eq!(seek(&mut fs, f.fh, 2 * B + 5, true), Ok(5 * B));
    assert_eq!(seek(&mut fs, f.fh, 5 * B, false), Ok(100 * B));
    assert_eq!(seek(&mut fs, f.fh, 100 * B, true), Ok(101 * B));
    assert_eq!(seek(&mut fs, f.fh, 101 * B, false), Err(Errno::ENXIO));
    assert_eq!(seek(&mut fs, f.fh, 300 * B, true), Err(Errno::ENXIO));
    assert_eq!(seek(&mut fs, f.fh, 299 * B, true), Ok(299 * B));
}

#[test]
fn seek_over_long_data_is_answered_in_bounded_steps() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "dense");
    let mib = SEEK_GROUPS + 3;
    for m in 0..mib {
        fs.write(f.fh, m << 20, &vec![2; MAX_IO as usize]).unwrap();
    }
    let first = fs.run(Op::Seek {
        fh: f.fh,
        offset: 0,
        hole: true,
    });
    assert_eq!(
        first,
        Ok(Reply::Seek {
            at: SEEK_GROUPS << 20,
            done: false
        })
    );
    // The end of the file is the first hole.
    assert_eq!(seek(&mut fs, f.fh, 0, true), Ok(mib << 20));
}

#[test]
fn copy_range_copies_at_the_replicas_and_checks_like_a_write() {
    let mut fs = Fs::new();
    let a = fs.create(ROOT, "a");
    let b = fs.create(ROOT, "b");
    let data: Vec<u8> = (0..3 * B).map(|i| (i % 253) as u8).collect();
    fs.write(a.fh, 0, &data).unwrap();
    let r = fs.run(Op::CopyRange {
        from: a.fh,
        from_offset: 100,
        to: b.fh,
        to_offset: 7,
        len: MAX_IO,
    });
    // Clipped at the source's end.
    match r {
        Ok(Reply::Write { count, attr }) => {
            assert_eq!(u64::from(count), 3 * B - 100);
            assert_eq!(attr.size, 7 + 3 * B - 100);
        }
        other => panic!("{other:?}"),
    }
    let mut want = vec![0u8; 7];
    want.extend_from_slice(&data[100..]);
    assert_eq!(fs.read(b.fh, 0, MAX_IO), want);
    // Past the source's end: nothing.
    match fs.run(Op::CopyRange {
        from: a.fh,
        from_offset: 10 * B,
        to: b.fh,
        to_offset: 0,
        len: 10,
    }) {
        Ok(Reply::Write { count: 0, .. }) => {}
        other => panic!("{other:?}"),
    }
    // Overlapping ranges of one file, too long a range, a directory.
    let refuse = |fs: &mut Fs, from: FileHandle, to: FileHandle, to_offset: u64, len: u32| {
        fs.run(Op::CopyRange {
            from,
            from_offset: 0,
            to,
            to_offset,
            len,
        })
    };
    assert_eq!(refuse(&mut fs, a.fh, a.fh, 10, 100), err(Errno::EINVAL));
    assert_eq!(
        refuse(&mut fs, a.fh, b.fh, 0, MAX_IO + 1),
        err(Errno::EINVAL)
    );
    assert_eq!(refuse(&mut fs, ROOT, b.fh, 0, 1), err(Errno::EISDIR));
    // Same file, apart: fine.
    match refuse(&mut fs, a.fh, a.fh, 3 * B, 100) {
        Ok(Reply::Write { count: 100, .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn punch_hole_and_zero_range() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    fs.write(f.fh, 0, &vec![9; (4 * B) as usize]).unwrap();
    let used0 = fs.getattr(f.fh).used;
    // A hole over block 1 whole and parts of blocks 0 and 2: block 1 is no longer stored.
    fs.run(Op::Punch {
        fh: f.fh,
        offset: B - 10,
        len: (B + 20) as u32,
        keep_size: true,
    })
    .unwrap();
    let a = fs.getattr(f.fh);
    assert_eq!(a.size, 4 * B);
    assert_eq!(a.used, used0 - B);
    let back = fs.read(f.fh, 0, MAX_IO);
    let mut want = vec![9u8; (4 * B) as usize];
    want[(B - 10) as usize..(2 * B + 10) as usize].fill(0);
    assert_eq!(back, want);
    assert_eq!(seek(&mut fs, f.fh, 0, true), Ok(B));
    assert_eq!(seek(&mut fs, f.fh, B, false), Ok(2 * B));
    // Punching past the end changes no size; zero-range without keep-size grows it.
    fs.run(Op::Punch {
        fh: f.fh,
        offset: 4 * B - 1,
        len: 100,
        keep_size: true,
    })
    .unwrap();
    assert_eq!(fs.getattr(f.fh).size, 4 * B);
    fs.run(Op::Punch {
        fh: f.fh,
        offset: 4 * B - 1,
        len: 100,
        keep_size: false,
    })
    .unwrap();
    assert_eq!(fs.getattr(f.fh).size, 4 * B + 99);
    let back = fs.read(f.fh, 3 * B, MAX_IO);
    let mut want = vec![9u8; B as usize];
    want[(B - 1) as usize] = 0;
    want.resize((B + 99) as usize, 0);
    assert_eq!(back, want);
    assert_eq!(
        fs.run(Op::Punch {
            fh: f.fh,
            offset: 0,
            len: 0,
            keep_size: true
        }),
        err(Errno::EINVAL)
    );
}
