//! Reads with a replica down (issue #47 item 1), on real `byzfs replica --service fs`
//! processes: a 20 MiB file written in 512 KiB operations, then read back in 1 MiB reads with
//! four replicas up, with a backup SIGKILLed, with a backup stopped (SIGSTOP), and with the
//! primary SIGKILLed. Before the fix a read whose designated replier was the dead replica
//! waited out a whole retransmission timeout (one read in four); now at most the first few
//! reads after a replica stops answering wait at most the grace, and the rest go to the
//! replicas that answer: the test checks that no read needed a retransmission, and prints
//! the times (BENCHMARKS.md "A replica down" measures them on a release mount).
//!
//! Every wait has a deadline; every process is killed when the test ends.

use crate::common;

use byzfs_fs::{decode_result, Credentials, FileHandle, FsResult, Op, Reply, Request, SignedGrant};
use byzfs_fuse::fsclient::signed_grant;
use byzfs_net::ByzClient;
use common::{rt, serial, Procs};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;
const FILE_MIB: usize = 20;
const OP_TIMEOUT: Duration = Duration::from_secs(60);

async fn call(c: &mut ByzClient, grant: &SignedGrant, op: Op, read_only: bool) -> FsResult {
    let bytes = Request::granted(Credentials::root(), op, grant.clone()).encode();
    let r = tokio::time::timeout(OP_TIMEOUT, c.invoke(bytes, read_only))
        .await
        .expect("answered within the timeout")
        .expect("answered");
    decode_result(&r).expect("a result that decodes")
}

/// Reads the file back and returns how long it took; checks every byte.
async fn read_back(c: &mut ByzClient, grant: &SignedGrant, fh: FileHandle) -> Duration {
    let start = Instant::now();
    for i in 0..FILE_MIB {
        let r = call(
            c,
            grant,
            Op::Read {
                fh,
                offset: (i * MIB) as u64,
                count: MIB as u32,
            },
            true,
        )
        .await;
        let Ok(Reply::Read { data, .. }) = r else {
            panic!("read {i}: {r:?}")
        };
        assert_eq!(data.len(), MIB, "read {i}");
        assert!(data.iter().all(|&b| b == i as u8), "read {i}: wrong bytes");
    }
    start.elapsed()
}

fn signal(p: &Procs, i: usize, sig: Signal) {
    let pid = p.children[i].as_ref().expect("running").id();
    kill(Pid::from_raw(pid as i32), sig).expect("signal");
}

#[test]
fn reads_keep_their_speed_with_a_replica_down() {
    let _s = serial();
    let mut p = Procs::with("memory", "fs", vec![Vec::new(); 4]);
    let cluster = p.cluster.clone();
    let cred = p.credential();
    let grant = signed_grant(&cred).expect("the cluster's client key has a grant");
    // One runtime for the whole test: the client's links live in it.
    let rt = rt();
    let mut c = rt.block_on(async {
        tokio::time::timeout(OP_TIMEOUT, ByzClient::connect(&cluster, &cred))
            .await
            .expect("connect timed out")
            .expect("connect")
    });
    let fh = rt.block_on(async {
        let made = call(
            &mut c,
            &grant,
            Op::Create {
                dir: FileHandle::ROOT,
                name: b"big".to_vec(),
                mode: 0o644,
                exclusive: true,
            },
            false,
        )
        .await;
        let Ok(Reply::Made { entry, .. }) = made else {
            panic!("create: {made:?}")
        };
        // Half a MiB per write: a request's operation is at most 1 MiB in all.
        for i in 0..2 * FILE_MIB {
            let w = call(
                &mut c,
                &grant,
                Op::Write {
                    fh: entry.fh,
                    offset: (i * MIB / 2) as u64,
                    data: vec![(i / 2) as u8; MIB / 2],
                },
                false,
            )
            .await;
            assert!(w.is_ok(), "write {i}: {w:?}");
        }
        entry.fh
    });

    let mut times = Vec::new();
    let mut measure = |what: &str, c: &mut ByzClient| {
        let before = c.stats();
        let t = rt.block_on(read_back(c, &grant, fh));
        let after = c.stats();
        eprintln!(
            "{what}: {FILE_MIB} MiB read in {:.3} s (retransmissions {}, full results asked \
             again {}, probes {})",
            t.as_secs_f64(),
            after.retransmissions - before.retransmissions,
            after.full_result_reasks - before.full_result_reasks,
            after.silent_probes - before.silent_probes,
        );
        assert_eq!(
            after.retransmissions, before.retransmissions,
            "{what}: a read waited for a retransmission timeout"
        );
        // The first read after a replica stops answering may wait the grace for a full
        // result; none after it.
        assert!(
            after.full_result_reasks - before.full_result_reasks <= 2,
            "{what}: {} reads asked again for their full result",
            after.full_result_reasks - before.full_result_reasks
        );
        times.push((what.to_string(), t));
    };
    measure("four up", &mut c);
    measure("four up, again", &mut c);

    // A backup killed (the view-0 primary is replica 0).
    p.kill(&[2]);
    measure("backup 2 killed", &mut c);
    measure("backup 2 killed, again", &mut c);
    p.start(2);
    p.wait_reachable(&[2]);
    // Replica 2 restarted empty (memory durability): it must catch up first, or a second
    // replica down would be one too many.
    p.wait_until("replica 2 caught up", |s| {
        s.iter()
            .all(|x| x.last_executed == s[0].last_executed && x.state_digest == s[0].state_digest)
    });

    // A backup stopped: connected, silent.
    signal(&p, 1, Signal::SIGSTOP);
    measure("backup 1 stopped", &mut c);
    signal(&p, 1, Signal::SIGCONT);

    // The primary killed: reads need no view change.
    p.kill(&[0]);
    measure("primary 0 killed", &mut c);
    eprintln!("{times:?}");
}
