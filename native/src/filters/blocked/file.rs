//! The blocked layout over the line files of `lines` (format in the module
//! docs of `blocked`).

#[cfg(target_arch = "x86_64")]
use super::kernel::Avx2;
use super::kernel::{locate, Loc, Portable};
use super::sizing::num_blocks_for;
use super::{MAGIC, VERSION};
use crate::filters::lines::{self, prefetch_line, Layout, LineFile};

/// The blocked layout: the shape is the number of blocks.
#[derive(Debug)]
pub struct Blocked;

impl Layout for Blocked {
    const MAGIC: &'static [u8; 8] = MAGIC;
    const VERSION: u32 = VERSION;
    const NAME: &'static str = "blocked Bloom filter";
    const TAG: &'static str = "blocked-filter";
    type Shape = u64;
    type Loc = Loc;
    type Portable = Portable;
    #[cfg(target_arch = "x86_64")]
    type Avx2 = Avx2;

    fn shape_for(capacity: u64, error_rate: f64) -> Result<u64, String> {
        num_blocks_for(capacity, error_rate)
    }
    fn encode(num_blocks: u64) -> (u64, u32) {
        (num_blocks, 0)
    }
    fn decode(num_blocks: u64, _: u32) -> Result<u64, String> {
        if num_blocks == 0 {
            return Err("num_blocks is 0".into());
        }
        Ok(num_blocks)
    }
    fn num_lines(num_blocks: u64) -> u64 {
        num_blocks
    }
    #[inline(always)]
    fn locate(key: u64, seed: u64, num_blocks: u64) -> Loc {
        locate(key, seed, num_blocks)
    }
    #[inline(always)]
    fn prefetch(data: &[u8], loc: Loc) {
        prefetch_line(data, loc.block);
    }
}

impl LineFile<Blocked> {
    pub(crate) fn num_blocks(&self) -> u64 {
        self.shape()
    }
}

/// Measures a blocked filter's false-positive rate (see [`lines::measure_fp`]):
/// (false positives, num_blocks).
pub(crate) fn measure_fp(capacity: u64, error_rate: f64, queries: u64, seed: u64) -> Result<(u64, u64), String> {
    let m = lines::measure_fp::<Blocked>(capacity, error_rate, queries, seed)?;
    Ok((m.false_positives, m.shape))
}

#[cfg(test)]
mod tests {
    use super::super::BlockedFile;
    use crate::hash::splitmix::next as splitmix;
    use super::*;
    use crate::filters::band_set::FilterFile;
    use crate::filters::layout_checks::{check_measured_rate, check_rejects_bad_files};
    use crate::filters::lines::file::contains_many_with;
    use crate::filters::mapped::test_dir;

    #[test]
    fn measured_rate_within_target() {
        check_measured_rate::<Blocked>(0.5);
    }

    #[test]
    fn open_rejects_bad_files() {
        check_rejects_bad_files::<Blocked>("blocked-bad");
    }

    #[test]
    fn avx2_and_scalar_contains_agree() {
        let d = test_dir("blocked-contains");
        let mut f = BlockedFile::create(&d.join("a.bbf"), 5000, 1e-3, 9).unwrap();
        let mut st = 11u64;
        let ins: Vec<u64> = (0..5000).map(|_| splitmix(&mut st)).collect();
        f.add_many(&ins, &mut vec![false; ins.len()]).unwrap();
        let qs: Vec<u64> = (0..20000).map(|_| splitmix(&mut st)).chain(ins.iter().copied()).collect();
        let mut a = vec![false; qs.len()];
        let mut s = vec![false; qs.len()];
        f.contains_many(&qs, &mut a);
        // SAFETY: portable code needs no CPU feature.
        unsafe { contains_many_with::<Blocked, Portable>(&f, &qs, &mut s) };
        assert_eq!(a, s);
        assert!(a[20000..].iter().all(|&x| x));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
