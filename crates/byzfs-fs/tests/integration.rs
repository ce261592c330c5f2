//! Every integration test of this crate, one module per file, in one binary: linking a
//! binary per file cost CI about 6 s of CPU each (issue #44, docs/BENCHMARKS.md "CI's
//! time"). Run one file's tests with `cargo test -p byzfs-fs --test integration -- FILE::`.

mod common;

mod batch;
mod bounded_work;
mod capacity;
mod crypt_group;
mod crypt_write;
mod delegations;
mod dir_delegation;
mod file_delegation;
mod garbage;
mod grants;
mod hostile_clients;
mod locks;
mod log_store;
mod model;
mod ops;
mod orphans;
mod pbft;
mod ranges;
mod reclaim;
mod replication;
mod reserve;
mod xattr;
