//! The `Service` trait side: determinism, checkpoints and rollback, state transfer, local
//! store failures, and random operation sequences (proptest).

use crate::common;

use byzfs_bft::{Digest, Seq, Service};
use byzfs_fs::data::BLOCK_SIZE;
use byzfs_fs::store::{Entries, MemStore, Store, StoreError, WriteSet};
use byzfs_fs::{Credentials, Errno, FileHandle, FileService, FileType, Op, Reply, SetAttr};
use common::*;
use proptest::prelude::*;

/// A small workload touching every kind of record.
fn workload(fs: &mut Fs, tag: &str) {
    let d = fs.mkdir(ROOT, &format!("dir-{tag}"));
    let f = fs.create(d.fh, "file");
    fs.write(f.fh, 0, &vec![tag.len() as u8; 3 * BLOCK_SIZE as usize + 5])
        .unwrap();
    fs.write(f.fh, 1 << 30, b"far away").unwrap();
    fs.run(Op::Symlink {
        dir: d.fh,
        name: "link".into(),
        target: "file".into(),
    })
    .unwrap();
    let g = fs.create(ROOT, &format!("g-{tag}"));
    fs.run(Op::Link {
        fh: g.fh,
        dir: d.fh,
        name: "hard".into(),
    })
    .unwrap();
    fs.run(Op::Rename {
        from_dir: d.fh,
        from_name: "file".into(),
        to_dir: ROOT,
        to_name: format!("moved-{tag}").into_bytes(),
    })
    .unwrap();
    fs.truncate(f.fh, BLOCK_SIZE + 3).unwrap();
}

#[test]
fn same_ops_same_digests() {
    let mut a = Fs::new();
    let mut b = Fs::new();
    workload(&mut a, "x");
    workload(&mut b, "x");
    assert_eq!(
        a.s.current_partition_digests(),
        b.s.current_partition_digests()
    );
    assert_eq!(a.dump(), b.dump());
    // Different content, different digests.
    b.create(ROOT, "extra");
    assert_ne!(
        a.s.current_partition_digests(),
        b.s.current_partition_digests()
    );
    // Different timestamps, different digests (the agreed clock is state).
    let mut c = Fs::new();
    c.clock_us += 1;
    workload(&mut c, "x");
    assert_ne!(
        a.s.current_partition_digests(),
        c.s.current_partition_digests()
    );
}

#[test]
fn checkpoint_ops_rollback_restores() {
    let mut fs = Fs::new();
    workload(&mut fs, "one");
    let d1 = fs.s.checkpoint(128);
    let dump1 = fs.dump();
    assert_eq!(fs.s.current_partition_digests(), d1);
    workload(&mut fs, "two");
    fs.run(Op::Remove {
        dir: ROOT,
        name: "g-one".into(),
    })
    .unwrap();
    let moved = Fs::entry(fs.lookup(ROOT, "moved-one"));
    fs.truncate(moved.fh, 0).unwrap();
    assert_ne!(fs.s.current_partition_digests(), d1);
    assert_eq!(fs.s.rollback(), Some(128));
    assert_eq!(fs.s.current_partition_digests(), d1);
    assert_eq!(fs.dump(), dump1);
    // The agreed clock rolled back too.
    let sb_time = fs.s.last_agreed_time();
    assert!(sb_time < fs.clock_us);
    // Checkpoints compose: a later one, discard, rollback to it.
    workload(&mut fs, "three");
    let d2 = fs.s.checkpoint(256);
    fs.s.discard_checkpoints_below(256);
    assert_eq!(fs.s.checkpoint_partition_digests(128), None);
    fs.create(ROOT, "after");
    assert_eq!(fs.s.rollback(), Some(256));
    assert_eq!(fs.s.current_partition_digests(), d2);
    assert_eq!(fs.lookup(ROOT, "after"), err(Errno::ENOENT));
}

