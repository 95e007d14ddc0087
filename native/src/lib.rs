//! `lshbloom_udf._native`: the native core of lshbloom-spark (DESIGN §2).
//!
//! Thin pyo3 bindings over small modules: shingling, MinHash, LSH band keys,
//! pybloomfiltermmap3-compatible Bloom filter files. Every batch loop runs with
//! the GIL released. Input arrays are used in place when they have the expected
//! dtype and are C-contiguous; otherwise they are copied (and converted, for the
//! few other integer dtypes accepted, with a range check).

pub mod arrow;
pub mod bands;
pub mod blocked;
pub mod bloom;
pub mod distinct;
pub mod minhash;
pub mod prefetch;
pub mod sha1x;
mod punct_table;
pub mod shingles;

use std::borrow::Cow;
use std::fmt::Display;
use std::path::PathBuf;

use numpy::ndarray::{Array1, Array2, ArrayD, IxDyn};
use numpy::{
    Element, IntoPyArray, PyArray1, PyArray2, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyOSError, PyPermissionError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::bands::BandKey;
use crate::blocked::{BlockedBands, BlockedFile};
use crate::bloom::{BandFilters, BloomError, BloomFile};
use crate::minhash::{MinHasher, Permutations, Scheme};
use crate::shingles::NORM_ALL;

// ---------------------------------------------------------------------------
// Errors

fn value_err(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

fn bloom_err(e: BloomError) -> PyErr {
    match e {
        BloomError::Io { path, source } => match source.raw_os_error() {
            Some(code) => {
                let text = source.to_string();
                let strerror = match text.rfind(" (os error") {
                    Some(i) => text[..i].to_string(),
                    None => text,
                };
                PyOSError::new_err((code, strerror, path.display().to_string()))
            }
            None => PyOSError::new_err(format!("{}: {}", path.display(), source)),
        },
        e @ BloomError::Format { .. } => value_err(e.to_string()),
        e @ BloomError::ReadOnly { .. } => PyPermissionError::new_err(e.to_string()),
        BloomError::Invalid(msg) => value_err(msg),
    }
}

fn shape_str(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
        ),
    }
}

// ---------------------------------------------------------------------------
// numpy input

enum Data<'py, T: Element> {
    Borrowed(PyReadonlyArrayDyn<'py, T>),
    Owned(Vec<T>),
}

/// A numpy array as a row-major slice and its shape.
struct Input<'py, T: Element> {
    data: Data<'py, T>,
    shape: Vec<usize>,
}

impl<T: Element> Input<'_, T> {
    fn slice(&self) -> &[T] {
        match &self.data {
            Data::Borrowed(a) => a.as_slice().expect("checked C-contiguous"),
            Data::Owned(v) => v,
        }
    }

    fn require_ndim(&self, name: &str, ndim: usize, what: &str) -> PyResult<()> {
        if self.shape.len() != ndim {
            return Err(value_err(format!(
                "{name} must be a {what} array, got shape {}",
                shape_str(&self.shape)
            )));
        }
        Ok(())
    }
}

fn describe(obj: &Bound<'_, PyAny>) -> String {
    match obj.cast::<PyUntypedArray>() {
        Ok(a) => format!("a numpy array of dtype {}", a.dtype()),
        Err(_) => match obj.get_type().name() {
            Ok(n) => format!("an object of type {n}"),
            Err(_) => "an object of unknown type".into(),
        },
    }
}

/// `obj` as an array of exactly dtype `T` (borrowed if C-contiguous), or None
/// if it has another type.
fn exact<'py, T: Element + Copy>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Option<Input<'py, T>>> {
    let Ok(arr) = obj.cast::<PyArrayDyn<T>>() else {
        return Ok(None);
    };
    let ro = arr
        .try_readonly()
        .map_err(|e| value_err(format!("{name}: {e}")))?;
    let shape = ro.shape().to_vec();
    let data = if ro.is_c_contiguous() {
        Data::Borrowed(ro)
    } else {
        Data::Owned(ro.as_array().iter().copied().collect())
    };
    Ok(Some(Input { data, shape }))
}

