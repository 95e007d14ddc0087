//! The Python bindings: thin pyo3 wrappers over the plain Rust modules, each
//! batch loop run with the GIL released. Everything Python sees is named here
//! or in the submodule that defines it.

mod checksum;
mod errors;
mod filters;
mod ingest;
mod input;
mod paragraphs;
mod settings;
mod signatures;
mod sizing;
mod verify;

use pyo3::prelude::*;

use crate::filters::{blocked, cuckoo};
use crate::text::shingles::{self, punct_table};

/// Adds every function, class and constant of `lshbloom_udf._native` to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    signatures::register(m)?;
    sizing::register(m)?;
    filters::register(m)?;
    checksum::register(m)?;
    ingest::register(m)?;
    verify::register(m)?;
    paragraphs::register(m)?;
    m.add("BLOCKED_FORMAT_VERSION", blocked::VERSION)?;
    m.add("CUCKOO_FORMAT_VERSION", cuckoo::VERSION)?;
    m.add("NORM_NFKC", shingles::NORM_NFKC)?;
    m.add("NORM_LOWER", shingles::NORM_LOWER)?;
    m.add("NORM_PUNCT", shingles::NORM_PUNCT)?;
    m.add("NORM_DEHYPHEN", shingles::NORM_DEHYPHEN)?;
    m.add("SHINGLE_UNITS", shingles::Unit::NAMES.to_vec())?;
    m.add("PUNCT_UNICODE_VERSION", punct_table::UNICODE_VERSION)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
