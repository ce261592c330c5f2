//! Property tests for the wire codec (docs/STYLE.md §8, §11): decoding never panics, every message
//! round-trips, and damaged frames are rejected before their body is trusted.
//!
//! The fuzz targets in `fuzz/` explore the same decoders with coverage guidance; these
//! properties run on every `cargo test` with bounded inputs from a fixed seed.

use byzfs_bft::config::MAX_REPLICAS;
use byzfs_bft::crypto::{MAC_LEN, SIG_LEN};
use byzfs_bft::message::*;
use byzfs_bft::wire::{self, Auth, AuthKind, DecodeError, Envelope, Frame, Header, HEADER_LEN};
use byzfs_bft::{Digest, Principal, TestKeys};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// A frame limit comfortably above anything these strategies build.
const MAX: usize = 1 << 20;

const CASES: u32 = 256;

/// A fixed seed, so a CI failure replays exactly (docs/STYLE.md §11); `PROPTEST_RNG_SEED=<u64>`
/// explores other inputs.
fn config() -> ProptestConfig {
    let default = ProptestConfig::default();
    let rng_seed = match std::env::var_os("PROPTEST_RNG_SEED") {
        Some(_) => default.rng_seed,
        None => RngSeed::Fixed(0x6279_7a66),
    };
    ProptestConfig {
        cases: CASES,
        rng_seed,
        ..default
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies: every message type, with bounded vectors so a case stays small.
// ---------------------------------------------------------------------------------------------

fn digest() -> impl Strategy<Value = Digest> {
    any::<[u8; 32]>().prop_map(Digest)
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

fn replica_id() -> impl Strategy<Value = u32> {
    // Mostly valid ids, sometimes any u32: the body does not constrain it.
    prop_oneof![3 => 0..MAX_REPLICAS as u32, 1 => any::<u32>()]
}

fn batch_body() -> impl Strategy<Value = BatchBody> {
    (vec(bytes(96), 0..4), vec(digest(), 0..4), bytes(16)).prop_map(|(requests, big, nondet)| {
        BatchBody {
            requests,
            big,
            nondet,
        }
    })
}

fn request() -> impl Strategy<Value = Request> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        bytes(128),
    )
        .prop_map(|(client, rid, acked, after, op)| Request {
            client,
            rid,
            acked,
            after,
            op,
        })
}

fn reply() -> impl Strategy<Value = Reply> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        replica_id(),
        any::<bool>(),
        digest(),
        proptest::option::of(bytes(128)),
    )
        .prop_map(
            |(view, rid, client, replica, tentative, result_digest, result)| Reply {
                view,
                rid,
                client,
                replica,
                tentative,
                result_digest,
                result,
            },
        )
}

fn pre_prepare() -> impl Strategy<Value = PrePrepare> {
    (any::<u64>(), any::<u64>(), batch_body()).prop_map(|(view, seq, batch)| PrePrepare {
        view,
        seq,
        batch,
    })
}

fn prepare() -> impl Strategy<Value = Prepare> {
    (any::<u64>(), any::<u64>(), digest(), replica_id()).prop_map(|(view, seq, digest, replica)| {
        Prepare {
            view,
            seq,
            digest,
            replica,
        }
    })
}

fn commit() -> impl Strategy<Value = Commit> {
    (any::<u64>(), any::<u64>(), digest(), replica_id()).prop_map(|(view, seq, digest, replica)| {
        Commit {
            view,
            seq,
            digest,
            replica,
        }
    })
}

fn checkpoint() -> impl Strategy<Value = Checkpoint> {
    (any::<u64>(), digest(), replica_id(), any::<bool>()).prop_map(
        |(seq, digest, replica, stable)| Checkpoint {
            seq,
            digest,
            replica,
            stable,
        },
    )
}

fn view_change() -> impl Strategy<Value = ViewChange> {
    let prepared = (any::<u64>(), any::<u64>(), digest())
        .prop_map(|(seq, view, digest)| PreparedEntry { seq, view, digest });
    let pre_prepared = (any::<u64>(), any::<u64>(), digest())
        .prop_map(|(seq, view, digest)| PrePreparedEntry { seq, view, digest });
    (
        any::<u64>(),
        replica_id(),
        any::<u64>(),
        vec((any::<u64>(), digest()), 0..4),
        vec(prepared, 0..6),
        vec(pre_prepared, 0..6),
    )
        .prop_map(
            |(view, replica, last_stable, checkpoints, prepared, pre_prepared)| ViewChange {
                view,
                replica,
                last_stable,
                checkpoints,
                prepared,
                pre_prepared,
            },
        )
}

