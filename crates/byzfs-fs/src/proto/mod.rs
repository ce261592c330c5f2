//! The protocol of the file service: what a client sends through `byzfs_bft::Client::invoke`
//! (a [`request::Request`] of an [`op::Op`]) and what it gets back ([`reply::FsResult`]),
//! with everything those carry and the rules both sides apply to them: bounds on decoding,
//! what a batch may hold, the lock rules a delegation's holder decides by, grants, group
//! records and writer proofs.
//!
//! A leaf: nothing here imports the rest of the crate, so a mount links exactly what the
//! replicas decode, and a change to how operations run cannot change what they mean on the
//! wire. The encoding is postcard; `encoding.rs`'s tests pin every variant's number.

pub mod attr;
pub mod batch;
pub mod bounded;
pub(crate) mod codec;
pub mod cred;
pub mod errno;
pub mod family;
pub mod grant;
pub mod group;
pub mod handle;
pub mod lock;
pub mod op;
pub mod proof;
pub mod reply;
pub mod request;
pub mod signed;
