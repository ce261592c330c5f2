//! The agreed capacity: `df` and `ENOSPC` never promise more than the replicas' disks hold.
//!
//! **Why.** The configured capacity ([`crate::FsConfig::capacity_bytes`]) is fitted to the
//! disks when the cluster is created, but disks fill with other things, and a replica may
//! be moved to a smaller one. A replica whose disk fills stops, like a crashed one; if
//! more than `f` do, the cluster stops with a full disk instead of answering `ENOSPC`.
//!
//! **How.** Each replica measures its own disk and reports, as an ordered operation
//! ([`Op::ReportCapacity`]), the file-system capacity it could hold: its free disk
//! and what it already holds, over its bytes on disk per byte stored. It sends it from its
//! own client, whose identity the replication library authenticates
//! ([`Reporters`]: replica `r`'s certificate is signed by `r`'s key), so no one can report
//! for another replica. The service keeps each replica's last report (record key `15`)
//! and goes by the **`(f+1)`-th smallest** report, missing ones counting as the configured
//! capacity, and never above it ([`agreed`]). Every replica computes the same number from
//! the same ordered reports, so `statfs` and `ENOSPC` stay deterministic.
//!
//! **Why the `(f+1)`-th smallest and not the smallest.** At least `2f+1` replicas (a
//! quorum, enough to make progress) reported at least that much room, and no `f` replicas
//! can lower it: taking the smallest would let one faulty replica stop every write in the
//! cluster by reporting no room. The cost: a correct replica whose disk is the smallest of
//! all may fill before the cluster answers `ENOSPC`; it then stops as a crashed replica
//! would, one of the `f` faults the cluster tolerates, and its operator sees why in its log
//! (`crates/byzfs/src/capacity_report.rs` warns after each report; ARCHITECTURE.md,
//! Deviation 28).
//!
//! The inode limit scales with the byte capacity (the configured `max_inodes` at the
//! configured capacity).
//!
//! The space family of operations ([`Family::Space`](crate::proto::family::Family::Space)) runs
//! here: `statfs`, the reports, and the reclaim steps that give space back ([`crate::reclaim`]).

use crate::config::Reporters;
use crate::dir::MAX_NAME;
use crate::encoding::{decode, encode};
use crate::exec::{misrouted, Exec};
use crate::fail::Res;
use crate::key;
use crate::proto::attr::StatFs;
use crate::proto::errno::Errno;
use crate::proto::op::Op;
use crate::proto::reply::Reply;
use crate::store::Store;
use serde::{Deserialize, Serialize};

/// The replicas' last reports (key `15`), by replica id.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug, Default)]
pub(crate) struct Reports {
    pub bytes: Vec<Option<u64>>,
}

/// The capacity `reports` allow under `configured`: the `(f+1)`-th smallest report, a
/// missing one counting as `configured`, and never above `configured`.
pub fn agreed(configured: u64, reports: &[Option<u64>], reporters: &Reporters) -> u64 {
    let mut all: Vec<u64> = (0..reporters.replicas as usize)
        .map(|r| reports.get(r).copied().flatten().unwrap_or(configured))
        .collect();
    all.sort_unstable();
    all.get(reporters.f())
        .copied()
        .unwrap_or(configured)
        .min(configured)
}

