//! Sizing of both filter formats, as the index and `plan` need it.

use pyo3::prelude::*;

use super::errors::value_err;
use crate::{blocked, bloom};

/// (num_hashes, num_bits) exactly as pybloomfilter sizes a filter.
#[pyfunction]
#[pyo3(signature = (capacity, error_rate, num_hashes = None))]
fn bloom_geometry(capacity: u64, error_rate: f64, num_hashes: Option<usize>) -> PyResult<(u32, u64)> {
    bloom::geometry(capacity, error_rate, num_hashes).map_err(value_err)
}

/// Blocks (of 512 bits) a blocked filter needs for `capacity` keys at `error_rate`.
#[pyfunction]
fn blocked_num_blocks(capacity: u64, error_rate: f64) -> PyResult<u64> {
    blocked::num_blocks_for(capacity, error_rate).map_err(value_err)
}

fn some_blocks(num_blocks: u64) -> PyResult<u64> {
    if num_blocks == 0 {
        return Err(value_err("num_blocks must be >= 1"));
    }
    Ok(num_blocks)
}

/// Exact false-positive rate of a blocked filter of `num_blocks` blocks holding `n` keys.
#[pyfunction]
fn blocked_fp_rate(n: f64, num_blocks: u64) -> PyResult<f64> {
    Ok(blocked::fp_rate(n, some_blocks(num_blocks)?))
}

/// The textbook split-block estimate (every block at the mean load).
#[pyfunction]
fn blocked_fp_rate_textbook(n: f64, num_blocks: u64) -> PyResult<f64> {
    Ok(blocked::fp_rate_textbook(n, some_blocks(num_blocks)?))
}

/// Measures a blocked filter's false-positive rate in memory: (false positives, num_blocks).
#[pyfunction]
#[pyo3(signature = (capacity, error_rate, queries, seed = 0))]
fn blocked_measure_fp(py: Python<'_>, capacity: u64, error_rate: f64, queries: u64, seed: u64) -> PyResult<(u64, u64)> {
    py.detach(|| blocked::measure_fp(capacity, error_rate, queries, seed))
        .map_err(value_err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bloom_geometry, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_num_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_fp_rate, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_fp_rate_textbook, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_measure_fp, m)?)?;
    Ok(())
}
