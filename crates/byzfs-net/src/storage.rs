//! Durability of the core's promises (ARCHITECTURE.md rule 4; the `Persist` contract of
//! [`byzfs_bft::action`]).
//!
//! The event loop collects every [`PersistRecord`] of one drain (one or more handled inputs)
//! and hands them to [`Durability::commit`] in one call — a group commit — before it performs
//! any send of that drain. Delaying sends is always safe; sending before the commit is not.
//! Memory mode (the BFT library's BFS choice: stability through replication) makes the
//! commit a no-op; the `disk` mode (redb, one fsync per group) plugs in here.

use byzfs_bft::PersistRecord;

/// Where promises go.
pub trait Durability: Send {
    /// Makes every record durable before returning. An error stops the replica: it must
    /// not send votes it could forget.
    fn commit(&mut self, records: &[PersistRecord]) -> std::io::Result<()>;

    /// The mode's name, as shown by `byzfs status`.
    fn name(&self) -> &'static str;
}

/// Memory mode: nothing is written.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryDurability;

impl Durability for MemoryDurability {
    fn commit(&mut self, _records: &[PersistRecord]) -> std::io::Result<()> {
        Ok(())
    }

    fn name(&self) -> &'static str {
        "memory"
    }
}
