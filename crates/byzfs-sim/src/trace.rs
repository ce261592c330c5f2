//! The run trace: one text line per send, delivery, drop, timer, persist, event, client step
//! and fault. Off by default (formatting costs); `--trace` prints it, and the determinism test
//! compares two traces of the same seed byte for byte.

use byzfs_bft::batch::batch_digest;
use byzfs_bft::message::{FetchWhat, Message};
use byzfs_bft::wire::Frame;
use byzfs_bft::Time;
use std::fmt::Write as _;

/// A trace being recorded.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    on: bool,
    text: String,
}

impl Trace {
    /// A trace that records iff `on`.
    pub fn new(on: bool) -> Trace {
        Trace {
            on,
            text: String::new(),
        }
    }

    /// Whether lines are recorded (check before formatting anything expensive).
    pub fn on(&self) -> bool {
        self.on
    }

    /// Appends one line stamped with the virtual time.
    pub fn line(&mut self, now: Time, args: std::fmt::Arguments<'_>) {
        if self.on {
            // Writing to a String cannot fail.
            let _ = writeln!(self.text, "{:>12} {}", now.as_micros(), args);
        }
    }

    /// The recorded text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Takes the recorded text.
    pub fn into_text(self) -> String {
        self.text
    }
}

/// Records a trace line if tracing is on (arguments are not evaluated otherwise).
#[macro_export]
macro_rules! trace_line {
    ($trace:expr, $now:expr, $($arg:tt)*) => {
        if $trace.on() {
            $trace.line($now, format_args!($($arg)*));
        }
    };
}

/// A one-line summary of a frame, for traces and violation messages.
pub fn describe(bytes: &[u8]) -> String {
    let frame = match Frame::parse(bytes, usize::MAX) {
        Ok(f) => f,
        Err(e) => return format!("garbage(len={}, {e:?})", bytes.len()),
    };
    let msg = match frame.decode() {
        Ok(m) => m,
        Err(e) => {
            return format!(
                "{:?}(undecodable {e:?}, len={})",
                frame.header.tag,
                bytes.len()
            )
        }
    };
    let auth = frame.header.auth as u8;
    let body = match &msg {
        Message::Request(m) => format!(
            "REQUEST c={} rid={} op={}B ro={} replier={}",
            m.client,
            m.rid,
            m.op.len(),
            frame.header.flags & 1,
            frame.header.replier
        ),
        Message::Reply(m) => format!(
            "REPLY v={} c={} rid={} r={} tent={} d={:?} full={}",
            m.view,
            m.client,
            m.rid,
            m.replica,
            m.tentative,
            m.result_digest,
            m.result.is_some()
        ),
        Message::PrePrepare(m) => format!(
            "PRE-PREPARE v={} n={} reqs={} big={} d={:?}",
            m.view,
            m.seq,
            m.batch.requests.len(),
            m.batch.big.len(),
            batch_digest(&m.batch).unwrap_or_default()
        ),
        Message::Prepare(m) => format!(
            "PREPARE v={} n={} d={:?} r={}",
            m.view, m.seq, m.digest, m.replica
        ),
        Message::Commit(m) => format!(
            "COMMIT v={} n={} d={:?} r={}",
            m.view, m.seq, m.digest, m.replica
        ),
        Message::Checkpoint(m) => {
            format!(
                "CHECKPOINT n={} d={:?} r={} stable={}",
                m.seq, m.digest, m.replica, m.stable
            )
        }
        Message::ViewChange(m) => format!(
            "VIEW-CHANGE v={} r={} h={} C={} P={} Q={}",
            m.view,
            m.replica,
            m.last_stable,
            m.checkpoints.len(),
            m.prepared.len(),
            m.pre_prepared.len()
        ),
        Message::NewView(m) => format!(
            "NEW-VIEW v={} V={} min={} picks={}",
            m.view,
            m.view_changes.len(),
            m.min,
            m.picks.len()
        ),
        Message::Status(m) => format!(
            "STATUS r={} v={} nv={} h={} le={} mb={} mr={}",
            m.replica,
            m.view,
            m.has_new_view,
            m.last_stable,
            m.last_executed,
            m.missing_batches.len(),
            m.missing_requests.len()
        ),
        Message::Fetch(m) => match m.what {
            FetchWhat::StateMeta { seq } => format!("FETCH r={} meta n={seq}", m.replica),
            FetchWhat::StatePart { seq, part, offset } => {
                format!("FETCH r={} part n={seq} p={part} at={offset}", m.replica)
            }
        },
        Message::BatchData(m) => format!(
            "BATCH-DATA r={} reqs={} d={:?}",
            m.replica,
            m.batch.requests.len(),
            batch_digest(&m.batch).unwrap_or_default()
        ),
        Message::StateMeta(m) => format!(
            "STATE-META r={} n={} parts={}",
            m.replica,
            m.seq,
            m.parts.len()
        ),
        Message::StatePart(m) => {
            format!(
                "STATE-PART r={} n={} p={} at={} len={} of={}",
                m.replica,
                m.seq,
                m.part,
                m.offset,
                m.data.len(),
                m.total
            )
        }
    };
    format!("{body} auth={auth}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_bft::message::Prepare;
    use byzfs_bft::wire::{encode, Auth, Envelope};
    use byzfs_bft::{Digest, Principal};

    #[test]
    fn describes_frames_and_garbage() {
        let m = Message::Prepare(Prepare {
            view: 1,
            seq: 2,
            digest: Digest::ZERO,
            replica: 3,
        });
        let b = encode(Envelope::new(Principal::Replica(3), 0), &m, Auth::None);
        assert_eq!(describe(&b), "PREPARE v=1 n=2 d=000000000000 r=3 auth=0");
        assert!(describe(&b[..10]).starts_with("garbage(len=10"));
        let mut t = Trace::new(true);
        trace_line!(t, Time(5), "x {}", 1);
        let mut off = Trace::new(false);
        trace_line!(off, Time(5), "x {}", 1);
        assert_eq!(t.text(), "           5 x 1\n");
        assert_eq!(off.text(), "");
    }
}
