//! Bounded outbound queues, one per peer link and per client connection. Bounded in frames
//! and in bytes; [`OutQueue::push`] never waits: when full, the frame is dropped and counted
//! (the protocol retransmits), so a slow or dead peer never stalls the event loop.

use crate::counters::{Counters, NetDrop};
use crate::framing::write_frame;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

/// The sending end (event loop side).
#[derive(Clone, Debug)]
pub(crate) struct OutQueue {
    tx: mpsc::Sender<Arc<[u8]>>,
    bytes: Arc<AtomicUsize>,
    bytes_max: usize,
}

/// The receiving end (connection writer side).
#[derive(Debug)]
pub(crate) struct OutRx {
    rx: mpsc::Receiver<Arc<[u8]>>,
    bytes: Arc<AtomicUsize>,
}

/// A queue of at most `frames_max` frames and `bytes_max` bytes.
pub(crate) fn out_queue(frames_max: usize, bytes_max: usize) -> (OutQueue, OutRx) {
    let (tx, rx) = mpsc::channel(frames_max.max(1));
    let bytes = Arc::new(AtomicUsize::new(0));
    (
        OutQueue {
            tx,
            bytes: bytes.clone(),
            bytes_max,
        },
        OutRx { rx, bytes },
    )
}

impl OutQueue {
    /// Whether the connection writer is gone (the node is stopping).
    #[cfg(feature = "byzantine")]
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Queues `frame`, or drops and counts it if the queue is full or its writer is gone.
    pub fn push(&self, frame: Arc<[u8]>, counters: &Counters) -> bool {
        let len = frame.len();
        if self.bytes.load(Ordering::Relaxed).saturating_add(len) > self.bytes_max {
            counters.dropped(NetDrop::QueueFull);
            return false;
        }
        match self.tx.try_send(frame) {
            Ok(()) => {
                self.bytes.fetch_add(len, Ordering::Relaxed);
                true
            }
            Err(_) => {
                counters.dropped(NetDrop::QueueFull);
                false
            }
        }
    }
}

impl OutRx {
    fn take(&self, f: &Arc<[u8]>, counters: &Counters) {
        self.bytes.fetch_sub(f.len(), Ordering::Relaxed);
        Counters::add(&counters.frames_out, 1);
        Counters::add(&counters.bytes_out, f.len() as u64);
    }

    /// Writes queued frames to `w` until the queue's sender is dropped (`Ok`) or a write
    /// fails (`Err`); flushes whenever the queue runs empty, so bursts share syscalls.
    pub async fn write_to<W: AsyncWrite + Unpin>(
        &mut self,
        w: &mut W,
        counters: &Counters,
    ) -> std::io::Result<()> {
        while let Some(f) = self.rx.recv().await {
            self.take(&f, counters);
            write_frame(w, &f).await?;
            while let Ok(f) = self.rx.try_recv() {
                self.take(&f, counters);
                write_frame(w, &f).await?;
            }
            w.flush().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_by_frames_and_bytes() {
        let counters = Counters::default();
        let (q, mut rx) = out_queue(2, 10);
        assert!(q.push(Arc::from(&[1u8; 4][..]), &counters));
        assert!(!q.push(Arc::from(&[2u8; 7][..]), &counters), "bytes");
        assert!(q.push(Arc::from(&[3u8; 6][..]), &counters));
        assert!(!q.push(Arc::from(&[4u8; 0][..]), &counters), "frames");
        assert_eq!(counters.drops(NetDrop::QueueFull), 2);
        drop(q);
        let mut out = Vec::new();
        rx.write_to(&mut out, &counters).await.unwrap();
        assert_eq!(out.len(), 4 + 4 + 4 + 6);
        assert_eq!(rx.bytes.load(Ordering::Relaxed), 0);
        assert_eq!(counters.snapshot().frames_out, 2);
    }
}
