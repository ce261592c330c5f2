//! An encrypted mount's write-back in flight (issue #45 item 5, `inflight.rs`): a batch
//! sealed and signed when it is launched ([`Crypt::seal_to_fly`]) and opened when it lands
//! ([`Crypt::landed`]), so the mount answers the kernel while the replicas check and run
//! it, as a plain mount's write-back does.
//!
//! What keeps it safe:
//! * **One at a time** (`sender.rs` `has_room`): a batch is sealed on the nodes of the
//!   batch before it only once that one has landed, so a batch that fails never has a
//!   later one built on what it would have made.
//! * **Its nodes taken at once**: what the batch makes of its files' headers and trees is
//!   kept when it is launched, as if it succeeded; an operation that names one of its
//!   files waits for it first (`InFlight::must_precede`), and the layer's own reads go
//!   ordered while it flies (`link.rs` `Transport::strict`), so they run after it.
//! * **Its failure**: the nodes it assumed are forgotten (read again at the next use); one
//!   the replicas refused before running anything because a header changed or the keys
//!   moved on (`ESTALE`, `EKEYEXPIRED`) is sent again through the locked path
//!   (`sender.rs` `land`), which reads the header or the group again and builds it anew,
//!   as it would have had it waited; any other error is the batch's, as a plain mount's
//!   (`writeback.rs` `answered`).

use crate::crypt::{Crypt, Shape};
use crate::crypt_handles::map_op;
use crate::transport::Transport;
use byzfs_fs::{Credentials, Errno, FsResult, Op};

/// A batch sealed to fly, as the layer keeps it until it lands.
pub(crate) struct Sealed {
    /// The batch as the mount made it, and its caller's credentials: sent again through
    /// the locked path after `ESTALE` or `EKEYEXPIRED`.
    pub(crate) plain: Op,
    pub(crate) plain_cred: Credentials,
    shape: Shape,
    /// The files whose nodes it changed.
    files: Vec<u64>,
}

impl Crypt {
    /// Whether `op` may be sealed to fly: not one the layer sends in several requests or
    /// answers itself (reads, a directory made at a handle it reserves, what it refuses).
    pub(crate) fn flies(op: &Op) -> bool {
        !matches!(
            op,
            Op::Read { .. }
                | Op::Mkdir { .. }
                | Op::CopyRange { .. }
                | Op::Punch { .. }
                | Op::Seek { .. }
        )
    }

    /// Seals and signs write-back batch `op` (one [`Self::flies`] takes) to be sent without
    /// waiting: the credentials it goes with (mapped into the client's grant), what is
    /// sent, and what is kept until it lands. The nodes it makes are kept now.
    pub(crate) fn seal_to_fly(
        &mut self,
        link: &mut dyn Transport,
        cred: &Credentials,
        op: Op,
    ) -> Result<(Credentials, Op, Sealed), Errno> {
        let plain = op.clone();
        let op = map_op(op, &|h| self.out(h));
        let mut headers = Vec::new();
        let sealed = self.seal(link, cred, op, &mut headers);
        self.overlay.clear();
        let pending = std::mem::take(&mut self.pending);
        let (sealed, shape) = match sealed {
            Ok(s) => s,
            Err(e) => {
                self.expect.clear();
                self.sizes.clear();
                for ino in pending.keys() {
                    self.files.remove(ino);
                }
                return Err(e);
            }
        };
        let (sent_cred, signed) = self.sign(link, cred, sealed, headers);
        let files = pending.keys().copied().collect();
        self.files.extend(pending);
        let kept = Sealed {
            plain,
            plain_cred: cred.clone(),
            shape,
            files,
        };
        Ok((sent_cred, signed, kept))
    }

    /// Batch `sealed` answered `result`: its reply opened as the mount expects it; after
    /// an error, the nodes it assumed, and the sizes, are forgotten.
    pub(crate) fn landed(
        &mut self,
        link: &mut dyn Transport,
        sealed: &Sealed,
        result: FsResult,
    ) -> FsResult {
        let r = result.and_then(|r| self.open(link, r, &sealed.shape));
        if r.is_err() {
            for ino in &sealed.files {
                self.files.remove(ino);
            }
            self.sizes.clear();
        }
        r
    }
}
