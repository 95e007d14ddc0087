//! The filter classes: `BloomFile`, `BlockedFile` and `CuckooFile` (one
//! filter file), `BandFilters`, `BlockedBands` and `CuckooBands` (one file per
//! band of an index).
//!
//! Their methods are written once, generic over the file format, on
//! [`Handle`]. A pyo3 class cannot be generic, so `filter_class!` only
//! declares each class and forwards its methods there.

use std::path::PathBuf;

use numpy::ndarray::{Array1, ArrayD, IxDyn};
use numpy::{IntoPyArray, PyArray1, PyArrayDyn};
use pyo3::prelude::*;

use super::errors::value_err;
use super::input::{input_keys, input_u64};
use crate::filters::band_set::{BandFilter, BandSet, FilterFile};
use crate::filters::blocked::BlockedFile;
use crate::filters::pybloom::BloomFile;
use crate::filters::cuckoo::CuckooFile;
use crate::filters::error::FilterError;

/// What a filter class holds.
pub(crate) trait Held: Send + Sync {
    /// The class's Python name.
    const NAME: &'static str;
    fn flush(&self) -> Result<(), FilterError>;
}

/// A class's filter object, or nothing once `close()` has run: every use
/// then raises `ValueError("<class> is closed")`.
pub(crate) struct Handle<T>(Option<T>);

impl<T: Held> Handle<T> {
    fn get(&self) -> PyResult<&T> {
        self.0.as_ref().ok_or_else(|| value_err(format!("{} is closed", T::NAME)))
    }

    fn get_mut(&mut self) -> PyResult<&mut T> {
        self.0.as_mut().ok_or_else(|| value_err(format!("{} is closed", T::NAME)))
    }

    fn closed(&self) -> bool {
        self.0.is_none()
    }

    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let f = self.get()?;
        Ok(py.detach(|| f.flush())?)
    }

    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        if let Some(f) = self.0.take() {
            py.detach(|| f.flush())?;
        }
        Ok(())
    }

    /// `<Class details>`, or `<Class closed>`.
    fn repr(&self, details: impl FnOnce(&T) -> String) -> String {
        match &self.0 {
            None => format!("<{} closed>", T::NAME),
            Some(f) => format!("<{} {}>", T::NAME, details(f)),
        }
    }
}

/// Runs `f` without the GIL on the keys of `keys` (an array of any shape) and
/// a result of the same shape.
fn per_key<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyAny>,
    f: impl FnOnce(&[u64], &mut [bool]) -> Result<(), FilterError> + Send,
) -> PyResult<Bound<'py, PyArrayDyn<bool>>> {
    let keys = input_u64(keys, "keys")?;
    let slice = keys.slice();
    let out = py.detach(|| {
        let mut out = vec![false; slice.len()];
        f(slice, &mut out).map(|()| out)
    })?;
    Ok(ArrayD::from_shape_vec(IxDyn(&keys.shape), out)
        .expect("shape")
        .into_pyarray(py))
}

/// Runs `f` without the GIL on the (N, `num_bands`) band keys `keys` and a
/// result per row.
fn per_row<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyAny>,
    num_bands: usize,
    f: impl FnOnce(&[u64], &mut [bool]) -> Result<(), FilterError> + Send,
) -> PyResult<Bound<'py, PyArray1<bool>>> {
    let keys = input_keys(keys, num_bands)?;
    let (slice, n) = (keys.slice(), keys.shape[0]);
    let out = py.detach(|| {
        let mut out = vec![false; n];
        f(slice, &mut out).map(|()| out)
    })?;
    Ok(Array1::from_vec(out).into_pyarray(py))
}

impl<F: FilterFile + Held> Handle<F> {
    /// `<Class "path" capacity=... error_rate=... {geometry} elem_count=...>`,
    /// marked ` read-only` when it is.
    fn file_repr(&self, geometry: impl FnOnce(&F) -> String) -> String {
        self.repr(|f| {
            format!(
                "{:?} capacity={} error_rate={} {} elem_count={}{}",
                f.path().display().to_string(),
                f.capacity(),
                f.error_rate(),
                geometry(f),
                f.elem_count(),
                if f.writable() { "" } else { " read-only" }
            )
        })
    }

    fn open(path: PathBuf, writable: bool) -> PyResult<Self> {
        Ok(Handle(Some(F::open(&path, writable)?)))
    }

    fn contains<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArrayDyn<bool>>> {
        let f = self.get()?;
        per_key(py, keys, |keys, out| {
            f.contains_many(keys, out);
            Ok(())
        })
    }

    fn add<'py>(&mut self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArrayDyn<bool>>> {
        let f = self.get_mut()?;
        per_key(py, keys, |keys, out| f.add_many(keys, out))
    }
}

