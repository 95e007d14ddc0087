//! The band filters (docs/algorithm.md §4): one memory-mapped filter file per
//! band, in one of three formats.
//!
//! - `band_set`: the traits every format implements ([`band_set::FilterFile`],
//!   [`band_set::BandFilter`]) and the band set written once over them;
//! - `pybloom`: Bloom filters in pybloomfiltermmap3's file format;
//! - `lines`: what the filters made of 64-byte lines share (header, mapping,
//!   row loops), and their two layouts, `blocked` (one block per key) and
//!   `cuckoo` (two buckets per key);
//! - `mapped` (the mapping and header fields every format uses), `error`
//!   (the one error type of the filter files), `checksum` (the files'
//!   checksums), and, for the tests, `layout_checks` (the checks every line
//!   layout must pass).

pub mod band_set;
pub mod blocked;
pub(crate) mod checksum;
pub mod cuckoo;
pub(crate) mod error;
#[cfg(test)]
mod layout_checks;
pub mod lines;
pub(crate) mod mapped;
pub(crate) mod pybloom;
