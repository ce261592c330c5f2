//! The simulated disk under a replica of the `fs-disk-…` families: its file service keeps
//! its state in a persistent [`LogStore`](byzfs_fs::store::LogStore) written to it, as a
//! `disk`-mode replica's does in `fs-state/`.
//!
//! It is the store's own in-memory medium, [`MemMedium`](byzfs_fs::store::MemMedium): it
//! holds what was written and what was synced, segment by segment. A process crash keeps
//! the first (the operating system still holds every write); a power cut keeps only the
//! second, so the store must reopen at its last sync and the replica must return it to the
//! checkpoint its own log names (`LogStore::reopen_at`). The node keeps the disk across its
//! crashes; an amnesia restart wipes it. A crashed process writes nothing more: each handle
//! belongs to one life of the replica (`MemMedium::crash`).

pub use byzfs_fs::store::MemMedium as SimDisk;

/// Segment length of a simulated replica's store: small, so that in a run of a few hundred
/// operations segments close and compaction runs (`LogStore::set_segment_bytes`).
pub const SEGMENT_BYTES: u64 = 32 << 10;
