//! The log store behaves exactly like the in-memory one (same digests, exports and reads),
//! reopens as it was after a process crash, and after a power cut returns to the checkpoint
//! its owner recorded.

use byzfs_bft::service::DiskWork;
use byzfs_bft::Seq;
use byzfs_fs::store::{LogStore, MemMedium, MemStore, Store, StoreError, WriteSet};
use proptest::prelude::*;
use std::collections::BTreeMap;

const PARTS: u32 = 8;

fn key(p: u8, s: u8) -> Vec<u8> {
    vec![0, 0, 0, 0, 0, 0, 0, p, s]
}

/// A value drawn from `b`: mostly short, sometimes one file block.
fn value(b: u8) -> Vec<u8> {
    let len = match b % 16 {
        15 => 16 * 1024,
        14 => 0,
        n => usize::from(n % 4) + 1,
    };
    vec![b; len]
}

fn write_set(ws: Vec<(u8, u8, Option<u8>)>) -> WriteSet {
    ws.into_iter()
        .map(|(p, k, v)| (key(p, k), v.map(value)))
        .collect()
}

/// Writes of a few keys; values often from a small set, so a key often goes back to bytes
/// it had (`a_key_staged_back_to_its_bytes_replays_at_its_new_place`).
fn writes() -> impl Strategy<Value = Vec<(u8, u8, Option<u8>)>> {
    let v = prop_oneof![2 => 0u8..3, 1 => any::<u8>()];
    proptest::collection::vec((0u8..8, 0u8..6, proptest::option::of(v)), 1..5)
}

/// Every live entry of a store, partition by partition.
fn contents(s: &dyn Store) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    (0..PARTS as u8)
        .map(|p| s.range(&key(p, 0), &key(p, 255), 1000).unwrap())
        .collect()
}

fn same(m: &MemStore, r: &dyn Store) -> Result<(), TestCaseError> {
    prop_assert_eq!(m.current_digests(), r.current_digests());
    prop_assert_eq!(m.latest_checkpoint(), r.latest_checkpoint());
    prop_assert_eq!(contents(m), contents(r));
    for p in 0..PARTS as u8 {
        let (a, b) = (key(p, 0), key(p, 255));
        prop_assert_eq!(m.range(&a, &b, 2).unwrap(), r.range(&a, &b, 2).unwrap());
        prop_assert_eq!(m.get(&key(p, 1)).unwrap(), r.get(&key(p, 1)).unwrap());
    }
    Ok(())
}

#[derive(Clone, Debug)]
enum Step {
    Write(Vec<(u8, u8, Option<u8>)>),
    Checkpoint,
    Rollback,
    Discard(u8),
    Transfer,
    /// Close the store and open it again from its segments.
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => writes().prop_map(Step::Write),
        1 => Just(Step::Checkpoint),
        1 => Just(Step::Rollback),
        1 => (0u8..4).prop_map(Step::Discard),
        1 => Just(Step::Transfer),
        1 => Just(Step::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]
    #[test]
    fn the_log_store_matches_memory(
        steps in proptest::collection::vec(step(), 1..50),
        on_files in any::<bool>(),
        // Every write a frame at once, a few staged, or all staged until a checkpoint.
        write_back in prop_oneof![Just(0usize), Just(40), Just(1 << 20)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let disk = MemMedium::new();
        let open = |fresh: bool| -> Box<dyn Store> {
            if on_files {
                let mut s = if fresh {
                    LogStore::create_scratch(dir.path(), PARTS).unwrap()
                } else {
                    let m = byzfs_fs::store::DirMedium::open(dir.path(), true).unwrap();
                    LogStore::open_on(m, PARTS).unwrap()
                };
                s.set_write_back_bytes(write_back);
                Box::new(s)
            } else {
                let mut s = LogStore::open_on(disk.handle(), PARTS).unwrap();
                s.set_write_back_bytes(write_back);
                Box::new(s)
            }
        };
        let mut m = MemStore::new(PARTS);
        let mut r = open(true);
        let mut seqs: Vec<Seq> = Vec::new();
        let mut next: Seq = 1;
        for st in steps {
            match st {
                Step::Write(ws) => {
                    let set = write_set(ws);
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
                    // fresh store reproduces it.
                    for &s in &seqs {
                        prop_assert_eq!(m.checkpoint_digests(s), r.checkpoint_digests(s));
                        for p in 0..PARTS {
                            prop_assert_eq!(m.export_partition(s, p), r.export_partition(s, p));
                        }
                    }
                    if let Some(&s) = seqs.last() {
                        let mut fresh = LogStore::open_on(MemMedium::new(), PARTS).unwrap();
                        let want = r.checkpoint_digests(s).unwrap();
                        for p in 0..PARTS {
                            let data = r.export_partition(s, p).unwrap();
                            prop_assert!(fresh.import_partition(p, &data, want[p as usize]));
                        }
                        prop_assert_eq!(fresh.finish_import(s), want);
                    }
                }
                Step::Reopen => {
                    let held: BTreeMap<Seq, _> =
                        seqs.iter().map(|&s| (s, r.checkpoint_digests(s))).collect();
                    drop(r);
                    r = open(false);
                    for (s, d) in held {
                        prop_assert_eq!(r.checkpoint_digests(s), d);
                    }
                }
            }
            same(&m, r.as_ref())?;
        }
    }
}

/// What a replica's owner does to a persistent store (see `LogStore::open_persistent`).
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
    /// The process dies here (the disk as it is is kept), or the power fails (the disk as
    /// it was at the last sync).
    Crash {
        power: bool,
    },
    /// The same, and the owner starts again on that disk: reopens the store at the
    /// checkpoint it recorded and goes on.
    Restart {
        power: bool,
    },
}

