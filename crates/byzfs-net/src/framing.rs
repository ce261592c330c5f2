//! Stream framing: every message on a connection is a `u32` little-endian length followed by
//! that many bytes. A length above the limit (the cluster's `message_bytes_max` for protocol
//! frames) is refused before anything is allocated, and the connection is closed — the
//! stream cannot be resynchronised. The body buffer grows only as bytes actually arrive, so a
//! peer that announces a large frame and stalls holds no more memory than it sent.

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

/// Bytes of the length prefix.
pub const LEN_PREFIX: usize = 4;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the connection between frames.
    #[error("connection closed")]
    Closed,
    /// The announced length exceeds the limit.
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    Oversized {
        /// Announced length.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// I/O error or end of stream inside a frame.
    #[error("{0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for FrameError {
    fn from(e: std::io::Error) -> Self {
        FrameError::Io(e)
    }
}

/// Reads one frame of at most `max` bytes.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; LEN_PREFIX];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(FrameError::Io(e)),
    }
    let len = u32::from_le_bytes(len) as u64;
    if len > max as u64 {
        return Err(FrameError::Oversized { len, max });
    }
    // `len <= max`, a usize, so the cast is lossless.
    let len = len as usize;
    let mut buf = Vec::with_capacity(len.min(64 * 1024));
    r.take(len as u64).read_to_end(&mut buf).await?;
    if buf.len() != len {
        return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(buf)
}

/// Writes one frame (not flushed). Frames longer than `u32::MAX` are refused.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, frame: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(frame.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame too long"))?;
    w.write_all(&len.to_le_bytes()).await?;
    w.write_all(frame).await
}

/// One buffer holding the prefix and `frame` (for small unbuffered writes: one syscall).
pub fn framed(frame: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(LEN_PREFIX + frame.len());
    // Callers pass handshake messages of a few KiB at most.
    v.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    v.extend_from_slice(frame);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_limits_and_truncation() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"hello").await.unwrap();
        write_frame(&mut buf, b"").await.unwrap();
        assert_eq!(&buf[..9], framed(b"hello").as_slice());
        let mut r = buf.as_slice();
        assert_eq!(read_frame(&mut r, 16).await.unwrap(), b"hello");
        assert_eq!(read_frame(&mut r, 16).await.unwrap(), b"");
        assert!(matches!(
            read_frame(&mut r, 16).await,
            Err(FrameError::Closed)
        ));

        let big = framed(&[7u8; 100]);
        assert!(matches!(
            read_frame(&mut big.as_slice(), 99).await,
            Err(FrameError::Oversized { len: 100, max: 99 })
        ));
        assert!(matches!(
            read_frame(&mut &big[..50], 100).await,
            Err(FrameError::Io(_))
        ));
        assert!(matches!(
            read_frame(&mut &big[..2], 100).await,
            Err(FrameError::Closed)
        ));
        // A lying prefix claiming 4 GiB is refused without allocating.
        let lie = [0xff, 0xff, 0xff, 0xff, 1, 2, 3];
        assert!(matches!(
            read_frame(&mut lie.as_slice(), 1 << 22).await,
            Err(FrameError::Oversized { .. })
        ));
    }
}
