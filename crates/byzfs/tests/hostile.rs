//! A hostile client against real `byzfs replica --service fs` processes (issue #43 item 3).
//!
//! With an ordinary client key, one session sends: `Op::Batch` nested 200,000 deep, once
//! with the read-only flag (decoded in `is_read_only` before anything else) and once
//! ordered (agreed and logged before it executes); 1 MiB of random bytes, both ways; and
//! every kind of operation with out-of-range fields. Each gets an answer that decodes, no
//! replica exits, a fresh session is served, and after every replica is SIGKILLed and
//! restarted — replaying the logged requests — the cluster serves again with the four state
//! digests equal. Before the fix, the first request aborted all four replicas with a stack
//! overflow, and the ordered one did again at every restart.
//!
//! Every wait has a deadline and every process is killed when the test ends.

use crate::common;

use byzfs_fs::proto::lock::{LockKind, LockReq};
use byzfs_fs::{
    decode_result, Credentials, Errno, Extent, FileHandle, FsResult, Op, Reply, Request, SetAttr,
    SignedGrant, SpecialKind,
};
use byzfs_fuse::fsclient::signed_grant;
use byzfs_net::ByzClient;
use common::{rt, serial, tail, Procs};
use std::time::Duration;

/// Bound on one request (a restart's view change takes a few seconds).
const OP_TIMEOUT: Duration = Duration::from_secs(60);

/// `Op::Batch` nested `depth` deep around a `StatFs`, as root under `grant`, built as bytes.
fn deep_batch(depth: usize, grant: &SignedGrant) -> Vec<u8> {
    let plain = Request::granted(Credentials::root(), Op::StatFs, grant.clone()).encode();
    // Root's credentials take 3 bytes; StatFs's tag (16) follows, then the grant.
    assert_eq!(plain[3], 16);
    let mut b = plain[..3].to_vec();
    for _ in 0..depth {
        b.extend_from_slice(&[45, 1]); // Batch (tag 45) of one member
    }
    b.extend_from_slice(&plain[3..]);
    b
}

