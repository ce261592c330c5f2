//! The redb backend behaves exactly like the in-memory one (same digests, same exports, same
//! reads) and survives reopening.
#![cfg(feature = "redb")]

use byzfs_bft::{Seq, Service};
use byzfs_fs::data::BLOCK_SIZE;
use byzfs_fs::store::{MemStore, RedbStore, Store, StoreError, WriteSet, SPLIT_BYTES};
use byzfs_fs::{
    decode_result, Credentials, FileHandle, FileService, FsConfig, FsResult, Op, Reply, Request,
};
use proptest::prelude::*;
use redb::ReadableTable as _;
use std::collections::BTreeMap;

const PARTS: u32 = 8;

fn key(p: u8, s: u8) -> Vec<u8> {
    vec![0, 0, 0, 0, 0, 0, 0, p, s]
}

/// A value drawn from `b`: mostly short, sometimes around the length at which the store
/// splits values (`SPLIT_BYTES`), or one file block.
fn value(b: u8) -> Vec<u8> {
    let len = match b % 16 {
        12 => SPLIT_BYTES - 1,
        13 => SPLIT_BYTES,
        14 => SPLIT_BYTES + 1,
        15 => 16 * 1024,
        n => usize::from(n % 4),
    };
    vec![b; len]
}

#[derive(Clone, Debug)]
enum Step {
    Write(Vec<(u8, u8, Option<u8>)>),
    Checkpoint,
    Rollback,
    Discard(u8),
    Transfer,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => proptest::collection::vec((0u8..8, 0u8..6, proptest::option::of(any::<u8>())), 1..5)
            .prop_map(Step::Write),
        1 => Just(Step::Checkpoint),
        1 => Just(Step::Rollback),
        1 => (0u8..4).prop_map(Step::Discard),
        1 => Just(Step::Transfer),
    ]
}