/// `obj` as an array of dtype `S`, converted element-wise to `T` (copy), or None.
fn converted<'py, S, T>(
    obj: &Bound<'py, PyAny>,
    name: &str,
    range: &str,
    f: impl Fn(S) -> Option<T>,
) -> PyResult<Option<Input<'py, T>>>
where
    S: Element + Copy + Display,
    T: Element,
{
    let Ok(arr) = obj.cast::<PyArrayDyn<S>>() else {
        return Ok(None);
    };
    let ro = arr
        .try_readonly()
        .map_err(|e| value_err(format!("{name}: {e}")))?;
    let shape = ro.shape().to_vec();
    let view = ro.as_array();
    let mut out = Vec::with_capacity(view.len());
    for (i, &x) in view.iter().enumerate() {
        match f(x) {
            Some(v) => out.push(v),
            None => {
                return Err(value_err(format!(
                    "{name}: value {x} at flat index {i} is out of range {range}"
                )))
            }
        }
    }
    Ok(Some(Input {
        data: Data::Owned(out),
        shape,
    }))
}

/// uint64 (in place), or int64 / uint32 (converted; int64 must be >= 0).
fn input_u64<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Input<'py, u64>> {
    if let Some(a) = exact::<u64>(obj, name)? {
        return Ok(a);
    }
    if let Some(a) = converted::<i64, u64>(obj, name, "[0, 2**64)", |x| u64::try_from(x).ok())? {
        return Ok(a);
    }
    if let Some(a) = converted::<u32, u64>(obj, name, "", |x| Some(u64::from(x)))? {
        return Ok(a);
    }
    Err(PyTypeError::new_err(format!(
        "{name} must be a numpy array of dtype uint64 (or int64 / uint32), got {}",
        describe(obj)
    )))
}

/// uint32 (in place), or uint64 / int64 (converted; values must fit in 32 bits).
fn input_u32<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Input<'py, u32>> {
    if let Some(a) = exact::<u32>(obj, name)? {
        return Ok(a);
    }
    if let Some(a) = converted::<u64, u32>(obj, name, "[0, 2**32)", |x| u32::try_from(x).ok())? {
        return Ok(a);
    }
    if let Some(a) = converted::<i64, u32>(obj, name, "[0, 2**32)", |x| u32::try_from(x).ok())? {
        return Ok(a);
    }
    Err(PyTypeError::new_err(format!(
        "{name} must be a numpy array of dtype uint32 (or uint64 / int64 with values < 2**32), got {}",
        describe(obj)
    )))
}

fn input_exact<'py, T: Element + Copy>(obj: &Bound<'py, PyAny>, name: &str, dtype: &str) -> PyResult<Input<'py, T>> {
    exact::<T>(obj, name)?.ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{name} must be a numpy array of dtype {dtype}, got {}",
            describe(obj)
        ))
    })
}

enum Offsets<'py> {
    I32(Input<'py, i32>),
    I64(Input<'py, i64>),
}

fn input_offsets<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Offsets<'py>> {
    let off = if let Some(a) = exact::<i32>(obj, "offsets")? {
        Offsets::I32(a)
    } else if let Some(a) = exact::<i64>(obj, "offsets")? {
        Offsets::I64(a)
    } else {
        return Err(PyTypeError::new_err(format!(
            "offsets must be a numpy array of dtype int32 (string) or int64 (large_string), got {}",
            describe(obj)
        )));
    };
    let shape = match &off {
        Offsets::I32(a) => &a.shape,
        Offsets::I64(a) => &a.shape,
    };
    if shape.len() != 1 {
        return Err(value_err(format!(
            "offsets must be a 1-D array, got shape {}",
            shape_str(shape)
        )));
    }
    Ok(off)
}

/// Arrow string column buffers, validated (GIL released).
struct ArrowInput<'py> {
    offsets: Offsets<'py>,
    data: Input<'py, u8>,
    valid: Option<Input<'py, bool>>,
}

impl<'py> ArrowInput<'py> {
    fn new(
        offsets: &Bound<'py, PyAny>,
        data: &Bound<'py, PyAny>,
        valid: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        let offsets = input_offsets(offsets)?;
        let data = input_exact::<u8>(data, "data", "uint8")?;
        data.require_ndim("data", 1, "1-D")?;
        let valid = match valid {
            Some(v) => {
                let v = input_exact::<bool>(v, "valid", "bool")?;
                v.require_ndim("valid", 1, "1-D")?;
                Some(v)
            }
            None => None,
        };
        Ok(ArrowInput {
            offsets,
            data,
            valid,
        })
    }

    fn slices(&self) -> ArrowSlices<'_> {
        ArrowSlices {
            offsets: match &self.offsets {
                Offsets::I32(o) => OffsetSlice::I32(o.slice()),
                Offsets::I64(o) => OffsetSlice::I64(o.slice()),
            },
            data: self.data.slice(),
            valid: self.valid.as_ref().map(|v| v.slice()),
        }
    }
}

enum OffsetSlice<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
}

