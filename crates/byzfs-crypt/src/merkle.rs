//! A BLAKE3 Merkle tree over a file's sealed blocks. Leaves, inner nodes and the root are
//! hashed with distinct prefixes, an odd node is carried up unpaired (never paired with
//! itself, which would let two block lists share a root), and the root commits to the block
//! count. A proof lets a reader check one block against the signed root without the others.

/// A 32-byte BLAKE3 hash.
pub type Hash = [u8; 32];

/// The leaf of a sealed block.
pub fn leaf(sealed: &[u8]) -> Hash {
    let mut h = blake3::Hasher::new();
    h.update(&[0]);
    h.update(sealed);
    *h.finalize().as_bytes()
}

fn node(l: &Hash, r: &Hash) -> Hash {
    let mut h = blake3::Hasher::new();
    h.update(&[1]);
    h.update(l);
    h.update(r);
    *h.finalize().as_bytes()
}

fn top(count: u64, tree: &Hash) -> Hash {
    let mut h = blake3::Hasher::new();
    h.update(&[2]);
    h.update(&count.to_le_bytes());
    h.update(tree);
    *h.finalize().as_bytes()
}

fn level_up(level: &[Hash]) -> Vec<Hash> {
    level
        .chunks(2)
        .map(|p| match p {
            [l, r] => node(l, r),
            [one] => *one,
            _ => unreachable!("chunks of two"),
        })
        .collect()
}

/// The root over `leaves` (in block order).
pub fn root(leaves: &[Hash]) -> Hash {
    let mut level = leaves.to_vec();
    while level.len() > 1 {
        level = level_up(&level);
    }
    top(
        leaves.len() as u64,
        &level.first().copied().unwrap_or([0; 32]),
    )
}

/// The proof for leaf `index`: the sibling at each level, `None` where it was carried up
/// unpaired. Empty if `index` is out of range.
pub fn proof(leaves: &[Hash], index: usize) -> Vec<Option<Hash>> {
    if index >= leaves.len() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut level = leaves.to_vec();
    let mut i = index;
    while level.len() > 1 {
        out.push(level.get(i ^ 1).copied());
        level = level_up(&level);
        i /= 2;
    }
    out
}

/// Whether `leaf` is leaf `index` of `count` under `root`, by `proof`.
pub fn verify(
    root_hash: &Hash,
    count: u64,
    index: u64,
    leaf: &Hash,
    proof: &[Option<Hash>],
) -> bool {
    if index >= count {
        return false;
    }
    let (mut h, mut i, mut width) = (*leaf, index, count);
    for sibling in proof {
        if width <= 1 {
            return false;
        }
        let paired = i ^ 1 < width;
        h = match (sibling, paired) {
            (Some(s), true) if i % 2 == 0 => node(&h, s),
            (Some(s), true) => node(s, &h),
            (None, false) => h,
            _ => return false,
        };
        i /= 2;
        width = width.div_ceil(2);
    }
    width == 1 && top(count, &h) == *root_hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n).map(|i| leaf(&(i as u32).to_le_bytes())).collect()
    }

    #[test]
    fn every_block_proves_against_the_root_and_nothing_else_does() {
        for n in 1..=9 {
            let l = leaves(n);
            let r = root(&l);
            for i in 0..n {
                let p = proof(&l, i);
                assert!(verify(&r, n as u64, i as u64, &l[i], &p), "n={n} i={i}");
                let other = leaf(b"other");
                assert!(!verify(&r, n as u64, i as u64, &other, &p), "n={n} i={i}");
                if n > 1 {
                    let j = (i + 1) % n;
                    assert!(
                        !verify(&r, n as u64, j as u64, &l[i], &p),
                        "moved: n={n} i={i}"
                    );
                }
                assert!(
                    !verify(&r, n as u64 + 1, i as u64, &l[i], &p),
                    "count: n={n}"
                );
            }
        }
    }

    #[test]
    fn roots_commit_to_order_count_and_content() {
        let l = leaves(3);
        let mut swapped = l.clone();
        swapped.swap(0, 1);
        assert_ne!(root(&l), root(&swapped));
        // Carrying the odd node up unpaired: [a, b, c] and [a, b, c, c] differ.
        let mut dup = l.clone();
        dup.push(l[2]);
        assert_ne!(root(&l), root(&dup));
        assert_ne!(root(&[]), root(&leaves(1)));
        assert_eq!(proof(&l, 3), Vec::<Option<Hash>>::new());
    }
}
