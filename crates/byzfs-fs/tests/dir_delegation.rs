//! Directory delegations (`byzfs_fs::dir_delegation`): while one session holds a directory,
//! every other session's operation on its names is recalled and changes nothing; the holder
//! is asked to give it back; a lapsed lease ends it.

use crate::common;

use byzfs_bft::Service as _;
use byzfs_fs::{Errno, FileHandle, Op, Reply};
use common::*;

/// The harness's own client (`Fs::run`, `Fs::dump`), so the holder can look at the tree.
const HOLDER: u64 = 9;
const OTHER: u64 = 8;

fn create(dir: FileHandle, name: &str) -> Op {
    Op::Create {
        dir,
        name: name.into(),
        mode: 0o644,
        exclusive: true,
    }
}

#[test]
fn another_session_is_recalled_until_the_holder_gives_the_directory_back() {
    let mut fs = Fs::new();
    let d = fs.mkdir(ROOT, "d").fh;
    let elsewhere = fs.mkdir(ROOT, "e").fh;
    delegated(fs.run_client(HOLDER, Op::DelegateDir { dir: d }));
    // The holder works in it as usual.
    assert!(fs.run_client(HOLDER, create(d, "mine")).is_ok());
    let before = fs.dump();
    // Another session: recalled, whatever it does with names in `d`, nothing changed.
    let others = [
        create(d, "x"),
        Op::Lookup {
            dir: d,
            name: b"mine".to_vec(),
        },
        Op::ReadDir {
            dir: d,
            cookie: 0,
            max_entries: 10,
        },
        Op::Rename {
            from_dir: d,
            from_name: b"mine".to_vec(),
            to_dir: elsewhere,
            to_name: b"moved".to_vec(),
        },
        // A batch that names `d` once is recalled before any member runs.
        Op::Batch(vec![create(elsewhere, "first"), create(d, "second")]),
        Op::DelegateDir { dir: d },
    ];
    for op in others {
        let name = op.name();
        assert_eq!(fs.run_client(OTHER, op), Ok(Reply::Recall), "{name}");
    }
    assert_eq!(fs.dump(), before);
    // A read-only lookup is recalled too (it cannot ask the holder: its mount sends it
    // again, ordered).
    let lookup = Op::Lookup {
        dir: d,
        name: b"mine".to_vec(),
    };
    let bytes = byzfs_fs::Request::new(fs.cred.clone(), lookup.clone()).encode();
    let read_only = byzfs_fs::decode_result(&fs.s.execute_read_only(OTHER, &bytes));
    assert_eq!(read_only, Some(Ok(Reply::Recall)));
    // Other directories are not concerned.
    assert!(fs.run_client(OTHER, create(elsewhere, "free")).is_ok());
    // The holder is asked for `d`, gives it back, and the other session goes on.
    assert_eq!(recalls(&mut fs, HOLDER), [d.ino]);
    assert_eq!(
        fs.run_client(OTHER, Op::ReturnDir { dir: d }),
        Err(Errno::ENOLCK)
    );
    assert_eq!(
        fs.run_client(HOLDER, Op::ReturnDir { dir: d }),
        Ok(Reply::Done)
    );
    assert_eq!(recalls(&mut fs, HOLDER), Vec::<u64>::new());
    assert!(fs.run_client(OTHER, create(d, "x")).is_ok());
    assert!(Fs::entry(fs.run_client(OTHER, lookup)).fh.ino > 0);
    delegated(fs.run_client(OTHER, Op::DelegateDir { dir: d }));
}