/// Transfers every partition of `src`'s checkpoint `seq` that differs into `dst`.
fn transfer(src: &FileService, dst: &mut FileService, seq: Seq) -> usize {
    let want = src.checkpoint_partition_digests(seq).unwrap();
    let have = dst.current_partition_digests();
    let mut fetched = 0;
    for (p, (w, h)) in want.iter().zip(&have).enumerate() {
        if w != h {
            let data = src.export_partition(seq, p as u32).unwrap();
            assert!(dst.import_partition(p as u32, &data, *w));
            fetched += 1;
        }
    }
    assert_eq!(dst.finish_import(seq), want);
    fetched
}

#[test]
fn state_transfer_between_instances() {
    let mut src = Fs::new();
    let mut dst = Fs::new();
    workload(&mut src, "a");
    src.s.checkpoint(10);
    // The source keeps going after the checkpoint: export still gives checkpoint 10.
    workload(&mut src, "b");
    // The fetcher has diverged state of its own.
    workload(&mut dst, "zzz");
    let n = transfer(&src.s, &mut dst.s, 10);
    assert!(n > 0 && n < 64, "only differing partitions fetched ({n})");
    src.s.rollback();
    assert_eq!(
        dst.s.current_partition_digests(),
        src.s.current_partition_digests()
    );
    assert_eq!(dst.dump(), src.dump());
    // After the transfer both execute on identically.
    dst.clock_us = src.clock_us;
    workload(&mut src, "c");
    workload(&mut dst, "c");
    assert_eq!(
        dst.s.current_partition_digests(),
        src.s.current_partition_digests()
    );
    // A second, incremental transfer fetches only what changed.
    src.s.checkpoint(20);
    let mut late = Fs::new();
    transfer(&src.s, &mut late.s, 20);
    workload(&mut src, "d");
    src.s.checkpoint(30);
    let n = transfer(&src.s, &mut late.s, 30);
    assert!(n < 30, "incremental transfer fetched {n} partitions");
    assert_eq!(
        late.s.current_partition_digests(),
        src.s.current_partition_digests()
    );
}

#[test]
fn tampered_partitions_are_refused() {
    let mut src = Fs::new();
    workload(&mut src, "a");
    let d = src.s.checkpoint(1);
    let mut dst = Fs::new();
    let before = dst.s.current_partition_digests();
    let p = (0..64).find(|&p| d[p] != before[p]).unwrap() as u32;
    let mut data = src.s.export_partition(1, p).unwrap();
    let last = data.len() - 1;
    data[last] ^= 1;
    assert!(!dst.s.import_partition(p, &data, d[p as usize]));
    assert!(!dst.s.import_partition(p, b"junk", d[p as usize]));
    assert!(!dst.s.import_partition(999, b"", Digest([0; 32])));
    assert_eq!(dst.s.current_partition_digests(), before);
}

/// A store whose writes fail on demand (a replica's full disk).
struct FullDisk {
    inner: MemStore,
    full: bool,
}

impl Store for FullDisk {
    fn partition_count(&self) -> u32 {
        self.inner.partition_count()
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key)
    }
    fn range(&self, s: &[u8], e: &[u8], l: usize) -> Result<Entries, StoreError> {
        self.inner.range(s, e, l)
    }
    fn apply(&mut self, w: WriteSet) -> Result<(), StoreError> {
        if self.full {
            Err(StoreError::Full)
        } else {
            self.inner.apply(w)
        }
    }
    fn current_digests(&self) -> Vec<Digest> {
        self.inner.current_digests()
    }
    fn checkpoint(&mut self, seq: Seq) -> Vec<Digest> {
        self.inner.checkpoint(seq)
    }
    fn checkpoint_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        self.inner.checkpoint_digests(seq)
    }
    fn latest_checkpoint(&self) -> Option<Seq> {
        self.inner.latest_checkpoint()
    }
    fn discard_checkpoints_below(&mut self, seq: Seq) {
        self.inner.discard_checkpoints_below(seq)
    }
    fn rollback(&mut self) -> Option<Seq> {
        self.inner.rollback()
    }
    fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>> {
        self.inner.export_partition(seq, part)
    }
    fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool {
        self.inner.import_partition(part, data, expected)
    }
    fn finish_import(&mut self, seq: Seq) -> Vec<Digest> {
        self.inner.finish_import(seq)
    }
}

