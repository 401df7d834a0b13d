//! The 128-byte `CUtensorMap` that `cuTensorMapEncodeTiled` writes, read back into
//! the parameters it was encoded from ([`decode`]) and held to the map a kernel should
//! have received ([`check_map`]).
//!
//! The driver documents the map as opaque, so the layout here is reverse-engineered:
//! measured by encoding maps that differ in one parameter and reading which bits
//! change, first on sm_120, then on sm_90 (an H200, driver 580.159, CUDA 13.0), where
//! every map of `cargo xtask gpu-tensormap`'s table that the driver accepts decodes to
//! its parameters. That task repeats the measurement against the driver of the
//! machine it runs on and reports every case where this decoder disagrees.
//!
//! The layout, as little-endian u32 words (`wN` at byte `4 * N`):
//!
//! | word | contents |
//! |---|---|
//! | w0, w1 | global address, verbatim |
//! | w2 | bit 0 im2col; 6:4 rank - 1; 10:7 element type; 12:11 interleave; 14:13 min(swizzle, 3); 15 NaN fill; 16 tf32; 18:17 L2 promotion; 20:19 max(swizzle - 3, 0); 21 large tensor |
//! | w3..w6 | bits 35:4 of `globalStrides[i]` |
//! | w7 | bits 39:36 of `globalStrides[i]`, 4 bits each, `globalStrides[0]` lowest |
//! | w8..w12 | `globalDim[i] - 1` |
//! | w13 | 14:0 `elementStrides[i] - 1`, 3 bits each; 31:24 `boxDim[0] - 1` |
//! | w14 | `boxDim[1..5] - 1`, one byte each, `boxDim[1]` lowest |
//! | w16 | bytes of one box: the product of `boxDim[i] / elementStrides[i]` (rounded down) and the element size |
//! | w18 | swizzle span: 0x10 none, 0x100 32 B, 0x200 64 B, 0x400 128 B |
//!
//! Every other bit, and every field of a dimension beyond the rank, is zero. The
//! large-tensor bit is the driver's own: set on sm_120 for a tensor spanning at least
//! 128 KiB, never set on sm_90.
//!
//! Invariant: decode never guesses. A set bit that no decoded field holds, or a field
//! value with no known meaning, makes [`decode`] fail naming the word and the bits;
//! nothing is ignored, so a map from a driver that lays it out differently is
//! reported, never misread.

use std::fmt;

use serde::Serialize;

/// The element type of a map: `CUtensorMapDataType` without the packed sub-byte
/// types, whose hardware codes are not known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MapDtype {
    U8,
    U16,
    U32,
    I32,
    U64,
    I64,
    F16,
    F32,
    F64,
    Bf16,
    F32Ftz,
    Tf32,
    Tf32Ftz,
}

/// Every type, in `CUtensorMapDataType` order: a type's index is its API value.
const API_ORDER: [MapDtype; 13] = [
    MapDtype::U8,
    MapDtype::U16,
    MapDtype::U32,
    MapDtype::I32,
    MapDtype::U64,
    MapDtype::I64,
    MapDtype::F16,
    MapDtype::F32,
    MapDtype::F64,
    MapDtype::Bf16,
    MapDtype::F32Ftz,
    MapDtype::Tf32,
    MapDtype::Tf32Ftz,
];

impl MapDtype {
    /// The type of a `CUtensorMapDataType` value.
    pub fn from_api(value: u32) -> Option<MapDtype> {
        API_ORDER.get(value as usize).copied()
    }

    /// Its `CUtensorMapDataType` value.
    pub fn api(self) -> u32 {
        API_ORDER.iter().position(|&d| d == self).unwrap_or(0) as u32
    }

    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            MapDtype::U8 => 1,
            MapDtype::U16 | MapDtype::F16 | MapDtype::Bf16 => 2,
            MapDtype::U32
            | MapDtype::I32
            | MapDtype::F32
            | MapDtype::F32Ftz
            | MapDtype::Tf32
            | MapDtype::Tf32Ftz => 4,
            MapDtype::U64 | MapDtype::I64 | MapDtype::F64 => 8,
        }
    }

    /// The 4-bit hardware code in w2 and the tf32 flag.
    fn hardware(self) -> (u32, bool) {
        match self {
            MapDtype::Tf32 => (7, true),
            MapDtype::Tf32Ftz => (8, true),
            MapDtype::F32Ftz => (8, false),
            MapDtype::F64 => (9, false),
            MapDtype::Bf16 => (10, false),
            other => (other.api(), false),
        }
    }

    fn from_hardware(code: u32, tf32: bool) -> Option<MapDtype> {
        API_ORDER
            .iter()
            .copied()
            .find(|d| d.hardware() == (code, tf32))
    }
}

