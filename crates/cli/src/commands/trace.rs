//! `kwb trace show FILE`: what a trace recorded, per site and K tile.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use miette::Report;
use serde::Serialize;

use crate::{exit, render};

#[derive(clap::Args)]
pub struct ShowArgs {
    /// A trace file written by an instrumented build (KWB_TRACE_OUT or kwb_trace_flush)
    file: PathBuf,
    /// Print JSON
    #[arg(long)]
    json: bool,
    /// Write the full tiles of a --full-tile trace as .npy files (and index.json) into
    /// this folder
    #[arg(long, value_name = "DIR")]
    npy: Option<PathBuf>,
}

/// The records of one site at one point of the K loop, merged over CTAs and warps:
/// a K tile, the call number of a probe without a K-tile counter (operands read in
/// a device helper), or the whole run of a probe outside the K loop.
#[derive(Serialize)]
struct Row {
    site: u32,
    line: Option<u32>,
    text: Option<String>,
    kind: String,
    tag: String,
    k_tile: i32,
    /// The per-warp call number, for operand probes outside any counted K loop.
    call: Option<u32>,
    records: usize,
    count: u64,
    absmax: f32,
    /// The smallest finite value (null when none was finite).
    min: Option<f32>,
    /// The largest finite value.
    max: Option<f32>,
    nan: u64,
    inf: u64,
    first_values: Vec<f32>,
}

/// Whether records of this kind without a K tile are told apart by call number:
/// operands and loads happen once per K tile even where no counter is in scope;
/// accumulator and epilogue probes outside the loop describe the end result.
fn numbered_by_call(kind: Option<kwb_runtime::Kind>) -> bool {
    matches!(
        kind,
        Some(kwb_runtime::Kind::OperandA | kwb_runtime::Kind::OperandB | kwb_runtime::Kind::Load)
    )
}

#[derive(Serialize)]
struct Shown {
    file: String,
    records: usize,
    dropped: u64,
    capacity: u64,
    /// Full-tile values in the trace (0 unless it was built with --full-tile).
    tile_values: usize,
    tile_dropped: u64,
    /// Files written by --npy.
    npy_files: Option<usize>,
    /// The CTAs that wrote records, with their tile origin where a probe had it.
    ctas: Vec<Cta>,
    rows: Vec<Row>,
    /// A summary build's table (`--summary`), folded over every admitted CTA.
    summary: Option<Summary>,
    /// Sites whose probe reads a type kwb's value model cannot read.
    not_probed: Vec<NotProbed>,
}

/// A site whose probe compiled but read nothing: the type it was given.
#[derive(Serialize)]
struct NotProbed {
    site: u32,
    line: Option<u32>,
    text: Option<String>,
    #[serde(rename = "type")]
    ty: String,
}

/// The summary section of a `--summary` trace.
#[derive(Serialize)]
struct Summary {
    /// The grid its CTAs were decoded with (zeros: unknown).
    grid: [u32; 3],
    /// The table's K-tile rows: the last also holds every later K tile; 1 for a
    /// screen (`--screen`), whose one row per site folds every K tile.
    k_tiles: u32,
    /// Probe calls of sites past the table, not folded in.
    dropped: u64,
    rows: Vec<SummaryRow>,
}

/// One site and K tile of a summary: every admitted CTA's and warp's calls folded.
#[derive(Serialize)]
struct SummaryRow {
    site: u32,
    line: Option<u32>,
    text: Option<String>,
    kind: String,
    tag: String,
    k_tile: i32,
    /// True for the table's last row, which also holds every later K tile.
    later_k_tiles: bool,
    /// Probe calls folded in (one per warp and call); 0 with values in the row: the
    /// calls were folded in the warps' registers (a screen's `kwb::Fold`), which count
    /// values, not calls.
    probes: u64,
    count: u64,
    absmax: f32,
    nan: u64,
    inf: u64,
    /// A CTA whose values reached absmax (null: the grid was unknown).
    peak_cta: Option<[u32; 3]>,
    /// The lowest-numbered CTA that counted a NaN or an Inf (null: none did).
    first_bad_cta: Option<[u32; 3]>,
}

