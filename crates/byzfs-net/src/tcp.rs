//! Socket options shared by every link.

use std::time::Duration;
use tokio::net::TcpStream;

/// Idle time before the first keepalive probe, interval between probes, and probes lost
/// before the kernel declares the peer dead. A peer host that vanished without closing its
/// connections (power loss, partition) is then noticed in about 25 s instead of the kernel's
/// default two hours; the link's writer fails and the dialer reconnects.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;

/// Prepares a connected stream: no Nagle delay (requests and votes are small and latency-
/// bound), TCP keepalive. Failures are ignored: both options are optimisations.
pub fn configure(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_RETRIES);
    let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keepalive_and_nodelay_are_set() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        configure(&s);
        let sock = socket2::SockRef::from(&s);
        assert!(sock.keepalive().unwrap());
        assert_eq!(sock.tcp_keepalive_time().unwrap(), KEEPALIVE_IDLE);
        assert_eq!(sock.tcp_keepalive_retries().unwrap(), KEEPALIVE_RETRIES);
        assert!(s.nodelay().unwrap());
    }
}