fn new_view() -> impl Strategy<Value = NewView> {
    (
        any::<u64>(),
        vec(bytes(160), 0..4),
        any::<u64>(),
        digest(),
        vec(digest(), 0..6),
    )
        .prop_map(|(view, view_changes, min, min_digest, picks)| NewView {
            view,
            view_changes,
            min,
            min_digest,
            picks,
        })
}

fn status() -> impl Strategy<Value = Status> {
    (
        replica_id(),
        any::<u64>(),
        any::<bool>(),
        any::<u64>(),
        any::<u64>(),
        vec(digest(), 0..4),
        vec(digest(), 0..4),
    )
        .prop_map(
            |(replica, view, has_new_view, last_stable, last_executed, mb, mr)| Status {
                replica,
                view,
                has_new_view,
                last_stable,
                last_executed,
                missing_batches: mb,
                missing_requests: mr,
            },
        )
}

fn fetch() -> impl Strategy<Value = Fetch> {
    let what = prop_oneof![
        any::<u64>().prop_map(|seq| FetchWhat::StateMeta { seq }),
        (any::<u64>(), any::<u32>(), any::<u64>())
            .prop_map(|(seq, part, offset)| FetchWhat::StatePart { seq, part, offset }),
    ];
    (replica_id(), what).prop_map(|(replica, what)| Fetch { replica, what })
}

fn batch_data() -> impl Strategy<Value = BatchData> {
    (replica_id(), batch_body()).prop_map(|(replica, batch)| BatchData { replica, batch })
}

fn state_meta() -> impl Strategy<Value = StateMeta> {
    (replica_id(), any::<u64>(), vec(digest(), 0..8)).prop_map(|(replica, seq, parts)| StateMeta {
        replica,
        seq,
        parts,
    })
}

fn state_part() -> impl Strategy<Value = StatePart> {
    (
        replica_id(),
        any::<u64>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        bytes(256),
    )
        .prop_map(|(replica, seq, part, offset, total, data)| StatePart {
            replica,
            seq,
            part,
            offset,
            total,
            data,
        })
}

/// Any message, each type equally likely.
fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        request().prop_map(Message::Request),
        reply().prop_map(Message::Reply),
        pre_prepare().prop_map(Message::PrePrepare),
        prepare().prop_map(Message::Prepare),
        commit().prop_map(Message::Commit),
        checkpoint().prop_map(Message::Checkpoint),
        view_change().prop_map(Message::ViewChange),
        new_view().prop_map(Message::NewView),
        status().prop_map(Message::Status),
        fetch().prop_map(Message::Fetch),
        batch_data().prop_map(Message::BatchData),
        state_meta().prop_map(Message::StateMeta),
        state_part().prop_map(Message::StatePart),
    ]
}

/// Envelopes whose sender the parser accepts (replica ids below `MAX_REPLICAS`).
fn envelope() -> impl Strategy<Value = Envelope> {
    let sender = prop_oneof![
        (0..MAX_REPLICAS as u32).prop_map(Principal::Replica),
        any::<u64>().prop_map(Principal::Client),
    ];
    (sender, any::<u32>(), any::<u8>(), any::<u8>()).prop_map(|(sender, epoch, flags, replier)| {
        Envelope {
            sender,
            epoch,
            flags,
            replier,
        }
    })
}

