//! Paragraphs and their keys (`text::paragraphs`), the GIL released.

use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

use super::errors::value_err;
use super::input::detach_with_rows;
use crate::text::paragraphs::{paragraph_keys, ParagraphSettings, Separator};
use crate::text::shingles::NORM_VALID;

type Arrays<'py> = (
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u64>>,
);

/// The paragraphs of `texts` (a sequence of `str`/`None`, or an `ArrowTexts`):
/// `(counts, starts, ends, nkeys, keys)`, flat (docs/algorithm.md §10):
/// paragraphs per document, each paragraph's span in code points and number of
/// keys, and the keys in order.
#[pyfunction]
#[pyo3(signature = (texts, separator, min_chars, ngram, normalize, seed))]
fn paragraph_keys_of<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    separator: &str,
    min_chars: i64,
    ngram: i64,
    normalize: i64,
    seed: u64,
) -> PyResult<Arrays<'py>> {
    let separator = Separator::parse(separator).ok_or_else(|| {
        value_err(format!("separator must be one of {:?}, got {separator:?}", Separator::NAMES))
    })?;
    if min_chars < 1 {
        return Err(value_err(format!("min_chars must be >= 1, got {min_chars}")));
    }
    if ngram < 0 {
        return Err(value_err(format!("ngram must be >= 0 (0: exact), got {ngram}")));
    }
    if normalize < 0 || normalize as u32 as i64 != normalize || (normalize as u32) & !NORM_VALID != 0 {
        return Err(value_err(format!("unknown normalization flags {normalize}")));
    }
    let settings = ParagraphSettings {
        separator,
        min_chars: min_chars as usize,
        ngram: ngram as usize,
        flags: normalize as u32,
        seed,
    };
    let out = detach_with_rows(py, texts, |rows| paragraph_keys(rows, settings))?;
    Ok((
        out.counts.into_pyarray(py),
        out.starts.into_pyarray(py),
        out.ends.into_pyarray(py),
        out.nkeys.into_pyarray(py),
        out.keys.into_pyarray(py),
    ))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(paragraph_keys_of, m)?)?;
    m.add("PARAGRAPH_SEPARATORS", Separator::NAMES.to_vec())?;
    Ok(())
}
