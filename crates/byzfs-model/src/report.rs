//! What a model check found.

/// The outcome of [`crate::fast_view_change::FastViewChange::check`].
#[derive(Clone, Debug)]
pub struct Check {
    /// Distinct states explored.
    pub states: usize,
    /// The properties violated, each with the shortest path of steps to it.
    pub violations: Vec<(&'static str, Vec<String>)>,
    /// Whether some batch completed in a view after a view change (the model reaches the
    /// states the properties are about).
    pub completed_after_a_view_change: bool,
}