fn same(m: &MemStore, r: &RedbStore) -> Result<(), TestCaseError> {
    prop_assert_eq!(m.current_digests(), r.current_digests());
    prop_assert_eq!(m.latest_checkpoint(), r.latest_checkpoint());
    for p in 0..PARTS as u8 {
        let (a, b) = (key(p, 0), key(p, 255));
        prop_assert_eq!(m.range(&a, &b, 100).unwrap(), r.range(&a, &b, 100).unwrap());
        prop_assert_eq!(m.range(&a, &b, 2).unwrap(), r.range(&a, &b, 2).unwrap());
        prop_assert_eq!(m.get(&key(p, 1)).unwrap(), r.get(&key(p, 1)).unwrap());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn redb_matches_memory(
        steps in proptest::collection::vec(step(), 1..40),
        // Commit every write at once, every few writes, or only at checkpoints.
        write_back in prop_oneof![Just(0usize), Just(40), Just(1 << 20)],
        // A scratch store (never synced, as a replica's) behaves the same.
        scratch in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut m = MemStore::new(PARTS);
        let path = dir.path().join("s.redb");
        let mut r = if scratch {
            RedbStore::create_scratch(&path, PARTS, 1 << 20).unwrap()
        } else {
            RedbStore::open(&path, PARTS).unwrap()
        };
        r.set_write_back_bytes(write_back);
        let mut seqs: Vec<Seq> = Vec::new();
        let mut next: Seq = 1;
        for st in steps {
            match st {
                Step::Write(ws) => {
                    let set: WriteSet = ws
                        .into_iter()
                        .map(|(p, k, v)| (key(p, k), v.map(value)))
                        .collect();
                    m.apply(set.clone()).unwrap();
                    r.apply(set).unwrap();
                }
                Step::Checkpoint => {
                    prop_assert_eq!(m.checkpoint(next), r.checkpoint(next));
                    seqs.push(next);
                    next += 1;
                }
                Step::Rollback => prop_assert_eq!(m.rollback(), r.rollback()),
                Step::Discard(back) => {
                    let below = next.saturating_sub(Seq::from(back));
                    m.discard_checkpoints_below(below);
                    r.discard_checkpoints_below(below);
                    seqs.retain(|&s| s >= below);
                }
                Step::Transfer => {
                    // Every held checkpoint exports identically; importing the latest into a
                    // fresh redb store reproduces it.
                    for &s in &seqs {
                        prop_assert_eq!(m.checkpoint_digests(s), r.checkpoint_digests(s));
                        for p in 0..PARTS {
                            prop_assert_eq!(m.export_partition(s, p), r.export_partition(s, p));
                        }
                    }
                    if let Some(&s) = seqs.last() {
                        let d2 = tempfile::tempdir().unwrap();
                        let mut fresh = RedbStore::open(d2.path().join("f.redb"), PARTS).unwrap();
                        let want = r.checkpoint_digests(s).unwrap();
                        for p in 0..PARTS {
                            let data = r.export_partition(s, p).unwrap();
                            prop_assert!(fresh.import_partition(p, &data, want[p as usize]));
                        }
                        prop_assert_eq!(fresh.finish_import(s), want);
                    }
                }
            }
            same(&m, &r)?;
        }
        // Reopening gives the same digests and checkpoints.
        let digests = r.current_digests();
        let cps: BTreeMap<Seq, _> = seqs.iter().map(|&s| (s, r.checkpoint_digests(s))).collect();
        drop(r);
        let r = RedbStore::open(dir.path().join("s.redb"), PARTS).unwrap();
        prop_assert_eq!(r.current_digests(), digests);
        for (s, d) in cps {
            prop_assert_eq!(r.checkpoint_digests(s), d);
        }
    }
}

/// What a replica's owner does to a persistent store (see `RedbStore::open_persistent`).
#[derive(Clone, Debug)]
enum PStep {
    Write(Vec<(u8, u8, Option<u8>)>),
    Checkpoint,
    Rollback,
    /// The latest checkpoint becomes stable: discard below it, `persist` it; the owner
    /// records it at the start of the next step (unless that step is a crash).
    Stable,
    /// A state transfer of the reference's state after these writes.
    Transfer(Vec<(u8, u8, Option<u8>)>),
    /// The process dies here: the file as it is now is kept for reopening.
    Crash,
}

fn pstep() -> impl Strategy<Value = PStep> {
    let writes =
        || proptest::collection::vec((0u8..8, 0u8..6, proptest::option::of(any::<u8>())), 1..5);
    prop_oneof![
        6 => writes().prop_map(PStep::Write),
        2 => Just(PStep::Checkpoint),
        1 => Just(PStep::Rollback),
        2 => Just(PStep::Stable),
        1 => writes().prop_map(PStep::Transfer),
        1 => Just(PStep::Crash),
    ]
}

fn write_set(ws: Vec<(u8, u8, Option<u8>)>) -> WriteSet {
    ws.into_iter()
        .map(|(p, k, v)| (key(p, k), v.map(value)))
        .collect()
}

/// Every live entry of a store, partition by partition.
fn contents(s: &dyn Store) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    (0..PARTS as u8)
        .map(|p| s.range(&key(p, 0), &key(p, 255), 1000).unwrap())
        .collect()
}

type Snapshot = (Vec<byzfs_bft::Digest>, Vec<Vec<(Vec<u8>, Vec<u8>)>>);

