//! Setup errors: a missing, unreadable, unsafe or wrong key file, or a cluster file that does
//! not parse or is inconsistent. Each renders as ONE line that says what to fix, because an
//! operator reads it as the only output of a node that refused to start.

use byzfs_bft::ReplicaId;
use std::path::PathBuf;

/// Why a node, a client or `keygen` cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A file that must exist does not.
    #[error("{} does not exist; {hint}", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
        /// What to do about it.
        hint: String,
    },
    /// A file exists but cannot be read (or written).
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// "read", "write", "create" …
        action: &'static str,
        /// The OS error.
        error: std::io::Error,
    },
    /// A secret key file is accessible by group or others.
    #[error("{} is readable by others (mode {mode:04o}); run: chmod 600 {}", path.display(), path.display())]
    KeyPermissions {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A file does not parse.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem (0 if unknown).
        line: usize,
        /// The parser's message, on one line.
        message: String,
    },
    /// A key file holds another kind of key than expected.
    #[error("{} holds a {found} key, not a {expected} key; pass the {expected} key file", path.display())]
    WrongKeyKind {
        /// The key file.
        path: PathBuf,
        /// The kind expected.
        expected: &'static str,
        /// The kind found.
        found: &'static str,
    },
    /// A replica key file belongs to another replica.
    #[error("{} is the key of replica {found}, not of replica {expected}; pass replica-{expected}.key", path.display())]
    WrongReplicaKey {
        /// The key file.
        path: PathBuf,
        /// The replica id asked for.
        expected: ReplicaId,
        /// The id in the file.
        found: ReplicaId,
    },
    /// A key file does not match the public keys of the cluster file.
    #[error("{} does not match {what} in {}; use the key file generated together with this config", key.display(), config.display())]
    KeyMismatch {
        /// The key file.
        key: PathBuf,
        /// The cluster file.
        config: PathBuf,
        /// Which public key ("replica 2's public keys", "the admin public key" …).
        what: String,
    },
    /// The cluster file is inconsistent.
    #[error("{}: {message}", path.display())]
    Inconsistent {
        /// The cluster file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A replica id that is not in the cluster.
    #[error("replica {id} is not in {} (ids are 0..={max}); pass --id between 0 and {max}", path.display())]
    UnknownReplica {
        /// The cluster file.
        path: PathBuf,
        /// The id asked for.
        id: ReplicaId,
        /// The highest id in the cluster.
        max: ReplicaId,
    },
    /// Invalid arguments to key generation.
    #[error("{0}")]
    Usage(String),
}

/// The 1-based line of byte offset `at` in `text`.
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    text.get(..at)
        .map_or(0, |t| t.bytes().filter(|&b| b == b'\n').count() + 1)
}

/// A TOML error as a [`SetupError::Parse`] (the parser's message is multi-line; keep its first
/// line and the line number).
pub(crate) fn toml_error(path: &std::path::Path, text: &str, e: &toml::de::Error) -> SetupError {
    let line = e.span().map_or(0, |s| line_of(text, s.start));
    let message = e
        .message()
        .lines()
        .next()
        .unwrap_or("invalid TOML")
        .to_string();
    SetupError::Parse {
        path: path.to_path_buf(),
        line,
        message,
    }
}
