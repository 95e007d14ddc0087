//! The settings the signature functions take: built and validated once by
//! Python, then passed whole instead of a dozen loose arguments.

use pyo3::prelude::*;

use super::errors::value_err;
use super::input::input_u64;
use crate::minhash::band_keys::{BandKey, Banding};
use crate::minhash::{MinHasher, Permutations, Scheme};
use crate::minhash::parallel;
use crate::text::shingles::{ShingleSettings, Unit, NORM_VALID};

pub(crate) fn positive(name: &str, v: i64) -> PyResult<usize> {
    if v < 1 {
        return Err(value_err(format!("{name} must be >= 1, got {v}")));
    }
    usize::try_from(v).map_err(|_| value_err(format!("{name} is too large: {v}")))
}

pub(crate) fn check_normalize(normalize: i64) -> PyResult<u32> {
    if !(0..=i64::from(NORM_VALID)).contains(&normalize) {
        return Err(value_err(format!(
            "normalize must be a bitmask of 1 (NFKC), 2 (lowercase), 4 (punctuation), 8 (dehyphen), got {normalize}"
        )));
    }
    Ok(normalize as u32)
}

pub(crate) fn check_unit(unit: &str) -> PyResult<Unit> {
    Unit::parse(unit).ok_or_else(|| {
        value_err(format!("unit must be one of {:?}, got {unit:?}", Unit::NAMES))
    })
}

/// The checked shingling settings of a call.
pub(crate) fn shingle_settings(unit: &str, ngram: i64, normalize: i64) -> PyResult<ShingleSettings> {
    Ok(ShingleSettings {
        unit: check_unit(unit)?,
        ngram: positive("ngram", ngram)?,
        flags: check_normalize(normalize)?,
    })
}

/// How texts become MinHash signatures: the permutations `(perm_a, perm_b)`
/// of `scheme`, `ngram`s of `unit` after `normalize` (a bitmask of the
/// `NORM_*` flags), computed on `threads` native threads.
#[pyclass(frozen, module = "lshbloom_udf._native")]
pub(crate) struct SignatureSettings {
    /// The prototype each thread clones.
    pub(crate) hasher: MinHasher,
    threads: usize,
    scheme: Scheme,
    shingles: ShingleSettings,
}

impl SignatureSettings {
    /// Signatures of `rows`, row-major.
    pub(crate) fn signatures(&self, rows: &[Option<&str>]) -> Vec<u32> {
        parallel::signatures(&self.hasher, rows, self.threads)
    }

    /// Band keys of `rows`, row-major, and which rows had shingles.
    pub(crate) fn band_keys(&self, rows: &[Option<&str>], banding: Banding) -> (Vec<u64>, Vec<bool>) {
        parallel::band_keys(&self.hasher, rows, banding, self.threads)
    }
}

#[pymethods]
impl SignatureSettings {
    #[new]
    #[pyo3(signature = (perm_a, perm_b, scheme, ngram, normalize, threads = 1, unit = "words"))]
    fn new(
        perm_a: &Bound<'_, PyAny>,
        perm_b: &Bound<'_, PyAny>,
        scheme: &str,
        ngram: i64,
        normalize: i64,
        threads: i64,
        unit: &str,
    ) -> PyResult<Self> {
        let scheme = Scheme::parse(scheme).ok_or_else(|| {
            value_err(format!("scheme must be 'affine32', 'legacy' or 'poisson', got {scheme:?}"))
        })?;
        let shingles = shingle_settings(unit, ngram, normalize)?;
        let a = input_u64(perm_a, "perm_a")?;
        a.require_ndim("perm_a", 1, "1-D")?;
        let b = input_u64(perm_b, "perm_b")?;
        b.require_ndim("perm_b", 1, "1-D")?;
        let perms = Permutations::new(scheme, a.slice(), b.slice()).map_err(value_err)?;
        Ok(SignatureSettings {
            hasher: MinHasher::with_shingles(perms, shingles),
            threads: positive("threads", threads)?,
            scheme,
            shingles,
        })
    }

    #[getter]
    fn num_perm(&self) -> usize {
        self.hasher.num_perm()
    }
    #[getter]
    fn scheme(&self) -> &'static str {
        self.scheme.name()
    }
    #[getter]
    fn ngram(&self) -> usize {
        self.shingles.ngram
    }
    #[getter]
    fn normalize(&self) -> u32 {
        self.shingles.flags
    }
    #[getter]
    fn unit(&self) -> &'static str {
        self.shingles.unit.name()
    }
    #[getter]
    fn threads(&self) -> usize {
        self.threads
    }

    fn __repr__(&self) -> String {
        // The unit is shown only when it is not the default (the repr of a words setting is unchanged).
        let unit = match self.shingles.unit {
            Unit::Words => String::new(),
            u => format!(", unit='{}'", u.name()),
        };
        format!(
            "SignatureSettings(num_perm={}, scheme='{}', ngram={}, normalize={}, threads={}{unit})",
            self.hasher.num_perm(),
            self.scheme.name(),
            self.shingles.ngram,
            self.shingles.flags,
            self.threads
        )
    }
}

/// How a signature becomes band keys: `b` bands of `r` values, each keyed
/// by `band_key` (`"sum"`, datasketch's, or `"mix"`).
#[pyclass(frozen, module = "lshbloom_udf._native")]
pub(crate) struct BandSettings {
    banding: Banding,
}

impl BandSettings {
    /// The banding, checked to fit in signatures of `num_perm` values.
    pub(crate) fn for_num_perm(&self, num_perm: usize) -> PyResult<Banding> {
        self.banding.check(num_perm).map_err(value_err)?;
        Ok(self.banding)
    }
}

#[pymethods]
impl BandSettings {
    #[new]
    #[pyo3(signature = (b, r, band_key = "sum"))]
    fn new(b: i64, r: i64, band_key: &str) -> PyResult<Self> {
        let (b, r) = (positive("b", b)?, positive("r", r)?);
        let key = BandKey::parse(band_key).map_err(value_err)?;
        Ok(BandSettings {
            banding: Banding { b, r, key },
        })
    }

    #[getter]
    fn b(&self) -> usize {
        self.banding.b
    }
    #[getter]
    fn r(&self) -> usize {
        self.banding.r
    }
    #[getter]
    fn band_key(&self) -> &'static str {
        self.banding.key.name()
    }

    fn __repr__(&self) -> String {
        let Banding { b, r, key } = self.banding;
        format!("BandSettings(b={b}, r={r}, band_key='{}')", key.name())
    }
}