/// The plain slices of an [`ArrowInput`] (usable without the GIL).
struct ArrowSlices<'a> {
    offsets: OffsetSlice<'a>,
    data: &'a [u8],
    valid: Option<&'a [bool]>,
}

impl<'a> ArrowSlices<'a> {
    fn rows(&self) -> Result<Vec<Option<&'a str>>, String> {
        match self.offsets {
            OffsetSlice::I32(o) => arrow::rows(o, self.data, self.valid),
            OffsetSlice::I64(o) => arrow::rows(o, self.data, self.valid),
        }
    }
}

/// Python strings of `texts` (str or None each), as Rust strings.
fn collect_texts<'py>(texts: &Bound<'py, PyAny>) -> PyResult<Vec<Option<Bound<'py, PyString>>>> {
    let mut out = Vec::new();
    for (i, item) in texts.try_iter()?.enumerate() {
        let item = item?;
        if item.is_none() {
            out.push(None);
        } else {
            match item.cast_into::<PyString>() {
                Ok(s) => out.push(Some(s)),
                Err(e) => {
                    let got = e.into_inner();
                    return Err(PyTypeError::new_err(format!(
                        "texts[{i}] must be str or None, got {}",
                        got.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                    )));
                }
            }
        }
    }
    Ok(out)
}

fn text_cows<'a>(objs: &'a [Option<Bound<'_, PyString>>]) -> PyResult<Vec<Option<Cow<'a, str>>>> {
    objs.iter()
        .enumerate()
        .map(|(i, o)| match o {
            None => Ok(None),
            Some(s) => s
                .to_cow()
                .map(Some)
                .map_err(|e| value_err(format!("texts[{i}] is not valid Unicode: {e}"))),
        })
        .collect()
}

fn positive(name: &str, v: i64) -> PyResult<usize> {
    if v < 1 {
        return Err(value_err(format!("{name} must be >= 1, got {v}")));
    }
    usize::try_from(v).map_err(|_| value_err(format!("{name} is too large: {v}")))
}

fn check_normalize(normalize: i64) -> PyResult<u32> {
    if !(0..=i64::from(NORM_ALL)).contains(&normalize) {
        return Err(value_err(format!(
            "normalize must be a bitmask of 1 (NFKC), 2 (lowercase), 4 (punctuation), got {normalize}"
        )));
    }
    Ok(normalize as u32)
}

fn build_hasher(
    perm_a: &Bound<'_, PyAny>,
    perm_b: &Bound<'_, PyAny>,
    scheme: &str,
    ngram: i64,
    normalize: i64,
) -> PyResult<MinHasher> {
    let scheme = Scheme::parse(scheme).ok_or_else(|| {
        value_err(format!("scheme must be 'affine32' or 'legacy', got {scheme:?}"))
    })?;
    let ngram = positive("ngram", ngram)?;
    let flags = check_normalize(normalize)?;
    let a = input_u64(perm_a, "perm_a")?;
    a.require_ndim("perm_a", 1, "1-D")?;
    let b = input_u64(perm_b, "perm_b")?;
    b.require_ndim("perm_b", 1, "1-D")?;
    let perms = Permutations::new(scheme, a.slice(), b.slice()).map_err(value_err)?;
    Ok(MinHasher::new(perms, ngram, flags))
}

fn check_bands(k: usize, b: i64, r: i64) -> PyResult<(usize, usize)> {
    let b = positive("b", b)?;
    let r = positive("r", r)?;
    bands::check_bands(k, b, r).map_err(value_err)?;
    Ok((b, r))
}

// ---------------------------------------------------------------------------
// Functions

/// The distinct shingles of `text`, sorted bytewise (UTF-8 bytes).
#[pyfunction(name = "shingles")]
#[pyo3(signature = (text, ngram, normalize = 0))]
fn py_shingles(text: Option<Bound<'_, PyString>>, ngram: i64, normalize: i64) -> PyResult<Vec<Vec<u8>>> {
    let ngram = positive("ngram", ngram)?;
    let flags = check_normalize(normalize)?;
    let Some(text) = text else { return Ok(Vec::new()) };
    let s = text
        .to_cow()
        .map_err(|e| value_err(format!("text is not valid Unicode: {e}")))?;
    Ok(shingles::Shingler::new(ngram, flags).shingle_set(&s))
}

/// MinHash signatures of `texts`, shape (N, k).
#[pyfunction(name = "minhash")]
#[pyo3(signature = (texts, perm_a, perm_b, scheme, ngram, normalize, threads = 1))]
#[allow(clippy::too_many_arguments)]
fn py_minhash<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    perm_a: &Bound<'py, PyAny>,
    perm_b: &Bound<'py, PyAny>,
    scheme: &str,
    ngram: i64,
    normalize: i64,
    threads: i64,
) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let hasher = build_hasher(perm_a, perm_b, scheme, ngram, normalize)?;
    let threads = check_threads(threads)?;
    let objs = collect_texts(texts)?;
    let cows = text_cows(&objs)?;
    let rows: Vec<Option<&str>> = cows.iter().map(|c| c.as_deref()).collect();
    let k = hasher.num_perm();
    let out = py.detach(|| signatures_parallel(&hasher, &rows, threads));
    Ok(Array2::from_shape_vec((rows.len(), k), out)
        .expect("shape")
        .into_pyarray(py))
}

