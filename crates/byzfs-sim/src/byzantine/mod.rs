//! Byzantine replicas (docs/PROTOCOL.md §6.2 adversary library, §6.4). A Byzantine replica runs the
//! real replica code with its own keys and passes every outgoing frame through a [`Strategy`],
//! which may drop, delay, duplicate, alter and re-authenticate it — with that replica's keys
//! only (see [`forge`]), so it forges exactly what a real faulty replica could. One strategy
//! per file.

pub mod bad_client;
pub mod byzzfuzz;
pub mod eager_voter;
pub mod equivocate;
pub mod faulty_relay;
pub mod forge;
pub mod forging_primary;
pub mod garbage;
pub mod impersonator;
pub mod lying_primary;
pub mod lying_replies;
pub mod lying_state;
pub mod slow_primary;
pub mod time_warp;
pub mod vc_lies;
pub mod vc_spam;

use crate::rng::SimRng;
use crate::service::SimService;
use byzfs_bft::{ClientId, Config, Replica, ReplicaId, Time, View};
use forge::Forger;
use std::sync::Arc;

/// Where an outgoing frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dest {
    /// A replica (every instance of it).
    Replica(ReplicaId),
    /// A client.
    Client(ClientId),
}

/// A frame leaving a Byzantine replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// Destination.
    pub to: Dest,
    /// The frame.
    pub bytes: Arc<[u8]>,
    /// Extra delay before it enters the network, µs.
    pub delay_us: u64,
}

impl Outgoing {
    /// A frame sent now.
    pub fn now(to: Dest, bytes: Arc<[u8]>) -> Outgoing {
        Outgoing {
            to,
            bytes,
            delay_us: 0,
        }
    }
}

/// What a strategy may use.
pub struct Ctx<'a> {
    /// Global virtual time.
    pub now: Time,
    /// The inner replica's current view.
    pub view: View,
    /// Protocol parameters.
    pub config: &'a Config,
    /// This replica's keys, for re-authentication.
    pub forger: &'a Forger,
    /// The strategy's random stream.
    pub rng: &'a mut SimRng,
    /// The replica itself, read-only (what it holds: its checkpoints).
    pub replica: Option<&'a Replica<SimService>>,
}

/// A Byzantine behaviour.
pub trait Strategy {
    /// Name for traces.
    fn name(&self) -> &'static str;

    /// Sees every frame the replica receives (e.g. to collect digests to swap in later).
    fn on_receive(&mut self, _bytes: &[u8]) {}

    /// Decides what actually leaves for one frame the honest code wanted to send.
    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing>;
}

/// The strategies, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StrategyKind {
    /// [`equivocate::Equivocate`].
    Equivocate,
    /// [`slow_primary::SlowPrimary`].
    SlowPrimary,
    /// [`garbage::Garbage`].
    Garbage,
    /// [`lying_replies::LyingReplies`].
    LyingReplies,
    /// [`vc_lies::VcLies`].
    VcLies,
    /// [`byzzfuzz::ByzzFuzz`].
    ByzzFuzz,
    /// [`eager_voter::EagerVoter`].
    EagerVoter,
    /// [`equivocate::Equivocate`] with a bridge in most slots, its two PRE-PREPAREs up to
    /// 20 ms apart.
    EquivocateBridge,
    /// [`time_warp::TimeWarp`].
    TimeWarp,
    /// [`vc_spam::VcSpam`].
    VcSpam,
    /// [`impersonator::Impersonator`].
    Impersonator,
    /// [`lying_primary::LyingPrimary`].
    LyingPrimary,
    /// [`lying_state::LyingState`].
    LyingState,
    /// [`faulty_relay::FaultyRelay`].
    FaultyRelay,
    /// [`forging_primary::ForgingPrimary`].
    ForgingPrimary,
}

impl StrategyKind {
    /// Builds the strategy for replica `me` of a cluster with `config`.
    pub fn build(self, me: ReplicaId, config: &Config, rng: &mut SimRng) -> Box<dyn Strategy> {
        match self {
            StrategyKind::Equivocate => Box::new(equivocate::Equivocate::new()),
            StrategyKind::SlowPrimary => Box::new(slow_primary::SlowPrimary::new(config)),
            StrategyKind::Garbage => Box::new(garbage::Garbage::new(me, config, rng)),
            StrategyKind::LyingReplies => Box::new(lying_replies::LyingReplies::new()),
            StrategyKind::VcLies => Box::new(vc_lies::VcLies::new()),
            StrategyKind::ByzzFuzz => Box::new(byzzfuzz::ByzzFuzz::new(rng)),
            StrategyKind::EagerVoter => Box::new(eager_voter::EagerVoter::new()),
            StrategyKind::EquivocateBridge => {
                Box::new(equivocate::Equivocate::with_bridge(0.9, 20_000))
            }
            StrategyKind::TimeWarp => Box::new(time_warp::TimeWarp::new()),
            StrategyKind::VcSpam => Box::new(vc_spam::VcSpam::new()),
            StrategyKind::Impersonator => Box::new(impersonator::Impersonator::new()),
            StrategyKind::LyingPrimary => Box::new(lying_primary::LyingPrimary::new()),
            StrategyKind::LyingState => Box::new(lying_state::LyingState::new()),
            StrategyKind::FaultyRelay => Box::new(faulty_relay::FaultyRelay::new(rng)),
            StrategyKind::ForgingPrimary => Box::new(forging_primary::ForgingPrimary::new()),
        }
    }
}
