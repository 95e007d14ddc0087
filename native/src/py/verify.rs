//! Verification's native parts: exact shingle-set overlaps of text pairs and
//! the driver's round-1 and round-2 candidate matching (the GIL released while they work).

use numpy::ndarray::{Array1, Array2};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3, PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use super::errors::value_err;
use super::input::{detach_with_texts, input_exact, input_u64, Input};
use super::settings::{positive, shingle_settings};
use crate::verify::overlap;
use crate::verify::pair_match;
use crate::verify::pair_overlap;
use crate::verify::record_lookup;
use crate::verify::shared_pairs;
use crate::verify::shingle_hashes;

/// Overlaps as an (N, 3) int64 array: `(|S_l ∩ S_r|, |S_l|, |S_r|)` per row.
fn overlap_array<'py>(py: Python<'py>, out: &[overlap::Overlap]) -> Bound<'py, PyArray2<i64>> {
    let flat: Vec<i64> = out
        .iter()
        .flat_map(|o| [o.common as i64, o.left as i64, o.right as i64])
        .collect();
    Array2::from_shape_vec((out.len(), 3), flat)
        .expect("shape")
        .into_pyarray(py)
}

/// `(|S_l ∩ S_r|, |S_l|, |S_r|)` of each aligned pair of texts, shape (N, 3), int64, on `threads` threads.
#[pyfunction]
#[pyo3(signature = (lefts, rights, ngram, normalize = 0, unit = "words", threads = 1))]
fn shingle_overlaps<'py>(
    py: Python<'py>,
    lefts: &Bound<'py, PyAny>,
    rights: &Bound<'py, PyAny>,
    ngram: i64,
    normalize: i64,
    unit: &str,
    threads: i64,
) -> PyResult<Bound<'py, PyArray2<i64>>> {
    let settings = shingle_settings(unit, ngram, normalize)?;
    let threads = positive("threads", threads)?;
    // The left texts are copied out of Python first: the right ones are borrowed while both are compared.
    let lefts: Vec<Option<String>> = detach_with_texts(py, lefts, |rows| {
        rows.iter().map(|r| r.map(str::to_owned)).collect()
    })?;
    let out = detach_with_texts(py, rights, |rights| {
        if rights.len() != lefts.len() {
            return Err(format!(
                "{} left texts but {} right texts",
                lefts.len(),
                rights.len()
            ));
        }
        let ls: Vec<Option<&str>> = lefts.iter().map(|l| l.as_deref()).collect();
        Ok(overlap::overlaps(settings, &ls, rights, threads))
    })?
    .map_err(value_err)?;
    Ok(overlap_array(py, &out))
}

/// `(|S_l ∩ S_r|, |S_l|, |S_r|)` of each pair `(texts[lefts[i]], texts[rights[i]])`, shape (N, 3), int64, on
/// `threads` threads: a left text's set built once for its consecutive pairs, the right texts in three pairs or
/// more shingled once within `cache_bytes`.
#[pyfunction]
#[pyo3(signature = (texts, lefts, rights, ngram, normalize = 0, unit = "words", threads = 1, cache_bytes = 0))]
#[allow(clippy::too_many_arguments)]
fn indexed_overlaps<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    lefts: PyReadonlyArray1<'py, u32>,
    rights: PyReadonlyArray1<'py, u32>,
    ngram: i64,
    normalize: i64,
    unit: &str,
    threads: i64,
    cache_bytes: u64,
) -> PyResult<Bound<'py, PyArray2<i64>>> {
    let settings = shingle_settings(unit, ngram, normalize)?;
    let threads = positive("threads", threads)?;
    let cache_bytes = usize::try_from(cache_bytes).unwrap_or(usize::MAX);
    let (ls, rs) = (lefts.as_slice()?, rights.as_slice()?);
    if ls.len() != rs.len() {
        return Err(value_err(format!(
            "{} lefts but {} rights",
            ls.len(),
            rs.len()
        )));
    }
    let out = detach_with_texts(py, texts, |table| {
        if let Some(bad) = ls.iter().chain(rs).find(|&&i| i as usize >= table.len()) {
            return Err(format!(
                "pair index {bad} is past the {} texts",
                table.len()
            ));
        }
        Ok(pair_overlap::indexed_overlaps(
            settings,
            table,
            (ls, rs),
            threads,
            cache_bytes,
        ))
    })?
    .map_err(value_err)?;
    Ok(overlap_array(py, &out))
}

/// `(hashes, offsets)` of [`shingle_hash_sets`].
type HashSets<'py> = (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<i64>>);