/// MinHash signatures of an Arrow string column given as buffers, shape (N, k).
#[pyfunction]
#[pyo3(signature = (offsets, data, valid, perm_a, perm_b, scheme, ngram, normalize, threads = 1))]
#[allow(clippy::too_many_arguments)]
fn minhash_arrow<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    valid: Option<&Bound<'py, PyAny>>,
    perm_a: &Bound<'py, PyAny>,
    perm_b: &Bound<'py, PyAny>,
    scheme: &str,
    ngram: i64,
    normalize: i64,
    threads: i64,
) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let hasher = build_hasher(perm_a, perm_b, scheme, ngram, normalize)?;
    let threads = check_threads(threads)?;
    let input = ArrowInput::new(offsets, data, valid)?;
    let input = input.slices();
    let k = hasher.num_perm();
    let (n, out) = py
        .detach(|| {
            let rows = input.rows()?;
            Ok::<_, String>((rows.len(), signatures_parallel(&hasher, &rows, threads)))
        })
        .map_err(value_err)?;
    Ok(Array2::from_shape_vec((n, k), out)
        .expect("shape")
        .into_pyarray(py))
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
    let band_key = BandKey::parse(band_key).map_err(value_err)?;
    let sigs = input_u32(signatures, "signatures")?;
    sigs.require_ndim("signatures", 2, "2-D (N, k)")?;
    let (n, k) = (sigs.shape[0], sigs.shape[1]);
    let (b, r) = check_bands(k, b, r)?;
    let slice = sigs.slice();
    let out = py.detach(|| {
        let mut out = vec![0u64; n * b];
        if n > 0 {
            bands::band_keys(slice, k, b, r, band_key, &mut out);
        }
        out
    });
    Ok(Array2::from_shape_vec((n, b), out)
        .expect("shape")
        .into_pyarray(py))
}

type KeysAndFlags<'py> = (Bound<'py, PyArray2<u64>>, Bound<'py, PyArray1<bool>>);

fn keys_and_flags<'py>(py: Python<'py>, n: usize, b: usize, keys: Vec<u64>, has: Vec<bool>) -> KeysAndFlags<'py> {
    (
        Array2::from_shape_vec((n, b), keys)
            .expect("shape")
            .into_pyarray(py),
        Array1::from_vec(has).into_pyarray(py),
    )
}

/// Fused MinHash + band keys: ((N, b) keys, (N,) has_shingles).
#[pyfunction]
#[pyo3(signature = (texts, perm_a, perm_b, scheme, ngram, normalize, b, r, threads = 1, band_key = "sum"))]
#[allow(clippy::too_many_arguments)]
fn minhash_band_keys<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    perm_a: &Bound<'py, PyAny>,
    perm_b: &Bound<'py, PyAny>,
    scheme: &str,
    ngram: i64,
    normalize: i64,
    b: i64,
    r: i64,
    threads: i64,
    band_key: &str,
) -> PyResult<KeysAndFlags<'py>> {
    let hasher = build_hasher(perm_a, perm_b, scheme, ngram, normalize)?;
    let (b, r) = check_bands(hasher.num_perm(), b, r)?;
    let band_key = BandKey::parse(band_key).map_err(value_err)?;
    let threads = check_threads(threads)?;
    let objs = collect_texts(texts)?;
    let cows = text_cows(&objs)?;
    let rows: Vec<Option<&str>> = cows.iter().map(|c| c.as_deref()).collect();
    let n = rows.len();
    let (keys, has) = py.detach(|| band_keys_parallel(&hasher, &rows, b, r, band_key, threads));
    Ok(keys_and_flags(py, n, b, keys, has))
}