/// Reopens the persistent store at `path` at checkpoint `seq`, which must equal `want`.
fn reopened_matches(
    path: &std::path::Path,
    seq: Seq,
    want: &Snapshot,
) -> Result<(), TestCaseError> {
    let mut r = RedbStore::open_persistent(path, PARTS, 1 << 20, false).unwrap();
    let digests = r.reopen_at(seq);
    prop_assert_eq!(digests.as_ref(), Ok(&want.0));
    prop_assert_eq!(&r.current_digests(), &want.0);
    prop_assert_eq!(&contents(&r), &want.1);
    prop_assert_eq!(r.latest_checkpoint(), Some(seq));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    /// A persistent store, crashed anywhere (its file copied as it is), reopens at the
    /// checkpoint its owner had recorded, with exactly that checkpoint's state, through
    /// rollbacks, discards and state transfers.
    #[test]
    fn a_persistent_store_reopens_at_the_recorded_checkpoint(
        steps in proptest::collection::vec(pstep(), 1..40),
        write_back in prop_oneof![Just(0usize), Just(40), Just(1 << 20)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.redb");
        let mut m = MemStore::new(PARTS);
        let mut r = RedbStore::open_persistent(&path, PARTS, 1 << 20, true).unwrap();
        prop_assert!(r.persists());
        r.set_write_back_bytes(write_back);
        let mut snaps: BTreeMap<Seq, Snapshot> = BTreeMap::new();
        prop_assert_eq!(m.checkpoint(0), r.checkpoint(0));
        snaps.insert(0, (m.current_digests(), contents(&m)));
        // What the owner recorded: nothing at first (it would then start a fresh store).
        let (mut recorded, mut pending): (Option<Seq>, Option<Seq>) = (None, None);
        let mut crashes: Vec<(std::path::PathBuf, Option<Seq>)> = Vec::new();
        let mut next: Seq = 1;
        for st in steps {
            if !matches!(st, PStep::Crash) {
                recorded = pending.take().or(recorded);
            }
            match st {
                PStep::Write(ws) => {
                    let set = write_set(ws);
                    m.apply(set.clone()).unwrap();
                    r.apply(set).unwrap();
                }
                PStep::Checkpoint => {
                    prop_assert_eq!(m.checkpoint(next), r.checkpoint(next));
                    snaps.insert(next, (m.current_digests(), contents(&m)));
                    next += 1;
                }
                PStep::Rollback => prop_assert_eq!(m.rollback(), r.rollback()),
                PStep::Stable => {
                    if let Some(s) = m.latest_checkpoint().filter(|&s| Some(s) > recorded) {
                        m.discard_checkpoints_below(s);
                        r.discard_checkpoints_below(s);
                        r.persist(s).unwrap();
                        pending = Some(s);
                    }
                }
                PStep::Transfer(ws) => {
                    m.apply(write_set(ws)).unwrap();
                    let want = m.checkpoint(next);
                    for p in 0..PARTS {
                        let data = m.export_partition(next, p).unwrap();
                        prop_assert!(r.import_partition(p, &data, want[p as usize]));
                    }
                    prop_assert_eq!(m.finish_import(next), r.finish_import(next));
                    snaps.insert(next, (m.current_digests(), contents(&m)));
                    next += 1;
                }
                PStep::Crash => {
                    let copy = dir.path().join(format!("crash-{}.redb", crashes.len()));
                    std::fs::copy(&path, &copy).unwrap();
                    crashes.push((copy, recorded));
                }
            }
            same(&m, &r)?;
        }
        drop(r);
        crashes.push((path, pending.or(recorded)));
        for (file, seq) in &crashes {
            if let Some(seq) = seq {
                reopened_matches(file, *seq, &snaps[seq])?;
            }
        }
    }
}

#[test]
fn a_persistent_store_refuses_a_checkpoint_it_does_not_hold() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.redb");
    let mut r = RedbStore::open_persistent(&path, PARTS, 1 << 20, true).unwrap();
    r.checkpoint(0);
    r.apply(WriteSet::from([(key(1, 1), Some(vec![7; 10]))]))
        .unwrap();
    r.checkpoint(5);
    r.persist(5).unwrap();
    drop(r);
    let mut r = RedbStore::open_persistent(&path, PARTS, 1 << 20, false).unwrap();
    match r.reopen_at(3) {
        Err(StoreError::Io(m)) => assert!(m.contains("no checkpoint 3"), "{m}"),
        other => panic!("reopened at a checkpoint it does not hold: {other:?}"),
    }
    // `fresh` replaces the file with an empty store.
    let empty = MemStore::new(PARTS).current_digests();
    drop(r);
    let r = RedbStore::open_persistent(&path, PARTS, 1 << 20, true).unwrap();
    assert_eq!(r.current_digests(), empty);
    assert_eq!(r.latest_checkpoint(), None);
}

