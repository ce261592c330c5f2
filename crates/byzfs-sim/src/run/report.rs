//! The run's report: the verdicts of the checkers and the run's figures.

use super::{Role, RunReport, RunStats, Sim};

impl Sim {
    pub(super) fn report(self) -> RunReport {
        let stats = RunStats {
            events: self.world.events,
            virtual_us: self.world.now.as_micros(),
            ops_completed: self.world.clients.iter().map(|c| c.completed).sum(),
            ops_refused: self.world.clients.iter().map(|c| c.refused).sum(),
            agreed_seq: self.oracle.agreement.history.max_seq(),
            view_max: self
                .world
                .replicas
                .iter()
                .filter(|r| r.role == Role::Correct)
                .map(|r| r.replica.view())
                .max()
                .unwrap_or(0),
            results_checked: self.oracle.outcomes().checked(),
            read_only_checked: (
                self.oracle.read_only.checked,
                self.oracle.read_only.checked_on_tentative,
            ),
            net: self.world.net.stats().clone(),
            fs_trees: self
                .oracle
                .fs
                .as_ref()
                .map_or((0, 0), |fs| (fs.tree.checked, fs.tree.unchecked)),
        };
        RunReport {
            seed: self.seed,
            family: self.plan.family,
            n: self.config.n(),
            summary: self.plan.summary(),
            view_change_rule: self.config.view_change_rule,
            violations: self.oracle.sink.into_violations(),
            stats,
            converged: self.phases.converged,
            trace: self.trace.into_text(),
        }
    }
}
