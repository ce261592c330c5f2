//! Removals and truncations of large files: done at once in the namespace, their blocks
//! given back in bounded steps through the reclaim queue (`byzfs_fs::reclaim`).

use crate::common;

use byzfs_fs::data::BLOCK_SIZE;
use byzfs_fs::reclaim::STEP_BLOCKS;
use byzfs_fs::{Errno, FileHandle, Op, Reply, SetAttr};
use common::*;

/// Blocks of a file too large for one operation to delete.
const BIG_BLOCKS: u64 = STEP_BLOCKS * 5 + 7;

/// Writes `blocks` full blocks of pattern bytes (`i % 251`) into `fh` from offset 0.
fn fill(fs: &mut Fs, fh: FileHandle, blocks: u64) {
    let chunk = 64 * BLOCK_SIZE;
    let total = blocks * BLOCK_SIZE;
    let mut off = 0;
    while off < total {
        let n = chunk.min(total - off);
        let data: Vec<u8> = (off..off + n).map(|i| (i % 251) as u8).collect();
        fs.write(fh, off, &data).unwrap();
        off += n;
    }
}

/// Bytes in use as `statfs` counts them: in its block size, rounded up.
fn used(fs: &mut Fs) -> u64 {
    match fs.run(Op::StatFs) {
        Ok(Reply::StatFs(s)) => (s.blocks - s.blocks_free) * u64::from(s.block_size),
        other => panic!("statfs: {other:?}"),
    }
}

/// `bytes` as [`used`] shows them.
fn units(bytes: u64) -> u64 {
    bytes.div_ceil(4096) * 4096
}

/// Sends `Op::Reclaim` until it answers `more: false`; returns how many it took and the
/// blocks they deleted. Each step deletes at most `STEP_BLOCKS`.
fn reclaim_all(fs: &mut Fs, file: Option<FileHandle>) -> (u64, u64) {
    let (mut steps, mut blocks) = (0, 0);
    loop {
        steps += 1;
        assert!(steps < 10_000, "reclaim does not finish");
        match fs.run(Op::Reclaim { file }) {
            Ok(Reply::Reclaimed { blocks: b, more }) => {
                assert!(b <= STEP_BLOCKS, "one step deleted {b} blocks");
                blocks += b;
                if !more {
                    return (steps, blocks);
                }
            }
            other => panic!("reclaim: {other:?}"),
        }
    }
}

/// The queue has nothing left: a reclaim step deletes nothing and says so.
fn assert_queue_empty(fs: &mut Fs) {
    assert_eq!(
        fs.run(Op::Reclaim { file: None }),
        Ok(Reply::Reclaimed {
            blocks: 0,
            more: false
        })
    );
}

#[test]
fn a_large_file_removed_goes_at_once_and_its_blocks_in_steps() {
    let mut fs = Fs::new();
    let records0 = fs.records();
    let used0 = used(&mut fs);
    let f = fs.create(ROOT, "big");
    fill(&mut fs, f.fh, BIG_BLOCKS);
    assert_eq!(used(&mut fs) - used0, BIG_BLOCKS * BLOCK_SIZE);
    fs.run(Op::Remove {
        dir: ROOT,
        name: b"big".to_vec(),
    })
    .unwrap();
    // Gone from the namespace at once; its blocks still counted until deleted.
    assert_eq!(fs.lookup(ROOT, "big"), err(Errno::ENOENT));
    assert_eq!(fs.run(Op::GetAttr { fh: f.fh }), err(Errno::ESTALE));
    assert_eq!(used(&mut fs) - used0, BIG_BLOCKS * BLOCK_SIZE);
    let (steps, blocks) = reclaim_all(&mut fs, None);
    assert_eq!(blocks, BIG_BLOCKS);
    assert_eq!(steps, BIG_BLOCKS.div_ceil(STEP_BLOCKS));
    // Everything is back as it was: no block, group or queue entry left, only the queue's
    // counters (entry numbers are never reused).
    assert_eq!(used(&mut fs), used0);
    assert_eq!(fs.records(), records0 + 1);
    assert_queue_empty(&mut fs);
}

#[test]
fn a_small_file_removed_goes_whole_at_once() {
    let mut fs = Fs::new();
    let records0 = fs.records();
    let f = fs.create(ROOT, "small");
    fill(&mut fs, f.fh, STEP_BLOCKS);
    fs.run(Op::Remove {
        dir: ROOT,
        name: b"small".to_vec(),
    })
    .unwrap();
    assert_eq!(fs.records(), records0);
}

#[test]
fn truncation_to_zero_of_a_large_file_leaves_it_empty_and_writable_at_once() {
    let mut fs = Fs::new();
    let used0 = used(&mut fs);
    let f = fs.create(ROOT, "big");
    fill(&mut fs, f.fh, BIG_BLOCKS);
    fs.truncate(f.fh, 0).unwrap();
    let a = fs.getattr(f.fh);
    assert_eq!((a.size, a.used), (0, 0));
    // Rewritten at once (no EBUSY): a fresh data id, nothing of the old data shows.
    fs.write(f.fh, 3 * BLOCK_SIZE, b"new").unwrap();
    let back = fs.read(f.fh, 0, (4 * BLOCK_SIZE) as u32);
    let mut want = vec![0u8; (3 * BLOCK_SIZE) as usize];
    want.extend_from_slice(b"new");
    assert_eq!(back, want);
    reclaim_all(&mut fs, None);
    assert_eq!(used(&mut fs) - used0, units(3));
    assert_eq!(fs.getattr(f.fh).used, 3);
}

