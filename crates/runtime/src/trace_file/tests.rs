//! Decoder tests on bytes built by hand, independent of [`encode`].

use super::*;
use crate::record::tests::distinct;

/// A file as the header writes it, built field by field.
fn file(
    version: u32,
    record_size: u32,
    sites: &[(u32, &str, u32, &str)],
    records: &[TraceRecord],
) -> Vec<u8> {
    let mut table = Vec::new();
    for (id, file, line, text) in sites {
        table.extend_from_slice(&id.to_le_bytes());
        table.extend_from_slice(&line.to_le_bytes());
        table.extend_from_slice(&(file.len() as u32).to_le_bytes());
        table.extend_from_slice(&(text.len() as u32).to_le_bytes());
        table.extend_from_slice(file.as_bytes());
        table.extend_from_slice(text.as_bytes());
        while table.len() % 8 != 0 {
            table.push(0);
        }
    }
    let mut out = b"KWBTRACE".to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&record_size.to_le_bytes());
    out.extend_from_slice(&(records.len() as u64).to_le_bytes());
    out.extend_from_slice(&7_u64.to_le_bytes());
    out.extend_from_slice(&65536_u64.to_le_bytes());
    out.extend_from_slice(&(sites.len() as u32).to_le_bytes());
    out.extend_from_slice(&(table.len() as u32).to_le_bytes());
    assert_eq!(out.len(), FILE_HEADER_SIZE);
    out.extend_from_slice(&table);
    for record in records {
        out.extend_from_slice(&record.to_le_bytes());
    }
    if version >= 3 {
        out.extend_from_slice(&tile_section(&[], 0));
    }
    if version >= 4 {
        out.extend_from_slice(&summary_section(&[], 0, [0; 3]));
    }
    out
}

/// A summary entry as the header writes it; `k_end` i32::MAX for the last row.
#[allow(clippy::type_complexity)]
fn summary_entry(
    (site, kind, k_tile, k_end): (u32, u32, i32, i32),
    (probes, count, nans, infs): (u64, u64, u64, u64),
    absmax: f32,
    peak: [i32; 3],
    bad: [i32; 3],
) -> Vec<u8> {
    let mut out = Vec::new();
    for word in [site, kind, 0xabcd_0123] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    out.extend_from_slice(&k_tile.to_le_bytes());
    out.extend_from_slice(&k_end.to_le_bytes());
    out.extend_from_slice(&0_u32.to_le_bytes());
    for word in [probes, count, count + 3, nans, infs] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    out.extend_from_slice(&absmax.to_le_bytes());
    for c in peak.iter().chain(bad.iter()) {
        out.extend_from_slice(&c.to_le_bytes());
    }
    out.extend_from_slice(&0_u32.to_le_bytes());
    assert_eq!(out.len(), SUMMARY_ENTRY_SIZE);
    out
}

/// A summary section as the header writes it: magic, count, dropped, entry size, K-tile
/// rows, grid, reserved, then the entries.
fn summary_section(entries: &[Vec<u8>], dropped: u64, grid: [u32; 3]) -> Vec<u8> {
    let mut out = b"KWBSUMMA".to_vec();
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    out.extend_from_slice(&dropped.to_le_bytes());
    out.extend_from_slice(&96_u32.to_le_bytes());
    out.extend_from_slice(&(if entries.is_empty() { 0_u32 } else { 256 }).to_le_bytes());
    for word in grid {
        out.extend_from_slice(&word.to_le_bytes());
    }
    out.extend_from_slice(&0_u32.to_le_bytes());
    assert_eq!(out.len(), SUMMARY_HEADER_SIZE);
    for entry in entries {
        out.extend_from_slice(entry);
    }
    out
}

/// `good()` with its summary section replaced.
fn with_summary(entries: &[Vec<u8>], dropped: u64, grid: [u32; 3]) -> Vec<u8> {
    let mut bytes = good();
    bytes.truncate(bytes.len() - SUMMARY_HEADER_SIZE);
    bytes.extend_from_slice(&summary_section(entries, dropped, grid));
    bytes
}

