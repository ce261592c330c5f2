//! The request frame a client sends: its body once encoded, authenticated afresh for each
//! (re)transmission (docs/PROTOCOL.md §5.3).

use super::{Outstanding, FLAG_READ_ONLY, FLAG_RELAY};
use crate::config::Config;
use crate::crypto::ClientKeys;
use crate::ids::Principal;
use crate::message::Tag;
use crate::wire::{self, Auth, Envelope};
use std::sync::Arc;

/// Builds the request frame: header, the stored body, and a signed authenticator — an Ed25519
/// signature any replica can verify and forward, then one MAC per replica `0..n` in order, the
/// cheap first check (docs/PROTOCOL.md §5.3). A MAC-only client (no signing key) sends a plain
/// authenticator. Each (re)transmission is signed afresh: its header (replier) may change.
///
/// A read-only request (with the optimisation on) carries MACs only: a replica executes it
/// on its own MAC and never forwards or orders it (`Replica::on_request`), so a signature
/// would cost the client about 40 µs per read for nothing. If it falls back to an ordered
/// request, the frame is rebuilt, signed.
pub(super) fn build_frame(config: &Config, keys: &ClientKeys, o: &Outstanding) -> Arc<[u8]> {
    let n = config.n();
    let macs = keys.to_replica.get(..n).unwrap_or(&keys.to_replica);
    let env = Envelope {
        sender: Principal::Client(keys.me),
        epoch: config.epoch,
        flags: if o.read_only { FLAG_READ_ONLY } else { 0 } | if o.relay { FLAG_RELAY } else { 0 },
        replier: o.replier,
    };
    Arc::from(wire::encode_with_body(
        env,
        Tag::Request,
        &o.body,
        o.digest,
        match &keys.signing {
            Some(sk) if !(o.read_only && config.read_only_optimisation) => {
                Auth::SignedAuthenticator(sk, macs)
            }
            _ => Auth::Authenticator(macs),
        },
    ))
}
