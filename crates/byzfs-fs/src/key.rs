//! How the file system is laid out in the [`Store`](crate::store::Store): one record per
//! inode, two per directory entry, one per data block, and a superblock.
//!
//! | record | key (after the 8 placement bytes) | placement hash of |
//! |---|---|---|
//! | superblock | `0` | `"s"` |
//! | inode | `1 ‖ ino` | `"i" ‖ ino` |
//! | entry by cookie | `2 ‖ dir ‖ cookie` | `"d" ‖ dir` |
//! | entry by name | `3 ‖ dir ‖ name` | `"d" ‖ dir` |
//! | data block | `4 ‖ ino ‖ index` | `"b" ‖ ino ‖ index / GROUP_BLOCKS` |
//! | block group (stored block count) | `5 ‖ ino ‖ group` | `"g" ‖ ino` |
//! | extended attribute | `6 ‖ ino ‖ name` | `"x" ‖ ino` |
//! | record locks of a file | `7 ‖ ino` | `"i" ‖ ino` (the inode's) |
//! | a client's lock lease | `8 ‖ client` | `"c" ‖ client` |
//! | who holds a file's lock delegation | `9 ‖ ino` | `"i" ‖ ino` (the inode's) |
//! | the delegations a client must give back | `10 ‖ client` | `"c" ‖ client` |
//! | blocking lock requests a client waits on | `11 ‖ client` | `"c" ‖ client` |
//! | where a file's blocks are ([`crate::reclaim`]; absent: under its inode number) | `12 ‖ ino` | `"i" ‖ ino` (the inode's) |
//! | an entry of the reclaim queue ([`crate::reclaim`]) | `13 ‖ number` | `"r"` |
//! | the reclaim queue's counters | `14` | `"r"` |
//! | the replicas' capacity reports ([`crate::capacity`]) | `15` | `"p"` |
//! | the inode numbers reserved for a client ([`crate::reserve`]) | `16 ‖ client` | `"c" ‖ client` |
//! | who holds a directory's delegation ([`crate::dir_delegation`]) | `17 ‖ dir` | `"d" ‖ dir` (its entries') |
//! | an encryption group's record ([`crate::crypt_group`]) | `18 ‖ group id` | `"k" ‖ group id` |
//! | the encryption group of a file ([`crate::crypt_file`]) | `19 ‖ ino` | `"i" ‖ ino` (the inode's) |
//! | a client's last writer-proof sequence number ([`crate::crypt_write`]) | `20 ‖ client` | `"c" ‖ client` |
//!
//! Integers are big-endian so key order is numeric order. The placement bytes are the first 8
//! bytes of a domain-separated BLAKE3 hash, so partitions fill evenly. Both records of a
//! directory's entries share the directory's placement: [`crate::dir`] lists them with one
//! range scan of one partition. A file's blocks are placed per group of
//! [`GROUP_BLOCKS`] blocks (1 MiB), so a file of many GB spreads
//! over every partition and each partition stays small (a few hundred KiB per GB of data at
//! 4096 partitions), which keeps state transfer and partition export cheap.

use crate::store::PLACEMENT_BYTES;

/// Blocks per placement group (1 MiB of data share a partition): how [`crate::data`]
/// stores a file's blocks, decided here since it is where they are placed.
pub const GROUP_BLOCKS: u64 = 64;

const TAG_SUPER: u8 = 0;
const TAG_INODE: u8 = 1;
const TAG_ENTRY: u8 = 2;
const TAG_NAME: u8 = 3;
const TAG_BLOCK: u8 = 4;
const TAG_GROUP: u8 = 5;
const TAG_XATTR: u8 = 6;
const TAG_LOCKS: u8 = 7;
const TAG_LEASE: u8 = 8;
const TAG_DELEGATION: u8 = 9;
const TAG_RECALLS: u8 = 10;
const TAG_WAITS: u8 = 11;
const TAG_DATA: u8 = 12;
const TAG_RECLAIM: u8 = 13;
const TAG_RECLAIM_QUEUE: u8 = 14;
const TAG_CAPACITY: u8 = 15;
const TAG_RESERVED: u8 = 16;
const TAG_DIR_DELEGATION: u8 = 17;
const TAG_CRYPT_GROUP: u8 = 18;
const TAG_CRYPT_FILE: u8 = 19;
const TAG_WRITER_SEQ: u8 = 20;
const TAG_FILE_DELEGATION: u8 = 21;

