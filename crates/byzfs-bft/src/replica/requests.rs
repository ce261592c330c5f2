//! The requests a replica holds and where each stands on its way to execution: stored,
//! queued for a sequence number, proposed, pending (docs/PROTOCOL.md §1.6, §1.10).

use super::request_store::RequestStore;
use crate::crypto::Digest;
use crate::ids::{ClientId, RequestId};
use crate::time::Time;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Client requests and their ordering bookkeeping.
#[derive(Clone, Debug, Default)]
pub(crate) struct Requests {
    /// Request bodies by request digest.
    pub store: RequestStore,
    /// Primary: requests waiting for a sequence number, in arrival order.
    pub queue: VecDeque<Digest>,
    /// Request digests already placed in a batch of an unexecuted slot (dedup).
    pub proposed: BTreeSet<Digest>,
    /// The `(client, rid)` of the requests in `proposed` (a request whose predecessor is
    /// neither here nor executed is kept back, §1.6).
    pub proposed_ids: BTreeSet<(ClientId, RequestId)>,
    /// The newest unexecuted request per client (drives the view-change timer, primary too).
    pub pending: BTreeMap<ClientId, (RequestId, Digest)>,
    /// Backup: pending big requests not yet pre-prepared, since the STATUS tick that first
    /// found them so, and those already forwarded to the primary in this view (see
    /// `forward_late_big_requests`).
    pub late_big: BTreeMap<Digest, Time>,
    pub forwarded_big: BTreeSet<Digest>,
    /// Clients proven faulty to this replica (a good MAC over a bad signature, §5.3). Their
    /// frames on their own connections are dropped unheard by the runtime
    /// ([`super::Replica::is_blacklisted`]); here their MAC alone no longer authenticates
    /// anything: each of their requests (forwarded, or in a batch) needs its signature.
    pub blacklist: BTreeSet<ClientId>,
}
