//! Record locks ([`byzfs_fs::lock`]): POSIX semantics between owners of several clients,
//! leases in agreed time, and a property test against a byte-by-byte model.

use crate::common;

use byzfs_bft::Service;
use byzfs_fs::proto::lock::{LockInfo, LockKind, LOCK_END_MAX};
use byzfs_fs::{Errno, FileHandle, FsConfig, FsResult, Op, Reply};
use common::*;
use proptest::prelude::*;
use std::time::Duration;

const R: Option<LockKind> = Some(LockKind::Read);
const W: Option<LockKind> = Some(LockKind::Write);
const UN: Option<LockKind> = None;

fn setlk(
    fs: &mut Fs,
    client: u64,
    owner: u64,
    fh: FileHandle,
    kind: Option<LockKind>,
    start: u64,
    end: u64,
) -> FsResult {
    fs.run_client(client, Op::SetLk(req(fh, owner, kind, start, end)))
}

fn getlk(
    fs: &mut Fs,
    client: u64,
    owner: u64,
    fh: FileHandle,
    kind: LockKind,
    start: u64,
    end: u64,
) -> Option<LockInfo> {
    match fs.run_client(
        client,
        Op::GetLk {
            fh,
            owner,
            kind,
            start,
            end,
        },
    ) {
        Ok(Reply::Lock { conflict, .. }) => conflict,
        r => panic!("getlk: {r:?}"),
    }
}

fn lapsed(r: FsResult) -> bool {
    match r {
        Ok(Reply::Lock { lapsed, .. }) => lapsed,
        r => panic!("lock reply expected: {r:?}"),
    }
}

fn file(fs: &mut Fs) -> FileHandle {
    fs.create(ROOT, "f").fh
}

#[test]
fn owners_of_two_clients_conflict_as_posix_says() {
    let mut fs = Fs::new();
    let f = file(&mut fs);
    assert!(setlk(&mut fs, 1, 5, f, W, 0, 99).is_ok());
    // The same owner number on another client is another owner.
    assert_eq!(setlk(&mut fs, 2, 5, f, W, 50, 50), err(Errno::EAGAIN));
    assert_eq!(setlk(&mut fs, 2, 5, f, R, 99, 200), err(Errno::EAGAIN));
    assert!(setlk(&mut fs, 2, 5, f, W, 100, LOCK_END_MAX).is_ok());
    // Another owner of the same client conflicts too.
    assert_eq!(setlk(&mut fs, 1, 6, f, R, 0, 0), err(Errno::EAGAIN));
    // Read locks share; the holder can change its own lock's kind.
    assert!(setlk(&mut fs, 1, 5, f, R, 0, 99).is_ok());
    assert!(setlk(&mut fs, 1, 6, f, R, 10, 20).is_ok());
    assert_eq!(setlk(&mut fs, 1, 5, f, W, 0, 99), err(Errno::EAGAIN));
    assert!(setlk(&mut fs, 1, 6, f, UN, 0, LOCK_END_MAX).is_ok());
    assert!(setlk(&mut fs, 1, 5, f, W, 0, 99).is_ok());
    assert_eq!(
        getlk(&mut fs, 3, 1, f, LockKind::Read, 0, LOCK_END_MAX),
        Some(LockInfo {
            kind: LockKind::Write,
            start: 0,
            end: 99,
            pid: 105,
            client: 1,
        })
    );
    assert_eq!(
        getlk(&mut fs, 1, 5, f, LockKind::Write, 0, 99),
        None,
        "own locks never conflict"
    );
}

#[test]
fn unlocking_the_middle_splits_a_lock_and_adjacent_locks_merge() {
    let mut fs = Fs::new();
    let f = file(&mut fs);
    assert!(setlk(&mut fs, 1, 1, f, W, 0, 99).is_ok());
    assert!(setlk(&mut fs, 1, 1, f, UN, 40, 59).is_ok());
    assert!(setlk(&mut fs, 2, 1, f, W, 40, 59).is_ok());
    assert_eq!(setlk(&mut fs, 2, 1, f, W, 39, 39), err(Errno::EAGAIN));
    assert_eq!(setlk(&mut fs, 2, 1, f, W, 60, 60), err(Errno::EAGAIN));
    let left = getlk(&mut fs, 3, 1, f, LockKind::Read, 0, 0).unwrap();
    assert_eq!((left.start, left.end), (0, 39));
    // Adjacent ranges of one owner and kind become one lock.
    assert!(setlk(&mut fs, 2, 1, f, W, 100, 120).is_ok());
    assert!(setlk(&mut fs, 2, 1, f, W, 121, 130).is_ok());
    let joined = getlk(&mut fs, 3, 1, f, LockKind::Read, 125, 125).unwrap();
    assert_eq!((joined.start, joined.end), (100, 130));
}

