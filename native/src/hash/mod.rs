//! The hash functions several parts share, each the one home of its maths:
//! datasketch's `sha1_hash32` over many messages (`sha1`), SplitMix64
//! (`splitmix`), MurmurHash3_x64_128 (`murmur3`: the pybloomfiltermmap3
//! format's key hash; its finalizer mixes the `Mix` band keys), and Spark's
//! `xxhash64` and `hash` expressions (`spark`: the input check's sums).

pub(crate) mod murmur3;
pub mod sha1;
pub(crate) mod spark;
pub mod splitmix;
