//! What a write-back request waits to do with its answer (`writeback.rs` `answered` does
//! it): the queue of early answers with the held writes that joined its batch, held writes
//! of one file or several, or handles reserved ahead (`handles.rs`).

use byzfs_fs::{Credentials, Op};

/// What to do with a write-back request's answer.
pub(crate) enum Then {
    /// The queue of early answers, with the writes that joined it.
    Queue(QueueSent),
    /// Held writes of several files, or one file's.
    Writes(WritesSent),
    /// Handles reserved ahead (`handles.rs`).
    Reserved,
    /// A held file given back (`held_files.rs`).
    Returned(u64),
}

/// The queue's batch (`writeback.rs` `queue`).
pub(crate) struct QueueSent {
    pub(crate) cred: Credentials,
    /// Operations in the batch.
    pub(crate) n: usize,
    /// Files whose held writes joined it, in order, and those writes (its last ones).
    pub(crate) joined: Vec<u64>,
    pub(crate) writes: Vec<Op>,
}

/// Held writes, one file's or several's in one batch (`writeback.rs` `writes`).
pub(crate) struct WritesSent {
    pub(crate) cred: Credentials,
    pub(crate) inos: Vec<u64>,
    pub(crate) ops: Vec<Op>,
}