#[test]
fn local_disk_full_answers_alone_and_loses_nothing() {
    let cfg = small_config();
    let store = FullDisk {
        inner: MemStore::new(cfg.partitions),
        full: false,
    };
    let mut sick = FileService::with_store(store, cfg).unwrap();
    let mut healthy = Fs::new();
    let exec = |s: &mut dyn Service, op: Op, t: u64| {
        let b = byzfs_fs::Request::new(Credentials::root(), op).encode();
        byzfs_fs::decode_result(&s.execute(1, &b, &t.to_le_bytes())).unwrap()
    };
    let create = Op::Create {
        dir: ROOT,
        name: "f".into(),
        mode: 0o644,
        exclusive: true,
    };
    let r1 = exec(&mut sick, create.clone(), T0);
    assert_eq!(r1, exec(&mut healthy.s, create, T0));
    let fh = match r1 {
        Ok(Reply::Made { entry: a, .. }) => a.fh,
        other => panic!("{other:?}"),
    };
    let before = sick.current_partition_digests();
    // The disk fills up: this replica answers ENOSPC, others succeed.
    sick.store_mut().full = true;
    let write = Op::Write {
        fh,
        offset: 0,
        data: b"data".to_vec(),
    };
    assert_eq!(exec(&mut sick, write.clone(), T0 + 1), Err(Errno::ENOSPC));
    assert!(exec(&mut healthy.s, write, T0 + 1).is_ok());
    assert_eq!(sick.local_failures(), 1);
    // Nothing half-applied, nothing lost: its state is still the one before the write.
    assert_eq!(sick.current_partition_digests(), before);
    let read = byzfs_fs::Request::new(Credentials::root(), Op::GetAttr { fh }).encode();
    assert!(byzfs_fs::decode_result(&sick.execute_read_only(1, &read))
        .unwrap()
        .is_ok());
    // The divergence shows in the digests, and state transfer repairs it.
    let d = healthy.s.checkpoint(5);
    assert_ne!(sick.current_partition_digests(), d);
    sick.store_mut().full = false;
    let healthy_s = healthy.s;
    let want = healthy_s.checkpoint_partition_digests(5).unwrap();
    for p in 0..want.len() as u32 {
        let data = healthy_s.export_partition(5, p).unwrap();
        assert!(sick.import_partition(p, &data, want[p as usize]));
    }
    assert_eq!(sick.finish_import(5), want);
    assert_eq!(
        sick.current_partition_digests(),
        healthy_s.current_partition_digests()
    );
}

// ---------------------------------------------------------------------------------------
// Random operation sequences.

#[derive(Clone, Debug)]
enum ROp {
    Create(u8, u8),
    Mkdir(u8, u8),
    Write(u8, u32, u16, u8),
    /// Writes of `(offset, length)` to one file as one `WriteGather`.
    Gather(u8, Vec<(u32, u16)>, u8),
    /// Writes of `(offset, length)`, then chmods and size changes, as one `WriteSetAttr`.
    WriteSetAttr(u8, Vec<(u32, u16)>, Vec<(u16, Option<u32>)>),
    Truncate(u8, u32),
    Allocate(u8, u32),
    SetXattr(u8, u8, u16),
    /// A write lock by owner `n` on 20 bytes from `10 n` (`false`: unlock them).
    Lock(u8, u8, bool),
    Remove(u8, u8),
    Rmdir(u8, u8),
    Rename(u8, u8, u8, u8),
    Link(u8, u8, u8),
    Symlink(u8, u8),
    Chmod(u8, u16),
    /// Several of the above as one `Op::Batch`: all or nothing.
    Batch(Vec<ROp>),
    Checkpoint,
    Rollback,
}

