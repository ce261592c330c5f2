//! The client a mount talks through: the BFT client of a replicated cluster (ByzFS), or the
//! plain client of one unreplicated server (NO-REP, the seeds' BFS-nr: same file service,
//! same transport and wire format, one process, one MAC each way).

//!
//! Every request it sends carries the credential's grant, with the caller's credentials
//! mapped into it ([`FsClient::request`], `byzfs_fs::proto::grant`).

use byzfs_bft::client::Access;
use byzfs_fs::{Credentials, Grant, Op, Request, SignedGrant};
use byzfs_net::client::UnreplicatedClient;
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::error::SetupError;
use byzfs_net::{ByzClient, ClientCredential, ClientError};

/// What a request needs besides the connection: the grant it carries and the client's id.
/// Cloned out of an [`FsClient`] so that any thread can encode requests.
#[derive(Clone)]
pub struct Signer {
    grant: SignedGrant,
    id: byzfs_bft::ClientId,
}

impl Signer {
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

    /// The protocol client id of the session.
    pub fn id(&self) -> byzfs_bft::ClientId {
        self.id
    }
}

/// One of the two clients, and what encodes its requests.
pub struct FsClient {
    wire: Wire,
    signer: Signer,
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
        let id = match &wire {
            Wire::Replicated(c) => c.id(),
            Wire::Unreplicated(c) => c.id(),
        };
        Ok(FsClient {
            wire,
            signer: Signer { grant, id },
        })
    }

    /// `cred` mapped into this client's grant ([`Signer::granted`]).
    pub fn granted(&self, cred: &Credentials) -> Credentials {
        self.signer.granted(cred)
    }

    /// The encoded request running `op` as `cred` ([`Signer::request`]).
    pub fn request(&self, cred: &Credentials, op: Op) -> Vec<u8> {
        self.signer.request(cred, op)
    }

    /// The grant.
    pub fn grant(&self) -> &Grant {
        self.signer.grant()
    }

    /// What encodes this client's requests, for other threads ([`Signer`]).
    pub fn signer(&self) -> Signer {
        self.signer.clone()
    }

    /// Whether requests can be in flight together ([`FsClient::submit_now`]): the replicated
    /// client's window; the unreplicated client runs one at a time.
    pub fn windowed(&self) -> bool {
        matches!(self.wire, Wire::Replicated(_))
    }

    /// Whether the window has room now ([`ByzClient::has_room`]; never for the
    /// unreplicated client, which has none).
    pub fn has_room(&self, access: Access) -> bool {
        match &self.wire {
            Wire::Replicated(c) => c.has_room(access),
            Wire::Unreplicated(_) => false,
        }
    }

    /// Sends `op` without waiting, if the window has room ([`ByzClient::submit_now`]); the
    /// unreplicated client has no window and refuses ([`ClientError::Busy`]).
    pub fn submit_now(
        &mut self,
        op: Vec<u8>,
        access: Access,
    ) -> Result<byzfs_bft::RequestId, ClientError> {
        match &mut self.wire {
            Wire::Replicated(c) => c.submit_now(op, access),
            Wire::Unreplicated(_) => Err(ClientError::Busy),
        }
    }

    /// The next submitted request to complete ([`ByzClient::next_completed`]).
    pub async fn next_completed(&mut self) -> Result<(byzfs_bft::RequestId, Vec<u8>), ClientError> {
        match &mut self.wire {
            Wire::Replicated(c) => c.next_completed().await,
            Wire::Unreplicated(_) => Err(ClientError::UnknownRequest(0)),
        }
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
        self.signer.id()
    }

    /// Runs one operation and returns its result bytes.
    pub async fn invoke(&mut self, op: Vec<u8>, read_only: bool) -> Result<Vec<u8>, ClientError> {
        match &mut self.wire {
            Wire::Replicated(c) => c.invoke(op, read_only).await,
            Wire::Unreplicated(c) => c.invoke(op, read_only).await,
        }
    }
}
