//! Incoming connections: the handshake (acceptor side), then a read loop into the inbox.
//! A replica link is read-only from here; a client link also carries replies back.

use super::inbox::{InboxTx, LaneTx, Source};
pub(super) use super::listen::Listeners;
use super::shed::Origin as FrameOrigin;
use super::{Inbound, Shared};
use crate::cert::{session_client_id, ClientCert};
use crate::counters::{Counters, NetDrop};
use crate::framing::{read_frame, FrameError};
use crate::handshake::{
    client_proof_data, read_msg, replica_proof_data, write_msg, Challenge, Hello, HelloMsg,
    Welcome, MAGIC, NONCE_LEN, PROOF_LEN, VERSION,
};
use crate::intro::ClientIntro;
use crate::kdf;
use crate::link_lane::LinkLane;
use crate::queue::out_queue;
use crate::stream::Stream;
use byzfs_bft::{ClientId, MacKey, ReplicaId};
use rand_core::{OsRng, RngCore as _};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncRead, BufReader, BufWriter};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Read buffer of an established connection.
const READ_BUFFER: usize = 64 * 1024;

/// Where a connection came from: an IP address, or the Unix socket (all local processes
/// share that one origin for the per-address limit, as they share 127.0.0.1 over TCP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Origin {
    Ip(IpAddr),
    Local,
}

/// Accepts connections until the node stops; each runs in its own task, at most
/// `connections_max` at a time and `connections_per_address_max` from one origin (extra
/// connections are closed and counted).
pub(super) async fn accept_loop(listeners: Listeners, shared: Arc<Shared>, inbox: InboxTx) {
    let limit = Arc::new(Semaphore::new(shared.options.connections_max));
    let mut per_origin: HashMap<Origin, usize> = HashMap::new();
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            r = listeners.tcp.accept() => r.map(|(s, addr)| {
                (Stream::Tcp(s), Origin::Ip(addr.ip()), addr.to_string())
            }),
            r = listeners.accept_local() => r.map(|s| {
                (Stream::Unix(s), Origin::Local, "local socket".to_string())
            }),
            Some(done) = conns.join_next(), if !conns.is_empty() => {
                // A panicked task loses its origin; its slot then stays taken (no panics
                // are expected in `serve`, and the global limit still holds).
                if let Ok(origin) = done {
                    if let Some(open) = per_origin.get_mut(&origin) {
                        *open -= 1;
                        if *open == 0 {
                            per_origin.remove(&origin);
                        }
                    }
                }
                continue;
            }
        };
        let (stream, origin, addr) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // E.g. out of file descriptors: back off instead of spinning.
                tracing::warn!(replica = shared.me, error = %e, "accept failed");
                tokio::time::sleep(core::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let open = per_origin.entry(origin).or_default();
        if *open >= shared.options.connections_per_address_max {
            shared.counters.dropped(NetDrop::ConnectionLimit);
            tracing::debug!(replica = shared.me, %addr, "per-address connection limit reached");
            continue;
        }
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            shared.counters.dropped(NetDrop::ConnectionLimit);
            tracing::debug!(replica = shared.me, %addr, "connection limit reached");
            continue;
        };
        *open += 1;
        Counters::add(&shared.counters.connections_accepted, 1);
        if let Stream::Tcp(s) = &stream {
            crate::tcp::configure(s);
        } else {
            Counters::add(&shared.counters.local_connections_accepted, 1);
        }
        let (shared, inbox) = (shared.clone(), inbox.clone());
        conns.spawn(async move {
            serve(stream, &addr, &shared, &inbox).await;
            drop(permit);
            origin
        });
    }
}

/// Outcome of checking a hello.
enum Admit {
    Status,
    Replica(ReplicaId, LinkLane),
    Client(Box<ClientAdmission>),
}

/// What a replica needs to serve a client session: derived from its certificate alone.
pub(crate) struct ClientAdmission {
    pub client: ClientId,
    pub to_client: MacKey,
    pub from_client: MacKey,
    pub verifying: ed25519_dalek::VerifyingKey,
    /// Forwarded to the peers (`crate::intro`).
    pub intro: ClientIntro,
    /// Shared X25519 secret with the client (handshake proof).
    secret: [u8; 32],
}

/// Checks `cert` against the cluster and derives the session's keys.
pub(crate) fn client_admission(
    shared: &Shared,
    cert: ClientCert,
    session: u64,
) -> Result<ClientAdmission, String> {
    let c = &shared.cluster;
    cert.verify_in(c).map_err(|e| e.to_string())?;
    let client = session_client_id(cert.client, session)
        .ok_or_else(|| "session number out of range".to_string())?;
    let verifying = cert
        .verifying_key()
        .ok_or_else(|| "the certificate's Ed25519 key is not a valid point".to_string())?;
    let public = x25519_dalek::PublicKey::from(cert.x25519_public_key.0);
    let secret = kdf::shared_secret(&shared.x25519, &public)
        .ok_or_else(|| "the certificate's public key is a low-order point".to_string())?;
    let (from_client, to_client) = kdf::client_mac_keys(&secret, &shared.salt, client, shared.me);
    Ok(ClientAdmission {
        client,
        to_client,
        from_client,
        verifying,
        intro: ClientIntro { cert, session },
        secret,
    })
}

