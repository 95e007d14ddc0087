//! Checksums of filter files: xxh3-64 of a file's bytes, read through a
//! read-only memory map (one pass, no copy), so an index can verify every band
//! file when it opens at a small fraction of a run's time.

use std::path::Path;

use memmap2::MmapOptions;
use xxhash_rust::xxh3::xxh3_64;

use crate::filters::error::{io_err, FilterError};
use crate::filters::mapped;

/// xxh3-64 of `data`.
pub(crate) fn bytes_xxh3(data: &[u8]) -> u64 {
    xxh3_64(data)
}

/// xxh3-64 of the whole file at `path` (an empty file hashes as no bytes).
pub(crate) fn file_xxh3(path: &Path) -> Result<u64, FilterError> {
    let (file, size) = mapped::open(path, false)?;
    if size == 0 {
        return Ok(xxh3_64(&[]));
    }
    // SAFETY: read-only map of a file the index holds under its lock; a
    // concurrent truncation by another program is the only hazard, as for
    // every mapped filter file. `populate` maps every page in one call
    // (MAP_POPULATE) instead of one fault per page: several times faster.
    let map = unsafe { MmapOptions::new().populate().map(&file) }.map_err(io_err(path))?;
    Ok(xxh3_64(&map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(name: &str, data: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("lshbloom-checksum-{}-{name}", std::process::id()));
        std::fs::File::create(&path).unwrap().write_all(data).unwrap();
        path
    }

    #[test]
    fn file_checksum_is_the_checksum_of_its_bytes_and_sees_one_flipped_bit() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let path = temp_file("a", &data);
        assert_eq!(file_xxh3(&path).unwrap(), bytes_xxh3(&data));
        let mut flipped = data.clone();
        flipped[54_321] ^= 0x10;
        std::fs::write(&path, &flipped).unwrap();
        assert_ne!(file_xxh3(&path).unwrap(), bytes_xxh3(&data));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn empty_and_missing_files() {
        let path = temp_file("empty", b"");
        assert_eq!(file_xxh3(&path).unwrap(), xxh3_64(b""));
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(file_xxh3(&path), Err(FilterError::Io { .. })));
    }

    #[test]
    fn known_value_of_the_reference_implementation() {
        // XXH3_64bits("") from the xxHash reference.
        assert_eq!(bytes_xxh3(b""), 0x2D06_8005_38D3_94C2);
    }
}
