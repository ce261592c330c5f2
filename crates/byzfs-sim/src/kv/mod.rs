//! The key-value service the simulated cluster replicates (`byzfs_bft::services::kv`), and the
//! reference model the checkers run over the agreed history (docs/PROTOCOL.md §6.3 W-KV, §6.6
//! INV-REPLY).

pub mod model;

pub use byzfs_bft::services::kv::{KvOp, KvResult, KvService, DEFAULT_CLOCK_TOLERANCE};
pub use model::{op_key, KvModel};