/// 1 MiB from a fixed xorshift sequence: the same garbage at every run.
fn garbage() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Every kind of operation, with fields out of range: offsets and lengths at the top of
/// their types, handles no one was given, names no file system accepts.
fn out_of_range() -> Vec<Op> {
    let bad = FileHandle {
        ino: u64::MAX,
        generation: u64::MAX,
    };
    let root = FileHandle::ROOT;
    let long = vec![b'x'; 4096];
    let lock = LockReq {
        fh: root,
        owner: u64::MAX,
        kind: Some(LockKind::Write),
        start: u64::MAX,
        end: 0,
        pid: u32::MAX,
    };
    vec![
        Op::GetAttr { fh: bad },
        Op::SetAttr {
            fh: root,
            set: SetAttr {
                mode: Some(u32::MAX),
                uid: Some(u32::MAX),
                gid: Some(u32::MAX),
                size: Some(u64::MAX),
                ..SetAttr::default()
            },
        },
        Op::Lookup {
            dir: root,
            name: long.clone(),
        },
        Op::Access {
            fh: root,
            mask: u32::MAX,
        },
        Op::ReadLink { fh: root },
        Op::Read {
            fh: root,
            offset: u64::MAX,
            count: u32::MAX,
        },
        Op::Write {
            fh: bad,
            offset: u64::MAX,
            data: vec![1; 100],
        },
        Op::Create {
            dir: root,
            name: b"a/b".to_vec(),
            mode: u32::MAX,
            exclusive: true,
        },
        Op::Mkdir {
            dir: root,
            name: Vec::new(),
            mode: u32::MAX,
        },
        Op::Symlink {
            dir: root,
            name: b"s".to_vec(),
            target: vec![b't'; 70_000],
        },
        Op::Mknod {
            dir: root,
            name: b"\0".to_vec(),
            kind: SpecialKind::BlockDevice(u64::MAX),
            mode: u32::MAX,
        },
        Op::Remove {
            dir: bad,
            name: b"..".to_vec(),
        },
        Op::Rmdir {
            dir: root,
            name: b".".to_vec(),
        },
        Op::Rename {
            from_dir: root,
            from_name: b"..".to_vec(),
            to_dir: bad,
            to_name: long.clone(),
        },
        Op::Link {
            fh: root,
            dir: root,
            name: b"root-again".to_vec(),
        },
        Op::ReadDir {
            dir: root,
            cookie: u64::MAX,
            max_entries: u32::MAX,
        },
        Op::Fsync { fh: bad },
        Op::Allocate {
            fh: root,
            end: u64::MAX,
        },
        Op::GetXattr {
            fh: root,
            name: long.clone(),
        },
        Op::SetXattr {
            fh: root,
            name: b"user.x".to_vec(),
            value: vec![0; 200_000],
            how: byzfs_fs::proto::op::XattrSet::Replace,
        },
        Op::WriteGather {
            fh: root,
            extents: (0..10_000)
                .map(|i| Extent {
                    offset: u64::MAX - i,
                    data: vec![1],
                })
                .collect(),
        },
        Op::GetLk {
            fh: root,
            owner: 0,
            kind: LockKind::Read,
            start: u64::MAX,
            end: 0,
        },
        Op::SetLk(lock),
        Op::SetLkWait(lock),
        Op::LockDelegate(lock),
        Op::CancelWait {
            fh: bad,
            owner: u64::MAX,
        },
        Op::SweepOrphans { after: u64::MAX },
        Op::SweepDir {
            dir: bad,
            after: u64::MAX,
        },
        Op::Reclaim { file: Some(bad) },
        Op::CopyRange {
            from: root,
            from_offset: u64::MAX,
            to: root,
            to_offset: u64::MAX,
            len: u32::MAX,
        },
        Op::Punch {
            fh: root,
            offset: u64::MAX,
            len: u32::MAX,
            keep_size: false,
        },
        Op::Seek {
            fh: root,
            offset: u64::MAX,
            hole: true,
        },
        Op::ReportCapacity {
            replica: u32::MAX,
            bytes: 0,
        },
        Op::ReserveInodes { count: u32::MAX },
        Op::MakeAt {
            time: None,
            at: bad,
            make: Box::new(Op::Mkdir {
                dir: root,
                name: b"m".to_vec(),
                mode: 0o755,
            }),
        },
        Op::Batch(vec![Op::StatFs; 64]),
        Op::DelegateDir { dir: bad },
        Op::ReturnDir { dir: root },
        Op::DelegateFile { file: bad },
        Op::ReturnFile { file: root },
        Op::WriteAt {
            time: byzfs_fs::Timestamp {
                secs: i64::MIN,
                nsecs: u32::MAX,
            },
            write: Box::new(Op::Write {
                fh: bad,
                offset: u64::MAX,
                data: vec![1; 9],
            }),
        },
        Op::SetGroup {
            dir: root,
            group: [0xff; 16],
        },
        Op::GroupGet { group: [0; 16] },
        Op::Signed {
            seq: u64::MAX,
            proofs: vec![byzfs_fs::proto::proof::WriterProof {
                group: [1; 16],
                version: u32::MAX,
                signature: vec![0; 64],
            }],
            op: Box::new(Op::Remove {
                dir: root,
                name: b"x".to_vec(),
            }),
            headers: vec![(root, vec![0; 100_000])],
            expect: Vec::new(),
        },
        Op::FileGroup { fh: bad },
        Op::ReadGather {
            fh: root,
            ranges: vec![(u64::MAX, u32::MAX); 16],
        },
    ]
}

