//! Property tests of the round trips kwb promises, on generated inputs:
//! - `strip(instrument(x)) == x` byte for byte for kernel-like sources made by
//!   cutting, splicing and salting the repository's fixtures and suite kernels (and
//!   `instrument` never panics, and instrumenting twice equals once);
//! - the trace file: what the runtime's writer encodes decodes to the same trace, and
//!   no byte string (random, or a damaged valid file) makes the decoder panic;
//! - `kwb.toml`: a perturbed manifest of kwb-extract's reads back equal;
//! - `.npy`: what the CLI writes it reads back, shape and bits.
//!
//! Case counts keep the whole file well under a minute on two cores.

use std::sync::OnceLock;

use kwb_extract::manifest::Manifest;
use kwb_instrument::{Config, Probes};
use kwb_runtime::{
    RECORD_MAGIC, RECORD_SIZE, SiteInfo, SummaryEntry, TileValue, Trace, TraceRecord,
};
use kwb_tests::repo_root;
use proptest::prelude::*;
use proptest::sample::Index;

/// Every kernel-like source of the repository: the site and instrument fixtures and
/// the suite kernels, as (name, text).
fn corpus() -> &'static [(String, String)] {
    static CORPUS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let root = repo_root();
        let mut paths: Vec<_> = ["fixtures/sites", "fixtures/instrument"]
            .iter()
            .flat_map(|dir| std::fs::read_dir(root.join(dir)).unwrap())
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "cu"))
            .collect();
        for family in std::fs::read_dir(root.join("kernels")).unwrap() {
            let path = family.unwrap().path().join("gemm.cu");
            if path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        assert!(paths.len() >= 10, "the corpus is there: {paths:?}");
        paths
            .into_iter()
            .map(|p| {
                let name = p.strip_prefix(&root).unwrap().display().to_string();
                (name, std::fs::read_to_string(&p).unwrap())
            })
            .collect()
    })
}

/// Tokens that stress the pre-pass, the parser, the planner and the markers.
const GARBAGE: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    ";",
    "/*",
    "*/",
    "//",
    "\"",
    "'",
    "\\\n",
    "#if 0\n",
    "#endif\n",
    "#else\n",
    "#define MMA(a, b, c) mma(a, b, c)\n",
    "<<<grid, block>>>",
    "__syncthreads();",
    "__global__",
    "template <int K>",
    "for (int k = 0; k < K; ++k) {",
    "acc += a[k] * b[k];",
    "mma(acc, a, b, acc);",
    "cute::gemm(tiled_mma, tCrA, tCrB, tCrC);",
    "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0}, {%1}, {%2}, {%3};\"\n\
     : \"+f\"(d0) : \"r\"(a0), \"r\"(b0));",
    "C[i] = acc;",
    "\r\n",
    "\t",
    "\u{feff}",
    "é",
    "\0",
    "\u{2028}",
];

/// One change to a source.
#[derive(Debug, Clone)]
enum Mutation {
    /// Drops up to a number of lines from a line on.
    DropLines(Index, usize),
    /// Puts a garbage token at a byte offset (moved back to a char boundary).
    Insert(Index, &'static str),
    /// Puts lines of another corpus source before a line.
    Splice(Index, Index, Index, usize),
    /// Cuts the source at a byte offset.
    Truncate(Index),
    /// Keeps only the lines a mask keeps.
    KeepLines(Vec<bool>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), 1..40usize).prop_map(|(at, n)| Mutation::DropLines(at, n)),
        4 => (any::<Index>(), prop::sample::select(GARBAGE))
            .prop_map(|(at, t)| Mutation::Insert(at, t)),
        2 => (any::<Index>(), any::<Index>(), any::<Index>(), 1..60usize)
            .prop_map(|(s, from, at, n)| Mutation::Splice(s, from, at, n)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => prop::collection::vec(prop::bool::weighted(0.9), 64).prop_map(Mutation::KeepLines),
    ]
}