/// Fused MinHash + band keys over Arrow string buffers.
#[pyfunction]
#[pyo3(signature = (offsets, data, valid, perm_a, perm_b, scheme, ngram, normalize, b, r, threads = 1, band_key = "sum"))]
#[allow(clippy::too_many_arguments)]
fn minhash_band_keys_arrow<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    valid: Option<&Bound<'py, PyAny>>,
    perm_a: &Bound<'py, PyAny>,
    perm_b: &Bound<'py, PyAny>,
    scheme: &str,
    ngram: i64,
    normalize: i64,
    b: i64,
    r: i64,
    threads: i64,
    band_key: &str,
) -> PyResult<KeysAndFlags<'py>> {
    let hasher = build_hasher(perm_a, perm_b, scheme, ngram, normalize)?;
    let (b, r) = check_bands(hasher.num_perm(), b, r)?;
    let band_key = BandKey::parse(band_key).map_err(value_err)?;
    let threads = check_threads(threads)?;
    let input = ArrowInput::new(offsets, data, valid)?;
    let input = input.slices();
    let (n, keys, has) = py
        .detach(|| {
            let rows = input.rows()?;
            let n = rows.len();
            let (keys, has) = band_keys_parallel(&hasher, &rows, b, r, band_key, threads);
            Ok::<_, String>((n, keys, has))
        })
        .map_err(value_err)?;
    Ok(keys_and_flags(py, n, b, keys, has))
}

fn check_threads(threads: i64) -> PyResult<usize> {
    positive("threads", threads)
}

/// Fused MinHash + band keys of `rows` on `threads` threads (contiguous row
/// ranges, one MinHasher each); results are identical for any thread count.
fn band_keys_parallel(
    hasher: &minhash::MinHasher,
    rows: &[Option<&str>],
    b: usize,
    r: usize,
    band_key: BandKey,
    threads: usize,
) -> (Vec<u64>, Vec<bool>) {
    let n = rows.len();
    let mut keys = vec![0u64; n * b];
    let mut has = vec![false; n];
    let threads = threads.min(n.div_ceil(64)).max(1);
    if threads == 1 {
        bands::minhash_band_keys(&mut hasher.clone(), rows, b, r, band_key, &mut keys, &mut has);
        return (keys, has);
    }
    let per = n.div_ceil(threads);
    std::thread::scope(|scope| {
        for ((rows, keys), has) in rows.chunks(per).zip(keys.chunks_mut(per * b)).zip(has.chunks_mut(per)) {
            let mut h = hasher.clone();
            scope.spawn(move || bands::minhash_band_keys(&mut h, rows, b, r, band_key, keys, has));
        }
    });
    (keys, has)
}

/// Signatures of `rows` on `threads` threads.
fn signatures_parallel(hasher: &minhash::MinHasher, rows: &[Option<&str>], threads: usize) -> Vec<u32> {
    let k = hasher.num_perm();
    let n = rows.len();
    let mut out = vec![0u32; n * k];
    let threads = threads.min(n.div_ceil(64)).max(1);
    if threads == 1 {
        minhash::signatures(&mut hasher.clone(), rows, &mut out);
        return out;
    }
    let per = n.div_ceil(threads);
    std::thread::scope(|scope| {
        for (rows, out) in rows.chunks(per).zip(out.chunks_mut(per * k)) {
            let mut h = hasher.clone();
            scope.spawn(move || minhash::signatures(&mut h, rows, out));
        }
    });
    out
}

/// (num_hashes, num_bits) exactly as pybloomfilter sizes a filter.
#[pyfunction]
#[pyo3(signature = (capacity, error_rate, num_hashes = None))]
fn bloom_geometry(capacity: u64, error_rate: f64, num_hashes: Option<usize>) -> PyResult<(u32, u64)> {
    bloom::geometry(capacity, error_rate, num_hashes).map_err(value_err)
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

// ---------------------------------------------------------------------------
// Bloom filter classes

fn bool_array_like<'py>(py: Python<'py>, shape: &[usize], v: Vec<bool>) -> Bound<'py, PyArrayDyn<bool>> {
    ArrayD::from_shape_vec(IxDyn(shape), v)
        .expect("shape")
        .into_pyarray(py)
}

