//! Maps built word by word from the measured layout, decoded and checked.

use super::*;

/// A map from (word, value) pairs; every other word zero.
fn map(words: &[(usize, u32)]) -> [u8; 128] {
    let mut bytes = [0u8; 128];
    for &(word, value) in words {
        bytes[4 * word..4 * word + 4].copy_from_slice(&value.to_le_bytes());
    }
    bytes
}

/// The measured worked example: f16, rank 2, dims 16 x 16, a 32-byte stride, a
/// 16 x 8 box, no swizzle, at 0x7f12_3456_7800.
fn worked_example() -> [u8; 128] {
    map(&[
        (0, 0x3456_7800),
        (1, 0x7f12),
        (2, 0x310),
        (3, 2),
        (8, 0xf),
        (9, 0xf),
        (13, 0x0f00_0000),
        (14, 7),
        (16, 0x100),
        (18, 0x10),
    ])
}

fn worked_fields() -> TensorMapFields {
    TensorMapFields {
        address: 0x7f12_3456_7800,
        rank: 2,
        dtype: MapDtype::F16,
        dims: vec![16, 16],
        strides: vec![32],
        box_dim: vec![16, 8],
        element_strides: vec![1, 1],
        interleave: 0,
        swizzle: Swizzle::None,
        l2_promotion: 0,
        oob_nan: false,
        im2col: false,
        box_bytes: 256,
        large: false,
    }
}

fn expected_of(fields: &TensorMapFields) -> ExpectedMap {
    ExpectedMap {
        address: fields.address,
        dtype: fields.dtype,
        dims: fields.dims.clone(),
        strides: fields.strides.clone(),
    }
}

/// The words an error names, in order.
fn unexplained_words(bytes: &[u8; 128]) -> Vec<usize> {
    match decode(bytes) {
        Ok(fields) => panic!("decoded a map with unexplained bits: {fields:?}"),
        Err(e) => e.unexplained.iter().map(|u| u.word).collect(),
    }
}

#[test]
fn decodes_the_worked_example() {
    assert_eq!(decode(&worked_example()), Ok(worked_fields()));
}

#[test]
fn decodes_rank_five_with_every_field_distinct() {
    // bf16 (code 10), rank 5, interleave none, swizzle 128B, L2 256B, NaN fill,
    // large; dims 64, 3, 5, 7, 9; strides 128, 384, 1920, 13440; box 64, 2, 3, 4, 5;
    // element strides 1, 2, 3, 4, 5.
    let flags = 0x40 | (10 << 7) | (3 << 13) | (1 << 15) | (3 << 17) | (1 << 21);
    let bytes = map(&[
        (0, 0xffff_fff0),
        (1, 0xffff),
        (2, flags),
        (3, 128 >> 4),
        (4, 384 >> 4),
        (5, 1920 >> 4),
        (6, 13440 >> 4),
        (8, 63),
        (9, 2),
        (10, 4),
        (11, 6),
        (12, 8),
        (13, 0x3f00_0000 | (1 << 3) | (2 << 6) | (3 << 9) | (4 << 12)),
        (14, 0x0403_0201),
        (16, 0x3c00),
        (18, 0x400),
    ]);
    let fields = decode(&bytes).unwrap();
    assert_eq!(
        fields,
        TensorMapFields {
            address: 0xffff_ffff_fff0,
            rank: 5,
            dtype: MapDtype::Bf16,
            dims: vec![64, 3, 5, 7, 9],
            strides: vec![128, 384, 1920, 13440],
            box_dim: vec![64, 2, 3, 4, 5],
            element_strides: vec![1, 2, 3, 4, 5],
            interleave: 0,
            swizzle: Swizzle::B128,
            l2_promotion: 3,
            oob_nan: true,
            im2col: false,
            box_bytes: 0x3c00,
            large: true,
        }
    );
    assert_eq!(encode_layout(&fields), bytes);
}