/// The char boundary at or before `at`.
fn boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(mut text: String, m: &Mutation) -> String {
    let lines = |t: &str| -> Vec<String> { t.split_inclusive('\n').map(str::to_owned).collect() };
    match m {
        Mutation::DropLines(at, n) => {
            let mut l = lines(&text);
            if !l.is_empty() {
                let start = at.index(l.len());
                let end = (start + n).min(l.len());
                l.drain(start..end);
            }
            l.concat()
        }
        Mutation::Insert(at, token) => {
            let at = boundary(&text, at.index(text.len() + 1));
            text.insert_str(at, token);
            text
        }
        Mutation::Splice(source, from, at, n) => {
            let donor = lines(&corpus()[source.index(corpus().len())].1);
            let start = from.index(donor.len().max(1)).min(donor.len());
            let end = (start + n).min(donor.len());
            let mut l = lines(&text);
            let at = at.index(l.len() + 1);
            l.splice(at..at, donor[start..end].iter().cloned());
            l.concat()
        }
        Mutation::Truncate(at) => {
            let at = boundary(&text, at.index(text.len() + 1));
            text.truncate(at);
            text
        }
        Mutation::KeepLines(mask) => lines(&text)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| mask[i % mask.len()])
            .map(|(_, l)| l)
            .collect(),
    }
}

/// A kernel-like source: a corpus file with up to six mutations.
fn source() -> impl Strategy<Value = String> {
    (any::<Index>(), prop::collection::vec(mutation(), 0..6)).prop_map(|(pick, mutations)| {
        let text = corpus()[pick.index(corpus().len())].1.clone();
        mutations.iter().fold(text, apply)
    })
}

/// An instrumenter configuration: any probe set and option, now and then a kernel.
fn config() -> impl Strategy<Value = Config> {
    let random = (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(accumulator, final_accumulator, operands, epilogue, loads)| Probes {
                accumulator,
                final_accumulator,
                operands,
                epilogue,
                loads,
            },
        );
    let probes = prop_oneof![Just(Probes::default()), random];
    let kernel = prop::option::weighted(
        0.2,
        prop::sample::select(vec!["gemm_mma_sync", "gemm", "megakernel", "k", "nope"]),
    );
    (
        probes,
        kernel,
        prop::option::of(any::<[u32; 3]>()),
        prop::option::of(0..=8u32),
        any::<bool>(),
        prop::bool::weighted(0.15),
        prop::option::weighted(0.2, Just("kRows")),
        prop::sample::select(vec!["k.cu", "dir with space/a \"q\" b.cu", "C:\\x\\y.cu"]),
    )
        .prop_map(
            |(probes, kernel, cta, values, absmax_only, staged_only, rows, file)| Config {
                kernel: kernel.map(str::to_owned),
                probes,
                file_name: file.to_owned(),
                cta,
                values,
                absmax_only,
                full_tile: cta.is_some() && !absmax_only,
                rows: rows.map(str::to_owned),
                staged_only,
                ..Config::default()
            },
        )
}

/// `n` cases, no regression files written into the source tree (a failure prints
/// its minimal input).
fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn strip_undoes_instrument(x in source(), config in config()) {
        // Instrumenting strips kwb's markers first, so the original is `strip(x)`
        // (`x` itself when it holds no marker); a damaged marker is an error.
        let original = kwb_instrument::strip(&x);
        if let Ok((traced, plan)) = kwb_instrument::instrument(&x, &config) {
            prop_assert!(!plan.probes.is_empty());
            let original = original.expect("instrument strips first");
            prop_assert_eq!(kwb_instrument::strip(&traced).ok(), Some(original.clone()));
            let marked = x.contains(kwb_instrument::markers::OPEN)
                || x.contains(kwb_instrument::markers::CLOSE);
            if !marked {
                prop_assert_eq!(&original, &x);
            }
            // Instrumenting the instrumented file gives it again.
            let again = kwb_instrument::instrument(&traced, &config).map(|(t, _)| t).ok();
            prop_assert_eq!(again.as_deref(), Some(traced.as_str()));
        }
    }

    #[test]
    fn a_stray_marker_is_an_error(
        x in source(),
        at in any::<Index>(),
        open in any::<bool>(),
    ) {
        let marker = match open {
            true => kwb_instrument::markers::OPEN,
            false => kwb_instrument::markers::CLOSE,
        };
        let mut x = x;
        let at = boundary(&x, at.index(x.len() + 1));
        x.insert_str(at, marker);
        prop_assert!(kwb_instrument::strip(&x).is_err());
        prop_assert!(kwb_instrument::instrument(&x, &Config::default()).is_err());
    }
}