/// The placement bytes of an object.
fn placement(kind: u8, parts: &[u64]) -> [u8; PLACEMENT_BYTES] {
    let mut h = blake3::Hasher::new_derive_key("byzfs 2026 file service placement v1");
    h.update(&[kind]);
    for p in parts {
        h.update(&p.to_le_bytes());
    }
    let mut out = [0u8; PLACEMENT_BYTES];
    out.copy_from_slice(&h.finalize().as_bytes()[..PLACEMENT_BYTES]);
    out
}

fn build(place: [u8; PLACEMENT_BYTES], tag: u8, fields: &[u64], tail: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(PLACEMENT_BYTES + 1 + 8 * fields.len() + tail.len());
    k.extend_from_slice(&place);
    k.push(tag);
    for f in fields {
        k.extend_from_slice(&f.to_be_bytes());
    }
    k.extend_from_slice(tail);
    k
}

/// The superblock.
pub(crate) fn superblock() -> Vec<u8> {
    build(placement(b's', &[]), TAG_SUPER, &[], &[])
}

/// The inode record of `ino`.
pub(crate) fn inode(ino: u64) -> Vec<u8> {
    build(placement(b'i', &[ino]), TAG_INODE, &[ino], &[])
}

/// The entry of directory `dir` with cookie `cookie`.
pub(crate) fn entry(dir: u64, cookie: u64) -> Vec<u8> {
    build(placement(b'd', &[dir]), TAG_ENTRY, &[dir, cookie], &[])
}

/// The name index record of `name` in directory `dir`.
pub(crate) fn name(dir: u64, name: &[u8]) -> Vec<u8> {
    build(placement(b'd', &[dir]), TAG_NAME, &[dir], name)
}

/// Data block `index` of data id `data` (a file's blocks are stored under its data id,
/// [`crate::reclaim::DataRec`], which is its inode number unless a truncation gave it
/// another).
pub(crate) fn block(data: u64, index: u64) -> Vec<u8> {
    build(
        placement(b'b', &[data, index / GROUP_BLOCKS]),
        TAG_BLOCK,
        &[data, index],
        &[],
    )
}

/// The block-count record of group `group` of data id `data` (groups that hold no block
/// have none). All of a data id's group records share a partition, so truncation finds the
/// stored groups with one range scan instead of probing every group up to the file size.
pub(crate) fn group(data: u64, group: u64) -> Vec<u8> {
    build(placement(b'g', &[data]), TAG_GROUP, &[data, group], &[])
}

/// Where inode `ino`'s blocks are ([`crate::reclaim::DataRec`]), in the inode's partition.
pub(crate) fn data(ino: u64) -> Vec<u8> {
    build(placement(b'i', &[ino]), TAG_DATA, &[ino], &[])
}

/// Entry `number` of the reclaim queue ([`crate::reclaim`]).
pub(crate) fn reclaim(number: u64) -> Vec<u8> {
    build(placement(b'r', &[]), TAG_RECLAIM, &[number], &[])
}

/// The reclaim queue's counters ([`crate::reclaim::Queue`]), in the queue's partition.
pub(crate) fn reclaim_queue() -> Vec<u8> {
    build(placement(b'r', &[]), TAG_RECLAIM_QUEUE, &[], &[])
}

/// The replicas' capacity reports ([`crate::capacity`]).
pub(crate) fn capacity_reports() -> Vec<u8> {
    build(placement(b'p', &[]), TAG_CAPACITY, &[], &[])
}

/// Extended attribute `name` of `ino`. All of a file's attributes share a partition, so
/// listing them is one range scan.
pub(crate) fn xattr(ino: u64, name: &[u8]) -> Vec<u8> {
    build(placement(b'x', &[ino]), TAG_XATTR, &[ino], name)
}

/// The record locks of `ino` ([`crate::lock`]), in the inode's partition.
pub(crate) fn locks(ino: u64) -> Vec<u8> {
    build(placement(b'i', &[ino]), TAG_LOCKS, &[ino], &[])
}

/// The lock lease of client `client` ([`crate::lock`]).
pub(crate) fn lease(client: u64) -> Vec<u8> {
    build(placement(b'c', &[client]), TAG_LEASE, &[client], &[])
}

/// Who holds `ino`'s lock delegation ([`crate::delegation`]), in the inode's partition.
pub(crate) fn delegation(ino: u64) -> Vec<u8> {
    build(placement(b'i', &[ino]), TAG_DELEGATION, &[ino], &[])
}

/// The files whose delegation `client` must give back ([`crate::delegation`]).
pub(crate) fn recalls(client: u64) -> Vec<u8> {
    build(placement(b'c', &[client]), TAG_RECALLS, &[client], &[])
}