#[test]
fn releasing_an_owner_drops_its_locks_only() {
    let mut fs = Fs::new();
    let f = file(&mut fs);
    assert!(setlk(&mut fs, 1, 1, f, R, 0, 9).is_ok());
    assert!(setlk(&mut fs, 1, 2, f, R, 0, 9).is_ok());
    assert!(fs
        .run_client(1, Op::ReleaseLocks { fh: f, owner: 1 })
        .is_ok());
    assert_eq!(setlk(&mut fs, 2, 1, f, W, 0, 9), err(Errno::EAGAIN));
    assert!(fs
        .run_client(1, Op::ReleaseLocks { fh: f, owner: 2 })
        .is_ok());
    assert!(setlk(&mut fs, 2, 1, f, W, 0, 9).is_ok());
}

#[test]
fn bad_ranges_and_too_many_locks_are_refused() {
    let mut fs = Fs::new();
    let f = file(&mut fs);
    assert_eq!(setlk(&mut fs, 1, 1, f, W, 5, 4), err(Errno::EINVAL));
    assert_eq!(
        setlk(&mut fs, 1, 1, f, W, 0, LOCK_END_MAX + 1),
        err(Errno::EINVAL)
    );
    let max = byzfs_fs::proto::lock::MAX_LOCKS_PER_FILE as u64;
    for i in 0..max {
        assert!(setlk(&mut fs, 1, 1, f, W, 2 * i, 2 * i).is_ok());
    }
    assert_eq!(
        setlk(&mut fs, 1, 1, f, W, 2 * max, 2 * max),
        err(Errno::ENOLCK)
    );
    // Filling a gap merges two locks into one, so it is allowed at the limit.
    assert!(setlk(&mut fs, 1, 1, f, W, 1, 1).is_ok());
    let stale = FileHandle {
        ino: f.ino,
        generation: f.generation + 1,
    };
    assert_eq!(setlk(&mut fs, 1, 1, stale, W, 0, 0), err(Errno::ESTALE));
}

#[test]
fn a_client_silent_past_its_lease_loses_its_locks_for_good() {
    let mut fs = Fs::new();
    let f = file(&mut fs);
    assert!(!lapsed(setlk(&mut fs, 1, 1, f, W, 0, 9)));
    // Renewed every 10 s, the lock outlives the 30 s lease many times over.
    for _ in 0..6 {
        fs.clock_us += 10_000_000;
        assert!(!lapsed(fs.run_client(1, Op::RenewLease)));
    }
    assert_eq!(setlk(&mut fs, 2, 1, f, W, 0, 9), err(Errno::EAGAIN));
    // Silent for longer than the lease: the lock no longer counts.
    fs.clock_us += 31_000_000;
    assert!(getlk(&mut fs, 2, 1, f, LockKind::Write, 0, 9).is_none());
    // Coming back, the client learns its locks are gone, even though nobody took them.
    assert!(lapsed(fs.run_client(1, Op::RenewLease)));
    assert!(getlk(&mut fs, 2, 1, f, LockKind::Write, 0, 9).is_none());
    assert!(setlk(&mut fs, 2, 1, f, W, 0, 9).is_ok());
    assert_eq!(setlk(&mut fs, 1, 1, f, W, 0, 9), err(Errno::EAGAIN));
}

