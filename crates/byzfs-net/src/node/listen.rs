//! A node's listening sockets: its TCP address, and its Unix-domain socket if the cluster
//! file gives it one ([`crate::stream`]).
//!
//! The Unix socket is an optimisation, so failing to open it is a warning, never fatal: the
//! node then serves over TCP only, and dialers fall back to TCP.

use super::NodeError;
use crate::cluster::ReplicaInfo;
use std::net::SocketAddr;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use tokio::net::{TcpListener, UnixListener, UnixStream};

/// The sockets a node has bound but not yet serves: bound as soon as the node is set up
/// ([`Bound::bind`]), so that neither peers nor clients find one address open and the
/// other not yet there while the node restores its state.
#[derive(Debug, Default)]
pub(crate) struct Bound {
    tcp: Option<std::net::TcpListener>,
    local: Option<Local<std::os::unix::net::UnixListener>>,
    local_tried: bool,
}

/// A bound Unix socket.
#[derive(Debug)]
struct Local<L> {
    listener: L,
    file: SocketFile,
}

/// A socket's file, removed when the node stops.
#[derive(Debug)]
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Bound {
    /// Sockets starting from an already bound TCP listener (tests bind port 0 first).
    pub fn with_tcp(tcp: std::net::TcpListener) -> Bound {
        Bound {
            tcp: Some(tcp),
            ..Bound::default()
        }
    }

    /// Binds `listen`, else `me`'s TCP address, unless already bound, and its Unix socket if it has one
    /// (once; a failure there is logged and the node serves over TCP only). Returns the
    /// TCP listener's local address (the port the OS chose, for port 0).
    pub fn bind(
        &mut self,
        me: &ReplicaInfo,
        listen: Option<&str>,
    ) -> Result<SocketAddr, NodeError> {
        let at = listen.unwrap_or(&me.address);
        let bind_err = |error| NodeError::Bind {
            addr: at.to_string(),
            error,
        };
        let l = match &mut self.tcp {
            Some(l) => l,
            None => self
                .tcp
                .insert(std::net::TcpListener::bind(at).map_err(bind_err)?),
        };
        l.set_nonblocking(true).map_err(bind_err)?;
        let addr = l.local_addr().map_err(bind_err)?;
        if let (Some(path), false) = (&me.local_socket, self.local_tried) {
            self.local_tried = true;
            match bind_local(path) {
                Ok(listener) => {
                    tracing::debug!(replica = me.id, path = %path.display(), "listening on the local socket");
                    self.local = Some(Local {
                        listener,
                        file: SocketFile(path.clone()),
                    });
                }
                Err(reason) => tracing::warn!(
                    replica = me.id,
                    path = %path.display(),
                    %reason,
                    "not listening on the local socket; local peers and clients will use TCP"
                ),
            }
        }
        Ok(addr)
    }

    /// The tokio listeners (inside a tokio runtime), after [`Bound::bind`].
    pub fn into_listeners(mut self, me: &ReplicaInfo) -> Result<Listeners, NodeError> {
        let bind_err = |error| NodeError::Bind {
            addr: me.address.clone(),
            error,
        };
        let tcp = self
            .tcp
            .take()
            .ok_or_else(|| bind_err(std::io::ErrorKind::NotConnected.into()))?;
        let tcp = TcpListener::from_std(tcp).map_err(bind_err)?;
        let local = match self.local.take() {
            None => None,
            Some(Local { listener, file }) => {
                let listener = listener
                    .set_nonblocking(true)
                    .and_then(|()| UnixListener::from_std(listener));
                match listener {
                    Ok(listener) => Some(Local { listener, file }),
                    Err(error) => {
                        tracing::warn!(replica = me.id, %error, "cannot serve the local socket; local peers and clients will use TCP");
                        None
                    }
                }
            }
        };
        Ok(Listeners { tcp, local })
    }
}

/// The listeners `accept_loop` serves.
#[derive(Debug)]
pub(crate) struct Listeners {
    pub tcp: TcpListener,
    local: Option<Local<UnixListener>>,
}

impl Listeners {
    /// The next connection on the Unix socket; never completes if there is none.
    pub async fn accept_local(&self) -> std::io::Result<UnixStream> {
        match &self.local {
            Some(l) => l.listener.accept().await.map(|(s, _)| s),
            None => std::future::pending().await,
        }
    }
}

/// Binds a Unix socket at `path`. A socket file left by a process that died is replaced;
/// a live listener there (another process configured with the same path) or a file that
/// is not a socket is left alone.
fn bind_local(path: &Path) -> Result<std::os::unix::net::UnixListener, String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err("another process is listening there".into());
            }
            std::fs::remove_file(path)
                .map_err(|e| format!("cannot remove the stale socket: {e}"))?;
        }
        Ok(_) => return Err("a file that is not a socket is in the way".into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.to_string()),
    }
    std::os::unix::net::UnixListener::bind(path).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stale_sockets_are_replaced_and_live_ones_and_files_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.sock");
        // A socket file whose listener is gone: replaced.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let live = bind_local(&path).unwrap();
        // A live listener: left alone.
        assert!(bind_local(&path).unwrap_err().contains("listening"));
        drop(live);
        // A regular file: never deleted.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"data").unwrap();
        assert!(bind_local(&path).unwrap_err().contains("not a socket"));
        assert_eq!(std::fs::read(&path).unwrap(), b"data");
    }
}