/// Each text's distinct shingle hashes (xxh3-64), sorted: `(hashes, offsets)`, uint64 and int64, text `i`'s at
/// `hashes[offsets[i]:offsets[i + 1]]`, on `threads` threads.
#[pyfunction]
#[pyo3(signature = (texts, ngram, normalize = 0, unit = "words", threads = 1))]
fn shingle_hash_sets<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    ngram: i64,
    normalize: i64,
    unit: &str,
    threads: i64,
) -> PyResult<HashSets<'py>> {
    let settings = shingle_settings(unit, ngram, normalize)?;
    let threads = positive("threads", threads)?;
    let (hashes, offsets) = detach_with_texts(py, texts, |rows| {
        shingle_hashes::hash_sets(settings, rows, threads)
    })?;
    let offsets: Vec<i64> = offsets.into_iter().map(|o| o as i64).collect();
    Ok((
        Array1::from_vec(hashes).into_pyarray(py),
        Array1::from_vec(offsets).into_pyarray(py),
    ))
}

/// `keys`, an (n, b) uint64 matrix of at most 2^32 - 1 documents (b >= 1), and its b.
fn key_matrix<'py>(keys: &Bound<'py, PyAny>) -> PyResult<(Input<'py, u64>, usize)> {
    let k = input_u64(keys, "keys")?;
    if k.shape.len() != 2 || k.shape[1] == 0 {
        return Err(value_err("keys must be an (n, b) matrix with b >= 1"));
    }
    if u32::try_from(k.shape[0]).is_err() {
        return Err(value_err("at most 2**32 - 1 documents"));
    }
    let b = k.shape[1];
    Ok((k, b))
}

/// An (m, k) uint8 matrix of b-bit sketches, with `b · r <= k` for its band keys.
fn sketch_matrix<'py>(sketches: &Bound<'py, PyAny>, b: usize, r: i64) -> PyResult<(Input<'py, u8>, usize, usize)> {
    let s = input_exact::<u8>(sketches, "sketches", "uint8")?;
    let r = positive("r", r)?;
    if s.shape.len() != 2 || s.shape[1] == 0 {
        return Err(value_err("sketches must be an (m, k) uint8 matrix with k >= 1"));
    }
    if u32::try_from(s.shape[0]).is_err() {
        return Err(value_err("at most 2**32 - 1 documents per call"));
    }
    let k = s.shape[1];
    if b.checked_mul(r).is_none_or(|br| br > k) {
        return Err(value_err(format!("b · r = {b} · {r} is more than the sketch's {k} bytes")));
    }
    Ok((s, k, r))
}

/// The (m, b) uint64 band keys of `sketches` ((m, k) uint8 b-bit MinHash sketches): band `i`'s key from bytes
/// `[i·r, (i+1)·r)` (packed little-endian up to 8 bytes, else folded): the keys [`PairIndex`] indexes and matches
/// across runs.
#[pyfunction]
fn sketch_band_keys<'py>(
    py: Python<'py>,
    sketches: &Bound<'py, PyAny>,
    b: i64,
    r: i64,
) -> PyResult<Bound<'py, PyArray2<u64>>> {
    let b = positive("b", b)?;
    let (s, k, r) = sketch_matrix(sketches, b, r)?;
    let m = s.shape[0];
    let slice = s.slice();
    let keys = py.detach(|| pair_match::sketch_band_keys(slice, k, b, r));
    Ok(Array2::from_shape_vec((m, b), keys).expect("shape").into_pyarray(py))
}

/// `(j, f)` index arrays of [`PairIndex::matches`].
type Matches<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u32>>);

/// The (band, key) pairs of a few documents, to find the documents of many that share one.
#[pyclass(frozen, module = "lshbloom_udf._native")]
pub(crate) struct PairIndex(pair_match::PairIndex);

#[pymethods]
impl PairIndex {
    /// Indexes `keys`, an (F, b) uint64 matrix (b >= 1).
    #[new]
    fn new(py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (k, b) = key_matrix(keys)?;
        let slice = k.slice();
        Ok(PairIndex(py.detach(|| pair_match::PairIndex::new(slice, b))))
    }

    /// Bands per document.
    #[getter]
    fn b(&self) -> usize {
        self.0.bands()
    }

    /// `(j, f)` index arrays (uint32): document `j` of `keys` ((M, b) uint64) shares a (band, key) with indexed
    /// document `f`; one entry per shared band. `only` (M bools): only those documents of `keys`.
    #[pyo3(signature = (keys, only = None))]
    fn matches<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        only: Option<PyReadonlyArray1<'py, bool>>,
    ) -> PyResult<Matches<'py>> {
        let k = input_u64(keys, "keys")?;
        if k.shape.len() != 2 || k.shape[1] != self.0.bands() {
            return Err(value_err(format!(
                "keys must have shape (M, {})",
                self.0.bands()
            )));
        }
        if u32::try_from(k.shape[0]).is_err() {
            return Err(value_err("at most 2**32 - 1 documents per call"));
        }
        let only_slice: &[bool] = match &only {
            Some(o) => o.as_slice()?,
            None => &[],
        };
        if only.is_some() && only_slice.len() != k.shape[0] {
            return Err(value_err(format!("only must have {} flags", k.shape[0])));
        }
        let slice = k.slice();
        let (js, fs): (Vec<u32>, Vec<u32>) = py
            .detach(|| self.0.matches(slice, only_slice))
            .into_iter()
            .unzip();
        Ok((
            Array1::from_vec(js).into_pyarray(py),
            Array1::from_vec(fs).into_pyarray(py),
        ))
    }
}