impl<F: BandFilter> Handle<BandSet<F>>
where
    BandSet<F>: Held,
{
    fn open_bands(paths: Vec<PathBuf>, writable: bool) -> PyResult<Self> {
        Ok(Handle(Some(BandSet::open(&paths, writable)?)))
    }

    fn paths(&self) -> PyResult<Vec<String>> {
        Ok(self.get()?.filters().iter().map(|f| f.path().display().to_string()).collect())
    }

    fn elem_counts(&self) -> PyResult<Vec<u64>> {
        Ok(self.get()?.filters().iter().map(|f| f.elem_count()).collect())
    }

    fn writable(&self) -> PyResult<bool> {
        Ok(self.get()?.filters().iter().all(|f| f.writable()))
    }

    fn query<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let bf = self.get()?;
        per_row(py, keys, bf.num_bands(), |keys, out| {
            bf.query(keys, out);
            Ok(())
        })
    }

    fn insert(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<()> {
        let bf = self.get_mut()?;
        let keys = input_keys(keys, bf.num_bands())?;
        let slice = keys.slice();
        Ok(py.detach(|| bf.insert(slice))?)
    }

    fn query_insert<'py>(&mut self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let bf = self.get_mut()?;
        per_row(py, keys, bf.num_bands(), |keys, out| bf.query_insert(keys, out))
    }

    fn test_insert<'py>(&mut self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let bf = self.get_mut()?;
        per_row(py, keys, bf.num_bands(), |keys, out| bf.test_insert(keys, out))
    }
}

