//! Runtime counters: what the transport dropped, by reason, and traffic totals. Shared by
//! the tasks of one node (or client) through an `Arc`; relaxed atomics, read for status and
//! metrics. Drops of the protocol core (malformed, bad MAC, stale …) are counted by the core
//! itself ([`byzfs_bft::replica::Stats`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why the runtime dropped something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NetDrop {
    /// A frame above `message_bytes_max`: announced by a peer (its connection is closed) or
    /// produced locally (not sent).
    Oversized,
    /// A handshake message did not parse, had the wrong version, or failed authentication.
    BadHandshake,
    /// A handshake did not complete in time.
    HandshakeTimeout,
    /// An incoming connection exceeded the connection limit.
    ConnectionLimit,
    /// A bounded outbound queue (per peer or per client) was full.
    QueueFull,
    /// A reply for a client that has no connection to this replica.
    NoClientConnection,
    /// A client introduction from a peer replica that did not parse or whose certificate
    /// did not verify.
    BadIntro,
    /// A frame on a client's own connection from a client this replica blacklisted (a good
    /// MAC over a bad signature proved it faulty): dropped before the core sees it
    /// (Aardvark's first step, ARCHITECTURE.md "Defences under attack").
    BlacklistedClient,
    /// A frame, connection or handshake of a source shed for flooding useless frames
    /// (`node/shed.rs`).
    Shed,
}

impl NetDrop {
    /// Every reason, in order.
    pub const ALL: [NetDrop; 9] = [
        NetDrop::Oversized,
        NetDrop::BadHandshake,
        NetDrop::HandshakeTimeout,
        NetDrop::ConnectionLimit,
        NetDrop::QueueFull,
        NetDrop::NoClientConnection,
        NetDrop::BadIntro,
        NetDrop::BlacklistedClient,
        NetDrop::Shed,
    ];

    /// Metric label.
    pub fn name(self) -> &'static str {
        match self {
            NetDrop::Oversized => "oversized",
            NetDrop::BadHandshake => "bad_handshake",
            NetDrop::HandshakeTimeout => "handshake_timeout",
            NetDrop::ConnectionLimit => "connection_limit",
            NetDrop::QueueFull => "queue_full",
            NetDrop::NoClientConnection => "no_client_connection",
            NetDrop::BadIntro => "bad_intro",
            NetDrop::BlacklistedClient => "blacklisted_client",
            NetDrop::Shed => "shed",
        }
    }
}

/// Live counters.
#[derive(Debug, Default)]
pub struct Counters {
    drops: [AtomicU64; NetDrop::ALL.len()],
    /// Frames received (after framing, before the core).
    pub frames_in: AtomicU64,
    /// Frames written.
    pub frames_out: AtomicU64,
    /// Frame bytes received.
    pub bytes_in: AtomicU64,
    /// Frame bytes written.
    pub bytes_out: AtomicU64,
    /// Connections accepted.
    pub connections_accepted: AtomicU64,
    /// Of those, accepted on the Unix-domain socket ([`crate::stream`]).
    pub local_connections_accepted: AtomicU64,
    /// Handshakes that succeeded (either side).
    pub handshakes_ok: AtomicU64,
}

impl Counters {
    /// Counts one drop.
    pub fn dropped(&self, why: NetDrop) {
        self.drops[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Drops counted for `why`.
    pub fn drops(&self, why: NetDrop) -> u64 {
        self.drops[why as usize].load(Ordering::Relaxed)
    }

    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// A plain copy.
    pub fn snapshot(&self) -> NetCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        NetCounters {
            dropped: NetDrop::ALL
                .iter()
                .map(|&d| (d.name().to_string(), self.drops(d)))
                .collect(),
            frames_in: get(&self.frames_in),
            frames_out: get(&self.frames_out),
            bytes_in: get(&self.bytes_in),
            bytes_out: get(&self.bytes_out),
            connections_accepted: get(&self.connections_accepted),
            local_connections_accepted: get(&self.local_connections_accepted),
            handshakes_ok: get(&self.handshakes_ok),
        }
    }
}

/// A copy of [`Counters`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Same fields as `Counters`; `dropped` is keyed by `NetDrop::name`.
pub struct NetCounters {
    pub dropped: BTreeMap<String, u64>,
    pub frames_in: u64,
    pub frames_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub connections_accepted: u64,
    pub local_connections_accepted: u64,
    pub handshakes_ok: u64,
}