impl fmt::Display for MapDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            MapDtype::U8 => "u8",
            MapDtype::U16 => "u16",
            MapDtype::U32 => "u32",
            MapDtype::I32 => "i32",
            MapDtype::U64 => "u64",
            MapDtype::I64 => "i64",
            MapDtype::F16 => "f16",
            MapDtype::F32 => "f32",
            MapDtype::F64 => "f64",
            MapDtype::Bf16 => "bf16",
            MapDtype::F32Ftz => "f32-ftz",
            MapDtype::Tf32 => "tf32",
            MapDtype::Tf32Ftz => "tf32-ftz",
        };
        f.write_str(name)
    }
}

/// The shared-memory swizzle: `CUtensorMapSwizzle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Swizzle {
    None,
    B32,
    B64,
    B128,
    B128Atom32,
    B128Atom32Flip8,
    B128Atom64,
}

/// Every swizzle, in `CUtensorMapSwizzle` order.
const SWIZZLES: [Swizzle; 7] = [
    Swizzle::None,
    Swizzle::B32,
    Swizzle::B64,
    Swizzle::B128,
    Swizzle::B128Atom32,
    Swizzle::B128Atom32Flip8,
    Swizzle::B128Atom64,
];

impl Swizzle {
    /// The swizzle of a `CUtensorMapSwizzle` value.
    pub fn from_api(value: u32) -> Option<Swizzle> {
        SWIZZLES.get(value as usize).copied()
    }

    /// Its `CUtensorMapSwizzle` value.
    pub fn api(self) -> u32 {
        SWIZZLES.iter().position(|&s| s == self).unwrap_or(0) as u32
    }

    /// The span its chunks are permuted within, in bytes (None without a swizzle).
    pub fn span(self) -> Option<u64> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            _ => Some(128),
        }
    }

    /// What w18 holds for it.
    fn span_word(self) -> u32 {
        match self.span() {
            None => 0x10,
            Some(bytes) => (bytes as u32) << 3,
        }
    }
}

impl fmt::Display for Swizzle {
    /// `none`, `32B`, `64B`, `128B`, or a 128-byte swizzle with its atom
    /// (`128B-atom-32B`, `128B-atom-32B-flip-8B`, `128B-atom-64B`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Swizzle::None => "none",
            Swizzle::B32 => "32B",
            Swizzle::B64 => "64B",
            Swizzle::B128 => "128B",
            Swizzle::B128Atom32 => "128B-atom-32B",
            Swizzle::B128Atom32Flip8 => "128B-atom-32B-flip-8B",
            Swizzle::B128Atom64 => "128B-atom-64B",
        })
    }
}

/// What a map holds, as the parameters of `cuTensorMapEncodeTiled` (innermost
/// dimension first) plus the two values the driver derives from them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TensorMapFields {
    pub address: u64,
    pub rank: u32,
    pub dtype: MapDtype,
    /// `globalDim`, `rank` of them.
    pub dims: Vec<u64>,
    /// `globalStrides` in bytes, `rank - 1` of them: the strides of dims 1...
    pub strides: Vec<u64>,
    /// `boxDim`, `rank` of them.
    pub box_dim: Vec<u32>,
    /// `elementStrides`, `rank` of them.
    pub element_strides: Vec<u32>,
    /// `CUtensorMapInterleave`: 0 none, 1 16 B, 2 32 B.
    pub interleave: u32,
    pub swizzle: Swizzle,
    /// `CUtensorMapL2promotion`: 0 none, 1 64 B, 2 128 B, 3 256 B.
    pub l2_promotion: u32,
    /// Out-of-bounds elements read as NaN (`..._NAN_REQUEST_ZERO_FMA`), not zero.
    pub oob_nan: bool,
    /// An im2col map. Always false from [`decode`]: the words of an im2col map are not
    /// known, so it is refused.
    pub im2col: bool,
    /// Derived by the driver: the bytes of one box (w16), the product of
    /// `box_dim[i] / element_strides[i]` (rounded down) and the element size.
    pub box_bytes: u32,
    /// Derived by the driver (w2 bit 21): on sm_120 the tensor spans at least 128 KiB;
    /// never set on sm_90.
    pub large: bool,
}

