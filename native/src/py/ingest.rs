//! The input check's sums of every text (`crate::input::sums`), the GIL released.

use pyo3::prelude::*;

use super::errors::value_err;
use super::input::{detach_with_byte_rows, input_exact, ArrowTexts};
use crate::input::sums::InputSums;

/// `(documents, content xxhash64 sum, content hash sum, sequence xxhash64 sum, sequence hash sum, longest
/// text's bytes, all texts' bytes)` of `texts` at row ids `rows` (int64, one per text): the sums of Spark's
/// `xxhash64` and `hash` that the input check's aggregation computes, for a part of the rows (sums add up).
#[pyfunction]
fn input_sums(
    py: Python<'_>,
    texts: &Bound<'_, ArrowTexts>,
    rows: &Bound<'_, PyAny>,
) -> PyResult<(u64, i128, i128, i128, i128, u64, u64)> {
    let rows = input_exact::<i64>(rows, "rows", "int64")?;
    rows.require_ndim("rows", 1, "1-D")?;
    let ids = rows.slice();
    let sums = detach_with_byte_rows(py, texts, |texts| {
        if texts.len() != ids.len() {
            return Err(format!("rows has {} ids for {} texts: one row id per text", ids.len(), texts.len()));
        }
        Ok(InputSums::of(ids, texts))
    })?
    .map_err(value_err)?;
    Ok((
        sums.documents,
        sums.content_xxhash,
        sums.content_murmur,
        sums.sequence_xxhash,
        sums.sequence_murmur,
        sums.longest,
        sums.bytes,
    ))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(input_sums, m)?)?;
    Ok(())
}
