//! S-SLOW-PRIMARY (docs/PROTOCOL.md §6.4, §5.3 Aardvark): the primary holds every PRE-PREPARE
//! just under the view-change timeout, so backups never quite time out while throughput
//! collapses.

use super::{Ctx, Outgoing, Strategy};
use byzfs_bft::message::Tag;
use byzfs_bft::Config;

/// The slow primary.
#[derive(Debug)]
pub struct SlowPrimary {
    hold_us: u64,
}

impl SlowPrimary {
    /// Holds each PRE-PREPARE for 90% of the base view-change timeout.
    pub fn new(config: &Config) -> SlowPrimary {
        let t = u64::try_from(config.view_change_timeout.as_micros()).unwrap_or(u64::MAX);
        SlowPrimary {
            hold_us: t / 10 * 9,
        }
    }
}

impl Strategy for SlowPrimary {
    fn name(&self) -> &'static str {
        "slow-primary"
    }

    fn on_send(&mut self, _ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        if out.bytes.get(3) == Some(&(Tag::PrePrepare as u8)) {
            return vec![Outgoing {
                delay_us: self.hold_us,
                ..out
            }];
        }
        vec![out]
    }
}