/// `(later, earlier, bands, smallest_bucket)` arrays (uint32), sorted by (later, earlier) and distinct: the
/// documents of `keys` ((n, b) uint64, in row order) where `earlier` is one of the first `anchors` documents of a
/// bucket (band, key) that `later` is in, with the number of such bands and the fewest documents in one of those
/// buckets; on up to `threads` threads.
#[pyfunction]
#[pyo3(signature = (keys, anchors, threads = 1))]
fn shared_band_pairs<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyAny>,
    anchors: i64,
    threads: i64,
) -> PyResult<SharedPairs<'py>> {
    let threads = positive("threads", threads)?;
    let anchors = positive("anchors", anchors)?;
    let (k, b) = key_matrix(keys)?;
    let slice = k.slice();
    let pairs = py.detach(|| shared_pairs::shared_pairs(slice, b, anchors, threads));
    let column = |f: fn(&shared_pairs::SharedPair) -> u32| {
        Array1::from_iter(pairs.iter().map(f)).into_pyarray(py)
    };
    Ok((
        column(|p| p.later),
        column(|p| p.earlier),
        column(|p| p.bands),
        column(|p| p.smallest_bucket),
    ))
}

type SharedPairs<'py> = (
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
);

/// The lookup's arrays of one run (`lshbloom_udf/index/lookup.py`).
#[derive(FromPyObject)]
struct LookupArrays<'py>(
    PyReadonlyArray2<'py, u32>,
    PyReadonlyArray2<'py, u8>,
    PyReadonlyArray2<'py, u16>,
    PyReadonlyArray2<'py, u8>,
);

/// `(query, position)` (uint32) of the records of one run sharing a band with each query, once per band shared:
/// `arrays` `(fence, fragment, group, sketch)`, `keys` the queries' `(q, b)` 32-bit keys, `values` their bands'
/// `(q, b, r)` 4-bit values; at most `cap` records per query and band, the earliest.
#[pyfunction]
#[pyo3(signature = (arrays, keys, values, group_rows, fence_every, cap))]
fn lookup_records<'py>(
    py: Python<'py>,
    arrays: LookupArrays<'py>,
    keys: PyReadonlyArray2<'py, u32>,
    values: PyReadonlyArray3<'py, u8>,
    group_rows: i64,
    fence_every: i64,
    cap: i64,
) -> PyResult<Matches<'py>> {
    let LookupArrays(fence, fragment, group, sketch) = arrays;
    let (b, n) = (fragment.shape()[0], fragment.shape()[1]);
    let r = values.shape()[2];
    let group_rows = positive("group_rows", group_rows)?;
    let fence_every = positive("fence_every", fence_every)?;
    let cap = positive("cap", cap)?;
    let fences = n.div_ceil(fence_every);
    let shapes_agree = group.shape() == [b, n]
        && fence.shape() == [b, fences]
        && sketch.shape()[0] == n
        && (n == 0 || sketch.shape()[1] * 2 >= b * r)
        && keys.shape()[1] == b
        && values.shape()[..2] == [keys.shape()[0], b]
        && (n == 0 || (n - 1) / group_rows < 1 << 16);
    if !shapes_agree {
        return Err(value_err(
            "lookup arrays of shapes that do not agree (records of other parameters, or damaged)",
        ));
    }
    let run = record_lookup::RunLookup {
        fence: fence.as_slice()?,
        fragment: fragment.as_slice()?,
        group: group.as_slice()?,
        sketch: sketch.as_slice()?,
        n,
        b,
        r,
        group_rows,
        fence_every,
    };
    let queries = record_lookup::Queries {
        keys: keys.as_slice()?,
        values: values.as_slice()?,
        cap,
    };
    let (owner, position) = py.detach(|| run.matches(&queries));
    Ok((
        Array1::from(owner).into_pyarray(py),
        Array1::from(position).into_pyarray(py),
    ))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(shingle_overlaps, m)?)?;
    m.add_function(wrap_pyfunction!(indexed_overlaps, m)?)?;
    m.add_function(wrap_pyfunction!(shingle_hash_sets, m)?)?;
    m.add_class::<PairIndex>()?;
    m.add_function(wrap_pyfunction!(sketch_band_keys, m)?)?;
    m.add_function(wrap_pyfunction!(shared_band_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(lookup_records, m)?)?;
    Ok(())
}
