//! Sizing of the filter formats, as the index and `plan` need it.

use pyo3::prelude::*;

use super::errors::value_err;
use crate::filters::{blocked, cuckoo, pybloom as bloom};

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

/// (fp_bits, slots, num_buckets) of the smallest cuckoo filter for `capacity` keys at `error_rate`.
#[pyfunction]
fn cuckoo_geometry(capacity: u64, error_rate: f64) -> PyResult<(u32, u32, u64)> {
    let g = cuckoo::geometry(capacity, error_rate).map_err(value_err)?;
    Ok((g.fp_bits, g.slots, g.num_buckets))
}

/// False-positive rate of a cuckoo filter of `num_buckets` buckets of `fp_bits`-bit fingerprints holding `n` keys.
#[pyfunction]
fn cuckoo_fp_rate(n: f64, num_buckets: u64, fp_bits: u32) -> PyResult<f64> {
    if !(cuckoo::MIN_FP_BITS..=cuckoo::MAX_FP_BITS).contains(&fp_bits) {
        return Err(value_err(format!("fp_bits must be in [{}, {}], got {fp_bits}", cuckoo::MIN_FP_BITS, cuckoo::MAX_FP_BITS)));
    }
    Ok(cuckoo::fp_rate(n, some_blocks(num_buckets)?, fp_bits))
}

/// Measures a cuckoo filter's false-positive rate in memory:
/// (false positives, num_buckets, fp_bits, keys stored).
#[pyfunction]
#[pyo3(signature = (capacity, error_rate, queries, seed = 0))]
fn cuckoo_measure_fp(py: Python<'_>, capacity: u64, error_rate: f64, queries: u64, seed: u64) -> PyResult<(u64, u64, u32, u64)> {
    let m = py.detach(|| cuckoo::measure_fp(capacity, error_rate, queries, seed)).map_err(value_err)?;
    Ok((m.false_positives, m.num_buckets, m.fp_bits, m.stored))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cuckoo_geometry, m)?)?;
    m.add_function(wrap_pyfunction!(cuckoo_fp_rate, m)?)?;
    m.add_function(wrap_pyfunction!(cuckoo_measure_fp, m)?)?;
    m.add_function(wrap_pyfunction!(bloom_geometry, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_num_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_fp_rate, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_fp_rate_textbook, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_measure_fp, m)?)?;
    Ok(())
}