#[test]
fn a_removed_file_leaves_no_lock_record() {
    // Two services that differ only in whether the removed file was locked at the time.
    let run = |unlock_first: bool| {
        let mut fs = Fs::new();
        let f = file(&mut fs);
        assert!(setlk(&mut fs, 1, 1, f, W, 0, 9).is_ok());
        if unlock_first {
            assert!(setlk(&mut fs, 1, 1, f, UN, 0, 9).is_ok());
        } else {
            // Renews the lease exactly as the unlock does.
            assert!(fs.run_client(1, Op::RenewLease).is_ok());
        }
        assert!(fs
            .run(Op::Remove {
                dir: ROOT,
                name: b"f".to_vec()
            })
            .is_ok());
        assert_eq!(setlk(&mut fs, 1, 1, f, W, 0, 9), err(Errno::ESTALE));
        fs.s.current_partition_digests()
    };
    assert_eq!(run(true), run(false));
}

/// Model bytes: 0..=11 are single bytes, 12 stands for `12..=LOCK_END_MAX`.
const BYTES: usize = 13;

fn range_of(start: usize, end: usize) -> (u64, u64) {
    let e = if end == BYTES - 1 {
        LOCK_END_MAX
    } else {
        end as u64
    };
    (start as u64, e)
}

fn model_byte(offset: u64) -> usize {
    (offset.min(12)) as usize
}

/// (client, owner) of each model owner.
const OWNERS: [(u64, u64); 4] = [(1, 1), (1, 2), (2, 1), (2, 2)];

#[derive(Clone, Debug)]
enum LOp {
    Set(usize, Option<LockKind>, usize, usize),
    Get(usize, LockKind, usize, usize),
    Release(usize),
}

fn kind() -> impl Strategy<Value = LockKind> {
    prop_oneof![Just(LockKind::Read), Just(LockKind::Write)]
}

fn range() -> impl Strategy<Value = (usize, usize)> {
    (0..BYTES).prop_flat_map(|s| {
        // A finite end stays below byte 12; byte 12 only as "to the end".
        let ends = if s == BYTES - 1 {
            Just(BYTES - 1).boxed()
        } else {
            prop_oneof![s..BYTES - 1, Just(BYTES - 1)].boxed()
        };
        (Just(s), ends)
    })
}

fn lop() -> impl Strategy<Value = LOp> {
    prop_oneof![
        4 => (0..4usize, proptest::option::of(kind()), range()).prop_map(|(o, k, (s, e))| LOp::Set(o, k, s, e)),
        2 => (0..4usize, kind(), range()).prop_map(|(o, k, (s, e))| LOp::Get(o, k, s, e)),
        1 => (0..4usize).prop_map(LOp::Release),
    ]
}

fn conflicting(a: LockKind, b: LockKind) -> bool {
    a == LockKind::Write || b == LockKind::Write
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn locks_match_a_byte_model(ops in proptest::collection::vec(lop(), 1..60)) {
        let mut fs = Fs::with_config(FsConfig {
            lock_lease: Duration::from_secs(3600),
            ..small_config()
        });
        let f = file(&mut fs);
        let mut model = [[None::<LockKind>; BYTES]; 4];
        for op in &ops {
            match *op {
                LOp::Set(o, k, s, e) => {
                    let (start, end) = range_of(s, e);
                    let (client, owner) = OWNERS[o];
                    let busy = k.is_some_and(|k| {
                        (0..4).filter(|&p| p != o).any(|p| {
                            (s..=e).any(|b| model[p][b].is_some_and(|h| conflicting(h, k)))
                        })
                    });
                    let r = setlk(&mut fs, client, owner, f, k, start, end);
                    if busy {
                        prop_assert_eq!(r, err(Errno::EAGAIN));
                    } else {
                        prop_assert!(r.is_ok(), "{:?}", r);
                        model[o][s..=e].fill(k);
                    }
                }
                LOp::Get(o, k, s, e) => {
                    let (start, end) = range_of(s, e);
                    let (client, owner) = OWNERS[o];
                    let expect = (0..4).filter(|&p| p != o).any(|p| {
                        (s..=e).any(|b| model[p][b].is_some_and(|h| conflicting(h, k)))
                    });
                    let got = getlk(&mut fs, client, owner, f, k, start, end);
                    prop_assert_eq!(got.is_some(), expect, "{:?}", got);
                    if let Some(c) = got {
                        // A whole lock of another owner: a maximal run of one kind.
                        let (cs, ce) = (model_byte(c.start), model_byte(c.end));
                        prop_assert!(cs <= e && s <= ce && conflicting(c.kind, k));
                        let whole = (0..4).filter(|&p| p != o).any(|p| {
                            (cs..=ce).all(|b| model[p][b] == Some(c.kind))
                                && (cs == 0 || model[p][cs - 1] != Some(c.kind))
                                && (ce == BYTES - 1 || model[p][ce + 1] != Some(c.kind))
                        });
                        prop_assert!(whole, "{:?} is not a whole lock in {:?}", c, model);
                    }
                }
                LOp::Release(o) => {
                    let (client, owner) = OWNERS[o];
                    let r = fs.run_client(client, Op::ReleaseLocks { fh: f, owner });
                    prop_assert!(r.is_ok(), "{:?}", r);
                    model[o] = [None; BYTES];
                }
            }
        }
    }
}

