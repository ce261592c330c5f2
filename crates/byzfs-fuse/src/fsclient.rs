//! The client a mount talks through: the BFT client of a replicated cluster (ByzFS), or the
//! plain client of one unreplicated server (NO-REP, the seeds' BFS-nr: same file service,
//! same transport and wire format, one process, one MAC each way).

use byzfs_net::client::UnreplicatedClient;
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::{ByzClient, ClientCredential, ClientError};

/// One of the two clients.
pub enum FsClient {
    /// Replicated: quorums of replies, retransmission, view changes.
    Replicated(Box<ByzClient>),
    /// Unreplicated: `byzfs unreplicated --service fs` at replica 0's address.
    Unreplicated(Box<UnreplicatedClient>),
}

impl FsClient {
    /// Connects to `cluster` (replicated) or to the unreplicated server listening at its
    /// replica 0's address.
    pub async fn connect(
        cluster: &ClusterConfig,
        cred: &ClientCredential,
        unreplicated: bool,
    ) -> Result<FsClient, ClientError> {
        Ok(if unreplicated {
            FsClient::Unreplicated(Box::new(
                UnreplicatedClient::connect(cluster, cred, true).await?,
            ))
        } else {
            FsClient::Replicated(Box::new(ByzClient::connect(cluster, cred).await?))
        })
    }

    /// The BFT client's counters (retransmissions, read-only fallbacks and hedges), or
    /// `None` for the unreplicated client.
    pub fn stats(&self) -> Option<byzfs_bft::client::ClientStats> {
        match self {
            FsClient::Replicated(c) => Some(c.stats()),
            FsClient::Unreplicated(_) => None,
        }
    }

    /// The protocol client id of this session (the replicas' owner of its locks).
    pub fn id(&self) -> byzfs_bft::ClientId {
        match self {
            FsClient::Replicated(c) => c.id(),
            FsClient::Unreplicated(c) => c.id(),
        }
    }

    /// Runs one operation and returns its result bytes.
    pub async fn invoke(&mut self, op: Vec<u8>, read_only: bool) -> Result<Vec<u8>, ClientError> {
        match self {
            FsClient::Replicated(c) => c.invoke(op, read_only).await,
            FsClient::Unreplicated(c) => c.invoke(op, read_only).await,
        }
    }
}