#[test]
fn decodes_summary_entries() {
    let entries = [
        summary_entry((1, 3, -1, 0), (264, 1024, 0, 0), 2.5, [3, 1, 0], [-1; 3]),
        summary_entry(
            (1, 3, 7, 8),
            (264, 1024, 2, 1),
            1.0e30,
            [0, 0, 0],
            [5, 0, 0],
        ),
        summary_entry(
            (2, 4, 254, i32::MAX),
            (8, 64, 0, 0),
            0.0,
            [131, 0, 0],
            [-1; 3],
        ),
    ];
    let trace = decode(&with_summary(&entries, 4, [132, 1, 1])).unwrap();
    assert_eq!(trace.summary_dropped, 4);
    assert_eq!(trace.summary_k_tiles, 256);
    assert_eq!(trace.summary_grid, [132, 1, 1]);
    assert_eq!(trace.summary.len(), 3);
    let [first, second, last] = [&trace.summary[0], &trace.summary[1], &trace.summary[2]];
    assert_eq!(
        (first.site, first.kind(), first.k_tile),
        (1, Some(Kind::Accumulator), -1)
    );
    assert_eq!((first.count, first.seen, first.probes), (1024, 1027, 264));
    assert_eq!(first.peak_cta(), Some([3, 1, 0]));
    assert_eq!(first.bad_cta(), None);
    assert_eq!(
        (second.nan_count, second.inf_count, second.absmax),
        (2, 1, 1.0e30)
    );
    assert_eq!(second.bad_cta(), Some([5, 0, 0]));
    assert!(!second.holds_later_k_tiles());
    assert!(last.holds_later_k_tiles());
    assert_eq!(last.kind(), Some(Kind::Epilogue));
    assert_eq!(decode(&encode(&trace)).unwrap(), trace);
}

#[test]
fn a_summary_entry_that_holds_no_k_tile_is_an_error() {
    let entries = [summary_entry(
        (1, 3, 7, 7),
        (1, 1, 0, 0),
        1.0,
        [0; 3],
        [-1; 3],
    )];
    let err = decode(&with_summary(&entries, 0, [1, 1, 1])).unwrap_err();
    assert!(matches!(err, TraceError::BadSummary { .. }), "{err}");
    assert!(
        err.to_string().contains("entry 0 holds K tiles 7..7"),
        "{err}"
    );
}

#[test]
fn a_bad_or_truncated_summary_section_is_an_error() {
    let mut bytes = good();
    let at = bytes.len() - SUMMARY_HEADER_SIZE;
    bytes[at] = b'X';
    assert!(matches!(
        decode(&bytes).unwrap_err(),
        TraceError::BadSummary { .. }
    ));
    let entries = [summary_entry(
        (0, 3, 0, 1),
        (1, 1, 0, 0),
        1.0,
        [0; 3],
        [-1; 3],
    )];
    let mut bytes = with_summary(&entries, 0, [1, 1, 1]);
    bytes.truncate(bytes.len() - 8);
    assert!(matches!(
        decode(&bytes),
        Err(TraceError::Truncated {
            what: "summary entries",
            ..
        })
    ));
}

#[test]
fn version_3_files_have_no_summary_section() {
    let mut first = distinct();
    first.version = 3;
    let trace = decode(&file(3, RECORD_SIZE as u32, SITES, &[first])).unwrap();
    assert!(trace.summary.is_empty());
    assert_eq!(trace.summary_k_tiles, 0);
    assert_eq!(trace.records.len(), 1);
    // Written again, it is a current file whose records are current records.
    let again = decode(&encode(&trace)).unwrap();
    assert_eq!(again.records[0].version, VERSION);
    assert_eq!(again.records[0].count, first.count);
}