/// What a batch may hold (`byzfs_fs::proto::batch::may_batch`), drawn as in [`rop`].
fn batch_member() -> impl Strategy<Value = ROp> {
    let n = 0u8..4;
    let h = 0u8..16;
    prop_oneof![
        (h.clone(), n.clone()).prop_map(|(d, n)| ROp::Create(d, n)),
        (h.clone(), n.clone()).prop_map(|(d, n)| ROp::Mkdir(d, n)),
        (h.clone(), 0u32..70_000, 0u16..4_000, any::<u8>())
            .prop_map(|(f, o, l, b)| ROp::Write(f, o, l, b)),
        (h.clone(), n.clone()).prop_map(|(d, n)| ROp::Remove(d, n)),
        (h.clone(), n.clone(), h.clone(), n.clone())
            .prop_map(|(a, b, c, d)| ROp::Rename(a, b, c, d)),
        (h.clone(), 0u16..0o1000).prop_map(|(f, m)| ROp::Chmod(f, m)),
    ]
}

fn rop() -> impl Strategy<Value = ROp> {
    let n = 0u8..4;
    let h = 0u8..16;
    prop_oneof![
        3 => (h.clone(), n.clone()).prop_map(|(d, n)| ROp::Create(d, n)),
        2 => (h.clone(), n.clone()).prop_map(|(d, n)| ROp::Mkdir(d, n)),
        4 => (h.clone(), 0u32..70_000, 0u16..40_000, any::<u8>()).prop_map(|(f, o, l, b)| ROp::Write(f, o, l, b)),
        2 => (h.clone(), proptest::collection::vec((0u32..70_000, 0u16..9_000), 0..4), any::<u8>()).prop_map(|(f, e, b)| ROp::Gather(f, e, b)),
        1 => (h.clone(), proptest::collection::vec((0u32..70_000, 0u16..9_000), 0..3), proptest::collection::vec((0u16..0o1000, proptest::option::of(0u32..70_000)), 0..3)).prop_map(|(f, e, s)| ROp::WriteSetAttr(f, e, s)),
        2 => (h.clone(), 0u32..70_000).prop_map(|(f, s)| ROp::Truncate(f, s)),
        1 => (h.clone(), 0u32..70_000).prop_map(|(f, s)| ROp::Allocate(f, s)),
        1 => (h.clone(), n.clone(), 0u16..300).prop_map(|(f, n, l)| ROp::SetXattr(f, n, l)),
        1 => (h.clone(), n.clone(), any::<bool>()).prop_map(|(f, n, l)| ROp::Lock(f, n, l)),
        2 => (h.clone(), n.clone()).prop_map(|(d, n)| ROp::Remove(d, n)),
        1 => (h.clone(), n.clone()).prop_map(|(d, n)| ROp::Rmdir(d, n)),
        3 => (h.clone(), n.clone(), h.clone(), n.clone()).prop_map(|(a, b, c, d)| ROp::Rename(a, b, c, d)),
        1 => (h.clone(), h.clone(), n.clone()).prop_map(|(f, d, n)| ROp::Link(f, d, n)),
        1 => (h.clone(), n.clone()).prop_map(|(d, n)| ROp::Symlink(d, n)),
        1 => (h.clone(), 0u16..0o1000).prop_map(|(f, m)| ROp::Chmod(f, m)),
        1 => proptest::collection::vec(batch_member(), 1..5).prop_map(ROp::Batch),
        1 => Just(ROp::Checkpoint),
        1 => Just(ROp::Rollback),
    ]
}

fn name(n: u8) -> Vec<u8> {
    vec![b'a' + n]
}

/// Handles seen so far: directories, and every file (directories included). Ops that take a
/// directory mostly pick one (index < 12), sometimes any file (to reach the error paths).
#[derive(Clone, Debug)]
struct Known {
    dirs: Vec<FileHandle>,
    all: Vec<FileHandle>,
}

