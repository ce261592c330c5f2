//! The agreed capacity (`byzfs_fs::capacity`): replicas' reports of what their disks hold
//! lower what `statfs` shows and where `ENOSPC` starts, by the `(f+1)`-th smallest report,
//! and only a replica's own client can report for it.

use crate::common;

use byzfs_fs::config::Reporters;
use byzfs_fs::{Errno, FsConfig, Op, Reply, StatFs};
use common::*;

const MIB: u64 = 1 << 20;
const REPORTERS: Reporters = Reporters {
    first: 100,
    session_bits: 40,
    replicas: 4,
};

/// A client session of replica `r`'s own certificate.
fn reporter(r: u64) -> u64 {
    (100 + r) << 40 | 12345
}

fn fs() -> Fs {
    Fs::with_config(FsConfig {
        capacity_bytes: 64 * MIB,
        max_inodes: 1024,
        reporters: Some(REPORTERS),
        ..small_config()
    })
}

fn statfs(fs: &mut Fs) -> StatFs {
    match fs.run(Op::StatFs) {
        Ok(Reply::StatFs(s)) => s,
        other => panic!("statfs: {other:?}"),
    }
}

fn report(fs: &mut Fs, client: u64, replica: u32, bytes: u64) -> Result<Reply, Errno> {
    fs.run_client(client, Op::ReportCapacity { replica, bytes })
}

fn capacity(bytes: u64, inodes: u64, used: u64, files: u64) -> StatFs {
    StatFs {
        block_size: 4096,
        blocks: bytes / 4096,
        blocks_free: (bytes - used) / 4096,
        files: inodes,
        files_free: inodes - files,
        name_max: 255,
    }
}

#[test]
fn reports_lower_the_capacity_by_the_f_plus_first_smallest() {
    let mut fs = fs();
    assert_eq!(
        statfs(&mut fs),
        capacity(64 * MIB, 1024, 0, 1),
        "as configured"
    );

    // One replica (perhaps a faulty one) reporting little changes nothing.
    assert_eq!(report(&mut fs, reporter(3), 3, 0), Ok(Reply::Done));
    assert_eq!(statfs(&mut fs), capacity(64 * MIB, 1024, 0, 1));

    // A second one does: the second smallest of (0, 16 MiB, 64, 64).
    assert_eq!(report(&mut fs, reporter(1), 1, 16 * MIB), Ok(Reply::Done));
    assert_eq!(
        statfs(&mut fs),
        capacity(16 * MIB, 256, 0, 1),
        "bytes and inodes scale down"
    );

    // ENOSPC where that capacity ends.
    let f = fs.create(ROOT, "f");
    let mib: Vec<u8> = vec![7; MIB as usize];
    for i in 0..16 {
        fs.write(f.fh, i * MIB, &mib).unwrap();
    }
    assert_eq!(fs.write(f.fh, 16 * MIB, &mib), Err(Errno::ENOSPC));
    assert_eq!(statfs(&mut fs), capacity(16 * MIB, 256, 16 * MIB, 2));

    // Replica 3's disk was freed: (16 MiB, 64, 64, 1 GiB) — 64 MiB again, never above the
    // configured capacity.
    assert_eq!(report(&mut fs, reporter(3), 3, 1 << 30), Ok(Reply::Done));
    assert_eq!(statfs(&mut fs), capacity(64 * MIB, 1024, 16 * MIB, 2));
    assert!(matches!(
        fs.write(f.fh, 16 * MIB, &mib),
        Ok(Reply::Write { .. })
    ));
}

#[test]
fn only_a_replicas_own_client_reports_for_it() {
    let mut fs = fs();
    let low = 1 << 20;
    for (client, replica) in [
        (9, 0),                       // an ordinary client
        (reporter(1), 0),             // another replica's client
        (reporter(4), 4),             // no replica 4 in a cluster of four
        ((99 << 40) | 1, 0),          // below the reserved range
        (reporter(0) + (1 << 40), 0), // replica 1's certificate
    ] {
        assert_eq!(
            report(&mut fs, client, replica, low),
            Err(Errno::EPERM),
            "client {client:#x} for replica {replica}"
        );
    }
    for r in 0..2 {
        assert_eq!(report(&mut fs, reporter(r), r as u32, low), Ok(Reply::Done));
    }
    assert_eq!(
        statfs(&mut fs).blocks,
        low / 4096,
        "the genuine reports count"
    );

    // A cluster that names no reporters takes no reports at all.
    let mut plain = Fs::new();
    assert_eq!(report(&mut plain, reporter(0), 0, low), Err(Errno::EPERM));
}
