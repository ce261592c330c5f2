//! What a request asks of the replicas, and what it must follow (docs/PROTOCOL.md §1.8).

/// How a request runs: ordered, or read-only after or apart from this client's ordered
/// requests still outstanding. `bool` converts as the `read_only` flag always did (`true`:
/// [`Access::Read`]).
///
/// ```
/// use byzfs_bft::client::Access;
/// assert_eq!(Access::from(true), Access::Read);
/// assert!(Access::ReadApart.is_read_only() && !Access::Ordered.is_read_only());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Ordered (a write, or a read that must be ordered).
    Ordered,
    /// Read-only, and after every ordered request of this client still outstanding: sent
    /// ordered while any is (a read-only execution could run before it and miss its write).
    Read,
    /// Read-only even while ordered requests of this client are outstanding: the caller
    /// knows the read needs none of them (it reads nothing they change, or need not see
    /// them: they have not completed, so a read that misses them is still linearizable).
    /// A byzfs mount reads so what no write-back it answered early still changes
    /// (`byzfs-fuse` `inflight.rs` `must_precede`).
    ReadApart,
}

impl Access {
    /// Whether it asks for the read-only optimisation (replicas decide for themselves from
    /// the operation: `Service::is_read_only`).
    pub fn is_read_only(self) -> bool {
        !matches!(self, Access::Ordered)
    }
}

impl From<bool> for Access {
    fn from(read_only: bool) -> Access {
        if read_only {
            Access::Read
        } else {
            Access::Ordered
        }
    }
}