/// Checks replica `from`'s proof for connection `lane` of its link.
fn admit_replica(
    shared: &Shared,
    nonce: &[u8; NONCE_LEN],
    from: ReplicaId,
    lane: LinkLane,
    proof: &[u8; PROOF_LEN],
) -> Result<Admit, String> {
    let ok = from != shared.me
        && shared
            .hello_in
            .get(from as usize)
            .is_some_and(|k| k.verify(&replica_proof_data(nonce, from, shared.me, lane), proof));
    if ok && shared.peer_shed(from) {
        shared.counters.dropped(NetDrop::Shed);
        Err(format!(
            "replica {from}: shed for flooding; try again later"
        ))
    } else if ok {
        Ok(Admit::Replica(from, lane))
    } else {
        Err(format!("replica {from}: bad handshake proof (wrong keys?)"))
    }
}

fn admit(shared: &Shared, nonce: &[u8; NONCE_LEN], hello: HelloMsg) -> Result<Admit, String> {
    if hello.magic != MAGIC || hello.version != VERSION {
        return Err(format!(
            "unsupported handshake version {}; this replica speaks {VERSION}",
            hello.version
        ));
    }
    match hello.hello {
        Hello::Status => Ok(Admit::Status),
        Hello::Replica { from, proof } => {
            admit_replica(shared, nonce, from, LinkLane::Control, &proof)
        }
        Hello::ReplicaBulk { from, proof } => {
            admit_replica(shared, nonce, from, LinkLane::Bulk, &proof)
        }
        Hello::Client {
            cert,
            session,
            proof,
        } => {
            let cert_id = cert.client;
            let admission = client_admission(shared, cert, session)?;
            if shared.client_shed(admission.client) {
                shared.counters.dropped(NetDrop::Shed);
                return Err("this session is shed for flooding; try again later".into());
            }
            let key = kdf::client_hello_key(&admission.secret, &shared.salt, cert_id, shared.me);
            let data = client_proof_data(nonce, cert_id, session, shared.me);
            if !key.verify(&data, &proof) {
                return Err(
                    "bad handshake proof: the client does not hold the certificate's key".into(),
                );
            }
            Ok(Admit::Client(Box::new(admission)))
        }
    }
}

