//! What a replica's durability wrote, counted where it is handed to the file system: the
//! figures `byzfs status`, Prometheus and the file-system benchmarks divide per operation
//! (docs/BENCHMARKS.md "Replicas that write what they store once").

use serde::{Deserialize, Serialize};

/// Running totals since the replica started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskCounters {
    /// Bytes appended to the write-ahead log (frame headers included).
    pub log_bytes: u64,
    /// Log frames appended.
    pub log_frames: u64,
    /// `fdatasync`s of log segments.
    pub log_syncs: u64,
    /// Durable redb transactions (views, abstentions, stored checkpoints, the clean-stop
    /// mark): one `fsync` of the database file each (redb's default one-phase commit).
    pub db_commits: u64,
}

impl DiskCounters {
    /// Every synchronous write: log syncs and database commits.
    pub fn syncs(&self) -> u64 {
        self.log_syncs + self.db_commits
    }
}
