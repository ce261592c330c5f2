//! Seeded randomness. One `u64` seed determines a whole run; each purpose draws from its own
//! ChaCha8 stream (same key, different stream id), so adding a fault or a client does not
//! perturb the workload of the others (docs/STYLE.md §5).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The generator every part of the simulator uses.
pub type SimRng = ChaCha8Rng;

/// What a random stream is used for. The discriminant is the ChaCha stream id; never reuse
/// or renumber one (that would change every existing seed's run).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Purpose {
    /// Parameter sweep (n, K, W, timeouts, ...).
    Params = 1,
    /// Fault plan of the scenario family.
    Faults = 2,
    /// Network latency, loss, duplication, replay, corruption.
    Network = 3,
    /// Per-replica RNG seeds handed to `Replica::new`.
    ReplicaSeeds = 4,
    /// Clock offsets.
    Clocks = 5,
    /// Byzantine strategies (one sub-stream per replica).
    Byzantine = 6,
    /// Correct clients' workloads (one sub-stream per client).
    Workload = 7,
    /// Faulty clients (one sub-stream per client).
    BadClients = 8,
    /// Runtime fault decisions (which link heals first, ...).
    FaultRuntime = 9,
    /// Per-client RNG seeds handed to `Client::new`.
    ClientSeeds = 10,
    /// How much of a crashed replica's unsynced log survives (one sub-stream per replica).
    TornLogs = 11,
    /// Execution cost of each request in `slow-execution` (one sub-stream per request).
    SlowExecution = 12,
    /// Each correct client's window of requests in flight.
    Windows = 13,
    /// Whether a crash that kept every log append was a power cut for the store's disk all
    /// the same (`fs-disk-…` families; one sub-stream per replica and restart).
    DiskCuts = 14,
    /// How long each disk work of a service that keeps its own state takes (one sub-stream
    /// per replica and life).
    DiskWork = 15,
}

/// The stream for `purpose` under `seed`.
pub fn stream(seed: u64, purpose: Purpose) -> SimRng {
    substream(seed, purpose, 0)
}

/// Sub-stream `index` of `purpose` (e.g. one per client), independent of every other.
pub fn substream(seed: u64, purpose: Purpose, index: u64) -> SimRng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(((purpose as u64) << 32) | (index & 0xFFFF_FFFF));
    r
}

/// Probabilities are integers in parts per million, so decisions never depend on float
/// rounding.
pub type Ppm = u32;

/// One in a million.
pub const PPM: Ppm = 1_000_000;

/// True with probability `p` ppm.
pub fn chance(rng: &mut SimRng, p: Ppm) -> bool {
    p > 0 && rng.gen_range(0..PPM) < p
}

/// A uniformly chosen element (None if empty).
pub fn pick<'a, T>(rng: &mut SimRng, items: &'a [T]) -> Option<&'a T> {
    if items.is_empty() {
        None
    } else {
        items.get(rng.gen_range(0..items.len()))
    }
}

/// Fisher–Yates shuffle.
pub fn shuffle<T>(rng: &mut SimRng, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let j = rng.gen_range(0..=i);
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<u32> = (0..4).map(|_| stream(7, Purpose::Network).gen()).collect();
        let mut s1 = stream(7, Purpose::Network);
        let mut s2 = stream(7, Purpose::Network);
        let x: Vec<u64> = (0..8).map(|_| s1.gen()).collect();
        let y: Vec<u64> = (0..8).map(|_| s2.gen()).collect();
        assert_eq!(x, y);
        let mut w = stream(7, Purpose::Workload);
        let z: Vec<u64> = (0..8).map(|_| w.gen()).collect();
        assert_ne!(x, z);
        assert_ne!(
            substream(7, Purpose::Workload, 1).gen::<u64>(),
            substream(7, Purpose::Workload, 2).gen::<u64>()
        );
        assert_eq!(a.len(), 4);
    }

    #[test]
    fn chance_extremes() {
        let mut r = stream(1, Purpose::Params);
        assert!((0..1000).all(|_| !chance(&mut r, 0)));
        assert!((0..1000).all(|_| chance(&mut r, PPM)));
    }
}
