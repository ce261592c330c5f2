//! Partition shapes (docs/PROTOCOL.md §6.4 S-PART, §5.4 partial connectivity): which directed links
//! to cut. Shapes are over replica ids; every instance of a replica (twins) is cut alike.
//! Flapping and healing in random order are schedules of these cuts (see [`crate::fault`]).

use crate::network::NodeIdx;
use crate::rng::{shuffle, SimRng};
use byzfs_bft::ReplicaId;
use rand::Rng;

/// Which network nodes belong to what.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// `replicas[r]`: the network nodes of replica `r` (more than one for twins).
    pub replicas: Vec<Vec<NodeIdx>>,
    /// The clients' network nodes.
    pub clients: Vec<NodeIdx>,
}

impl Topology {
    /// Number of replica ids.
    pub fn n(&self) -> usize {
        self.replicas.len()
    }
}

/// A partition shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    /// A random minority of 1..=f replicas cut from the rest, both ways.
    MajorityMinority,
    /// The current primary cut from the other replicas (clients still reach it).
    IsolatePrimary,
    /// The current primary cut from everyone, clients included.
    IsolatePrimaryFully,
    /// A few random directed replica links down (asymmetric loss).
    OneWay,
    /// One replica cut (both ways) from a random proper subset of the others (partial
    /// connectivity, §5.4).
    Partial,
    /// Two groups that talk only through one bridge replica.
    Bridge,
}

impl Shape {
    /// Every shape.
    pub const ALL: [Shape; 6] = [
        Shape::MajorityMinority,
        Shape::IsolatePrimary,
        Shape::IsolatePrimaryFully,
        Shape::OneWay,
        Shape::Partial,
        Shape::Bridge,
    ];

    /// Short name for traces.
    pub fn name(self) -> &'static str {
        match self {
            Shape::MajorityMinority => "majority-minority",
            Shape::IsolatePrimary => "isolate-primary",
            Shape::IsolatePrimaryFully => "isolate-primary-fully",
            Shape::OneWay => "one-way",
            Shape::Partial => "partial",
            Shape::Bridge => "bridge",
        }
    }
}

/// Directed links between every instance of `a` and every instance of `b`, both ways.
pub fn between(topo: &Topology, a: &[ReplicaId], b: &[ReplicaId]) -> Vec<(NodeIdx, NodeIdx)> {
    let mut out = Vec::new();
    for &x in a {
        for &y in b {
            for &i in &topo.replicas[x as usize] {
                for &j in &topo.replicas[y as usize] {
                    out.push((i, j));
                    out.push((j, i));
                }
            }
        }
    }
    out
}

/// The links `shape` cuts, given the current primary and `f`.
pub fn cut(
    shape: Shape,
    topo: &Topology,
    primary: ReplicaId,
    f: usize,
    rng: &mut SimRng,
) -> Vec<(NodeIdx, NodeIdx)> {
    let n = topo.n() as ReplicaId;
    let mut ids: Vec<ReplicaId> = (0..n).collect();
    shuffle(rng, &mut ids);
    let others = |x: ReplicaId| (0..n).filter(|&r| r != x).collect::<Vec<_>>();
    let mut links = match shape {
        Shape::MajorityMinority => {
            let k = rng.gen_range(1..=f.max(1));
            between(topo, &ids[..k], &ids[k..])
        }
        Shape::IsolatePrimary => between(topo, &[primary], &others(primary)),
        Shape::IsolatePrimaryFully => {
            let mut l = between(topo, &[primary], &others(primary));
            for &p in &topo.replicas[primary as usize] {
                for &c in &topo.clients {
                    l.push((p, c));
                    l.push((c, p));
                }
            }
            l
        }
        Shape::OneWay => {
            let mut l = Vec::new();
            for _ in 0..rng.gen_range(1..=n as usize) {
                let a = rng.gen_range(0..n);
                let b = (a + rng.gen_range(1..n)) % n;
                for &i in &topo.replicas[a as usize] {
                    for &j in &topo.replicas[b as usize] {
                        l.push((i, j));
                    }
                }
            }
            l
        }
        Shape::Partial => {
            let x = ids[0];
            let k = rng.gen_range(1..n as usize - 1);
            between(topo, &[x], &ids[1..=k])
        }
        Shape::Bridge => {
            let rest = &ids[1..];
            let k = rng.gen_range(1..rest.len());
            between(topo, &rest[..k], &rest[k..])
        }
    };
    links.sort_unstable();
    links.dedup();
    links
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Purpose};

    fn topo(n: usize) -> Topology {
        Topology {
            replicas: (0..n).map(|r| vec![r]).collect(),
            clients: vec![n, n + 1],
        }
    }

    #[test]
    fn isolate_primary_cuts_all_its_replica_links_both_ways() {
        let t = topo(4);
        let mut r = stream(3, Purpose::FaultRuntime);
        let l = cut(Shape::IsolatePrimary, &t, 2, 1, &mut r);
        let expect: Vec<_> = {
            let mut v: Vec<_> = [0, 1, 3].iter().flat_map(|&o| [(2, o), (o, 2)]).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(l, expect);
        let l = cut(Shape::IsolatePrimaryFully, &t, 2, 1, &mut r);
        assert!(l.contains(&(2, 4)) && l.contains(&(5, 2)));
    }

    #[test]
    fn minority_is_at_most_f_and_bridge_keeps_the_bridge() {
        let t = topo(7);
        for s in 0..50 {
            let mut r = stream(s, Purpose::FaultRuntime);
            let l = cut(Shape::MajorityMinority, &t, 0, 2, &mut r);
            let cut_off: std::collections::BTreeSet<_> = l.iter().map(|&(a, _)| a).collect();
            assert!(!l.is_empty());
            // Every cut link is symmetric.
            assert!(l.iter().all(|&(a, b)| l.contains(&(b, a))));
            assert!(cut_off.len() <= 7);
            let b = cut(Shape::Bridge, &t, 0, 2, &mut r);
            let touched: std::collections::BTreeSet<_> = b.iter().map(|&(a, _)| a).collect();
            assert!(touched.len() <= 6, "the bridge replica keeps all its links");
            let o = cut(Shape::OneWay, &t, 0, 2, &mut r);
            assert!(o.iter().all(|&(a, b)| a != b));
        }
    }
}