/// A tile section as the header writes it: magic, count, dropped, capacity, value
/// size, reserved, then (record, element, value, m, n, k) per value.
fn tile_section(values: &[(u32, u32, f32, i32, i32, i32)], dropped: u64) -> Vec<u8> {
    let mut out = b"KWBTILES".to_vec();
    out.extend_from_slice(&(values.len() as u64).to_le_bytes());
    out.extend_from_slice(&dropped.to_le_bytes());
    out.extend_from_slice(&4096_u64.to_le_bytes());
    out.extend_from_slice(&24_u32.to_le_bytes());
    out.extend_from_slice(&0_u32.to_le_bytes());
    assert_eq!(out.len(), TILE_HEADER_SIZE);
    for (record, element, value, m, n, k) in values {
        out.extend_from_slice(&record.to_le_bytes());
        out.extend_from_slice(&element.to_le_bytes());
        out.extend_from_slice(&value.to_le_bytes());
        for c in [m, n, k] {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
    out
}

/// `good()` with its tile section replaced.
fn with_tiles(values: &[(u32, u32, f32, i32, i32, i32)], dropped: u64) -> Vec<u8> {
    let mut bytes = good();
    bytes.truncate(bytes.len() - TILE_HEADER_SIZE - SUMMARY_HEADER_SIZE);
    bytes.extend_from_slice(&tile_section(values, dropped));
    bytes.extend_from_slice(&summary_section(&[], 0, [0; 3]));
    bytes
}

#[test]
fn decodes_tile_values() {
    let trace = decode(&with_tiles(
        &[(1, 0, 2.5, 3, -1, 7), (0, 5, -1.0, -1, -1, -1)],
        9,
    ))
    .unwrap();
    assert_eq!(trace.tile_dropped, 9);
    assert_eq!(trace.tile_capacity, 4096);
    assert_eq!(
        trace.tiles,
        vec![
            TileValue {
                record: 1,
                element: 0,
                value: 2.5,
                m: 3,
                n: -1,
                k: 7
            },
            TileValue {
                record: 0,
                element: 5,
                value: -1.0,
                m: -1,
                n: -1,
                k: -1
            },
        ]
    );
    assert_eq!(decode(&encode(&trace)).unwrap(), trace);
}

#[test]
fn a_tile_value_of_a_record_not_in_the_file_is_an_error() {
    let err = decode(&with_tiles(&[(2, 0, 1.0, 0, 0, 0)], 0)).unwrap_err();
    assert!(
        err.to_string().contains("record 2, the file has 2"),
        "{err}"
    );
}

#[test]
fn a_truncated_tile_section_is_an_error() {
    let mut bytes = with_tiles(&[(0, 0, 1.0, 0, 0, 0)], 0);
    bytes.truncate(bytes.len() - SUMMARY_HEADER_SIZE - 4);
    assert!(matches!(
        decode(&bytes),
        Err(TraceError::Truncated {
            what: "tile values",
            ..
        })
    ));
    let mut bytes = good();
    bytes.truncate(bytes.len() - SUMMARY_HEADER_SIZE - 1);
    assert!(matches!(
        decode(&bytes),
        Err(TraceError::Truncated {
            what: "tile section",
            ..
        })
    ));
}

#[test]
fn version_2_files_have_no_tile_section() {
    let mut first = distinct();
    first.version = 2;
    let trace = decode(&file(2, RECORD_SIZE as u32, SITES, &[first])).unwrap();
    assert!(trace.tiles.is_empty());
    assert_eq!(trace.tile_capacity, 0);
    // A version 4 record in a version 2 file is not one.
    assert!(decode(&file(2, RECORD_SIZE as u32, SITES, &[distinct()])).is_err());
}

const SITES: &[(u32, &str, u32, &str)] = &[
    (0, "gemm.cu", 120, "tCsA(_, _, _, read_stage)"),
    (1, "gemm.cu", 188, "accum"),
];

fn good() -> Vec<u8> {
    let mut second = distinct();
    second.site = 1;
    second.kind = crate::Kind::OperandA as u32;
    file(VERSION, RECORD_SIZE as u32, SITES, &[distinct(), second])
}

#[test]
fn decodes_hand_built_bytes() {
    let trace = decode(&good()).unwrap();
    assert_eq!(trace.dropped, 7);
    assert_eq!(trace.capacity, 65536);
    assert_eq!(
        trace.sites,
        vec![
            SiteInfo {
                id: 0,
                file: "gemm.cu".to_owned(),
                line: 120,
                text: "tCsA(_, _, _, read_stage)".to_owned(),
            },
            SiteInfo {
                id: 1,
                file: "gemm.cu".to_owned(),
                line: 188,
                text: "accum".to_owned(),
            },
        ]
    );
    assert_eq!(trace.records.len(), 2);
    assert_eq!(trace.records[0], distinct());
    assert_eq!(trace.records[1].kind(), Some(crate::Kind::OperandA));
    assert_eq!(trace.site(1).map(|site| site.line), Some(188));
}

#[test]
fn encode_writes_what_the_header_writes() {
    let bytes = good();
    let trace = decode(&bytes).unwrap();
    assert_eq!(encode(&trace), bytes);
}

#[test]
fn decodes_an_empty_trace() {
    let trace = decode(&file(VERSION, RECORD_SIZE as u32, &[], &[])).unwrap();
    assert!(trace.sites.is_empty());
    assert!(trace.records.is_empty());
}

#[test]
fn every_cut_is_truncated() {
    let bytes = good();
    for len in 0..bytes.len() {
        let err = decode(&bytes[..len]).unwrap_err();
        assert!(
            matches!(err, TraceError::Truncated { .. }),
            "cut at {len}: {err:?}"
        );
    }
}

#[test]
fn truncation_names_the_part() {
    let bytes = good();
    let records_end = bytes.len() - TILE_HEADER_SIZE - SUMMARY_HEADER_SIZE;
    let err = decode(&bytes[..records_end - 1]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "trace file is truncated: records needs 448 bytes at offset {}, the file has {}",
            records_end - 448,
            records_end - 1
        )
    );
    let err = decode(&bytes[..20]).unwrap_err();
    assert!(
        err.to_string().contains("file header needs 48 bytes"),
        "{err}"
    );
}

#[test]
fn wrong_magic() {
    let mut bytes = good();
    bytes[..4].copy_from_slice(b"\x7fELF");
    let err = decode(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"not a kwb trace file: it starts with "\x7fELFRACE", not "KWBTRACE""#
    );
    // A short file that is not a prefix of the magic is not a trace either.
    assert!(matches!(
        decode(b"{}").unwrap_err(),
        TraceError::BadMagic { .. }
    ));
}

#[test]
fn another_version() {
    let mut bytes = good();
    bytes[8..12].copy_from_slice(&1_u32.to_le_bytes());
    let err = decode(&bytes).unwrap_err();
    assert!(matches!(
        err,
        TraceError::Version {
            found: 1,
            expected: 4
        }
    ));
    // The version is checked before the rest of the header is needed.
    assert!(matches!(
        decode(&bytes[..12]).unwrap_err(),
        TraceError::Version { .. }
    ));
}

#[test]
fn another_record_size() {
    let bytes = file(VERSION, 208, SITES, &[]);
    assert!(matches!(
        decode(&bytes).unwrap_err(),
        TraceError::RecordSize {
            found: 208,
            expected: 224,
            version: 4
        }
    ));
}

#[test]
fn unwritten_record() {
    let mut blank = distinct();
    blank.magic = 0;
    let bytes = file(VERSION, RECORD_SIZE as u32, SITES, &[distinct(), blank]);
    assert!(matches!(
        decode(&bytes).unwrap_err(),
        TraceError::BadRecord {
            index: 1,
            magic: 0,
            ..
        }
    ));
}

#[test]
fn trailing_bytes() {
    let mut bytes = good();
    bytes.extend_from_slice(&[0; 5]);
    assert!(matches!(
        decode(&bytes).unwrap_err(),
        TraceError::TrailingBytes { extra: 5 }
    ));
}

#[test]
fn site_table_that_does_not_add_up() {
    let mut bytes = good();
    // Claim three sites where the table holds two.
    bytes[40..44].copy_from_slice(&3_u32.to_le_bytes());
    let err = decode(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "site table is corrupt: entry 2 starts past the table's end"
    );

    let mut bytes = good();
    // Make the first entry's text run past the table.
    bytes[FILE_HEADER_SIZE + 12..FILE_HEADER_SIZE + 16].copy_from_slice(&500_u32.to_le_bytes());
    assert!(matches!(
        decode(&bytes).unwrap_err(),
        TraceError::BadSiteTable { .. }
    ));

    let mut bytes = good();
    // Claim one site where the table holds two.
    bytes[40..44].copy_from_slice(&1_u32.to_le_bytes());
    let err = decode(&bytes).unwrap_err();
    assert!(err.to_string().contains("1 entries take 48 bytes"), "{err}");
}

#[test]
fn errors_carry_codes_and_help() {
    use miette::Diagnostic;

    let cases: Vec<(TraceError, &str)> = vec![
        (
            decode(&good()[..10]).unwrap_err(),
            "kwb::runtime::truncated",
        ),
        (decode(b"nope").unwrap_err(), "kwb::runtime::bad_magic"),
        (
            decode(&file(9, RECORD_SIZE as u32, &[], &[])).unwrap_err(),
            "kwb::runtime::version",
        ),
    ];
    for (err, code) in cases {
        assert_eq!(err.code().unwrap().to_string(), code);
        assert!(err.help().is_some(), "{code} has no help");
    }
}

#[test]
fn calls_are_numbered_per_warp_and_site() {
    let mut records = Vec::new();
    for (site, warp) in [(0, 0), (0, 1), (0, 0), (1, 0), (0, 0), (0, 1)] {
        let mut r = distinct();
        r.site = site;
        r.warp = warp;
        records.push(r);
    }
    let mut other_cta = distinct();
    other_cta.site = 0;
    other_cta.warp = 0;
    other_cta.cta_x = 99;
    records.push(other_cta);
    let trace = decode(&file(VERSION, RECORD_SIZE as u32, SITES, &records)).unwrap();
    assert_eq!(trace.call_numbers(), vec![0, 0, 1, 0, 2, 1, 0]);
}

#[test]
fn records_without_an_origin_take_their_warps_tile_context() {
    // Warp 2 of CTA (5, 6, 7) starts tile (256, 128), records, starts tile (384, 128),
    // records, ends the context; warp 3 has no context; one record has its own origin.
    let at = |kind: Kind, warp: u32, origin: (i32, i32)| TraceRecord {
        kind: kind as u32,
        warp,
        tile_m: origin.0,
        tile_n: origin.1,
        ..distinct()
    };
    let none = (-1, -1);
    let records = [
        at(Kind::Accumulator, 2, none),
        at(Kind::TileContext, 2, (256, 128)),
        at(Kind::Accumulator, 3, none),
        at(Kind::OperandA, 2, none),
        at(Kind::Accumulator, 2, (0, 64)),
        at(Kind::TileContext, 2, (384, 128)),
        at(Kind::Accumulator, 2, none),
        at(Kind::TileContext, 2, none),
        at(Kind::Accumulator, 2, none),
    ];
    let trace = decode(&file(VERSION, RECORD_SIZE as u32, &[], &records)).unwrap();
    let origins: Vec<(i32, i32)> = trace.records.iter().map(|r| (r.tile_m, r.tile_n)).collect();
    assert_eq!(
        origins,
        [
            none,
            (256, 128),
            none,
            (256, 128),
            (0, 64),
            (384, 128),
            (384, 128),
            none,
            none
        ]
    );
    // Another CTA's warp 2 is another warp.
    let mut other = at(Kind::Accumulator, 2, none);
    other.cta_x = 9;
    let trace = decode(&file(
        VERSION,
        RECORD_SIZE as u32,
        &[],
        &[records[1], other],
    ))
    .unwrap();
    assert_eq!((trace.records[1].tile_m, trace.records[1].tile_n), none);
}
