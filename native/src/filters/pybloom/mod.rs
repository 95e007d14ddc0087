//! Memory-mapped Bloom filters in pybloomfiltermmap3 0.6.3's file format, and
//! the multi-band "keep first" query/insert of LSHBloom (docs/algorithm.md §4).
//!
//! File layout (x86-64, little-endian), as written by `mbarray_Create_Mmap`:
//!
//! ```text
//! 0     "MBITARRAY"                      9 bytes
//! 9     num_bits                         u64
//! 17    header_len (= 1200)              i32
//! 21    struct _BloomFilter              1200 bytes (offsets below are relative to 21)
//!         0    max_num_elem  u64        (capacity)
//!         8    error_rate    f64
//!         16   num_hashes    u32
//!         20   hash_seeds    [u32; 256]
//!         1048 MBArray*      (8 bytes, zero on disk)
//!         1056 bf_version    u8 (= 1)
//!         1057 count_correct u8 (= 1)
//!         1064 elem_count    u64
//!         1072 reserved      [u32; 32]
//! 1221  zero padding up to the preamble = ceil(1221 / 256) * 256 = 1280
//! 1280  bit data, ceil(num_bits / 8) bytes; bit i is byte i / 8, mask 1 << (i % 8)
//! ```
//!
//! A key (an integer) is hashed as pybloomfilter hashes a Python int: its
//! `hash()` (= key mod 2^61-1 for non-negative ints) as 8 little-endian bytes,
//! through MurmurHash3_x64_128 with each stored seed; bit = (h1 ^ h2) % num_bits.
//!
//! `positions` is the key's hash and bit positions (with
//! `crate::hash::murmur3`), `format` the header and sizing, `file` one filter
//! file, `row_loops` the row loops of a band set of them.

mod file;
mod format;
mod positions;
mod row_loops;

pub(crate) use file::BloomFile;
pub(crate) use format::geometry;

/// The b band filters of an LSHBloom index in pybloomfiltermmap3's format.
#[cfg(test)]
pub(crate) type BandFilters = crate::filters::band_set::BandSet<BloomFile>;
