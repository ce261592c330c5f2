//! S-EAGER (docs/PROTOCOL.md §1.5 predicates): a faulty replica that votes for whatever it is shown
//! at once. As a backup, the moment its honest code sends PREPARE for `(v, n, d)` it also sends
//! COMMIT for `(v, n, d)` — without waiting for a prepared certificate; as primary, it sends
//! COMMIT together with each PRE-PREPARE. Everything is honestly signed with its own keys and
//! it never equivocates, so correct replicas must stay safe; but its early COMMITs are exactly
//! what a commit certificate one vote short (`2f` instead of `2f+1`) cannot tell apart from
//! correct votes. Combined with slow links between correct replicas, a correct replica then
//! completes a commit certificate before `f+1` correct replicas prepared
//! (`committed-prepared`).

use super::{Ctx, Outgoing, Strategy};
use byzfs_bft::batch::batch_digest;
use byzfs_bft::message::{Commit, Message};

/// The eager voter.
#[derive(Debug, Default)]
pub struct EagerVoter;

impl EagerVoter {
    /// A fresh strategy.
    pub fn new() -> EagerVoter {
        EagerVoter
    }
}

impl Strategy for EagerVoter {
    fn name(&self) -> &'static str {
        "eager-voter"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        let Some((h, msg)) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        let me = ctx.forger.me();
        let commit = match msg {
            Message::Prepare(p) => Commit {
                view: p.view,
                seq: p.seq,
                digest: p.digest,
                replica: me,
            },
            Message::PrePrepare(pp) => {
                let Some(digest) = batch_digest(&pp.batch) else {
                    return vec![out];
                };
                Commit {
                    view: pp.view,
                    seq: pp.seq,
                    digest,
                    replica: me,
                }
            }
            _ => return vec![out],
        };
        let early = Outgoing {
            bytes: ctx.forger.seal(&h, &Message::Commit(commit), out.to),
            ..out.clone()
        };
        vec![out, early]
    }
}