/// `F_SETLKW` ([`byzfs_fs::deadlock`]), one millisecond of agreed time after the last
/// operation (edges live for two seconds; the harness otherwise steps one second per call).
fn setlkw(fs: &mut Fs, client: u64, owner: u64, fh: FileHandle, kind: LockKind) -> FsResult {
    fs.clock_us -= 999_000;
    fs.run_client(client, Op::SetLkWait(req(fh, owner, Some(kind), 0, 9)))
}

/// What a blocking request came to.
#[derive(Debug, PartialEq)]
enum Wait {
    Granted,
    Busy(u64),
    Deadlock,
}

fn wait_outcome(r: FsResult) -> Wait {
    match r {
        Ok(Reply::Lock { conflict: None, .. }) => Wait::Granted,
        Ok(Reply::Lock {
            conflict: Some(c), ..
        }) => Wait::Busy(c.client),
        Ok(Reply::Deadlock { .. }) => Wait::Deadlock,
        r => panic!("setlk_wait: {r:?}"),
    }
}

fn two_files(fs: &mut Fs) -> (FileHandle, FileHandle) {
    (fs.create(ROOT, "x").fh, fs.create(ROOT, "y").fh)
}

#[test]
fn a_wait_that_would_close_a_cycle_fails_with_edeadlk() {
    let mut fs = Fs::new();
    let (x, y) = two_files(&mut fs);
    assert!(setlk(&mut fs, 1, 1, x, W, 0, 9).is_ok());
    assert!(setlk(&mut fs, 2, 2, y, W, 0, 9).is_ok());
    // 1 waits for 2 (on y); 2 asking for x would wait for 1: a cycle.
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 1, 1, y, LockKind::Write)),
        Wait::Busy(2)
    );
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 2, 2, x, LockKind::Write)),
        Wait::Deadlock
    );
    // Only the request that closed the cycle failed: 1 still waits, and gets y once 2
    // lets it go.
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 1, 1, y, LockKind::Read)),
        Wait::Busy(2)
    );
    fs.clock_us -= 999_000;
    assert!(setlk(&mut fs, 2, 2, y, UN, 0, 9).is_ok());
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 1, 1, y, LockKind::Write)),
        Wait::Granted
    );
    // 2 now waits for 1 without a cycle.
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 2, 2, x, LockKind::Read)),
        Wait::Busy(1)
    );
}

#[test]
fn cycles_through_several_owners_and_within_one_client_are_found() {
    let mut fs = Fs::new();
    let (x, y) = two_files(&mut fs);
    let z = fs.create(ROOT, "z").fh;
    // Client 1's owners 1 and 2, client 3's owner 1: 1/1 → 3/1 → 1/2 → 1/1.
    assert!(setlk(&mut fs, 1, 1, x, W, 0, 9).is_ok());
    assert!(setlk(&mut fs, 3, 1, y, W, 0, 9).is_ok());
    assert!(setlk(&mut fs, 1, 2, z, W, 0, 9).is_ok());
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 1, 1, y, LockKind::Write)),
        Wait::Busy(3)
    );
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 3, 1, z, LockKind::Write)),
        Wait::Busy(1)
    );
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 1, 2, x, LockKind::Write)),
        Wait::Deadlock
    );
    // Two owners of one client in a cycle of two.
    let mut fs = Fs::new();
    let (x, y) = two_files(&mut fs);
    assert!(setlk(&mut fs, 1, 1, x, W, 0, 9).is_ok());
    assert!(setlk(&mut fs, 1, 2, y, W, 0, 9).is_ok());
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 1, 1, y, LockKind::Read)),
        Wait::Busy(1)
    );
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 1, 2, x, LockKind::Read)),
        Wait::Deadlock
    );
    // Read locks shared: no wait, no cycle.
    let mut fs = Fs::new();
    let (x, y) = two_files(&mut fs);
    assert!(setlk(&mut fs, 1, 1, x, R, 0, 9).is_ok());
    assert!(setlk(&mut fs, 2, 2, y, W, 0, 9).is_ok());
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 1, 1, y, LockKind::Read)),
        Wait::Busy(2)
    );
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 2, 2, x, LockKind::Read)),
        Wait::Granted
    );
}

