//! The NumPy `.npy` format: a magic, a version, a header dict padded so the data
//! starts on a 64-byte boundary, then the array in C order. Written: `<f4` and `<i4`
//! arrays of any shape (version 1.0). Read: C-order `<f4`, `<f8` and `<f2` arrays
//! (versions 1.0 to 3.0), widened to f32; anything else is an error that says what
//! the file holds.

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

/// Why a file is not an array `read_f32` takes.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy file (no \\x93NUMPY magic)")]
    Magic,
    #[error(".npy version {0}.{1} is not one kwb reads (1.0 to 3.0)")]
    Version(u8, u8),
    #[error("the .npy header is cut short or not a dict: {0}")]
    Header(String),
    #[error("the array is {0}; kwb reads float32, float64 and float16 (little-endian)")]
    Dtype(String),
    #[error("the array is in Fortran order; save it in C order (np.ascontiguousarray)")]
    FortranOrder,
    #[error("the header says {expected} values, the file holds {found}")]
    Size { expected: usize, found: usize },
}

/// A C-order float array from `.npy` bytes: its shape and its values as f32.
pub fn read_f32(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f32>), NpyError> {
    let rest = bytes.strip_prefix(b"\x93NUMPY").ok_or(NpyError::Magic)?;
    let (&major, &minor) = (
        rest.first().ok_or(NpyError::Magic)?,
        rest.get(1).ok_or(NpyError::Magic)?,
    );
    let (len, at) = match major {
        1 => (
            usize::from(u16::from_le_bytes([
                *rest.get(2).ok_or(NpyError::Magic)?,
                *rest.get(3).ok_or(NpyError::Magic)?,
            ])),
            10,
        ),
        2 | 3 => {
            let b = rest.get(2..6).ok_or(NpyError::Magic)?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
        }
        _ => return Err(NpyError::Version(major, minor)),
    };
    let header = bytes
        .get(at..at + len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| NpyError::Header(format!("{len} header bytes")))?;
    let field = |key: &str| -> Result<&str, NpyError> {
        let start = header
            .find(&format!("'{key}':"))
            .ok_or_else(|| NpyError::Header(format!("no '{key}' in {}", header.trim())))?;
        Ok(header[start + key.len() + 3..].trim_start())
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or_else(|| NpyError::Header(header.trim().to_owned()))?;
    if field("fortran_order")?.starts_with("True") {
        return Err(NpyError::FortranOrder);
    }
    let shape_text = field("shape")?;
    let shape_text = shape_text
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| NpyError::Header(header.trim().to_owned()))?;
    let shape: Vec<usize> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.parse()
                .map_err(|_| NpyError::Header(format!("shape ({shape_text})")))
        })
        .collect::<Result<_, _>>()?;
    let count = shape
        .iter()
        .try_fold(1usize, |a, d| a.checked_mul(*d))
        .ok_or_else(|| NpyError::Header(format!("shape ({shape_text}) overflows")))?;
    let data = &bytes[(at + len).min(bytes.len())..];
    let width = match descr {
        "<f4" => 4,
        "<f8" => 8,
        "<f2" => 2,
        other => return Err(NpyError::Dtype(other.to_owned())),
    };
    if Some(data.len()) != count.checked_mul(width) {
        return Err(NpyError::Size {
            expected: count,
            found: data.len() / width,
        });
    }
    let values = data
        .chunks_exact(width)
        .map(|b| match width {
            4 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            8 => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32,
            _ => half_to_f32(u16::from_le_bytes([b[0], b[1]])),
        })
        .collect();
    Ok((shape, values))
}

/// An IEEE half's value.
pub(crate) fn half_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exponent = i32::from((h >> 10) & 0x1f);
    let fraction = f32::from(h & 0x3ff);
    match exponent {
        0 => sign * fraction * 2f32.powi(-24),
        31 if fraction == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        e => sign * (1.0 + fraction / 1024.0) * 2f32.powi(e - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back() {
        let data = [0.5f32, -1.0, 3.25, 7.0, 0.0, 1e-3];
        assert_eq!(
            read_f32(&f32_array(&[2, 3], &data)).unwrap(),
            (vec![2, 3], data.to_vec())
        );
        assert_eq!(read_f32(&f32_array(&[6], &data)).unwrap().0, vec![6]);
    }

    #[test]
    fn other_float_widths_are_widened() {
        // A hand-made version 1.0 file of two float16 values (1.0, -2.5).
        let mut dict = "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }".to_owned();
        let unpadded = 10 + dict.len() + 1;
        dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
        dict.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        bytes.extend_from_slice(dict.as_bytes());
        bytes.extend_from_slice(&0x3c00u16.to_le_bytes());
        bytes.extend_from_slice(&0xc100u16.to_le_bytes());
        assert_eq!(read_f32(&bytes).unwrap(), (vec![2], vec![1.0, -2.5]));
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        assert_eq!(read_f32(b"PK\x03\x04"), Err(NpyError::Magic));
        let good = f32_array(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
        assert!(matches!(
            read_f32(&good[..good.len() - 4]),
            Err(NpyError::Size {
                expected: 4,
                found: 3
            })
        ));
        let ints = i32_array(&[2], &[1, 2]);
        assert_eq!(read_f32(&ints), Err(NpyError::Dtype("<i4".to_owned())));
        let mut fortran = good.clone();
        let at = fortran.windows(5).position(|w| w == b"False").unwrap();
        fortran[at..at + 5].copy_from_slice(b"True ");
        assert_eq!(read_f32(&fortran), Err(NpyError::FortranOrder));
        let mut v9 = good.clone();
        v9[6] = 9;
        assert_eq!(read_f32(&v9), Err(NpyError::Version(9, 0)));
    }

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
