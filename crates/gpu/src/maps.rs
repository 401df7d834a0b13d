//! The dynamic TMA check: the `CUtensorMap`s the kernel received, as the launcher's
//! own encoders wrote them on the first rung, decoded by kwb-diagnose and held to the
//! canonical map of the buffer they cover. Pure; the worker only reports the bytes and
//! the buffers' addresses.
//!
//! The canonical map of an operand is its storage (see [`crate::plan`]): innermost the
//! `cols` contiguous elements of a row (K for A and B, N for C and D), then the rows,
//! `ld` elements apart, starting at the buffer's base.

use kwb_diagnose::{ExpectedMap, MapDiff, MapDtype, TensorMapFields, check_map, decode};
use kwb_ladder::Dtype;
use serde::Serialize;

use crate::job::unhex;
use crate::plan::{Plan, Role};

/// One map the kernel received.
#[derive(Debug, Clone, Serialize)]
pub struct MapReading {
    /// The kernel parameter it was passed as.
    pub param: String,
    /// Its 128 bytes, in hex.
    pub bytes_hex: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decoded: Option<TensorMapFields>,
    /// Why it could not be decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_error: Option<String>,
    /// The role of the buffer its global address lies in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covers: Option<String>,
    /// How it differs from the canonical map of that buffer, then the rules of a
    /// well-formed map it breaks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diffs: Vec<MapDiff>,
}

