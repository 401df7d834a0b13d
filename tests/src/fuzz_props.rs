//! The properties the fuzz targets check, one function per target of `fuzz/`, and
//! the seeds their corpora start from.
//!
//! A property takes the fuzzer's bytes and panics when it fails, as a libFuzzer
//! target must. `fuzz/fuzz_targets/<target>.rs` calls it under cargo-fuzz, and
//! `tests/tests/fuzz_corpus.rs` replays every committed input of
//! `fuzz/corpus/<target>/` (and [`seeds`]) through it under plain `cargo test`, so
//! the two cannot drift.

use std::path::Path;

use kwb_cli::{dump, npy};
use kwb_extract::manifest::Manifest;
use kwb_instrument::{Config, InstrumentError, Probes};

/// A property: panics when `data` breaks it.
pub type Property = fn(data: &[u8]);

/// Every target's name and property, in the order of `fuzz/Cargo.toml`.
pub const TARGETS: &[(&str, Property)] = &[
    ("parse_map", parse_map),
    ("instrument_strip", instrument_strip),
    ("trace_decode", trace_decode),
    ("manifest", manifest),
    ("npy_dump", npy_dump),
];

/// UTF-8 source through `kwb_syntax::parse` and `kwb_sites::kernel_map`: the masked
/// text keeps the source's length and newlines and differs only inside blanks, and
/// every blank, kernel and site range is a slice of the source (on char boundaries),
/// with its lines in order and a kernel's sites sorted by offset.
pub fn parse_map(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = kwb_syntax::parse(src);
    assert_eq!(parsed.source, src);
    assert_eq!(parsed.masked.len(), src.len(), "masked length");
    let mut blank_end = 0;
    for blank in &parsed.blanks {
        assert!(
            blank.range.start >= blank_end,
            "blanks overlap or are unsorted"
        );
        assert_slice(src, &blank.range, "blank");
        blank_end = blank.range.end;
    }
    for (i, (&s, &m)) in src
        .as_bytes()
        .iter()
        .zip(parsed.masked.as_bytes())
        .enumerate()
    {
        if s != m {
            let blanked = parsed.blanks.iter().any(|b| b.range.contains(&i));
            assert!(
                blanked && m == b' ' && s != b'\n',
                "masked byte {i} changed outside a blank"
            );
        }
    }
    let lines = src.bytes().filter(|&b| b == b'\n').count() + 1;
    let map = kwb_sites::kernel_map(&parsed, &[]);
    for kernel in &map.kernels {
        assert_slice(src, &kernel.range, "kernel");
        assert!(1 <= kernel.line && kernel.line <= kernel.end_line && kernel.end_line <= lines);
        for pair in kernel.sites.windows(2) {
            assert!(
                pair[0].range.start <= pair[1].range.start,
                "sites out of order"
            );
        }
        for site in &kernel.sites {
            assert_slice(src, &site.range, "site");
            assert!(1 <= site.line && site.line <= site.end_line && site.end_line <= lines);
        }
    }
}

fn assert_slice(src: &str, range: &std::ops::Range<usize>, what: &str) {
    assert!(
        range.start <= range.end
            && range.end <= src.len()
            && src.is_char_boundary(range.start)
            && src.is_char_boundary(range.end),
        "{what} range {range:?} is not a slice of the {}-byte source",
        src.len()
    );
}

/// The instrumenter's configuration under fuzzing: every probe kind, full tiles.
pub fn instrument_config() -> Config {
    Config {
        probes: Probes {
            loads: true,
            ..Probes::default()
        },
        full_tile: true,
        file_name: "fuzz.cu".to_owned(),
        ..Config::default()
    }
}

/// UTF-8 source through `kwb_instrument::instrument`: it never panics nor plans
/// overlapping edits; when it succeeds, `strip` of its text is the source (with any
/// earlier kwb insertions stripped), and instrumenting that text again gives the same
/// text and probes.
pub fn instrument_strip(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let config = instrument_config();
    let (text, plan) = match kwb_instrument::instrument(src, &config) {
        Ok(done) => done,
        Err(InstrumentError::Edit(e)) => panic!("the planner's edits overlap: {e}"),
        Err(_) => return,
    };
    let original = kwb_instrument::strip(src).expect("instrument stripped it");
    let stripped = kwb_instrument::strip(&text)
        .unwrap_or_else(|e| panic!("the instrumented text does not strip: {e}"));
    assert!(stripped == original, "strip(instrument(x)) != x");
    let (again, replan) = kwb_instrument::instrument(&text, &config)
        .unwrap_or_else(|e| panic!("instrumenting the instrumented text failed: {e}"));
    assert!(again == text, "instrumenting twice differs from once");
    assert_eq!(replan.probes, plan.probes);
}

