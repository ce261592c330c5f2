//! What a mount opens comes from the replicas, up to `f` of which may lie (issue #43):
//! headers, blocks and their entries, directory headers, names, link targets, attribute
//! values and lockboxes. Random bytes, and valid sealed values with bytes changed and cut:
//! each opens to a value or an error, never a panic. (Which forgeries are refused is pinned
//! by the unit tests beside each parser.)

use byzfs_crypt::file;
use byzfs_crypt::header::{self, FileHeader, WriterKey};
use byzfs_crypt::lockbox;
use byzfs_crypt::member::{open_mine, seal_record, Identity, Role};
use byzfs_crypt::names;
use proptest::prelude::*;
use rand_core::OsRng;

/// `valid` with `flips` xored in at spread positions and `cut` bytes cut off its end.
fn mutated(valid: &[u8], flips: &[u8], cut: usize) -> Vec<u8> {
    let mut b = valid.to_vec();
    for (i, x) in flips.iter().enumerate() {
        let at = i.wrapping_mul(37) % valid.len().max(1);
        if let Some(y) = b.get_mut(at) {
            *y ^= *x;
        }
    }
    b.truncate(b.len().saturating_sub(cut));
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn sealed_values_from_the_replicas_never_panic(
        random in prop::collection::vec(any::<u8>(), 0..600),
        entry in prop::collection::vec(any::<u8>(), 0..200),
        flips in prop::collection::vec(any::<u8>(), 0..6),
        cut in 0usize..4,
        index in any::<u64>(),
        text in ".{0,80}",
        which in 0u8..3,
    ) {
        let owner = Identity::from_secrets([1; 32], [2; 32]);
        let g = owner.group_ref(&[7; 16], "team");
        let members = [(owner.member_key(), Role::Writer)];
        let (w1, boxes) = seal_record(&owner, &g, 1, &members, &mut OsRng).expect("a record");
        let mine = open_mine(&owner, &g, &boxes, 1, &w1).expect("the owner's lockbox");
        let (key, cert) = mine.writer.expect("a writer");
        let f = [5; 16];
        let h = FileHeader {
            key_version: 1,
            version: 2,
            root: [3; 32],
            size: 77,
        };
        let w = WriterKey { key: &key, cert: &cert };
        let sealed = header::seal(&mine.keys, &g, &f, &h, &w, &mut OsRng);
        let input = match which {
            0 => random.clone(),
            _ => mutated(&sealed, &flips, cut),
        };
        let _ = header::open(&mine.keys, &g, &f, &input);
        let _ = file::open_block(&mine.keys, &f, index % 1024, &random, &entry);
        let mut out = vec![0; random.len()];
        let _ = file::VouchedBlocks::new(&mine.keys, &f).open(&random, &entry, &mut out);
        let _ = file::open_dir_header(&mine.keys, &f, &input);
        let _ = file::open_target(&mine.keys, &random);
        let _ = file::open_xattr_value(&mine.keys, &f, &entry, &random);
        let _ = names::open(&[9; 64], &text);
        let me = x25519_dalek::StaticSecret::from([4; 32]);
        let lb = boxes.first().cloned().unwrap_or_default();
        let boxed = if which == 1 { mutated(&lb, &flips, cut) } else { random };
        let _ = lockbox::open(&me, &entry, &boxed);
    }
}
