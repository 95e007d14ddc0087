//! The input texts: rows of an Arrow string column given as its raw buffers
//! (`arrow`), and the input check's sums of every text (`sums`).

pub mod arrow;
pub mod sums;
