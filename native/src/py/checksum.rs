//! Checksums of filter files and filter parts (xxh3-64), the GIL released.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::filters::checksum;

/// xxh3-64 of the whole file at `path`, read through a memory map.
#[pyfunction]
fn file_checksum(py: Python<'_>, path: PathBuf) -> PyResult<u64> {
    Ok(py.detach(|| checksum::file_xxh3(&path))?)
}

/// xxh3-64 of `data`.
#[pyfunction]
fn bytes_checksum(py: Python<'_>, data: &Bound<'_, PyBytes>) -> u64 {
    let bytes = data.as_bytes();
    py.detach(|| checksum::bytes_xxh3(bytes))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(file_checksum, m)?)?;
    m.add_function(wrap_pyfunction!(bytes_checksum, m)?)?;
    Ok(())
}