async fn serve(stream: Stream, addr: &str, shared: &Shared, inbox: &InboxTx) {
    let me = shared.me;
    let (mut rd, mut wr) = stream.into_split();
    let mut nonce = [0u8; NONCE_LEN];
    OsRng.fill_bytes(&mut nonce);
    let challenge = Challenge {
        magic: MAGIC,
        version: VERSION,
        cluster_id: shared.cluster.cluster_id,
        epoch: shared.cluster.bft.epoch,
        replica: me,
        nonce,
    };
    let exchange = async {
        write_msg(&mut wr, &challenge).await?;
        read_msg::<HelloMsg, _>(&mut rd).await
    };
    let hello = match tokio::time::timeout(shared.options.handshake_timeout, exchange).await {
        Err(_) => {
            shared.counters.dropped(NetDrop::HandshakeTimeout);
            tracing::debug!(replica = me, %addr, "handshake timed out");
            return;
        }
        Ok(Err(e)) => {
            shared.counters.dropped(NetDrop::BadHandshake);
            tracing::debug!(replica = me, %addr, error = %e, "bad handshake");
            return;
        }
        Ok(Ok(h)) => h,
    };
    let admitted = match admit(shared, &nonce, hello) {
        Ok(a) => a,
        Err(reason) => {
            shared.counters.dropped(NetDrop::BadHandshake);
            tracing::info!(replica = me, %addr, %reason, "handshake rejected");
            let _ = tokio::time::timeout(
                shared.options.handshake_timeout,
                write_msg(&mut wr, &Welcome::Rejected { reason }),
            )
            .await;
            return;
        }
    };
    match admitted {
        Admit::Status => {
            let status = shared.status.borrow().clone();
            let _ = tokio::time::timeout(
                shared.options.handshake_timeout,
                write_msg(&mut wr, &Welcome::Status(Box::new(status))),
            )
            .await;
        }
        Admit::Replica(from, lane) => {
            // One inbound connection per replica and lane: this one supersedes any older
            // one. `admit` checked `from < n` (one `hello_in` key per replica), so the index
            // is valid. Both lanes feed the replica's one lane of the inbox.
            let gen_tx = &shared.inbound_gen[from as usize][lane.index()];
            let mut mine = 0;
            gen_tx.send_modify(|g| {
                *g += 1;
                mine = *g;
            });
            let mut gen_rx = gen_tx.subscribe();
            if write_msg(&mut wr, &Welcome::Accepted).await.is_err() {
                return;
            }
            Counters::add(&shared.counters.handshakes_ok, 1);
            tracing::debug!(replica = me, peer = from, lane = lane.name(), %addr, "inbound replica link up");
            let mut rd = BufReader::with_capacity(READ_BUFFER, rd);
            let superseded = async {
                while gen_rx.changed().await.is_ok() {
                    if *gen_rx.borrow() != mine {
                        return;
                    }
                }
            };
            tokio::select! {
                _ = read_loop(&mut rd, shared, inbox.lane(Source::Replica(from)), FrameOrigin::Replica(from)) => {}
                _ = superseded => {}
            }
            drop(wr);
            tracing::debug!(
                replica = me,
                peer = from,
                lane = lane.name(),
                "inbound replica link closed"
            );
        }
        Admit::Client(admission) => {
            let client = admission.client;
            let (queue, mut out) = out_queue(
                shared.options.client_queue_frames,
                shared.options.client_queue_bytes,
            );
            let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
            let up = Inbound::ClientUp {
                admission: *admission,
                queue,
                conn,
            };
            // The event loop installs the keys before it sees any frame of this connection
            // (the same lane).
            let lane = inbox.lane(Source::Clients);
            if lane.send(up).await.is_err() {
                return;
            }
            if write_msg(&mut wr, &Welcome::Accepted).await.is_ok() {
                Counters::add(&shared.counters.handshakes_ok, 1);
                tracing::debug!(replica = me, client, %addr, "client connected");
                let mut rd = BufReader::with_capacity(READ_BUFFER, rd);
                let mut wr = BufWriter::with_capacity(READ_BUFFER, wr);
                tokio::select! {
                    _ = read_loop(&mut rd, shared, lane, FrameOrigin::Client { client, conn }) => {}
                    _ = out.write_to(&mut wr, &shared.counters) => {}
                }
            }
            let _ = lane.send(Inbound::ClientDown { client, conn }).await;
            tracing::debug!(replica = me, client, "client disconnected");
        }
    }
}

/// Reads frames into the connection's lane of the inbox. Each frame first takes its size from
/// the lane's byte budget, so a fast sender waits (TCP pushes back) instead of growing memory
/// or taking the other lanes' share. Replica links may also carry client introductions
/// (`crate::intro`), checked here, off the event loop.
async fn read_loop<R: AsyncRead + Unpin>(
    rd: &mut R,
    shared: &Shared,
    inbox: &LaneTx,
    origin: FrameOrigin,
) {
    let replica_link = matches!(origin, FrameOrigin::Replica(_));
    let max = if replica_link {
        shared.cluster.bft.message_bytes_max
    } else {
        client_frame_max(shared)
    };
    loop {
        match read_frame(rd, max).await {
            Ok(f) if replica_link && ClientIntro::is_intro(&f) => {
                let known = ClientIntro::decode(&f)
                    .ok_or_else(|| "malformed".to_string())
                    .and_then(|i| client_admission(shared, i.cert, i.session));
                match known {
                    Ok(admission) => {
                        if inbox.send(Inbound::ClientKnown(admission)).await.is_err() {
                            return;
                        }
                    }
                    Err(reason) => {
                        shared.counters.dropped(NetDrop::BadIntro);
                        tracing::debug!(replica = shared.me, %reason, "bad client introduction");
                    }
                }
            }
            Ok(f) => {
                Counters::add(&shared.counters.frames_in, 1);
                Counters::add(&shared.counters.bytes_in, f.len() as u64);
                let Some(budget) = inbox.budget(f.len()).await else {
                    return; // closed: the node is stopping
                };
                if inbox.send(Inbound::Frame(f, budget, origin)).await.is_err() {
                    return;
                }
            }
            Err(FrameError::Oversized { len, max }) => {
                shared.counters.dropped(NetDrop::Oversized);
                tracing::debug!(
                    replica = shared.me,
                    len,
                    max,
                    "oversized frame; closing the connection"
                );
                return;
            }
            Err(_) => return,
        }
    }
}

/// The largest frame a client may send: one request (operation, header, authenticator with
/// signature), far below `message_bytes_max`, which batches and state transfer need.
fn client_frame_max(shared: &Shared) -> usize {
    let bft = &shared.cluster.bft;
    (bft.op_bytes_max + 64 * 1024).min(bft.message_bytes_max)
}

// The proof length must match the core's MAC length (checked at compile time).
const _: () = assert!(PROOF_LEN == byzfs_bft::crypto::MAC_LEN);
