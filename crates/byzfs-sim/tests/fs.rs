//! The file-service families (`fs-…`): the real `byzfs_fs::FileService` replicated under the
//! fault plans of the key-value families. A few seeds of each pass every checker, with
//! results checked against the model file system and checkpoint trees compared; store
//! mutations in rollback and export code are caught by the file checkers
//! (`store-checkpoint-drops-undo` shows too rarely for a fixed seed: README "Mutations"), in
//! the in-memory store and in the log store.

use byzfs_fs::mutation::StoreMutation;
use byzfs_sim::checker::{fs_results, fs_tree};
use byzfs_sim::{run, Family, RunConfig, FS_FAMILIES};

#[test]
fn fs_families_pass_every_checker() {
    for (i, &family) in FS_FAMILIES.iter().enumerate() {
        let seed = 1 + i as u64;
        let r = run(&RunConfig::new(seed, family)).expect("plan");
        assert!(
            r.violations.is_empty(),
            "{}: {:?}\n  replay: {}",
            family.name(),
            r.violations,
            r.replay_command(None)
        );
        assert!(
            r.converged,
            "{} seed {seed} did not converge",
            family.name()
        );
        assert!(
            r.stats.results_checked > 50,
            "{} seed {seed}: {} results checked",
            family.name(),
            r.stats.results_checked
        );
    }
}

/// Seeds the sweeps reported, kept passing: a replica catching up on a view it had left
/// took a big body another replica's certificate named, exempt from the client's share of
/// its request store while missing, and counted it once held (checker `request-store`;
/// `byzfs_bft`'s `replica/catch_up.rs` `foreign_bodies`).
#[test]
fn regression_seeds_from_the_fs_sweeps() {
    let mut failures = Vec::new();
    for (family, seed) in [
        (Family::FsCrash, 2819),
        (Family::FsCrash, 8495),
        (Family::FsDiskTotalCrash, 233),
        (Family::FsDiskCrash, 450),
    ] {
        let r = run(&RunConfig::new(seed, family)).expect("plan");
        if !r.violations.is_empty() {
            failures.push(format!(
                "{:?}\n  replay: {}",
                r.violations,
                r.replay_command(None)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs `seeds` of `family` with `m` and returns the checkers that fired, in order of runs.
fn caught(family: Family, m: StoreMutation, seeds: &[u64]) -> Vec<&'static str> {
    let mut fired = Vec::new();
    for &seed in seeds {
        let r = run(&RunConfig {
            fs_mutation: Some(m),
            ..RunConfig::new(seed, family)
        })
        .expect("plan");
        fired.extend(r.violations.iter().map(|v| v.checker));
    }
    fired
}

#[test]
fn a_rollback_that_keeps_created_records_is_caught_by_the_file_checkers() {
    // The model sees a create answered from a record the rollback should have removed...
    let fired = caught(
        Family::FsPartition,
        StoreMutation::RollbackKeepsCreated,
        &[63],
    );
    assert!(fired.contains(&fs_results::NAME), "{fired:?}");
    // ...and a checkpoint whose digests agree holds another tree.
    let fired = caught(
        Family::FsDiskTotalCrash,
        StoreMutation::RollbackKeepsCreated,
        &[48],
    );
    assert!(fired.contains(&fs_tree::NAME), "{fired:?}");
}

#[test]
fn an_export_of_the_live_state_is_caught_by_the_tree_checker() {
    let fired = caught(Family::FsNormal, StoreMutation::ExportLive, &EXPORT_SEEDS);
    assert!(fired.contains(&fs_tree::NAME), "{fired:?}");
}

const EXPORT_SEEDS: [u64; 1] = [0];

/// The same broken rules planted in the log store's index (`byzfs_fs::store::LogStore`,
/// the `fs-disk-` families' persistent store): a rollback that keeps created records is
/// seen as a checkpoint holding another tree, and an export of the live state is fetched
/// as a tree the checkpoint never held. (`store-checkpoint-drops-undo` fired in none of
/// 200 seeds of each disk family, as on the in-memory store.)
#[test]
fn broken_rules_in_the_log_store_are_caught_by_the_file_checkers() {
    let fired = caught(
        Family::FsDiskTotalCrash,
        StoreMutation::RollbackKeepsCreated,
        &[48],
    );
    assert!(fired.contains(&fs_tree::NAME), "{fired:?}");
    let fired = caught(
        Family::FsDiskTransferPowerCuts,
        StoreMutation::ExportLive,
        &[0],
    );
    assert!(fired.contains(&fs_tree::NAME), "{fired:?}");
}