/// A record: arbitrary bytes with the magic and version a decoder accepts.
fn record() -> impl Strategy<Value = TraceRecord> {
    prop::collection::vec(any::<u8>(), RECORD_SIZE).prop_map(|bytes| {
        let mut raw = [0u8; RECORD_SIZE];
        raw.copy_from_slice(&bytes);
        raw[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
        raw[4..8].copy_from_slice(&kwb_runtime::VERSION.to_le_bytes());
        TraceRecord::from_le_bytes(&raw)
    })
}

fn site() -> impl Strategy<Value = SiteInfo> {
    (any::<u32>(), ".{0,24}", any::<u32>(), ".{0,80}").prop_map(|(id, file, line, text)| SiteInfo {
        id,
        file,
        line,
        text,
    })
}

/// A summary entry: arbitrary fields, holding at least one K tile.
fn summary_entry() -> impl Strategy<Value = SummaryEntry> {
    (
        any::<(u32, u32, u32, i32, u32)>(),
        any::<(u64, u64, u64, u64, u64)>(),
        any::<u32>(),
        any::<([i32; 3], [i32; 3], u32)>(),
    )
        .prop_map(
            |(
                (site, kind, tag, k_tile, width),
                (probes, count, seen, nans, infs),
                bits,
                (peak, bad, reserved2),
            )| {
                let k_tile = k_tile.min(i32::MAX - 1);
                SummaryEntry {
                    site,
                    kind,
                    tag,
                    k_tile,
                    k_end: k_tile.saturating_add(1 + (width % 1000) as i32),
                    reserved: 0,
                    probes,
                    count,
                    seen,
                    nan_count: nans,
                    inf_count: infs,
                    absmax: f32::from_bits(bits),
                    peak_cta_x: peak[0],
                    peak_cta_y: peak[1],
                    peak_cta_z: peak[2],
                    bad_cta_x: bad[0],
                    bad_cta_y: bad[1],
                    bad_cta_z: bad[2],
                    reserved2,
                }
            },
        )
}

/// A trace: sites, records, tile values that each name one of its records, and a
/// summary.
fn trace() -> impl Strategy<Value = Trace> {
    (
        prop::collection::vec(site(), 0..5),
        prop::collection::vec(record(), 0..6),
        any::<(u64, u64, u64, u64)>(),
        prop::collection::vec(
            (
                any::<Index>(),
                any::<u32>(),
                any::<u32>(),
                any::<(i32, i32, i32)>(),
            ),
            0..10,
        ),
        (
            prop::collection::vec(summary_entry(), 0..5),
            any::<(u64, u32, [u32; 3])>(),
        ),
    )
        .prop_map(
            |(
                sites,
                records,
                (dropped, capacity, tile_dropped, tile_capacity),
                tiles,
                (summary, (summary_dropped, summary_k_tiles, summary_grid)),
            )| {
                let tiles = match records.len() {
                    0 => Vec::new(),
                    n => tiles
                        .into_iter()
                        .map(|(record, element, bits, (m, n_, k))| TileValue {
                            record: record.index(n) as u32,
                            element,
                            value: f32::from_bits(bits),
                            m,
                            n: n_,
                            k,
                        })
                        .collect(),
                };
                Trace {
                    sites,
                    records,
                    dropped,
                    capacity,
                    tiles,
                    tile_dropped,
                    tile_capacity,
                    summary,
                    summary_dropped,
                    summary_k_tiles,
                    summary_grid,
                }
            },
        )
}

/// A summary entry's fields, its absmax as bits.
type SummaryBits = ([u32; 3], [i32; 2], [u64; 5], u32, [i32; 6]);

/// A trace's floats as bits, so that NaN compares equal to itself.
fn bits(trace: &Trace) -> (Vec<Vec<u8>>, Vec<[u32; 6]>, Vec<SummaryBits>) {
    (
        trace
            .records
            .iter()
            .map(|r| r.to_le_bytes().to_vec())
            .collect(),
        trace
            .tiles
            .iter()
            .map(|v| {
                [
                    v.record,
                    v.element,
                    v.value.to_bits(),
                    v.m as u32,
                    v.n as u32,
                    v.k as u32,
                ]
            })
            .collect(),
        trace
            .summary
            .iter()
            .map(|e| {
                (
                    [e.site, e.kind, e.tag],
                    [e.k_tile, e.k_end],
                    [e.probes, e.count, e.seen, e.nan_count, e.inf_count],
                    e.absmax.to_bits(),
                    [
                        e.peak_cta_x,
                        e.peak_cta_y,
                        e.peak_cta_z,
                        e.bad_cta_x,
                        e.bad_cta_y,
                        e.bad_cta_z,
                    ],
                )
            })
            .collect(),
    )
}

/// A change that damages a valid trace file.
#[derive(Debug, Clone)]
enum Damage {
    Truncate(Index),
    Flip(Index, u8),
    /// Overwrites a header word (version, record size, counts, site table size).
    Word(Index, u64),
    Append(Vec<u8>),
    Insert(Index, Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    let word = prop_oneof![
        any::<u64>(),
        Just(u64::MAX),
        Just(u32::MAX as u64),
        0..300u64
    ];
    prop_oneof![
        any::<Index>().prop_map(Damage::Truncate),
        (any::<Index>(), 1..=255u8).prop_map(|(at, x)| Damage::Flip(at, x)),
        (any::<Index>(), word).prop_map(|(at, v)| Damage::Word(at, v)),
        prop::collection::vec(any::<u8>(), 1..64).prop_map(Damage::Append),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..32))
            .prop_map(|(at, b)| Damage::Insert(at, b)),
    ]
}