/// Declares a `#[pyclass]` holding `Option<$inner>` (`None` once closed) with
/// what every filter class shares — `get`/`get_mut` that refuse a closed object,
/// `closed`, `sync`, `close` and the context manager — plus the methods of its
/// kind: `file` (one filter file: `contains`, `add`, file properties) or
/// `bands` (one filter per band: `query`, `insert`, `query_insert`), and the
/// class's own methods. One `#[pymethods]` block per class, so the shared
/// methods are spliced in here rather than in a second impl.
macro_rules! filter_class {
    (file $(#[$doc:meta])* $py:ident($inner:ty, $name:tt) { $($own:tt)* }) => {
        filter_class!(@class $(#[$doc])* $py($inner, $name) {
            #[getter]
            fn capacity(&self) -> PyResult<u64> {
                Ok(self.get()?.capacity())
            }
            #[getter]
            fn error_rate(&self) -> PyResult<f64> {
                Ok(self.get()?.error_rate())
            }
            #[getter]
            fn elem_count(&self) -> PyResult<u64> {
                Ok(self.get()?.elem_count())
            }
            #[getter]
            fn path(&self) -> PyResult<String> {
                Ok(self.get()?.path().display().to_string())
            }
            #[getter]
            fn file_size(&self) -> PyResult<u64> {
                Ok(self.get()?.file_size())
            }
            #[getter]
            fn writable(&self) -> PyResult<bool> {
                Ok(self.get()?.writable())
            }

            fn contains<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArrayDyn<bool>>> {
                let f = self.get()?;
                let keys = input_u64(keys, "keys")?;
                let slice = keys.slice();
                let out = py.detach(|| {
                    let mut out = vec![false; slice.len()];
                    f.contains_many(slice, &mut out);
                    out
                });
                Ok(bool_array_like(py, &keys.shape, out))
            }

            fn add<'py>(&mut self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArrayDyn<bool>>> {
                let f = self.get_mut()?;
                let keys = input_u64(keys, "keys")?;
                let slice = keys.slice();
                let out = py
                    .detach(|| {
                        let mut out = vec![false; slice.len()];
                        f.add_many(slice, &mut out).map(|()| out)
                    })
                    .map_err(bloom_err)?;
                Ok(bool_array_like(py, &keys.shape, out))
            }

            fn __len__(&self) -> PyResult<usize> {
                Ok(self.get()?.elem_count() as usize)
            }

            $($own)*
        });
    };
    (bands $(#[$doc:meta])* $py:ident($inner:ty, $name:tt) { $($own:tt)* }) => {
        filter_class!(@class $(#[$doc])* $py($inner, $name) {
            #[getter]
            fn num_bands(&self) -> PyResult<usize> {
                Ok(self.get()?.num_bands())
            }
            #[getter]
            fn paths(&self) -> PyResult<Vec<String>> {
                Ok(self.get()?.filters().iter().map(|f| f.path().display().to_string()).collect())
            }
            #[getter]
            fn elem_counts(&self) -> PyResult<Vec<u64>> {
                Ok(self.get()?.filters().iter().map(|f| f.elem_count()).collect())
            }
            #[getter]
            fn writable(&self) -> PyResult<bool> {
                Ok(self.get()?.filters().iter().all(|f| f.writable()))
            }

            fn query<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<bool>>> {
                let bf = self.get()?;
                let keys = input_keys(keys, bf.num_bands())?;
                let slice = keys.slice();
                let n = keys.shape[0];
                let out = py.detach(|| {
                    let mut out = vec![false; n];
                    bf.query(slice, &mut out);
                    out
                });
                Ok(Array1::from_vec(out).into_pyarray(py))
            }

            fn insert(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<()> {
                let bf = self.get_mut()?;
                let keys = input_keys(keys, bf.num_bands())?;
                let slice = keys.slice();
                py.detach(|| bf.insert(slice)).map_err(bloom_err)
            }

            fn query_insert<'py>(&mut self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<bool>>> {
                let bf = self.get_mut()?;
                let keys = input_keys(keys, bf.num_bands())?;
                let slice = keys.slice();
                let n = keys.shape[0];
                let out = py
                    .detach(|| {
                        let mut out = vec![false; n];
                        bf.query_insert(slice, &mut out).map(|()| out)
                    })
                    .map_err(bloom_err)?;
                Ok(Array1::from_vec(out).into_pyarray(py))
            }

            fn __len__(&self) -> PyResult<usize> {
                Ok(self.get()?.num_bands())
            }

            fn __repr__(&self) -> String {
                match &self.inner {
                    None => concat!("<", $name, " closed>").into(),
                    Some(bf) => format!(concat!("<", $name, " num_bands={}>"), bf.num_bands()),
                }
            }

            $($own)*
        });
    };
    (@class $(#[$doc:meta])* $py:ident($inner:ty, $name:tt) { $($methods:tt)* }) => {
        $(#[$doc])*
        #[pyclass(name = $name, module = "lshbloom_udf._native")]
        struct $py {
            inner: Option<$inner>,
        }

        impl $py {
            fn get(&self) -> PyResult<&$inner> {
                self.inner.as_ref().ok_or_else(|| value_err(concat!($name, " is closed")))
            }
            fn get_mut(&mut self) -> PyResult<&mut $inner> {
                self.inner.as_mut().ok_or_else(|| value_err(concat!($name, " is closed")))
            }
        }

        #[pymethods]
        impl $py {
            #[getter]
            fn closed(&self) -> bool {
                self.inner.is_none()
            }

            fn sync(&self, py: Python<'_>) -> PyResult<()> {
                let f = self.get()?;
                py.detach(|| f.sync()).map_err(bloom_err)
            }

            fn close(&mut self, py: Python<'_>) -> PyResult<()> {
                if let Some(f) = self.inner.take() {
                    py.detach(|| f.sync()).map_err(bloom_err)?;
                }
                Ok(())
            }

            fn __enter__(slf: Py<Self>) -> Py<Self> {
                slf
            }

            fn __exit__(
                &mut self,
                py: Python<'_>,
                _exc_type: Option<Bound<'_, PyAny>>,
                _exc: Option<Bound<'_, PyAny>>,
                _tb: Option<Bound<'_, PyAny>>,
            ) -> PyResult<bool> {
                self.close(py)?;
                Ok(false)
            }

            $($methods)*
        }
    };
}

filter_class!(file
    /// One pybloomfiltermmap3 filter file, memory-mapped.
    PyBloomFile(BloomFile, "BloomFile") {
    #[staticmethod]
    fn create(path: PathBuf, capacity: u64, error_rate: f64, seeds: Vec<i64>) -> PyResult<Self> {
        let seeds = seeds
            .iter()
            .map(|&s| {
                u32::try_from(s).map_err(|_| value_err(format!("hash seed {s} must be in [0, 2**32)")))
            })
            .collect::<PyResult<Vec<u32>>>()?;
        let f = BloomFile::create(&path, capacity, error_rate, &seeds).map_err(bloom_err)?;
        Ok(PyBloomFile { inner: Some(f) })
    }

    #[staticmethod]
    #[pyo3(signature = (path, writable = false))]
    fn open(path: PathBuf, writable: bool) -> PyResult<Self> {
        let f = BloomFile::open(&path, writable).map_err(bloom_err)?;
        Ok(PyBloomFile { inner: Some(f) })
    }

    #[getter]
    fn num_bits(&self) -> PyResult<u64> {
        Ok(self.get()?.num_bits())
    }
    #[getter]
    fn num_hashes(&self) -> PyResult<usize> {
        Ok(self.get()?.num_hashes())
    }
    #[getter]
    fn seeds(&self) -> PyResult<Vec<u32>> {
        Ok(self.get()?.seeds().to_vec())
    }

    fn __repr__(&self) -> String {
        match &self.inner {
            None => "<BloomFile closed>".into(),
            Some(f) => format!(
                "<BloomFile {:?} capacity={} error_rate={} num_hashes={} num_bits={} elem_count={}{}>",
                f.path().display().to_string(),
                f.capacity(),
                f.error_rate(),
                f.num_hashes(),
                f.num_bits(),
                f.elem_count(),
                if f.writable() { "" } else { " read-only" }
            ),
        }
    }
});

fn input_keys<'py>(keys: &Bound<'py, PyAny>, num_bands: usize) -> PyResult<Input<'py, u64>> {
    let k = input_u64(keys, "keys")?;
    if k.shape.len() != 2 || k.shape[1] != num_bands {
        return Err(value_err(format!(
            "keys must have shape (N, {num_bands}), got {}",
            shape_str(&k.shape)
        )));
    }
    Ok(k)
}

filter_class!(bands
    /// The b band filters of an LSHBloom index, one file per band.
    PyBandFilters(BandFilters, "BandFilters") {
    #[new]
    #[pyo3(signature = (paths, writable = false))]
    fn new(paths: Vec<PathBuf>, writable: bool) -> PyResult<Self> {
        let files = paths
            .iter()
            .map(|p| BloomFile::open(p, writable))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bloom_err)?;
        let inner = BandFilters::new(files).map_err(bloom_err)?;
        Ok(PyBandFilters { inner: Some(inner) })
    }
});

