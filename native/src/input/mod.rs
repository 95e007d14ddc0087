//! The input texts: rows of an Arrow string column given as its raw buffers
//! (`arrow`), and the input check's sums of every text (`sums`).

pub(crate) mod arrow;
pub(crate) mod sums;
