//! What a simulated replica's disk work holds for one life: the works handed over by its
//! service and the stable checkpoints' records waiting for them. The simulator runs them
//! (`run/disk_work.rs`); a crash loses them.

use byzfs_bft::service::DiskWork;
use byzfs_bft::StoreRecord;
use std::collections::VecDeque;

/// One replica life's disk work and the records waiting for it.
#[derive(Debug, Default)]
pub struct DiskWorkQueue {
    /// Works handed over and not yet run, oldest first, with their tickets.
    pub(crate) works: VecDeque<(u64, DiskWork)>,
    /// Stable checkpoints' records waiting for the work of a ticket, oldest first.
    pub(crate) held: VecDeque<(u64, StoreRecord)>,
    /// The last ticket handed out, and the last one run.
    pub(crate) handed: u64,
    pub(crate) ran: u64,
    /// The front work's event is queued.
    pub(crate) scheduled: bool,
    /// This life: a work's event from an earlier life is ignored.
    pub life: u64,
}

impl DiskWorkQueue {
    pub(crate) fn busy(&self) -> bool {
        self.ran < self.handed
    }

    /// A crash or restart: everything in flight is lost.
    pub fn lose(&mut self) {
        self.works.clear();
        self.held.clear();
        self.handed = 0;
        self.ran = 0;
        self.scheduled = false;
        self.life += 1;
    }
}