/// The blocking lock requests `client`'s owners are waiting on ([`crate::deadlock`]).
pub(crate) fn waits(client: u64) -> Vec<u8> {
    build(placement(b'c', &[client]), TAG_WAITS, &[client], &[])
}

/// The inode numbers reserved for client `client` ([`crate::reserve`]).
pub(crate) fn reserved(client: u64) -> Vec<u8> {
    build(placement(b'c', &[client]), TAG_RESERVED, &[client], &[])
}

/// Who holds directory `dir`'s delegation ([`crate::dir_delegation`]), beside its entries.
pub(crate) fn dir_delegation(dir: u64) -> Vec<u8> {
    build(placement(b'd', &[dir]), TAG_DIR_DELEGATION, &[dir], &[])
}

/// Who holds file `ino`'s delegation ([`crate::file_delegation`]), in the inode's partition.
pub(crate) fn file_delegation(ino: u64) -> Vec<u8> {
    build(placement(b'i', &[ino]), TAG_FILE_DELEGATION, &[ino], &[])
}

/// Encryption group `group`'s record ([`crate::crypt_group`]).
pub(crate) fn crypt_group(group: &[u8; 16]) -> Vec<u8> {
    let (hi, lo) = group.split_at(8);
    let parts = [
        u64::from_be_bytes(hi.try_into().unwrap_or_default()),
        u64::from_be_bytes(lo.try_into().unwrap_or_default()),
    ];
    build(placement(b'k', &parts), TAG_CRYPT_GROUP, &parts, &[])
}

/// The encryption group of `ino` ([`crate::crypt_file`]), in the inode's partition.
pub(crate) fn crypt_file(ino: u64) -> Vec<u8> {
    build(placement(b'i', &[ino]), TAG_CRYPT_FILE, &[ino], &[])
}

/// The last writer-proof sequence number client `client` used ([`crate::crypt_write`]).
pub(crate) fn writer_seq(client: u64) -> Vec<u8> {
    build(placement(b'c', &[client]), TAG_WRITER_SEQ, &[client], &[])
}

/// The inode whose attributes, entries, extended attributes, block map or group `key`
/// holds, if it holds any of these: what a writer proof covers ([`crate::crypt_write`]).
/// Records of locks, leases and delegations are not a file's content and give `None`; so
/// do data blocks, which change only with their inode's size or times.
pub(crate) fn file_of(key: &[u8]) -> Option<u64> {
    let tag = *key.get(PLACEMENT_BYTES)?;
    if !matches!(
        tag,
        TAG_INODE | TAG_ENTRY | TAG_NAME | TAG_XATTR | TAG_DATA | TAG_CRYPT_FILE
    ) {
        return None;
    }
    let field = key.get(PLACEMENT_BYTES + 1..PLACEMENT_BYTES + 9)?;
    Some(u64::from_be_bytes(field.try_into().ok()?))
}

/// A bound above every attribute key of `ino` (names are at most 255 bytes).
pub(crate) fn xattr_end(ino: u64) -> Vec<u8> {
    xattr(ino, &[0xFF; 256])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::partition_of;

    #[test]
    fn directory_records_share_a_partition_and_sort_by_cookie() {
        let p = partition_of(&entry(7, 1), 4096);
        assert_eq!(partition_of(&entry(7, 99), 4096), p);
        assert_eq!(partition_of(&name(7, b"x"), 4096), p);
        assert!(entry(7, 2) < entry(7, 256));
        assert!(entry(7, u64::MAX - 1) < entry(7, u64::MAX));
    }

    #[test]
    fn a_files_records_name_their_inode_and_others_do_not() {
        for k in [
            inode(5),
            entry(5, 9),
            name(5, b"n"),
            xattr(5, b"user.a"),
            data(5),
            crypt_file(5),
        ] {
            assert_eq!(file_of(&k), Some(5));
        }
        for k in [
            superblock(),
            block(5, 0),
            group(5, 0),
            locks(5),
            lease(5),
            delegation(5),
            recalls(5),
            waits(5),
            reclaim(5),
            reclaim_queue(),
            capacity_reports(),
            reserved(5),
            dir_delegation(5),
            crypt_group(&[5; 16]),
            writer_seq(5),
        ] {
            assert_eq!(file_of(&k), None);
        }
    }

    #[test]
    fn blocks_group_then_spread() {
        let g = GROUP_BLOCKS;
        assert_eq!(
            partition_of(&block(3, 0), 4096),
            partition_of(&block(3, g - 1), 4096)
        );
        let distinct: std::collections::BTreeSet<u32> = (0..64)
            .map(|i| partition_of(&block(3, i * g), 4096))
            .collect();
        assert!(distinct.len() > 50, "groups spread over partitions");
    }
}
