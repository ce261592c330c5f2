//! Deliberately broken store rules (test-only switch, feature `mutations`), in the code that
//! makes tentative execution undoable: the rollback, checkpoints and exports of
//! [`crate::store::MemStore`] and of [`crate::store::LogStore`]'s index.
//! The simulator's file-service checkers must catch each one (`byzfs-sim --mutation NAME`
//! in an `fs-` family). Production builds do not compile this module.

/// One broken rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreMutation {
    /// A rollback leaves in place the keys created after the checkpoint (their undo entry
    /// says "absent") while it still takes them out of the partition sums: the digests say
    /// the checkpoint was restored, the content does not.
    RollbackKeepsCreated,
    /// A checkpoint that replaces held ones at or above its sequence number drops their undo
    /// logs instead of merging them into the previous checkpoint's: a later rollback to that
    /// checkpoint restores only part of it.
    CheckpointDropsUndo,
    /// A held checkpoint's partitions are exported as they are live, without undoing the
    /// changes made since: what a fetcher (or a reader of the checkpoint) gets is not the
    /// checkpoint its digests describe.
    ExportLive,
}

impl StoreMutation {
    /// Every mutation.
    pub const ALL: [StoreMutation; 3] = [
        StoreMutation::RollbackKeepsCreated,
        StoreMutation::CheckpointDropsUndo,
        StoreMutation::ExportLive,
    ];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            StoreMutation::RollbackKeepsCreated => "store-rollback-keeps-created",
            StoreMutation::CheckpointDropsUndo => "store-checkpoint-drops-undo",
            StoreMutation::ExportLive => "store-export-live",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(s: &str) -> Option<StoreMutation> {
        StoreMutation::ALL.into_iter().find(|m| m.name() == s)
    }
}