fn pstep() -> impl Strategy<Value = PStep> {
    prop_oneof![
        6 => writes().prop_map(PStep::Write),
        2 => Just(PStep::Checkpoint),
        1 => Just(PStep::Rollback),
        2 => Just(PStep::Stable),
        1 => writes().prop_map(PStep::Transfer),
        1 => any::<bool>().prop_map(|power| PStep::Crash { power }),
        1 => any::<bool>().prop_map(|power| PStep::Restart { power }),
    ]
}

/// The same writes to the reference and the store.
fn both(m: &mut MemStore, r: &mut LogStore<MemMedium>, w: WriteSet) {
    m.apply(w.clone()).unwrap();
    r.apply(w).unwrap();
}

/// Checkpoint `seq` becomes stable, as a replica's driver makes it: discard, persist, and
/// the owner's record (`recorded`).
fn stable(m: &mut MemStore, r: &mut LogStore<MemMedium>, seq: Seq) {
    assert_eq!(m.checkpoint(seq), r.checkpoint(seq));
    m.discard_checkpoints_below(seq);
    r.discard_checkpoints_below(seq);
    r.checkpoint_durably(seq).unwrap();
}

type Snapshot = (Vec<byzfs_bft::Digest>, Vec<Vec<(Vec<u8>, Vec<u8>)>>);

/// Reopens a persistent store on `disk` at checkpoint `seq`, which must equal `want`.
fn reopened_matches(disk: &MemMedium, seq: Seq, want: &Snapshot) -> Result<(), TestCaseError> {
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    let digests = r.reopen_at(seq);
    prop_assert_eq!(digests.as_ref(), Ok(&want.0));
    prop_assert_eq!(&r.current_digests(), &want.0);
    prop_assert_eq!(&contents(&r), &want.1);
    prop_assert_eq!(r.latest_checkpoint(), Some(seq));
    // And again, from the frames the return itself wrote.
    drop(r);
    let r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    prop_assert_eq!(&contents(&r), &want.1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]
    /// A persistent store, crashed or cut anywhere, reopens at the checkpoint its owner had
    /// recorded, with exactly that checkpoint's state, through rollbacks, discards and state
    /// transfers.
    #[test]
    fn a_persistent_log_store_reopens_at_the_recorded_checkpoint(
        steps in proptest::collection::vec(pstep(), 1..60),
        // Small segments: they close often, and compaction runs at most stable checkpoints.
        segment in prop_oneof![Just(64u64), Just(4096), Just(1 << 20)],
        write_back in prop_oneof![Just(0usize), Just(40), Just(1 << 20)],
    ) {
        run_persistent(steps, segment, write_back)?;
    }
}