// ---------------------------------------------------------------------------
// Blocked Bloom filters (one 512-bit block per key per band)

/// Blocks (of 512 bits) a blocked filter needs for `capacity` keys at `error_rate`.
#[pyfunction]
fn blocked_num_blocks(capacity: u64, error_rate: f64) -> PyResult<u64> {
    blocked::num_blocks_for(capacity, error_rate).map_err(value_err)
}

/// Exact false-positive rate of a blocked filter of `num_blocks` blocks holding `n` keys.
#[pyfunction]
fn blocked_fp_rate(n: f64, num_blocks: u64) -> PyResult<f64> {
    if num_blocks == 0 {
        return Err(value_err("num_blocks must be >= 1"));
    }
    Ok(blocked::fp_rate(n, num_blocks))
}

/// The textbook split-block estimate (every block at the mean load).
#[pyfunction]
fn blocked_fp_rate_textbook(n: f64, num_blocks: u64) -> PyResult<f64> {
    if num_blocks == 0 {
        return Err(value_err("num_blocks must be >= 1"));
    }
    Ok(blocked::fp_rate_textbook(n, num_blocks))
}

/// Measures a blocked filter's false-positive rate in memory: (false positives, num_blocks).
#[pyfunction]
#[pyo3(signature = (capacity, error_rate, queries, seed = 0))]
fn blocked_measure_fp(py: Python<'_>, capacity: u64, error_rate: f64, queries: u64, seed: u64) -> PyResult<(u64, u64)> {
    py.detach(|| blocked::measure_fp(capacity, error_rate, queries, seed))
        .map_err(value_err)
}