/// Sends `bytes`, ordered or with the read-only flag, and decodes the answer.
async fn send(c: &mut ByzClient, bytes: Vec<u8>, read_only: bool) -> Option<FsResult> {
    let r = tokio::time::timeout(OP_TIMEOUT, c.invoke(bytes, read_only))
        .await
        .expect("the cluster answers within the timeout")
        .expect("the cluster answers");
    decode_result(&r)
}

/// A fresh session makes directory `name` at the root and reads its attributes back.
async fn fresh_session_is_served(p: &Procs, name: &str) {
    let mut c = tokio::time::timeout(OP_TIMEOUT, ByzClient::connect(&p.cluster, &p.credential()))
        .await
        .expect("connect timed out")
        .expect("connect");
    let grant = signed_grant(&p.credential()).expect("the cluster's client key has a grant");
    let mkdir = Op::Mkdir {
        dir: FileHandle::ROOT,
        name: name.as_bytes().to_vec(),
        mode: 0o755,
    };
    let made = send(
        &mut c,
        Request::granted(Credentials::root(), mkdir, grant.clone()).encode(),
        false,
    )
    .await;
    let Some(Ok(Reply::Made { entry, .. })) = made else {
        panic!("mkdir {name}: {made:?}")
    };
    let get = Request::granted(Credentials::root(), Op::GetAttr { fh: entry.fh }, grant).encode();
    assert_eq!(
        send(&mut c, get, true).await,
        Some(Ok(Reply::Attr(entry))),
        "getattr of {name}"
    );
}

fn all_running(p: &mut Procs) {
    for i in 0..4 {
        let exited = p.children[i]
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        assert!(
            exited.is_none(),
            "replica {i} exited ({exited:?}):\n{}",
            tail(&p.log(i))
        );
    }
}

#[test]
fn a_hostile_client_takes_no_replica_down() {
    let _s = serial();
    let mut p = Procs::with("disk", "fs", vec![Vec::new(); 4]);
    let cluster = p.cluster.clone();
    let cred = p.credential();
    let grant = signed_grant(&cred).expect("the cluster's client key has a grant");
    rt().block_on(async {
        let mut c = tokio::time::timeout(OP_TIMEOUT, ByzClient::connect(&cluster, &cred))
            .await
            .expect("connect timed out")
            .expect("connect");
        assert_eq!(
            Request::decode(&deep_batch(1, &grant)).map(|r| r.op),
            Some(Op::Batch(vec![Op::StatFs])),
            "the construction is right"
        );
        let deep = deep_batch(200_000, &grant);
        assert_eq!(
            send(&mut c, deep.clone(), true).await,
            Some(Err(Errno::EINVAL))
        );
        assert_eq!(send(&mut c, deep, false).await, Some(Err(Errno::EINVAL)));
        let junk = garbage();
        assert_eq!(
            send(&mut c, junk.clone(), true).await,
            Some(Err(Errno::EINVAL))
        );
        assert_eq!(send(&mut c, junk, false).await, Some(Err(Errno::EINVAL)));
        for op in out_of_range() {
            let name = op.name();
            let bytes = Request::granted(Credentials::root(), op, grant.clone()).encode();
            let read_only = byzfs_fs::Op::is_read_only(
                &Request::decode(&bytes).expect("a well-formed request").op,
            );
            let answer = send(&mut c, bytes, read_only).await;
            assert!(answer.is_some(), "{name}: an answer that decodes");
        }
    });
    all_running(&mut p);
    rt().block_on(fresh_session_is_served(&p, "after-the-attack"));

    // Every replica restarts from its disk and replays the logged requests, the deep one
    // among them.
    p.kill(&[0, 1, 2, 3]);
    for i in 0..4 {
        p.start(i);
    }
    p.wait_reachable(&[0, 1, 2, 3]);
    rt().block_on(fresh_session_is_served(&p, "after-the-restart"));
    all_running(&mut p);
    p.wait_until("the four replicas in step", |s| {
        s.iter()
            .all(|x| x.last_executed == s[0].last_executed && x.state_digest == s[0].state_digest)
    });
}