/// Translates a random op into a file operation, naming handles seen so far.
fn to_op(r: &ROp, k: &Known) -> Option<Op> {
    let h = |i: u8| k.all[usize::from(i) % k.all.len()];
    let d = |i: u8| {
        if i < 12 {
            k.dirs[usize::from(i) % k.dirs.len()]
        } else {
            h(i)
        }
    };
    Some(match *r {
        ROp::Create(a, n) => Op::Create {
            dir: d(a),
            name: name(n),
            mode: 0o644,
            exclusive: n % 2 == 0,
        },
        ROp::Mkdir(a, n) => Op::Mkdir {
            dir: d(a),
            name: name(n),
            mode: 0o755,
        },
        ROp::Write(f, o, l, b) => Op::Write {
            fh: h(f),
            offset: u64::from(o),
            data: vec![b; usize::from(l)],
        },
        ROp::Gather(f, ref extents, b) => Op::WriteGather {
            fh: h(f),
            extents: extents
                .iter()
                .map(|&(o, l)| byzfs_fs::Extent {
                    offset: u64::from(o),
                    data: vec![b; usize::from(l)],
                })
                .collect(),
        },
        ROp::WriteSetAttr(f, ref extents, ref sets) => Op::WriteSetAttr {
            fh: h(f),
            extents: extents
                .iter()
                .map(|&(o, l)| byzfs_fs::Extent {
                    offset: u64::from(o),
                    data: vec![f; usize::from(l)],
                })
                .collect(),
            sets: sets
                .iter()
                .map(|&(m, size)| SetAttr {
                    mode: Some(u32::from(m) | 0o700),
                    size: size.map(u64::from),
                    ..SetAttr::default()
                })
                .collect(),
        },
        ROp::SetXattr(f, n, l) => Op::SetXattr {
            fh: h(f),
            name: [b"user.".as_slice(), &name(n)].concat(),
            value: vec![n; usize::from(l)],
            how: byzfs_fs::proto::op::XattrSet::Any,
        },
        ROp::Lock(f, n, lock) => Op::SetLk(byzfs_fs::proto::lock::LockReq {
            fh: h(f),
            owner: u64::from(n),
            kind: lock.then_some(byzfs_fs::proto::lock::LockKind::Write),
            start: 10 * u64::from(n),
            end: 10 * u64::from(n) + 19,
            pid: 1,
        }),
        ROp::Allocate(f, s) => Op::Allocate {
            fh: h(f),
            end: u64::from(s),
        },
        ROp::Truncate(f, s) => Op::SetAttr {
            fh: h(f),
            set: SetAttr {
                size: Some(u64::from(s)),
                ..SetAttr::default()
            },
        },
        ROp::Remove(a, n) => Op::Remove {
            dir: d(a),
            name: name(n),
        },
        ROp::Rmdir(a, n) => Op::Rmdir {
            dir: d(a),
            name: name(n),
        },
        ROp::Rename(a, b, c, e) => Op::Rename {
            from_dir: d(a),
            from_name: name(b),
            to_dir: d(c),
            to_name: name(e),
        },
        ROp::Link(f, a, n) => Op::Link {
            fh: h(f),
            dir: d(a),
            name: name(n),
        },
        ROp::Symlink(a, n) => Op::Symlink {
            dir: d(a),
            name: name(n),
            target: b"x/y".to_vec(),
        },
        ROp::Chmod(f, m) => Op::SetAttr {
            fh: h(f),
            set: SetAttr {
                mode: Some(u32::from(m) | 0o700),
                ..SetAttr::default()
            },
        },
        ROp::Batch(ref members) => Op::Batch(members.iter().filter_map(|m| to_op(m, k)).collect()),
        ROp::Checkpoint | ROp::Rollback => return None,
    })
}

