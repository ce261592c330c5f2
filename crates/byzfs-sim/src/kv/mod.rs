//! The key-value service the simulated cluster replicates, and the reference model the
//! checkers run over the agreed history (PROTOCOL.md §6.3 W-KV, §6.6 INV-REPLY).
//!
//! `byzfs_bft::services::kv` is being written concurrently. Until it lands, [`op`] and
//! [`service`] are local stand-ins with the agreed API (`KvOp`, `KvResult`, `KvService`);
//! switching to the real service is a change to the two `pub use` lines below (and deleting
//! the stand-ins). The reference [`model`] stays: it is the oracle.

pub mod model;
pub mod op;
pub mod service;

pub use model::KvModel;
pub use op::{KvOp, KvResult};
pub use service::KvService;