/// How a row names its probe: the site's line and source text (when the site table
/// has it), the kind by name and the tag in hex.
fn labels(
    trace: &kwb_runtime::Trace,
    site: u32,
    kind: u32,
    tag: u32,
) -> (Option<u32>, Option<String>, String, String) {
    let entry = trace.site(site);
    (
        entry.map(|s| s.line),
        entry.map(|s| s.text.clone()),
        kwb_runtime::Kind::from_u32(kind)
            .map_or_else(|| format!("kind {kind}"), |k| format!("{k:?}")),
        format!("0x{tag:08x}"),
    )
}

fn summary(trace: &kwb_runtime::Trace) -> Option<Summary> {
    if trace.summary_k_tiles == 0 && trace.summary.is_empty() {
        return None;
    }
    let rows = trace
        .summary
        .iter()
        .map(|e| {
            let (line, text, kind, tag) = labels(trace, e.site, e.kind, e.tag);
            SummaryRow {
                site: e.site,
                line,
                text,
                kind,
                tag,
                k_tile: e.k_tile,
                later_k_tiles: e.holds_later_k_tiles(),
                probes: e.probes,
                count: e.count,
                absmax: e.absmax,
                nan: e.nan_count,
                inf: e.inf_count,
                peak_cta: e.peak_cta(),
                first_bad_cta: e.bad_cta(),
            }
        })
        .collect();
    Some(Summary {
        grid: trace.summary_grid,
        k_tiles: trace.summary_k_tiles,
        dropped: trace.summary_dropped,
        rows,
    })
}

/// One CTA of the trace and the origin of its output tile (the kernel's own
/// `m0`/`n0`-style locals, or a megakernel task's `out_col`, when the probes had them
/// in scope): the first one, and every distinct one (a CTA of a megakernel computes
/// a tile per task).
#[derive(serde::Serialize)]
struct Cta {
    cta: [u32; 3],
    tile_m: Option<i32>,
    tile_n: Option<i32>,
    /// Every distinct (m, n) origin of its records, in record order (-1: unknown).
    tiles: Vec<[i32; 2]>,
    records: usize,
}

pub fn show(args: ShowArgs) -> i32 {
    let bytes = match std::fs::read(&args.file) {
        Ok(b) => b,
        Err(source) => {
            render::error(Report::new(crate::error::CliError::Unreadable {
                path: args.file.clone(),
                source,
            }));
            return exit::INPUT;
        }
    };
    let trace = match kwb_runtime::decode(&bytes) {
        Ok(t) => t,
        Err(e) => {
            render::error(Report::new(e));
            return exit::INPUT;
        }
    };
    let mut rows: BTreeMap<(u32, i32, Option<u32>), Row> = BTreeMap::new();
    let mut ctas: BTreeMap<[u32; 3], Cta> = BTreeMap::new();
    let calls = trace.call_numbers();
    let mut not_probed = Vec::new();
    for (record, call) in trace.records.iter().zip(calls) {
        if let Some(ty) = record.unprobed_type() {
            let (line, text, _, _) = labels(&trace, record.site, record.kind, record.tag);
            not_probed.push(NotProbed {
                site: record.site,
                line,
                text,
                ty,
            });
            continue;
        }
        let key = [record.cta_x, record.cta_y, record.cta_z];
        let cta = ctas.entry(key).or_insert(Cta {
            cta: key,
            tile_m: None,
            tile_n: None,
            tiles: Vec::new(),
            records: 0,
        });
        cta.records += 1;
        let tile = [record.tile_m, record.tile_n];
        if tile != [-1, -1] && !cta.tiles.contains(&tile) {
            cta.tiles.push(tile);
        }
        if record.tile_m >= 0 {
            cta.tile_m.get_or_insert(record.tile_m);
        }
        if record.tile_n >= 0 {
            cta.tile_n.get_or_insert(record.tile_n);
        }
        let call = (record.k_tile < 0 && numbered_by_call(record.kind())).then_some(call);
        let row = rows
            .entry((record.site, record.k_tile, call))
            .or_insert_with(|| {
                let (line, text, kind, tag) = labels(&trace, record.site, record.kind, record.tag);
                Row {
                    site: record.site,
                    line,
                    text,
                    kind,
                    tag,
                    k_tile: record.k_tile,
                    call,
                    records: 0,
                    count: 0,
                    absmax: 0.0,
                    min: None,
                    max: None,
                    nan: 0,
                    inf: 0,
                    first_values: record.samples().map(|s| s.value).collect(),
                }
            });
        row.records += 1;
        row.count += u64::from(record.count);
        row.absmax = row.absmax.max(record.absmax);
        if record.vmin.is_finite() {
            row.min = Some(row.min.map_or(record.vmin, |m| m.min(record.vmin)));
        }
        if record.vmax.is_finite() {
            row.max = Some(row.max.map_or(record.vmax, |m| m.max(record.vmax)));
        }
        row.nan += u64::from(record.nan_count);
        row.inf += u64::from(record.inf_count);
    }
    let npy_files = match &args.npy {
        None => None,
        Some(dir) => {
            if trace.tiles.is_empty() {
                render::error(Report::new(crate::error::CliError::NoTiles {
                    path: args.file.clone(),
                }));
                return exit::INPUT;
            }
            let numbered =
                |r: &kwb_runtime::TraceRecord| r.k_tile < 0 && numbered_by_call(r.kind());
            match crate::tiles::export(&trace, dir, numbered) {
                Ok(entries) => Some(
                    entries
                        .iter()
                        .map(|e| 2 + usize::from(e.grid_file.is_some()))
                        .sum::<usize>()
                        + 1,
                ),
                Err(source) => {
                    render::error(Report::new(crate::error::CliError::Unwritable {
                        path: dir.clone(),
                        source,
                    }));
                    return exit::INPUT;
                }
            }
        }
    };
    let shown = Shown {
        file: args.file.display().to_string(),
        records: trace.records.len(),
        dropped: trace.dropped,
        capacity: trace.capacity,
        tile_values: trace.tiles.len(),
        tile_dropped: trace.tile_dropped,
        npy_files,
        ctas: ctas.into_values().collect(),
        rows: rows.into_values().collect(),
        summary: summary(&trace),
        not_probed,
    };
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &shown)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(out))
    } else {
        human(&mut out, &shown)
    };
    if written.is_err() {
        exit::INTERNAL
    } else {
        exit::OK
    }
}

