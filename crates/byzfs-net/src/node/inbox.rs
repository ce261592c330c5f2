//! The event loop's inbox: one lane per source, served in turn (Aardvark's separate work
//! queues with round-robin service, docs/PROTOCOL.md §5.3 measure 2; ARCHITECTURE.md "Defences
//! under attack").
//!
//! Each peer replica has a lane of its own and all clients share one; each lane has its own
//! frame bound and byte budget (`NodeOptions::inbox_frames`, and `inbox_bytes` split evenly
//! between the lanes). A connection's reader takes budget from its lane before it queues a
//! frame and waits when there is none, so TCP pushes a fast sender back — and only that
//! lane's senders wait: a replica flooding garbage or old messages fills its own lane and
//! no other, and a crowd of flooding clients cannot delay the replicas' agreement messages.
//! Within the clients' lane the readers wait first come, first served (tokio's semaphore
//! and channel are fair, and each reader holds one frame at a time), so each connection
//! gets its turn. The event loop takes one input from each non-empty lane in turn.
//!
//! Order is kept where the protocol needs it: a client's `ClientUp`, frames and
//! `ClientDown` share the clients' lane; a peer's client introductions and the requests it
//! then forwards or pre-prepares share that peer's lane.

use super::Inbound;
use byzfs_bft::ReplicaId;
use std::sync::Arc;
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};

/// Where an input came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The inbound link from this replica.
    Replica(ReplicaId),
    /// Any client connection.
    Clients,
}

/// The sending side of one lane.
#[derive(Clone, Debug)]
pub(crate) struct LaneTx {
    tx: mpsc::Sender<Inbound>,
    budget: Arc<Semaphore>,
    budget_bytes: usize,
    ready: Arc<Notify>,
}

impl LaneTx {
    /// Takes `len` bytes of this lane's budget (all of it for a frame larger than the
    /// budget), waiting while the lane is full. `None` once the node is stopping.
    pub async fn budget(&self, len: usize) -> Option<OwnedSemaphorePermit> {
        let cost = u32::try_from(len.clamp(1, self.budget_bytes)).unwrap_or(u32::MAX);
        self.budget.clone().acquire_many_owned(cost).await.ok()
    }

    /// Queues `input`, waiting while the lane holds its most frames. `Err` once the event
    /// loop is gone.
    pub async fn send(&self, input: Inbound) -> Result<(), ()> {
        self.tx.send(input).await.map_err(|_| ())?;
        self.ready.notify_one();
        Ok(())
    }
}

/// The sending side: a lane per source.
#[derive(Clone, Debug)]
pub(crate) struct InboxTx {
    /// One per replica id (ours stays unused), then the clients'.
    lanes: Vec<LaneTx>,
}

impl InboxTx {
    /// The lane of `source` (a replica id out of range — `admit` refuses those — gets the
    /// clients' lane rather than a panic).
    pub fn lane(&self, source: Source) -> &LaneTx {
        let clients = self.lanes.len() - 1;
        let i = match source {
            Source::Replica(j) => (j as usize).min(clients),
            Source::Clients => clients,
        };
        &self.lanes[i]
    }
}

/// The event loop's side.
#[derive(Debug)]
pub(crate) struct Inbox {
    lanes: Vec<mpsc::Receiver<Inbound>>,
    ready: Arc<Notify>,
    /// The lane to look at first on the next take.
    next: usize,
}

/// An inbox for a cluster of `n` replicas: each of the `n - 1` peers' lanes and the
/// clients' lane holds at most `frames` frames and `bytes / n` bytes.
pub(crate) fn inbox(n: usize, frames: usize, bytes: usize) -> (InboxTx, Inbox) {
    let ready = Arc::new(Notify::new());
    let lane_bytes = (bytes / n.max(1)).clamp(1, Semaphore::MAX_PERMITS);
    let (mut txs, mut rxs) = (Vec::new(), Vec::new());
    for _ in 0..=n {
        let (tx, rx) = mpsc::channel(frames.max(1));
        txs.push(LaneTx {
            tx,
            budget: Arc::new(Semaphore::new(lane_bytes)),
            budget_bytes: lane_bytes,
            ready: ready.clone(),
        });
        rxs.push(rx);
    }
    (
        InboxTx { lanes: txs },
        Inbox {
            lanes: rxs,
            ready,
            next: 0,
        },
    )
}