#[test]
fn a_scratch_store_starts_empty_in_place_of_an_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let empty = MemStore::new(PARTS).current_digests();
    let mut r = RedbStore::create_scratch(&path, PARTS, 1 << 20).unwrap();
    r.apply(WriteSet::from([(key(1, 1), Some(vec![7; 100]))]))
        .unwrap();
    r.checkpoint(1);
    assert_ne!(r.current_digests(), empty);
    drop(r);
    let r = RedbStore::create_scratch(&path, PARTS, 1 << 20).unwrap();
    assert_eq!(r.current_digests(), empty);
    assert_eq!(r.latest_checkpoint(), None);
}

#[test]
fn reopen_requires_same_partition_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    drop(RedbStore::open(&path, 16).unwrap());
    assert!(matches!(RedbStore::open(&path, 8), Err(StoreError::Io(_))));
    assert!(RedbStore::open(&path, 16).is_ok());
}

#[test]
fn reopen_refuses_another_on_disk_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    drop(RedbStore::open(&path, 16).unwrap());
    {
        let db = redb::Database::create(&path).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
            tx.open_table(meta).unwrap().insert("format", 9).unwrap();
        }
        tx.commit().unwrap();
    }
    match RedbStore::open(&path, 16) {
        Err(StoreError::Io(m)) => assert!(m.contains("on-disk format 9"), "{m}"),
        other => panic!("opened another format: {:?}", other.err()),
    }
}

#[test]
fn format_1_and_2_stores_open_and_are_marked_format_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
    {
        let mut r = RedbStore::open(&path, 16).unwrap();
        r.apply(WriteSet::from([(key(1, 1), Some(vec![7; 100]))]))
            .unwrap();
    }
    let set_or_get = |set: Option<u64>| {
        let db = redb::Database::create(&path).unwrap();
        let tx = db.begin_write().unwrap();
        let got = {
            let mut t = tx.open_table(meta).unwrap();
            if let Some(f) = set {
                t.insert("format", f).unwrap();
            }
            let format = t.get("format").unwrap().unwrap().value();
            format
        };
        tx.commit().unwrap();
        got
    };
    for old in [1, 2] {
        set_or_get(Some(old));
        let r = RedbStore::open(&path, 16).unwrap();
        assert_eq!(r.get(&key(1, 1)).unwrap(), Some(vec![7; 100]));
        drop(r);
        assert_eq!(set_or_get(None), 3);
    }
}

/// Runs `op` as root on any file service.
fn run<S: Store>(fs: &mut FileService<S>, t: &mut u64, op: Op) -> FsResult {
    let b = Request::new(Credentials::root(), op).encode();
    let out = if fs.is_read_only(&b) {
        fs.execute_read_only(1, &b)
    } else {
        *t += 1_000_000;
        fs.execute(1, &b, &t.to_le_bytes())
    };
    decode_result(&out).unwrap()
}

fn entry(r: FsResult) -> FileHandle {
    match r.as_ref().ok().and_then(Reply::entry) {
        Some(a) => a.fh,
        None => panic!("{r:?}"),
    }
}

