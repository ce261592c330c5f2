//! Outbound link to one peer replica, one connection per lane ([`crate::link_lane`]): dial
//! with exponential back-off and jitter, handshake, then write frames from the lane's
//! bounded queue until the connection fails; repeat. Frames queued while the connection is
//! down wait (bounded); a frame lost with a connection is recovered by the protocol's
//! retransmission (STATUS).

use super::Shared;
use crate::backoff::Backoff;
use crate::counters::Counters;
use crate::framing::write_frame;
use crate::handshake::{dial, prove, replica_proof_data, Hello, Welcome};
use crate::link_lane::LinkLane;
use crate::queue::OutRx;
use crate::stream::ReadHalf;
use byzfs_bft::ReplicaId;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncReadExt as _, BufWriter};

/// Write buffer of a peer link.
const WRITE_BUFFER: usize = 64 * 1024;

pub(super) async fn peer_link(shared: Arc<Shared>, to: ReplicaId, lane: LinkLane, mut rx: OutRx) {
    let me = shared.me;
    let mut backoff = Backoff::new(shared.options.reconnect_min, shared.options.reconnect_max);
    // Log the first failure of each outage at info, the rest at debug.
    let mut quiet = false;
    loop {
        let key = &shared.hello_out[to as usize];
        let make = |c: &crate::handshake::Challenge| {
            Hello::replica(
                lane,
                me,
                prove(key, &replica_proof_data(&c.nonce, me, to, lane)),
            )
        };
        match dial(&shared.cluster, to, make, shared.options.handshake_timeout).await {
            Ok((stream, Welcome::Accepted)) => {
                Counters::add(&shared.counters.handshakes_ok, 1);
                let up = &shared.peers_up[to as usize][lane.index()];
                up.store(true, Ordering::Relaxed);
                if lane == LinkLane::Control {
                    shared.set_unreachable(to, false);
                }
                tracing::info!(replica = me, peer = to, lane = lane.name(), "peer link up");
                backoff.reset();
                quiet = false;
                let (rd, wr) = stream.into_split();
                let mut wr = BufWriter::with_capacity(WRITE_BUFFER, wr);
                // Our clients' introductions first (see `Shared::intros`), on the connection
                // of the requests they authenticate, then the queue.
                let intros = match lane {
                    LinkLane::Bulk => shared.intro_frames(),
                    LinkLane::Control => Vec::new(),
                };
                let done = tokio::select! {
                    r = async {
                        for f in &intros {
                            write_frame(&mut wr, f).await?;
                        }
                        rx.write_to(&mut wr, &shared.counters).await
                    } => r.is_ok(),
                    _ = closed(rd) => false,
                };
                up.store(false, Ordering::Relaxed);
                if done {
                    return; // The node is stopping: its queue was dropped.
                }
                tracing::info!(
                    replica = me,
                    peer = to,
                    lane = lane.name(),
                    "peer link lost; reconnecting"
                );
            }
            Ok((_, Welcome::Rejected { reason })) => {
                if !quiet {
                    tracing::warn!(replica = me, peer = to, lane = lane.name(), %reason, "peer rejected our handshake");
                }
                quiet = true;
            }
            Ok((_, Welcome::Status(_))) => {
                tracing::warn!(replica = me, peer = to, "unexpected handshake answer");
            }
            Err(e) => {
                // Refused or timed out (a process that died refuses at once): the core
                // shortens its view-change timer if this is the primary.
                if lane == LinkLane::Control {
                    shared.set_unreachable(to, true);
                }
                if quiet {
                    tracing::debug!(replica = me, peer = to, error = %e, "peer unreachable");
                } else {
                    tracing::info!(replica = me, peer = to, error = %e, "peer unreachable; retrying with back-off");
                }
                quiet = true;
            }
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// Completes when the peer closes the connection (the acceptor never writes after its
/// welcome, so any read result other than data means the link is gone).
async fn closed(mut rd: ReadHalf) {
    let mut buf = [0u8; 64];
    while let Ok(n) = rd.read(&mut buf).await {
        if n == 0 {
            return;
        }
    }
}
