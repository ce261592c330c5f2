//! Deliberately broken protocol rules (test-only switch, feature `mutations`). Each one breaks
//! a rule the safety argument needs (one, `IgnoreBusyTime`, a liveness rule); the simulator
//! must catch every one
//! (`byzfs-sim --mutation NAME`). Production builds do not compile this module.

/// One broken rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// Commit certificate of `2f` instead of `2f+1` COMMITs.
    CommitQuorum2f,
    /// Accept a second, different PRE-PREPARE for the same `(view, seq)` and vote for it too.
    AcceptSecondPrePrepare,
    /// New-view computation picks the prepared entry with the lowest view, without the A1
    /// non-contradiction count (with A1 the order alone cannot change a safe outcome).
    NewViewLowestView,
    /// PREPARE votes match on `(view, seq)` only, ignoring the digest. (COMMITs still bind the
    /// digest, so this shows as two prepared certificates for one `(view, seq)`: INV-PREPARED.)
    PrepareWithoutDigest,
    /// Execute tentatively before all earlier batches have committed.
    TentativeBeforeCommitted,
    /// Answer read-only requests from the tentative state, whatever the uncommitted batch
    /// wrote (the read-only floor still holds).
    ReadOnlyOnTentative,
    /// A driver's mistake rather than the core's: after a crash it reports every `Proposed`
    /// record as durable ([`crate::replica::DurableState::proposals_durable`]), so a restored
    /// primary proposes again in its view although the unsynced tail of its log, with its
    /// last proposals, may be lost. Applied by the simulator at restarts.
    TrustProposalsAfterCrash,
    /// A backup restored from records that may lack its unsynced PREPAREs
    /// ([`crate::PersistRecord::Voted`]) votes in the view it restarts in anyway.
    VoteAfterUntrustedRestore,
    /// A driver's mistake: it loses the backup's [`crate::PersistRecord::VoteHorizon`]
    /// records, so a backup restored from records that may lack votes abstains only up to
    /// its stable checkpoint and may vote again where a power cut took its vote. Applied by
    /// the simulator at restarts.
    ForgetVoteHorizon,
    /// A driver's mistake: it never reports the time a step kept the replica busy
    /// ([`crate::Replica::busy_for`]), so time spent executing counts against the primary on
    /// the view-change timer. Breaks no safety rule: a correct primary is voted out while
    /// every replica executes an expensive request. Applied by the simulator after each step.
    IgnoreBusyTime,
    /// Execute a client's request although the earlier request it must follow
    /// ([`crate::message::Request::after`]) has not run: a client's requests then run out of
    /// its order.
    ExecuteGaps,
    /// Accept and execute requests however far their id is beyond the client's `acked`:
    /// the reply cache then grows without bound.
    IgnoreAckedBound,
    /// Join a higher view on one other replica's VIEW-CHANGE instead of `f+1` (§3.2): a
    /// faulty replica alone then drives everyone through views without end.
    JoinViewOnOneVc,
    /// Accept replica-to-replica frames without checking their MAC or signature (the
    /// authentication kind is still checked): a faulty replica can speak for the others.
    SkipReplicaAuth,
    /// A checkpoint is stable on `2f` matching CHECKPOINTs, its own included, instead of
    /// `2f+1` (§2.2).
    StableCheckpointWeak,
    /// A backup installs a NEW-VIEW whose VIEW-CHANGEs are genuine without recomputing the
    /// decision from them (§3.4): it takes the new primary's picks and checkpoint on trust.
    TrustNewView,
    /// Rule A2 of the decision (§3.4) counts one VIEW-CHANGE that reports the batch
    /// pre-prepared in the candidate's view or later, instead of `f+1`: one faulty replica's
    /// claim of a higher-view certificate wins.
    NewViewA2One,
    /// A lagging replica fetches a checkpoint one replica claims stable, instead of one
    /// `f+1` claim (§2.4): a faulty replica's made-up checkpoint gets installed.
    TrustOneStableClaim,
    /// A fetcher takes a replier's partition digests without checking that they hash to
    /// the agreed checkpoint digest (§2.4): a faulty replier's shadow state gets installed.
    SkipStateMetaCheck,
    /// Answer read-only requests from the committed state without waiting for the batches
    /// this replica already sent COMMIT for (the read-only floor, §1.8).
    IgnoreReadOnlyFloor,
    /// Store every request a client sends within its claimed window, however many: a
    /// faulty client's requests that never run then pile up at every replica.
    NoClientQuota,
    /// Backups never vote a primary out for its throughput (`replica/monitor.rs`): a primary
    /// that holds every batch just under the view-change timeout keeps its view for ever.
    /// Breaks no safety rule (a liveness one, like `IgnoreBusyTime`).
    NoPrimaryMonitor,
    /// A replica runs a batch of a view it has left on `f+1` COMMITs of that view instead of
    /// `2f+1` (`replica/catch_up.rs`, docs/PROTOCOL.md §3.8): a COMMIT from a faulty replica
    /// that voted without preparing, beside one correct replica's, is not a commit.
    ForeignCommitQuorumF1,
    /// A replier discards a checkpoint as soon as a newer one is stable, even while a
    /// lagging replica is fetching it (`replica/state_transfer.rs`, "Lent checkpoints"): a
    /// cluster that runs ahead of the fetch keeps the lagging replica out for ever. Breaks
    /// no safety rule (a liveness one).
    NoCheckpointLoans,
    /// A driver's mistake: it records a stable checkpoint without first making the service's
    /// own state durable ([`crate::Replica::persist_service`]), so after a power cut a
    /// service that keeps its state on disk cannot return to the checkpoint the log names.
    /// Applied by the simulator (`fs-disk-…` families).
    SkipServicePersist,
    /// A primary never proposes the null batches that take an idle cluster to its next
    /// checkpoint (`replica/idle.rs`, docs/PROTOCOL.md §2.6): the last batches before a
    /// quiet spell never reach a stable checkpoint. Breaks no safety rule (a liveness one).
    NoIdleCheckpoint,
    /// A driver's mistake: it records a stable checkpoint as soon as it hands the service's
    /// sync to its disk worker, not once that sync ran (docs/PROTOCOL.md §2.7), so a power
    /// cut in between leaves a record naming a checkpoint the store lost. Applied by the
    /// simulator (`fs-disk-…` families).
    RecordBeforeStoreSync,
    /// A replica that installed a checkpoint by state transfer executes on top of it before
    /// its record is durable (docs/PROTOCOL.md §2.7): a power cut then takes it back to the
    /// checkpoint recorded before, with no log of the batches in between, although its
    /// CHECKPOINTs claimed later states. Breaks a liveness rule: after a crash of every
    /// replica no checkpoint may have `f+1` holders (`fs-disk-transfer-power-cuts`).
    ExecuteBeforeTransferRecorded,
    /// A backup takes a PRE-PREPARE on the word of `f - 1` other backups' PREPAREs instead
    /// of `f` (§1.5 "Backup on PRE-PREPARE"), without checking its requests' authentication
    /// or the primary's non-deterministic choice itself: with `f = 1`, on nobody's word, so
    /// a faulty primary's forged requests run (`forging-primary`, checker `exactly-once`).
    VouchOnFewer,
    /// The fast path's NEW-VIEW walk (docs/PROTOCOL.md §4.7) goes past certificates of a
    /// view of which none passes A1/A2, as plan 49 first wrote it (the model found it
    /// unsafe: a slow completion whose other witness is outside the set is lost). Only
    /// with `--view-change-rule walk`.
    WalkPastCertificates,
    /// Zyzzyva's published view change in place of the walk: the highest certificate of
    /// any view first, unchecked (§4.6). Only with `--view-change-rule walk`.
    ZyzzyvaHighestCertificate,
}