fn human(out: &mut impl Write, shown: &Shown) -> std::io::Result<()> {
    writeln!(
        out,
        "{}: {} records ({} dropped, capacity {})",
        shown.file, shown.records, shown.dropped, shown.capacity
    )?;
    for n in &shown.not_probed {
        writeln!(
            out,
            "not probed: site {}{}: a value of type `{}`, which kwb cannot read as numbers",
            n.site,
            match (n.line, &n.text) {
                (Some(line), Some(text)) => format!(" (line {line}, `{text}`)"),
                _ => String::new(),
            },
            n.ty
        )?;
    }
    if shown.tile_values > 0 || shown.tile_dropped > 0 {
        writeln!(
            out,
            "full tiles: {} values ({} dropped){}",
            shown.tile_values,
            shown.tile_dropped,
            shown
                .npy_files
                .map_or(String::new(), |n| format!(", {n} files written"))
        )?;
    }
    // The CTAs: each with its tile origin, up to four; else how many.
    let origin = |c: &Cta| {
        let axis = |v: Option<i32>| v.map_or("?".to_owned(), |v| v.to_string());
        if c.tile_m.is_none() && c.tile_n.is_none() {
            String::new()
        } else if c.tiles.len() > 1 {
            format!(
                ", {} tiles (the first at (m {}, n {}); --json lists each)",
                c.tiles.len(),
                axis(c.tile_m),
                axis(c.tile_n)
            )
        } else {
            format!(", tile at (m {}, n {})", axis(c.tile_m), axis(c.tile_n))
        }
    };
    match shown.ctas.as_slice() {
        [] => {}
        few if few.len() <= 4 => {
            for c in few {
                writeln!(
                    out,
                    "CTA ({}, {}, {}): {} records{}",
                    c.cta[0],
                    c.cta[1],
                    c.cta[2],
                    c.records,
                    origin(c)
                )?;
            }
        }
        many => writeln!(
            out,
            "{} CTAs (--json lists each, with its tile origin where the probes had one)",
            many.len()
        )?,
    }
    if let Some(summary) = &shown.summary {
        summary_table(out, summary)?;
        if shown.rows.is_empty() {
            return Ok(());
        }
    }
    writeln!(
        out,
        "{:>4} {:>6} {:>12} {:>7} {:>10} {:>12} {:>12} {:>12} {:>5} {:>5}  first values",
        "site", "line", "kind", "k tile", "values", "absmax", "min", "max", "NaN", "Inf"
    )?;
    for r in &shown.rows {
        let k = match (r.k_tile, r.call) {
            (_, Some(call)) => format!("#{call}"),
            (k, None) => k_tile_label(k, &r.kind),
        };
        let opt = |v: Option<f32>| v.map_or("-".to_owned(), |v| format!("{v}"));
        let first: Vec<String> = r
            .first_values
            .iter()
            .take(4)
            .map(|v| format!("{v}"))
            .collect();
        writeln!(
            out,
            "{:>4} {:>6} {:>12} {:>7} {:>10} {:>12} {:>12} {:>12} {:>5} {:>5}  {}",
            r.site,
            r.line.map_or("-".to_owned(), |l| l.to_string()),
            r.kind,
            k,
            r.count,
            r.absmax,
            opt(r.min),
            opt(r.max),
            r.nan,
            r.inf,
            first.join(" ")
        )?;
    }
    Ok(())
}

