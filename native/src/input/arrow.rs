//! Rows of an Arrow `StringArray` / `LargeStringArray` given as its raw
//! buffers (offsets, data, validity as bools), validated.

/// An Arrow offset type (int32 for `string`, int64 for `large_string`).
pub(crate) trait Offset: Copy {
    fn to_i64(self) -> i64;
}

impl Offset for i32 {
    #[inline(always)]
    fn to_i64(self) -> i64 {
        i64::from(self)
    }
}

impl Offset for i64 {
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self
    }
}

/// Splits `data` into `offsets.len() - 1` rows. Null rows (`valid[i] == false`)
/// are `None`. Offsets must be non-decreasing and within `data` for every row
/// (null rows included, as the Arrow format requires); each non-null row must
/// be valid UTF-8.
pub(crate) fn rows<'a, O: Offset>(
    offsets: &[O],
    data: &'a [u8],
    valid: Option<&[bool]>,
) -> Result<Vec<Option<&'a str>>, String> {
    byte_rows(offsets, data, valid)?
        .into_iter()
        .enumerate()
        .map(|(i, row)| match row {
            None => Ok(None),
            Some(bytes) => std::str::from_utf8(bytes).map(Some).map_err(|e| format!("row {i}: invalid UTF-8: {e}")),
        })
        .collect()
}

/// The rows of [`rows`] as bytes, whatever they hold (Spark's strings may hold invalid UTF-8).
pub(crate) fn byte_rows<'a, O: Offset>(
    offsets: &[O],
    data: &'a [u8],
    valid: Option<&[bool]>,
) -> Result<Vec<Option<&'a [u8]>>, String> {
    if offsets.is_empty() {
        return Err("offsets must have N + 1 >= 1 elements, got 0".into());
    }
    let n = offsets.len() - 1;
    if let Some(v) = valid {
        if v.len() != n {
            return Err(format!(
                "valid has length {}, expected {n} (len(offsets) - 1)",
                v.len()
            ));
        }
    }
    let len = data.len() as i64;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let start = offsets[i].to_i64();
        let end = offsets[i + 1].to_i64();
        if start < 0 || end < start || end > len {
            return Err(format!(
                "row {i}: invalid offsets [{start}, {end}) for a data buffer of {len} bytes \
                 (offsets must be non-decreasing and within the data buffer)"
            ));
        }
        if valid.is_some_and(|v| !v[i]) {
            out.push(None);
            continue;
        }
        out.push(Some(&data[start as usize..end as usize]));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_rows_and_nulls() {
        let data = b"helloworld!";
        let offs: [i32; 4] = [0, 5, 5, 10];
        let r = rows(&offs, data, Some(&[true, false, true])).unwrap();
        assert_eq!(r, vec![Some("hello"), None, Some("world")]);
        let offs64: [i64; 3] = [5, 10, 11];
        let r = rows(&offs64, data, None).unwrap();
        assert_eq!(r, vec![Some("world"), Some("!")]);
        assert_eq!(rows::<i32>(&[0], b"", None).unwrap(), vec![]);
    }

    #[test]
    fn rejects_bad_offsets() {
        assert!(rows::<i32>(&[], b"", None).unwrap_err().contains("N + 1"));
        let e = rows::<i32>(&[0, 3, 2], b"abc", None).unwrap_err();
        assert!(e.starts_with("row 1:"), "{e}");
        let e = rows::<i64>(&[0, 4], b"abc", None).unwrap_err();
        assert!(e.starts_with("row 0:"), "{e}");
        let e = rows::<i32>(&[-1, 2], b"abc", None).unwrap_err();
        assert!(e.starts_with("row 0:"), "{e}");
        // Bad offsets are rejected even on null rows.
        let e = rows::<i32>(&[0, 9], b"abc", Some(&[false])).unwrap_err();
        assert!(e.starts_with("row 0:"), "{e}");
        let e = rows::<i32>(&[0, 1], b"abc", Some(&[true, true])).unwrap_err();
        assert!(e.contains("valid has length 2, expected 1"), "{e}");
    }

    #[test]
    fn rejects_invalid_utf8_but_not_on_null_rows() {
        let data = b"ok\xff\xfe";
        let e = rows::<i32>(&[0, 2, 4], data, None).unwrap_err();
        assert!(e.starts_with("row 1: invalid UTF-8"), "{e}");
        let r = rows::<i32>(&[0, 2, 4], data, Some(&[true, false])).unwrap();
        assert_eq!(r, vec![Some("ok"), None]);
    }
}
