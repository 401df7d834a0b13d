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
}

/// The records of one site at one K tile, merged over CTAs and warps.
#[derive(Serialize)]
struct Row {
    site: u32,
    line: Option<u32>,
    text: Option<String>,
    kind: String,
    tag: String,
    k_tile: i32,
    records: usize,
    count: u64,
    absmax: f32,
    nan: u64,
    inf: u64,
    first_values: Vec<f32>,
}

#[derive(Serialize)]
struct Shown {
    file: String,
    records: usize,
    dropped: u64,
    capacity: u64,
    rows: Vec<Row>,
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
    let mut rows: BTreeMap<(u32, i32), Row> = BTreeMap::new();
    for record in &trace.records {
        let site = trace.site(record.site);
        let row = rows
            .entry((record.site, record.k_tile))
            .or_insert_with(|| Row {
                site: record.site,
                line: site.map(|s| s.line),
                text: site.map(|s| s.text.clone()),
                kind: record
                    .kind()
                    .map_or_else(|| format!("kind {}", record.kind), |k| format!("{k:?}")),
                tag: format!("0x{:08x}", record.tag),
                k_tile: record.k_tile,
                records: 0,
                count: 0,
                absmax: 0.0,
                nan: 0,
                inf: 0,
                first_values: record.samples().map(|s| s.value).collect(),
            });
        row.records += 1;
        row.count += u64::from(record.count);
        row.absmax = row.absmax.max(record.absmax);
        row.nan += u64::from(record.nan_count);
        row.inf += u64::from(record.inf_count);
    }
    let shown = Shown {
        file: args.file.display().to_string(),
        records: trace.records.len(),
        dropped: trace.dropped,
        capacity: trace.capacity,
        rows: rows.into_values().collect(),
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
    writeln!(
        out,
        "{:>4} {:>6} {:>12} {:>7} {:>10} {:>12} {:>5} {:>5}  first values",
        "site", "line", "kind", "k tile", "values", "absmax", "NaN", "Inf"
    )?;
    for r in &shown.rows {
        let k = if r.k_tile < 0 {
            "final".to_owned()
        } else {
            r.k_tile.to_string()
        };
        let first: Vec<String> = r
            .first_values
            .iter()
            .take(4)
            .map(|v| format!("{v}"))
            .collect();
        writeln!(
            out,
            "{:>4} {:>6} {:>12} {:>7} {:>10} {:>12} {:>5} {:>5}  {}",
            r.site,
            r.line.map_or("-".to_owned(), |l| l.to_string()),
            r.kind,
            k,
            r.count,
            r.absmax,
            r.nan,
            r.inf,
            first.join(" ")
        )?;
    }
    Ok(())
}
