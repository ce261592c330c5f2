//! A replica's disk work, as the disk driver runs it (`byzfs-net` `disk_worker.rs`): a
//! service that keeps its own state hands over the sync of what it wrote when a stable
//! checkpoint is stored, the driver runs it away from the event loop — here, after a drawn
//! delay in which the replica keeps executing — and commits the checkpoint's record only
//! once it ran (docs/PROTOCOL.md §2.7). A crash or power cut in between loses the work and
//! the record: the replica restarts from the record before, which its store must still
//! hold. `record-before-store-sync` commits the record at once instead.

use super::{substream, trace_line, Ev, Mutation, Purpose, Role, Sim, StoreRecord, Time};
use byzfs_bft::service::DiskWork;
use rand::Rng;

/// The longest a disk work takes (µs): a sync of a busy store's checkpoint interval.
const WORK_US_MAX: u64 = 200_000;

impl Sim {
    /// A stable checkpoint's record of `inst` (the log synced before it): committed now if
    /// its service keeps nothing of its own, after the service's disk work otherwise.
    pub(super) fn store_checkpoint(&mut self, inst: usize, rec: StoreRecord) {
        let StoreRecord::Checkpoint(img) = &rec else {
            self.world.replicas[inst].disk.apply_store(&rec);
            return;
        };
        let seq = img.seq;
        let correct = self.world.replicas[inst].role == Role::Correct;
        if self.mutation == Some(Mutation::SkipServicePersist) && correct {
            // Mutated: the record goes down, the service's state not.
            self.world.replicas[inst].disk.apply_store(&rec);
            self.world.replicas[inst].replica.checkpoint_recorded(seq);
            return;
        }
        let node = &mut self.world.replicas[inst];
        let work = match node.replica.persist_service(seq) {
            Ok(w) => w,
            Err(e) => panic!("persisting the service on the simulated disk: {e}"),
        };
        let early = self.mutation == Some(Mutation::RecordBeforeStoreSync) && correct;
        let ticket = match work {
            Some(w) => Some(self.hand_disk_work(inst, w)),
            None if self.world.replicas[inst].disk_work.busy() => {
                Some(self.world.replicas[inst].disk_work.handed)
            }
            None => None,
        };
        match ticket {
            Some(t) if !early => self.world.replicas[inst].disk_work.held.push_back((t, rec)),
            // Mutated (`early`): recorded before the sync it needs has run.
            _ => {
                self.world.replicas[inst].disk.apply_store(&rec);
                self.recorded(inst, seq);
            }
        }
    }

    /// The service, then the core, learn the record of `seq` is durable; any work the
    /// service hands over is queued. The core may have actions to drain.
    fn recorded(&mut self, inst: usize, seq: u64) {
        let node = &mut self.world.replicas[inst];
        node.replica.checkpoint_recorded(seq);
        match node.replica.service_recorded(seq) {
            Ok(Some(w)) => {
                self.hand_disk_work(inst, w);
            }
            Ok(None) => {}
            Err(e) => panic!("the service after its checkpoint's record: {e}"),
        }
    }

    /// Queues `work`; the first in the queue runs after a drawn delay. Returns its ticket.
    fn hand_disk_work(&mut self, inst: usize, work: DiskWork) -> u64 {
        let q = &mut self.world.replicas[inst].disk_work;
        q.handed += 1;
        let ticket = q.handed;
        q.works.push_back((ticket, work));
        self.schedule_disk_work(inst);
        ticket
    }

    /// Queues the event of the front work, unless it is queued.
    fn schedule_disk_work(&mut self, inst: usize) {
        let node = &mut self.world.replicas[inst];
        if node.disk_work.scheduled {
            return;
        }
        let Some(&(ticket, _)) = node.disk_work.works.front() else {
            return;
        };
        node.disk_work.scheduled = true;
        let life = node.disk_work.life;
        let mut r = substream(
            node.seed,
            Purpose::DiskWork,
            (inst as u64) << 32 | (life & 0xFFFF) << 16 | (ticket & 0xFFFF),
        );
        let us = r.gen_range(100..=WORK_US_MAX);
        let at = Time(self.world.now.as_micros() + us);
        self.world.queue.push(at, Ev::DiskWork { inst, life });
    }

    /// The oldest disk work of `inst` runs now (unless its life ended): the service learns
    /// it, and the records that waited for it are committed, oldest first.
    pub(super) fn disk_work_ran(&mut self, inst: usize, life: u64) {
        let node = &mut self.world.replicas[inst];
        if !node.up || node.disk_work.life != life {
            return;
        }
        node.disk_work.scheduled = false;
        let Some((ticket, work)) = node.disk_work.works.pop_front() else {
            return;
        };
        if let Err(e) = work.run() {
            panic!("a disk work on the simulated disk: {e}");
        }
        node.disk_work.ran = ticket;
        trace_line!(
            self.trace,
            self.world.now,
            "disk work {} ran ({ticket})",
            self.name(inst)
        );
        match self.world.replicas[inst].replica.service_work_done() {
            Ok(Some(w)) => {
                self.hand_disk_work(inst, w);
            }
            Ok(None) => {}
            Err(e) => panic!("the service after its disk work: {e}"),
        }
        while let Some((t, _)) = self.world.replicas[inst].disk_work.held.front() {
            if *t > ticket {
                break;
            }
            let Some((_, rec)) = self.world.replicas[inst].disk_work.held.pop_front() else {
                break;
            };
            self.world.replicas[inst].disk.apply_store(&rec);
            if let StoreRecord::Checkpoint(img) = &rec {
                self.recorded(inst, img.seq);
            }
        }
        self.schedule_disk_work(inst);
        // The window may have moved (`Replica::checkpoint_recorded`).
        self.after_replica_step(inst);
    }
}
