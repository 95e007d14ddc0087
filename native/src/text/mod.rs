//! Text into shingles (docs/algorithm.md §1, §1b): normalization and the
//! shingles of one unit (`shingles`, with its generated table of Unicode
//! punctuation), and the exact set of byte strings (`distinct`) that drops a
//! document's repeated shingles and holds verification's shingle sets.

pub mod distinct;
pub mod shingles;
pub mod paragraphs;