/// The body of `a_persistent_log_store_reopens_at_the_recorded_checkpoint`: `steps` on a
/// persistent store with `segment`-byte segments and `write_back` bytes staged.
fn run_persistent(steps: Vec<PStep>, segment: u64, write_back: usize) -> Result<(), TestCaseError> {
    let disk = MemMedium::new();
    let mut m = MemStore::new(PARTS);
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    r.set_segment_bytes(segment);
    r.set_write_back_bytes(write_back);

    prop_assert!(r.persists());
    let mut snaps: BTreeMap<Seq, Snapshot> = BTreeMap::new();
    prop_assert_eq!(m.checkpoint(0), r.checkpoint(0));
    snaps.insert(0, (m.current_digests(), contents(&m)));
    // What the owner recorded: nothing at first (it would then start a fresh store).
    // The checkpoint persisting, with its sync not yet run (the driver's worker runs it;
    // here, the next step that is not a crash does).
    let (mut recorded, mut pending): (Option<Seq>, Option<(Seq, Option<DiskWork>)>) = (None, None);
    let mut crashes: Vec<(MemMedium, Option<Seq>)> = Vec::new();
    let mut next: Seq = 1;
    for st in steps {
        if !matches!(st, PStep::Crash { .. } | PStep::Restart { .. }) {
            // The store's sync ran, then the owner's record of the pending checkpoint
            // became durable.
            if let Some((p, work)) = pending.take() {
                r.run_here(work).unwrap();
                let work = r.recorded(p).unwrap();
                r.run_here(work).unwrap();
                recorded = Some(p);
            }
        }
        // Steps after which nothing is staged.
        let flushed = matches!(
            st,
            PStep::Checkpoint | PStep::Rollback | PStep::Transfer(_) | PStep::Restart { .. }
        );
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
                    pending = Some((s, r.persist(s).unwrap()));
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
            PStep::Crash { power } => {
                let copy = disk.copy();
                if power {
                    copy.power_cut();
                }
                crashes.push((copy, recorded));
            }
            PStep::Restart { power } => {
                let Some(at) = recorded else { continue };
                drop(r);
                disk.crash();
                if power {
                    disk.power_cut();
                }
                r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
                r.set_segment_bytes(segment);
                r.set_write_back_bytes(write_back);
                prop_assert_eq!(r.reopen_at(at), Ok(snaps[&at].0.clone()));
                // The reference restarts from the same checkpoint.
                m = MemStore::new(PARTS);
                let all: WriteSet = snaps[&at]
                    .1
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), Some(v.clone())))
                    .collect();
                m.apply(all).unwrap();
                m.checkpoint(at);
                pending = None;
            }
        }
        same(&m, &r)?;
        if flushed {
            // A replay names the places this store names: compaction removes segments by
            // what this one names.
            let replayed = LogStore::open_persistent_on(disk.copy(), PARTS).unwrap();
            prop_assert_eq!(replayed.places(), r.places());
        }
    }
    drop(r);
    // A sync that never ran: the owner's record still names the checkpoint before.
    crashes.push((disk, recorded));
    for (d, seq) in &crashes {
        if let Some(seq) = seq {
            reopened_matches(d, *seq, &snaps[seq])?;
        }
    }
    Ok(())
}

/// A key written away from its bytes and back within one staging moved to a new place in
/// the running store's index; a replay of the merged write must move it too, or
/// compaction, going by the running index, removes a segment the replay still names (the
/// simulator's `fs-disk-transfer-power-cuts` seed 3440, with mutation
/// `execute-before-transfer-recorded`: the store did not reopen after a power cut).
#[test]
fn a_key_staged_back_to_its_bytes_replays_at_its_new_place() {
    let disk = MemMedium::new();
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    r.apply(write_set(vec![(0, 1, Some(1))])).unwrap();
    r.checkpoint(1);
    r.checkpoint_durably(1).unwrap();
    let before = r.places();
    r.apply(write_set(vec![(0, 1, Some(2))])).unwrap();
    r.apply(write_set(vec![(0, 1, Some(1))])).unwrap();
    r.checkpoint(2);
    let after = r.places();
    // The value's new place, and its old one, which checkpoint 1 still needs.
    assert_eq!(after.len(), 2);
    assert!(before.is_subset(&after));
    let replayed = LogStore::open_persistent_on(disk.copy(), PARTS).unwrap();
    assert_eq!(replayed.places(), after);
    assert_eq!(contents(&replayed), contents(&r));
}