filter_class!(file
    /// One blocked Bloom filter file, memory-mapped.
    PyBlockedFile(BlockedFile, "BlockedFile") {
    #[staticmethod]
    fn create(path: PathBuf, capacity: u64, error_rate: f64, seed: u64) -> PyResult<Self> {
        let f = BlockedFile::create(&path, capacity, error_rate, seed).map_err(bloom_err)?;
        Ok(PyBlockedFile { inner: Some(f) })
    }

    #[staticmethod]
    #[pyo3(signature = (path, writable = false))]
    fn open(path: PathBuf, writable: bool) -> PyResult<Self> {
        let f = BlockedFile::open(&path, writable).map_err(bloom_err)?;
        Ok(PyBlockedFile { inner: Some(f) })
    }

    #[getter]
    fn num_blocks(&self) -> PyResult<u64> {
        Ok(self.get()?.num_blocks())
    }
    #[getter]
    fn num_bits(&self) -> PyResult<u64> {
        Ok(self.get()?.num_blocks() * 512)
    }
    #[getter]
    fn seed(&self) -> PyResult<u64> {
        Ok(self.get()?.seed())
    }

    fn __repr__(&self) -> String {
        match &self.inner {
            None => "<BlockedFile closed>".into(),
            Some(f) => format!(
                "<BlockedFile {:?} capacity={} error_rate={} num_blocks={} elem_count={}{}>",
                f.path().display().to_string(),
                f.capacity(),
                f.error_rate(),
                f.num_blocks(),
                f.elem_count(),
                if f.writable() { "" } else { " read-only" }
            ),
        }
    }
});

filter_class!(bands
    /// The b blocked band filters of an LSHBloom index (`--bloom blocked`).
    PyBlockedBands(BlockedBands, "BlockedBands") {
    #[new]
    #[pyo3(signature = (paths, writable = false))]
    fn new(paths: Vec<PathBuf>, writable: bool) -> PyResult<Self> {
        let files = paths
            .iter()
            .map(|p| BlockedFile::open(p, writable))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bloom_err)?;
        let inner = BlockedBands::new(files).map_err(bloom_err)?;
        Ok(PyBlockedBands { inner: Some(inner) })
    }
});


#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(py_shingles, m)?)?;
    m.add_function(wrap_pyfunction!(py_minhash, m)?)?;
    m.add_function(wrap_pyfunction!(minhash_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(band_keys, m)?)?;
    m.add_function(wrap_pyfunction!(minhash_band_keys, m)?)?;
    m.add_function(wrap_pyfunction!(minhash_band_keys_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(bloom_geometry, m)?)?;
    m.add_function(wrap_pyfunction!(simd_backend, m)?)?;
    m.add_function(wrap_pyfunction!(reset_word_table, m)?)?;
    m.add_class::<PyBloomFile>()?;
    m.add_class::<PyBandFilters>()?;
    m.add_function(wrap_pyfunction!(blocked_num_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_fp_rate, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_fp_rate_textbook, m)?)?;
    m.add_function(wrap_pyfunction!(blocked_measure_fp, m)?)?;
    m.add_class::<PyBlockedFile>()?;
    m.add_class::<PyBlockedBands>()?;
    m.add("BLOCKED_FORMAT_VERSION", blocked::VERSION)?;
    m.add("NORM_NFKC", shingles::NORM_NFKC)?;
    m.add("NORM_LOWER", shingles::NORM_LOWER)?;
    m.add("NORM_PUNCT", shingles::NORM_PUNCT)?;
    m.add("PUNCT_UNICODE_VERSION", punct_table::UNICODE_VERSION)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