impl Mutation {
    /// Every mutation.
    pub const ALL: [Mutation; 31] = [
        Mutation::CommitQuorum2f,
        Mutation::AcceptSecondPrePrepare,
        Mutation::NewViewLowestView,
        Mutation::PrepareWithoutDigest,
        Mutation::TentativeBeforeCommitted,
        Mutation::ReadOnlyOnTentative,
        Mutation::TrustProposalsAfterCrash,
        Mutation::VoteAfterUntrustedRestore,
        Mutation::ForgetVoteHorizon,
        Mutation::IgnoreBusyTime,
        Mutation::ExecuteGaps,
        Mutation::IgnoreAckedBound,
        Mutation::JoinViewOnOneVc,
        Mutation::SkipReplicaAuth,
        Mutation::StableCheckpointWeak,
        Mutation::TrustNewView,
        Mutation::NewViewA2One,
        Mutation::TrustOneStableClaim,
        Mutation::SkipStateMetaCheck,
        Mutation::IgnoreReadOnlyFloor,
        Mutation::NoClientQuota,
        Mutation::NoPrimaryMonitor,
        Mutation::ForeignCommitQuorumF1,
        Mutation::NoCheckpointLoans,
        Mutation::SkipServicePersist,
        Mutation::NoIdleCheckpoint,
        Mutation::RecordBeforeStoreSync,
        Mutation::ExecuteBeforeTransferRecorded,
        Mutation::VouchOnFewer,
        Mutation::WalkPastCertificates,
        Mutation::ZyzzyvaHighestCertificate,
    ];

