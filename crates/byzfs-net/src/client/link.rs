//! A client's link to one replica: dial with back-off, handshake with the certificate and a
//! proof of the key, then write requests from the link's queue and read replies into the
//! client's inbox, until the connection fails; repeat until the client is dropped.

use super::{LinkState, Links};
use crate::backoff::Backoff;
use crate::counters::{Counters, NetDrop};
use crate::framing::{read_frame, FrameError};
use crate::handshake::{client_proof_data, dial, prove, Challenge, Hello, Welcome};
use crate::queue::OutRx;
use byzfs_bft::ReplicaId;
use std::sync::Arc;
use tokio::io::{AsyncRead, BufReader, BufWriter};
use tokio::sync::mpsc;

const BUFFER: usize = 64 * 1024;

pub(super) async fn run(
    links: Arc<Links>,
    to: ReplicaId,
    mut rx: OutRx,
    inbox: mpsc::Sender<Vec<u8>>,
) {
    let mut backoff = Backoff::new(links.options.reconnect_min, links.options.reconnect_max);
    loop {
        let key = &links.hello_keys[to as usize];
        let cert = &links.cred_cert;
        let make = |c: &Challenge| Hello::Client {
            cert: cert.clone(),
            session: links.session,
            proof: prove(
                key,
                &client_proof_data(&c.nonce, cert.client, links.session, to),
            ),
        };
        match dial(&links.cluster, to, make, links.options.handshake_timeout).await {
            Ok((stream, Welcome::Accepted)) => {
                Counters::add(&links.counters.handshakes_ok, 1);
                links.set(to, LinkState::Up);
                backoff.reset();
                tracing::debug!(client = links.client, replica = to, "connected");
                let (rd, wr) = stream.into_split();
                let mut rd = BufReader::with_capacity(BUFFER, rd);
                let mut wr = BufWriter::with_capacity(BUFFER, wr);
                let stop = tokio::select! {
                    r = rx.write_to(&mut wr, &links.counters) => r.is_ok(),
                    r = read_loop(&mut rd, &links, &inbox) => r,
                };
                if stop {
                    return; // The client was dropped.
                }
                links.set(to, LinkState::Down("connection lost".into()));
                tracing::debug!(
                    client = links.client,
                    replica = to,
                    "connection lost; reconnecting"
                );
            }
            Ok((_, Welcome::Rejected { reason })) => links.set(to, LinkState::Rejected(reason)),
            Ok((_, Welcome::Status(_))) => {
                links.set(to, LinkState::Down("unexpected handshake answer".into()))
            }
            Err(e) => links.set(to, LinkState::Down(e.to_string())),
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// Reads replies into the inbox. Returns `true` if the client is gone, `false` if the
/// connection ended (or sent an oversized frame).
async fn read_loop<R: AsyncRead + Unpin>(
    rd: &mut R,
    links: &Links,
    inbox: &mpsc::Sender<Vec<u8>>,
) -> bool {
    let max = links.cluster.bft.message_bytes_max;
    loop {
        match read_frame(rd, max).await {
            Ok(f) => {
                Counters::add(&links.counters.frames_in, 1);
                Counters::add(&links.counters.bytes_in, f.len() as u64);
                if inbox.send(f).await.is_err() {
                    return true;
                }
            }
            Err(FrameError::Oversized { .. }) => {
                links.counters.dropped(NetDrop::Oversized);
                return false;
            }
            Err(_) => return false,
        }
    }
}
