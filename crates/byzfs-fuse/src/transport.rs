//! What the crypto layer (`crypt.rs`) needs of the cluster below it, and nothing more: a
//! call, whether reads must be ordered, the caller's credentials as requests carry them,
//! and a reserved handle for a new directory. The mount's `Link` is one transport
//! (`link.rs`); a test can run the layer over a file service in memory, without FUSE or
//! a cluster (issue #45 item 1: layers that own their state, each testable alone).

use byzfs_fs::{Credentials, Errno, FileHandle, FsResult, Op};

/// The wire under the crypto layer.
pub(crate) trait Transport {
    /// Sends `op` as `cred` as it is (read-only if `read_only`) and waits for its result.
    fn transmit(&mut self, cred: &Credentials, op: Op, read_only: bool) -> FsResult;
    /// Whether every read must be sent ordered (`--strict`).
    fn strict(&self) -> bool;
    /// `cred` mapped into the client's grant, as its requests carry it (proofs bind it).
    fn granted(&self, cred: &Credentials) -> Credentials;
    /// A reserved handle for a new directory, from the mount's one pool: the replicas take
    /// a session's handles in increasing order only (`byzfs_fs::reserve`).
    fn new_handle(&mut self, cred: &Credentials) -> Result<FileHandle, Errno>;
}
