//! Lock delegations ([`byzfs_fs::delegation`]): granted to a lone locker, recalled by
//! another client's lock operation, given back with the locks held then, lapsing with the
//! holder's lease.

use crate::common;

use byzfs_bft::Service;
use byzfs_fs::proto::lock::{LockKind, Returned};
use byzfs_fs::proto::request::{decode_result, Request};
use byzfs_fs::{Errno, FileHandle, FsResult, Op, Reply};
use common::*;

const R: Option<LockKind> = Some(LockKind::Read);
const W: Option<LockKind> = Some(LockKind::Write);

fn op(fh: FileHandle, owner: u64, kind: Option<LockKind>, start: u64, end: u64) -> Op {
    Op::SetLk(req(fh, owner, kind, start, end))
}

fn delegate(
    fs: &mut Fs,
    client: u64,
    fh: FileHandle,
    owner: u64,
    kind: Option<LockKind>,
    (start, end): (u64, u64),
) -> FsResult {
    fs.run_client(client, Op::LockDelegate(req(fh, owner, kind, start, end)))
}

fn getlk(fs: &mut Fs, client: u64, fh: FileHandle, start: u64, end: u64) -> FsResult {
    fs.run_client(
        client,
        Op::GetLk {
            fh,
            owner: 1,
            kind: LockKind::Write,
            start,
            end,
        },
    )
}

/// `Recalls` for `client` through the read-only path, as a mount polls it.
fn recalls(fs: &mut Fs, client: u64) -> Vec<u64> {
    let bytes = Request::new(fs.cred.clone(), Op::Recalls).encode();
    assert!(fs.s.is_read_only(&bytes));
    match decode_result(&fs.s.execute_read_only(client, &bytes)) {
        Some(Ok(Reply::Recalls(v))) => v,
        r => panic!("recalls: {r:?}"),
    }
}

fn returned(owner: u64, kind: LockKind, start: u64, end: u64) -> Returned {
    Returned {
        owner,
        kind,
        start,
        end,
        pid: 100 + owner as u32,
    }
}

fn give_back(fs: &mut Fs, client: u64, fh: FileHandle, locks: Vec<Returned>) -> FsResult {
    fs.run_client(client, Op::ReturnDelegation { fh, locks })
}

fn file(fs: &mut Fs) -> FileHandle {
    fs.create(ROOT, "f").fh
}

#[test]
fn a_lone_locker_gets_the_delegation_and_another_clients_lock_recalls_it() {
    let mut fs = Fs::new();
    let f = file(&mut fs);
    match delegate(&mut fs, 1, f, 1, W, (0, 9)) {
        Ok(Reply::Delegated { lapsed, attr, mine }) => {
            assert!(!lapsed);
            assert_eq!(attr.fh, f);
            assert_eq!(mine, vec![returned(1, LockKind::Write, 0, 9)]);
        }
        r => panic!("{r:?}"),
    }
    assert!(recalls(&mut fs, 1).is_empty());
    // Client 2's lock and test are not answered: the holder is asked to give it back.
    assert_eq!(fs.run_client(2, op(f, 1, W, 50, 60)), Ok(Reply::Recall));
    assert_eq!(getlk(&mut fs, 2, f, 0, 100), Ok(Reply::Recall));
    assert_eq!(delegate(&mut fs, 2, f, 1, R, (70, 70)), Ok(Reply::Recall));
    assert_eq!(recalls(&mut fs, 1), vec![f.ino], "listed once");
    assert!(recalls(&mut fs, 2).is_empty());
    // Client 2's unlock concerns none of client 1's locks: answered.
    assert!(matches!(
        fs.run_client(2, op(f, 1, None, 0, 100)),
        Ok(Reply::Lock { .. })
    ));
    // Meanwhile client 1 changed its locks locally: owner 1 dropped half, owner 3 reads.
    let now = vec![
        returned(1, LockKind::Write, 0, 4),
        returned(3, LockKind::Read, 20, 29),
    ];
    assert!(matches!(
        give_back(&mut fs, 1, f, now),
        Ok(Reply::Lock { lapsed: false, .. })
    ));
    assert!(recalls(&mut fs, 1).is_empty());
    // The replicas decide again, with client 1's locks as it gave them back.
    match getlk(&mut fs, 2, f, 0, 100) {
        Ok(Reply::Lock {
            conflict: Some(c), ..
        }) => assert_eq!((c.client, c.start, c.end, c.pid), (1, 0, 4, 101)),
        r => panic!("{r:?}"),
    }
    assert!(fs.run_client(2, op(f, 1, W, 5, 9)).is_ok(), "released part");
    assert_eq!(
        fs.run_client(2, op(f, 1, W, 25, 25)),
        Err(Errno::EAGAIN),
        "owner 3's read lock"
    );
    assert!(fs.run_client(2, op(f, 1, R, 25, 25)).is_ok());
    // Client 2 holds locks now: nobody gets the delegation.
    assert!(matches!(
        delegate(&mut fs, 1, f, 1, W, (90, 99)),
        Ok(Reply::Lock { .. })
    ));
    assert!(matches!(
        delegate(&mut fs, 2, f, 1, W, (80, 89)),
        Ok(Reply::Lock { .. })
    ));
}

