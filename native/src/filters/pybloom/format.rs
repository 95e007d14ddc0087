//! pybloomfiltermmap3's file header (layout in the module docs of `pybloom`)
//! and its sizing of a filter.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::filters::error::{format_err, io_err, FilterError};
use crate::filters::mapped::{le_f64, le_u32, le_u64};

pub(crate) const MAGIC: &[u8; 9] = b"MBITARRAY";
/// `sizeof(struct _BloomFilter)` on x86-64.
pub(crate) const HEADER_LEN: usize = 1200;
pub(crate) const OFF_NUM_BITS: usize = 9;
pub(crate) const OFF_HEADER_LEN: usize = 17;
pub(crate) const OFF_HEADER: usize = 21;
pub(crate) const H_MAX_NUM_ELEM: usize = 0;
pub(crate) const H_ERROR_RATE: usize = 8;
pub(crate) const H_NUM_HASHES: usize = 16;
pub(crate) const H_HASH_SEEDS: usize = 20;
pub(crate) const H_ARRAY_PTR: usize = 1048;
pub(crate) const H_BF_VERSION: usize = 1056;
pub(crate) const H_COUNT_CORRECT: usize = 1057;
pub(crate) const H_ELEM_COUNT: usize = 1064;
pub(crate) const MAX_HASHES: usize = 256;
pub(crate) const BF_VERSION: u8 = 1;

/// Bytes before the bit data: magic, num_bits, header_len and header, rounded
/// up to a multiple of 256 (1280 for the 1200-byte header).
pub(crate) const fn preamble_len(header_len: usize) -> usize {
    (OFF_HEADER + header_len).div_ceil(256) * 256
}

pub(crate) const PREAMBLE: usize = preamble_len(HEADER_LEN);

/// pybloomfilter's `_create` sizing, with the same f64 operations in the same
/// order: returns (num_hashes, num_bits). `num_hashes` is the number of seeds
/// when given, otherwise max(floor(log2(1/p)), 1).
pub(crate) fn geometry(capacity: u64, error_rate: f64, num_hashes: Option<usize>) -> Result<(u32, u64), String> {
    if error_rate.is_nan() || error_rate <= 0.0 || error_rate >= 1.0 {
        return Err(format!("error_rate must be in (0, 1), got {error_rate}"));
    }
    let nh: u64 = match num_hashes {
        Some(n) => {
            if n == 0 || n > MAX_HASHES {
                return Err(format!("number of hash seeds must be in 1..=256, got {n}"));
            }
            n as u64
        }
        None => {
            let f = (1.0 / error_rate).log2().floor();
            if f > MAX_HASHES as f64 {
                return Err(format!(
                    "error_rate {error_rate} needs {f} hashes; pybloomfiltermmap3 supports at most 256"
                ));
            }
            (f as u64).max(1)
        }
    };
    let ln2 = 2f64.ln();
    let bits_per_hash = (capacity as f64 * error_rate.ln().abs() / (nh as f64 * (ln2 * ln2))).ceil();
    // (Also rejects NaN / infinity.)
    if !bits_per_hash.is_finite() || bits_per_hash >= 2f64.powi(63) {
        return Err(format!("capacity {capacity} is too large"));
    }
    let total = u128::from(nh) * (bits_per_hash as u128);
    let num_bits = ((total as f64 / 8.0).ceil() * 8.0).max(128.0);
    if num_bits >= 2f64.powi(63) {
        return Err(format!("capacity {capacity} is too large"));
    }
    Ok((nh as u32, num_bits as u64))
}

/// Encodes the 1200-byte header exactly as pybloomfilter writes it at creation.
pub(crate) fn encode_header(capacity: u64, error_rate: f64, seeds: &[u32], elem_count: u64) -> Vec<u8> {
    let mut h = vec![0u8; HEADER_LEN];
    h[H_MAX_NUM_ELEM..H_MAX_NUM_ELEM + 8].copy_from_slice(&capacity.to_le_bytes());
    h[H_ERROR_RATE..H_ERROR_RATE + 8].copy_from_slice(&error_rate.to_le_bytes());
    h[H_NUM_HASHES..H_NUM_HASHES + 4].copy_from_slice(&(seeds.len() as u32).to_le_bytes());
    for (i, s) in seeds.iter().enumerate() {
        let o = H_HASH_SEEDS + 4 * i;
        h[o..o + 4].copy_from_slice(&s.to_le_bytes());
    }
    // H_ARRAY_PTR: the in-memory MBArray* is NULL when the header is written.
    debug_assert!(h[H_ARRAY_PTR..H_ARRAY_PTR + 8].iter().all(|&b| b == 0));
    h[H_BF_VERSION] = BF_VERSION;
    h[H_COUNT_CORRECT] = 1;
    h[H_ELEM_COUNT..H_ELEM_COUNT + 8].copy_from_slice(&elem_count.to_le_bytes());
    h
}

/// The whole preamble of a new file: magic, num_bits, header_len, header.
pub(crate) fn encode_preamble(num_bits: u64, capacity: u64, error_rate: f64, seeds: &[u32]) -> Vec<u8> {
    let mut pre = vec![0u8; PREAMBLE];
    pre[..9].copy_from_slice(MAGIC);
    pre[OFF_NUM_BITS..OFF_NUM_BITS + 8].copy_from_slice(&num_bits.to_le_bytes());
    pre[OFF_HEADER_LEN..OFF_HEADER_LEN + 4].copy_from_slice(&(HEADER_LEN as i32).to_le_bytes());
    pre[OFF_HEADER..OFF_HEADER + HEADER_LEN].copy_from_slice(&encode_header(capacity, error_rate, seeds, 0));
    pre
}