#[test]
fn decodes_strides_above_2_to_the_36_from_their_high_bits() {
    // Measured on sm_90: rank 5, strides 2^36 + 16, 2^37 + 32, 2^38 + 48, 2^39 + 64.
    let bytes = map(&[
        (0, 0x3456_7800),
        (1, 0x7f12),
        (2, 0x340),
        (3, 1),
        (4, 2),
        (5, 3),
        (6, 4),
        (7, 0x8421),
        (8, 0x1f),
        (9, 0x3f),
        (10, 3),
        (11, 2),
        (12, 1),
        (13, 0x0f00_0000),
        (14, 0x0101_0107),
        (16, 0x800),
        (18, 0x10),
    ]);
    let fields = decode(&bytes).unwrap();
    assert_eq!(
        fields.strides,
        vec![
            (1 << 36) + 16,
            (1 << 37) + 32,
            (1 << 38) + 48,
            (1 << 39) + 64
        ]
    );
    assert_eq!(fields.dims, vec![32, 64, 4, 3, 2]);
    assert_eq!(fields.box_dim, vec![16, 8, 2, 2, 2]);
    assert_eq!(encode_layout(&fields), bytes);
    // The largest stride the driver takes, 2^40 - 16.
    let mut bytes = worked_example();
    bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    bytes[28] = 0xf;
    assert_eq!(decode(&bytes).map(|f| f.strides), Ok(vec![(1 << 40) - 16]));
}

#[test]
fn decodes_the_remapped_element_types() {
    // API value -> hardware code and tf32 flag, as measured.
    let cases = [
        (MapDtype::F32, 7, 0),
        (MapDtype::F64, 9, 0),
        (MapDtype::Bf16, 10, 0),
        (MapDtype::F32Ftz, 8, 0),
        (MapDtype::Tf32, 7, 1),
        (MapDtype::Tf32Ftz, 8, 1),
        (MapDtype::I64, 5, 0),
    ];
    for (dtype, code, tf32) in cases {
        let mut words = vec![(2, 0x10 | (code << 7) | (tf32 << 16))];
        words.extend([(3, 2), (8, 0xf), (9, 0xf), (13, 0x0700_0000), (18, 0x10)]);
        let fields = decode(&map(&words)).unwrap();
        assert_eq!(fields.dtype, dtype, "code {code} tf32 {tf32}");
    }
    assert_eq!(MapDtype::from_api(11), Some(MapDtype::Tf32));
    assert_eq!(MapDtype::Bf16.api(), 9);
    assert_eq!(MapDtype::from_api(13), None);
}

#[test]
fn decodes_the_128b_atom_swizzles_from_both_fields() {
    for (high, swizzle) in [
        (1, Swizzle::B128Atom32),
        (2, Swizzle::B128Atom32Flip8),
        (3, Swizzle::B128Atom64),
    ] {
        let mut bytes = worked_example();
        bytes[8..12].copy_from_slice(&(0x310u32 | (3 << 13) | (high << 19)).to_le_bytes());
        bytes[72..76].copy_from_slice(&0x400u32.to_le_bytes());
        assert_eq!(decode(&bytes).map(|f| f.swizzle), Ok(swizzle));
    }
}

#[test]
fn reports_a_set_reserved_bit_never_ignores_it() {
    let mut bytes = worked_example();
    bytes[15 * 4] = 0x01; // w15: no known field
    let error = decode(&bytes).unwrap_err();
    assert_eq!(
        error.to_string(),
        "w15 bits 0x00000001: no known field",
        "{error:?}"
    );
    let mut bytes = worked_example();
    bytes[7 * 4] = 0x10; // w7 bits 7:4, the high bits of strides[1] of a rank-2 map
    assert_eq!(unexplained_words(&bytes), vec![7]);
    let mut bytes = worked_example();
    bytes[8 + 3] = 0x80; // w2 bit 31
    assert_eq!(unexplained_words(&bytes), vec![2]);
    let mut bytes = worked_example();
    bytes[13 * 4 + 2] = 0x01; // w13 bit 16, between the element strides and box[0]
    assert_eq!(unexplained_words(&bytes), vec![13]);
}

#[test]
fn reports_fields_of_dimensions_beyond_the_rank() {
    let mut bytes = worked_example();
    bytes[10 * 4] = 3; // dims[2] of a rank-2 map
    bytes[4 * 4] = 1; // strides[1]
    bytes[14 * 4 + 1] = 1; // box_dim[2]
    let error = decode(&bytes).unwrap_err();
    let words: Vec<_> = error.unexplained.iter().map(|u| u.word).collect();
    assert_eq!(words, vec![4, 10, 14]);
    assert_eq!(
        error.unexplained[1].why,
        "the size of a dimension beyond the rank"
    );
}

#[test]
fn reports_unknown_values_of_known_fields() {
    // Element type code 11 (a packed type?), the tf32 flag on f16, interleave 3,
    // rank 6, the high swizzle field without the low one at 3, im2col.
    for flags in [
        0x10 | (11 << 7),
        0x310 | (1 << 16),
        0x310 | (3 << 11),
        0x50 | (6 << 7),
        0x310 | (1 << 19),
        0x311,
    ] {
        let mut bytes = worked_example();
        bytes[8..12].copy_from_slice(&u32::to_le_bytes(flags));
        assert_eq!(unexplained_words(&bytes), vec![2], "flags {flags:#x}");
    }
}

