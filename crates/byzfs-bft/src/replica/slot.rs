//! One sequence number's log entry and its certificates (docs/PROTOCOL.md §1.5 predicates).

use crate::crypto::Digest;
use crate::ids::{ReplicaId, View};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Bound on Q-info entries kept per sequence number (distinct digests pre-prepared across
/// views). Dropping the oldest can only cost liveness (fewer positive proofs), never safety.
pub(crate) const PP_INFO_MAX: usize = 4;

/// The accepted PRE-PREPARE of the current view.
#[derive(Clone, Debug)]
pub(crate) struct Accepted {
    pub digest: Digest,
    /// The primary's original frame (relayed on STATUS; its authenticator covers every
    /// replica). `None` when rebuilt from a NEW-VIEW.
    pub frame: Option<Arc<[u8]>>,
}

/// A pre-prepare whose embedded requests this replica could not authenticate; accepted once
/// `f` other replicas prepared the same digest (§1.14).
#[derive(Clone, Debug)]
pub(crate) struct Unverified {
    pub digest: Digest,
    pub frame: Arc<[u8]>,
}

/// Log entry for one sequence number.
#[derive(Clone, Debug, Default)]
pub(crate) struct Slot {
    /// Accepted pre-prepare in the current view.
    pub pre_prepare: Option<Accepted>,
    /// A pre-prepare waiting for `f` matching PREPAREs.
    pub unverified: Option<Unverified>,
    /// PREPAREs of the current view, by sender.
    pub prepares: BTreeMap<ReplicaId, Digest>,
    /// COMMITs of the current view, by sender (own included).
    pub commits: BTreeMap<ReplicaId, Digest>,
    /// Whether this replica sent PREPARE (backup) in the current view.
    pub sent_prepare: bool,
    /// Whether it withheld its PREPARE here in the current view (counted once).
    pub withheld_prepare: bool,
    /// Whether this replica sent COMMIT in the current view.
    pub sent_commit: bool,
    /// Whether the commit certificate of the current view was reported.
    pub committed_reported: bool,
    /// Own frames of the current view, for retransmission.
    pub own_prepare: Option<Arc<[u8]>>,
    /// Own COMMIT frame.
    pub own_commit: Option<Arc<[u8]>>,
    /// P-info: latest view with a complete prepared certificate, and its digest (survives
    /// view changes; reported in VIEW-CHANGE).
    pub prepared_info: Option<(View, Digest)>,
    /// Q-info: for each digest, the latest view in which this replica sent PRE-PREPARE or
    /// PREPARE for it (survives view changes).
    pub pp_info: BTreeMap<Digest, View>,
}

impl Slot {
    /// Clears the per-view state at a view change, keeping P- and Q-info.
    pub fn clear_view_state(&mut self) {
        self.pre_prepare = None;
        self.unverified = None;
        self.prepares.clear();
        self.commits.clear();
        self.sent_prepare = false;
        self.withheld_prepare = false;
        self.sent_commit = false;
        self.committed_reported = false;
        self.own_prepare = None;
        self.own_commit = None;
    }

    /// Records that this replica sent a PRE-PREPARE or PREPARE for `d` in view `v`.
    pub fn note_pre_prepared(&mut self, d: Digest, v: View) {
        let e = self.pp_info.entry(d).or_insert(v);
        if *e < v {
            *e = v;
        }
        while self.pp_info.len() > PP_INFO_MAX {
            // Evict the entry with the lowest view (ties: lowest digest), deterministically.
            let Some((&victim, _)) = self.pp_info.iter().min_by_key(|(d, v)| (**v, **d)) else {
                break;
            };
            self.pp_info.remove(&victim);
        }
    }

    /// Whether this replica already promised a different digest at `(v, this seq)`.
    pub fn conflicts_in_view(&self, d: Digest, v: View) -> bool {
        self.pp_info.iter().any(|(&od, &ov)| ov == v && od != d)
    }

    /// Number of PREPAREs matching `d` (or, under the `PrepareWithoutDigest` mutation, any).
    pub fn prepare_count(&self, d: Digest, ignore_digest: bool) -> usize {
        self.prepares
            .values()
            .filter(|&&x| ignore_digest || x == d)
            .count()
    }

    /// Number of COMMITs matching `d`.
    pub fn commit_count(&self, d: Digest) -> usize {
        self.commits.values().filter(|&&x| x == d).count()
    }
}
