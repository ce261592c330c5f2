//! The PBFT replica. PLACEHOLDER.
use crate::service::Service;
/// A replica.
pub struct Replica<S: Service> {
    _s: S,
}
