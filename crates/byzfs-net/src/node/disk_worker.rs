//! The replica's disk worker: a thread that runs the service's [`DiskWork`] (a stable
//! checkpoint's `fdatasync` of the store's segments, the removal of segments compaction
//! emptied) away from the event loop, one at a time in the order handed over, and reports
//! each back to the event loop (docs/PROTOCOL.md §2.7). Batches keep executing meanwhile:
//! what a sync covers is what was written before it was handed over.
//!
//! Each work gets a ticket (1, 2, …); the event loop learns that every work up to a ticket
//! ran ([`DiskWorker::next_done`]) and commits the checkpoint records that waited for it.

use byzfs_bft::service::DiskWork;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A work's outcome: its ticket, how long it ran, and its error if it failed.
pub(super) struct Done {
    pub ticket: u64,
    pub took: Duration,
    pub result: Result<(), String>,
}

pub(super) struct DiskWorker {
    /// `None` until the first work (a service that hands out none costs no thread).
    jobs: Option<mpsc::Sender<(u64, DiskWork)>>,
    done_tx: tokio::sync::mpsc::UnboundedSender<Done>,
    done_rx: tokio::sync::mpsc::UnboundedReceiver<Done>,
    /// Tickets handed out, and reported done.
    handed: u64,
    finished: u64,
    replica: u32,
}

impl DiskWorker {
    pub fn new(replica: u32) -> DiskWorker {
        let (done_tx, done_rx) = tokio::sync::mpsc::unbounded_channel();
        DiskWorker {
            jobs: None,
            done_tx,
            done_rx,
            handed: 0,
            finished: 0,
            replica,
        }
    }

    /// The ticket of the last work handed over (0: none yet).
    pub fn handed(&self) -> u64 {
        self.handed
    }

    /// Whether some work handed over has not been reported done.
    pub fn busy(&self) -> bool {
        self.finished < self.handed
    }

    /// Hands `work` to the thread; returns its ticket, or an error if the thread could not
    /// be started or has ended.
    pub fn hand(&mut self, work: DiskWork) -> Result<u64, String> {
        if self.jobs.is_none() {
            self.jobs = Some(self.spawn()?);
        }
        let ticket = self.handed + 1;
        self.jobs
            .as_ref()
            .ok_or("the disk worker is not running")?
            .send((ticket, work))
            .map_err(|_| {
                "the replica's disk worker thread ended; restart the replica".to_string()
            })?;
        self.handed = ticket;
        Ok(ticket)
    }

    fn spawn(&self) -> Result<mpsc::Sender<(u64, DiskWork)>, String> {
        let (tx, rx) = mpsc::channel::<(u64, DiskWork)>();
        let done = self.done_tx.clone();
        std::thread::Builder::new()
            .name(format!("disk-r{}", self.replica))
            .spawn(move || {
                // Ends when the event loop drops its sender (shutdown) or stops listening.
                while let Ok((ticket, work)) = rx.recv() {
                    let started = Instant::now();
                    // A panic is an error like any other: the event loop waits for this
                    // ticket.
                    let result =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.run()))
                            .unwrap_or_else(|_| Err("a disk work panicked".to_string()));
                    let d = Done {
                        ticket,
                        took: started.elapsed(),
                        result,
                    };
                    if done.send(d).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| format!("cannot start the replica's disk worker thread: {e}"))?;
        Ok(tx)
    }

    /// The next work reported done (waits). Never ends while work is in flight: the thread
    /// holds a sender, and so does this worker.
    pub async fn next_done(&mut self) -> Done {
        match self.done_rx.recv().await {
            Some(d) => {
                self.finished = d.ticket;
                d
            }
            // Unreachable (`done_tx` is ours), but never a busy loop.
            None => std::future::pending().await,
        }
    }
}