#[test]
fn a_lapsed_lease_ends_the_delegation() {
    let mut fs = Fs::new();
    let d = fs.mkdir(ROOT, "d").fh;
    delegated(fs.run_client(HOLDER, Op::DelegateDir { dir: d }));
    assert_eq!(fs.run_client(OTHER, create(d, "x")), Ok(Reply::Recall));
    // The holder is silent for longer than a lease (30 s of agreed time).
    fs.clock_us += 31_000_000;
    assert!(fs.run_client(OTHER, create(d, "x")).is_ok());
    // Asking again renews the lease: a new delegation under its new epoch.
    delegated(fs.run_client(HOLDER, Op::DelegateDir { dir: d }));
    assert_eq!(fs.run_client(OTHER, create(d, "y")), Ok(Reply::Recall));
}

#[test]
fn a_batch_may_create_a_directory_and_take_its_delegation() {
    let mut fs = Fs::new();
    let first = match fs.run_client(HOLDER, Op::ReserveInodes { count: 2 }) {
        Ok(Reply::Reserved { first, .. }) => first,
        other => panic!("{other:?}"),
    };
    let batch = Op::Batch(vec![
        Op::MakeAt {
            time: None,
            at: first,
            make: Box::new(Op::Mkdir {
                dir: ROOT,
                name: b"new".to_vec(),
                mode: 0o755,
            }),
        },
        Op::DelegateDir { dir: first },
        create(first, "inside"),
    ]);
    match fs.run_client(HOLDER, batch) {
        Ok(Reply::Batch(r)) => assert_eq!(r.len(), 3),
        other => panic!("{other:?}"),
    }
    assert_eq!(fs.run_client(OTHER, create(first, "x")), Ok(Reply::Recall));
    let f = fs.create(ROOT, "f").fh;
    let not_a_dir = fs.run_client(HOLDER, Op::DelegateDir { dir: f });
    assert_eq!(not_a_dir, Err(Errno::ENOTDIR));
}

/// Only a caller who may change a directory's names may hold it: a client with no right
/// there could otherwise make every other session's lookups in it wait on it.
#[test]
fn only_a_writer_of_a_directory_may_hold_it() {
    let mut fs = Fs::new();
    let d = fs.mkdir(ROOT, "d").fh;
    let user = byzfs_fs::Credentials {
        uid: 1000,
        gid: 1000,
        groups: Vec::new(),
    };
    // Root's, 0755: the user may list it, not change it.
    assert_eq!(
        fs.run_as(&user, Op::DelegateDir { dir: d }),
        Err(Errno::EACCES)
    );
    assert_eq!(
        fs.run_as(&user, Op::DelegateDir { dir: ROOT }),
        Err(Errno::EACCES)
    );
    let set = byzfs_fs::SetAttr {
        mode: Some(0o777),
        ..Default::default()
    };
    assert!(fs.run(Op::SetAttr { fh: d, set }).is_ok());
    delegated(fs.run_as(&user, Op::DelegateDir { dir: d }));
}

/// A directory recalled and never given back by a holder that renews its lease: revoked
/// two leases after the first recall, as a file's (`file_delegation.rs`).
#[test]
fn a_recalled_directory_not_given_back_is_revoked_after_two_leases() {
    let mut fs = Fs::new();
    let d = fs.mkdir(ROOT, "d").fh;
    delegated(fs.run_client(HOLDER, Op::DelegateDir { dir: d }));
    assert_eq!(fs.run_client(OTHER, create(d, "x")), Ok(Reply::Recall));
    let recalled = fs.clock_us;
    // The holder renews its lease within each 30 s.
    for at in [25, 50] {
        fs.clock_us = recalled + at * 1_000_000;
        assert!(fs.run_client(HOLDER, Op::RenewLease).is_ok());
    }
    assert_eq!(fs.run_client(OTHER, create(d, "x")), Ok(Reply::Recall));
    fs.clock_us = recalled + 59_000_000;
    assert!(fs.run_client(HOLDER, Op::RenewLease).is_ok());
    assert!(fs.run_client(OTHER, create(d, "x")).is_ok());
    assert_eq!(
        fs.run_client(HOLDER, Op::ReturnDir { dir: d }),
        Err(Errno::ENOLCK)
    );
}
