//! The trace record: one warp's view of one probe, as `kwb::Record` in
//! `kwb_trace.cuh` lays it out.
//!
//! [`TraceRecord`] mirrors the device struct field by field (`#[repr(C, align(8))]`,
//! 224 bytes, little-endian, no padding). The layout test in `tests/layout.rs` parses
//! the header's declaration and checks every name, offset and size against
//! [`TraceRecord::FIELDS`].

use serde::Serialize;

use crate::layout::{Le, mirror};

/// "KWBR" read as a little-endian `u32`: the first field of every written record.
pub const RECORD_MAGIC: u32 = 0x5242_574B;
/// The value slots of every record; `KWB_TRACE_VALUES` (at most this) are filled.
pub const RECORD_VALUES: usize = 8;
/// The size of one record in bytes, in device memory and in the trace file.
pub const RECORD_SIZE: usize = 224;

mirror! {
    /// One trace record, field for field as the device writes it.
    #[repr(C, align(8))]
    #[derive(Debug, Clone, Copy, PartialEq, Serialize)]
    pub struct TraceRecord {
        /// [`RECORD_MAGIC`]; a slot that was never written holds 0.
        pub magic: u32,
        /// [`VERSION`](crate::VERSION).
        pub version: u32,
        /// The probe's site id, a key of the site table.
        pub site: u32,
        /// What the probe read, a [`Kind`] as a number.
        pub kind: u32,
        /// The instantiation tag: [`tag`](crate::tag) of the gate text.
        pub tag: u32,
        /// `blockIdx.x`.
        pub cta_x: u32,
        /// `blockIdx.y`.
        pub cta_y: u32,
        /// `blockIdx.z`.
        pub cta_z: u32,
        /// The warp index within the CTA.
        pub warp: u32,
        /// The lane that wrote the record (the lowest active lane).
        pub lane: u32,
        /// The lanes that contributed values.
        pub active_mask: u32,
        /// The K tile index; -1 outside the K loop.
        pub k_tile: i32,
        /// The CTA tile's first output row as the kernel computes it (the kernel's own
        /// origin local, e.g. `m0 = blockIdx.y * BM`); -1 where none was in scope.
        pub tile_m: i32,
        /// The CTA tile's first output column, likewise.
        pub tile_n: i32,
        /// Values count only when their row is below this (`i32::MAX`: all rows).
        pub row_bound: i32,
        /// The [`Axis`] of the row filter, as a number.
        pub row_axis: u32,
        /// Values that passed the row filter, summed over the warp.
        pub count: u32,
        /// The largest magnitude of the finite counted values (0 when none).
        pub absmax: f32,
        /// The smallest finite counted value (`+inf` when none; NaN when the build
        /// recorded absmax only, `KWB_TRACE_MINMAX=0`).
        pub vmin: f32,
        /// The largest finite counted value (`-inf` when none; NaN when not recorded).
        pub vmax: f32,
        /// Counted values that are NaN.
        pub nan_count: u32,
        /// Counted values that are infinite.
        pub inf_count: u32,
        /// Values looked at before the row filter.
        pub seen: u32,
        /// Filled slots of `values` and the coordinate arrays.
        pub nvalues: u32,
        /// The first counted values, per element in lane order.
        pub values: [f32; RECORD_VALUES],
        /// The logical m of each value; -1 when unknown.
        pub value_m: [i32; RECORD_VALUES],
        /// The logical n of each value; -1 when unknown.
        pub value_n: [i32; RECORD_VALUES],
        /// The logical k of each value; -1 when unknown.
        pub value_k: [i32; RECORD_VALUES],
    }
}

const _: () = assert!(std::mem::size_of::<TraceRecord>() == RECORD_SIZE);

/// What a probe reads (`kwb::Kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The A operand as the MMA consumes it.
    OperandA = 1,
    /// The B operand as the MMA consumes it.
    OperandB = 2,
    /// The accumulator where it is complete.
    Accumulator = 3,
    /// Values the epilogue computes or stores.
    Epilogue = 4,
    /// Data a load brought in.
    Load = 5,
    /// No values: the origin of the work tile the warp starts (`tile_m`, `tile_n`),
    /// which [`crate::decode`] gives the warp's later records that have none.
    TileContext = 6,
    /// No values: the site's probe reads a type the runtime's value model cannot read;
    /// [`TraceRecord::unprobed_type`] names it. The flush writes one per such site.
    NotProbed = 7,
}

impl Kind {
    /// Every kind, in numeric order.
    pub const ALL: [Kind; 7] = [
        Kind::OperandA,
        Kind::OperandB,
        Kind::Accumulator,
        Kind::Epilogue,
        Kind::Load,
        Kind::TileContext,
        Kind::NotProbed,
    ];

