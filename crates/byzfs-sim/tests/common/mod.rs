//! Shared settings of the integration tests.

#![allow(dead_code)]

use byzfs_sim::checker::{durability, liveness, Violation};
use byzfs_sim::run::BUDGET;

/// Whether `byzfs_bft::Replica`/`Client` make progress yet. While they are placeholders, runs
/// can only check safety: liveness (and durability, which needs a converged run) are
/// expected to fail. Flip to `true` once the replica lands.
pub const REPLICA_IMPLEMENTED: bool = false;

/// Seeds per family (override with `BYZFS_SIM_SEEDS`).
pub fn seeds() -> u64 {
    std::env::var("BYZFS_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

/// Whether a violation is one the placeholder replica is expected to cause.
pub fn expected_while_placeholder(v: &Violation) -> bool {
    !REPLICA_IMPLEMENTED && [liveness::NAME, durability::NAME, BUDGET].contains(&v.checker)
}