/// A case the property test found (5,000 cases): a power cut after two restarts, each
/// returning the store to its checkpoint, then a replay of the second return.
#[test]
fn a_return_to_a_checkpoint_replays_after_a_power_cut() {
    use PStep::*;
    let steps = vec![
        Stable,
        Checkpoint,
        Stable,
        Restart { power: false },
        Write(vec![(0, 0, None)]),
        Transfer(vec![(0, 1, Some(0)), (0, 2, Some(0))]),
        Restart { power: false },
        Checkpoint,
        Write(vec![(0, 0, Some(143))]),
        Stable,
        Restart { power: true },
    ];
    run_persistent(steps, 64, 0).unwrap();
}

#[test]
fn a_persistent_log_store_refuses_a_checkpoint_it_does_not_hold() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = LogStore::open_persistent(dir.path(), PARTS, true).unwrap();
    r.checkpoint(0);
    r.apply(WriteSet::from([(key(1, 1), Some(vec![7; 10]))]))
        .unwrap();
    r.checkpoint(5);
    r.checkpoint_durably(5).unwrap();
    drop(r);
    let mut r = LogStore::open_persistent(dir.path(), PARTS, false).unwrap();
    match r.reopen_at(3) {
        Err(StoreError::Io(m)) => assert!(m.contains("no checkpoint 3"), "{m}"),
        other => panic!("reopened at a checkpoint it does not hold: {other:?}"),
    }
    assert_eq!(r.reopen_at(5).map(|d| d.len()), Ok(PARTS as usize));
    assert_eq!(r.get(&key(1, 1)).unwrap(), Some(vec![7; 10]));
    // `fresh` empties the directory.
    let empty = MemStore::new(PARTS).current_digests();
    drop(r);
    let r = LogStore::open_persistent(dir.path(), PARTS, true).unwrap();
    assert_eq!(r.current_digests(), empty);
    assert_eq!(r.latest_checkpoint(), None);
}

/// A frame cut short or damaged ends the log: what follows it is dropped, what precedes it
/// is kept, and the store goes on writing after it.
#[test]
fn a_damaged_tail_ends_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = LogStore::create_scratch(dir.path(), PARTS).unwrap();
    // A frame per operation, so that the last one can be cut.
    r.set_write_back_bytes(0);
    r.apply(WriteSet::from([(key(1, 1), Some(vec![1; 100]))]))
        .unwrap();
    r.apply(WriteSet::from([(key(1, 2), Some(vec![2; 100]))]))
        .unwrap();
    drop(r);
    let seg = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let len = std::fs::metadata(&seg).unwrap().len();
    for (cut, flip) in [(len - 1, None), (len, Some(len - 3))] {
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes.truncate(cut as usize);
        if let Some(at) = flip {
            bytes[at as usize] ^= 0x40;
        }
        std::fs::write(&seg, &bytes).unwrap();
        let m = byzfs_fs::store::DirMedium::open(dir.path(), true).unwrap();
        let mut r = LogStore::open_on(m, PARTS).unwrap();
        r.set_write_back_bytes(0);
        assert_eq!(r.get(&key(1, 1)).unwrap(), Some(vec![1; 100]));
        assert_eq!(
            r.get(&key(1, 2)).unwrap(),
            None,
            "the damaged frame is dropped"
        );
        r.apply(WriteSet::from([(key(1, 3), Some(vec![3; 5]))]))
            .unwrap();
        drop(r);
        let m = byzfs_fs::store::DirMedium::open(dir.path(), true).unwrap();
        let r = LogStore::open_on(m, PARTS).unwrap();
        assert_eq!(r.get(&key(1, 3)).unwrap(), Some(vec![3; 5]));
        // Put frame 2 back for the next case.
        drop(r);
        let mut r = LogStore::open_on(
            byzfs_fs::store::DirMedium::open(dir.path(), true).unwrap(),
            PARTS,
        )
        .unwrap();
        r.apply(WriteSet::from([
            (key(1, 3), None),
            (key(1, 2), Some(vec![2; 100])),
        ]))
        .unwrap();
    }
}

