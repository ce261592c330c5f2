//! The sans-IO client (PROTOCOL.md §1.6, §1.8). PLACEHOLDER API — implementation in progress.

use crate::config::Config;
use crate::crypto::ClientKeys;
use crate::ids::{ReplicaId, RequestId};
use crate::time::Time;
use std::sync::Arc;

/// Output of the client state machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientAction {
    /// Send a frame to one replica.
    Send {
        /// Destination.
        to: ReplicaId,
        /// The frame.
        bytes: Arc<[u8]>,
    },
    /// Send a frame to every replica.
    Broadcast {
        /// The frame.
        bytes: Arc<[u8]>,
    },
    /// The outstanding request completed with this result.
    Completed {
        /// The request.
        rid: RequestId,
        /// The accepted result.
        result: Vec<u8>,
    },
}

/// Why an invocation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// A request is already outstanding (one at a time per client).
    #[error("a request is already outstanding")]
    Busy,
    /// The operation exceeds the configured maximum size.
    #[error("operation too large")]
    TooLarge,
}

/// A BFT client.
pub struct Client {
    _config: Config,
    _keys: ClientKeys,
}

impl Client {
    /// Creates a client.
    pub fn new(config: Config, keys: ClientKeys, rng_seed: u64) -> Client {
        let _ = rng_seed;
        Client { _config: config, _keys: keys }
    }
    /// Invokes an operation.
    pub fn invoke(&mut self, now: Time, op: Vec<u8>, read_only: bool) -> Result<RequestId, ClientError> {
        let _ = (now, op, read_only);
        Err(ClientError::Busy)
    }
    /// Handles a frame from a replica.
    pub fn handle_message(&mut self, now: Time, bytes: &[u8]) {
        let _ = (now, bytes);
    }
    /// Handles timer expiry.
    pub fn handle_timeout(&mut self, now: Time) {
        let _ = now;
    }
    /// The next deadline.
    pub fn poll_timeout(&self) -> Option<Time> {
        None
    }
    /// The next output.
    pub fn poll_action(&mut self) -> Option<ClientAction> {
        None
    }
}