/// Bytes of `fh`'s extended attributes (names and values), as counted in its `used`.
fn xattr_bytes(fs: &mut Fs, fh: FileHandle) -> u64 {
    let Ok(Reply::Xattr(names)) = fs.run(Op::ListXattr { fh }) else {
        panic!("listxattr")
    };
    names
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| {
            let Ok(Reply::Xattr(v)) = fs.run(Op::GetXattr {
                fh,
                name: n.to_vec(),
            }) else {
                panic!("getxattr")
            };
            (n.len() + v.len()) as u64
        })
        .sum()
}

/// Invariants over the whole tree: directory link counts, statfs usage.
fn check_invariants(fs: &mut Fs) {
    // The root's own stored bytes: its extended attributes.
    let mut used = fs.getattr(ROOT).used;
    let mut stack = vec![ROOT];
    let mut seen = std::collections::BTreeSet::new();
    while let Some(d) = stack.pop() {
        let entries = fs.list(d, 3);
        let subdirs = entries
            .iter()
            .filter(|e| e.kind == FileType::Directory)
            .count();
        assert_eq!(
            fs.getattr(d).nlink as usize,
            2 + subdirs,
            "nlink of dir {d:?}"
        );
        for e in entries {
            let a = fs.getattr(e.fh);
            assert_eq!(a.kind, e.kind);
            if a.kind == FileType::Regular {
                // Stored bytes: data (at most the size) and extended attributes.
                assert!(a.used <= a.size + xattr_bytes(fs, e.fh));
            }
            if seen.insert(e.fh) {
                used += a.used;
            }
            if e.kind == FileType::Directory {
                assert_eq!(Fs::entry(fs.lookup(e.fh, "..")).fh, d);
                stack.push(e.fh);
            }
        }
    }
    let Ok(Reply::StatFs(st)) = fs.run(Op::StatFs) else {
        panic!()
    };
    assert_eq!(
        st.files - st.files_free,
        seen.len() as u64 + 1,
        "inode count"
    );
    let cap = fs.s.config().capacity_bytes;
    assert_eq!((cap - used) / 4096, st.blocks_free, "used bytes");
}

/// A checkpoint's sequence number, digests, tree dump and known handles.
type Saved = (Seq, Vec<Digest>, Vec<String>, Known);

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Two replicas agree; rollback restores the checkpoint exactly; a third instance built
    /// by state transfer equals the source; invariants hold throughout.
    #[test]
    fn random_ops_replicate_and_roll_back(ops in proptest::collection::vec(rop(), 1..60)) {
        let mut a = Fs::new();
        let mut b = Fs::new();
        let mut known = Known { dirs: vec![ROOT], all: vec![ROOT] };
        let mut cp: Option<Saved> = None;
        let mut seq: Seq = 0;
        for r in &ops {
            match r {
                ROp::Checkpoint => {
                    seq += 1;
                    let d = a.s.checkpoint(seq);
                    prop_assert_eq!(&b.s.checkpoint(seq), &d);
                    cp = Some((seq, d, a.dump(), known.clone()));
                }
                ROp::Rollback => {
                    let got = a.s.rollback();
                    prop_assert_eq!(got, b.s.rollback());
                    if let Some((s, d, dump, hs)) = &cp {
                        prop_assert_eq!(got, Some(*s));
                        prop_assert_eq!(&a.s.current_partition_digests(), d);
                        prop_assert_eq!(&a.dump(), dump);
                        known = hs.clone();
                    }
                }
                _ => {
                    let op = to_op(r, &known).unwrap();
                    let ra = a.run(op.clone());
                    let rb = b.run(op);
                    prop_assert_eq!(&ra, &rb);
                    if let Some(attr) = ra.as_ref().ok().and_then(Reply::entry) {
                        if !known.all.contains(&attr.fh) {
                            known.all.push(attr.fh);
                            if attr.kind == FileType::Directory {
                                known.dirs.push(attr.fh);
                            }
                        }
                    }
                }
            }
            prop_assert_eq!(a.s.current_partition_digests(), b.s.current_partition_digests());
        }
        check_invariants(&mut a);
        seq += 1;
        a.s.checkpoint(seq);
        let mut c = Fs::new();
        transfer(&a.s, &mut c.s, seq);
        prop_assert_eq!(c.s.current_partition_digests(), a.s.current_partition_digests());
        prop_assert_eq!(c.dump(), a.dump());
    }

    /// File data against a `Vec<u8>` model: writes, truncations and reads around block
    /// boundaries.
    #[test]
    fn file_data_matches_model(steps in proptest::collection::vec(
        (0u8..3, 0u64..(4 * BLOCK_SIZE), 0usize..(2 * BLOCK_SIZE as usize), any::<u8>()), 1..40)) {
        let mut fs = Fs::new();
        let f = fs.create(ROOT, "f").fh;
        let mut model: Vec<u8> = Vec::new();
        for (kind, off, len, byte) in steps {
            match kind {
                0 => {
                    fs.write(f, off, &vec![byte; len]).unwrap();
                    let end = off as usize + len;
                    if len > 0 {
                        if model.len() < end {
                            model.resize(end, 0);
                        }
                        model[off as usize..end].fill(byte);
                    }
                }
                1 => {
                    fs.truncate(f, off).unwrap();
                    model.resize(off as usize, 0);
                }
                _ => {
                    let got = fs.read(f, off, len as u32);
                    let lo = (off as usize).min(model.len());
                    let hi = (off as usize + len).min(model.len());
                    prop_assert_eq!(&got[..], &model[lo..hi]);
                }
            }
            let a = fs.getattr(f);
            prop_assert_eq!(a.size, model.len() as u64);
            prop_assert!(a.used <= a.size);
        }
        prop_assert_eq!(fs.read(f, 0, byzfs_fs::proto::op::MAX_IO), model);
    }
}