/// Writing and removing a large file's worth of values: the closed segments are compacted
/// at a stable checkpoint, the space comes back, and every held checkpoint and the live
/// state survive it, a reopen, and a power cut after it.
#[test]
fn compaction_gives_space_back_and_keeps_every_checkpoint() {
    let disk = MemMedium::new();
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    r.set_segment_bytes(64 << 10);
    let mut m = MemStore::new(PARTS);
    let block = |i: u8| (key(i % 8, i), Some(vec![i; 16 * 1024]));
    m.checkpoint(0);
    r.checkpoint(0);
    both(
        &mut m,
        &mut r,
        WriteSet::from([(key(0, 200), Some(b"kept".to_vec()))]),
    );
    for i in 0..64 {
        both(&mut m, &mut r, WriteSet::from([block(i)]));
    }
    let one = m.checkpoint(1);
    assert_eq!(r.checkpoint(1), one);
    r.discard_checkpoints_below(1);
    m.discard_checkpoints_below(1);
    r.checkpoint_durably(1).unwrap();
    let full = disk.bytes();
    assert!(full > 1 << 20, "64 blocks written: {full} bytes");
    // The file is removed; checkpoint 2 holds the removal, and 3 a write after it.
    for i in 0..64 {
        both(&mut m, &mut r, WriteSet::from([(key(i % 8, i), None)]));
    }
    assert_eq!(m.checkpoint(2), r.checkpoint(2));
    both(
        &mut m,
        &mut r,
        WriteSet::from([(key(1, 201), Some(b"after".to_vec()))]),
    );
    assert_eq!(m.checkpoint(3), r.checkpoint(3));
    m.discard_checkpoints_below(2);
    r.discard_checkpoints_below(2);
    // Checkpoint 2 persisting: until the owner's record of it, 1 still holds the blocks.
    let work = r.persist(2).unwrap();
    let cut = disk.copy();
    cut.power_cut();
    r.run_here(work).unwrap();
    assert_eq!(r.counters().compactions, 0, "{:?}", r.counters());
    let mut before = LogStore::open_persistent_on(cut.handle(), PARTS).unwrap();
    assert_eq!(before.reopen_at(1), Ok(one));
    // The owner recorded 2: 1 goes, and the blocks with it.
    let work = r.recorded(2).unwrap();
    r.run_here(work).unwrap();
    assert_eq!(r.counters().compactions, 1, "{:?}", r.counters());
    // And 4 becomes stable, its sync runs, and the owner has not recorded it yet: the
    // store keeps 2 (and 3) for the record that still names 2.
    assert_eq!(m.checkpoint(4), r.checkpoint(4));
    m.discard_checkpoints_below(2);
    r.discard_checkpoints_below(4);
    let work = r.persist(4).unwrap();
    r.run_here(work).unwrap();
    assert_eq!(r.latest_checkpoint(), Some(4));
    assert_eq!(r.counters().compactions, 1, "{:?}", r.counters());
    assert!(
        disk.bytes() < 256 << 10,
        "{} bytes left of {full}",
        disk.bytes()
    );
    let snapshot = |s: &dyn Store| (s.current_digests(), contents(s));
    let want = snapshot(&m);
    assert_eq!(snapshot(&r), want);
    for seq in [2, 3, 4] {
        assert_eq!(m.checkpoint_digests(seq), r.checkpoint_digests(seq));
        for p in 0..PARTS {
            assert_eq!(m.export_partition(seq, p), r.export_partition(seq, p));
        }
    }
    drop(r);
    let cut = disk.copy();
    cut.power_cut();
    for d in [&disk, &cut] {
        let mut again = LogStore::open_persistent_on(d.handle(), PARTS).unwrap();
        assert_eq!(snapshot(&again), want);
        assert_eq!(again.checkpoint_digests(3), m.checkpoint_digests(3));
        assert_eq!(again.reopen_at(2), Ok(m.checkpoint_digests(2).unwrap()));
        assert_eq!(again.get(&key(1, 201)).unwrap(), None);
        assert_eq!(again.get(&key(0, 200)).unwrap(), Some(b"kept".to_vec()));
    }
}

