//! The sweep of hidden files that dead clients left in the orphan directory
//! (`crates/byzfs-fs/src/orphan.rs`): only files of clients whose lease is not current go,
//! other names and directories stay, the work per operation is bounded, and a sweep frees
//! what a `remove` would.

use crate::common;

use byzfs_fs::orphan::{hidden_name, ORPHAN_DIR, SWEEP_REMOVE};
use byzfs_fs::{Errno, FileHandle, Op, Reply, StatFs};
use common::*;

/// The orphan directory, made as the mount makes it.
fn orphan_dir(fs: &mut Fs) -> FileHandle {
    Fs::entry(fs.run(Op::Mkdir {
        dir: ROOT,
        name: ORPHAN_DIR.to_vec(),
        mode: 0o1777,
    }))
    .fh
}

/// Hides a new file of `client` in `dir` with `len` bytes of data.
fn hide(fs: &mut Fs, dir: FileHandle, client: u64, what: &str, len: usize) -> FileHandle {
    let name = String::from_utf8(hidden_name(client, what)).unwrap();
    let fh = fs.create(dir, &name).fh;
    if len > 0 {
        fs.write(fh, 0, &vec![7u8; len]).unwrap();
    }
    fh
}

/// One sweep by `client`.
fn sweep(fs: &mut Fs, client: u64, after: u64) -> (u32, Option<u64>) {
    match fs.run_client(client, Op::SweepOrphans { after }) {
        Ok(Reply::Swept { removed, next }) => (removed, next),
        other => panic!("sweep: {other:?}"),
    }
}

/// Sweeps until done; the files removed and the sweeps it took.
fn sweep_all(fs: &mut Fs, client: u64) -> (u32, u32) {
    let (mut total, mut rounds, mut after) = (0, 0, 0);
    loop {
        let (n, next) = sweep(fs, client, after);
        total += n;
        rounds += 1;
        match next {
            Some(c) => after = c,
            None => return (total, rounds),
        }
    }
}

fn statfs(fs: &mut Fs) -> StatFs {
    match fs.run(Op::StatFs) {
        Ok(Reply::StatFs(s)) => s,
        other => panic!("statfs: {other:?}"),
    }
}

#[test]
fn only_files_of_clients_without_a_current_lease_go() {
    let mut fs = Fs::new();
    let dir = orphan_dir(&mut fs);
    let before = statfs(&mut fs);
    // Client 1 holds its lease; client 2 never took one; client 3 is the sweeper.
    assert!(fs.run_client(1, Op::RenewLease).is_ok());
    let live = hide(&mut fs, dir, 1, "5-1", 100);
    let dead = hide(&mut fs, dir, 2, "6-1", 10_000);
    hide(&mut fs, dir, 2, "tmp-0", 0);
    let own = hide(&mut fs, dir, 3, "tmp-0", 0);
    // Not hidden names, and a directory with a hidden name: never touched.
    fs.create(dir, "notes.txt");
    fs.create(dir, ".byzfs-silly-tmp-2a-1");
    fs.mkdir(dir, &String::from_utf8(hidden_name(2, "d")).unwrap());
    // A dead client's hidden file with a second link elsewhere loses only the hidden name.
    let linked = hide(&mut fs, dir, 2, "tmp-1", 5);
    fs.run(Op::Link {
        fh: linked,
        dir: ROOT,
        name: b"kept".to_vec(),
    })
    .unwrap();
    let mtime = fs.getattr(dir).mtime;

    assert_eq!(sweep(&mut fs, 3, 0), (3, None));
    let mut names = fs.names(dir);
    names.sort();
    assert_eq!(
        names,
        [
            ".byzfs-silly-1-5-1",
            ".byzfs-silly-2-d",
            ".byzfs-silly-3-tmp-0",
            ".byzfs-silly-tmp-2a-1",
            "notes.txt"
        ]
    );
    assert_eq!(fs.run(Op::GetAttr { fh: dead }), Err(Errno::ESTALE));
    assert_eq!(fs.getattr(live).size, 100);
    assert_eq!(fs.getattr(own).nlink, 1, "the sweeper's own files stay");
    let kept = fs.getattr(linked);
    assert_eq!((kept.nlink, kept.size), (1, 5));
    assert!(fs.getattr(dir).mtime > mtime, "the directory changed");
    // Nothing left to do: a second sweep changes nothing.
    assert_eq!(sweep(&mut fs, 3, 0), (0, None));

    // Client 1 falls silent past the lease (30 s): its file goes at the next sweep.
    for _ in 0..2 {
        fs.clock_us += 10_000_000;
        assert!(fs.run_client(1, Op::RenewLease).is_ok());
    }
    assert_eq!(sweep(&mut fs, 3, 0), (0, None), "renewed: still alive");
    fs.clock_us += 31_000_000;
    assert_eq!(sweep(&mut fs, 3, 0), (1, None));
    assert_eq!(fs.run(Op::GetAttr { fh: live }), Err(Errno::ESTALE));
    // Back after the lapse, client 1 learns it (and its hidden files are gone).
    assert!(matches!(
        fs.run_client(1, Op::RenewLease),
        Ok(Reply::Lock { lapsed: true, .. })
    ));

    // The data went with the files: only the kept link, the sweeper's file, the
    // directory and the two plain files remain beyond what was there before.
    let after = statfs(&mut fs);
    assert_eq!(before.files_free - after.files_free, 5);
    assert_eq!(
        before.blocks_free - after.blocks_free,
        1,
        "5 bytes: one block"
    );
}