impl MapReading {
    /// One line on a map the kernel received: what it holds, and whether it is the
    /// canonical map of the buffer it covers.
    pub fn line(&self) -> String {
        let m = self;
        let covers = m.covers.as_deref().unwrap_or("none of the run's buffers");
        let Some(f) = &m.decoded else {
            return format!(
                "map {}: not decoded ({})",
                m.param,
                m.decode_error.as_deref().unwrap_or("no bytes")
            );
        };
        let list = |v: &[String]| v.join(", ");
        let swizzle = f.swizzle;
        let judged = match (m.diffs.as_slice(), &m.covers) {
            ([], Some(role)) => format!("matches {role}"),
            ([], None) => "well-formed".to_owned(),
            (diffs, _) => format!(
                "differs: {}",
                diffs
                    .iter()
                    .map(|d| format!("{} {} (expected {}: {})", d.field, d.got, d.expected, d.why))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        format!(
            "map {} (covers {covers}): dims {{{}}} strides {{{}}} box {{{}}} {} swizzle {swizzle}: {judged}",
            m.param,
            list(&f.dims.iter().map(u64::to_string).collect::<Vec<_>>()),
            list(&f.strides.iter().map(u64::to_string).collect::<Vec<_>>()),
            list(&f.box_dim.iter().map(u32::to_string).collect::<Vec<_>>()),
            f.dtype,
        )
    }
}

/// Each reported map, read against the run's buffers: (role name, address, bytes).
pub fn readings(
    plan: &Plan,
    buffers: &[(String, u64, u64)],
    maps: &[(String, String)],
) -> Vec<MapReading> {
    maps.iter()
        .map(|(param, hex)| reading(plan, buffers, param, hex))
        .collect()
}

/// One map, read against the run's buffers.
pub fn reading(plan: &Plan, buffers: &[(String, u64, u64)], param: &str, hex: &str) -> MapReading {
    let mut r = MapReading {
        param: param.to_owned(),
        bytes_hex: hex.to_owned(),
        decoded: None,
        decode_error: None,
        covers: None,
        diffs: Vec::new(),
    };
    let Some(bytes) = unhex(hex) else {
        r.decode_error = Some(format!("{} hex characters, not 256", hex.len()));
        return r;
    };
    let map = match decode(&bytes) {
        Ok(map) => map,
        Err(e) => {
            r.decode_error = Some(e.to_string());
            return r;
        }
    };
    let covered = covers(buffers, map.address);
    r.covers = covered.map(|(role, _)| role.to_owned());
    let expected = covered.and_then(|(name, base)| {
        let role = Role::parse(name).filter(|r| plan.operands.iter().any(|o| o.role == *r))?;
        Some((plan.operand(role).dtype, expected_map(plan, role, base)))
    });
    r.diffs = match expected {
        Some((buffer, e)) => check_map(&map, &e)
            .into_iter()
            .filter(|d| d.field != "dtype" || !same_bytes(buffer, map.dtype))
            .collect(),
        None => {
            // Held to itself, only the rules of a well-formed map remain.
            let mut diffs = Vec::new();
            if covered.is_none() {
                diffs.push(MapDiff {
                    field: "address",
                    got: format!("{:#x}", map.address),
                    expected: "an address in one of the run's buffers".to_owned(),
                    why: "the map points at none of the run's buffers: the kernel reads memory that holds no operand".to_owned(),
                });
            }
            diffs.extend(check_map(&map, &itself(&map)));
            diffs
        }
    };
    r.decoded = Some(map);
    r
}

/// The buffer whose bytes hold `address`: its role name and base address.
pub fn covers(buffers: &[(String, u64, u64)], address: u64) -> Option<(&str, u64)> {
    buffers
        .iter()
        .find(|(_, base, bytes)| (*base..base.saturating_add(*bytes)).contains(&address))
        .map(|(role, base, _)| (role.as_str(), *base))
}

/// The canonical map of the buffer of `role` at `base`: `[cols, rows]` (one row for a
/// bias: `[cols]`), rows `ld` elements apart.
pub fn expected_map(plan: &Plan, role: Role, base: u64) -> ExpectedMap {
    let o = plan.operand(role);
    let size = o.dtype.bytes() as u64;
    let (dims, strides) = match o.rows {
        1 => (vec![o.cols as u64], Vec::new()),
        rows => (vec![o.cols as u64, rows as u64], vec![o.ld as u64 * size]),
    };
    ExpectedMap {
        address: base,
        dtype: map_dtype(o.dtype),
        dims,
        strides,
    }
}

/// The map element type of a buffer's element type.
pub fn map_dtype(dtype: Dtype) -> MapDtype {
    match dtype {
        Dtype::F32 => MapDtype::F32,
        Dtype::F16 => MapDtype::F16,
        Dtype::Bf16 => MapDtype::Bf16,
        // fp8 moves through TMA as bytes.
        Dtype::E4m3 => MapDtype::U8,
    }
}

/// A map type that moves a buffer's elements unchanged, though it is not the
/// buffer's own type: an unsigned integer of their size (raw bytes), or tf32 and
/// flush-to-zero f32 over f32 (how tf32 GEMMs read their operands).
fn same_bytes(buffer: Dtype, map: MapDtype) -> bool {
    match map {
        MapDtype::U16 => buffer.bytes() == 2,
        MapDtype::U32 | MapDtype::F32Ftz | MapDtype::Tf32 | MapDtype::Tf32Ftz => {
            buffer == Dtype::F32
        }
        _ => false,
    }
}

/// The expectation a map meets exactly, so that only its rules are checked.
fn itself(map: &TensorMapFields) -> ExpectedMap {
    ExpectedMap {
        address: map.address,
        dtype: map.dtype,
        dims: map.dims.clone(),
        strides: map.strides.clone(),
    }
}

#[cfg(test)]
mod tests {
    use kwb_diagnose::{Swizzle, encode_layout};

    use super::*;
    use crate::job::hex;
    use crate::plan::Operand;

    /// M = 256, N = 384, K = 1024 in bf16 with lda and ldb padded by 64, f32 D.
    fn plan() -> Plan {
        let operand = |role, dtype, rows, cols, ld| Operand {
            role,
            dtype,
            rows,
            cols,
            ld,
            transposed: false,
        };
        Plan {
            m: 256,
            n: 384,
            k: 1024,
            alpha: 1.0,
            beta: 0.0,
            lda: 1088,
            ldb: 1088,
            ldc: 384,
            ldd: 384,
            operands: vec![
                operand(Role::A, Dtype::Bf16, 256, 1024, 1088),
                operand(Role::B, Dtype::Bf16, 384, 1024, 1088),
                operand(Role::C, Dtype::F32, 256, 384, 384),
                operand(Role::D, Dtype::F32, 256, 384, 384),
            ],
            output: Role::D,
            args: Vec::new(),
            params: Vec::new(),
            tile: (128, 128),
            tile_known: false,
            accumulator: None,
            mma_precision: None,
            activation: None,
            output_saturates: false,
        }
    }

    fn buffers() -> Vec<(String, u64, u64)> {
        let bytes = |o: &Operand| o.bytes() as u64;
        let p = plan();
        vec![
            ("A".to_owned(), 0x10_0000, bytes(&p.operands[0])),
            ("B".to_owned(), 0x20_0000, bytes(&p.operands[1])),
            ("C".to_owned(), 0x30_0000, bytes(&p.operands[2])),
            ("D".to_owned(), 0x40_0000, bytes(&p.operands[3])),
        ]
    }

    /// A bf16 map of A as a K-major launcher encodes it, with 64 x 128 boxes.
    fn map_of_a(address: u64, strides: u64) -> TensorMapFields {
        TensorMapFields {
            address,
            rank: 2,
            dtype: MapDtype::Bf16,
            dims: vec![1024, 256],
            strides: vec![strides],
            box_dim: vec![64, 128],
            element_strides: vec![1, 1],
            interleave: 0,
            swizzle: Swizzle::B128,
            l2_promotion: 2,
            oob_nan: false,
            im2col: false,
            box_bytes: 64 * 128 * 2,
            large: false,
        }
    }

    fn read(map: &TensorMapFields) -> MapReading {
        reading(&plan(), &buffers(), "tmap_a", &hex(&encode_layout(map)))
    }

    #[test]
    fn the_canonical_map_is_k_major_for_operands_and_row_major_for_the_output() {
        let p = plan();
        let a = expected_map(&p, Role::A, 0x10_0000);
        assert_eq!(
            (a.address, a.dtype, a.dims, a.strides),
            (0x10_0000, MapDtype::Bf16, vec![1024, 256], vec![2176])
        );
        let b = expected_map(&p, Role::B, 0);
        assert_eq!((b.dims, b.strides), (vec![1024, 384], vec![2176]));
        let d = expected_map(&p, Role::D, 0);
        assert_eq!(
            (d.dtype, d.dims, d.strides),
            (MapDtype::F32, vec![384, 256], vec![1536])
        );
    }

    #[test]
    fn a_map_covers_the_buffer_its_address_lies_in() {
        let b = buffers();
        assert_eq!(covers(&b, 0x10_0000), Some(("A", 0x10_0000)));
        assert_eq!(covers(&b, 0x10_0000 + 2176), Some(("A", 0x10_0000)));
        // B is 384 x 1088 bf16: its last byte, then one past it.
        assert_eq!(covers(&b, 0x20_0000 + 835_583), Some(("B", 0x20_0000)));
        assert_eq!(covers(&b, 0x20_0000 + 835_584), None);
        assert_eq!(covers(&b, 0x8), None);
    }

    #[test]
    fn the_canonical_map_of_a_matches_and_a_width_pitch_differs() {
        let right = read(&map_of_a(0x10_0000, 2176));
        assert_eq!(right.covers.as_deref(), Some("A"));
        assert!(right.decode_error.is_none());
        assert!(right.diffs.is_empty(), "{:?}", right.diffs);
        let wrong = read(&map_of_a(0x10_0000, 2048));
        let fields: Vec<&str> = wrong.diffs.iter().map(|d| d.field).collect();
        assert_eq!(fields, ["strides[0]"]);
        assert_eq!(
            (
                wrong.diffs[0].got.as_str(),
                wrong.diffs[0].expected.as_str()
            ),
            ("2048", "2176")
        );
    }

    #[test]
    fn a_map_outside_every_buffer_is_an_address_diff_and_raw_u16_is_bf16() {
        let stray = read(&map_of_a(0x8, 2176));
        assert_eq!(stray.covers, None);
        let fields: Vec<&str> = stray.diffs.iter().map(|d| d.field).collect();
        assert_eq!(fields, ["address"]);
        assert!(stray.diffs[0].why.contains("none of the run's buffers"));
        let raw = read(&TensorMapFields {
            dtype: MapDtype::U16,
            ..map_of_a(0x10_0000, 2176)
        });
        assert!(raw.diffs.is_empty(), "{:?}", raw.diffs);
        let f16 = read(&TensorMapFields {
            dtype: MapDtype::F16,
            ..map_of_a(0x10_0000, 2176)
        });
        assert_eq!(f16.diffs.len(), 1);
        assert_eq!(f16.diffs[0].field, "dtype");
        let short = reading(&plan(), &buffers(), "tmap_a", "00ff");
        assert!(short.decoded.is_none() && short.decode_error.is_some());
    }
}

#[cfg(test)]
mod line_tests {
    use kwb_diagnose::{MapDiff, MapDtype, Swizzle, TensorMapFields};

    use super::MapReading;

    #[test]
    fn a_map_line_names_what_the_map_holds_and_how_it_differs() {
        let fields = TensorMapFields {
            address: 0x1000,
            rank: 2,
            dtype: MapDtype::Bf16,
            dims: vec![1024, 256],
            strides: vec![2048],
            box_dim: vec![64, 128],
            element_strides: vec![1, 1],
            interleave: 0,
            swizzle: Swizzle::B128,
            l2_promotion: 0,
            oob_nan: false,
            im2col: false,
            box_bytes: 16384,
            large: false,
        };
        let mut m = MapReading {
            param: "tmap_a".to_owned(),
            bytes_hex: String::new(),
            decoded: Some(fields),
            decode_error: None,
            covers: Some("A".to_owned()),
            diffs: Vec::new(),
        };
        assert_eq!(
            MapReading::line(&m),
            "map tmap_a (covers A): dims {1024, 256} strides {2048} box {64, 128} bf16 swizzle 128B: matches A"
        );
        m.diffs.push(MapDiff {
            field: "strides[0]",
            got: "2048".to_owned(),
            expected: "2176".to_owned(),
            why: "the pitch is 1024 elements where 1088 are expected".to_owned(),
        });
        assert!(
            MapReading::line(&m).ends_with(
                "128B: differs: strides[0] 2048 (expected 2176: the pitch is 1024 elements where 1088 are expected)"
            ),
            "{}",
            MapReading::line(&m)
        );
    }
}