/// A store returned to its checkpoint after a restart (a `Reopen` frame in the segment it
/// appends to), then compacted while that segment is still the one appended to: the next
/// start replays from the compacted index, not from the frames before it (the simulator's
/// `fs-disk-transfer-power-cuts` seed 65 failed so).
#[test]
fn a_compacted_store_reopens_after_a_return_to_its_checkpoint() {
    let disk = MemMedium::new();
    let mut m = MemStore::new(PARTS);
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    r.set_segment_bytes(8 << 10);
    let w = |i: u8| WriteSet::from([(key(i % 8, 1), Some(vec![i; 3000]))]);
    m.apply(w(0)).unwrap();
    r.apply(w(0)).unwrap();
    assert_eq!(m.checkpoint(1), r.checkpoint(1));
    r.checkpoint_durably(1).unwrap();
    // Executed after the checkpoint, then lost to the restart: garbage in closed segments.
    for i in 1..30u8 {
        r.apply(w(i)).unwrap();
    }
    drop(r);
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    r.set_segment_bytes(8 << 10);
    assert_eq!(r.reopen_at(1), Ok(m.checkpoint_digests(1).unwrap()));
    assert_eq!(m.checkpoint(2), r.checkpoint(2));
    m.discard_checkpoints_below(2);
    r.discard_checkpoints_below(2);
    r.checkpoint_durably(2).unwrap();
    assert_eq!(r.counters().compactions, 1, "{:?}", r.counters());
    drop(r);
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    assert_eq!(contents(&r), contents(&m));
    assert_eq!(r.reopen_at(2), Ok(m.checkpoint_digests(2).unwrap()));
}

/// A log written in another on-disk format is refused with what to do, and a new log says
/// its format in its first frame.
#[test]
fn a_log_in_another_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(LogStore::create_scratch(dir.path(), PARTS).unwrap());
    let seg = dir.path().join("seg-0000000000000000.log");
    let mut body = vec![10u8];
    body.extend_from_slice(&byzfs_fs::store::LOG_FORMAT.to_le_bytes());
    let frame = |body: &[u8]| {
        let mut f = (body.len() as u32).to_le_bytes().to_vec();
        f.extend_from_slice(&blake3::hash(body).as_bytes()[..8]);
        f.extend_from_slice(body);
        f
    };
    assert_eq!(std::fs::read(&seg).unwrap(), frame(&body));
    body[1..].copy_from_slice(&(byzfs_fs::store::LOG_FORMAT + 1).to_le_bytes());
    std::fs::write(&seg, frame(&body)).unwrap();
    let m = byzfs_fs::store::DirMedium::open(dir.path(), true).unwrap();
    match LogStore::open_on(m, PARTS) {
        Err(StoreError::Io(e)) => {
            assert!(e.contains("on-disk format 2"), "{e}");
            assert!(e.contains("state transfer"), "{e}");
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("a log of format 2 opened"),
    }
}

/// A block written in two halves between checkpoints (as `largefile`'s 8 KiB writes into
/// 16 KiB blocks) is appended once, its last version: staged until the checkpoint.
#[test]
fn a_value_rewritten_between_checkpoints_is_appended_once() {
    let mut r = LogStore::open_on(MemMedium::new(), PARTS).unwrap();
    let block = 16 * 1024;
    let before = r.counters().bytes_written;
    r.apply(WriteSet::from([(key(1, 1), Some(vec![1; block / 2]))]))
        .unwrap();
    r.apply(WriteSet::from([(key(1, 1), Some(vec![1; block]))]))
        .unwrap();
    assert_eq!(r.get(&key(1, 1)).unwrap(), Some(vec![1; block]));
    assert_eq!(
        r.counters().bytes_written,
        before,
        "staged, nothing appended yet"
    );
    r.checkpoint(1);
    let written = r.counters().bytes_written - before;
    assert!(
        (block as u64..block as u64 + 100).contains(&written),
        "{written} bytes for one {block}-byte block"
    );
    assert_eq!(r.get(&key(1, 1)).unwrap(), Some(vec![1; block]));
}

