//! One pybloomfiltermmap3 filter file, memory-mapped.

use std::path::Path;

use super::format::{encode_preamble, geometry, read_header, H_ELEM_COUNT, OFF_HEADER, PREAMBLE};
use super::positions::{py_int_hash, FastMod};
use crate::hash::murmur3::murmur3_u64;
use crate::filters::band_set::{FileCore, FilterFile};
use crate::filters::error::FilterError;
use crate::filters::mapped::{self, MappedFile};

/// A pybloomfiltermmap3 filter file, memory-mapped.
#[derive(Debug)]
pub(crate) struct BloomFile {
    core: FileCore,
    num_bits: u64,
    seeds: Vec<u32>,
    pub(super) count_correct: bool,
    data_len: usize,
    file_size: u64,
    fastmod: FastMod,
}

impl BloomFile {
    /// Creates a new filter file (fails if `path` exists), sized as pybloomfilter
    /// sizes `BloomFilter(capacity, error_rate, path, hash_seeds=seeds)`.
    pub(crate) fn create(path: &Path, capacity: u64, error_rate: f64, seeds: &[u32]) -> Result<BloomFile, FilterError> {
        let (_, num_bits) = geometry(capacity, error_rate, Some(seeds.len())).map_err(FilterError::Invalid)?;
        let data_len = usize::try_from(num_bits.div_ceil(8))
            .map_err(|_| FilterError::Invalid(format!("filter of {num_bits} bits is too large")))?;
        let preamble = encode_preamble(num_bits, capacity, error_rate, seeds);
        mapped::create_new(path, &preamble, (PREAMBLE + data_len) as u64)?;
        Self::open(path, true)
    }

    pub(crate) fn num_bits(&self) -> u64 {
        self.num_bits
    }
    pub(crate) fn num_hashes(&self) -> usize {
        self.seeds.len()
    }
    pub(crate) fn seeds(&self) -> &[u32] {
        &self.seeds
    }

    /// The bit-data region.
    #[inline(always)]
    pub(crate) fn data(&self) -> &[u8] {
        &self.core.file.bytes()[PREAMBLE..PREAMBLE + self.data_len]
    }

    #[inline(always)]
    pub(super) fn data_mut(&mut self) -> Result<&mut [u8], FilterError> {
        let len = self.data_len;
        Ok(&mut self.core.file.bytes_mut()?[PREAMBLE..PREAMBLE + len])
    }

    /// Bit positions of `key`, one per seed, appended to `out`.
    #[inline]
    pub(crate) fn positions(&self, key: u64, out: &mut Vec<u64>) {
        let hk = py_int_hash(key);
        for &s in &self.seeds {
            let (h1, h2) = murmur3_u64(hk, s);
            out.push(self.fastmod.rem(h1 ^ h2));
        }
    }

    #[inline(always)]
    pub(super) fn test_positions(data: &[u8], pos: &[u64]) -> bool {
        pos.iter().all(|&p| data[(p >> 3) as usize] & (1u8 << (p & 7)) != 0)
    }

    #[inline(always)]
    pub(super) fn set_positions(data: &mut [u8], pos: &[u64]) {
        for &p in pos {
            data[(p >> 3) as usize] |= 1u8 << (p & 7);
        }
    }

    /// Is `key` (probably) in the filter?
    pub(crate) fn contains(&self, key: u64) -> bool {
        let hk = py_int_hash(key);
        let data = self.data();
        self.seeds.iter().all(|&s| {
            let (h1, h2) = murmur3_u64(hk, s);
            let p = self.fastmod.rem(h1 ^ h2);
            data[(p >> 3) as usize] & (1u8 << (p & 7)) != 0
        })
    }

    /// Adds `key`; returns whether it was already present. Counts it in
    /// `elem_count` when it was not (pybloomfilter's `bloomfilter_Add` rule).
    /// The mapped header's `elem_count` is updated by [`FileCore::store_elem_count`].
    pub(super) fn add_one(&mut self, key: u64, pos: &mut Vec<u64>) -> Result<bool, FilterError> {
        pos.clear();
        self.positions(key, pos);
        let data = self.data_mut()?;
        let present = Self::test_positions(data, pos);
        Self::set_positions(data, pos);
        if !present && self.count_correct {
            self.core.elem_count += 1;
        }
        Ok(present)
    }
}

impl FilterFile for BloomFile {
    fn open(path: &Path, writable: bool) -> Result<BloomFile, FilterError> {
        let (file, file_size) = mapped::open(path, writable)?;
        let h = read_header(&file, path, file_size)?;
        Ok(BloomFile {
            core: FileCore {
                file: MappedFile::map(&file, path, PREAMBLE + h.data_len, writable)?,
                capacity: h.capacity,
                error_rate: h.error_rate,
                elem_count: h.elem_count,
                elem_count_offset: OFF_HEADER + H_ELEM_COUNT,
            },
            num_bits: h.num_bits,
            seeds: h.seeds,
            count_correct: h.count_correct,
            data_len: h.data_len,
            file_size,
            fastmod: FastMod::new(h.num_bits),
        })
    }

