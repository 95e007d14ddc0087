//! numpy and Arrow inputs of the bindings: arrays are used in place when they
//! have the expected dtype and are C-contiguous, otherwise copied (and
//! converted, for the few other integer dtypes accepted, with a range check).

use std::borrow::Cow;
use std::fmt::Display;

use numpy::{Element, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use super::errors::{shape_str, value_err};
use crate::input::arrow;

enum Data<'py, T: Element> {
    Borrowed(PyReadonlyArrayDyn<'py, T>),
    Owned(Vec<T>),
}

/// A numpy array as a row-major slice and its shape.
pub(crate) struct Input<'py, T: Element> {
    data: Data<'py, T>,
    pub(crate) shape: Vec<usize>,
}

impl<T: Element> Input<'_, T> {
    pub(crate) fn slice(&self) -> &[T] {
        match &self.data {
            Data::Borrowed(a) => a.as_slice().expect("checked C-contiguous"),
            Data::Owned(v) => v,
        }
    }

    pub(crate) fn require_ndim(&self, name: &str, ndim: usize, what: &str) -> PyResult<()> {
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
pub(crate) fn input_u64<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Input<'py, u64>> {
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
pub(crate) fn input_u32<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Input<'py, u32>> {
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

pub(crate) fn input_exact<'py, T: Element + Copy>(obj: &Bound<'py, PyAny>, name: &str, dtype: &str) -> PyResult<Input<'py, T>> {
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
    fn byte_rows(&self) -> Result<Vec<Option<&'a [u8]>>, String> {
        match self.offsets {
            OffsetSlice::I32(o) => arrow::byte_rows(o, self.data, self.valid),
            OffsetSlice::I64(o) => arrow::byte_rows(o, self.data, self.valid),
        }
    }

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

/// Runs `f` without the GIL on the rows of `texts` (str or None each) as
/// Rust strings, borrowed from the Python strings where they are UTF-8 already.
pub(crate) fn detach_with_texts<R: Send>(
    py: Python<'_>,
    texts: &Bound<'_, PyAny>,
    f: impl FnOnce(&[Option<&str>]) -> R + Send,
) -> PyResult<R> {
    let objs = collect_texts(texts)?;
    let cows = text_cows(&objs)?;
    let rows: Vec<Option<&str>> = cows.iter().map(|c| c.as_deref()).collect();
    Ok(py.detach(|| f(&rows)))
}

/// Runs `f` without the GIL on the rows of an Arrow string column given as
/// its buffers, which are validated first (also without the GIL).
fn detach_with_arrow_rows<R: Send>(
    py: Python<'_>,
    (offsets, data, valid): (&Bound<'_, PyAny>, &Bound<'_, PyAny>, Option<&Bound<'_, PyAny>>),
    f: impl FnOnce(&[Option<&str>]) -> R + Send,
) -> PyResult<R> {
    let input = ArrowInput::new(offsets, data, valid)?;
    let input = input.slices();
    py.detach(|| input.rows().map(|rows| f(&rows))).map_err(value_err)
}

/// An Arrow string column given as its buffers (offsets, data, validity), for
/// the functions that take texts: they read it in place, without one Python
/// object per document.
#[pyclass(frozen, module = "lshbloom_udf._native")]
pub(crate) struct ArrowTexts {
    offsets: Py<PyAny>,
    data: Py<PyAny>,
    valid: Option<Py<PyAny>>,
}

#[pymethods]
impl ArrowTexts {
    #[new]
    #[pyo3(signature = (offsets, data, valid = None))]
    fn new(offsets: Py<PyAny>, data: Py<PyAny>, valid: Option<Py<PyAny>>) -> Self {
        ArrowTexts { offsets, data, valid }
    }
}

/// Runs `f` without the GIL on `texts`: an [`ArrowTexts`], or a sequence of
/// `str`/`None`.
pub(crate) fn detach_with_rows<R: Send>(
    py: Python<'_>,
    texts: &Bound<'_, PyAny>,
    f: impl FnOnce(&[Option<&str>]) -> R + Send,
) -> PyResult<R> {
    match texts.cast::<ArrowTexts>() {
        Ok(arrow) => {
            let a = arrow.get();
            let valid = a.valid.as_ref().map(|v| v.bind(py));
            detach_with_arrow_rows(py, (a.offsets.bind(py), a.data.bind(py), valid), f)
        }
        Err(_) => detach_with_texts(py, texts, f),
    }
}

/// Runs `f` without the GIL on the rows of `texts` (an [`ArrowTexts`]) as
/// bytes, valid UTF-8 or not.
pub(crate) fn detach_with_byte_rows<R: Send>(
    py: Python<'_>,
    texts: &Bound<'_, ArrowTexts>,
    f: impl FnOnce(&[Option<&[u8]>]) -> R + Send,
) -> PyResult<R> {
    let a = texts.get();
    let valid = a.valid.as_ref().map(|v| v.bind(py));
    let input = ArrowInput::new(a.offsets.bind(py), a.data.bind(py), valid)?;
    let input = input.slices();
    py.detach(|| input.byte_rows().map(|rows| f(&rows))).map_err(value_err)
}

/// An (N, `num_bands`) matrix of band keys.
pub(crate) fn input_keys<'py>(keys: &Bound<'py, PyAny>, num_bands: usize) -> PyResult<Input<'py, u64>> {
    let k = input_u64(keys, "keys")?;
    if k.shape.len() != 2 || k.shape[1] != num_bands {
        return Err(value_err(format!(
            "keys must have shape (N, {num_bands}), got {}",
            shape_str(&k.shape)
        )));
    }
    Ok(k)
}