/// A log whose frames all check but whose index names bytes past the end of a segment (a
/// disk that lost or cut a file) is refused at open, before anything reads there.
#[test]
fn an_index_naming_bytes_past_a_segment_is_refused() {
    use byzfs_fs::store::Medium as _;
    let disk = MemMedium::new();
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    r.set_segment_bytes(8 << 10);
    r.set_write_back_bytes(0);
    r.checkpoint(1);
    r.checkpoint_durably(1).unwrap();
    // Garbage in closed segments, then a kept value: compaction moves the value into the
    // segment appended to and starts the next one with the index.
    for i in 0..30u8 {
        r.apply(WriteSet::from([(key(1, 1), Some(vec![i; 3000]))]))
            .unwrap();
    }
    r.checkpoint(2);
    r.discard_checkpoints_below(2);
    r.checkpoint_durably(2).unwrap();
    r.checkpoint(3);
    r.discard_checkpoints_below(3);
    r.checkpoint_durably(3).unwrap();
    assert!(r.counters().compactions > 0, "{:?}", r.counters());
    drop(r);
    assert_eq!(
        LogStore::open_persistent_on(disk.handle(), PARTS)
            .unwrap()
            .get(&key(1, 1))
            .unwrap(),
        Some(vec![29; 3000])
    );
    // The segment holding the moved value, cut: the index still names it.
    let mut m = disk.handle();
    let first = m.segments().unwrap()[0];
    m.truncate(first, 0).unwrap();
    match LogStore::open_persistent_on(disk.handle(), PARTS) {
        Err(StoreError::Io(e)) => assert!(e.contains("damage"), "{e}"),
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("opened an index that names bytes a segment does not hold"),
    }
}

/// Compaction goes segment by segment: the segments a removal left empty all go at once,
/// and segments still partly live are copied at most half a segment's worth per stable
/// checkpoint, the emptiest first (a 4 GiB removal once copied everything live in one
/// step and stalled the replica 20 s: docs/BENCHMARKS.md "Replicas that write what they
/// store once"). Every checkpoint and value survives, and a reopen after a power cut.
#[test]
fn compaction_copies_at_most_half_a_segment_per_checkpoint() {
    const SEG: u64 = 64 << 10;
    const BLOCK: usize = 16 << 10;
    let disk = MemMedium::new();
    let mut m = MemStore::new(PARTS);
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    r.set_segment_bytes(SEG);
    r.set_write_back_bytes(0);
    // Stable and recorded: the checkpoint before goes at its record.
    let persisted = |m: &mut MemStore, r: &mut LogStore<MemMedium>, seq: Seq| {
        assert_eq!(m.checkpoint(seq), r.checkpoint(seq));
        m.discard_checkpoints_below(seq);
        r.discard_checkpoints_below(seq);
        r.checkpoint_durably(seq).unwrap();
    };
    let block = |i: u8| (key(i % 8, i), Some(vec![i; BLOCK]));
    // 64 blocks, four to a segment.
    for i in 0..64 {
        both(&mut m, &mut r, WriteSet::from([block(i)]));
    }
    persisted(&mut m, &mut r, 1);
    // All but one block of each of the first four segments, and every block after them.
    for i in (0..64).filter(|i| i % 4 != 0 || *i >= 16) {
        both(&mut m, &mut r, WriteSet::from([(key(i % 8, i), None)]));
    }
    // The 12 empty segments, and two of the four a quarter live; at 3, nothing closed or
    // released since: no other look.
    for seq in [2, 3] {
        persisted(&mut m, &mut r, seq);
        let c = r.counters();
        assert_eq!(
            (c.compactions, c.segments_removed, c.bytes_copied),
            (1, 14, 2 * BLOCK as u64),
            "after {seq}: {c:?}"
        );
    }
    // Another segment's worth of writes closes one: the two left go at the next look.
    for i in 100..105 {
        both(&mut m, &mut r, WriteSet::from([block(i)]));
    }
    persisted(&mut m, &mut r, 4);
    let c = r.counters();
    assert_eq!(
        (c.compactions, c.bytes_copied),
        (2, 4 * BLOCK as u64),
        "{c:?}"
    );
    let want = (m.current_digests(), contents(&m));
    assert_eq!((r.current_digests(), contents(&r)), want);
    assert!(
        disk.bytes() < 16 * SEG,
        "{} bytes on disk for 9 live blocks",
        disk.bytes()
    );
    drop(r);
    let cut = disk.copy();
    cut.power_cut();
    for d in [&disk, &cut] {
        let mut again = LogStore::open_persistent_on(d.handle(), PARTS).unwrap();
        assert_eq!((again.current_digests(), contents(&again)), want);
        assert_eq!(again.reopen_at(4), Ok(m.checkpoint_digests(4).unwrap()));
    }
}

