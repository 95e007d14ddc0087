//! Verification's native parts (lshbloom_udf/spark/verify/): the
//! candidates of flagged documents (`pair_match`: round 1, the (band, key)
//! pairs of many documents equal to a pair of a few; `shared_pairs`: round 2,
//! a set's documents sharing a band with an earlier one), their exact shingle
//! overlaps (`overlap` for text pairs, `pair_overlap` for many pairs over one
//! table of texts), and each text's shingle hashes for the template rule
//! (`shingle_hashes`).

pub(crate) mod overlap;
pub(crate) mod pair_match;
pub(crate) mod pair_overlap;
pub(crate) mod record_lookup;
pub(crate) mod shared_pairs;
pub(crate) mod shingle_hashes;
