//! `lshbloom_udf._native`: the native core of lshbloom-spark (docs/algorithm.md).
//!
//! Plain Rust modules, free of pyo3 and tested on their own, by area:
//! `text` (shingling), `minhash` (MinHash signatures and LSH band keys),
//! `filters` (the band filters' file formats and the band set over them),
//! `verify` (verification's candidates and exact overlaps), `input` (Arrow
//! rows and the input check's sums), `hash` (the hash functions several of
//! them share) and `prefetch`. `py` binds them; this file only registers it.

pub mod filters;
pub mod hash;
pub(crate) mod input;
pub mod minhash;
pub(crate) mod prefetch;
mod py;
pub mod text;
pub(crate) mod verify;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::register(m)
}