/// Bytes through the trace-file decoder: `Ok` or `Err`, never a panic; a decoded
/// trace whose records are of the current version encodes to bytes that decode to
/// the same trace (compared through a second encoding, so NaN payloads count).
pub fn trace_decode(data: &[u8]) {
    let Ok(trace) = kwb_runtime::decode(data) else {
        return;
    };
    let _ = trace.call_numbers();
    if trace
        .records
        .iter()
        .any(|r| r.version != kwb_runtime::VERSION)
    {
        // A version 2 file's records keep their version; `encode` writes version 3.
        return;
    }
    let bytes = kwb_runtime::encode(&trace);
    let back = kwb_runtime::decode(&bytes)
        .unwrap_or_else(|e| panic!("an encoded trace does not decode: {e}"));
    assert_eq!(back.sites, trace.sites);
    assert_eq!(back.records.len(), trace.records.len());
    assert_eq!(back.tiles.len(), trace.tiles.len());
    assert!(
        kwb_runtime::encode(&back) == bytes,
        "encode(decode(encode(t))) != encode(t)"
    );
}

/// UTF-8 through `Manifest::from_toml`: when it reads, its `to_toml` reads back to the
/// same manifest, and writes the same text again.
pub fn manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m) = Manifest::from_toml(text) else {
        return;
    };
    let written = m.to_toml();
    let back = Manifest::from_toml(&written)
        .unwrap_or_else(|e| panic!("to_toml does not read back: {e}\n{written}"));
    assert_eq!(back, m);
    assert_eq!(back.to_toml(), written);
}

/// Bytes through kwb's dump readers; the first byte picks one: 0 `.npy`, 1 and 2
/// `.safetensors` (the only tensor, tensor `D`), 3 to 6 raw f32/f64/f16/bf16 (then
/// one byte of rank below 4 and one byte per dimension), 7 raw without a dtype. A
/// read never panics; its values match its shape, and an `.npy` it read writes back
/// (as `<f4`) to the same shape and bits.
pub fn npy_dump(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let raw = [
        dump::RawDtype::F32,
        dump::RawDtype::F64,
        dump::RawDtype::F16,
        dump::RawDtype::Bf16,
    ];
    let read = match pick % 8 {
        0 => dump::read(Path::new("d.npy"), rest, None, None, &[]),
        1 => dump::read(Path::new("d.safetensors"), rest, None, None, &[]),
        2 => dump::read(Path::new("d.safetensors"), rest, Some("D"), None, &[]),
        7 => {
            let read = dump::read(Path::new("d.bin"), rest, None, None, &[]);
            assert_eq!(read, Err(dump::DumpError::RawNeedsDtype));
            return;
        }
        n => {
            let Some((&rank, rest)) = rest.split_first() else {
                return;
            };
            let rank = usize::from(rank % 4).min(rest.len());
            let shape: Vec<usize> = rest[..rank].iter().map(|&d| usize::from(d)).collect();
            let dtype = raw[usize::from(n - 3)];
            dump::read(Path::new("d.bin"), &rest[rank..], None, Some(dtype), &shape)
        }
    };
    let Ok((shape, values)) = read else {
        return;
    };
    assert_eq!(shape.iter().product::<usize>(), values.len());
    if pick % 8 == 0 && shape.len() <= 64 {
        let (shape2, values2) = npy::read_f32(&npy::f32_array(&shape, &values))
            .unwrap_or_else(|e| panic!("a written .npy does not read: {e}"));
        assert_eq!(shape2, shape);
        assert!(
            values
                .iter()
                .map(|v| v.to_bits())
                .eq(values2.iter().map(|v| v.to_bits()))
        );
    }
}

