//! Partitioned, checkpointed key-value state with incremental digests. PLACEHOLDER.