/// Bits of a map that [`decode`] cannot account for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DecodeError {
    pub unexplained: Vec<Unexplained>,
}

/// Bits of one word that no known field explains.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unexplained {
    /// The word, 0..32 (bytes `4 * word..4 * word + 4`).
    pub word: usize,
    /// The bits in question, as the map holds them.
    pub bits: u32,
    pub why: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, u) in self.unexplained.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "w{} bits {:#010x}: {}", u.word, u.bits, u.why)?;
        }
        Ok(())
    }
}

impl std::error::Error for DecodeError {}

const WORDS: usize = 32;
const W_FLAGS: usize = 2;
const W_STRIDES: usize = 3;
const W_STRIDES_HIGH: usize = 7;
const W_DIMS: usize = 8;
const W_ESTRIDES: usize = 13;
const W_BOX: usize = 14;
const W_BOX_BYTES: usize = 16;
const W_SPAN: usize = 18;

/// A bit field of w2: (lowest bit, width).
type Bits = (u32, u32);
const IM2COL: Bits = (0, 1);
const RANK: Bits = (4, 3);
const DTYPE: Bits = (7, 4);
const INTERLEAVE: Bits = (11, 2);
const SWIZZLE_LOW: Bits = (13, 2);
const OOB_NAN: Bits = (15, 1);
const TF32: Bits = (16, 1);
const L2: Bits = (17, 2);
const SWIZZLE_HIGH: Bits = (19, 2);
const LARGE: Bits = (21, 1);

fn mask((shift, width): Bits) -> u32 {
    ((1u32 << width) - 1) << shift
}

fn get(word: u32, bits: Bits) -> u32 {
    (word & mask(bits)) >> bits.0
}

fn put(word: &mut u32, bits: Bits, value: u32) {
    *word |= (value << bits.0) & mask(bits);
}

