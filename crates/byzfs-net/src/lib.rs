//! # byzfs-net — the network runtime of ByzFS
//!
//! Runs the sans-IO PBFT core of [`byzfs_bft`] as real processes: configuration and keys,
//! a TCP transport with a small authenticated handshake, one event loop per replica, and an
//! async client. No protocol logic lives here (docs/STYLE.md §1: this runtime and the
//! simulator are two drivers of one sans-IO core): the runtime moves bytes, keeps time, and
//! performs the core's actions.
//!
//! See `README.md` in this crate for the handshake, the framing and the key derivation.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backoff;
pub mod cert;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod counters;
pub mod error;
pub mod framing;
pub mod handshake;
pub mod hex;
pub mod intro;
pub mod kdf;
pub mod keyfile;
pub mod keygen;
pub mod link_lane;
pub mod node;
mod queue;
pub mod signals;
pub mod status;
pub mod storage;
pub mod stream;
pub mod tcp;

pub use cert::ClientCert;
pub use client::{ByzClient, ClientError, ClientOptions};
pub use cluster::ClusterConfig;
pub use error::SetupError;
pub use keyfile::{AdminSecret, ClientCredential, ReplicaSecret};
#[cfg(feature = "byzantine")]
pub use node::{LieToClients, LiesTold, ReplicaAttack};
pub use node::{NodeError, NodeHandle, NodeOptions, ReplicaNode};
pub use status::NodeStatus;
