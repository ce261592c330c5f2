//! Shared settings of the integration tests.

#![allow(dead_code)]

use byzfs_sim::checker::{durability, liveness, slow_view, stable_view, Violation};
use byzfs_sim::run::BUDGET;

/// Seeds per family (override with `BYZFS_SIM_SEEDS`).
pub fn seeds() -> u64 {
    std::env::var("BYZFS_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

/// With `BYZFS_SIM_SAFETY_ONLY=1`, liveness, durability (which needs a converged run) and
/// event-budget violations are tolerated: only safety is enforced. Off by default.
pub fn safety_only() -> bool {
    std::env::var_os("BYZFS_SIM_SAFETY_ONLY").is_some_and(|v| v != "0")
}

/// Whether a violation is tolerated in this test run.
pub fn tolerated(v: &Violation) -> bool {
    safety_only() && liveness_class(v)
}

/// Liveness, durability (which needs a converged run), stable-view (a view change where
/// none was due), slow-view (a slow primary's view that lasted) and event-budget violations.
pub fn liveness_class(v: &Violation) -> bool {
    [
        liveness::NAME,
        durability::NAME,
        stable_view::NAME,
        slow_view::NAME,
        BUDGET,
    ]
    .contains(&v.checker)
}