/// Declares the class `$py` over `Handle<$inner>`: the methods every filter
/// class has (`closed`, `sync`, `close`, the context manager), those of its
/// kind — `file` (one filter file) or `bands` (one per band) — and, for a
/// file, its format's own. One `#[pymethods]` block per class, so the shared
/// methods are spliced in here rather than in a second impl.
macro_rules! filter_class {
    (file $(#[$doc:meta])* $py:ident($inner:ty, $name:tt) { $($own:tt)* }) => {
        filter_class!(@class $(#[$doc])* $py($inner, $name) {
            #[staticmethod]
            #[pyo3(signature = (path, writable = false))]
            fn open(path: PathBuf, writable: bool) -> PyResult<Self> { Handle::open(path, writable).map(Self) }
            #[getter]
            fn capacity(&self) -> PyResult<u64> { Ok(self.0.get()?.capacity()) }
            #[getter]
            fn error_rate(&self) -> PyResult<f64> { Ok(self.0.get()?.error_rate()) }
            #[getter]
            fn elem_count(&self) -> PyResult<u64> { Ok(self.0.get()?.elem_count()) }
            #[getter]
            fn path(&self) -> PyResult<String> { Ok(self.0.get()?.path().display().to_string()) }
            #[getter]
            fn file_size(&self) -> PyResult<u64> { Ok(self.0.get()?.file_size()) }
            #[getter]
            fn writable(&self) -> PyResult<bool> { Ok(self.0.get()?.writable()) }
            fn contains<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArrayDyn<bool>>> {
                self.0.contains(py, keys)
            }
            fn add<'py>(&mut self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArrayDyn<bool>>> {
                self.0.add(py, keys)
            }
            fn __len__(&self) -> PyResult<usize> { Ok(self.0.get()?.elem_count() as usize) }
            $($own)*
        });
    };
    (bands $(#[$doc:meta])* $py:ident($inner:ty, $name:tt)) => {
        filter_class!(@class $(#[$doc])* $py(BandSet<$inner>, $name) {
            #[new]
            #[pyo3(signature = (paths, writable = false))]
            fn new(paths: Vec<PathBuf>, writable: bool) -> PyResult<Self> { Handle::open_bands(paths, writable).map(Self) }
            #[getter]
            fn num_bands(&self) -> PyResult<usize> { Ok(self.0.get()?.num_bands()) }
            #[getter]
            fn paths(&self) -> PyResult<Vec<String>> { self.0.paths() }
            #[getter]
            fn elem_counts(&self) -> PyResult<Vec<u64>> { self.0.elem_counts() }
            #[getter]
            fn writable(&self) -> PyResult<bool> { self.0.writable() }
            fn query<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<bool>>> {
                self.0.query(py, keys)
            }
            fn insert(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<()> { self.0.insert(py, keys) }
            fn query_insert<'py>(&mut self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<bool>>> {
                self.0.query_insert(py, keys)
            }
            fn test_insert<'py>(&mut self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<bool>>> {
                self.0.test_insert(py, keys)
            }
            fn __len__(&self) -> PyResult<usize> { Ok(self.0.get()?.num_bands()) }
            fn __repr__(&self) -> String { self.0.repr(|bf| format!("num_bands={}", bf.num_bands())) }
        });
    };
    (@class $(#[$doc:meta])* $py:ident($inner:ty, $name:tt) { $($methods:tt)* }) => {
        $(#[$doc])*
        #[pyclass(name = $name, module = "lshbloom_udf._native")]
        pub(crate) struct $py(Handle<$inner>);

        impl Held for $inner {
            const NAME: &'static str = $name;
            fn flush(&self) -> Result<(), FilterError> { self.sync() }
        }

        #[pymethods]
        impl $py {
            #[getter]
            fn closed(&self) -> bool { self.0.closed() }
            fn sync(&self, py: Python<'_>) -> PyResult<()> { self.0.sync(py) }
            fn close(&mut self, py: Python<'_>) -> PyResult<()> { self.0.close(py) }
            fn __enter__(slf: Py<Self>) -> Py<Self> { slf }
            fn __exit__(
                &mut self,
                py: Python<'_>,
                _exc_type: Option<Bound<'_, PyAny>>,
                _exc: Option<Bound<'_, PyAny>>,
                _tb: Option<Bound<'_, PyAny>>,
            ) -> PyResult<bool> {
                self.0.close(py)?;
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
            .map(|&s| u32::try_from(s).map_err(|_| value_err(format!("hash seed {s} must be in [0, 2**32)"))))
            .collect::<PyResult<Vec<u32>>>()?;
        let f = BloomFile::create(&path, capacity, error_rate, &seeds)?;
        Ok(Self(Handle(Some(f))))
    }
    #[getter]
    fn num_bits(&self) -> PyResult<u64> { Ok(self.0.get()?.num_bits()) }
    #[getter]
    fn num_hashes(&self) -> PyResult<usize> { Ok(self.0.get()?.num_hashes()) }
    #[getter]
    fn seeds(&self) -> PyResult<Vec<u32>> { Ok(self.0.get()?.seeds().to_vec()) }
    fn __repr__(&self) -> String {
        self.0.file_repr(|f| format!("num_hashes={} num_bits={}", f.num_hashes(), f.num_bits()))
    }
});

filter_class!(file
    /// One blocked Bloom filter file, memory-mapped.
    PyBlockedFile(BlockedFile, "BlockedFile") {
    #[staticmethod]
    fn create(path: PathBuf, capacity: u64, error_rate: f64, seed: u64) -> PyResult<Self> {
        let f = BlockedFile::create(&path, capacity, error_rate, seed)?;
        Ok(Self(Handle(Some(f))))
    }
    #[getter]
    fn num_blocks(&self) -> PyResult<u64> { Ok(self.0.get()?.num_blocks()) }
    #[getter]
    fn num_bits(&self) -> PyResult<u64> { Ok(self.0.get()?.num_blocks() * 512) }
    #[getter]
    fn seed(&self) -> PyResult<u64> { Ok(self.0.get()?.seed()) }
    fn __repr__(&self) -> String {
        self.0.file_repr(|f| format!("num_blocks={}", f.num_blocks()))
    }
});

filter_class!(file
    /// One cuckoo filter file (one 64-byte line per bucket), memory-mapped.
    PyCuckooFile(CuckooFile, "CuckooFile") {
    #[staticmethod]
    fn create(path: PathBuf, capacity: u64, error_rate: f64, seed: u64) -> PyResult<Self> {
        let f = CuckooFile::create(&path, capacity, error_rate, seed)?;
        Ok(Self(Handle(Some(f))))
    }
    #[getter]
    fn num_buckets(&self) -> PyResult<u64> { Ok(self.0.get()?.num_buckets()) }
    #[getter]
    fn fp_bits(&self) -> PyResult<u32> { Ok(self.0.get()?.fp_bits()) }
    #[getter]
    fn slots(&self) -> PyResult<u32> { Ok(self.0.get()?.slots()) }
    #[getter]
    fn num_bits(&self) -> PyResult<u64> { Ok(self.0.get()?.num_buckets() * 512) }
    #[getter]
    fn seed(&self) -> PyResult<u64> { Ok(self.0.get()?.seed()) }
    fn __repr__(&self) -> String {
        self.0.file_repr(|f| format!("num_buckets={} fp_bits={}", f.num_buckets(), f.fp_bits()))
    }
});

filter_class!(bands
    /// The b band filters of an LSHBloom index, one file per band.
    PyBandFilters(BloomFile, "BandFilters"));

filter_class!(bands
    /// The b blocked band filters of an LSHBloom index (`--bloom blocked`).
    PyBlockedBands(BlockedFile, "BlockedBands"));

filter_class!(bands
    /// The b cuckoo band filters of an LSHBloom index (`--bloom cuckoo`).
    PyCuckooBands(CuckooFile, "CuckooBands"));

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCuckooFile>()?;
    m.add_class::<PyCuckooBands>()?;
    m.add_class::<PyBloomFile>()?;
    m.add_class::<PyBandFilters>()?;
    m.add_class::<PyBlockedFile>()?;
    m.add_class::<PyBlockedBands>()?;
    Ok(())
}