impl Inbox {
    /// The next input without waiting: one from the first non-empty lane after the one
    /// served last.
    pub fn try_next(&mut self) -> Option<Inbound> {
        let k = self.lanes.len();
        for step in 0..k {
            let i = (self.next + step) % k;
            if let Ok(input) = self.lanes[i].try_recv() {
                self.next = (i + 1) % k;
                return Some(input);
            }
        }
        None
    }

    /// The next input, waiting for one. Cancel-safe: nothing is taken across the wait.
    pub async fn next(&mut self) -> Option<Inbound> {
        loop {
            if let Some(input) = self.try_next() {
                return Some(input);
            }
            if self.lanes.iter().all(|l| l.is_closed() && l.is_empty()) {
                return None;
            }
            // A send after the `try_next` above leaves a permit: no wake-up is lost.
            self.ready.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_bft::ClientId;

    fn down(client: ClientId) -> Inbound {
        Inbound::ClientDown { client, conn: 0 }
    }

    fn client_of(i: Option<Inbound>) -> ClientId {
        match i {
            Some(Inbound::ClientDown { client, .. }) => client,
            _ => panic!("not a ClientDown"),
        }
    }

    /// A lane that always has input (a flood) gets one turn in each round; the others are
    /// served in between, in their own order.
    #[tokio::test]
    async fn lanes_are_served_in_turn() {
        let (tx, mut rx) = inbox(4, 64, 1 << 20);
        for c in 100..110 {
            tx.lane(Source::Replica(1)).send(down(c)).await.unwrap();
        }
        tx.lane(Source::Replica(2)).send(down(200)).await.unwrap();
        tx.lane(Source::Clients).send(down(300)).await.unwrap();
        tx.lane(Source::Clients).send(down(301)).await.unwrap();
        let mut order = Vec::new();
        while let Some(i) = rx.try_next() {
            order.push(client_of(Some(i)));
        }
        assert_eq!(
            order,
            vec![100, 200, 300, 101, 301, 102, 103, 104, 105, 106, 107, 108, 109]
        );
    }

    /// A flooding lane's full budget does not hold back the other lanes' readers.
    #[tokio::test]
    async fn a_full_lane_does_not_block_the_others() {
        let (tx, mut rx) = inbox(4, 64, 4 * 1000);
        let flood = tx.lane(Source::Replica(3));
        let held = flood.budget(5000).await.expect("the whole lane");
        assert_eq!(
            held.num_permits(),
            1000,
            "a frame above the lane takes all of it"
        );
        let waiting =
            tokio::time::timeout(core::time::Duration::from_millis(20), flood.budget(1)).await;
        assert!(waiting.is_err(), "the flooder waits");
        let other = tx.lane(Source::Clients).budget(900).await;
        assert!(other.is_some(), "the clients' lane has its own budget");
        tx.lane(Source::Clients).send(down(7)).await.unwrap();
        assert_eq!(client_of(rx.next().await), 7);
    }

    /// `next` wakes for a send that happens while it waits, and ends when every sender is
    /// gone.
    #[tokio::test]
    async fn next_waits_and_ends() {
        let (tx, mut rx) = inbox(1, 8, 1024);
        let lane = tx.lane(Source::Clients).clone();
        let sender = tokio::spawn(async move {
            tokio::time::sleep(core::time::Duration::from_millis(10)).await;
            lane.send(down(5)).await.unwrap();
        });
        assert_eq!(client_of(rx.next().await), 5);
        sender.await.unwrap();
        drop(tx);
        assert!(rx.next().await.is_none());
    }
}
