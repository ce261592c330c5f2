//! Each deliberately broken rule (`--mutation NAME`) must be caught by some checker within a
//! batch of seeds of the families most likely to expose it. Meaningless until the replica
//! makes progress (see `common::REPLICA_IMPLEMENTED`).

mod common;

use byzfs_bft::mutation::Mutation;
use byzfs_sim::{run, Family, RunConfig};

fn caught(m: Mutation, families: &[Family], seeds: u64) -> Option<String> {
    for seed in 0..seeds {
        for &family in families {
            let cfg = RunConfig {
                mutation: Some(m),
                ..RunConfig::new(seed, family)
            };
            let report = run(&cfg).expect("plan");
            if let Some(v) = report
                .violations
                .iter()
                .find(|v| !common::expected_while_placeholder(v))
            {
                return Some(format!("{v} ({})", report.replay_command(Some(m))));
            }
        }
    }
    None
}

#[test]
fn every_mutation_is_caught() {
    if !common::REPLICA_IMPLEMENTED {
        eprintln!("skipped: the replica is a placeholder");
        return;
    }
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
