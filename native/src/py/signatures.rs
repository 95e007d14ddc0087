//! Shingles, MinHash signatures and band keys (GIL released while they work).

use numpy::ndarray::{Array1, Array2};
use numpy::{Element, IntoPyArray, PyArray1, PyArray2};
use pyo3::prelude::*;
use pyo3::types::PyString;

use super::errors::value_err;
use super::input::{detach_with_rows, input_u32, ArrowTexts};
use super::settings::{positive, shingle_settings, BandSettings, SignatureSettings};
use crate::minhash::band_keys::{band_keys as keys_of_signatures, BandKey, Banding};
use crate::minhash;
use crate::text::shingles;

fn matrix<T: Element>(py: Python<'_>, rows: usize, cols: usize, v: Vec<T>) -> Bound<'_, PyArray2<T>> {
    Array2::from_shape_vec((rows, cols), v)
        .expect("shape")
        .into_pyarray(py)
}

type KeysAndFlags<'py> = (Bound<'py, PyArray2<u64>>, Bound<'py, PyArray1<bool>>);

fn keys_and_flags(py: Python<'_>, b: usize, (keys, has): (Vec<u64>, Vec<bool>)) -> KeysAndFlags<'_> {
    (matrix(py, has.len(), b, keys), Array1::from_vec(has).into_pyarray(py))
}

/// The distinct shingles of `text` in `unit`, sorted bytewise (UTF-8 bytes).
#[pyfunction(name = "shingles")]
#[pyo3(signature = (text, ngram, normalize = 0, unit = "words"))]
fn py_shingles(text: Option<Bound<'_, PyString>>, ngram: i64, normalize: i64, unit: &str) -> PyResult<Vec<Vec<u8>>> {
    let settings = shingle_settings(unit, ngram, normalize)?;
    let Some(text) = text else { return Ok(Vec::new()) };
    let s = text
        .to_cow()
        .map_err(|e| value_err(format!("text is not valid Unicode: {e}")))?;
    Ok(shingles::Shingler::with_settings(settings).shingle_set(&s))
}

/// MinHash signatures of `texts` (a sequence of `str`/`None`, or an
/// `ArrowTexts`), shape (N, k).
#[pyfunction(name = "minhash")]
fn py_minhash<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    settings: &Bound<'py, SignatureSettings>,
) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let s = settings.get();
    let (n, out) = detach_with_rows(py, texts, |rows| (rows.len(), s.signatures(rows)))?;
    Ok(matrix(py, n, s.hasher.num_perm(), out))
}

/// Band keys of an (N, k) signature matrix, shape (N, b).
#[pyfunction]
#[pyo3(signature = (signatures, b, r, band_key = "sum"))]
fn band_keys<'py>(
    py: Python<'py>,
    signatures: &Bound<'py, PyAny>,
    b: i64,
    r: i64,
    band_key: &str,
) -> PyResult<Bound<'py, PyArray2<u64>>> {
    let key = BandKey::parse(band_key).map_err(value_err)?;
    let sigs = input_u32(signatures, "signatures")?;
    sigs.require_ndim("signatures", 2, "2-D (N, k)")?;
    let (n, k) = (sigs.shape[0], sigs.shape[1]);
    let banding = Banding {
        b: positive("b", b)?,
        r: positive("r", r)?,
        key,
    };
    banding.check(k).map_err(value_err)?;
    let slice = sigs.slice();
    let out = py.detach(|| {
        let mut out = vec![0u64; n * banding.b];
        if n > 0 {
            keys_of_signatures(slice, k, banding, &mut out);
        }
        out
    });
    Ok(matrix(py, n, banding.b, out))
}

/// Fused MinHash + band keys of `texts` (as for `minhash`): ((N, b) keys,
/// (N,) has_shingles).
#[pyfunction]
fn minhash_band_keys<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    settings: &Bound<'py, SignatureSettings>,
    bands: &Bound<'py, BandSettings>,
) -> PyResult<KeysAndFlags<'py>> {
    let s = settings.get();
    let banding = bands.get().for_num_perm(s.hasher.num_perm())?;
    let out = detach_with_rows(py, texts, |rows| s.band_keys(rows, banding))?;
    Ok(keys_and_flags(py, banding.b, out))
}

/// Forgets the calling thread's table of word hashes (kept across calls to
/// skip SHA-1 of words seen before); for benchmarks that time a cold start.
#[pyfunction]
fn reset_word_table() {
    minhash::reset_word_table()
}

/// The widest MinHash kernel this CPU runs: "avx512", "avx2" or "generic".
#[pyfunction]
fn simd_backend() -> &'static str {
    minhash::simd_backend()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SignatureSettings>()?;
    m.add_class::<BandSettings>()?;
    m.add_class::<ArrowTexts>()?;
    m.add_function(wrap_pyfunction!(py_shingles, m)?)?;
    m.add_function(wrap_pyfunction!(py_minhash, m)?)?;
    m.add_function(wrap_pyfunction!(band_keys, m)?)?;
    m.add_function(wrap_pyfunction!(minhash_band_keys, m)?)?;
    m.add_function(wrap_pyfunction!(reset_word_table, m)?)?;
    m.add_function(wrap_pyfunction!(simd_backend, m)?)?;
    Ok(())
}
