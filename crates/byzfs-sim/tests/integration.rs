//! Every integration test of this crate, one module per file, in one binary: linking a
//! binary per file cost CI about 6 s of CPU each (issue #44, docs/BENCHMARKS.md "CI's
//! time"). Run one file's tests with `cargo test -p byzfs-sim --test integration -- FILE::`.

mod common;

mod determinism;
mod fs;
mod mutations;
mod oracle;
mod scenarios;