/// Decodes a map into its parameters, or names every bit it cannot account for.
pub fn decode(bytes: &[u8; 128]) -> Result<TensorMapFields, DecodeError> {
    let w = words(bytes);
    // The bits each word's decoded fields hold; whatever else is set is unexplained.
    let mut claimed = [0u32; WORDS];
    let mut problems = Vec::new();
    let mut problem = |word: usize, bits: u32, why: String| {
        problems.push(Unexplained { word, bits, why });
    };
    let flags = w[W_FLAGS];
    for bits in [
        IM2COL,
        RANK,
        DTYPE,
        INTERLEAVE,
        SWIZZLE_LOW,
        OOB_NAN,
        TF32,
        L2,
        SWIZZLE_HIGH,
        LARGE,
    ] {
        claimed[W_FLAGS] |= mask(bits);
    }
    claimed[0] = u32::MAX;
    claimed[1] = u32::MAX;
    if get(flags, IM2COL) == 1 {
        problem(
            W_FLAGS,
            mask(IM2COL),
            "im2col map: its words are not known".to_owned(),
        );
    }
    let rank = get(flags, RANK) + 1;
    if rank > 5 {
        problem(W_FLAGS, flags & mask(RANK), format!("rank {rank}: above 5"));
    }
    let tf32 = get(flags, TF32) == 1;
    let code = get(flags, DTYPE);
    let dtype = MapDtype::from_hardware(code, tf32);
    if dtype.is_none() {
        problem(
            W_FLAGS,
            flags & (mask(DTYPE) | mask(TF32)),
            format!("element type code {code} with the tf32 flag {tf32}: not known"),
        );
    }
    let interleave = get(flags, INTERLEAVE);
    if interleave > 2 {
        problem(
            W_FLAGS,
            flags & mask(INTERLEAVE),
            format!("interleave {interleave}: not known"),
        );
    }
    let (low, high) = (get(flags, SWIZZLE_LOW), get(flags, SWIZZLE_HIGH));
    let swizzle = match (low, high) {
        (low, 0) => Swizzle::from_api(low),
        (3, high) => Swizzle::from_api(3 + high),
        _ => None,
    };
    match swizzle {
        None => problem(
            W_FLAGS,
            flags & (mask(SWIZZLE_LOW) | mask(SWIZZLE_HIGH)),
            format!("swizzle fields {low} and {high}: not known together"),
        ),
        Some(swizzle) if w[W_SPAN] != swizzle.span_word() => problem(
            W_SPAN,
            w[W_SPAN],
            format!(
                "swizzle span word, where swizzle {swizzle:?} has {:#x}",
                swizzle.span_word()
            ),
        ),
        Some(_) => {}
    }
    claimed[W_SPAN] = u32::MAX;
    let used = rank.min(5) as usize;
    let dims: Vec<u64> = (0..used).map(|i| u64::from(w[W_DIMS + i]) + 1).collect();
    let strides: Vec<u64> = (0..used.saturating_sub(1))
        .map(|i| {
            let high = (w[W_STRIDES_HIGH] >> (4 * i)) & 0xf;
            u64::from(high) << 36 | u64::from(w[W_STRIDES + i]) << 4
        })
        .collect();
    for i in 0..used {
        claimed[W_DIMS + i] = u32::MAX;
        claimed[W_ESTRIDES] |= 0b111 << (3 * i);
    }
    for i in 0..used.saturating_sub(1) {
        claimed[W_STRIDES + i] = u32::MAX;
        claimed[W_STRIDES_HIGH] |= 0xf << (4 * i);
    }
    let element_strides: Vec<u32> = (0..used)
        .map(|i| ((w[W_ESTRIDES] >> (3 * i)) & 0b111) + 1)
        .collect();
    let mut box_dim = vec![(w[W_ESTRIDES] >> 24) + 1];
    claimed[W_ESTRIDES] |= 0xff << 24;
    for i in 1..used {
        box_dim.push(((w[W_BOX] >> (8 * (i - 1))) & 0xff) + 1);
        claimed[W_BOX] |= 0xff << (8 * (i - 1));
    }
    claimed[W_BOX_BYTES] = u32::MAX;
    for (word, (&value, &held)) in w.iter().zip(&claimed).enumerate() {
        let stray = value & !held;
        if stray != 0 {
            problem(word, stray, reserved_why(word, rank).to_owned());
        }
    }
    match (dtype, swizzle) {
        (Some(dtype), Some(swizzle)) if problems.is_empty() => Ok(TensorMapFields {
            address: u64::from(w[0]) | u64::from(w[1]) << 32,
            rank,
            dtype,
            dims,
            strides,
            box_dim,
            element_strides,
            interleave,
            swizzle,
            l2_promotion: get(flags, L2),
            oob_nan: get(flags, OOB_NAN) == 1,
            im2col: false,
            box_bytes: w[W_BOX_BYTES],
            large: get(flags, LARGE) == 1,
        }),
        _ => Err(DecodeError {
            unexplained: problems,
        }),
    }
}

/// Why a set bit outside every decoded field is unexplained.
fn reserved_why(word: usize, rank: u32) -> &'static str {
    match word {
        W_STRIDES..=6 if word - W_STRIDES + 1 >= rank as usize => {
            "the stride of a dimension beyond the rank"
        }
        W_STRIDES_HIGH => "high stride bits of a dimension beyond the rank, or no known field",
        W_DIMS..=12 if word - W_DIMS >= rank as usize => "the size of a dimension beyond the rank",
        W_ESTRIDES | W_BOX => "a box or element stride field beyond the rank, or no known field",
        _ => "no known field",
    }
}

