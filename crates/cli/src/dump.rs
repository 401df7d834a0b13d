//! Real dumps of a kernel's output or inputs: `.npy`, `.safetensors` (one named
//! tensor), and raw little-endian `.bin` with a dtype and shape given. Every reader
//! checks the size exactly: a missing or short dump is an error, never a silent
//! fallback to another input.

use std::path::Path;

use crate::npy;

/// The element type of a raw dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RawDtype {
    F32,
    F64,
    F16,
    Bf16,
}

impl RawDtype {
    fn width(self) -> usize {
        match self {
            RawDtype::F32 => 4,
            RawDtype::F64 => 8,
            RawDtype::F16 | RawDtype::Bf16 => 2,
        }
    }

    fn value(self, b: &[u8]) -> f32 {
        match self {
            RawDtype::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            RawDtype::F64 => {
                f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32
            }
            RawDtype::F16 => npy::half_to_f32(u16::from_le_bytes([b[0], b[1]])),
            RawDtype::Bf16 => f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16),
        }
    }

    fn from_safetensors(name: &str) -> Option<RawDtype> {
        Some(match name {
            "F32" => RawDtype::F32,
            "F64" => RawDtype::F64,
            "F16" => RawDtype::F16,
            "BF16" => RawDtype::Bf16,
            _ => return None,
        })
    }
}

/// Why a dump cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DumpError {
    #[error(transparent)]
    Npy(#[from] npy::NpyError),
    #[error("not a .safetensors file: {0}")]
    Safetensors(String),
    #[error("no tensor `{name}` in it; it holds: {available}")]
    NoTensor { name: String, available: String },
    #[error("it holds several tensors ({available}); name one with --tensor")]
    WhichTensor { available: String },
    #[error("tensor `{name}` is {dtype}; kwb reads F32, F64, F16 and BF16")]
    Dtype { name: String, dtype: String },
    #[error("the shape {0:?} holds more values than memory can")]
    Overflow(Vec<usize>),
    #[error("a raw dump needs its element type: --dump-dtype f32|f64|f16|bf16")]
    RawNeedsDtype,
    #[error("{found} bytes where {shape:?} of {width}-byte values take {expected}: {what}")]
    Size {
        expected: usize,
        found: usize,
        shape: Vec<usize>,
        width: usize,
        what: &'static str,
    },
}

/// The shape and values (as f32) of the dump in `bytes`, read by the extension of
/// `path`: `.npy`, `.safetensors` (tensor `tensor`, or its only one), anything else
/// raw with `dtype` and `raw_shape`.
pub fn read(
    path: &Path,
    bytes: &[u8],
    tensor: Option<&str>,
    dtype: Option<RawDtype>,
    raw_shape: &[usize],
) -> Result<(Vec<usize>, Vec<f32>), DumpError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => Ok(npy::read_f32(bytes)?),
        Some("safetensors") => safetensors(bytes, tensor),
        _ => raw(bytes, dtype.ok_or(DumpError::RawNeedsDtype)?, raw_shape),
    }
}

/// A raw little-endian array of exactly `shape`.
pub fn raw(
    bytes: &[u8],
    dtype: RawDtype,
    shape: &[usize],
) -> Result<(Vec<usize>, Vec<f32>), DumpError> {
    let width = dtype.width();
    let expected = shape
        .iter()
        .try_fold(width, |a, d| a.checked_mul(*d))
        .ok_or_else(|| DumpError::Overflow(shape.to_vec()))?;
    if bytes.len() != expected {
        return Err(DumpError::Size {
            expected,
            found: bytes.len(),
            shape: shape.to_vec(),
            width,
            what: if bytes.len() < expected {
                "the dump is short"
            } else {
                "the dump is longer than the shape"
            },
        });
    }
    Ok((
        shape.to_vec(),
        bytes.chunks_exact(width).map(|b| dtype.value(b)).collect(),
    ))
}

