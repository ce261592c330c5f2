//! Services shipped with the library, both built on [`PartitionedState`](crate::state::PartitionedState):
//!
//! * [`null::NullService`]: the null operation of the PBFT micro-benchmarks (arguments and
//!   results of chosen sizes, almost no work), so benchmarks measure the protocol alone.
//! * [`kv::KvService`]: a small key-value store with agreed timestamps, for tests, the
//!   simulator's checkers and the crate's documented example.

pub mod kv;
pub mod null;
pub mod timestamp;
