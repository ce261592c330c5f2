//! A file-service replica's reports of the capacity its disk could hold
//! ([`byzfs_fs::capacity`]): the cluster's `df` and `ENOSPC` go by the `(f+1)`-th smallest.
//!
//! The replica measures its data directory's disk every [`CHECK_EVERY`] and, when the
//! capacity it could hold moved by more than [`THRESHOLD_DIVISOR`]th (or at start), sends
//! `Op::ReportCapacity` from its own client: a session of the certificate id reserved for
//! it, certified by its own key (`byzfs_net::cert::REPLICA_CLIENT_FIRST`). It then reads
//! the agreed capacity back and warns when it exceeds what this disk holds: this replica
//! would fill before the cluster answers `ENOSPC`.
//!
//! **What a replica could hold**: its free disk, shared with the other replicas of the
//! cluster at the same host (as `byzfs keygen` fits `[fs]` to a loopback cluster's disk),
//! plus what its directory already holds, over the 2.5 disk bytes a replica needs per byte
//! stored ([`FsLimits::capacity_of_disk`]). Garbage not yet compacted counts in both terms
//! alike, so the estimate does not swing while compaction catches up.
//!
//! It runs on its own thread and runtime, so a report waiting for a slow cluster never
//! delays the replica's event loop.

use byzfs_bft::ReplicaId;
use byzfs_fs::{decode_result, Credentials, Op, Reply, Request};
use byzfs_net::cluster::{ClusterConfig, FsLimits};
use byzfs_net::{ByzClient, ClientCredential, ReplicaSecret};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often the disk is measured.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(30);
/// A change of more than `1/THRESHOLD_DIVISOR` of the last report is reported.
pub(crate) const THRESHOLD_DIVISOR: u64 = 64;
/// How long one report (connecting included) may take before it is tried again later.
const REPORT_TIMEOUT: Duration = Duration::from_secs(60);
/// How soon to try again after a failed report.
const RETRY: Duration = Duration::from_secs(5);

/// What one replica needs to report.
pub(crate) struct Reporter {
    cluster: ClusterConfig,
    cred: ClientCredential,
    dir: PathBuf,
    id: ReplicaId,
    sharers: u64,
}

impl Reporter {
    /// A reporter for replica `secret.id`, whose store is in `dir`.
    pub(crate) fn new(
        cluster: &ClusterConfig,
        secret: &ReplicaSecret,
        dir: &Path,
    ) -> anyhow::Result<Reporter> {
        let me = cluster.replica(secret.id)?;
        let host = |a: &str| a.rsplit_once(':').map_or(a, |(h, _)| h).to_string();
        let sharers = cluster
            .replicas
            .iter()
            .filter(|r| host(&r.address) == host(&me.address))
            .count() as u64;
        Ok(Reporter {
            cluster: cluster.clone(),
            cred: ClientCredential::for_replica(cluster, secret)?,
            dir: dir.to_path_buf(),
            id: secret.id,
            sharers,
        })
    }

    /// Starts reporting on a thread of its own (it ends with the process).
    pub(crate) fn spawn(self) -> anyhow::Result<()> {
        std::thread::Builder::new()
            .name("capacity-report".into())
            .spawn(move || match byzfs_net::signals::runtime() {
                Ok(rt) => rt.block_on(self.run()),
                Err(e) => tracing::warn!(error = %e, "capacity reports off: no runtime"),
            })?;
        Ok(())
    }

    /// The capacity this replica's disk could hold now; `None` if its directory cannot
    /// be measured (a report of no room would stop every write in the cluster).
    fn measure(&self) -> Option<u64> {
        nix::sys::statvfs::statvfs(&self.dir).ok()?;
        let free = byzfs_net::keygen::free_disk(&self.dir);
        let held = byzfs_net::storage::disk_bytes(&self.dir);
        Some(FsLimits::capacity_of_disk(
            free / self.sharers.max(1) + held,
        ))
    }

    async fn run(self) {
        let mut client: Option<ByzClient> = None;
        let mut last: Option<u64> = None;
        loop {
            let Some(now) = self.measure() else {
                tracing::warn!(replica = self.id, dir = %self.dir.display(), "cannot measure the data directory's disk; no capacity report");
                tokio::time::sleep(RETRY).await;
                continue;
            };
            let wait = if due(last, now) {
                match tokio::time::timeout(REPORT_TIMEOUT, self.report(&mut client, now)).await {
                    Ok(Ok(agreed)) => {
                        last = Some(now);
                        self.check(now, agreed);
                        CHECK_EVERY
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(replica = self.id, error = %e, "capacity report failed; trying again");
                        client = None;
                        RETRY
                    }
                    Err(_) => {
                        tracing::debug!(
                            replica = self.id,
                            "capacity report timed out; trying again"
                        );
                        client = None;
                        RETRY
                    }
                }
            } else {
                CHECK_EVERY
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Reports `bytes`; returns the agreed capacity after it.
    async fn report(&self, client: &mut Option<ByzClient>, bytes: u64) -> anyhow::Result<u64> {
        if client.is_none() {
            *client = Some(ByzClient::connect(&self.cluster, &self.cred).await?);
        }
        let c = client
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("no client"))?;
        let op = Op::ReportCapacity {
            replica: self.id,
            bytes,
        };
        let out = c
            .invoke(Request::new(Credentials::root(), op).encode(), false)
            .await?;
        match decode_result(&out) {
            Some(Ok(Reply::Done)) => {}
            other => anyhow::bail!("the cluster answered {other:?}"),
        }
        let out = c
            .invoke(Request::new(Credentials::root(), Op::StatFs).encode(), true)
            .await?;
        match decode_result(&out) {
            Some(Ok(Reply::StatFs(s))) => Ok(s.blocks * u64::from(s.block_size)),
            other => anyhow::bail!("statfs answered {other:?}"),
        }
    }

    /// Logs the report, and warns if the cluster may store more than this disk holds.
    fn check(&self, mine: u64, agreed: u64) {
        tracing::info!(
            replica = self.id,
            capacity_here = mine,
            agreed_capacity = agreed,
            "reported this disk's capacity"
        );
        if agreed > mine {
            tracing::warn!(
                replica = self.id,
                capacity_here = mine,
                agreed_capacity = agreed,
                "this disk holds less than the cluster's agreed file-system capacity (other \
                 replicas reported more): this replica would stop with a full disk before \
                 the cluster answers ENOSPC; free space here or move the data directory to \
                 a larger disk"
            );
        }
    }
}

/// Whether `now` should be reported after `last`.
fn due(last: Option<u64>, now: u64) -> bool {
    last.is_none_or(|l| l.abs_diff(now) > l / THRESHOLD_DIVISOR)
}

#[cfg(test)]
mod tests {
    use super::due;

    #[test]
    fn reports_at_start_and_on_changes_over_a_sixty_fourth() {
        assert!(due(None, 0));
        assert!(!due(Some(6400), 6400));
        assert!(!due(Some(6400), 6500));
        assert!(due(Some(6400), 6501));
        assert!(due(Some(6400), 6299));
        assert!(due(Some(0), 1));
    }
}