/// The inode limit that goes with capacity `bytes`: `max_inodes` scaled as `bytes` is to
/// `configured`.
fn inodes_for(bytes: u64, configured: u64, max_inodes: u64) -> u64 {
    if bytes >= configured || configured == 0 {
        return max_inodes;
    }
    (u128::from(max_inodes) * u128::from(bytes) / u128::from(configured)) as u64
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// Runs an operation of the space family.
    pub(crate) fn run_space(&mut self, op: Op) -> Res<Reply> {
        match op {
            Op::StatFs => Ok(Reply::StatFs(self.statfs()?)),
            Op::ReportCapacity { replica, bytes } => self.report_capacity(replica, bytes),
            Op::Reclaim { file } => self.reclaim(file),
            other => misrouted(&other),
        }
    }

    fn statfs(&self) -> Res<StatFs> {
        const UNIT: u64 = 4096;
        let (bytes, inodes) = self.capacity()?;
        Ok(StatFs {
            block_size: UNIT as u32,
            blocks: bytes / UNIT,
            blocks_free: bytes.saturating_sub(self.sb.used_bytes) / UNIT,
            files: inodes,
            files_free: inodes.saturating_sub(self.sb.inodes),
            name_max: MAX_NAME as u32,
        })
    }

    /// `used_bytes += delta`, or `ENOSPC` if that exceeds the capacity.
    pub(crate) fn charge(&mut self, delta: i64) -> Res<()> {
        let used = self.sb.used_bytes.saturating_add_signed(delta);
        if delta > 0 && used > self.capacity()?.0 {
            return Err(Errno::ENOSPC.into());
        }
        self.sb.used_bytes = used;
        Ok(())
    }

    fn reports(&self) -> Res<Reports> {
        match self.txn.get(&key::capacity_reports())? {
            Some(b) => Ok(decode(&b)?),
            None => Ok(Reports::default()),
        }
    }

    /// The agreed capacity now: bytes and inodes.
    pub(crate) fn capacity(&self) -> Res<(u64, u64)> {
        let (bytes, inodes) = (self.cfg.capacity_bytes, self.cfg.max_inodes);
        let Some(reporters) = self.cfg.reporters else {
            return Ok((bytes, inodes));
        };
        let agreed = agreed(bytes, &self.reports()?.bytes, &reporters);
        Ok((agreed, inodes_for(agreed, bytes, inodes)))
    }

    /// [`Op::ReportCapacity`]: `EPERM` unless the sender is `replica`'s own client.
    pub(crate) fn report_capacity(&mut self, replica: u32, bytes: u64) -> Res<Reply> {
        let Some(reporters) = self.cfg.reporters else {
            return Err(Errno::EPERM.into());
        };
        if reporters.replica_of(self.client) != Some(replica) {
            return Err(Errno::EPERM.into());
        }
        let mut reports = self.reports()?;
        let r = replica as usize;
        if reports.bytes.len() <= r {
            reports.bytes.resize(r + 1, None);
        }
        reports.bytes[r] = Some(bytes);
        self.txn.put(key::capacity_reports(), encode(&reports));
        Ok(Reply::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOUR: Reporters = Reporters {
        first: 10,
        session_bits: 40,
        replicas: 4,
    };

    #[test]
    fn the_f_plus_first_smallest_report_counts() {
        let c = 1000;
        assert_eq!(agreed(c, &[], &FOUR), 1000, "no reports: configured");
        assert_eq!(
            agreed(c, &[Some(1)], &FOUR),
            1000,
            "one low report: ignored"
        );
        assert_eq!(agreed(c, &[Some(1), None, Some(5)], &FOUR), 5);
        assert_eq!(
            agreed(c, &[Some(9), Some(7), Some(8), Some(6)], &FOUR),
            7,
            "second smallest"
        );
        assert_eq!(
            agreed(c, &[Some(5000); 4], &FOUR),
            1000,
            "never above the configured capacity"
        );
        let seven = Reporters {
            replicas: 7,
            ..FOUR
        };
        assert_eq!(
            agreed(c, &[Some(1), Some(2), Some(3), Some(4)], &seven),
            3,
            "f = 2: the third smallest"
        );
    }

    #[test]
    fn inodes_scale_with_bytes() {
        assert_eq!(inodes_for(500, 1000, 64), 32);
        assert_eq!(inodes_for(1000, 1000, 64), 64);
        assert_eq!(inodes_for(0, 1000, 64), 0);
        assert_eq!(inodes_for(u64::MAX, 0, 64), 64);
    }
}