/// One tensor of a `.safetensors` file: an 8-byte little-endian header length, a
/// JSON header `{name: {dtype, shape, data_offsets: [begin, end]}, …}`, the data.
pub fn safetensors(
    bytes: &[u8],
    tensor: Option<&str>,
) -> Result<(Vec<usize>, Vec<f32>), DumpError> {
    let bad = |why: String| DumpError::Safetensors(why);
    let len = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .ok_or_else(|| bad("shorter than its 8-byte header length".to_owned()))?;
    let len = usize::try_from(len).map_err(|_| bad("header length overflows".to_owned()))?;
    let header = bytes
        .get(8..8usize.saturating_add(len))
        .ok_or_else(|| bad(format!("the header of {len} bytes is cut short")))?;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(header).map_err(|e| bad(format!("header is not JSON: {e}")))?;
    let data = &bytes[8 + len..];
    let names: Vec<&String> = header.keys().filter(|k| *k != "__metadata__").collect();
    let available = names
        .iter()
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let name = match (tensor, names.as_slice()) {
        (Some(t), _) => t.to_owned(),
        (None, [only]) => (*only).clone(),
        (None, _) => return Err(DumpError::WhichTensor { available }),
    };
    let entry = header.get(&name).ok_or_else(|| DumpError::NoTensor {
        name: name.clone(),
        available: available.clone(),
    })?;
    let dtype_name = entry["dtype"].as_str().unwrap_or("?").to_owned();
    let dtype = RawDtype::from_safetensors(&dtype_name).ok_or(DumpError::Dtype {
        name: name.clone(),
        dtype: dtype_name,
    })?;
    let shape: Vec<usize> = entry["shape"]
        .as_array()
        .ok_or_else(|| bad(format!("tensor `{name}` has no shape")))?
        .iter()
        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
        .collect::<Option<_>>()
        .ok_or_else(|| {
            bad(format!(
                "tensor `{name}` has a shape that is not a list of sizes"
            ))
        })?;
    let offsets = entry["data_offsets"]
        .as_array()
        .and_then(|o| Some((o.first()?.as_u64()?, o.get(1)?.as_u64()?)))
        .ok_or_else(|| bad(format!("tensor `{name}` has no data_offsets")))?;
    let (begin, end) = (
        usize::try_from(offsets.0).unwrap_or(usize::MAX),
        usize::try_from(offsets.1).unwrap_or(usize::MAX),
    );
    let slice = data.get(begin..end).ok_or_else(|| {
        bad(format!(
            "tensor `{name}`'s data [{begin}, {end}) lies past the file's {} data bytes",
            data.len()
        ))
    })?;
    raw(slice, dtype, &shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file of the given tensors (name, dtype, shape, data bytes).
    fn file(tensors: &[(&str, &str, &[usize], Vec<u8>)]) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        let mut data = Vec::new();
        for (name, dtype, shape, bytes) in tensors {
            header.insert(
                (*name).to_owned(),
                serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [data.len(), data.len() + bytes.len()]}),
            );
            data.extend_from_slice(bytes);
        }
        header.insert("__metadata__".to_owned(), serde_json::json!({"by": "test"}));
        let text = serde_json::to_vec(&header).unwrap();
        let mut out = (text.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&text);
        out.extend_from_slice(&data);
        out
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn safetensors_tensors_are_read_by_name_or_alone() {
        let bf16: Vec<u8> = [1.0f32, -2.0]
            .iter()
            .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        let one = file(&[("out", "F32", &[2, 2], f32s(&[1.0, 2.0, 3.0, 4.0]))]);
        assert_eq!(
            safetensors(&one, None).unwrap(),
            (vec![2, 2], vec![1.0, 2.0, 3.0, 4.0])
        );
        let two = file(&[("a", "BF16", &[2], bf16), ("b", "F32", &[1], f32s(&[7.0]))]);
        assert_eq!(
            safetensors(&two, Some("a")).unwrap(),
            (vec![2], vec![1.0, -2.0])
        );
        assert!(matches!(
            safetensors(&two, None),
            Err(DumpError::WhichTensor { .. })
        ));
        assert!(matches!(
            safetensors(&two, Some("c")),
            Err(DumpError::NoTensor { .. })
        ));
        let ints = file(&[("i", "I32", &[1], vec![0; 4])]);
        assert!(matches!(
            safetensors(&ints, None),
            Err(DumpError::Dtype { .. })
        ));
        // Cut short: the data, then the header.
        assert!(matches!(
            safetensors(&one[..one.len() - 1], None),
            Err(DumpError::Safetensors(_))
        ));
        assert!(matches!(
            safetensors(&one[..12], None),
            Err(DumpError::Safetensors(_))
        ));
        assert!(matches!(
            safetensors(&[1, 2], None),
            Err(DumpError::Safetensors(_))
        ));
    }

    #[test]
    fn raw_dumps_must_match_their_shape_exactly() {
        let bytes = f32s(&[1.5, 2.5, 3.5]);
        assert_eq!(
            raw(&bytes, RawDtype::F32, &[3]).unwrap().1,
            vec![1.5, 2.5, 3.5]
        );
        let short = raw(&bytes, RawDtype::F32, &[4]).unwrap_err();
        assert!(short.to_string().contains("the dump is short"), "{short}");
        assert!(raw(&bytes, RawDtype::F32, &[2]).is_err());
        assert_eq!(
            raw(&[0x00, 0x3c], RawDtype::F16, &[1]).unwrap().1,
            vec![1.0]
        );
        assert_eq!(
            read(Path::new("out.bin"), &bytes, None, None, &[3]),
            Err(DumpError::RawNeedsDtype)
        );
    }
}