#[test]
fn large_directories_are_swept_in_bounded_steps() {
    let mut fs = Fs::new();
    let dir = orphan_dir(&mut fs);
    // 300 names that are not hidden files first, so one sweep's scan finds none to remove.
    for i in 0..300 {
        fs.create(dir, &format!("plain-{i}"));
    }
    let n = 2 * SWEEP_REMOVE + 10;
    for i in 0..n {
        hide(
            &mut fs,
            dir,
            40 + u64::from(i % 3),
            &format!("tmp-{i:x}"),
            1,
        );
    }
    let (first, next) = sweep(&mut fs, 1, 0);
    assert_eq!(first, 0, "the first 256 entries are plain files");
    assert!(next.is_some());
    let (removed, rounds) = sweep_all(&mut fs, 1);
    assert_eq!(removed, n);
    assert!(
        rounds >= 4,
        "at most {SWEEP_REMOVE} per sweep: {rounds} sweeps"
    );
    assert_eq!(fs.list(dir, 100).len(), 300);
}

#[test]
fn no_orphan_directory_is_nothing_to_do() {
    let mut fs = Fs::new();
    assert_eq!(sweep(&mut fs, 1, 0), (0, None));
    // A file of that name is not the orphan directory.
    fs.create(ROOT, ".byzfs-orphans");
    assert_eq!(sweep(&mut fs, 1, 0), (0, None));
    assert_eq!(sweep(&mut fs, 1, u64::MAX), (0, None));
}

#[test]
fn any_client_may_sweep_whatever_its_credentials() {
    let mut fs = Fs::new();
    let dir = orphan_dir(&mut fs);
    hide(&mut fs, dir, 2, "tmp-0", 0);
    // Files of root in a sticky directory: a user could not remove them, the sweep does.
    fs.cred = byzfs_fs::Credentials::user(1000, 1000);
    assert_eq!(sweep(&mut fs, 5, 0), (1, None));
}

#[test]
fn a_directory_of_its_own_is_swept_on_demand_and_can_then_be_removed() {
    // Where the orphan directory cannot be had, a client hides files in their own directory;
    // `SweepDir` removes those of clients without a current lease, as the orphan sweep does.
    let mut fs = Fs::new();
    let d = fs.mkdir(ROOT, "d").fh;
    assert!(fs.run_client(1, Op::RenewLease).is_ok());
    hide(&mut fs, d, 1, "5-1", 10);
    hide(&mut fs, d, 2, "6-1", 10_000);
    hide(&mut fs, d, 2, "tmp-0", 0);
    let rmdir = |fs: &mut Fs| {
        fs.run(Op::Rmdir {
            dir: ROOT,
            name: b"d".to_vec(),
        })
    };
    assert_eq!(rmdir(&mut fs), Err(Errno::ENOTEMPTY));
    let sweep_d =
        |fs: &mut Fs, client: u64| match fs.run_client(client, Op::SweepDir { dir: d, after: 0 }) {
            Ok(Reply::Swept { removed, next }) => (removed, next),
            other => panic!("sweep: {other:?}"),
        };
    // Any user may, without write permission on the directory: it removes only what its
    // owners removed already.
    fs.cred = byzfs_fs::Credentials::user(1000, 1000);
    assert_eq!(
        sweep_d(&mut fs, 3),
        (2, None),
        "client 2's files, not live client 1's"
    );
    fs.cred = byzfs_fs::Credentials::root();
    assert_eq!(
        rmdir(&mut fs),
        Err(Errno::ENOTEMPTY),
        "client 1's file stays"
    );
    // Client 1 sweeping finds only its own: nothing to do.
    assert_eq!(sweep_d(&mut fs, 1), (0, None));
    // Its lease lapses (30 s of agreed time); then it goes, and the directory with it.
    fs.clock_us += 31_000_000;
    assert_eq!(sweep_d(&mut fs, 3), (1, None));
    assert!(
        matches!(rmdir(&mut fs), Ok(Reply::Unlinked { .. })),
        "the directory is removed"
    );
    // Errors: a removed directory is stale, a file is not a directory.
    assert_eq!(
        fs.run(Op::SweepDir { dir: d, after: 0 }),
        Err(Errno::ESTALE)
    );
    let f = fs.create(ROOT, "f").fh;
    assert_eq!(
        fs.run(Op::SweepDir { dir: f, after: 0 }),
        Err(Errno::ENOTDIR)
    );
}