    /// Whether it breaks the fast path's NEW-VIEW walk, so has an effect only where
    /// replicas decide by it (`Config::view_change_rule`).
    pub fn needs_walk(self) -> bool {
        matches!(
            self,
            Mutation::WalkPastCertificates | Mutation::ZyzzyvaHighestCertificate
        )
    }

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::CommitQuorum2f => "commit-quorum-2f",
            Mutation::AcceptSecondPrePrepare => "accept-second-preprepare",
            Mutation::NewViewLowestView => "newview-lowest-view",
            Mutation::PrepareWithoutDigest => "prepare-without-digest",
            Mutation::TentativeBeforeCommitted => "tentative-before-committed",
            Mutation::ReadOnlyOnTentative => "read-only-on-tentative",
            Mutation::TrustProposalsAfterCrash => "trust-proposals-after-crash",
            Mutation::VoteAfterUntrustedRestore => "vote-after-untrusted-restore",
            Mutation::ForgetVoteHorizon => "forget-vote-horizon",
            Mutation::IgnoreBusyTime => "ignore-busy-time",
            Mutation::ExecuteGaps => "execute-gaps",
            Mutation::IgnoreAckedBound => "ignore-acked-bound",
            Mutation::JoinViewOnOneVc => "join-view-on-one-vc",
            Mutation::SkipReplicaAuth => "skip-replica-auth",
            Mutation::StableCheckpointWeak => "stable-checkpoint-weak",
            Mutation::TrustNewView => "trust-new-view",
            Mutation::NewViewA2One => "newview-a2-one",
            Mutation::TrustOneStableClaim => "trust-one-stable-claim",
            Mutation::SkipStateMetaCheck => "skip-state-meta-check",
            Mutation::IgnoreReadOnlyFloor => "ignore-read-only-floor",
            Mutation::NoClientQuota => "no-client-quota",
            Mutation::NoPrimaryMonitor => "no-primary-monitor",
            Mutation::ForeignCommitQuorumF1 => "foreign-commit-quorum-f1",
            Mutation::NoCheckpointLoans => "no-checkpoint-loans",
            Mutation::SkipServicePersist => "skip-service-persist",
            Mutation::RecordBeforeStoreSync => "record-before-store-sync",
            Mutation::NoIdleCheckpoint => "no-idle-checkpoint",
            Mutation::ExecuteBeforeTransferRecorded => "execute-before-transfer-recorded",
            Mutation::VouchOnFewer => "vouch-on-fewer",
            Mutation::WalkPastCertificates => "walk-past-certificates",
            Mutation::ZyzzyvaHighestCertificate => "zyzzyva-highest-cc",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(s: &str) -> Option<Mutation> {
        Mutation::ALL.into_iter().find(|m| m.name() == s)
    }
}
