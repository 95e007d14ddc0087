//! `lshbloom_udf._native`: the native core of lshbloom-spark (docs/algorithm.md).
//!
//! Plain Rust modules, free of pyo3 and tested on their own: shingling
//! (`shingles`), MinHash (`minhash`), LSH band keys (`bands`), the two Bloom
//! filter file formats (`bloom`: pybloomfiltermmap3's, `blocked`: one cache
//! line per key) and the band set over either (`bandset`), verification's
//! exact overlaps (`overlap`, and `pairoverlap` over a table of texts), shingle hash sets for its template rule
//! (`shinglehash`) and candidate matching (`pairmatch`,
//! `sharedpairs`), the input check's sums of the texts (`input_sums`), and
//! SplitMix64, which several of them use (`splitmix`).
//! `py` binds them.

pub mod arrow;
pub mod bands;
pub mod bandset;
pub mod blocked;
pub mod bloom;
pub mod checksum;
pub mod cuckoo;
pub mod lines;
pub mod distinct;
pub mod input_sums;
pub mod error;
#[cfg(test)]
mod layout_checks;
pub mod mapped;
pub mod overlap;
pub mod pairoverlap;
pub mod pairmatch;
pub mod minhash;
pub mod parallel;
pub mod prefetch;
mod punct_table;
mod py;
pub mod sha1x;
pub mod sharedpairs;
pub mod splitmix;
pub mod shinglehash;
pub mod shingles;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::register(m)
}