// ---------------------------------------------------------------------------------------
// Reads during tentative execution (the per-object read-only floor).

/// Every read-only operation on every handle in `known` (names `a`..`d` for lookups and
/// extended attributes; two read windows; readdir from the start and after one cookie),
/// as user 1000 and as root.
fn reads(known: &Known) -> Vec<byzfs_fs::Request> {
    let mut ops = vec![Op::StatFs];
    for &fh in &known.all {
        ops.push(Op::GetAttr { fh });
        ops.push(Op::ReadLink { fh });
        ops.push(Op::ListXattr { fh });
        for mask in [
            byzfs_fs::proto::op::R_OK,
            byzfs_fs::proto::op::W_OK | byzfs_fs::proto::op::X_OK,
        ] {
            ops.push(Op::Access { fh, mask });
        }
        for (offset, count) in [(0, 70_000), (60_000, 20_000)] {
            ops.push(Op::Read { fh, offset, count });
        }
        for cookie in [0, 1] {
            ops.push(Op::ReadDir {
                dir: fh,
                cookie,
                max_entries: 3,
            });
        }
        for n in 0..4 {
            ops.push(Op::Lookup {
                dir: fh,
                name: name(n),
            });
            ops.push(Op::GetXattr {
                fh,
                name: [b"user.".as_slice(), &name(n)].concat(),
            });
        }
        ops.push(Op::Lookup {
            dir: fh,
            name: b"..".to_vec(),
        });
    }
    let user = Credentials {
        uid: 1000,
        gid: 1000,
        groups: Vec::new(),
    };
    ops.into_iter()
        .flat_map(|op| {
            [
                byzfs_fs::Request::new(Credentials::root(), op.clone()),
                byzfs_fs::Request::new(user.clone(), op),
            ]
        })
        .collect()
}

