//! A request ([`Request`]: who, what, under which grant) and the encoding of requests and
//! results: the bytes a client sends through `byzfs_bft::Client::invoke` and the bytes it
//! gets back.
//!
//! Encoding: postcard of [`Request`] and of [`FsResult`] (`Result<Reply, Errno>`), like the
//! core's messages. Decoding never panics and rejects trailing bytes. An operation that does
//! not decode executes as `Err(EINVAL)` at every replica.
//!
//! The client's credentials travel in the request (AUTH_SYS style), with the grant the
//! admin signed for the client's certificate, which limits the ids it may state
//! ([`super::grant`]; `EPERM` outside it).

use super::codec::{decode, encode};
use super::cred::Credentials;
use super::grant::SignedGrant;
use super::op::Op;
use super::reply::FsResult;
use serde::{Deserialize, Serialize};

/// A request: credentials and an operation.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Request {
    /// Who performs the operation.
    pub cred: Credentials,
    /// What to do.
    pub op: Op,
    /// What the sender's certificate lets it state as `cred` ([`super::grant`]); required
    /// under [`crate::policy::ClientPolicy::Certified`], except from a replica's own client.
    pub grant: Option<SignedGrant>,
}

impl Request {
    /// A request running as `cred`, with no grant (a trusting service's tests, a replica's
    /// own client).
    pub fn new(cred: Credentials, op: Op) -> Request {
        Request {
            cred,
            op,
            grant: None,
        }
    }

    /// A request running as `cred` under `grant` (a certified client's).
    pub fn granted(cred: Credentials, op: Op, grant: SignedGrant) -> Request {
        Request {
            cred,
            op,
            grant: Some(grant),
        }
    }

    /// The wire encoding (postcard).
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Decodes a request; `None` if `b` is not exactly one encoded request, or nests
    /// operations as no correct client does ([`super::bounded`]: depth and lists bounded
    /// while decoding, [`Op::nesting_ok`] after).
    pub fn decode(b: &[u8]) -> Option<Request> {
        decode::<Request>(b).filter(|r| r.op.nesting_ok())
    }
}

/// Encodes a result (postcard of `Result<Reply, Errno>`).
pub fn encode_result(r: &FsResult) -> Vec<u8> {
    encode(r)
}

/// Decodes a result; `None` if `b` is not exactly one encoded result.
pub fn decode_result(b: &[u8]) -> Option<FsResult> {
    decode(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::errno::Errno;
    use crate::proto::handle::FileHandle;
    use crate::proto::reply::Reply;

    #[test]
    fn round_trip_and_trailing_bytes() {
        let r = Request::new(
            Credentials::user(1000, 100),
            Op::Write {
                fh: FileHandle::ROOT,
                offset: 7,
                data: b"hello".to_vec(),
            },
        );
        let b = r.encode();
        assert_eq!(Request::decode(&b), Some(r));
        let mut t = b.clone();
        t.push(0);
        assert_eq!(Request::decode(&t), None);
        assert_eq!(Request::decode(&b[..b.len() - 1]), None);
        let res: FsResult = Err(Errno::ENOENT);
        assert_eq!(decode_result(&encode_result(&res)), Some(res));
    }

    #[test]
    fn byte_fields_encode_like_plain_vectors() {
        #[derive(Serialize)]
        struct Plain {
            fh: FileHandle,
            offset: u64,
            data: Vec<u8>,
        }
        let data: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let op = Op::Write {
            fh: FileHandle::ROOT,
            offset: 9,
            data: data.clone(),
        };
        let mut plain = postcard::to_allocvec(&6u32).unwrap(); // variant index of Write
        plain.extend(
            postcard::to_allocvec(&Plain {
                fh: FileHandle::ROOT,
                offset: 9,
                data,
            })
            .unwrap(),
        );
        assert_eq!(postcard::to_allocvec(&op).unwrap(), plain);
        let r: FsResult = Ok(Reply::Read {
            data: vec![1, 2, 3],
            eof: true,
        });
        assert_eq!(decode_result(&encode_result(&r)), Some(r));
    }
}