fn damaged(mut bytes: Vec<u8>, d: &Damage) -> Vec<u8> {
    match d {
        Damage::Truncate(at) => bytes.truncate(at.index(bytes.len() + 1)),
        Damage::Flip(_, _) | Damage::Word(_, _) if bytes.len() < 48 => {}
        Damage::Flip(at, x) => {
            let at = at.index(bytes.len());
            bytes[at] ^= x;
        }
        Damage::Word(at, value) => {
            // The header's fields: u32 at 8 and 12, u64 at 16, 24 and 32, u32 at 40 and 44.
            let (offset, width) =
                [(8, 4), (12, 4), (16, 8), (24, 8), (32, 8), (40, 4), (44, 4)][at.index(7)];
            bytes[offset..offset + width].copy_from_slice(&value.to_le_bytes()[..width]);
        }
        Damage::Append(tail) => bytes.extend_from_slice(tail),
        Damage::Insert(at, chunk) => {
            let at = at.index(bytes.len() + 1);
            bytes.splice(at..at, chunk.iter().copied());
        }
    }
    bytes
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn trace_encode_then_decode_is_the_trace(t in trace()) {
        let bytes = kwb_runtime::encode(&t);
        let back = kwb_runtime::decode(&bytes).expect("the writer's file decodes");
        prop_assert_eq!(&back.sites, &t.sites);
        prop_assert_eq!(bits(&back), bits(&t));
        prop_assert_eq!(
            (back.dropped, back.capacity, back.tile_dropped, back.tile_capacity),
            (t.dropped, t.capacity, t.tile_dropped, t.tile_capacity)
        );
        prop_assert_eq!(kwb_runtime::encode(&back), bytes);
    }

    #[test]
    fn trace_decode_never_panics_on_random_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        magic in any::<bool>(),
    ) {
        let mut bytes = bytes;
        if magic {
            // Past the magic check, into the header and tables.
            bytes.splice(0..bytes.len().min(8), *b"KWBTRACE");
        }
        let _ = kwb_runtime::decode(&bytes);
    }

    #[test]
    fn trace_decode_never_panics_on_damaged_files(
        t in trace(),
        damage in prop::collection::vec(damage(), 1..4),
    ) {
        let bytes = damage.iter().fold(kwb_runtime::encode(&t), damaged);
        if let Ok(back) = kwb_runtime::decode(&bytes) {
            // Whatever still decodes is a trace the writer writes back the same.
            let again = kwb_runtime::decode(&kwb_runtime::encode(&back));
            prop_assert_eq!(again.map(|b| bits(&b)).ok(), Some(bits(&back)));
        }
    }
}

