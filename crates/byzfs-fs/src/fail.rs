//! Why an operation stopped ([`Fail`]): a replicated errno, the same at every replica, or a
//! failure of this replica's own store, which must never become replicated state
//! ([`crate::service`] says what happens instead).

use crate::proto::errno::Errno;
use crate::store::StoreError;

/// Why an operation stopped: a replicated error, or a failure of this replica's store.
#[derive(Debug)]
pub(crate) enum Fail {
    /// A deterministic error, the operation's result at every replica.
    Errno(Errno),
    /// A local storage failure (or a corrupt record): not deterministic.
    Store(StoreError),
}

impl From<Errno> for Fail {
    fn from(e: Errno) -> Fail {
        Fail::Errno(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Fail {
        Fail::Store(e)
    }
}

/// Result of an internal step of an operation.
pub(crate) type Res<T> = Result<T, Fail>;
