//! Models of ByzFS's protocol rules, checked with [`stateright`] over every interleaving of
//! a small configuration (issue #49 item 2).
//!
//! [`fast_view_change`]: the fast path's view change (docs/plans/49-fast-path.md): replicas
//! accept PRE-PREPAREs and answer speculatively, clients complete on `3f+1` matching
//! answers or through a commit certificate, replicas change views, and each NEW-VIEW picks
//! every slot's batch by a [`rule::Rule`] from `2f+1` VIEW-CHANGEs, one of them from a
//! Byzantine replica that reports anything. The property: a batch that completed at a slot
//! is the one every later NEW-VIEW picks there. The rule ByzFS will implement keeps it
//! over `n = 4`, 3 views and 2 slots; Zyzzyva's published rule does not, and the checker
//! finds the "Revisiting Fast Practical Byzantine Fault Tolerance" counterexample.
//!
//! ```
//! use byzfs_model::fast_view_change::FastViewChange;
//! use byzfs_model::rule::Rule;
//! // One slot, two views: small enough for a doc test.
//! let report = FastViewChange::new(Rule::Walk, 3, 2, 1).check();
//! assert!(report.violations.is_empty());
//! assert!(report.states > 100);
//! ```

pub mod fast_view_change;
pub mod report;
pub mod rule;