#[test]
fn a_large_stale_tail_never_shows_and_growth_over_it_waits_for_it() {
    let mut fs = Fs::new();
    let used0 = used(&mut fs);
    let f = fs.create(ROOT, "big");
    fill(&mut fs, f.fh, BIG_BLOCKS);
    let keep = 2 * BLOCK_SIZE + 5;
    fs.truncate(f.fh, keep).unwrap();
    // The prefix is intact; the size is the new one; reads stop there.
    let a = fs.getattr(f.fh);
    assert_eq!(a.size, keep);
    let want: Vec<u8> = (0..keep).map(|i| (i % 251) as u8).collect();
    assert_eq!(fs.read(f.fh, 0, (8 * BLOCK_SIZE) as u32), want);
    // A second, smaller truncation while the tail waits.
    let keep = BLOCK_SIZE + 1;
    fs.truncate(f.fh, keep).unwrap();
    // Growing over the tail changes nothing and says so.
    let before = (fs.getattr(f.fh), fs.records());
    assert_eq!(fs.write(f.fh, 10 * BLOCK_SIZE, b"x"), err(Errno::EBUSY));
    assert_eq!(fs.truncate(f.fh, keep + 1), err(Errno::EBUSY));
    assert_eq!(
        fs.run(Op::Allocate {
            fh: f.fh,
            end: keep + 1
        }),
        err(Errno::EBUSY)
    );
    // The failed operations changed nothing of the file (only the agreed clock moved).
    assert_eq!((fs.getattr(f.fh), fs.records()), before);
    // A write within the size does not grow the file: fine.
    fs.write(f.fh, 0, b"A").unwrap();
    // The client reclaims that file's tail, then grows it: the gap reads as zeros.
    let (_, blocks) = reclaim_all(&mut fs, Some(f.fh));
    assert_eq!(blocks, BIG_BLOCKS - 2);
    fs.write(f.fh, 10 * BLOCK_SIZE, b"x").unwrap();
    let back = fs.read(f.fh, 0, (11 * BLOCK_SIZE) as u32);
    let mut want: Vec<u8> = (0..keep).map(|i| (i % 251) as u8).collect();
    want[0] = b'A';
    want.resize((10 * BLOCK_SIZE) as usize, 0);
    want.push(b'x');
    assert_eq!(back, want);
    // The accounting followed: the file's `used` and the file system's.
    let a = fs.getattr(f.fh);
    assert_eq!(a.used, keep + 1);
    assert_eq!(used(&mut fs) - used0, units(keep + 1));
    assert_queue_empty(&mut fs);
}

#[test]
fn a_file_removed_with_a_stale_tail_and_attributes_goes_entirely() {
    let mut fs = Fs::new();
    let records0 = fs.records();
    let used0 = used(&mut fs);
    let f = fs.create(ROOT, "big");
    fill(&mut fs, f.fh, BIG_BLOCKS);
    fs.truncate(f.fh, 3 * BLOCK_SIZE + 1).unwrap();
    // More attributes than one operation deletes.
    for n in 0..STEP_BLOCKS + 10 {
        fs.run(Op::SetXattr {
            fh: f.fh,
            name: format!("user.a{n}").into_bytes(),
            value: vec![1; 100],
            how: byzfs_fs::proto::op::XattrSet::Any,
        })
        .unwrap();
    }
    fs.run(Op::Remove {
        dir: ROOT,
        name: b"big".to_vec(),
    })
    .unwrap();
    reclaim_all(&mut fs, None);
    assert_eq!(used(&mut fs), used0);
    assert_eq!(fs.records(), records0 + 1);
}

#[test]
fn renaming_over_a_large_file_frees_it_in_steps() {
    let mut fs = Fs::new();
    let used0 = used(&mut fs);
    let big = fs.create(ROOT, "big");
    fill(&mut fs, big.fh, BIG_BLOCKS);
    let small = fs.create(ROOT, "small");
    fs.write(small.fh, 0, b"hello").unwrap();
    fs.run(Op::Rename {
        from_dir: ROOT,
        from_name: b"small".to_vec(),
        to_dir: ROOT,
        to_name: b"big".to_vec(),
    })
    .unwrap();
    let (_, blocks) = reclaim_all(&mut fs, None);
    assert_eq!(blocks, BIG_BLOCKS);
    assert_eq!(used(&mut fs) - used0, units(5));
    let a = Fs::entry(fs.lookup(ROOT, "big"));
    assert_eq!(fs.read(a.fh, 0, 100), b"hello");
}

#[test]
fn setattr_shrinking_a_large_file_and_chmod_in_one_call() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "big");
    fill(&mut fs, f.fh, BIG_BLOCKS);
    let r = fs.run(Op::SetAttr {
        fh: f.fh,
        set: SetAttr {
            size: Some(7),
            mode: Some(0o600),
            ..SetAttr::default()
        },
    });
    match r {
        Ok(Reply::Attr(a)) => assert_eq!((a.size, a.mode), (7, 0o600)),
        other => panic!("{other:?}"),
    }
    assert_eq!(fs.read(f.fh, 0, 100), (0..7u8).collect::<Vec<_>>());
}

#[test]
fn extended_attributes_of_one_file_are_bounded() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f");
    let value = vec![7u8; byzfs_fs::xattr::MAX_VALUE];
    let mut stored = 0;
    let last = loop {
        let r = fs.run(Op::SetXattr {
            fh: f.fh,
            name: format!("user.v{stored}").into_bytes(),
            value: value.clone(),
            how: byzfs_fs::proto::op::XattrSet::Any,
        });
        if r.is_err() {
            break r;
        }
        stored += 1;
    };
    assert_eq!(last, err(Errno::ENOSPC));
    // 1 MiB of names and values: fifteen 64 KiB values and their names fit, a sixteenth
    // does not.
    assert_eq!(stored, 15);
}