/// The same operations on a memory-backed and a redb-backed file service give the same
/// results and digests; the redb one survives a restart.
#[test]
fn file_service_on_redb_matches_memory_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs.redb");
    let cfg = FsConfig {
        partitions: 256,
        ..FsConfig::trusted()
    };
    let mut mem = FileService::in_memory(cfg.clone());
    let store = RedbStore::open(&path, cfg.partitions).unwrap();
    let mut disk = FileService::with_store(store, cfg.clone()).unwrap();
    let (mut t1, mut t2) = (1_700_000_000_000_000u64, 1_700_000_000_000_000u64);
    let root = FileHandle::ROOT;
    let ops = |f: FileHandle| {
        vec![
            Op::Write {
                fh: f,
                offset: 0,
                data: vec![3; 5 * BLOCK_SIZE as usize],
            },
            Op::Write {
                fh: f,
                offset: 7 << 30,
                data: b"far".to_vec(),
            },
            Op::Mkdir {
                dir: root,
                name: b"d".to_vec(),
                mode: 0o755,
            },
            Op::Rename {
                from_dir: root,
                from_name: b"f".to_vec(),
                to_dir: root,
                to_name: b"g".to_vec(),
            },
            Op::Read {
                fh: f,
                offset: (7 << 30) - 1,
                count: 10,
            },
            Op::ReadDir {
                dir: root,
                cookie: 0,
                max_entries: 10,
            },
        ]
    };
    let create = Op::Create {
        dir: root,
        name: b"f".to_vec(),
        mode: 0o644,
        exclusive: true,
    };
    let f = entry(run(&mut mem, &mut t1, create.clone()));
    assert_eq!(entry(run(&mut disk, &mut t2, create)), f);
    for op in ops(f) {
        assert_eq!(
            run(&mut mem, &mut t1, op.clone()),
            run(&mut disk, &mut t2, op)
        );
    }
    assert_eq!(
        mem.current_partition_digests(),
        disk.current_partition_digests()
    );
    let d = disk.checkpoint(128);
    assert_eq!(mem.checkpoint(128), d);
    run(
        &mut disk,
        &mut t2,
        Op::SetAttr {
            fh: f,
            set: byzfs_fs::SetAttr {
                size: Some(1),
                ..Default::default()
            },
        },
    )
    .unwrap();
    drop(disk);
    // Restart: the state and the held checkpoint are still there; rolling back works.
    let store = RedbStore::open(&path, cfg.partitions).unwrap();
    let mut disk = FileService::with_store(store, cfg).unwrap();
    assert_eq!(disk.checkpoint_partition_digests(128), Some(d.clone()));
    assert_eq!(disk.rollback(), Some(128));
    assert_eq!(disk.current_partition_digests(), d);
    let read = Op::Read {
        fh: f,
        offset: (7 << 30) - 1,
        count: 10,
    };
    assert_eq!(
        run(&mut disk, &mut t2, read),
        Ok(Reply::Read {
            data: b"\0far".to_vec(),
            eof: true
        })
    );
}

/// A file of several GB, written in 1 MiB pieces to the redb store: memory stays flat
/// (the data is on disk). Slow on a shared 2-core machine: run with `--ignored`
/// (`BYZFS_BIG_GIB=3`, the default: 51 s and 86 MB maximum RSS in the dev profile on the
/// development VM, with a checkpoint every 128 MiB).
#[test]
#[ignore]
fn several_gb_file_on_redb() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = FsConfig::trusted();
    let store = RedbStore::open(dir.path().join("big.redb"), cfg.partitions).unwrap();
    let mut fs = FileService::with_store(store, cfg).unwrap();
    let mut t = 1_700_000_000_000_000u64;
    let f = entry(run(
        &mut fs,
        &mut t,
        Op::Create {
            dir: FileHandle::ROOT,
            name: b"big".to_vec(),
            mode: 0o644,
            exclusive: true,
        },
    ));
    let chunk = vec![0x5a; 1 << 20];
    let gib: u64 = std::env::var("BYZFS_BIG_GIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    for i in 0..gib * 1024 {
        run(
            &mut fs,
            &mut t,
            Op::Write {
                fh: f,
                offset: i << 20,
                data: chunk.clone(),
            },
        )
        .unwrap();
        if i % 128 == 127 {
            fs.checkpoint(i + 1);
            fs.discard_checkpoints_below(i + 1);
        }
    }
    let Ok(Reply::Read { data, .. }) = run(
        &mut fs,
        &mut t,
        Op::Read {
            fh: f,
            offset: (gib << 30) - 3,
            count: 10,
        },
    ) else {
        panic!()
    };
    assert_eq!(data, vec![0x5a; 3]);
}

/// A directory with a small tmpfs mounted on it, lazily unmounted when dropped.
struct SmallFs(tempfile::TempDir);

impl SmallFs {
    /// `None` where mounting is not allowed (not root).
    fn new(size: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallFs(dir))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0.path())
            .status();
    }
}

