//! The one error type of the filter files (every format: pybloomfiltermmap3's,
//! blocked, cuckoo), and of their checksums. It stays free of
//! pyo3 so the plain Rust modules can be tested alone; `py::errors` maps it to
//! Python exceptions.

use std::io;
use std::path::{Path, PathBuf};

/// Errors of the filter files; the bindings map them to Python exceptions.
#[derive(Debug)]
pub enum FilterError {
    /// OS error on a file (becomes `OSError` with errno and path).
    Io { path: PathBuf, source: io::Error },
    /// The file is not a valid filter (becomes `ValueError` naming the file).
    Format { path: PathBuf, msg: String },
    /// A write on a filter opened read-only (becomes `PermissionError`).
    ReadOnly { path: PathBuf },
    /// Bad argument (becomes `ValueError`).
    Invalid(String),
}

impl std::fmt::Display for FilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FilterError::Io { path, source } => write!(f, "{}: {}", path.display(), source),
            FilterError::Format { path, msg } => write!(f, "{}: {}", path.display(), msg),
            FilterError::ReadOnly { path } => write!(f, "{}: opened read-only", path.display()),
            FilterError::Invalid(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for FilterError {}

/// For `map_err`: an OS error on `path`.
pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> FilterError + '_ {
    move |source| FilterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `path` is not a valid filter file, because of `msg`.
pub(crate) fn format_err(path: &Path, msg: impl Into<String>) -> FilterError {
    FilterError::Format {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}