/// Seeds for every target, made by calling the code on the repository's own inputs:
/// (target, name, bytes). Sources are the fixtures and the kernel suite; traces are
/// the fixture traces cut to a few records (`encode`, or the version 2 file's header
/// patched); manifests are the suite's kwb.toml; dumps are small `.npy`,
/// `.safetensors` and raw arrays.
pub fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let root = crate::repo_root();
    let mut out = Vec::new();
    let mut sources = Vec::new();
    for dir in ["fixtures/sites", "fixtures/instrument", "fixtures/run"] {
        sources.extend(files(&root.join(dir), "cu"));
    }
    for family in FAMILIES {
        sources.push(root.join("kernels").join(family.0).join("gemm.cu"));
    }
    for path in sources {
        let bytes = std::fs::read(&path).expect("a seed source");
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('/', "_");
        out.push(("parse_map", name.clone(), bytes.clone()));
        out.push(("instrument_strip", name, bytes));
    }

    for path in files(&root.join("fixtures/traces"), "trace") {
        let bytes = std::fs::read(&path).expect("a fixture trace");
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut trace = kwb_runtime::decode(&bytes).expect("a fixture trace decodes");
        if trace
            .records
            .first()
            .is_some_and(|r| r.version != kwb_runtime::VERSION)
        {
            // Version 2: the header, the site table and two records, the count patched.
            let table = u32::from_le_bytes(bytes[44..48].try_into().expect("4 bytes"));
            let end = 48 + table as usize + 2 * kwb_runtime::RECORD_SIZE;
            let mut cut = bytes[..end].to_vec();
            cut[16..24].copy_from_slice(&2u64.to_le_bytes());
            out.push(("trace_decode", name, cut));
            continue;
        }
        trace.records.truncate(3);
        trace.tiles.retain(|t| t.record < 3);
        trace.tiles.truncate(8);
        out.push(("trace_decode", name, kwb_runtime::encode(&trace)));
    }

    for (family, kernel) in FAMILIES {
        let m = crate::suite_manifest(family, kernel);
        out.push((
            "manifest",
            format!("{family}.toml"),
            m.to_toml().into_bytes(),
        ));
    }

    let values = [1.0f32, -2.5, 0.0, f32::NAN, 3.0, f32::INFINITY];
    let with = |pick: u8, body: Vec<u8>| [vec![pick], body].concat();
    out.push((
        "npy_dump",
        "f32_2x3.npy".into(),
        with(0, npy::f32_array(&[2, 3], &values)),
    ));
    out.push((
        "npy_dump",
        "i32_4.npy".into(),
        with(0, npy::i32_array(&[4], &[1, -2, 3, 4])),
    ));
    let le: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    out.push((
        "npy_dump",
        "one.safetensors".into(),
        with(1, safetensors("D", "F32", &[2, 3], &le)),
    ));
    out.push((
        "npy_dump",
        "named.safetensors".into(),
        with(2, safetensors("D", "BF16", &[3], &le[..6])),
    ));
    for (i, dtype) in ["f32", "f64", "f16", "bf16"].iter().enumerate() {
        let body = [vec![2, 2, 1], le[..8].to_vec()].concat();
        out.push((
            "npy_dump",
            format!("raw_{dtype}.bin"),
            with(3 + i as u8, body),
        ));
    }
    out
}

/// The suite families with a kernel kwb-extract reproduces, and that kernel.
const FAMILIES: &[(&str, &str)] = &[
    ("mma_sync", "gemm_mma_sync"),
    ("tma_wgmma_sm90", "gemm_wgmma_tma"),
    ("megakernel", "megakernel"),
    ("cute_sm80", "gemm_cute_sm80"),
    ("cutlass3x_sm90", "Gemm"),
];

/// The files of `dir` ending in `.ext`, sorted.
fn files(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("a seed folder")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    out.sort();
    out
}

/// A `.safetensors` file of one tensor, with a `__metadata__` entry.
fn safetensors(name: &str, dtype: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let text = format!(
        r#"{{"{name}":{{"dtype":"{dtype}","shape":{shape:?},"data_offsets":[0,{}]}},"__metadata__":{{"by":"kwb fuzz seeds"}}}}"#,
        data.len()
    );
    [
        &(text.len() as u64).to_le_bytes()[..],
        text.as_bytes(),
        data,
    ]
    .concat()
}
