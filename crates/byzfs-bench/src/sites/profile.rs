//! Site profiles: where each node runs and what links join the sites (issue #30; the
//! numbers follow Pangaea's wide-area runs, docs/PROTOCOL.md §7.3).
//!
//! Every profile puts replica `i` at site `i` (four sites). The client runs at site 0, or
//! alone at a fifth site with the suffix `-apart`; the unreplicated server (NO-REP) runs at a
//! site other than the client's, as the seed's remote NFS server did. Each site reaches the
//! others through one access link of its own, shaped to `rate` in each direction and
//! `one_way / 2` long, so two sites are `one_way` apart and a round trip between them takes
//! `2 × one_way`. Nodes at one site meet on an unshaped local link.

use anyhow::bail;
use std::time::Duration;

/// The wide-area part of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wan {
    /// Each site's access link, in bits per second, each direction.
    pub rate_bps: u64,
    /// Between two sites, one way (half of it on each site's access link).
    pub one_way: Duration,
}

/// Where the nodes run and how the sites are joined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// As given to `--sites` (`wan`, `slow-5-apart`, …).
    pub name: String,
    /// `None`: the sites are joined without delay or rate limit (`lan`).
    pub wan: Option<Wan>,
    /// The client alone at a fifth site.
    pub client_apart: bool,
}

/// A node of the harness: each runs in a network namespace of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Node {
    Replica(u32),
    /// The client: the benchmark's load, or the mount.
    Client,
    /// The unreplicated server (NO-REP).
    Server,
}

impl Node {
    /// Short name, used in namespace-free logs and tables.
    pub fn name(self) -> String {
        match self {
            Node::Replica(i) => format!("replica-{i}"),
            Node::Client => "client".into(),
            Node::Server => "no-rep".into(),
        }
    }
}

/// The replicas of every profile.
pub const REPLICAS: u32 = 4;

/// The profiles `--sites` accepts, for help texts and errors.
pub const NAMES: &str =
    "lan, wan, slow-5, slow-1 (each also with -apart: the client at a fifth site)";

impl Profile {
    pub fn parse(s: &str) -> anyhow::Result<Profile> {
        let (base, client_apart) = match s.strip_suffix("-apart") {
            Some(b) => (b, true),
            None => (s, false),
        };
        let wan = |mbps: u64| {
            Some(Wan {
                rate_bps: mbps * 1_000_000,
                one_way: Duration::from_millis(20),
            })
        };
        let wan = match base {
            "lan" => None,
            "wan" => wan(100),
            "slow-5" => wan(5),
            "slow-1" => wan(1),
            _ => bail!("unknown site profile {s:?}; the profiles are {NAMES}"),
        };
        Ok(Profile {
            name: s.to_string(),
            wan,
            client_apart,
        })
    }

    /// Number of sites (four, or five with the client apart).
    pub fn sites(&self) -> usize {
        REPLICAS as usize + usize::from(self.client_apart)
    }

    /// The site `node` runs at.
    pub fn site_of(&self, node: Node) -> usize {
        match node {
            Node::Replica(i) => i as usize,
            Node::Client if self.client_apart => REPLICAS as usize,
            Node::Client => 0,
            // Remote from the client: site 1 when the client is at site 0.
            Node::Server if self.client_apart => 0,
            Node::Server => 1,
        }
    }

    /// Every node of the profile.
    pub fn nodes(&self) -> Vec<Node> {
        (0..REPLICAS)
            .map(Node::Replica)
            .chain([Node::Client, Node::Server])
            .collect()
    }

    /// The delay a packet waits in the wide area from site `a` to site `b`.
    pub fn delay(&self, a: usize, b: usize) -> Duration {
        match self.wan {
            Some(w) if a != b => w.one_way,
            _ => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_place_nodes_and_links_as_documented() {
        let p = Profile::parse("slow-5-apart").unwrap();
        assert_eq!(
            p,
            Profile {
                name: "slow-5-apart".into(),
                wan: Some(Wan {
                    rate_bps: 5_000_000,
                    one_way: Duration::from_millis(20)
                }),
                client_apart: true,
            }
        );
        let placed: Vec<(Node, usize)> = p.nodes().into_iter().map(|n| (n, p.site_of(n))).collect();
        assert_eq!(
            placed,
            vec![
                (Node::Replica(0), 0),
                (Node::Replica(1), 1),
                (Node::Replica(2), 2),
                (Node::Replica(3), 3),
                (Node::Client, 4),
                (Node::Server, 0)
            ]
        );
        let wan = Profile::parse("wan").unwrap();
        assert_eq!(
            (
                wan.sites(),
                wan.site_of(Node::Client),
                wan.site_of(Node::Server)
            ),
            (4, 0, 1)
        );
        assert_eq!(wan.delay(0, 2), Duration::from_millis(20));
        assert_eq!(wan.delay(1, 1), Duration::ZERO);
        assert_eq!(Profile::parse("lan").unwrap().delay(0, 2), Duration::ZERO);
        assert_eq!(
            Profile::parse("moon").unwrap_err().to_string(),
            "unknown site profile \"moon\"; the profiles are lan, wan, slow-5, slow-1 (each also with -apart: the client at a fifth site)"
        );
    }
}
