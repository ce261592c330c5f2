//! # byzfs-bench — the ByzFS benchmarks
//!
//! `byzfs bench …` parses its flags into these commands and runs them:
//! * [`loopback`]: `micro` and `throughput`, the null service on processes started on
//!   loopback, beside the unreplicated baselines (issue #3, the seeds' Figures 6 and 7);
//! * [`fs`]: `andrew`, `postmark` and `largefile` on mounts of ByzFS, NO-REP, a FUSE
//!   passthrough (bindfs) and the local disk (issues #4 and #25);
//! * [`crypt`]: the cost of each cryptographic step of an encrypted mount (issue #28);
//! * [`sites`]: the sites-on-one-machine harness (`--sites PROFILE`) and `bench sites`, its
//!   check (issue #30).
//!
//! Each starts what it needs, prints a table and writes JSON rows (and SVG plots); the
//! commands and current results are in docs/BENCHMARKS.md.

pub(crate) mod cpu;
pub mod crypt;
pub mod fs;
pub mod loopback;
pub mod plot;
pub(crate) mod procs;
pub mod sites;
