//! Identifiers: replicas, clients, views and sequence numbers (docs/PROTOCOL.md §1.1 notation).

use serde::{Deserialize, Serialize};

/// A replica's index, `0..n`.
pub type ReplicaId = u32;
/// A client's identifier. Client ids live in their own space, separate from replica ids.
pub type ClientId = u64;
/// A view number; the primary of view `v` is `v mod n`.
pub type View = u64;
/// A sequence number assigned by the primary to a batch.
pub type Seq = u64;
/// A client's request id (timestamp `t`), strictly increasing per client.
pub type RequestId = u64;

/// Who sent a message: a replica or a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Principal {
    /// A replica, by index.
    Replica(ReplicaId),
    /// A client, by id.
    Client(ClientId),
}
