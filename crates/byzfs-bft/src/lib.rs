//! # byzfs-bft — a sans-IO PBFT replication library
//!
//! The protocol core of ByzFS: PBFT as the BFT library of Castro & Liskov implemented it
//! (MAC authenticators, batching, separate request transmission, tentative execution, the
//! read-only optimisation, checkpoints, view changes, state transfer), as deterministic state
//! machines. This crate contains no networking code, reads no clock, spawns no thread, touches
//! no file and uses no ambient randomness: drivers pass `now` into every handler and perform
//! the [`Action`]s the machines emit. The same code runs under the network runtime and under
//! the deterministic simulator (`byzfs-sim`).
//!
//! Protocol references (`docs/PROTOCOL.md §x`) point at `docs/PROTOCOL.md` in the repository, the
//! engineering rules (`docs/STYLE.md §x`) at `docs/STYLE.md`.
//!
//! ## Example: replicate a key-value store on four in-process replicas
//!
//! ```
//! use byzfs_bft::{Action, Client, ClientAction, Config, Replica, TestKeys, Time};
//! use byzfs_bft::services::kv::{KvOp, KvResult, KvService};
//!
//! let config = Config::new(1); // f = 1, n = 4
//! let keys = TestKeys::new(42, config.n());
//! let mut replicas: Vec<_> = (0..4)
//!     .map(|i| Replica::new(config.clone(), keys.replica(i, [7]), KvService::new(), i as u64, Time::ZERO))
//!     .collect();
//! let mut client = Client::new(config.clone(), keys.client(7), 1);
//! let now = Time::ZERO;
//! client.invoke(now, KvOp::Put { key: b"k".to_vec(), value: b"v".to_vec() }.encode(), false).unwrap();
//!
//! // A toy driver: deliver every frame instantly until nothing moves.
//! let mut result = None;
//! let mut to_replicas: Vec<(u32, std::sync::Arc<[u8]>)> = Vec::new();
//! for _ in 0..50 {
//!     while let Some(a) = client.poll_action() {
//!         match a {
//!             ClientAction::Send { to, bytes } => to_replicas.push((to, bytes)),
//!             ClientAction::Broadcast { bytes } => (0..4).for_each(|i| to_replicas.push((i, bytes.clone()))),
//!             ClientAction::Completed { result: r, .. } => result = Some(r),
//!             ClientAction::Reissued { .. } => {}
//!         }
//!     }
//!     for (to, bytes) in std::mem::take(&mut to_replicas) {
//!         replicas[to as usize].handle_message(now, &bytes);
//!     }
//!     for i in 0..4 {
//!         while let Some(a) = replicas[i].poll_action() {
//!             match a {
//!                 Action::Send { to, bytes } => to_replicas.push((to, bytes)),
//!                 Action::Broadcast { bytes } => (0..4u32).filter(|&j| j != i as u32).for_each(|j| to_replicas.push((j, bytes.clone()))),
//!                 Action::SendClient { bytes, .. } => client.handle_message(now, &bytes),
//!                 Action::Persist(_) | Action::Store(_) | Action::Event(_) | Action::Sync => {}
//!             }
//!         }
//!     }
//! }
//! assert_eq!(KvResult::decode(&result.expect("completed")), Some(KvResult::Ok));
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod action;
pub mod batch;
pub mod client;
pub mod config;
pub mod crypto;
pub mod ids;
pub mod message;
#[cfg(feature = "mutations")]
pub mod mutation;
pub mod replica;
pub mod responsive;
pub(crate) mod retransmit_timeout;
pub mod service;
pub mod services;
pub mod state;
pub mod time;
pub mod wire;
pub mod write_tracker;

pub use action::{
    Action, CheckpointImage, DropReason, Event, PersistRecord, StableVia, StoreRecord,
};
pub use client::{Client, ClientAction, ClientError};
pub use config::{Config, MonitorConfig, ViewChangeRule};
pub use crypto::{ClientKeys, Digest, MacKey, ReplicaKeys, TestKeys};
pub use ids::{ClientId, Principal, ReplicaId, RequestId, Seq, View};
pub use replica::Replica;
pub use service::Service;
pub use time::Time;
