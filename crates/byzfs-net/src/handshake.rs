//! The runtime's connection handshake (outside the PBFT protocol). See the crate README.
//!
//! ```text
//! acceptor → dialer   Challenge { magic "BZFS", version, cluster_id, epoch, replica, nonce }
//! dialer → acceptor   HelloMsg  { magic, version, Hello::Replica { from, proof }
//!                                               | Hello::Client { cert, session, proof }
//!                                               | Hello::Status
//!                                               | Hello::ReplicaBulk { from, proof } }
//! acceptor → dialer   Welcome::Accepted | Welcome::Rejected { reason } | Welcome::Status(..)
//! ```
//!
//! Each message is postcard-encoded in one length-prefixed frame of at most
//! [`HANDSHAKE_BYTES_MAX`] bytes. The proof is a MAC over the acceptor's fresh nonce under a
//! key derived from the static X25519 keys (replica: `key(from → to)`; client: from the
//! certificate's public key), so a recorded hello cannot be replayed and a certificate alone
//! (it is public) does not let anyone speak for its client. After `Accepted`, a replica link
//! carries protocol frames from dialer to acceptor only; a client link carries requests one
//! way and replies the other. Protocol frames are authenticated by the core's MACs.

use crate::cert::ClientCert;
use crate::cluster::ClusterConfig;
use crate::framing::{framed, read_frame, FrameError};
use crate::link_lane::LinkLane;
use crate::status::NodeStatus;
use crate::stream::Stream;
use byzfs_bft::{ClientId, MacKey, ReplicaId};
use core::time::Duration;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpStream, UnixStream};

/// Magic bytes opening every handshake message.
pub const MAGIC: [u8; 4] = *b"BZFS";
/// Handshake version.
pub const VERSION: u16 = 1;
/// Largest handshake message.
pub const HANDSHAKE_BYTES_MAX: usize = 64 * 1024;
/// Nonce length.
pub const NONCE_LEN: usize = 32;
/// Proof length (a core MAC).
pub const PROOF_LEN: usize = byzfs_bft::crypto::MAC_LEN;

/// The acceptor's first message.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    /// [`MAGIC`].
    pub magic: [u8; 4],
    /// [`VERSION`].
    pub version: u16,
    /// The acceptor's cluster.
    pub cluster_id: [u8; 16],
    /// The acceptor's configuration epoch.
    pub epoch: u32,
    /// The acceptor's replica id.
    pub replica: ReplicaId,
    /// Fresh random nonce the dialer's proof must cover.
    pub nonce: [u8; NONCE_LEN],
}

/// The dialer's message.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HelloMsg {
    /// [`MAGIC`].
    pub magic: [u8; 4],
    /// [`VERSION`].
    pub version: u16,
    /// Who is dialing.
    pub hello: Hello,
}

/// Who is dialing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Hello {
    /// Replica `from`, opening its outbound link.
    Replica {
        /// The dialing replica.
        from: ReplicaId,
        /// MAC of [`replica_proof_data`] under `replica_hello_key(from → to)`.
        proof: [u8; PROOF_LEN],
    },
    /// A client session.
    Client {
        /// The admin-signed certificate.
        cert: ClientCert,
        /// Session number (protocol client id = `cert.client << 40 | session`).
        session: u64,
        /// MAC of [`client_proof_data`] under `client_hello_key(cert.client, replica)`.
        proof: [u8; PROOF_LEN],
    },
    /// An unauthenticated status query; the connection closes after the answer.
    Status,
    /// Replica `from`, opening the bulk connection of its outbound link
    /// ([`crate::link_lane`]); [`Hello::Replica`] opens the control connection.
    ReplicaBulk {
        /// The dialing replica.
        from: ReplicaId,
        /// MAC of [`replica_proof_data`] (lane [`LinkLane::Bulk`]) under
        /// `replica_hello_key(from → to)`.
        proof: [u8; PROOF_LEN],
    },
}

impl Hello {
    /// The hello opening connection `lane` of replica `from`'s link.
    pub fn replica(lane: LinkLane, from: ReplicaId, proof: [u8; PROOF_LEN]) -> Hello {
        match lane {
            LinkLane::Control => Hello::Replica { from, proof },
            LinkLane::Bulk => Hello::ReplicaBulk { from, proof },
        }
    }
}

/// The acceptor's answer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Welcome {
    /// The link is open.
    Accepted,
    /// Refused, with a reason for the operator.
    Rejected {
        /// Why.
        reason: String,
    },
    /// The answer to [`Hello::Status`].
    Status(Box<NodeStatus>),
}

/// What a replica's proof for connection `lane` of its link covers (the bulk one's names
/// its lane, so a proof for one connection opens no other).
pub fn replica_proof_data(
    nonce: &[u8; NONCE_LEN],
    from: ReplicaId,
    to: ReplicaId,
    lane: LinkLane,
) -> Vec<u8> {
    let mut v = Vec::with_capacity(NONCE_LEN + 12);
    v.extend_from_slice(nonce);
    v.extend_from_slice(&from.to_le_bytes());
    v.extend_from_slice(&to.to_le_bytes());
    if lane == LinkLane::Bulk {
        v.extend_from_slice(b"bulk");
    }
    v
}

/// What a client's proof covers.
pub fn client_proof_data(
    nonce: &[u8; NONCE_LEN],
    client: ClientId,
    session: u64,
    replica: ReplicaId,
) -> Vec<u8> {
    let mut v = Vec::with_capacity(NONCE_LEN + 20);
    v.extend_from_slice(nonce);
    v.extend_from_slice(&client.to_le_bytes());
    v.extend_from_slice(&session.to_le_bytes());
    v.extend_from_slice(&replica.to_le_bytes());
    v
}

