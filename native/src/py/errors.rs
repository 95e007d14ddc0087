//! Which Python exception each native error becomes.

use pyo3::exceptions::{PyOSError, PyPermissionError, PyValueError};
use pyo3::PyErr;

use crate::filters::error::FilterError;

pub(crate) fn value_err(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

impl From<FilterError> for PyErr {
    fn from(e: FilterError) -> PyErr {
        match e {
            // (errno, strerror, filename): Python then picks the OSError
            // subclass (FileNotFoundError, ...) and formats it as its own.
            FilterError::Io { path, source } => match source.raw_os_error() {
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
            e @ FilterError::Format { .. } => value_err(e.to_string()),
            e @ FilterError::ReadOnly { .. } => PyPermissionError::new_err(e.to_string()),
            FilterError::Invalid(msg) => value_err(msg),
        }
    }
}

/// A shape as numpy prints it: `(3,)`, `(2, 4)`.
pub(crate) fn shape_str(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
        ),
    }
}