#[test]
fn cancelled_stale_and_lapsed_waits_no_longer_count() {
    let setup = |fs: &mut Fs| {
        let (x, y) = two_files(fs);
        assert!(setlk(fs, 1, 1, x, W, 0, 9).is_ok());
        assert!(setlk(fs, 2, 2, y, W, 0, 9).is_ok());
        assert_eq!(
            wait_outcome(setlkw(fs, 1, 1, y, LockKind::Write)),
            Wait::Busy(2)
        );
        (x, y)
    };
    // Cancelled (the waiting process got a signal).
    let mut fs = Fs::new();
    let (x, y) = setup(&mut fs);
    fs.clock_us -= 999_000;
    assert!(fs.run_client(1, Op::CancelWait { fh: y, owner: 1 }).is_ok());
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 2, 2, x, LockKind::Write)),
        Wait::Busy(1)
    );
    // Not refreshed for longer than the edge's life (a client that stopped retrying).
    let mut fs = Fs::new();
    let (x, _) = setup(&mut fs);
    fs.clock_us += 2_000_000;
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 2, 2, x, LockKind::Write)),
        Wait::Busy(1)
    );
    // Its client's lease lapsed: its locks went too, so 2 gets x.
    let mut fs = Fs::new();
    let (x, _) = setup(&mut fs);
    fs.clock_us += 31_000_000;
    assert_eq!(
        wait_outcome(setlkw(&mut fs, 2, 2, x, LockKind::Write)),
        Wait::Granted
    );
}

#[test]
fn waits_leave_no_record_once_granted_or_cancelled() {
    // Two services that differ only in whether client 1 waited for y before getting it.
    let run = |wait_first: bool| {
        let mut fs = Fs::new();
        let (_, y) = two_files(&mut fs);
        assert!(setlk(&mut fs, 2, 2, y, W, 0, 9).is_ok());
        if wait_first {
            assert_eq!(
                wait_outcome(setlkw(&mut fs, 1, 1, y, LockKind::Write)),
                Wait::Busy(2)
            );
        } else {
            // Renews client 1's lease exactly as the wait does.
            fs.clock_us -= 999_000;
            assert!(fs.run_client(1, Op::RenewLease).is_ok());
        }
        fs.clock_us -= 999_000;
        assert!(setlk(&mut fs, 2, 2, y, UN, 0, 9).is_ok());
        assert_eq!(
            wait_outcome(setlkw(&mut fs, 1, 1, y, LockKind::Write)),
            Wait::Granted
        );
        fs.s.current_partition_digests()
    };
    assert_eq!(run(true), run(false));
    // Bad input: a range no lock can cover, a removed file.
    let mut fs = Fs::new();
    let x = file(&mut fs);
    let bad = Op::SetLkWait(req(x, 1, W, 9, 1));
    assert_eq!(fs.run_client(1, bad), err(Errno::EINVAL));
    let unlock = Op::SetLkWait(req(x, 1, UN, 0, 9));
    assert_eq!(fs.run_client(1, unlock), err(Errno::EINVAL));
    let stale = FileHandle {
        generation: x.generation + 1,
        ..x
    };
    assert_eq!(
        setlkw(&mut fs, 1, 1, stale, LockKind::Write),
        err(Errno::ESTALE)
    );
}