    /// The kind a record's `kind` field names, if any.
    pub fn from_u32(value: u32) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| *kind as u32 == value)
    }

    /// The name in the header's `enum class Kind`, e.g. `OperandA`.
    pub fn cpp_name(self) -> &'static str {
        match self {
            Kind::OperandA => "OperandA",
            Kind::OperandB => "OperandB",
            Kind::Accumulator => "Accumulator",
            Kind::Epilogue => "Epilogue",
            Kind::Load => "Load",
            Kind::TileContext => "TileContext",
            Kind::NotProbed => "NotProbed",
        }
    }

    /// A short name for people, e.g. `operand-a`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::OperandA => "operand-a",
            Kind::OperandB => "operand-b",
            Kind::Accumulator => "accumulator",
            Kind::Epilogue => "epilogue",
            Kind::Load => "load",
            Kind::TileContext => "tile-context",
            Kind::NotProbed => "not-probed",
        }
    }
}

/// A logical axis of the GEMM (`kwb::Axis`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// The output's rows.
    M = 0,
    /// The output's columns.
    N = 1,
    /// The reduction.
    K = 2,
}

impl Axis {
    /// Every axis, in numeric order.
    pub const ALL: [Axis; 3] = [Axis::M, Axis::N, Axis::K];

    /// The axis a record's `row_axis` field names, if any.
    pub fn from_u32(value: u32) -> Option<Axis> {
        Axis::ALL.into_iter().find(|axis| *axis as u32 == value)
    }

    /// The name in the header's `enum class Axis`.
    pub fn cpp_name(self) -> &'static str {
        match self {
            Axis::M => "M",
            Axis::N => "N",
            Axis::K => "K",
        }
    }
}

/// One sampled value with its logical coordinates (`None` where unknown).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// The value as a float.
    pub value: f32,
    /// Its logical m.
    pub m: Option<i32>,
    /// Its logical n.
    pub n: Option<i32>,
    /// Its logical k.
    pub k: Option<i32>,
}

impl TraceRecord {
    /// Decodes a record from its little-endian bytes.
    pub fn from_le_bytes(bytes: &[u8; RECORD_SIZE]) -> TraceRecord {
        let mut le = Le::new(bytes);
        TraceRecord {
            magic: le.u32(),
            version: le.u32(),
            site: le.u32(),
            kind: le.u32(),
            tag: le.u32(),
            cta_x: le.u32(),
            cta_y: le.u32(),
            cta_z: le.u32(),
            warp: le.u32(),
            lane: le.u32(),
            active_mask: le.u32(),
            k_tile: le.i32(),
            tile_m: le.i32(),
            tile_n: le.i32(),
            row_bound: le.i32(),
            row_axis: le.u32(),
            count: le.u32(),
            absmax: le.f32(),
            vmin: le.f32(),
            vmax: le.f32(),
            nan_count: le.u32(),
            inf_count: le.u32(),
            seen: le.u32(),
            nvalues: le.u32(),
            values: le.f32s(),
            value_m: le.i32s(),
            value_n: le.i32s(),
            value_k: le.i32s(),
        }
    }

    /// Encodes the record as the device lays it out.
    pub fn to_le_bytes(&self) -> [u8; RECORD_SIZE] {
        let mut out = Vec::with_capacity(RECORD_SIZE);
        for word in [
            self.magic,
            self.version,
            self.site,
            self.kind,
            self.tag,
            self.cta_x,
            self.cta_y,
            self.cta_z,
            self.warp,
            self.lane,
            self.active_mask,
        ] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        for word in [self.k_tile, self.tile_m, self.tile_n, self.row_bound] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&self.row_axis.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        for value in [self.absmax, self.vmin, self.vmax] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        for word in [self.nan_count, self.inf_count, self.seen, self.nvalues] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        for value in self.values {
            out.extend_from_slice(&value.to_le_bytes());
        }
        for axis in [self.value_m, self.value_n, self.value_k] {
            for coord in axis {
                out.extend_from_slice(&coord.to_le_bytes());
            }
        }
        let mut bytes = [0; RECORD_SIZE];
        bytes.copy_from_slice(&out);
        bytes
    }

