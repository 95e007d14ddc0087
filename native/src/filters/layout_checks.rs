//! Checks every line layout (`blocked`, `cuckoo`) must pass, written once: its
//! measured false-positive rate, and files that are not whole filters refused.

use crate::filters::band_set::FilterFile;
use crate::filters::error::FilterError;
use crate::filters::lines::{measure_fp, Layout, LineFile};
use crate::filters::mapped::test_dir;

/// At three sizes the measured false-positive rate is within the target
/// (allowing 4 sigma of binomial noise) and at least `min_share` of it: the
/// sizing model is tight, not just an upper bound.
pub(crate) fn check_measured_rate<L: Layout>(min_share: f64) {
    for (cap, p) in [(100_000u64, 1e-2), (100_000, 1e-3), (200_000, 1e-4)] {
        let q = 2_000_000u64;
        let m = measure_fp::<L>(cap, p, q, 42).unwrap();
        let rate = m.false_positives as f64 / q as f64;
        let tol = 4.0 * (p * q as f64).sqrt() / q as f64;
        assert!(rate <= p + tol, "{}: cap {cap} p {p}: measured {rate}", L::NAME);
        assert!(rate >= p * min_share, "{}: cap {cap} p {p}: measured {rate}", L::NAME);
    }
}

/// A short file, a header of zeros and a whole file less its last byte are
/// all refused as format errors.
pub(crate) fn check_rejects_bad_files<L: Layout>(test_name: &str) {
    let d = test_dir(test_name);
    let (ok, bad) = (d.join("ok"), d.join("bad"));
    drop(LineFile::<L>::create(&ok, 10, 0.01, 1).unwrap());
    let whole = std::fs::read(&ok).unwrap();
    for bytes in [&b"short"[..], &[0u8; 128][..], &whole[..whole.len() - 1]] {
        std::fs::write(&bad, bytes).unwrap();
        let opened = LineFile::<L>::open(&bad, false);
        assert!(matches!(opened, Err(FilterError::Format { .. })), "{}: {} bytes opened", L::NAME, bytes.len());
    }
    std::fs::remove_dir_all(&d).unwrap();
}
