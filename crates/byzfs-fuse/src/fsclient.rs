//! The client a mount talks through: the BFT client of a replicated cluster (ByzFS), or the
//! plain client of one unreplicated server (NO-REP, the seeds' BFS-nr: same file service,
//! same transport and wire format, one process, one MAC each way).

//!
//! Every request it sends carries the credential's grant, with the caller's credentials
//! mapped into it ([`FsClient::request`], `byzfs_fs::proto::grant`).

use byzfs_fs::{Credentials, Grant, Op, Request, SignedGrant};
use byzfs_net::client::UnreplicatedClient;
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::error::SetupError;
use byzfs_net::{ByzClient, ClientCredential, ClientError};

/// One of the two clients, and the grant its requests carry.
pub struct FsClient {
    wire: Wire,
    grant: SignedGrant,
}

/// The client proper.
enum Wire {
    /// Replicated: quorums of replies, retransmission, view changes.
    Replicated(Box<ByzClient>),
    /// Unreplicated: `byzfs unreplicated --service fs` at replica 0's address.
    Unreplicated(Box<UnreplicatedClient>),
}

/// The file-service grant `cred` carries, decoded; an error that says how to get one if it
/// has none.
pub fn signed_grant(cred: &ClientCredential) -> Result<SignedGrant, SetupError> {
    let issue = |why: &str| {
        SetupError::Usage(format!(
            "client {}'s credential {why}; the file service refuses its requests. Issue it \
             a new one: byzfs client-key --config C --id ID --uids ... --gids ... (README \
             \"Security\")",
            cred.cert.client
        ))
    };
    let g = cred
        .grant
        .as_ref()
        .ok_or_else(|| issue("carries no grant (the users it may act for)"))?;
    let grant = Grant::decode(&g.grant).ok_or_else(|| issue("has a grant that does not decode"))?;
    Ok(SignedGrant {
        cert_id: cred.cert.client,
        grant,
        signature: g.signature.0.to_vec(),
    })
}

impl FsClient {
    /// Connects to `cluster` (replicated) or to the unreplicated server listening at its
    /// replica 0's address; an error if `cred` carries no grant ([`signed_grant`]).
    pub async fn connect(
        cluster: &ClusterConfig,
        cred: &ClientCredential,
        unreplicated: bool,
    ) -> Result<FsClient, ClientError> {
        let grant = signed_grant(cred)?;
        let wire = if unreplicated {
            Wire::Unreplicated(Box::new(
                UnreplicatedClient::connect(cluster, cred, true).await?,
            ))
        } else {
            Wire::Replicated(Box::new(ByzClient::connect(cluster, cred).await?))
        };
        Ok(FsClient { wire, grant })
    }

    /// `cred` as this client may state it: mapped into its grant ([`Grant::squash`]).
    /// Idempotent, so credentials mapped early (the mount's, before a writer proof binds
    /// them: `crypt.rs`) are sent unchanged.
    pub fn granted(&self, cred: &Credentials) -> Credentials {
        self.grant.grant.squash(cred)
    }

    /// The encoded request running `op` as `cred`, mapped into this client's grant, with
    /// the grant.
    pub fn request(&self, cred: &Credentials, op: Op) -> Vec<u8> {
        Request::granted(self.granted(cred), op, self.grant.clone()).encode()
    }

    /// The grant.
    pub fn grant(&self) -> &Grant {
        &self.grant.grant
    }

    /// The BFT client's counters (retransmissions, read-only fallbacks and hedges), or
    /// `None` for the unreplicated client.
    pub fn stats(&self) -> Option<byzfs_bft::client::ClientStats> {
        match &self.wire {
            Wire::Replicated(c) => Some(c.stats()),
            Wire::Unreplicated(_) => None,
        }
    }

    /// The protocol client id of this session (the replicas' owner of its locks).
    pub fn id(&self) -> byzfs_bft::ClientId {
        match &self.wire {
            Wire::Replicated(c) => c.id(),
            Wire::Unreplicated(c) => c.id(),
        }
    }

    /// Runs one operation and returns its result bytes.
    pub async fn invoke(&mut self, op: Vec<u8>, read_only: bool) -> Result<Vec<u8>, ClientError> {
        match &mut self.wire {
            Wire::Replicated(c) => c.invoke(op, read_only).await,
            Wire::Unreplicated(c) => c.invoke(op, read_only).await,
        }
    }
}