/// The manifests kwb-extract writes for the mma_sync kernel and for the TMA kernel
/// (descriptors and host encoders).
fn manifests() -> &'static [Manifest] {
    static MANIFESTS: OnceLock<Vec<Manifest>> = OnceLock::new();
    MANIFESTS.get_or_init(|| {
        [
            ("mma_sync", "gemm_mma_sync"),
            ("tma_wgmma_sm90", "gemm_wgmma_tma"),
        ]
        .iter()
        .map(|(family, kernel)| kwb_tests::suite_manifest(family, kernel))
        .collect()
    })
}

/// One change to a manifest.
#[derive(Debug, Clone)]
enum Edit {
    /// Replaces a text field (picked by index) with a string.
    Text(Index, String),
    /// Replaces a line or count field.
    Number(Index, u32),
    /// Sets or clears an optional value.
    Value(Index, Option<i64>),
    /// Drops or doubles a list's element.
    List(Index, Index, bool),
}

/// Any text, control characters, quotes, backslashes and TOML syntax included.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,20}",
        "[\"'\\\\\\[\\]{}=#\\n\\r\\t\\x00-\\x1f\\x7f ]{0,12}",
        Just(String::new()),
        Just("\"\"\"'''".to_owned()),
        Just("a\nb = 1\n[kernel]".to_owned()),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<Index>(), text()).prop_map(|(at, s)| Edit::Text(at, s)),
        2 => (any::<Index>(), any::<u32>()).prop_map(|(at, n)| Edit::Number(at, n)),
        2 => (any::<Index>(), prop::option::of(any::<i64>()))
            .prop_map(|(at, v)| Edit::Value(at, v)),
        2 => (any::<Index>(), any::<Index>(), any::<bool>())
            .prop_map(|(l, at, twice)| Edit::List(l, at, twice)),
    ]
}

fn drop_or_double<T: Clone>(list: &mut Vec<T>, at: &Index, twice: bool) {
    if list.is_empty() {
        return;
    }
    let at = at.index(list.len());
    match twice {
        true => list.insert(at, list[at].clone()),
        false => {
            list.remove(at);
        }
    }
}