#[test]
fn a_full_disk_is_an_error_or_a_recorded_failure_never_a_panic() {
    let Some(fs) = SmallFs::new("4m") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let mut s = RedbStore::open_with_cache(fs.0.path().join("fs.redb"), PARTS, 1 << 20).unwrap();
    // Staged writes reach the disk every 256 KiB (the default, 16 MiB, would not fill 4 MiB
    // in this loop): the apply that commits them reports the full disk.
    s.set_write_back_bytes(256 << 10);
    s.checkpoint(1);
    let value = vec![7u8; 64 * 1024];
    let mut full = false;
    for i in 0..200u32 {
        let mut k = key((i % 8) as u8, 0);
        k.extend_from_slice(&i.to_be_bytes());
        match s.apply(WriteSet::from([(k, Some(value.clone()))])) {
            Ok(()) => {}
            Err(StoreError::Full) => {
                full = true;
                break;
            }
            Err(e) => panic!("a full disk should say so: {e}"),
        }
    }
    assert!(full, "4 MiB filled up");
    // Reported to the caller and recorded: redb refuses later writes until reopened, and
    // the driver must stop the replica before the local answer leaves.
    let msg = s.failure().expect("the failure is recorded");
    assert!(msg.contains("disk space"), "{msg}");
    // A checkpoint, a rollback and an export have no error channel: no panic, and the
    // first failure stays.
    let _ = s.checkpoint(2);
    let _ = s.rollback();
    let _ = s.export_partition(1, 0);
    assert_eq!(s.failure(), Some(msg));
}

#[test]
fn a_persistent_store_gives_space_back_after_a_large_delete() {
    use byzfs_fs::store::{Compaction, COMPACT_MIN_BYTES};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let mut s = RedbStore::open_persistent(&path, PARTS, 8 << 20, true).unwrap();
    // Every stable checkpoint is this store's turn.
    s.set_compaction(Compaction {
        interval: 1,
        replicas: 1,
        index: 0,
    });
    let len = || std::fs::metadata(&path).unwrap().len();
    let blocks = |f: &dyn Fn(u8, u8) -> Option<Vec<u8>>| {
        let mut ws = WriteSet::new();
        for i in 0..96u8 {
            for j in 0..64u8 {
                ws.insert(key(i, j), f(i, j));
            }
        }
        ws
    };
    // 96 MiB written, a checkpoint made stable.
    s.apply(blocks(&|i, _| Some(vec![i; BLOCK_SIZE as usize])))
        .unwrap();
    let mut seq: Seq = 1;
    let mut stable = |s: &mut RedbStore| {
        s.checkpoint(seq);
        s.discard_checkpoints_below(seq);
        s.persist(seq).unwrap();
        seq += 1;
    };
    stable(&mut s);
    let full = len();
    assert!(full >= 96 << 20, "{full}");
    // All of it deleted; two more stable checkpoints drop the undo records that kept it,
    // and the turn after the one that saw it shrink compacts.
    s.apply(blocks(&|_, _| None)).unwrap();
    let mut sizes = Vec::new();
    for _ in 0..4 {
        stable(&mut s);
        sizes.push(len() >> 20);
    }
    // Not while it shrank: only once it settled.
    assert!(sizes[..3].iter().all(|&m| m >= 96), "{sizes:?} MiB");
    let after = len();
    assert!(
        after <= COMPACT_MIN_BYTES,
        "{full} bytes before, {after} after the delete"
    );
    // What is left reads back, and the store reopens at its last checkpoint.
    s.apply(WriteSet::from([(key(1, 1), Some(vec![5; 10]))]))
        .unwrap();
    stable(&mut s);
    drop(s);
    let mut s = RedbStore::open_persistent(&path, PARTS, 8 << 20, false).unwrap();
    s.reopen_at(seq - 1).unwrap();
    assert_eq!(s.get(&key(1, 1)).unwrap(), Some(vec![5; 10]));
    assert_eq!(s.get(&key(2, 2)).unwrap(), None);
}
