//! The simulated network (docs/PROTOCOL.md §6.4 S-NET, S-PART): a directed link matrix between
//! nodes (replica instances and clients) plus seeded per-frame faults — latency with jitter and
//! a heavy tail (which also reorders), loss, duplication, replay of an older frame of the same
//! link, and corruption by bit flips.
//!
//! Partitions are links switched off; they apply when a frame is sent (a frame already in
//! flight arrives). *Slow links* add a fixed extra delay to every copy sent over one directed
//! link (no random draws: switching them on never shifts the network's random stream). *Thin
//! links* carry a set number of bytes per second: a frame waits for the frames sent over the
//! link before it, then for its own bytes to cross (no random draws either; off by default,
//! so existing seeds keep their traces). Issue #45 item 4 asks for it: on a 1–5 Mb/s link a
//! body takes seconds to cross, which timers fixed in time do not know. A link from a node to
//! itself is always up and fault-free.

use crate::rng::{chance, Ppm, SimRng};
use rand::Rng;
use std::collections::VecDeque;
use std::sync::Arc;

/// Index of a node on the network.
pub type NodeIdx = usize;

/// How many recent frames per link are kept as replay material.
pub const REPLAY_HISTORY: usize = 16;

/// Per-frame fault probabilities and latency shape. One set applies to every link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetFaults {
    /// Minimum one-way latency.
    pub latency_min_us: u64,
    /// Uniform jitter added to the minimum.
    pub jitter_us: u64,
    /// Probability of a heavy-tail delay on top.
    pub tail_ppm: Ppm,
    /// Largest heavy-tail delay (log-uniformly distributed below it).
    pub tail_max_us: u64,
    /// Loss probability.
    pub drop_ppm: Ppm,
    /// Probability of an extra copy.
    pub dup_ppm: Ppm,
    /// Probability of also delivering an older frame of the same link.
    pub replay_ppm: Ppm,
    /// Probability that a delivered copy has 1–3 bits flipped.
    pub corrupt_ppm: Ppm,
}

impl NetFaults {
    /// A clean LAN: 0.2–1.2 ms, no loss.
    pub fn benign() -> NetFaults {
        NetFaults {
            latency_min_us: 200,
            jitter_us: 1_000,
            tail_ppm: 0,
            tail_max_us: 0,
            drop_ppm: 0,
            dup_ppm: 0,
            replay_ppm: 0,
            corrupt_ppm: 0,
        }
    }

    /// Constant latency, no faults (tests).
    pub fn perfect(latency_us: u64) -> NetFaults {
        NetFaults {
            latency_min_us: latency_us,
            jitter_us: 0,
            ..NetFaults::benign()
        }
    }
}

/// What happened to a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    /// The frame as sent.
    Original,
    /// An extra copy.
    Duplicate,
    /// An older frame of the same link, re-delivered.
    Replay,
}

/// One copy the network will deliver.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// Delay from now.
    pub after_us: u64,
    /// The bytes delivered (possibly corrupted).
    pub bytes: Arc<[u8]>,
    /// Which copy this is.
    pub kind: CopyKind,
    /// Whether bits were flipped.
    pub corrupted: bool,
}

/// The fate of one sent frame.
#[derive(Clone, Debug)]
pub enum Fate {
    /// The link is down (partition).
    LinkDown,
    /// Lost (the original; a replay may still be delivered).
    Lost(Vec<Delivery>),
    /// Delivered as these copies.
    Delivered(Vec<Delivery>),
}

impl Fate {
    /// Every copy that will arrive.
    pub fn deliveries(&self) -> &[Delivery] {
        match self {
            Fate::LinkDown => &[],
            Fate::Lost(d) | Fate::Delivered(d) => d,
        }
    }
}

/// Counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Frames sent.
    pub sent: u64,
    /// Frames refused by a down link.
    pub link_down: u64,
    /// Frames lost.
    pub lost: u64,
    /// Extra copies.
    pub duplicated: u64,
    /// Old frames replayed.
    pub replayed: u64,
    /// Copies corrupted.
    pub corrupted: u64,
}

/// The lane a frame takes on an access link: 0 for agreement messages, 1 for the rest
/// (bodies, PRE-PREPAREs, state, replies), as `byzfs-net`'s `LinkLane::of` sends them.
fn lane(frame: &[u8]) -> usize {
    match byzfs_bft::message::Tag::of_frame(frame) {
        Some(t) if t.is_agreement() => 0,
        _ => 1,
    }
}