    /// The record's kind, when it is one this crate knows.
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_u32(self.kind)
    }

    /// The axis of the row filter, when it is one this crate knows.
    pub fn row_axis(&self) -> Option<Axis> {
        Axis::from_u32(self.row_axis)
    }

    /// The row bound, `None` when every row counted.
    pub fn row_bound(&self) -> Option<i32> {
        (self.row_bound != i32::MAX).then_some(self.row_bound)
    }

    /// The K tile, `None` outside the K loop.
    pub fn k_tile(&self) -> Option<i32> {
        (self.k_tile >= 0).then_some(self.k_tile)
    }

    /// The type a [`Kind::NotProbed`] record names: the zero-terminated text the flush
    /// wrote over the value slots and their coordinates (`None` for other kinds).
    pub fn unprobed_type(&self) -> Option<String> {
        if self.kind() != Some(Kind::NotProbed) {
            return None;
        }
        let mut bytes = Vec::with_capacity(4 * 4 * RECORD_VALUES);
        let words = self.values.iter().map(|v| v.to_bits()).chain(
            self.value_m
                .iter()
                .chain(&self.value_n)
                .chain(&self.value_k)
                .map(|&w| w as u32),
        );
        for word in words {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }

    /// The filled value slots with their coordinates.
    pub fn samples(&self) -> impl Iterator<Item = Sample> + '_ {
        let known = |coord: i32| (coord >= 0).then_some(coord);
        let filled = (self.nvalues as usize).min(RECORD_VALUES);
        (0..filled).map(move |i| Sample {
            value: self.values[i],
            m: known(self.value_m[i]),
            n: known(self.value_n[i]),
            k: known(self.value_k[i]),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_not_probed_record_names_its_type() {
        let mut r = distinct();
        assert_eq!(r.unprobed_type(), None);
        r.kind = Kind::NotProbed as u32;
        let name = b"__nv_bfloat162";
        let mut bytes = [0u8; 128];
        bytes[..name.len()].copy_from_slice(name);
        let word = |i: usize| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
        for i in 0..RECORD_VALUES {
            r.values[i] = f32::from_bits(word(i));
            r.value_m[i] = word(8 + i) as i32;
            r.value_n[i] = word(16 + i) as i32;
            r.value_k[i] = word(24 + i) as i32;
        }
        assert_eq!(r.unprobed_type().as_deref(), Some("__nv_bfloat162"));
    }

    /// A record whose every field holds a different value.
    pub(crate) fn distinct() -> TraceRecord {
        TraceRecord {
            magic: RECORD_MAGIC,
            version: crate::VERSION,
            site: 3,
            kind: Kind::Accumulator as u32,
            tag: 0xdead_beef,
            cta_x: 5,
            cta_y: 6,
            cta_z: 7,
            warp: 2,
            lane: 0,
            active_mask: 0xffff_ffff,
            k_tile: 11,
            tile_m: 128,
            tile_n: -1,
            row_bound: 8,
            row_axis: Axis::N as u32,
            count: 96,
            absmax: 1.3,
            vmin: -1.25,
            vmax: 3.0,
            nan_count: 1,
            inf_count: 2,
            seen: 128,
            nvalues: 3,
            values: [0.5, -1.25, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            value_m: [0, 1, 2, -1, -1, -1, -1, -1],
            value_n: [4, 5, 6, -1, -1, -1, -1, -1],
            value_k: [-1; RECORD_VALUES],
        }
    }

    #[test]
    fn bytes_round_trip() {
        let record = distinct();
        assert_eq!(TraceRecord::from_le_bytes(&record.to_le_bytes()), record);
    }

    #[test]
    fn fields_land_at_their_offsets() {
        let bytes = distinct().to_le_bytes();
        let at = |name: &str| {
            let field = TraceRecord::FIELDS
                .iter()
                .find(|field| field.name == name)
                .unwrap();
            &bytes[field.offset..field.offset + field.size]
        };
        assert_eq!(at("magic"), b"KWBR");
        assert_eq!(at("tag"), 0xdead_beef_u32.to_le_bytes());
        assert_eq!(at("tile_n"), (-1_i32).to_le_bytes());
        assert_eq!(at("absmax"), 1.3_f32.to_le_bytes());
        assert_eq!(at("vmin"), (-1.25_f32).to_le_bytes());
        assert_eq!(at("vmax"), 3.0_f32.to_le_bytes());
        assert_eq!(at("nvalues"), 3_u32.to_le_bytes());
        assert_eq!(&at("values")[4..8], (-1.25_f32).to_le_bytes());
        assert_eq!(&at("value_n")[8..12], 6_i32.to_le_bytes());
        assert_eq!(&at("value_k")[28..32], (-1_i32).to_le_bytes());
    }

    #[test]
    fn fields_leave_no_padding() {
        let mut end = 0;
        for field in TraceRecord::FIELDS {
            assert_eq!(field.offset, end, "padding before {}", field.name);
            end += field.size;
        }
        assert_eq!(end, RECORD_SIZE);
    }

    #[test]
    fn samples_keep_filled_slots_and_hide_unknown_coordinates() {
        let samples: Vec<Sample> = distinct().samples().collect();
        assert_eq!(samples.len(), 3);
        assert_eq!(
            samples[1],
            Sample {
                value: -1.25,
                m: Some(1),
                n: Some(5),
                k: None
            }
        );
    }

    #[test]
    fn kinds_and_axes_decode_their_numbers() {
        assert_eq!(Kind::from_u32(1), Some(Kind::OperandA));
        assert_eq!(Kind::from_u32(5), Some(Kind::Load));
        assert_eq!(Kind::from_u32(0), None);
        assert_eq!(Axis::from_u32(1), Some(Axis::N));
        assert_eq!(Axis::from_u32(3), None);
        let record = distinct();
        assert_eq!(record.kind(), Some(Kind::Accumulator));
        assert_eq!(record.row_axis(), Some(Axis::N));
        assert_eq!(record.row_bound(), Some(8));
        assert_eq!(record.k_tile(), Some(11));
    }
}