/// How a K tile reads in a table: its index, or what a probe outside the K loop saw.
fn k_tile_label(k_tile: i32, kind: &str) -> String {
    match k_tile {
        k if k >= 0 => k.to_string(),
        _ if kind == "Epilogue" => "out".to_owned(),
        _ if kind == "TileContext" => "-".to_owned(),
        _ => "final".to_owned(),
    }
}

/// A summary's table: per site and K tile, every admitted CTA folded.
fn summary_table(out: &mut impl Write, summary: &Summary) -> std::io::Result<()> {
    let [gx, gy, gz] = summary.grid;
    let grid = if gx == 0 {
        "grid unknown: no CTA places".to_owned()
    } else {
        format!("grid ({gx}, {gy}, {gz})")
    };
    // A screen (KWB_TRACE_SCREEN) has one row per site, every K tile folded into it.
    let screen = summary.k_tiles == 1;
    writeln!(
        out,
        "{} of every admitted CTA: {} {}, {grid}{}",
        if screen { "screen" } else { "summary" },
        summary.rows.len(),
        if screen {
            "site rows (every K tile folded)"
        } else {
            "site/K-tile rows"
        },
        if summary.dropped > 0 {
            format!(
                "; {} probe calls of sites past the table were not folded in (raise KWB_TRACE_SUMMARY_SITES)",
                summary.dropped
            )
        } else {
            String::new()
        }
    )?;
    writeln!(
        out,
        "{:>4} {:>6} {:>12} {:>7} {:>8} {:>12} {:>12} {:>8} {:>8}  {:<15} first NaN/Inf at",
        "site", "line", "kind", "k tile", "calls", "values", "absmax", "NaN", "Inf", "peak at"
    )?;
    let cta =
        |c: Option<[u32; 3]>| c.map_or("-".to_owned(), |[x, y, z]| format!("({x}, {y}, {z})"));
    // A screen's folds (kwb-instrument --screen) count values, not calls: a row with
    // values and no calls was folded in the warps' registers.
    let calls = |r: &SummaryRow| {
        if r.probes == 0 && (r.count > 0 || r.nan > 0 || r.inf > 0) {
            "-".to_owned()
        } else {
            r.probes.to_string()
        }
    };
    if summary.rows.iter().any(|r| calls(r) == "-") {
        writeln!(
            out,
            "calls `-`: folded in the warps' registers (a screen's folds count values, not calls)"
        )?;
    }
    for r in &summary.rows {
        // A summary cannot number the calls of a probe outside a counted K loop (an
        // operand read in a device helper): its row folds every one of them.
        let mut k = if screen {
            "all".to_owned()
        } else if r.k_tile < 0 && matches!(r.kind.as_str(), "OperandA" | "OperandB" | "Load") {
            "any".to_owned()
        } else {
            k_tile_label(r.k_tile, &r.kind)
        };
        if r.later_k_tiles && !screen {
            k.push('+');
        }
        writeln!(
            out,
            "{:>4} {:>6} {:>12} {:>7} {:>8} {:>12} {:>12} {:>8} {:>8}  {:<15} {}",
            r.site,
            r.line.map_or("-".to_owned(), |l| l.to_string()),
            r.kind,
            k,
            calls(r),
            r.count,
            r.absmax,
            r.nan,
            r.inf,
            cta(r.peak_cta),
            cta(r.first_bad_cta)
        )?;
    }
    Ok(())
}
