//! Every integration test of this crate, one module per file, in one binary: linking a
//! binary per file cost CI about 6 s of CPU each (issue #44, docs/BENCHMARKS.md "CI's
//! time"). Tests that must not overlap take `common::serial()` (one lock for the whole binary;
//! `sites` keeps its own for its namespaces). Run one file's tests with
//! `cargo test -p byzfs --features byzantine --test integration -- FILE::`.

mod common;

mod attacks;
mod cli;
mod df;
mod dir_delegations;
mod encryption;
mod failover;
mod faults;
mod file_delegations;
mod fsbench;
mod grants;
mod groups;
mod hostile;
mod lanes;
mod large_files;
mod locks;
mod mount;
mod posix;
mod replica_dies;
mod replica_down;
mod restart;
mod sigstop;
mod sites;