/// The map's 32 little-endian words.
fn words(bytes: &[u8; 128]) -> [u32; WORDS] {
    let mut w = [0u32; WORDS];
    for (word, chunk) in w.iter_mut().zip(bytes.chunks_exact(4)) {
        *word = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    w
}

/// The bytes this layout gives `fields`: what a driver that follows it writes, so a
/// report can show which words of a real map differ from it. Fields beyond the
/// layout's widths are cut to them.
pub fn encode_layout(fields: &TensorMapFields) -> [u8; 128] {
    let mut w = [0u32; WORDS];
    w[0] = fields.address as u32;
    w[1] = (fields.address >> 32) as u32;
    let flags = &mut w[W_FLAGS];
    let (code, tf32) = fields.dtype.hardware();
    let swizzle = fields.swizzle.api();
    put(flags, IM2COL, u32::from(fields.im2col));
    put(flags, RANK, fields.rank.saturating_sub(1));
    put(flags, DTYPE, code);
    put(flags, INTERLEAVE, fields.interleave);
    put(flags, SWIZZLE_LOW, swizzle.min(3));
    put(flags, OOB_NAN, u32::from(fields.oob_nan));
    put(flags, TF32, u32::from(tf32));
    put(flags, L2, fields.l2_promotion);
    put(flags, SWIZZLE_HIGH, swizzle.saturating_sub(3));
    put(flags, LARGE, u32::from(fields.large));
    for (i, stride) in fields.strides.iter().take(4).enumerate() {
        w[W_STRIDES + i] = (stride >> 4) as u32;
        w[W_STRIDES_HIGH] |= ((stride >> 36) as u32 & 0xf) << (4 * i);
    }
    for (i, dim) in fields.dims.iter().take(5).enumerate() {
        w[W_DIMS + i] = dim.saturating_sub(1) as u32;
    }
    for (i, stride) in fields.element_strides.iter().take(5).enumerate() {
        w[W_ESTRIDES] |= (stride.saturating_sub(1) & 0b111) << (3 * i);
    }
    for (i, extent) in fields.box_dim.iter().take(5).enumerate() {
        let byte = extent.saturating_sub(1) & 0xff;
        match i {
            0 => w[W_ESTRIDES] |= byte << 24,
            _ => w[W_BOX] |= byte << (8 * (i - 1)),
        }
    }
    w[W_BOX_BYTES] = fields.box_bytes;
    w[W_SPAN] = fields.swizzle.span_word();
    let mut bytes = [0u8; 128];
    for (chunk, word) in bytes.chunks_exact_mut(4).zip(w) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    bytes
}

/// The map a kernel should have received: what the launcher meant to encode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExpectedMap {
    pub address: u64,
    pub dtype: MapDtype,
    /// Innermost first; its length is the rank.
    pub dims: Vec<u64>,
    /// Bytes, `dims.len() - 1` of them.
    pub strides: Vec<u64>,
}

/// One field of a map that differs from its expectation, or breaks a rule a map must
/// keep whatever it is expected to be (then `expected` states the rule).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapDiff {
    /// The field, e.g. `dims[1]`.
    pub field: &'static str,
    pub got: String,
    pub expected: String,
    /// One sentence on what the difference means.
    pub why: String,
}

const DIM_NAMES: [&str; 5] = ["dims[0]", "dims[1]", "dims[2]", "dims[3]", "dims[4]"];
const STRIDE_NAMES: [&str; 4] = ["strides[0]", "strides[1]", "strides[2]", "strides[3]"];
const BOX_NAMES: [&str; 5] = [
    "box_dim[0]",
    "box_dim[1]",
    "box_dim[2]",
    "box_dim[3]",
    "box_dim[4]",
];
const ELEMENT_STRIDE_NAMES: [&str; 5] = [
    "element_strides[0]",
    "element_strides[1]",
    "element_strides[2]",
    "element_strides[3]",
    "element_strides[4]",
];

/// The name of entry `i` of a list field; `fallback` past the names there are.
fn indexed(names: &[&'static str], fallback: &'static str, i: usize) -> &'static str {
    names.get(i).copied().unwrap_or(fallback)
}

fn shown<T: fmt::Display>(value: Option<&T>) -> String {
    value.map_or_else(|| "-".to_owned(), ToString::to_string)
}