#[test]
fn a_delegation_regranted_carries_every_lock_of_the_client() {
    let mut fs = Fs::new();
    let f = file(&mut fs);
    assert!(fs.run_client(1, op(f, 7, R, 0, 0)).is_ok());
    match delegate(&mut fs, 1, f, 8, W, (5, 5)) {
        Ok(Reply::Delegated { mine, .. }) => assert_eq!(
            mine,
            vec![
                returned(7, LockKind::Read, 0, 0),
                returned(8, LockKind::Write, 5, 5)
            ]
        ),
        r => panic!("{r:?}"),
    }
    // A conflict among the client's own owners is still refused when asked for.
    assert_eq!(
        delegate(&mut fs, 1, f, 9, W, (0, 0)),
        Err(Errno::EAGAIN),
        "owner 7 holds a read lock"
    );
}

#[test]
fn a_delegation_lapses_with_its_holders_lease() {
    let mut fs = Fs::new();
    let f = file(&mut fs);
    assert!(matches!(
        delegate(&mut fs, 1, f, 1, W, (0, 9)),
        Ok(Reply::Delegated { .. })
    ));
    // Renewed, it stays.
    fs.clock_us += 20_000_000;
    assert!(fs.run_client(1, Op::RenewLease).is_ok());
    fs.clock_us += 20_000_000;
    assert_eq!(fs.run_client(2, op(f, 1, W, 0, 9)), Ok(Reply::Recall));
    // Silent past the lease: the delegation and the locks are gone.
    fs.clock_us += 31_000_000;
    assert!(fs.run_client(2, op(f, 1, W, 0, 9)).is_ok());
    assert_eq!(
        give_back(&mut fs, 1, f, vec![returned(1, LockKind::Write, 0, 9)]),
        Err(Errno::ENOLCK)
    );
    // Its next lock operation says the lease lapsed, and clears the recall list.
    assert_eq!(recalls(&mut fs, 1), vec![f.ino]);
    match fs.run_client(1, op(f, 1, R, 50, 50)) {
        Ok(Reply::Lock { lapsed, .. }) => assert!(lapsed),
        r => panic!("{r:?}"),
    }
    assert!(recalls(&mut fs, 1).is_empty());
    assert_eq!(fs.run_client(1, op(f, 1, W, 0, 9)), Err(Errno::EAGAIN));
}

#[test]
fn bad_returns_are_refused_and_change_nothing() {
    let mut fs = Fs::new();
    let f = file(&mut fs);
    // Not held.
    assert_eq!(give_back(&mut fs, 1, f, Vec::new()), Err(Errno::ENOLCK));
    assert!(matches!(
        delegate(&mut fs, 1, f, 1, W, (0, 9)),
        Ok(Reply::Delegated { .. })
    ));
    // Another client cannot give it back.
    assert_eq!(give_back(&mut fs, 2, f, Vec::new()), Err(Errno::ENOLCK));
    // A range no lock covers.
    assert_eq!(
        give_back(&mut fs, 1, f, vec![returned(1, LockKind::Read, 9, 3)]),
        Err(Errno::EINVAL)
    );
    // Still held by client 1.
    assert_eq!(fs.run_client(2, op(f, 1, R, 0, 0)), Ok(Reply::Recall));
    let stale = FileHandle {
        ino: f.ino + 100,
        generation: 1,
    };
    assert_eq!(give_back(&mut fs, 1, stale, Vec::new()), Err(Errno::ESTALE));
}

#[test]
fn a_removed_file_leaves_no_delegation_record() {
    let run = |delegated: bool| {
        let mut fs = Fs::new();
        let f = file(&mut fs);
        let o = if delegated {
            Op::LockDelegate(req(f, 1, W, 0, 0))
        } else {
            op(f, 1, W, 0, 0)
        };
        assert!(fs.run_client(1, o).is_ok());
        assert!(fs
            .run(Op::Remove {
                dir: ROOT,
                name: b"f".to_vec()
            })
            .is_ok());
        fs.s.current_partition_digests()
    };
    assert_eq!(run(true), run(false));
}
