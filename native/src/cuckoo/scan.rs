//! The slot-by-slot scan of a bucket, stopping at the first empty slot: the
//! first kernel of the cuckoo layout, kept as the reference the branch-free
//! `swar` kernel is tested against (same decisions, same bytes).

use super::kernel::{fp_mask, get, kick, put, words, Loc, Shape};
use super::{Cuckoo, BUCKET_BYTES};
use crate::lines::{line_mut, Full, Kernel};

/// What a scan of one bucket found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    Found,
    /// Not there; the first empty slot, if any.
    Absent(Option<u32>),
}

/// Scans bucket `line` for `fp`, stopping at the first empty slot (the
/// occupied slots are a prefix).
#[inline(always)]
pub(super) fn scan(line: &[u8], fp: u64, shape: Shape) -> Scan {
    if shape.fp_bits > 57 {
        return scan_wide(line, fp, shape);
    }
    // A slot of ≤ 57 bits starting at bit `i f` lies inside the 8 bytes from
    // byte `i f / 8`: one unaligned load, a shift and a mask. The last slots'
    // loads reach up to 8 bytes past the line: the next bucket's (masked
    // off), or for the last bucket a padded copy.
    let mut copy = [0u8; BUCKET_BYTES + 8];
    let buf = padded(line, &mut copy);
    let mask = fp_mask(shape.fp_bits);
    let mut bit = 0usize;
    for i in 0..shape.slots {
        let at = bit / 8;
        let v = (u64::from_le_bytes(buf[at..at + 8].try_into().unwrap()) >> (bit % 8)) & mask;
        if v == fp {
            return Scan::Found;
        }
        if v == 0 {
            return Scan::Absent(Some(i));
        }
        bit += shape.fp_bits as usize;
    }
    Scan::Absent(None)
}

/// `line` (a bucket and whatever follows it in the filter) if 8 bytes follow
/// the bucket, else the bucket copied into `copy` (zero padded).
#[inline(always)]
fn padded<'a>(line: &'a [u8], copy: &'a mut [u8; BUCKET_BYTES + 8]) -> &'a [u8] {
    if line.len() >= BUCKET_BYTES + 8 {
        &line[..BUCKET_BYTES + 8]
    } else {
        copy[..BUCKET_BYTES].copy_from_slice(&line[..BUCKET_BYTES]);
        &copy[..]
    }
}

/// [`scan`] for fingerprints of more than 57 bits (slots may span 9 bytes).
fn scan_wide(line: &[u8], fp: u64, shape: Shape) -> Scan {
    let w = words(line);
    for i in 0..shape.slots {
        let v = get(&w, i, shape.fp_bits);
        if v == fp {
            return Scan::Found;
        }
        if v == 0 {
            return Scan::Absent(Some(i));
        }
    }
    Scan::Absent(None)
}

/// Bucket `bucket` and the buckets after it (a scan reads up to 8 bytes past
/// a bucket when they are there).
#[inline(always)]
fn tail(data: &[u8], bucket: usize) -> &[u8] {
    &data[bucket * BUCKET_BYTES..]
}

/// Inserts the (absent) key at `loc`, given the scans of its two buckets.
#[inline(always)]
fn insert_absent(data: &mut [u8], loc: Loc, shape: Shape, first: Scan, second: Scan) -> Result<(), Full> {
    if let Scan::Absent(Some(i)) = first {
        put(line_mut(data, loc.a), i, shape.fp_bits, loc.fp);
        return Ok(());
    }
    if let Scan::Absent(Some(i)) = second {
        put(line_mut(data, loc.b), i, shape.fp_bits, loc.fp);
        return Ok(());
    }
    kick(data, loc, shape)
}


/// The scan kernel: bucket 2 is scanned only when bucket 1 is full.
pub(crate) struct ScanKernel;

impl Kernel<Cuckoo> for ScanKernel {
    type Probe = (Scan, Scan);

    unsafe fn probe(data: &[u8], loc: Loc, shape: Shape) -> Option<(Scan, Scan)> {
        let first = scan(tail(data, loc.a), loc.fp, shape);
        let second = match first {
            Scan::Absent(None) if loc.b != loc.a => scan(tail(data, loc.b), loc.fp, shape),
            _ => first,
        };
        (first != Scan::Found && second != Scan::Found).then_some((first, second))
    }

    unsafe fn insert(data: &mut [u8], loc: Loc, shape: Shape, (first, second): (Scan, Scan)) -> Result<(), Full> {
        insert_absent(data, loc, shape, first, second)
    }
}
