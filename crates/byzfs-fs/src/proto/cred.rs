//! Who an operation runs as ([`Credentials`]): stated by the client machine (AUTH_SYS), within
//! what its grant allows ([`super::grant`]).

use serde::{Deserialize, Serialize};

/// The identity an operation runs as.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug, Default)]
pub struct Credentials {
    /// Effective user id (0 = root: bypasses permission checks, as on Linux).
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Credentials {
    /// Root.
    pub fn root() -> Credentials {
        Credentials::default()
    }

    /// A user with primary group `gid` and no supplementary groups.
    pub fn user(uid: u32, gid: u32) -> Credentials {
        Credentials {
            uid,
            gid,
            groups: Vec::new(),
        }
    }
}
