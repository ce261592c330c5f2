//! The two kinds of connection a link runs over: TCP, and a Unix-domain stream socket for
//! processes on the same host (`local_socket` in the cluster file).
//!
//! Why a second kind: replicas and clients of a local cluster share the host, and on
//! loopback a TCP send runs the receiver's whole TCP input path inside `sendto`. Measured
//! on the 2-core development machine with a C ping-pong of 300-byte messages (docs/bench/HISTORY.md,
//! "Unix sockets between co-located processes, and write-behind in the mount"): a Unix stream socket costs about 30 % less CPU per message and its round
//! trip is about 30 % shorter. The handshake and every frame's MACs are the same on both
//! kinds, so the kind of socket changes nothing about who may speak.

use core::pin::Pin;
use core::task::{Context, Poll};
use std::io::IoSlice;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{tcp, unix, TcpStream, UnixStream};

/// A connected stream of either kind.
#[derive(Debug)]
pub enum Stream {
    /// TCP (configured by [`crate::tcp::configure`]).
    Tcp(TcpStream),
    /// A Unix-domain stream socket.
    Unix(UnixStream),
}

/// The reading half of a [`Stream`].
#[derive(Debug)]
pub enum ReadHalf {
    /// TCP.
    Tcp(tcp::OwnedReadHalf),
    /// Unix.
    Unix(unix::OwnedReadHalf),
}

/// The writing half of a [`Stream`].
#[derive(Debug)]
pub enum WriteHalf {
    /// TCP.
    Tcp(tcp::OwnedWriteHalf),
    /// Unix.
    Unix(unix::OwnedWriteHalf),
}

impl Stream {
    /// Splits into halves that can be used from two tasks.
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Tcp(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
            }
            Stream::Unix(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Unix(r), WriteHalf::Unix(w))
            }
        }
    }

    /// Whether this is a Unix-domain socket.
    pub fn is_local(&self) -> bool {
        matches!(self, Stream::Unix(_))
    }
}

/// Forwards a poll method to whichever socket `$self` holds (all four are `Unpin`).
macro_rules! forward {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Self::Tcp($s) => $e,
            Self::Unix($s) => $e,
        }
    };
}

/// Implements `AsyncRead` by forwarding.
macro_rules! impl_read {
    ($t:ty) => {
        impl AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<std::io::Result<()>> {
                forward!(self, s => Pin::new(s).poll_read(cx, buf))
            }
        }
    };
}

/// Implements `AsyncWrite` by forwarding.
macro_rules! impl_write {
    ($t:ty) => {
        impl AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<std::io::Result<usize>> {
                forward!(self, s => Pin::new(s).poll_write(cx, buf))
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<std::io::Result<usize>> {
                forward!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
            }

            fn is_write_vectored(&self) -> bool {
                match self {
                    Self::Tcp(s) => s.is_write_vectored(),
                    Self::Unix(s) => s.is_write_vectored(),
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
                forward!(self, s => Pin::new(s).poll_flush(cx))
            }

            fn poll_shutdown(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<std::io::Result<()>> {
                forward!(self, s => Pin::new(s).poll_shutdown(cx))
            }
        }
    };
}

impl_read!(Stream);
impl_read!(ReadHalf);
impl_write!(Stream);
impl_write!(WriteHalf);

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// Sends `msg` one way and its reverse back over `a` and `b` after splitting both.
    async fn echo(a: Stream, b: Stream) {
        let (mut ar, mut aw) = a.into_split();
        let (mut br, mut bw) = b.into_split();
        aw.write_all(b"ping").await.unwrap();
        aw.flush().await.unwrap();
        let mut buf = [0u8; 4];
        br.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        bw.write_all(b"pong").await.unwrap();
        ar.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
        drop(bw);
        assert_eq!(ar.read(&mut buf).await.unwrap(), 0, "end of stream");
    }

    #[tokio::test]
    async fn both_kinds_carry_bytes_both_ways() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        assert!(!Stream::Tcp(b).is_local());
        let b = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (c, _) = l.accept().await.unwrap();
        drop(a);
        echo(Stream::Tcp(b), Stream::Tcp(c)).await;

        let (a, b) = UnixStream::pair().unwrap();
        assert!(Stream::Unix(a).is_local());
        let (a, c) = UnixStream::pair().unwrap();
        drop(b);
        echo(Stream::Unix(a), Stream::Unix(c)).await;
    }
}
