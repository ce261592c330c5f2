//! What this replica knows of its peers from their STATUS messages, and when it answers
//! each peer's repeated asks next (docs/PROTOCOL.md §1.3).

use super::answer_gap::AnswerGaps;
use super::uplink::Uplink;
use crate::ids::{ReplicaId, Seq, View};
use std::collections::BTreeMap;

/// The peers' reported progress, and the pace of our answers to them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Peers {
    /// Each peer's last executed sequence number from its latest STATUS.
    pub executed: BTreeMap<ReplicaId, Seq>,
    /// Each peer's view, and whether it holds that view's NEW-VIEW, from its latest STATUS.
    pub views: BTreeMap<ReplicaId, (View, bool)>,
    /// When each peer's repeated ask (a body, a batch, a NEW-VIEW or VIEW-CHANGE, a
    /// checkpoint, the slots of a stuck peer; and our own VIEW-CHANGE's rebroadcast) is
    /// answered next: the gap doubles (`answer_gap.rs`, used by `status.rs`).
    pub answer_gaps: AnswerGaps,
    /// When the big bodies we sent will have crossed our link (`uplink.rs`).
    pub uplink: Uplink,
}
