//! What every filter file format shares: a new file is written header first and
//! only then sized (so a failed creation leaves nothing behind), an existing
//! one is validated by its format's reader and then mapped; header fields are
//! little-endian.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut, MmapOptions};

use crate::filters::error::{io_err, FilterError};

pub(crate) fn le_u64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

pub(crate) fn le_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

pub(crate) fn le_f64(b: &[u8], off: usize) -> f64 {
    f64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

/// Creates `path` (never over an existing file) holding `header` and then
/// zeros up to `len` bytes. On failure the half-made file is removed.
pub(crate) fn create_new(path: &Path, header: &[u8], len: u64) -> Result<(), FilterError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_err(path))?;
    if let Err(e) = file.write_all_at(header, 0).and_then(|()| file.set_len(len)) {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(io_err(path)(e));
    }
    Ok(())
}

/// Opens `path` for reading (and writing when `writable`): the file and its size.
pub(crate) fn open(path: &Path, writable: bool) -> Result<(File, u64), FilterError> {
    let file = OpenOptions::new()
        .read(true)
        .write(writable)
        .open(path)
        .map_err(io_err(path))?;
    let size = file.metadata().map_err(io_err(path))?.len();
    Ok((file, size))
}

#[derive(Debug)]
enum Map {
    Ro(Mmap),
    Rw(MmapMut),
}

/// A filter file mapped into memory, read-only or writable.
#[derive(Debug)]
pub(crate) struct MappedFile {
    path: PathBuf,
    map: Map,
}

impl MappedFile {
    /// Maps the first `len` bytes of `file`, which the caller has checked it has.
    pub(crate) fn map(file: &File, path: &Path, len: usize, writable: bool) -> Result<MappedFile, FilterError> {
        // SAFETY: the mapping is only accessed through this struct; as with
        // pybloomfilter, another process truncating the file while it is mapped
        // is not supported.
        let map = unsafe {
            if writable {
                Map::Rw(MmapOptions::new().len(len).map_mut(file).map_err(io_err(path))?)
            } else {
                Map::Ro(MmapOptions::new().len(len).map(file).map_err(io_err(path))?)
            }
        };
        Ok(MappedFile {
            path: path.to_path_buf(),
            map,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn writable(&self) -> bool {
        matches!(self.map, Map::Rw(_))
    }

    #[inline(always)]
    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.map {
            Map::Ro(m) => m,
            Map::Rw(m) => m,
        }
    }

    #[inline(always)]
    pub(crate) fn bytes_mut(&mut self) -> Result<&mut [u8], FilterError> {
        match &mut self.map {
            Map::Rw(m) => Ok(m),
            Map::Ro(_) => Err(FilterError::ReadOnly {
                path: self.path.clone(),
            }),
        }
    }

    pub(crate) fn check_writable(&self) -> Result<(), FilterError> {
        if self.writable() {
            Ok(())
        } else {
            Err(FilterError::ReadOnly {
                path: self.path.clone(),
            })
        }
    }

    /// Writes `v` at `off`; nothing to do on a read-only mapping, whose
    /// contents cannot have changed.
    pub(crate) fn store_u64(&mut self, off: usize, v: u64) {
        if let Map::Rw(m) = &mut self.map {
            m[off..off + 8].copy_from_slice(&v.to_le_bytes());
        }
    }

    /// msync (synchronous) of the whole mapping; no-op when read-only.
    pub(crate) fn sync(&self) -> Result<(), FilterError> {
        match &self.map {
            Map::Rw(m) => m.flush().map_err(io_err(&self.path)),
            Map::Ro(_) => Ok(()),
        }
    }
}

/// A fresh empty directory for one test (`name` unique among the tests).
#[cfg(test)]
pub(crate) fn test_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lshbloom-native-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_new_refuses_existing_files_and_maps_what_it_wrote() {
        let d = test_dir("mapped");
        let p = d.join("f");
        create_new(&p, &7u64.to_le_bytes(), 64).unwrap();
        assert!(matches!(create_new(&p, b"x", 8), Err(FilterError::Io { .. })));
        let (file, size) = open(&p, true).unwrap();
        assert_eq!(size, 64);
        let mut m = MappedFile::map(&file, &p, 64, true).unwrap();
        assert_eq!(le_u64(m.bytes(), 0), 7);
        m.store_u64(8, 9);
        m.sync().unwrap();
        let (file, _) = open(&p, false).unwrap();
        let mut ro = MappedFile::map(&file, &p, 16, false).unwrap();
        assert_eq!(le_u64(ro.bytes(), 8), 9);
        assert!(matches!(ro.bytes_mut(), Err(FilterError::ReadOnly { .. })));
        assert!(ro.check_writable().is_err() && m.check_writable().is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