/// A proof: the MAC of `data` under `key`.
pub fn prove(key: &MacKey, data: &[u8]) -> [u8; PROOF_LEN] {
    key.mac(data)
}

/// Why a handshake failed (dialer side).
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// TCP connect failed.
    #[error("cannot connect to {addr}: {error}")]
    Connect {
        /// The address.
        addr: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// The connection failed during the handshake.
    #[error("connection lost during the handshake: {0}")]
    Io(std::io::Error),
    /// No answer in time.
    #[error("handshake timed out")]
    Timeout,
    /// A message did not decode.
    #[error("malformed handshake message")]
    Malformed,
    /// Another handshake version.
    #[error("the peer speaks handshake version {0}, this build speaks {VERSION}")]
    Version(u16),
    /// The peer is not the replica the config names (other cluster, epoch or id).
    #[error("{0} is not that replica of this cluster (cluster id, epoch or replica id differ); check --config")]
    WrongPeer(String),
    /// The acceptor refused us.
    #[error("rejected: {0}")]
    Rejected(String),
}

impl From<std::io::Error> for HandshakeError {
    fn from(e: std::io::Error) -> Self {
        HandshakeError::Io(e)
    }
}

impl From<FrameError> for HandshakeError {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::Closed => HandshakeError::Io(std::io::ErrorKind::UnexpectedEof.into()),
            FrameError::Oversized { .. } => HandshakeError::Malformed,
            FrameError::Io(e) => HandshakeError::Io(e),
        }
    }
}

/// Writes one handshake message (one write, unbuffered).
pub async fn write_msg<T: Serialize, W: AsyncWrite + Unpin>(
    w: &mut W,
    msg: &T,
) -> std::io::Result<()> {
    let body = postcard::to_allocvec(msg)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    w.write_all(&framed(&body)).await?;
    w.flush().await
}

/// Reads one handshake message. Unbuffered reads: nothing past the message is consumed, so
/// the caller can wrap the stream in a buffered reader afterwards.
pub async fn read_msg<T: DeserializeOwned, R: AsyncRead + Unpin>(
    r: &mut R,
) -> Result<T, HandshakeError> {
    let body = read_frame(r, HANDSHAKE_BYTES_MAX).await?;
    postcard::from_bytes(&body).map_err(|_| HandshakeError::Malformed)
}

/// Dials replica `to` of `cluster`, checks its challenge, sends the hello `make` builds from
/// it, and returns the stream with the acceptor's answer. Everything happens within `timeout`.
///
/// If the replica has a `local_socket` that accepts the connection, the link runs over it;
/// otherwise (no such file: another host; a stale file; no permission) over TCP.
pub async fn dial(
    cluster: &ClusterConfig,
    to: ReplicaId,
    make: impl FnOnce(&Challenge) -> Hello,
    timeout: Duration,
) -> Result<(Stream, Welcome), HandshakeError> {
    let addr = replica_address(cluster, to);
    let local = cluster
        .replicas
        .get(to as usize)
        .and_then(|r| r.local_socket.as_ref());
    let work = async {
        let unix = match local {
            Some(path) => match UnixStream::connect(path).await {
                Ok(s) => Some(s),
                Err(error) => {
                    tracing::debug!(replica = to, path = %path.display(), %error, "local socket unreachable; using TCP");
                    None
                }
            },
            None => None,
        };
        let stream = match unix {
            Some(s) => Stream::Unix(s),
            None => {
                let s =
                    TcpStream::connect(&addr)
                        .await
                        .map_err(|source| HandshakeError::Connect {
                            addr: addr.clone(),
                            error: source,
                        })?;
                crate::tcp::configure(&s);
                Stream::Tcp(s)
            }
        };
        handshake_on(stream, cluster, to, make).await
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| HandshakeError::Timeout)?
}

/// The configured address of replica `to` (empty if there is no such replica: connecting
/// then fails with an error naming it).
pub fn replica_address(cluster: &ClusterConfig, to: ReplicaId) -> String {
    cluster
        .replicas
        .get(to as usize)
        .map(|r| r.address.clone())
        .unwrap_or_default()
}

/// The dialer's side of the handshake on a connected `stream` (see [`dial`]); no timeout of
/// its own.
pub async fn handshake_on(
    mut stream: Stream,
    cluster: &ClusterConfig,
    to: ReplicaId,
    make: impl FnOnce(&Challenge) -> Hello,
) -> Result<(Stream, Welcome), HandshakeError> {
    let ch: Challenge = read_msg(&mut stream).await?;
    if ch.magic != MAGIC {
        return Err(HandshakeError::Malformed);
    }
    if ch.version != VERSION {
        return Err(HandshakeError::Version(ch.version));
    }
    if ch.cluster_id != cluster.cluster_id || ch.epoch != cluster.bft.epoch || ch.replica != to {
        return Err(HandshakeError::WrongPeer(replica_address(cluster, to)));
    }
    let hello = HelloMsg {
        magic: MAGIC,
        version: VERSION,
        hello: make(&ch),
    };
    write_msg(&mut stream, &hello).await?;
    let welcome: Welcome = read_msg(&mut stream).await?;
    Ok((stream, welcome))
}

/// Asks replica `replica` of `cluster` for its status (unauthenticated, read-only).
pub async fn query_status(
    cluster: &ClusterConfig,
    replica: ReplicaId,
    timeout: Duration,
) -> Result<NodeStatus, HandshakeError> {
    match dial(cluster, replica, |_| Hello::Status, timeout).await? {
        (_, Welcome::Status(s)) => Ok(*s),
        (_, Welcome::Rejected { reason }) => Err(HandshakeError::Rejected(reason)),
        (_, Welcome::Accepted) => Err(HandshakeError::Malformed),
    }
}
