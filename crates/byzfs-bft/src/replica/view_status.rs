//! Which view the replica is in, and whether it has installed it (docs/PROTOCOL.md §1.4, §3).

use crate::ids::{Seq, View};

/// The current view and how far it is installed.
#[derive(Clone, Debug)]
pub(crate) struct ViewStatus {
    /// The view this replica is in.
    pub current: View,
    /// Whether it holds the NEW-VIEW of `current` (not in view-change limbo).
    pub has_new_view: bool,
    /// Messages for sequence numbers ≤ this are refused in the current view (§1.4).
    pub low_bound: Seq,
}

impl Default for ViewStatus {
    /// View 0, which needs no NEW-VIEW.
    fn default() -> Self {
        ViewStatus {
            current: 0,
            has_new_view: true,
            low_bound: 0,
        }
    }
}