fn perturb(mut m: Manifest, e: &Edit) -> Manifest {
    match e {
        Edit::Text(at, s) => {
            let mut fields: Vec<&mut String> = vec![
                &mut m.source.file,
                &mut m.kernel.name,
                &mut m.kernel.instantiation,
                &mut m.kernel.entry,
                &mut m.kernel.kernel_symbol,
                &mut m.build.std,
                &mut m.build.arch,
                &mut m.build.from,
            ];
            fields.extend(m.build.defines.iter_mut());
            fields.extend(m.build.includes.iter_mut());
            for p in m.params.iter_mut().chain(m.host.launcher.iter_mut()) {
                fields.extend([&mut p.name, &mut p.declaration, &mut p.role]);
            }
            for a in &mut m.kernel.template_args {
                fields.extend([&mut a.name, &mut a.written, &mut a.emitted]);
            }
            if let Some(l) = &mut m.launch {
                fields.extend(l.args.iter_mut());
                for c in &mut l.config {
                    fields.extend([&mut c.role, &mut c.written]);
                }
            }
            for d in &mut m.descriptors {
                fields.extend([&mut d.function, &mut d.box_dims.written]);
                fields.extend(d.global_dims.values.iter_mut());
                fields.extend(d.swizzle.changes.iter_mut());
            }
            for enc in &mut m.host.encoders {
                fields.extend([&mut enc.param, &mut enc.function, &mut enc.call]);
            }
            fields.extend(m.host.unavailable.iter_mut());
            fields.extend(m.host.config.iter_mut());
            let n = fields.len();
            *fields[at.index(n)] = s.clone();
        }
        Edit::Number(at, n) => {
            let n = *n as usize;
            let mut fields: Vec<&mut usize> = vec![&mut m.source.kernel_line];
            fields.extend(m.source.launch_line.iter_mut());
            fields.extend(m.source.copied.iter_mut().flatten());
            fields.extend(m.descriptors.iter_mut().map(|d| &mut d.line));
            fields.extend(m.host.encoders.iter_mut().map(|e| &mut e.line));
            let len = fields.len();
            *fields[at.index(len)] = n;
        }
        Edit::Value(at, v) => {
            let mut fields: Vec<&mut Option<i64>> = m
                .kernel
                .template_args
                .iter_mut()
                .map(|a| &mut a.value)
                .collect();
            if let Some(l) = &mut m.launch {
                fields.extend(l.config.iter_mut().map(|c| &mut c.value));
            }
            if !fields.is_empty() {
                let len = fields.len();
                *fields[at.index(len)] = *v;
            } else {
                m.source.launch_line = v.map(|v| v.unsigned_abs() as usize % 100_000);
            }
        }
        Edit::List(list, at, twice) => match list.index(6) {
            0 => drop_or_double(&mut m.params, at, *twice),
            1 => drop_or_double(&mut m.kernel.template_args, at, *twice),
            2 => drop_or_double(&mut m.source.copied, at, *twice),
            3 => drop_or_double(&mut m.descriptors, at, *twice),
            4 => drop_or_double(&mut m.host.encoders, at, *twice),
            _ => m.launch = None,
        },
    }
    m
}

proptest! {
    #![proptest_config(cases(128))]

    #[test]
    fn manifest_reads_back_what_it_wrote(
        pick in any::<Index>(),
        edits in prop::collection::vec(edit(), 0..8),
    ) {
        let base = manifests()[pick.index(manifests().len())].clone();
        let m = edits.iter().fold(base, perturb);
        let text = m.to_toml();
        let back = Manifest::from_toml(&text);
        prop_assert!(back.is_ok(), "{:?}\n{}", back.err(), text);
        prop_assert_eq!(back.unwrap(), m);
    }
}

/// Any f32, NaN payloads and infinities included.
fn floats(len: usize) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(any::<u32>().prop_map(f32::from_bits), len)
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn npy_reads_back_what_it_wrote(
        (shape, values) in prop::collection::vec(0..7usize, 0..5)
            .prop_flat_map(|shape| {
                let len = shape.iter().product();
                (Just(shape), floats(len))
            })
    ) {
        let bytes = kwb_cli::npy::f32_array(&shape, &values);
        // The header is padded so the data starts on a 64-byte boundary.
        prop_assert_eq!((bytes.len() - 4 * values.len()) % 64, 0);
        let (back_shape, back) = kwb_cli::npy::read_f32(&bytes).expect("what kwb writes it reads");
        prop_assert_eq!(back_shape, shape.clone());
        prop_assert_eq!(
            back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        // Integers are written, never read as floats.
        let ints: Vec<i32> = values.iter().map(|v| v.to_bits() as i32).collect();
        prop_assert_eq!(
            kwb_cli::npy::read_f32(&kwb_cli::npy::i32_array(&shape, &ints)),
            Err(kwb_cli::npy::NpyError::Dtype("<i4".to_owned()))
        );
    }

    #[test]
    fn npy_read_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        header in "[0-9a-z'(),: <>_]{0,60}",
        version in 0..5u8,
    ) {
        let _ = kwb_cli::npy::read_f32(&bytes);
        // A magic and a version, then a header of random dict-like text and data.
        let mut file = b"\x93NUMPY".to_vec();
        file.extend_from_slice(&[version, 0]);
        match version {
            2 | 3 => file.extend_from_slice(&(header.len() as u32).to_le_bytes()),
            _ => file.extend_from_slice(&(header.len() as u16).to_le_bytes()),
        }
        file.extend_from_slice(header.as_bytes());
        file.extend_from_slice(&bytes);
        let _ = kwb_cli::npy::read_f32(&file);
    }
}