#[test]
fn reports_a_swizzle_span_word_that_disagrees_with_the_swizzle() {
    let mut bytes = worked_example();
    bytes[72..76].copy_from_slice(&0x400u32.to_le_bytes());
    let error = decode(&bytes).unwrap_err();
    assert_eq!(
        error.to_string(),
        "w18 bits 0x00000400: swizzle span word, where swizzle None has 0x10"
    );
}

#[test]
fn encode_layout_gives_back_the_measured_bytes() {
    assert_eq!(encode_layout(&worked_fields()), worked_example());
}

#[test]
fn a_map_as_expected_has_no_diff() {
    let fields = worked_fields();
    assert_eq!(check_map(&fields, &expected_of(&fields)), Vec::new());
}

#[test]
fn names_each_field_that_differs_from_the_expectation() {
    let fields = worked_fields();
    let expected = ExpectedMap {
        address: fields.address - 0x40,
        dtype: MapDtype::Bf16,
        dims: vec![16, 16, 2],
        strides: vec![64, 2048],
    };
    let got: Vec<_> = check_map(&fields, &expected)
        .into_iter()
        .map(|d| format!("{}: {} vs {} ({})", d.field, d.got, d.expected, d.why))
        .collect();
    assert_eq!(
        got,
        [
            "address: 0x7f1234567800 vs 0x7f12345677c0 (the map starts 64 bytes past the expected buffer)",
            "rank: 2 vs 3 (the map has another number of dimensions)",
            "dtype: f16 vs bf16 (another type of the same size: values are read as the wrong type)",
            "dims[2]: - vs 2 (the tensor's extent differs along this dimension)",
            "strides[0]: 32 vs 64 (the pitch is 16 elements where 32 are expected)",
            "strides[1]: - vs 2048 (the pitch differs)",
        ]
    );
}

#[test]
fn names_swapped_dimensions() {
    let mut fields = worked_fields();
    fields.dims = vec![32, 16];
    fields.strides = vec![64];
    let expected = ExpectedMap {
        dims: vec![16, 32],
        strides: vec![32],
        ..expected_of(&fields)
    };
    let diffs = check_map(&fields, &expected);
    let whys: Vec<_> = diffs.iter().map(|d| (d.field, d.why.as_str())).collect();
    assert_eq!(
        whys,
        [
            ("dims[0]", "equals the expected dims[1]: dimensions swapped"),
            ("dims[1]", "equals the expected dims[0]: dimensions swapped"),
            (
                "strides[0]",
                "the pitch is 32 elements where 16 are expected"
            ),
        ]
    );
}

#[test]
fn names_every_broken_rule_of_a_map_without_an_expectation() {
    let mut fields = worked_fields();
    fields.box_dim = vec![24, 300];
    fields.strides = vec![24];
    fields.element_strides = vec![1, 9];
    fields.interleave = 1;
    let diffs = check_map(&fields, &expected_of(&fields));
    let got: Vec<_> = diffs
        .iter()
        .map(|d| format!("{}: {} vs {}", d.field, d.got, d.expected))
        .collect();
    assert_eq!(
        got,
        [
            "box_dim[0]: 24 vs <= 16",
            "box_dim[1]: 300 vs 1..=256",
            "box_dim[1]: 300 vs <= 16",
            "strides[0]: 24 vs a multiple of 16",
            "strides[0]: 24 vs >= 32",
            "element_strides[1]: 9 vs 1..=8",
            "interleave: 1 vs 0 (none)",
        ]
    );
}

#[test]
fn holds_the_inner_box_to_the_swizzle_span() {
    let mut fields = worked_fields();
    fields.dims = vec![128, 16];
    fields.strides = vec![256];
    fields.box_dim = vec![36, 8];
    fields.swizzle = Swizzle::B64;
    let got: Vec<_> = check_map(&fields, &expected_of(&fields))
        .into_iter()
        .map(|d| format!("{}: {} vs {}", d.field, d.got, d.expected))
        .collect();
    assert_eq!(
        got,
        [
            "box_dim[0]: 72 bytes vs a multiple of 16 bytes",
            "swizzle: 72-byte inner box vs <= 64 bytes",
        ]
    );
    fields.box_dim = vec![32, 8];
    assert_eq!(check_map(&fields, &expected_of(&fields)), Vec::new());
}
