//! The cuckoo layout over the line files of `lines` (format in the module
//! docs of `cuckoo`).

use super::kernel::{locate, Loc, Shape};
#[cfg(target_arch = "x86_64")]
use super::scan::Avx2;
use super::scan::Portable;
use super::sizing::{geometry, slots_for};
use super::{MAGIC, MAX_FP_BITS, MIN_FP_BITS, VERSION};
use crate::filters::lines::{self, prefetch_line, Layout, LineFile};

/// The cuckoo layout.
#[derive(Debug)]
pub struct Cuckoo;

impl Layout for Cuckoo {
    const MAGIC: &'static [u8; 8] = MAGIC;
    const VERSION: u32 = VERSION;
    const NAME: &'static str = "cuckoo filter";
    const TAG: &'static str = "cuckoo-filter";
    type Shape = Shape;
    type Loc = Loc;
    type Portable = Portable;
    #[cfg(target_arch = "x86_64")]
    type Avx2 = Avx2;

    fn shape_for(capacity: u64, error_rate: f64) -> Result<Shape, String> {
        let g = geometry(capacity, error_rate)?;
        Ok(Shape { num_buckets: g.num_buckets, fp_bits: g.fp_bits, slots: g.slots })
    }
    fn encode(shape: Shape) -> (u64, u32) {
        (shape.num_buckets, shape.fp_bits)
    }
    fn decode(num_buckets: u64, fp_bits: u32) -> Result<Shape, String> {
        if num_buckets == 0 || !(MIN_FP_BITS..=MAX_FP_BITS).contains(&fp_bits) {
            return Err(format!("{num_buckets} buckets, {fp_bits}-bit fingerprints"));
        }
        Ok(Shape { num_buckets, fp_bits, slots: slots_for(fp_bits) })
    }
    fn num_lines(shape: Shape) -> u64 {
        shape.num_buckets
    }
    #[inline(always)]
    fn locate(key: u64, seed: u64, shape: Shape) -> Loc {
        locate(key, seed, shape)
    }
    #[inline(always)]
    fn prefetch(data: &[u8], loc: Loc) {
        // A probe reads both buckets (`scan`).
        prefetch_line(data, loc.a);
        prefetch_line(data, loc.b);
    }
}

impl LineFile<Cuckoo> {
    pub(crate) fn num_buckets(&self) -> u64 {
        self.shape().num_buckets
    }
    pub(crate) fn fp_bits(&self) -> u32 {
        self.shape().fp_bits
    }
    pub(crate) fn slots(&self) -> u32 {
        self.shape().slots
    }
}

/// What [`measure_fp`] found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    pub(crate) false_positives: u64,
    pub(crate) num_buckets: u64,
    pub(crate) fp_bits: u32,
    /// Keys actually stored (capacity minus the inserts that were false positives).
    pub(crate) stored: u64,
}

/// Measures a cuckoo filter's false-positive rate (see [`lines::measure_fp`]).
pub(crate) fn measure_fp(capacity: u64, error_rate: f64, queries: u64, seed: u64) -> Result<Measured, String> {
    let m = lines::measure_fp::<Cuckoo>(capacity, error_rate, queries, seed)?;
    Ok(Measured {
        false_positives: m.false_positives,
        num_buckets: m.shape.num_buckets,
        fp_bits: m.shape.fp_bits,
        stored: m.stored,
    })
}

#[cfg(test)]
mod tests {
    use super::super::CuckooFile;
    use super::*;
    use crate::filters::band_set::FilterFile;
    use crate::filters::layout_checks::{check_measured_rate, check_rejects_bad_files};
    use crate::filters::mapped::test_dir;

    #[test]
    fn measured_rate_within_target() {
        check_measured_rate::<Cuckoo>(0.3);
    }

    #[test]
    fn open_rejects_bad_files() {
        check_rejects_bad_files::<Cuckoo>("cuckoo-bad");
    }

    #[test]
    fn file_roundtrip_and_refuses_overfill() {
        let d = test_dir("cuckoo-file");
        let mut f = CuckooFile::create(&d.join("a.cbf"), 1000, 1e-4, 9).unwrap();
        let keys: Vec<u64> = (0..1000).collect();
        let mut out = vec![false; 1000];
        f.add_many(&keys, &mut out).unwrap();
        assert_eq!(f.elem_count() + out.iter().filter(|&&x| x).count() as u64, 1000);
        f.sync().unwrap();
        drop(f);
        let ro = CuckooFile::open(&d.join("a.cbf"), false).unwrap();
        let mut c = vec![false; 1000];
        ro.contains_many(&keys, &mut c);
        assert!(c.iter().all(|&x| x));
        assert_eq!(ro.seed(), 9);
        // Far past capacity the filter refuses (an error, not a lost key).
        let mut f = CuckooFile::create(&d.join("b.cbf"), 100, 1e-3, 1).unwrap();
        let many: Vec<u64> = (0..100_000).collect();
        let err = f.add_many(&many, &mut vec![false; many.len()]).unwrap_err();
        assert!(err.to_string().contains("cuckoo filter full"), "{err}");
        let stored = f.elem_count();
        let mut c = vec![false; stored as usize];
        f.contains_many(&many[..stored as usize], &mut c);
        assert!(c.iter().all(|&x| x));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
