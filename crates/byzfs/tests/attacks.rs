//! Aardvark's attacks on real processes (issue #29; the measured version is `byzfs bench
//! attack`, docs/BENCHMARKS.md "Under attack"): `byzfs replica --service kv` processes on
//! loopback, one of them started with the test-only `--attack MODE` (builds with the feature
//! `byzantine` only), and a correct client that must keep completing requests.
//!
//! * a primary that holds every PRE-PREPARE just under the view-change timeout is voted out
//!   by its backups' throughput watch within seconds (the timer alone would let it keep its
//!   view, one request per 4.5 s);
//! * a primary that sends half the backups a different PRE-PREPARE for every slot is voted
//!   out long before the 5 s timer, and the client's requests complete;
//! * a backup flooding garbage is shed by every correct replica (its link closed, its
//!   handshakes refused), and the client's requests keep completing.
//!
//! Each test is bounded (every wait has a deadline) and stops its processes itself.

#![cfg(feature = "byzantine")]

use crate::common;

use byzfs_net::{ByzClient, NodeStatus};
use common::{put, rt, serial, Procs};
use std::time::{Duration, Instant};

/// Replica `who` runs `--attack mode`; the others are correct.
fn cluster_with_attacker(who: usize, mode: &str) -> Procs {
    let mut extra = vec![Vec::new(); 4];
    extra[who] = vec!["--attack".to_string(), mode.to_string()];
    Procs::with("memory", "kv", extra)
}

/// `count` puts by each of `clients` concurrent clients, with the time they took.
fn puts(p: &Procs, clients: usize, count: usize) -> Duration {
    let (cluster, cred) = (p.cluster.clone(), p.credential());
    rt().block_on(async move {
        let mut cs = Vec::new();
        for _ in 0..clients {
            cs.push(ByzClient::connect(&cluster, &cred).await.expect("client"));
        }
        let started = Instant::now();
        let mut runs = tokio::task::JoinSet::new();
        for (j, mut c) in cs.into_iter().enumerate() {
            runs.spawn(async move {
                for i in 0..count {
                    put(&mut c, &format!("k{j}-{i}"), "v").await;
                }
            });
        }
        while let Some(r) = runs.join_next().await {
            r.expect("a client task panicked");
        }
        started.elapsed()
    })
}

fn correct(all: &[NodeStatus], attacker: u32) -> impl Iterator<Item = &NodeStatus> {
    all.iter().filter(move |s| s.replica != attacker)
}

/// Replica 0, the primary of view 0, attacks with `mode` while `clients` clients make 20
/// puts each: the puts complete within 15 s, and the correct replicas move past view 0 on
/// the complaints of at least `f+1` of them (the throughput watch, not the 5 s timer).
fn primary_voted_out(mode: &str, clients: usize) {
    let _g = serial();
    let p = cluster_with_attacker(0, mode);
    let took = puts(&p, clients, 20);
    assert!(took < Duration::from_secs(15), "the puts took {took:?}");
    let all = p.wait_until("a view past the faulty primary's", |all| {
        correct(all, 0).all(|s| s.view >= 1 && s.has_new_view)
    });
    let complaints: u64 = correct(&all, 0).map(|s| s.core.monitor_complaints).sum();
    assert!(complaints >= 2, "f+1 backups complained: {complaints}");
    let logs: String = (1..4).map(|i| p.log(i)).collect();
    assert!(logs.contains("the primary's throughput fell short under load; voting it out"));
}

/// With the timer alone each put would wait 4.5 s for its held PRE-PREPARE.
#[test]
fn a_slow_primary_is_voted_out_by_its_backups() {
    primary_voted_out("slow-primary", 1);
}

/// Several clients, so that batches hold several requests: the variant reorders them (a
/// batch of one has no valid variant but an empty one, which backups refuse).
#[test]
fn an_equivocating_primary_is_voted_out_before_the_timer() {
    primary_voted_out("equivocate", 4);
}

#[test]
fn a_flooding_backup_is_shed_and_the_cluster_keeps_serving() {
    let _g = serial();
    let p = cluster_with_attacker(1, "garbage");
    let took = puts(&p, 1, 50);
    assert!(took < Duration::from_secs(20), "50 puts took {took:?}");
    let all = p.wait_until("every correct replica shedding the flooder", |all| {
        correct(all, 1).all(|s| s.net.dropped.get("shed").copied().unwrap_or(0) > 0)
    });
    for s in correct(&all, 1) {
        // Every reason counts: garbage with a real header may fail as `malformed`,
        // `bad_auth`, `wrong_epoch`, `invalid`, ...
        let useless: u64 = s.core.dropped.values().sum();
        assert!(
            useless >= 2_000,
            "replica {} shed the flooder after only {useless} useless frames",
            s.replica
        );
        assert_eq!((s.view, s.has_new_view), (0, true), "no view change");
    }
    assert!(p
        .log(0)
        .contains("peer floods useless frames; shedding its link"));
}
