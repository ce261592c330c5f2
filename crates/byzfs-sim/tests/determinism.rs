//! Same seed ⇒ byte-identical trace (docs/STYLE.md §7): every scenario is replayable from its seed.

use byzfs_sim::{run, Family, RunConfig};

fn traced(seed: u64, family: Family, replicas: Option<usize>) -> String {
    let cfg = RunConfig {
        trace: true,
        replicas,
        ..RunConfig::new(seed, family)
    };
    match run(&cfg) {
        Ok(r) => r.trace,
        Err(e) => panic!("seed {seed}: {e}"),
    }
}

#[test]
fn same_seed_same_trace() {
    for family in [
        Family::Net,
        Family::Partition,
        Family::Crash,
        Family::Twins,
        Family::Byzzfuzz,
        Family::BadClients,
    ] {
        for seed in [3, 11] {
            let a = traced(seed, family, None);
            let b = traced(seed, family, None);
            assert!(
                a.lines().count() > 10,
                "{family:?} seed {seed}: trace too short:\n{a}"
            );
            assert!(a == b, "{family:?} seed {seed}: traces differ");
        }
    }
}

#[test]
fn different_seeds_differ() {
    assert_ne!(
        traced(1, Family::BadClients, None),
        traced(2, Family::BadClients, None)
    );
}

#[test]
fn replay_command_reproduces_the_run() {
    // The replay line fixes --replicas to the drawn n; that must not change the run.
    for seed in 0..8 {
        let free = run(&RunConfig {
            trace: true,
            ..RunConfig::new(seed, Family::Partition)
        })
        .expect("plan");
        let fixed = traced(seed, Family::Partition, Some(free.n));
        assert!(
            free.trace == fixed,
            "seed {seed}: --replicas {} changed the run",
            free.n
        );
    }
}