    fn core(&self) -> &FileCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut FileCore {
        &mut self.core
    }
    fn file_size(&self) -> u64 {
        self.file_size
    }

    fn contains_many(&self, keys: &[u64], out: &mut [bool]) {
        assert_eq!(keys.len(), out.len());
        for (o, &k) in out.iter_mut().zip(keys) {
            *o = self.contains(k);
        }
    }

    fn add_many(&mut self, keys: &[u64], out: &mut [bool]) -> Result<(), FilterError> {
        assert_eq!(keys.len(), out.len());
        self.core.file.check_writable()?;
        let mut pos = Vec::with_capacity(self.seeds.len());
        for (o, &k) in out.iter_mut().zip(keys) {
            *o = self.add_one(k, &mut pos)?;
        }
        self.core.store_elem_count();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::mapped::test_dir;
    use crate::minhash::MERSENNE61;

    #[test]
    fn create_open_add_contains() {
        let d = test_dir("bloom-basic");
        let p = d.join("f.bf");
        let mut f = BloomFile::create(&p, 1000, 0.01, &[1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(f.num_bits(), 9592);
        assert_eq!(f.file_size(), 1280 + 1199);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 2479);
        let keys: Vec<u64> = (0..500u64).map(|i| i * 7919 + 3).collect();
        let mut out = vec![true; keys.len()];
        f.add_many(&keys, &mut out).unwrap();
        assert_eq!(f.elem_count(), out.iter().filter(|&&x| !x).count() as u64);
        let mut again = vec![false; keys.len()];
        f.add_many(&keys, &mut again).unwrap();
        assert!(again.iter().all(|&x| x));
        f.sync().unwrap();
        let count = f.elem_count();
        drop(f);
        let g = BloomFile::open(&p, false).unwrap();
        assert_eq!(g.elem_count(), count);
        assert_eq!(g.seeds(), &[1, 2, 3, 4, 5, 6]);
        assert_eq!(g.capacity(), 1000);
        assert_eq!(g.error_rate(), 0.01);
        let mut c = vec![false; keys.len()];
        g.contains_many(&keys, &mut c);
        assert!(c.iter().all(|&x| x));
        let fp = (1_000_000u64..1_010_000).filter(|&k| g.contains(k)).count();
        assert!(fp < 400, "false positives {fp}");
        // Key x and x + (2^61 - 1) hash identically (Python int hash).
        assert!(g.contains(keys[0] + MERSENNE61));
        // Read-only writes are refused.
        let mut g = g;
        let err = g.add_many(&[1], &mut [false]).unwrap_err();
        assert!(matches!(err, FilterError::ReadOnly { .. }));
        assert!(err.to_string().ends_with("opened read-only"));
        // Creating over an existing file fails.
        let err = BloomFile::create(&p, 10, 0.1, &[1]).unwrap_err();
        assert!(matches!(err, FilterError::Io { .. }));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn open_validation() {
        let d = test_dir("bloom-validate");
        let p = d.join("ok.bf");
        drop(BloomFile::create(&p, 1000, 0.01, &[1, 2]).unwrap());
        let good = std::fs::read(&p).unwrap();
        let check = |name: &str, bytes: &[u8], needle: &str| {
            let q = d.join(name);
            std::fs::write(&q, bytes).unwrap();
            let e = BloomFile::open(&q, false).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, FilterError::Format { .. }), "{msg}");
            assert!(msg.contains(name) && msg.contains(needle), "{msg}");
        };
        check("empty.bf", &[], "bad magic");
        check("short.bf", b"MBITAR", "truncated");
        let mut bad = good.clone();
        bad[0] = b'X';
        check("magic.bf", &bad, "bad magic");
        let mut bad = good.clone();
        bad[17] = 0;
        check("hlen.bf", &bad, "header length");
        let mut bad = good.clone();
        bad[21 + 16..21 + 20].copy_from_slice(&0u32.to_le_bytes());
        check("nh0.bf", &bad, "num_hashes");
        let mut bad = good.clone();
        bad[21 + 16..21 + 20].copy_from_slice(&300u32.to_le_bytes());
        check("nh300.bf", &bad, "num_hashes");
        let mut bad = good.clone();
        bad[9..17].copy_from_slice(&0u64.to_le_bytes());
        check("bits0.bf", &bad, "num_bits");
        check("trunc.bf", &good[..good.len() - 1], &format!("expected {} bytes, found {}", good.len(), good.len() - 1));
        check("trunc2.bf", &good[..1000], "truncated");
        let e = BloomFile::open(&d.join("missing.bf"), false).unwrap_err();
        assert!(matches!(e, FilterError::Io { .. }));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