/// The network.
pub struct Network {
    nodes: usize,
    up: Vec<bool>,
    extra_us: Vec<u64>,
    /// Bytes per second of each directed link (0: no limit).
    rate: Vec<u64>,
    /// When each directed link has sent what it was given (microseconds).
    busy_until_us: Vec<u64>,
    /// Bytes per second of each node's access link, each way (0: no limit): what a site's
    /// link to the wide area is in `byzfs bench --sites`, shared by every peer.
    access_rate: Vec<u64>,
    /// When each node's access link has sent (`up`) and received (`down`) what it was
    /// given, per lane ([`lane`]; microseconds).
    up_busy_us: Vec<[u64; 2]>,
    down_busy_us: Vec<[u64; 2]>,
    faults: NetFaults,
    history: Vec<VecDeque<Arc<[u8]>>>,
    rng: SimRng,
    stats: NetStats,
}

impl Network {
    /// `nodes` nodes, every link up, faults `faults`.
    pub fn new(nodes: usize, faults: NetFaults, rng: SimRng) -> Network {
        Network {
            nodes,
            up: vec![true; nodes * nodes],
            extra_us: vec![0; nodes * nodes],
            rate: vec![0; nodes * nodes],
            busy_until_us: vec![0; nodes * nodes],
            access_rate: vec![0; nodes],
            up_busy_us: vec![[0; 2]; nodes],
            down_busy_us: vec![[0; 2]; nodes],
            faults,
            history: vec![VecDeque::new(); nodes * nodes],
            rng,
            stats: NetStats::default(),
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Current faults.
    pub fn faults(&self) -> &NetFaults {
        &self.faults
    }

    /// Replaces the faults.
    pub fn set_faults(&mut self, faults: NetFaults) {
        self.faults = faults;
    }

    /// Counters.
    pub fn stats(&self) -> &NetStats {
        &self.stats
    }

    /// Whether `from → to` is up.
    pub fn link_up(&self, from: NodeIdx, to: NodeIdx) -> bool {
        from == to || self.up[from * self.nodes + to]
    }

    /// Switches the directed link `from → to`.
    pub fn set_link(&mut self, from: NodeIdx, to: NodeIdx, up: bool) {
        if from != to {
            self.up[from * self.nodes + to] = up;
        }
    }

    /// Sets the extra delay of every copy sent over `from → to` (0: none).
    pub fn set_link_delay(&mut self, from: NodeIdx, to: NodeIdx, extra_us: u64) {
        if from != to {
            self.extra_us[from * self.nodes + to] = extra_us;
        }
    }

    /// The extra delay of `from → to`.
    pub fn link_delay(&self, from: NodeIdx, to: NodeIdx) -> u64 {
        if from == to {
            0
        } else {
            self.extra_us[from * self.nodes + to]
        }
    }

    /// Sets how many bytes per second `from → to` carries (0: no limit).
    pub fn set_link_rate(&mut self, from: NodeIdx, to: NodeIdx, bytes_per_sec: u64) {
        if from != to {
            self.rate[from * self.nodes + to] = bytes_per_sec;
        }
    }

    /// Sets how many bytes per second `node`'s access link carries each way (0: no limit).
    /// Every frame `node` sends crosses its link up, then the receiver's down: copies to
    /// several peers queue behind each other, as on a site's one link.
    pub fn set_access_rate(&mut self, node: NodeIdx, bytes_per_sec: u64) {
        self.access_rate[node] = bytes_per_sec;
    }

    /// How long a frame from `from` to `to` at `now_us` waits and crosses the sender's
    /// access link up and the receiver's down. The two overlap (a frame enters the link
    /// down as its packets arrive): on idle links it takes one crossing at the slower
    /// rate. Each lane queues apart ([`lane`]), as the runtime's two connections per
    /// link do, whose packets the links interleave (`byzfs-net` `link_lane.rs`).
    fn access(&mut self, from: NodeIdx, to: NodeIdx, now_us: u64, bytes: &[u8]) -> u64 {
        let (len, l) = (bytes.len() as u64, lane(bytes));
        let cross = |rate: u64| (rate > 0).then(|| len.saturating_mul(1_000_000).div_ceil(rate));
        let (mut start, mut end) = (now_us, now_us);
        if let Some(c) = cross(self.access_rate[from]) {
            start = self.up_busy_us[from][l].max(now_us);
            end = start.saturating_add(c);
            self.up_busy_us[from][l] = end;
        }
        if let Some(c) = cross(self.access_rate[to]) {
            let down_start = self.down_busy_us[to][l].max(start);
            end = end.max(down_start.saturating_add(c));
            self.down_busy_us[to][l] = end;
        }
        end - now_us
    }

    /// How long a frame of `len` bytes sent over `link` at `now_us` waits and crosses: the
    /// link is busy with it until then.
    fn occupy(&mut self, link: usize, now_us: u64, len: usize) -> u64 {
        let rate = self.rate[link];
        if rate == 0 {
            return 0;
        }
        let cross = (len as u64).saturating_mul(1_000_000).div_ceil(rate);
        let start = self.busy_until_us[link].max(now_us);
        self.busy_until_us[link] = start.saturating_add(cross);
        self.busy_until_us[link] - now_us
    }

    /// Every directed link that is down, in order.
    pub fn down_links(&self) -> Vec<(NodeIdx, NodeIdx)> {
        (0..self.nodes)
            .flat_map(|a| (0..self.nodes).map(move |b| (a, b)))
            .filter(|&(a, b)| !self.link_up(a, b))
            .collect()
    }

    /// Brings every link up and removes every extra delay and rate limit.
    pub fn heal_all(&mut self) {
        self.up.iter_mut().for_each(|u| *u = true);
        self.extra_us.iter_mut().for_each(|d| *d = 0);
        self.rate.iter_mut().for_each(|r| *r = 0);
        self.access_rate.iter_mut().for_each(|r| *r = 0);
    }

    fn latency(&mut self) -> u64 {
        let f = &self.faults;
        let mut d = f.latency_min_us
            + if f.jitter_us > 0 {
                self.rng.gen_range(0..=f.jitter_us)
            } else {
                0
            };
        let (tail_ppm, tail_max) = (f.tail_ppm, f.tail_max_us);
        if tail_max > 0 && chance(&mut self.rng, tail_ppm) {
            // Log-uniform below the maximum: most tails are short, a few are huge.
            let shift = self.rng.gen_range(0..8u32);
            d += self.rng.gen_range(0..=tail_max >> shift);
        }
        d
    }

    fn maybe_corrupt(&mut self, bytes: &Arc<[u8]>) -> (Arc<[u8]>, bool) {
        if bytes.is_empty() || !chance(&mut self.rng, self.faults.corrupt_ppm) {
            return (bytes.clone(), false);
        }
        let mut v = bytes.to_vec();
        for _ in 0..self.rng.gen_range(1..=3) {
            let i = self.rng.gen_range(0..v.len());
            v[i] ^= 1 << self.rng.gen_range(0..8);
        }
        self.stats.corrupted += 1;
        (v.into(), true)
    }

    fn copy(&mut self, bytes: &Arc<[u8]>, kind: CopyKind) -> Delivery {
        let after_us = self.latency();
        let (bytes, corrupted) = self.maybe_corrupt(bytes);
        Delivery {
            after_us,
            bytes,
            kind,
            corrupted,
        }
    }

    /// [`Network::send_at`] at time 0 (tests of the faults alone).
    #[cfg(test)]
    pub fn send(&mut self, from: NodeIdx, to: NodeIdx, bytes: &Arc<[u8]>) -> Fate {
        self.send_at(0, from, to, bytes)
    }

    /// Sends `bytes` over `from → to` at `now_us` and decides its fate.
    pub fn send_at(&mut self, now_us: u64, from: NodeIdx, to: NodeIdx, bytes: &Arc<[u8]>) -> Fate {
        self.stats.sent += 1;
        if from == to {
            return Fate::Delivered(vec![Delivery {
                after_us: 0,
                bytes: bytes.clone(),
                kind: CopyKind::Original,
                corrupted: false,
            }]);
        }
        if !self.link_up(from, to) {
            self.stats.link_down += 1;
            return Fate::LinkDown;
        }
        let link = from * self.nodes + to;
        let mut out = Vec::new();
        if chance(&mut self.rng, self.faults.replay_ppm) && !self.history[link].is_empty() {
            let i = self.rng.gen_range(0..self.history[link].len());
            let old = self.history[link][i].clone();
            self.stats.replayed += 1;
            out.push(self.copy(&old, CopyKind::Replay));
        }
        if self.faults.replay_ppm > 0 {
            let h = &mut self.history[link];
            if h.len() == REPLAY_HISTORY {
                h.pop_front();
            }
            h.push_back(bytes.clone());
        }
        // A lost frame crossed the link too.
        let extra = self.extra_us[link]
            + self
                .occupy(link, now_us, bytes.len())
                .max(self.access(from, to, now_us, bytes));
        if chance(&mut self.rng, self.faults.drop_ppm) {
            self.stats.lost += 1;
            out.iter_mut().for_each(|d| d.after_us += extra);
            return Fate::Lost(out);
        }
        out.push(self.copy(bytes, CopyKind::Original));
        if chance(&mut self.rng, self.faults.dup_ppm) {
            self.stats.duplicated += 1;
            out.push(self.copy(bytes, CopyKind::Duplicate));
        }
        out.iter_mut().for_each(|d| d.after_us += extra);
        Fate::Delivered(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Purpose, PPM};

    fn net(f: NetFaults) -> Network {
        Network::new(4, f, stream(1, Purpose::Network))
    }

    fn frame(b: u8) -> Arc<[u8]> {
        vec![b; 32].into()
    }

    #[test]
    fn perfect_links_deliver_exactly_once_with_fixed_latency() {
        let mut n = net(NetFaults::perfect(700));
        for _ in 0..100 {
            let f = n.send(0, 1, &frame(1));
            let d = f.deliveries();
            assert!(matches!(f, Fate::Delivered(_)));
            assert_eq!(d.len(), 1);
            assert_eq!(d[0].after_us, 700);
            assert_eq!(&*d[0].bytes, &*frame(1));
            assert!(!d[0].corrupted);
        }
    }

    #[test]
    fn one_way_partition_blocks_only_one_direction() {
        let mut n = net(NetFaults::perfect(1));
        n.set_link(0, 1, false);
        assert!(matches!(n.send(0, 1, &frame(1)), Fate::LinkDown));
        assert_eq!(n.send(1, 0, &frame(1)).deliveries().len(), 1);
        assert_eq!(n.send(0, 2, &frame(1)).deliveries().len(), 1);
        assert_eq!(
            n.send(0, 0, &frame(1)).deliveries().len(),
            1,
            "self link always up"
        );
        assert_eq!(n.down_links(), vec![(0, 1)]);
        n.heal_all();
        assert!(n.down_links().is_empty());
        assert_eq!(n.send(0, 1, &frame(1)).deliveries().len(), 1);
    }

    #[test]
    fn slow_links_add_their_delay_without_touching_the_random_stream() {
        let mut a = net(NetFaults {
            jitter_us: 1000,
            ..NetFaults::perfect(100)
        });
        let mut b = net(NetFaults {
            jitter_us: 1000,
            ..NetFaults::perfect(100)
        });
        b.set_link_delay(0, 1, 5_000);
        assert_eq!(b.link_delay(0, 1), 5_000);
        assert_eq!(b.link_delay(1, 0), 0);
        for _ in 0..50 {
            let x = a.send(0, 1, &frame(1)).deliveries()[0].after_us;
            let y = b.send(0, 1, &frame(1)).deliveries()[0].after_us;
            assert_eq!(y, x + 5_000);
            let x = a.send(1, 0, &frame(1)).deliveries()[0].after_us;
            let y = b.send(1, 0, &frame(1)).deliveries()[0].after_us;
            assert_eq!(y, x);
        }
        b.heal_all();
        assert_eq!(b.link_delay(0, 1), 0);
    }

    #[test]
    fn thin_links_queue_frames_behind_each_other_and_leave_the_random_stream_alone() {
        let mut a = net(NetFaults::benign());
        let mut b = net(NetFaults::benign());
        // 1,000 bytes per second from 0 to 1: a 500-byte frame takes 500 ms to cross.
        b.set_link_rate(0, 1, 1_000);
        let big: Arc<[u8]> = vec![7u8; 500].into();
        let x = a.send_at(0, 0, 1, &big).deliveries()[0].after_us;
        let y = b.send_at(0, 0, 1, &big).deliveries()[0].after_us;
        assert_eq!(y, x + 500_000);
        // Sent 100 ms later, the next waits for the first (400 ms more) and crosses.
        let x = a.send_at(100_000, 0, 1, &big).deliveries()[0].after_us;
        let y = b.send_at(100_000, 0, 1, &big).deliveries()[0].after_us;
        assert_eq!(y, x + 900_000);
        // The other direction and other links are not limited; an idle link is free again.
        let x = a.send_at(100_000, 1, 0, &big).deliveries()[0].after_us;
        let y = b.send_at(100_000, 1, 0, &big).deliveries()[0].after_us;
        assert_eq!(y, x);
        let x = a.send_at(5_000_000, 0, 1, &big).deliveries()[0].after_us;
        let y = b.send_at(5_000_000, 0, 1, &big).deliveries()[0].after_us;
        assert_eq!(y, x + 500_000);
        b.heal_all();
        let x = a.send_at(9_000_000, 0, 1, &big).deliveries()[0].after_us;
        let y = b.send_at(9_000_000, 0, 1, &big).deliveries()[0].after_us;
        assert_eq!(y, x);
    }

    /// Node 0's access link at 1,000 bytes a second: two 500-byte frames to two peers go
    /// one after the other (0.5 s, then 1 s); a frame to node 0 from an unlimited node waits
    /// only for node 0's link down, which its own sends do not hold; agreement messages
    /// queue apart.
    #[test]
    fn an_access_link_is_shared_by_every_peer_each_way() {
        let mut a = net(NetFaults::benign());
        let mut b = net(NetFaults::benign());
        b.set_access_rate(0, 1_000);
        let big: Arc<[u8]> = vec![7u8; 500].into();
        let mut extra = Vec::new();
        for (at, from, to) in [
            (0, 0, 1),
            (0, 0, 2),
            (0, 1, 0),
            (0, 2, 0),
            (9_000_000, 0, 1),
        ] {
            let x = a.send_at(at, from, to, &big).deliveries()[0].after_us;
            let y = b.send_at(at, from, to, &big).deliveries()[0].after_us;
            extra.push(y - x);
        }
        assert_eq!(extra, [500_000, 1_000_000, 500_000, 1_000_000, 500_000]);
        // An agreement message (a PREPARE's header) queues apart from the bodies: 100 bytes
        // sent behind 1,000 bytes of them take 100 ms, not 1.1 s.
        let mut vote = vec![0u8; 100];
        vote[..4].copy_from_slice(b"BZ\x01\x04");
        let vote: Arc<[u8]> = vote.into();
        let (mut a, mut b) = (net(NetFaults::benign()), net(NetFaults::benign()));
        b.set_access_rate(0, 1_000);
        for n in [&mut a, &mut b] {
            n.send_at(0, 0, 1, &big);
            n.send_at(0, 0, 2, &big);
        }
        let x = a.send_at(0, 0, 1, &vote).deliveries()[0].after_us;
        let y = b.send_at(0, 0, 1, &vote).deliveries()[0].after_us;
        assert_eq!(y - x, 100_000);
    }

    #[test]
    fn total_loss_drops_everything_and_zero_loss_nothing() {
        let mut n = net(NetFaults {
            drop_ppm: PPM,
            ..NetFaults::perfect(1)
        });
        assert!(
            (0..200).all(|_| matches!(n.send(0, 1, &frame(1)), Fate::Lost(ref d) if d.is_empty()))
        );
        assert_eq!(n.stats().lost, 200);
    }

    #[test]
    fn loss_rate_is_roughly_as_configured() {
        let mut n = net(NetFaults {
            drop_ppm: 300_000,
            ..NetFaults::perfect(1)
        });
        let delivered = (0..10_000)
            .filter(|_| !n.send(0, 1, &frame(1)).deliveries().is_empty())
            .count();
        assert!((6_500..7_500).contains(&delivered), "{delivered}");
    }

    #[test]
    fn duplication_replay_and_corruption() {
        let mut n = net(NetFaults {
            dup_ppm: PPM,
            ..NetFaults::perfect(1)
        });
        assert_eq!(n.send(0, 1, &frame(1)).deliveries().len(), 2);

        let mut n = net(NetFaults {
            replay_ppm: PPM,
            ..NetFaults::perfect(1)
        });
        assert_eq!(
            n.send(0, 1, &frame(1)).deliveries().len(),
            1,
            "nothing to replay yet"
        );
        let d = n.send(0, 1, &frame(2)).deliveries().to_vec();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].kind, CopyKind::Replay);
        assert_eq!(&*d[0].bytes, &*frame(1));

        let mut n = net(NetFaults {
            corrupt_ppm: PPM,
            ..NetFaults::perfect(1)
        });
        let d = n.send(0, 1, &frame(1)).deliveries().to_vec();
        assert!(d[0].corrupted);
        assert_ne!(&*d[0].bytes, &*frame(1));
        assert_eq!(d[0].bytes.len(), 32);
    }

    #[test]
    fn jitter_and_tail_reorder() {
        let mut n = net(NetFaults {
            jitter_us: 1000,
            tail_ppm: 100_000,
            tail_max_us: 1_000_000,
            ..NetFaults::perfect(100)
        });
        let lats: Vec<u64> = (0..1000)
            .map(|_| n.send(0, 1, &frame(1)).deliveries()[0].after_us)
            .collect();
        assert!(lats.iter().all(|&l| l >= 100));
        assert!(
            lats.windows(2).any(|w| w[0] > w[1]),
            "later frames can overtake"
        );
        assert!(lats.iter().any(|&l| l > 10_000), "heavy tail");
    }
}
