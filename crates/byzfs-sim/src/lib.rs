//! # byzfs-sim — a deterministic simulator for the ByzFS PBFT core
//!
//! Runs the real sans-IO replicas and clients of `byzfs-bft` in one process on a virtual
//! clock, with a seeded network (loss, duplication, reordering, replay, corruption,
//! partitions), crashes and restarts, clock skew and drift, Byzantine replicas that forge only with
//! their own keys, twins, faulty clients, and online checkers of the invariants of
//! docs/PROTOCOL.md §6.6. One `u64` seed determines everything; a failing seed replays exactly.
//!
//! The replicas run the key-value service, or, in the `fs-` families ([`FS_FAMILIES`],
//! `--scenario fs-all`), the real file service (`byzfs_fs::FileService` on its in-memory
//! store) with a workload of file operations from several certified clients, its results
//! checked against a model file system and every correct replica's checkpoints read back as
//! file trees and compared with each other and the model ([`fs`], `checker::fs_results`,
//! `checker::fs_tree`). [`service::SimService`] is the one replica type over both.
//!
//! Layout: [`rng`], [`queue`], [`clock`], [`network`], [`partition`] (the world);
//! [`node`], [`byzantine`], [`workload`] (who acts); [`service`] (what the replicas run);
//! [`checker`] (the oracle, one file per invariant) with the reference [`kv`] and [`fs`]
//! models; [`scenario`] and [`fault`] (what happens); [`mod@run`] (one seed → report) and
//! [`trace`]; [`vc_history`] directs one scenario family.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod byzantine;
pub mod checker;
pub mod clock;
pub mod disk_queue;
pub mod fault;
pub mod fs;
pub mod kv;
pub mod network;
pub mod node;
pub mod partition;
pub mod queue;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod service;
pub mod trace;
pub mod vc_history;
pub mod workload;

pub use run::{run, RunConfig, RunReport};
pub use scenario::{Family, FAMILIES, FS_FAMILIES};
