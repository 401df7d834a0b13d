//! The pinned PyPI packages that make up kwb's CUDA toolchain and CUTLASS headers.
//!
//! `cargo xtask setup` installs exactly these with `pip install --no-deps --target`
//! into a cache subfolder named by [`pin_hash`], so that changing any pin installs
//! a fresh toolchain next to the old one instead of mixing versions.

/// One pinned package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin {
    /// The PyPI distribution name.
    pub name: &'static str,
    /// The exact version.
    pub version: &'static str,
}

impl Pin {
    /// The pip requirement string, `name==version`.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.name, self.version)
    }
}

/// Every pinned package, in install order.
pub const PINS: &[Pin] = &[
    pin("nvidia-cuda-nvcc", "13.5.37"),
    pin("nvidia-cuda-crt", "13.5.37"),
    pin("nvidia-nvvm", "13.5.37"),
    pin("nvidia-cuda-runtime", "13.5.37"),
    // curand's headers: CUTLASS's reference utilities (`tensor_fill.h`), which its
    // examples include and their reproducers keep, include `curand_kernel.h`.
    pin("nvidia-curand", "10.4.4.72"),
    pin("nvidia-cuda-cccl", "13.3.5.0.6"),
    pin("nvidia-cuda-cuobjdump", "13.5.37"),
    pin("nvidia-cuda-nvdisasm", "13.5.37"),
    pin("nvidia-cutlass", "4.2.0.0"),
];

/// Build tools the project's own tests drive (the precompile hook's CMake project),
/// installed apart from the toolchain so that pinning one never reinstalls the other.
pub const BUILD_TOOLS: &[Pin] = &[pin("cmake", "4.1.2")];

/// Third-party kernels kwb is measured on (the corpus): flashinfer-python's GEMMs
/// (CUTLASS-, DeepGEMM- and hand-written), with the tvm-ffi headers its sources
/// include. Installed apart, like [`BUILD_TOOLS`]; nothing of theirs is in the repo.
pub const CORPUS: &[Pin] = &[
    pin("flashinfer-python", "0.7.2.post1"),
    pin("apache-tvm-ffi", "0.1.15.post2"),
];

/// [`CORPUS`] as pip requirements, one per line; the content of its marker.
pub fn corpus_list() -> String {
    requirements_text(CORPUS)
}

/// The short hash of [`corpus_list`]: it names the corpus's cache subfolder.
pub fn corpus_hash() -> String {
    short_hash(&corpus_list())
}

/// [`BUILD_TOOLS`] as pip requirements, one per line; the content of their marker.
pub fn tools_list() -> String {
    requirements_text(BUILD_TOOLS)
}

/// The short hash of [`tools_list`]: it names the build tools' cache subfolder.
pub fn tools_hash() -> String {
    short_hash(&tools_list())
}

const fn pin(name: &'static str, version: &'static str) -> Pin {
    Pin { name, version }
}

/// The pins as pip requirements, one per line; also the content of the install marker.
pub fn pin_list() -> String {
    requirements_text(PINS)
}

/// A short, stable hash of [`PINS`]: 12 hex digits of the FNV-1a 64-bit hash of
/// [`pin_list`]. It names the cache subfolder of the install.
pub fn pin_hash() -> String {
    short_hash(&pin_list())
}

fn requirements_text(pins: &[Pin]) -> String {
    pins.iter().map(|pin| pin.requirement() + "\n").collect()
}

fn short_hash(text: &str) -> String {
    format!("{:016x}", fnv1a64(text.as_bytes()))[..12].to_owned()
}

/// FNV-1a, 64 bits: tiny, and unlike `std`'s hashers its output is fixed forever.
fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn pin_hash_is_short_hex() {
        let hash = pin_hash();
        assert_eq!(hash.len(), 12);
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }

    #[test]
    fn changing_a_pin_changes_the_hash() {
        let mut pins = PINS.to_vec();
        pins[0].version = "13.5.38";
        assert_ne!(short_hash(&requirements_text(&pins)), pin_hash());
    }

    #[test]
    fn pins_are_exact_and_unique() {
        let mut names: Vec<&str> = PINS.iter().map(|pin| pin.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PINS.len());
        assert!(
            PINS.iter()
                .all(|pin| !pin.version.is_empty() && !pin.version.contains('*'))
        );
        assert!(pin_list().starts_with("nvidia-cuda-nvcc==13.5.37\n"));
    }
}