fn tag() -> impl Strategy<Value = Tag> {
    (1u8..=13).prop_map(|b| Tag::from_u8(b).expect("tags 1..=13 exist"))
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Parse then decode; the two steps a receiver runs before looking at authentication.
fn parse_decode(bytes: &[u8], max: usize) -> Result<(Header, Message), DecodeError> {
    let f = Frame::parse(bytes, max)?;
    let m = f.decode()?;
    Ok((f.header, m))
}

fn set_u32(frame: &mut [u8], at: usize, v: u32) {
    frame[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

// ---------------------------------------------------------------------------------------------
// (a) Arbitrary input never panics.
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// Raw bytes: almost all fail at the magic, which is the point (cheap rejection).
    #[test]
    fn random_bytes_never_panic(bytes in bytes(4096), max in prop_oneof![Just(MAX), 0usize..5000]) {
        let _ = parse_decode(&bytes, max);
    }

    /// `Tag::of_frame` (the lane a peer's frame goes on, `byzfs-net` `link_lane.rs`, and the
    /// simulator's access links) reads at most four bytes of any input: a tag only behind
    /// the magic, and the tag a parsed frame carries.
    #[test]
    fn a_frames_tag_is_read_from_its_prefix_only(bytes in bytes(64), t in tag(), rest in bytes(64)) {
        let got = Tag::of_frame(&bytes);
        prop_assert!(got.is_none() || bytes.starts_with(b"BZ\x01"));
        let mut framed = vec![b'B', b'Z', 1, t as u8];
        framed.extend_from_slice(&rest);
        prop_assert_eq!(Tag::of_frame(&framed), Some(t));
    }

    /// Raw bytes behind a plausible prefix, so the parser gets past the magic and the tag.
    #[test]
    fn random_bytes_after_magic_never_panic(t in tag(), rest in bytes(4096)) {
        let mut bytes = vec![b'B', b'Z', 1, t as u8];
        bytes.extend_from_slice(&rest);
        let _ = parse_decode(&bytes, MAX);
    }

    /// A valid header around an arbitrary body: exercises each postcard body decoder.
    #[test]
    fn random_body_never_panics(t in tag(), body in bytes(4096), env in envelope()) {
        let frame = wire::encode_with_body(env, t, &body, Digest::of(&body), Auth::None);
        let f = Frame::parse(&frame, MAX).expect("a well-formed header must parse");
        prop_assert_eq!(f.body, &body[..]);
        if let Ok(m) = f.decode() {
            prop_assert_eq!(m.tag(), t);
        }
    }

    /// A valid body with a few bytes overwritten (and sometimes cut short or extended),
    /// re-wrapped with a correct digest: reaches deep into the decoders (length prefixes, enum
    /// and option tags, varint limits). Whatever decodes must survive a re-encode unchanged.
    #[test]
    fn mutated_body_never_panics(
        msg in message(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in proptest::option::weighted(0.25, any::<prop::sample::Index>()),
        extend in proptest::option::weighted(0.25, bytes(8)),
    ) {
        let mut body = wire::encode_body(&msg);
        for (at, b) in &edits {
            let i = at.index(body.len());
            body[i] = *b;
        }
        if let Some(cut) = cut {
            body.truncate(cut.index(body.len()));
        }
        body.extend_from_slice(&extend.unwrap_or_default());
        let env = Envelope::new(Principal::Replica(0), 0);
        let frame = wire::encode_with_body(env, msg.tag(), &body, Digest::of(&body), Auth::None);
        let f = Frame::parse(&frame, MAX).expect("a well-formed header must parse");
        if let Ok(m) = f.decode() {
            prop_assert_eq!(m.tag(), msg.tag());
            let again = wire::encode(env, &m, Auth::None);
            prop_assert_eq!(parse_decode(&again, MAX).expect("re-encoded").1, m);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (b) Every message round-trips through the wire.
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_message_round_trips(msg in message(), env in envelope()) {
        let frame = wire::encode(env, &msg, Auth::None);
        let f = Frame::parse(&frame, MAX).expect("encoded frame parses");
        prop_assert_eq!(f.header.tag, msg.tag());
        prop_assert_eq!(f.header.sender, env.sender);
        prop_assert_eq!(f.header.epoch, env.epoch);
        prop_assert_eq!(f.header.flags, env.flags);
        prop_assert_eq!(f.header.replier, env.replier);
        prop_assert_eq!(f.header.auth, AuthKind::None);
        prop_assert_eq!(f.header.body_len as usize, frame.len() - HEADER_LEN);
        prop_assert_eq!(f.header.auth_len, 0);
        prop_assert_eq!(f.header.body_digest, Digest::of(f.body));
        prop_assert!(f.auth.is_empty());
        prop_assert_eq!(f.decode().expect("encoded body decodes"), msg);
    }
}

// ---------------------------------------------------------------------------------------------
// (c) Truncated and bit-flipped frames are rejected.
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// Every proper prefix is rejected: `Truncated` below a header, `BadLength` above.
    #[test]
    fn every_truncation_is_rejected(msg in message(), env in envelope()) {
        let frame = wire::encode(env, &msg, Auth::None);
        for len in 0..frame.len() {
            let expect =
                if len < HEADER_LEN { DecodeError::Truncated } else { DecodeError::BadLength };
            let got = parse_decode(&frame[..len], MAX).unwrap_err();
            prop_assert_eq!(got, expect, "prefix {}", len);
        }
    }

    /// Flipping any bits of any one byte: a body byte always breaks the digest; a header byte
    /// either fails a check (magic, version, tag, sender kind, auth kind, reserved bytes,
    /// lengths, digest) or, where nothing but the MAC covers it (tag value, sender id, flags,
    /// replier, epoch), parses to a *different* header — so a MAC over the header catches it.
    #[test]
    fn every_flipped_byte_is_rejected_or_visible(
        msg in message(),
        env in envelope(),
        mask in 1u8..=255,
    ) {
        let frame = wire::encode(env, &msg, Auth::None);
        let (orig, _) = parse_decode(&frame, MAX).expect("valid frame");
        for i in 0..frame.len() {
            let mut bad = frame.clone();
            bad[i] ^= mask;
            match parse_decode(&bad, MAX) {
                Err(e) if i >= HEADER_LEN => {
                    prop_assert_eq!(e, DecodeError::BadDigest, "body byte {}", i)
                }
                Err(_) => {}
                Ok((h, _)) => {
                    prop_assert!(i < HEADER_LEN, "flipped body byte {} accepted", i);
                    prop_assert_ne!(h, orig, "flipped header byte {} parsed to the same header", i);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (d) Length checks.
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// A declared body length that does not match the frame is `BadLength`, before the digest.
    #[test]
    fn wrong_body_len_is_bad_length(msg in message(), body_len in any::<u32>()) {
        let mut frame = wire::encode(Envelope::new(Principal::Replica(1), 0), &msg, Auth::None);
        prop_assume!(body_len as usize != frame.len() - HEADER_LEN);
        set_u32(&mut frame, 20, body_len);
        prop_assert_eq!(parse_decode(&frame, MAX).unwrap_err(), DecodeError::BadLength);
    }

    /// Any auth length with no authentication, or one that is not a whole number of MACs (or
    /// exceeds `MAX_REPLICAS` of them), or not exactly one MAC or signature, or not a signature
    /// followed by a whole number of MACs (at most `MAX_REPLICAS`), is `BadLength`.
    #[test]
    fn inconsistent_auth_len_is_bad_length(
        msg in message(),
        kind in 0u8..5,
        auth_len in any::<u32>(),
    ) {
        let valid = match kind {
            0 => auth_len == 0,
            1 => {
                (auth_len as usize).is_multiple_of(MAC_LEN)
                    && auth_len as usize / MAC_LEN <= MAX_REPLICAS
            }
            2 => auth_len as usize == MAC_LEN,
            3 => auth_len as usize == SIG_LEN,
            _ => (auth_len as usize).checked_sub(SIG_LEN).is_some_and(|m| {
                m.is_multiple_of(MAC_LEN) && m / MAC_LEN <= MAX_REPLICAS
            }),
        };
        prop_assume!(!valid);
        let mut frame = wire::encode(Envelope::new(Principal::Replica(1), 0), &msg, Auth::None);
        frame[7] = kind;
        set_u32(&mut frame, 24, auth_len);
        prop_assert_eq!(parse_decode(&frame, MAX).unwrap_err(), DecodeError::BadLength);
    }

    /// Lengths that are each plausible but do not add up to the frame: trailing garbage, or an
    /// auth region the frame does not have.
    #[test]
    fn lengths_not_adding_up_is_bad_length(
        msg in message(),
        extra in bytes(64),
        macs in 1usize..4,
    ) {
        let frame = wire::encode(Envelope::new(Principal::Replica(1), 0), &msg, Auth::None);
        if !extra.is_empty() {
            let mut longer = frame.clone();
            longer.extend_from_slice(&extra);
            prop_assert_eq!(parse_decode(&longer, MAX).unwrap_err(), DecodeError::BadLength);
        }
        let mut claims_auth = frame.clone();
        claims_auth[7] = AuthKind::Authenticator as u8;
        set_u32(&mut claims_auth, 24, (macs * MAC_LEN) as u32);
        prop_assert_eq!(parse_decode(&claims_auth, MAX).unwrap_err(), DecodeError::BadLength);
    }

    /// A frame over the limit is rejected, whatever it contains.
    #[test]
    fn oversized_is_bad_length(msg in message(), under in 1usize..64) {
        let frame = wire::encode(Envelope::new(Principal::Replica(1), 0), &msg, Auth::None);
        prop_assert!(parse_decode(&frame, frame.len()).is_ok());
        let max = frame.len().saturating_sub(under).max(HEADER_LEN);
        prop_assert_eq!(parse_decode(&frame, max).unwrap_err(), DecodeError::BadLength);
        let mut junk = frame.clone();
        junk[0] = b'X';
        prop_assert_eq!(parse_decode(&junk, max).unwrap_err(), DecodeError::BadLength);
    }
}

// ---------------------------------------------------------------------------------------------
// (e) Authentication.
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..config() })]

    /// An authenticator from replica `s` verifies at replica `r` only in slot `r` with the key
    /// `r` shares with `s`; flipping any header byte or any byte of slot `r` breaks it.
    #[test]
    fn authenticator_binds_slot_key_and_header(
        msg in message(),
        seed in any::<u64>(),
        f in 1usize..=3,
        s in any::<prop::sample::Index>(),
        r in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let n = 3 * f + 1;
        let (s, r) = (s.index(n) as u32, r.index(n));
        let keys = TestKeys::new(seed, n);
        let sender = keys.replica(s, []);
        let receiver = keys.replica(r as u32, []);
        let frame = wire::encode(
            Envelope::new(Principal::Replica(s), 0), &msg, Auth::Authenticator(&sender.to_replica));
        let fr = Frame::parse(&frame, MAX).expect("parses");
        prop_assert_eq!(fr.header.auth, AuthKind::Authenticator);
        prop_assert_eq!(fr.auth.len(), n * MAC_LEN);
        prop_assert_eq!(fr.decode().expect("decodes"), msg);
        for slot in 0..n + 1 {
            for from in 0..n {
                let ok = fr.verify_mac(&receiver.from_replica[from], slot);
                let want = slot == r && from == s as usize;
                prop_assert_eq!(ok, want, "slot {} key from {}", slot, from);
            }
        }
        // No other kind of check accepts an authenticator.
        prop_assert!(!fr.verify_signature(&receiver.replica_public[s as usize]));

        let auth_start = frame.len() - n * MAC_LEN;
        for i in (0..HEADER_LEN).chain(auth_start + r * MAC_LEN..auth_start + (r + 1) * MAC_LEN) {
            let mut bad = frame.clone();
            bad[i] ^= mask;
            if let Ok(bf) = Frame::parse(&bad, MAX) {
                prop_assert!(!bf.verify_mac(&receiver.from_replica[s as usize], r), "byte {}", i);
            }
        }
    }

    /// A signed authenticator from client 9 verifies at replica `r` only in slot `r` with the
    /// key `r` shares with the client, and its signature only under the client's key; flipping
    /// any header byte breaks both, flipping a signature byte breaks the signature and every MAC
    /// (each MAC covers the signature), flipping a byte of slot `r` breaks that MAC only.
    #[test]
    fn signed_authenticator_binds_header_signature_and_slot(
        msg in message(),
        seed in any::<u64>(),
        f in 1usize..=3,
        r in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let n = 3 * f + 1;
        let r = r.index(n);
        let keys = TestKeys::new(seed, n);
        let client = keys.client(9);
        let receiver = keys.replica(r as u32, [9, 10]);
        let frame = wire::encode(
            Envelope::new(Principal::Client(9), 0),
            &msg,
            Auth::SignedAuthenticator(client.signing.as_ref().expect("signs"), &client.to_replica),
        );
        let fr = Frame::parse(&frame, MAX).expect("parses");
        prop_assert_eq!(fr.header.auth, AuthKind::SignedAuthenticator);
        prop_assert_eq!(fr.auth.len(), SIG_LEN + n * MAC_LEN);
        prop_assert_eq!(fr.mac_entries(), n);
        let key = &receiver.clients[&9].1;
        for slot in 0..n + 1 {
            prop_assert_eq!(fr.verify_mac(key, slot), slot == r, "slot {}", slot);
        }
        prop_assert!(!fr.verify_mac(&receiver.clients[&10].1, r));
        prop_assert!(fr.verify_signed_authenticator(&receiver.client_public[&9]));
        prop_assert!(!fr.verify_signed_authenticator(&receiver.client_public[&10]));
        prop_assert!(!fr.verify_signature(&receiver.client_public[&9]));

        let auth_start = frame.len() - SIG_LEN - n * MAC_LEN;
        for i in (0..HEADER_LEN).chain(auth_start..auth_start + SIG_LEN) {
            let mut bad = frame.clone();
            bad[i] ^= mask;
            if let Ok(bf) = Frame::parse(&bad, MAX) {
                prop_assert!(!bf.verify_mac(key, r), "byte {}", i);
                prop_assert!(!bf.verify_signed_authenticator(&receiver.client_public[&9]), "byte {}", i);
            }
        }
        let slot_at = auth_start + SIG_LEN + r * MAC_LEN;
        let mut bad = frame.clone();
        bad[slot_at] ^= mask;
        let bf = Frame::parse(&bad, MAX).expect("parses");
        prop_assert!(!bf.verify_mac(key, r));
        prop_assert!(bf.verify_signed_authenticator(&receiver.client_public[&9]));
    }

    /// A single MAC verifies with its key only; a signature with its signer's public key only;
    /// a flipped header byte breaks both.
    #[test]
    fn single_mac_and_signature_bind_header(
        msg in message(),
        seed in any::<u64>(),
        i in 0..HEADER_LEN,
        mask in 1u8..=255,
    ) {
        let keys = TestKeys::new(seed, 4);
        let client = keys.client(9);
        let r1 = keys.replica(1, [9]);
        let env = Envelope::new(Principal::Client(9), 0);

        let frame = wire::encode(env, &msg, Auth::Mac(&client.to_replica[1]));
        let fr = Frame::parse(&frame, MAX).expect("parses");
        prop_assert_eq!(fr.header.auth, AuthKind::Mac);
        prop_assert!(fr.verify_mac(&r1.clients[&9].1, 0));
        prop_assert!(!fr.verify_mac(&r1.clients[&9].0, 0));
        prop_assert!(!fr.verify_mac(&client.to_replica[2], 0));
        let mut bad = frame.clone();
        bad[i] ^= mask;
        if let Ok(bf) = Frame::parse(&bad, MAX) {
            prop_assert!(!bf.verify_mac(&r1.clients[&9].1, 0));
        }

        let env = Envelope::new(Principal::Replica(1), 0);
        let frame = wire::encode(env, &msg, Auth::Signature(&r1.signing));
        let fr = Frame::parse(&frame, MAX).expect("parses");
        prop_assert!(fr.verify_signature(&r1.replica_public[1]));
        prop_assert!(!fr.verify_signature(&r1.replica_public[0]));
        prop_assert!(!fr.verify_mac(&r1.from_replica[1], 1));
        let mut bad = frame.clone();
        bad[i] ^= mask;
        if let Ok(bf) = Frame::parse(&bad, MAX) {
            prop_assert!(!bf.verify_signature(&r1.replica_public[1]));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Canonical request bodies.
// ---------------------------------------------------------------------------------------------

/// For a REQUEST the body digest *is* the request digest, so two encodings of one request would
/// carry two digests. postcard accepts overlong varints (`0x80 0x00` reads as 0); the decoder
/// rejects any request body longer than its canonical encoding. (Other bodies need no such
/// rule: nothing identifies them by their body digest.)
#[test]
fn body_encoding_is_canonical() {
    let msg = Message::Request(Request {
        client: 0,
        rid: 0,
        acked: 0,
        after: 0,
        op: vec![],
    });
    let canonical = wire::encode_body(&msg);
    assert_eq!(canonical, [0, 0, 0, 0, 0]);
    let overlong = [0x80, 0x00, 0, 0, 0, 0];
    let frame = wire::encode_with_body(
        Envelope::new(Principal::Client(0), 0),
        Tag::Request,
        &overlong,
        Digest::of(&overlong),
        Auth::None,
    );
    let decoded = Frame::parse(&frame, MAX).and_then(|f| f.decode());
    assert!(decoded.is_err(), "overlong varint accepted as {decoded:?}");
}
