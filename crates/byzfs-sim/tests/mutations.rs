//! Each deliberately broken rule (`--mutation NAME`) must be caught by a *safety* checker
//! within a batch of seeds of the families most likely to expose it. Slow in debug builds:
//! `cargo test --release -p byzfs-sim --test mutations -- --ignored`.

mod common;

use byzfs_bft::mutation::Mutation;
use byzfs_sim::checker::{durability, liveness, Violation};
use byzfs_sim::run::{BUDGET, PANIC};
use byzfs_sim::{run, Family, RunConfig};

/// A violation found by an oracle safety checker (not liveness, durability, the event
/// budget, or a panic — an assertion inside the replica is not the oracle catching it).
fn is_safety(v: &Violation) -> bool {
    ![liveness::NAME, durability::NAME, BUDGET, PANIC].contains(&v.checker)
}

fn caught(m: Mutation, families: &[Family], seeds: u64) -> Option<String> {
    for seed in 0..seeds {
        for &family in families {
            let cfg = RunConfig {
                mutation: Some(m),
                ..RunConfig::new(seed, family)
            };
            let report = run(&cfg).expect("plan");
            if let Some(v) = report.violations.iter().find(|v| is_safety(v)) {
                return Some(format!("{v} ({})", report.replay_command(Some(m))));
            }
        }
    }
    None
}

#[test]
#[ignore = "slow: run with --release -- --ignored"]
fn every_mutation_is_caught() {
    let families = [
        Family::Equivocate,
        Family::Twins,
        Family::Byzzfuzz,
        Family::VcLies,
        Family::Partition,
        Family::Crash,
    ];
    let mut missed = Vec::new();
    for m in Mutation::ALL {
        match caught(m, &families, common::seeds()) {
            Some(how) => eprintln!("{}: caught by {how}", m.name()),
            None => missed.push(m.name()),
        }
    }
    assert!(missed.is_empty(), "mutations not caught: {missed:?}");
}
