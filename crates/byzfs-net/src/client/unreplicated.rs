//! The client of the unreplicated baseline ([`crate::node::UnreplicatedNode`]): the same
//! link code (dial, certificate handshake, framing, bounded queue) as [`super::ByzClient`],
//! to one server, with one MAC on each request and reply, or none.

use super::{link, ClientError, ClientOptions, LinkState, Links};
use crate::cluster::ClusterConfig;
use crate::keyfile::ClientCredential;
use crate::queue::{out_queue, OutQueue};
use byzfs_bft::message::{Message, Request, Tag};
use byzfs_bft::wire::{self, Auth, AuthKind, Envelope, Frame};
use byzfs_bft::{ClientId, Digest, MacKey, Principal, RequestId};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Request flag bit: read-only (same as the core's).
const FLAG_READ_ONLY: u8 = 1;

/// A client of the unreplicated server: one operation at a time, like [`super::ByzClient`].
/// TCP to a single server does not lose frames; a lost connection is re-established by the
/// link and the request is sent again.
pub struct UnreplicatedClient {
    id: ClientId,
    epoch: u32,
    macs: bool,
    to_server: MacKey,
    from_server: MacKey,
    next_rid: RequestId,
    max: usize,
    queue: OutQueue,
    inbox: mpsc::Receiver<Vec<u8>>,
    links: Arc<Links>,
    _tasks: JoinSet<()>,
}

impl UnreplicatedClient {
    /// Connects to the server at replica 0's address of `cluster`; `macs` must match the
    /// server's setting (a server with MACs drops unauthenticated requests).
    pub async fn connect(
        cluster: &ClusterConfig,
        cred: &ClientCredential,
        macs: bool,
    ) -> Result<UnreplicatedClient, ClientError> {
        let options = ClientOptions::default();
        let cluster = Arc::new(cluster.clone());
        let (links, id, keys) = Links::new(cluster.clone(), cred, options.clone())?;
        let mut changed = links.changed.subscribe();
        let (inbox_tx, inbox) = mpsc::channel(options.inbox_frames.max(1));
        let (queue, rx) = out_queue(options.queue_frames, options.queue_bytes);
        let mut tasks = JoinSet::new();
        tasks.spawn(link::run(links.clone(), 0, rx, inbox_tx));
        let _ = tokio::time::timeout(options.connect_timeout, async {
            loop {
                if !matches!(links.states().first(), Some(LinkState::Connecting)) {
                    return;
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        let state = links.states().first().cloned();
        if state != Some(LinkState::Up) {
            let why = match state {
                Some(LinkState::Down(e)) => e,
                Some(LinkState::Rejected(r)) => format!("rejected: {r}"),
                _ => "no answer".into(),
            };
            return Err(ClientError::Unreachable {
                up: 0,
                n: 1,
                need: 1,
                details: format!("server: {why}"),
            });
        }
        let (Some(to_server), Some(from_server)) =
            (keys.to_replica.first(), keys.from_replica.first())
        else {
            return Err(ClientError::Closed); // `ClusterConfig` always lists replica 0.
        };
        Ok(UnreplicatedClient {
            id,
            epoch: cluster.bft.epoch,
            macs,
            to_server: to_server.clone(),
            from_server: from_server.clone(),
            next_rid: crate::cert::first_request_id(),
            max: cluster.bft.message_bytes_max,
            queue,
            inbox,
            links,
            _tasks: tasks,
        })
    }

    /// The protocol client id of this session.
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// Invokes `op` and returns its result.
    pub async fn invoke(&mut self, op: Vec<u8>, read_only: bool) -> Result<Vec<u8>, ClientError> {
        let rid = self.next_rid;
        self.next_rid += 1;
        let env = Envelope {
            sender: Principal::Client(self.id),
            epoch: self.epoch,
            flags: if read_only { FLAG_READ_ONLY } else { 0 },
            replier: 0,
        };
        let req = Message::Request(Request {
            client: self.id,
            rid,
            // One request at a time: every earlier one has completed.
            acked: rid.saturating_sub(1),
            after: 0,
            op,
        });
        let auth = if self.macs {
            Auth::Mac(&self.to_server)
        } else {
            Auth::None
        };
        let frame: Arc<[u8]> = Arc::from(wire::encode(env, &req, auth));
        self.queue.push(frame.clone(), &self.links.counters);
        // Resend after a reconnection (the old connection may have lost the request).
        let mut changed = self.links.changed.subscribe();
        loop {
            tokio::select! {
                f = self.inbox.recv() => {
                    let Some(f) = f else { return Err(ClientError::Closed) };
                    if let Some(result) = self.check_reply(&f, rid) {
                        return Ok(result);
                    }
                }
                r = changed.changed() => {
                    if r.is_err() {
                        return Err(ClientError::Closed);
                    }
                    if self.links.states().first() == Some(&LinkState::Up) {
                        self.queue.push(frame.clone(), &self.links.counters);
                    }
                }
            }
        }
    }

    /// The result of `bytes` if it is an authentic reply to `rid`.
    fn check_reply(&self, bytes: &[u8], rid: RequestId) -> Option<Vec<u8>> {
        let frame = Frame::parse(bytes, self.max).ok()?;
        let h = frame.header;
        if h.tag != Tag::Reply || h.sender != Principal::Replica(0) || h.epoch != self.epoch {
            return None;
        }
        if self.macs && (h.auth != AuthKind::Mac || !frame.verify_mac(&self.from_server, 0)) {
            return None;
        }
        let Ok(Message::Reply(r)) = frame.decode() else {
            return None;
        };
        let result = r.result?;
        (r.rid == rid && r.client == self.id && Digest::of(&result) == r.result_digest)
            .then_some(result)
    }
}
