//! The NumPy `.npy` format (version 1.0), written: a magic, a header dict padded so
//! the data starts on a 64-byte boundary, then the array in C order, little-endian.
//! Only what `kwb trace show --npy` writes: `<f4` and `<i4` arrays of any shape.

/// The element types written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// `<f4`
    F32,
    /// `<i4`
    I32,
}

impl Dtype {
    fn descr(self) -> &'static str {
        match self {
            Dtype::F32 => "<f4",
            Dtype::I32 => "<i4",
        }
    }
}

/// The header's bytes: magic, version 1.0, length, and the dict, padded with spaces
/// and ended by a newline so that the total is a multiple of 64.
fn header(dtype: Dtype, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
        dtype.descr()
    );
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    let len = u16::try_from(dict.len()).expect("the header dict is short");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// An `<f4` array of `shape` (the product of `shape` must be `data.len()`).
pub fn f32_array(shape: &[usize], data: &[f32]) -> Vec<u8> {
    debug_assert_eq!(shape.iter().product::<usize>(), data.len());
    let mut out = header(Dtype::F32, shape);
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// An `<i4` array of `shape`.
pub fn i32_array(shape: &[usize], data: &[i32]) -> Vec<u8> {
    debug_assert_eq!(shape.iter().product::<usize>(), data.len());
    let mut out = header(Dtype::I32, shape);
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_says_what_numpy_reads() {
        let bytes = f32_array(&[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
        assert_eq!((10 + len) % 64, 0);
        let dict = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
        assert_eq!(
            dict.trim_end(),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
        );
        assert!(dict.ends_with('\n'));
        assert_eq!(bytes.len(), 10 + len + 6 * 4);
        assert_eq!(&bytes[10 + len + 4..10 + len + 8], &1.0_f32.to_le_bytes());
    }

    #[test]
    fn one_dimension_has_a_trailing_comma() {
        let bytes = i32_array(&[3], &[-1, 0, 7]);
        let len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
        let dict = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
        assert!(dict.contains("'descr': '<i4'"), "{dict}");
        assert!(dict.contains("'shape': (3,)"), "{dict}");
        assert_eq!(&bytes[bytes.len() - 4..], &7_i32.to_le_bytes());
    }
}
