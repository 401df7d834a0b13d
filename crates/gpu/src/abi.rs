//! The reproducer's C ABI as Rust types: `kwb_problem` (kwb-extract's
//! `PROBLEM_STRUCT`), CUDA's `dim3` and the opaque 128-byte `CUtensorMap`.
//! A test holds the layout to the C++ text kwb-extract writes.

use serde::{Deserialize, Serialize};

/// `struct kwb_problem`: pointers first, then 64-bit integers, then the scalars.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    pub a: u64,
    pub b: u64,
    pub c: u64,
    pub d: u64,
    pub bias: u64,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub lda: i64,
    pub ldb: i64,
    pub ldc: i64,
    pub ldd: i64,
    pub alpha: f32,
    pub beta: f32,
}

/// CUDA's `dim3`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub fn from_array(v: [u32; 3]) -> Dim3 {
        Dim3 {
            x: v[0],
            y: v[1],
            z: v[2],
        }
    }

    pub fn to_array(self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}

/// `CUtensorMap`: 128 opaque bytes, 64-byte aligned, filled by the reproducer's own
/// encoder and passed to the kernel by value.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
pub struct TensorMap(pub [u64; 16]);

impl TensorMap {
    /// Its 128 bytes, as the kernel receives them.
    pub fn bytes(&self) -> [u8; 128] {
        let mut bytes = [0u8; 128];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(self.0) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn problem_matches_the_struct_kwb_extract_writes() {
        // The C++ text names the fields in this order with these types.
        let text = kwb_extract::PROBLEM_STRUCT;
        let fields: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("  "))
            .flat_map(|l| {
                let l = l.trim().trim_end_matches(';');
                let names = ["const void* ", "void* ", "long long ", "float "]
                    .iter()
                    .find_map(|ty| l.strip_prefix(ty))
                    .unwrap_or(l);
                names.split(',').map(str::trim).collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            fields,
            [
                "A", "B", "C", "D", "bias", "M", "N", "K", "lda", "ldb", "ldc", "ldd", "alpha",
                "beta"
            ]
        );
        assert_eq!(text.matches("const void*").count(), 4);
        assert_eq!(text.matches("  void* D;").count(), 1);
        assert_eq!(offset_of!(Problem, bias), 32);
        assert_eq!(offset_of!(Problem, m), 40);
        assert_eq!(offset_of!(Problem, ldd), 88);
        assert_eq!(offset_of!(Problem, alpha), 96);
        assert_eq!(offset_of!(Problem, beta), 100);
        assert_eq!(size_of::<Problem>(), 104);
        assert_eq!((size_of::<Dim3>(), align_of::<Dim3>()), (12, 4));
        assert_eq!((size_of::<TensorMap>(), align_of::<TensorMap>()), (128, 64));
    }
}
