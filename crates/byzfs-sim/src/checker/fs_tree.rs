//! The file tree at checkpoints: every correct replica's checkpoint, read back from the
//! partitions it would send a fetcher ([`crate::fs::tree::checkpoint_tree`]) when it becomes
//! stable there or is installed by a state transfer, is the same tree at every correct
//! replica, and the model's tree after the agreed batches through its sequence number
//! ([`super::fs_results::FsResults::tree_after`]).
//!
//! Digests alone (INV-CKPT) cannot show this: they are the store's own account of its
//! content, computed incrementally, and a store whose rollback or checkpoint code loses track
//! of a change reports digests its content does not have (mutations `store-…`).

use super::fs_results::FsResults;
use super::Sink;
use byzfs_bft::{Seq, Time};
use std::collections::BTreeMap;

/// Checker name.
pub const NAME: &str = "fs-tree";

/// A tree not yet compared with the model.
#[derive(Clone, Debug)]
struct Pending {
    inst: usize,
    seq: Seq,
    tree: Vec<String>,
}

/// The tree checker.
#[derive(Clone, Debug, Default)]
pub struct FsTree {
    /// The first tree seen at each sequence number, and whose.
    first: BTreeMap<Seq, (usize, Vec<String>)>,
    pending: Vec<Pending>,
    /// The model's tree at each seq where a replica's matched it.
    matched: BTreeMap<Seq, Vec<String>>,
    /// Trees compared with the model.
    pub checked: u64,
    /// Trees compared with another replica's only (the model had stopped, or the run ended
    /// first).
    pub unchecked: u64,
}

fn diff(a: &[String], b: &[String]) -> String {
    let only_a: Vec<&String> = a.iter().filter(|l| !b.contains(l)).take(3).collect();
    let only_b: Vec<&String> = b.iter().filter(|l| !a.contains(l)).take(3).collect();
    format!("{only_a:?} where the other has {only_b:?}")
}

impl FsTree {
    /// Correct instance `inst` holds checkpoint `seq` with this tree (`how`: stable,
    /// transferred), or a checkpoint that cannot be read as one (`Err`).
    pub fn on_checkpoint(
        &mut self,
        sink: &mut Sink,
        now: Time,
        inst: usize,
        seq: Seq,
        tree: Result<Vec<String>, String>,
        how: &str,
    ) {
        let tree = match tree {
            Ok(t) => t,
            Err(e) => {
                sink.report(NAME, now, format!("r{inst} checkpoint {seq} ({how}): {e}"));
                return;
            }
        };
        match self.first.get(&seq) {
            Some((first, t)) if *t != tree => sink.report(
                NAME,
                now,
                format!(
                    "checkpoint {seq} ({how}) at r{inst} holds {} but r{first}'s holds {}",
                    diff(&tree, t),
                    diff(t, &tree)
                ),
            ),
            Some(_) => {}
            None => {
                self.first.insert(seq, (inst, tree.clone()));
            }
        }
        self.pending.push(Pending { inst, seq, tree });
    }

    /// Compares the trees whose sequence number the model has reached.
    pub fn check(&mut self, sink: &mut Sink, now: Time, results: &FsResults) {
        if self.pending.is_empty() {
            return;
        }
        for p in std::mem::take(&mut self.pending) {
            // A tree equal to one already compared at this seq needs no second look.
            if self.matched.get(&p.seq) == Some(&p.tree) {
                self.checked += 1;
                continue;
            }
            let Some(model) = results.tree_after(p.seq) else {
                self.pending.push(p);
                continue;
            };
            self.checked += 1;
            if model == p.tree {
                self.matched.insert(p.seq, model);
                continue;
            }
            if model != p.tree {
                sink.report(
                    NAME,
                    now,
                    format!(
                        "checkpoint {} at r{}: {} (model: {} entries, replica: {})",
                        p.seq,
                        p.inst,
                        diff(&p.tree, &model),
                        model.len(),
                        p.tree.len()
                    ),
                );
            }
        }
    }

    /// End of run: what the model never reached is counted, not judged.
    pub fn finish(&mut self) {
        self.unchecked += self.pending.len() as u64;
        self.pending.clear();
    }
}