/// Every difference between a decoded map and its expectation, then every rule of a
/// well-formed map it breaks, in field order.
pub fn check_map(got: &TensorMapFields, expected: &ExpectedMap) -> Vec<MapDiff> {
    let mut diffs = Vec::new();
    if got.address != expected.address {
        let (distance, side) = match got.address > expected.address {
            true => (got.address - expected.address, "past"),
            false => (expected.address - got.address, "before"),
        };
        diffs.push(MapDiff {
            field: "address",
            got: format!("{:#x}", got.address),
            expected: format!("{:#x}", expected.address),
            why: format!("the map starts {distance} bytes {side} the expected buffer"),
        });
    }
    if got.rank as usize != expected.dims.len() {
        diffs.push(MapDiff {
            field: "rank",
            got: got.rank.to_string(),
            expected: expected.dims.len().to_string(),
            why: "the map has another number of dimensions".to_owned(),
        });
    }
    if got.dtype != expected.dtype {
        let why = match got.dtype.size() == expected.dtype.size() {
            true => "another type of the same size: values are read as the wrong type",
            false => "another element size: every extent and offset in elements is off",
        };
        diffs.push(MapDiff {
            field: "dtype",
            got: got.dtype.to_string(),
            expected: expected.dtype.to_string(),
            why: why.to_owned(),
        });
    }
    for i in 0..got.dims.len().max(expected.dims.len()) {
        let (g, e) = (got.dims.get(i), expected.dims.get(i));
        if g == e {
            continue;
        }
        let why = match g.and_then(|g| expected.dims.iter().position(|d| d == g)) {
            Some(j) => format!("equals the expected dims[{j}]: dimensions swapped"),
            None => "the tensor's extent differs along this dimension".to_owned(),
        };
        diffs.push(MapDiff {
            field: indexed(&DIM_NAMES, "dims", i),
            got: shown(g),
            expected: shown(e),
            why,
        });
    }
    let size = got.dtype.size();
    for i in 0..got.strides.len().max(expected.strides.len()) {
        let (g, e) = (got.strides.get(i), expected.strides.get(i));
        if g == e {
            continue;
        }
        let why = match (g, e) {
            (Some(g), Some(e)) if g % size == 0 && e % size == 0 => format!(
                "the pitch is {} elements where {} are expected",
                g / size,
                e / size
            ),
            _ => "the pitch differs".to_owned(),
        };
        diffs.push(MapDiff {
            field: indexed(&STRIDE_NAMES, "strides", i),
            got: shown(g),
            expected: shown(e),
            why,
        });
    }
    diffs.extend(consistency(got));
    diffs
}

/// The rules of a well-formed map that `map` breaks, whatever it was meant to be.
fn consistency(map: &TensorMapFields) -> Vec<MapDiff> {
    let mut diffs = Vec::new();
    let mut rule = |field: &'static str, got: String, expected: String, why: &str| {
        diffs.push(MapDiff {
            field,
            got,
            expected,
            why: why.to_owned(),
        });
    };
    let size = map.dtype.size();
    for (i, &extent) in map.box_dim.iter().enumerate() {
        let field = indexed(&BOX_NAMES, "box_dim", i);
        if !(1..=256).contains(&extent) {
            rule(
                field,
                extent.to_string(),
                "1..=256".to_owned(),
                "a box holds 1 to 256 elements along each dimension",
            );
        }
        if let Some(&dim) = map.dims.get(i)
            && u64::from(extent) > dim
        {
            rule(
                field,
                extent.to_string(),
                format!("<= {dim}"),
                "the box is larger than the tensor along this dimension",
            );
        }
    }
    let inner = map.box_dim.first().map(|&b| u64::from(b) * size);
    if map.interleave == 0
        && let Some(inner) = inner
    {
        if inner % 16 != 0 {
            rule(
                "box_dim[0]",
                format!("{inner} bytes"),
                "a multiple of 16 bytes".to_owned(),
                "the box's inner extent must be whole 16-byte chunks",
            );
        }
        if let Some(span) = map.swizzle.span()
            && inner > span
        {
            rule(
                "swizzle",
                format!("{inner}-byte inner box"),
                format!("<= {span} bytes"),
                "the box's inner extent exceeds the swizzle span",
            );
        }
    }
    // The extent in bytes that each stride must cover: the dimension below it.
    let mut below = map.dims.first().map(|&d| d * size);
    for (i, &stride) in map.strides.iter().enumerate() {
        let field = indexed(&STRIDE_NAMES, "strides", i);
        if stride % 16 != 0 {
            rule(
                field,
                stride.to_string(),
                "a multiple of 16".to_owned(),
                "strides are whole 16-byte chunks",
            );
        }
        if let Some(extent) = below
            && stride < extent
        {
            rule(
                field,
                stride.to_string(),
                format!(">= {extent}"),
                "the stride is shorter than the dimension below it: rows overlap",
            );
        }
        below = map.dims.get(i + 1).map(|&d| d * stride);
    }
    for (i, &step) in map.element_strides.iter().enumerate() {
        if !(1..=8).contains(&step) {
            rule(
                indexed(&ELEMENT_STRIDE_NAMES, "element_strides", i),
                step.to_string(),
                "1..=8".to_owned(),
                "an element stride is 1 to 8",
            );
        }
    }
    if map.interleave != 0 {
        rule(
            "interleave",
            map.interleave.to_string(),
            "0 (none)".to_owned(),
            "an interleaved map is not the layout of a GEMM operand",
        );
    }
    diffs
}

#[cfg(test)]
mod tests;