/// The checkpoint after a removal gives its space back once its record is durable
/// (`LogStore::recorded`), without waiting for another checkpoint, which an idle cluster
/// would not reach (docs/PROTOCOL.md §2.6); a power cut after it returns to that
/// checkpoint.
#[test]
fn a_removal_is_given_back_once_the_next_checkpoint_is_recorded() {
    let disk = MemMedium::new();
    let mut m = MemStore::new(PARTS);
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    r.set_segment_bytes(64 << 10);
    r.set_write_back_bytes(0);
    for i in 0..64u8 {
        let w = WriteSet::from([(key(i % 8, i), Some(vec![i; 16 << 10]))]);
        m.apply(w.clone()).unwrap();
        r.apply(w).unwrap();
    }
    stable(&mut m, &mut r, 1);
    let full = disk.bytes();
    for i in 0..64u8 {
        let w = WriteSet::from([(key(i % 8, i), None)]);
        m.apply(w.clone()).unwrap();
        r.apply(w).unwrap();
    }
    stable(&mut m, &mut r, 2);
    assert!(
        disk.bytes() < full / 8,
        "{} of {full} bytes left after checkpoint 2: {:?}",
        disk.bytes(),
        r.counters()
    );
    assert_eq!(r.current_digests(), m.current_digests());
    drop(r);
    disk.power_cut();
    let mut again = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    assert_eq!(again.reopen_at(2), Ok(m.checkpoint_digests(2).unwrap()));
    assert_eq!(contents(&again), contents(&m));
}

/// A removed file whose values all lie in the segment still appended to is given back too:
/// that segment is closed early once it is mostly garbage, then compacted.
#[test]
fn a_mostly_dead_segment_appended_to_is_closed_and_compacted() {
    let disk = MemMedium::new();
    let mut m = MemStore::new(PARTS);
    let mut r = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    r.set_segment_bytes(4 << 20);
    both(
        &mut m,
        &mut r,
        WriteSet::from([(key(0, 250), Some(b"kept".to_vec()))]),
    );
    for i in 0..192u8 {
        both(
            &mut m,
            &mut r,
            WriteSet::from([(key(i % 8, i), Some(vec![i; 16 << 10]))]),
        );
    }
    stable(&mut m, &mut r, 1);
    let full = disk.bytes();
    assert!(full > 3 << 20, "{full}");
    for i in 0..192u8 {
        both(&mut m, &mut r, WriteSet::from([(key(i % 8, i), None)]));
    }
    stable(&mut m, &mut r, 2);
    assert!(
        disk.bytes() < 64 << 10,
        "{} bytes left: {:?}",
        disk.bytes(),
        r.counters()
    );
    assert_eq!(contents(&r), contents(&m));
    drop(r);
    disk.power_cut();
    let mut again = LogStore::open_persistent_on(disk.handle(), PARTS).unwrap();
    assert_eq!(again.reopen_at(2), Ok(m.checkpoint_digests(2).unwrap()));
    assert_eq!(contents(&again), contents(&m));
}