/// What a valid preamble says.
#[derive(Debug)]
pub(crate) struct Header {
    pub(crate) num_bits: u64,
    pub(crate) seeds: Vec<u32>,
    pub(crate) capacity: u64,
    pub(crate) error_rate: f64,
    pub(crate) count_correct: bool,
    pub(crate) elem_count: u64,
    /// Bytes of bit data, all present in the file.
    pub(crate) data_len: usize,
}

/// Reads and validates the preamble of the `file_size`-byte filter file at `path`.
pub(crate) fn read_header(file: &File, path: &Path, file_size: u64) -> Result<Header, FilterError> {
    let pre = read_preamble(file, path, file_size)?;
    let num_bits = le_u64(&pre, OFF_NUM_BITS);
    let header = &pre[OFF_HEADER..OFF_HEADER + HEADER_LEN];
    let num_hashes = le_u32(header, H_NUM_HASHES) as usize;
    if num_bits == 0 {
        return Err(format_err(path, "invalid header: num_bits is 0"));
    }
    if num_hashes == 0 || num_hashes > MAX_HASHES {
        return Err(format_err(
            path,
            format!("invalid header: num_hashes is {num_hashes}, expected 1..=256"),
        ));
    }
    let data_len = num_bits.div_ceil(8);
    let expected = PREAMBLE as u64 + data_len;
    if file_size < expected {
        return Err(format_err(
            path,
            format!("truncated: expected {expected} bytes, found {file_size}"),
        ));
    }
    let data_len = usize::try_from(data_len)
        .map_err(|_| format_err(path, format!("filter of {num_bits} bits is too large")))?;
    Ok(Header {
        num_bits,
        seeds: (0..num_hashes).map(|i| le_u32(header, H_HASH_SEEDS + 4 * i)).collect(),
        capacity: le_u64(header, H_MAX_NUM_ELEM),
        error_rate: le_f64(header, H_ERROR_RATE),
        count_correct: header[H_COUNT_CORRECT] != 0,
        elem_count: le_u64(header, H_ELEM_COUNT),
        data_len,
    })
}

fn read_preamble(file: &File, path: &Path, file_size: u64) -> Result<Vec<u8>, FilterError> {
    if file_size < OFF_HEADER as u64 {
        // Too short even for magic + num_bits + header_len.
        let mut buf = vec![0u8; file_size as usize];
        file.read_exact_at(&mut buf, 0).map_err(io_err(path))?;
        if !MAGIC.starts_with(&buf[..buf.len().min(9)]) || buf.is_empty() {
            return Err(format_err(path, "not a pybloomfiltermmap3 file (bad magic)"));
        }
        return Err(format_err(
            path,
            format!("truncated: expected at least {PREAMBLE} bytes, found {file_size}"),
        ));
    }
    let mut head = [0u8; OFF_HEADER];
    file.read_exact_at(&mut head, 0).map_err(io_err(path))?;
    if &head[..9] != MAGIC {
        return Err(format_err(path, "not a pybloomfiltermmap3 file (bad magic)"));
    }
    let header_len = i32::from_le_bytes(head[OFF_HEADER_LEN..OFF_HEADER_LEN + 4].try_into().unwrap());
    if header_len != HEADER_LEN as i32 {
        return Err(format_err(
            path,
            format!("unsupported header length {header_len} (expected {HEADER_LEN}, x86-64 pybloomfiltermmap3)"),
        ));
    }
    if file_size < PREAMBLE as u64 {
        return Err(format_err(
            path,
            format!("truncated: expected at least {PREAMBLE} bytes, found {file_size}"),
        ));
    }
    let mut pre = vec![0u8; PREAMBLE];
    file.read_exact_at(&mut pre, 0).map_err(io_err(path))?;
    Ok(pre)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_matches_pybloomfilter() {
        // (capacity, error_rate) -> (num_hashes, num_bits) from pybloomfilter 0.6.3.
        assert_eq!(geometry(1000, 0.01, None).unwrap(), (6, 9592));
        assert_eq!(geometry(1, 0.5, None).unwrap(), (1, 128));
        assert_eq!(geometry(0, 0.1, None).unwrap(), (3, 128));
        assert_eq!(geometry(1_000_000, 1e-5, None).unwrap(), (16, 23_962_656));
        assert_eq!(geometry(100_000, 0.001, Some(4)).unwrap(), (4, 1_437_760));
        assert!(geometry(10, 0.0, None).is_err());
        assert!(geometry(10, 1.0, None).is_err());
        assert!(geometry(10, 0.1, Some(0)).is_err());
        assert!(geometry(10, 0.1, Some(257)).is_err());
    }

    #[test]
    fn header_offsets() {
        let h = encode_header(5, 0.25, &[7, 9], 3);
        assert_eq!(h.len(), 1200);
        assert_eq!(le_u64(&h, 0), 5);
        assert_eq!(&h[8..16], &0.25f64.to_le_bytes());
        assert_eq!(le_u32(&h, 16), 2);
        assert_eq!(le_u32(&h, 20), 7);
        assert_eq!(le_u32(&h, 24), 9);
        assert_eq!(h[1056], 1);
        assert_eq!(h[1057], 1);
        assert_eq!(le_u64(&h, 1064), 3);
        assert_eq!(PREAMBLE, 1280);
    }
}