/// Runs `ops` on `fs` as one batch, adding the handles they return to `known`; returns how
/// many operations ran.
fn run_batch(fs: &mut Fs, ops: &[ROp], known: &mut Known) -> usize {
    let mut ran = 0;
    for r in ops {
        let Some(op) = to_op(r, known) else { continue };
        ran += 1;
        if let Some(attr) = fs.run(op).ok().as_ref().and_then(Reply::entry) {
            if !known.all.contains(&attr.fh) {
                known.all.push(attr.fh);
                if attr.kind == FileType::Directory {
                    known.dirs.push(attr.fh);
                }
            }
        }
    }
    ran
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A replica holding an uncommitted batch answers a read at once only with the result a
    /// replica without that batch gives (`execute_request_read_only_committed`), including
    /// after the batch was rolled back and another ran in its place.
    #[test]
    fn reads_during_tentative_execution_equal_reads_on_the_committed_state(
        committed_ops in proptest::collection::vec(rop(), 0..40),
        undone in proptest::collection::vec(rop(), 0..4),
        tentative in proptest::collection::vec(rop(), 1..5),
    ) {
        // `a` executes batch 1 (committed), checkpoints it, and runs batch 2 tentatively
        // (after an `undone` batch 2 rolled back, if any); `b` stops after batch 1.
        let mut a = Fs::new();
        let mut b = Fs::new();
        let mut known = Known { dirs: vec![ROOT], all: vec![ROOT] };
        a.s.begin_batch(1, 0);
        let mut kb = known.clone();
        run_batch(&mut a, &committed_ops, &mut known);
        run_batch(&mut b, &committed_ops, &mut kb);
        a.s.checkpoint(1);
        let mut all = known.clone();
        if !undone.is_empty() {
            a.s.begin_batch(2, 1);
            let _ = run_batch(&mut a, &undone, &mut all);
            prop_assert_eq!(a.s.rollback(), Some(1));
        }
        a.s.begin_batch(2, 1);
        let mut after = known.clone();
        let ran = run_batch(&mut a, &tentative, &mut after);
        for fh in &after.all {
            if !all.all.contains(fh) {
                all.all.push(*fh);
            }
        }
        let mut waited = 0;
        for req in reads(&all) {
            match a.s.execute_request_read_only_committed(Some(req.clone()), 1) {
                Some(got) => {
                    let want = b.s.execute_request_read_only(Some(req.clone()));
                    prop_assert_eq!(got, want, "{:?}", req);
                }
                None => waited += 1,
            }
        }
        // Batch 2 writes the superblock at least (the clock): statfs always waits.
        prop_assert!(ran == 0 || waited >= 2);
        // Once batch 2 commits, nothing waits.
        a.s.begin_batch(3, 2);
        prop_assert!(reads(&all)
            .into_iter()
            .all(|r| a.s.execute_request_read_only_committed(Some(r), 2).is_some()));
    }
}

#[test]
fn a_read_waits_only_for_what_the_uncommitted_batch_wrote() {
    let mut fs = Fs::new();
    fs.s.begin_batch(1, 0);
    let f = fs.create(ROOT, "f").fh;
    let g = fs.create(ROOT, "g").fh;
    fs.s.begin_batch(2, 1);
    fs.write(f, 0, b"new").unwrap();
    let run = |fs: &Fs, op: Op| {
        fs.s.execute_request_read_only_committed(
            Some(byzfs_fs::Request::new(Credentials::root(), op)),
            1,
        )
    };
    assert!(run(&fs, Op::GetAttr { fh: f }).is_none());
    assert!(run(
        &fs,
        Op::Read {
            fh: f,
            offset: 0,
            count: 10
        }
    )
    .is_none());
    assert!(run(&fs, Op::StatFs).is_none());
    assert!(run(&fs, Op::GetAttr { fh: g }).is_some());
    assert!(run(
        &fs,
        Op::Lookup {
            dir: ROOT,
            name: b"g".to_vec()
        }
    )
    .is_some());
    // A name created in the uncommitted batch: the directory's entries changed.
    fs.s.begin_batch(3, 1);
    fs.create(ROOT, "h");
    assert!(run(
        &fs,
        Op::Lookup {
            dir: ROOT,
            name: b"h".to_vec()
        }
    )
    .is_none());
    assert!(run(
        &fs,
        Op::ReadDir {
            dir: ROOT,
            cookie: 0,
            max_entries: 10
        }
    )
    .is_none());
}
