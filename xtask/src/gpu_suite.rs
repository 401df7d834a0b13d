//! `cargo xtask gpu-suite`: on a machine with a GPU, build every variant for its
//! family's first architecture, run its harness, check each rung against
//! `kernels/suite.toml`, and write the evidence to `docs/results/suite.md`.
//!
//! The binary of xtask runs without cargo too (`xtask gpu-suite`), so a machine with
//! a GPU but no Rust can run the suite from a build carried over.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::kernels::{Build, Built, compile_all, tools};
use crate::suite::{Outcome, Suite, Variant};
use crate::{Failure, Result};

/// Options of the task.
pub struct Options {
    pub jobs: usize,
    pub timeout: Duration,
    pub out: PathBuf,
    pub commit: Option<String>,
}

/// One `KWB_RESULT` line.
#[derive(Debug, Deserialize)]
pub(crate) struct Rung {
    pub input: String,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    #[serde(deserialize_with = "number")]
    pub max_abs: f64,
    #[serde(deserialize_with = "number")]
    pub rel_l2: f64,
    #[serde(deserialize_with = "number")]
    pub ratio: f64,
    pub nan: u64,
    pub inf: u64,
    pub mismatches: u64,
    pub first_mismatch: [i64; 2],
}

impl Rung {
    /// The harness's check of this rung's output, as kwb-diagnose reads it.
    pub(crate) fn output_check(&self) -> kwb_diagnose::OutputCheck {
        kwb_diagnose::OutputCheck {
            mismatches: self.mismatches,
            nan: self.nan,
            inf: self.inf,
            ratio: self.ratio,
            // The harness counts wrong outputs, not where they are.
            wrong_tiles: None,
        }
    }
}

/// Writes a GPU report to `out`, its folder made first.
pub(crate) fn write_report(out: &Path, report: &str) -> Result {
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Failure(format!("{}: {e}", parent.display())))?;
    }
    std::fs::write(out, report).map_err(|e| Failure(format!("{}: {e}", out.display())))?;
    println!("wrote {}", out.display());
    Ok(())
}

/// Numbers, or the strings "nan"/"inf" the harness writes for non-finite values.
fn number<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        F(f64),
        S(String),
    }
    Ok(match N::deserialize(d)? {
        N::F(f) => f,
        N::S(s) if s == "inf" => f64::INFINITY,
        N::S(_) => f64::NAN,
    })
}

/// What running one variant gave.
pub(crate) struct Ran {
    pub rungs: Vec<Rung>,
    pub hang: bool,
    pub error: Option<String>,
    pub seconds: f64,
}

pub fn run(root: &Path, options: &Options) -> Result {
    let suite = Suite::load(root)?;
    let (toolchain, cutlass) = tools()?;
    let build = Build {
        jobs: options.jobs,
        family: None,
        selection: crate::kernels::Selection::First,
        traced: None,
    };
    let built = compile_all(root, &suite, &toolchain, cutlass.as_ref(), &build)?;
    let mut rows = Vec::new();
    let mut wrong = 0;
    for b in &built {
        let ran = match &b.result {
            Ok(_) => run_one(&b.binary, &[], &[], options.timeout),
            Err(e) => Ran {
                rungs: Vec::new(),
                hang: false,
                error: Some(format!("build failed: {}", first_line(e))),
                seconds: 0.0,
            },
        };
        let (ok, cells) = judge(b.variant, &ran);
        if !ok {
            wrong += 1;
        }
        println!(
            "{} {}/{}",
            if ok { "ok  " } else { "WRONG" },
            b.variant.family,
            b.variant.defect
        );
        rows.push(row(b, &ran, ok, &cells));
    }
    let report = markdown(&toolchain, options, &built, &rows, wrong);
    write_report(&options.out, &report)?;
    if wrong == 0 {
        Ok(())
    } else {
        Err(Failure(format!(
            "{wrong} variants did not show their manifest's symptom"
        )))
    }
}

/// Runs a harness with `args` and extra environment `env`, killing it after
/// `timeout` (reported as a hang).
pub(crate) fn run_one(
    binary: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
    timeout: Duration,
) -> Ran {
    let started = Instant::now();
    let mut command = Command::new(binary);
    command.args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = match command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                rungs: Vec::new(),
                hang: false,
                error: Some(e.to_string()),
                seconds: 0.0,
            };
        }
    };
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let mut hang = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                hang = true;
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    let text = reader.join().unwrap_or_default();
    let mut rungs = Vec::new();
    let mut error = None;
    for line in text.lines() {
        if let Some(json) = line.strip_prefix("KWB_RESULT ") {
            match serde_json::from_str::<Rung>(json) {
                Ok(r) => rungs.push(r),
                Err(e) => error = Some(format!("unreadable result line: {e}")),
            }
        } else if let Some(json) = line.strip_prefix("KWB_ERROR ") {
            error = Some(json.to_owned());
        }
    }
    if error.is_none() && !hang && status.is_some_and(|s| !s.success()) {
        error = Some(format!(
            "exited with {}",
            status.map_or(String::new(), |s| s.to_string())
        ));
    }
    Ran {
        rungs,
        hang,
        error,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// The largest relative L2 error a correct bf16 build may show on `random`.
const RANDOM_REL_L2: f64 = 1e-2;

/// What a rung showed. A NaN or Inf never passes; `random` also needs a relative L2
/// error under [`RANDOM_REL_L2`] besides every element within tolerance.
pub(crate) fn outcome(rung: &Rung) -> Outcome {
    if rung.nan > 0 || rung.inf > 0 {
        Outcome::Nan
    } else if rung.mismatches > 0
        || (rung.input == "random" && (rung.rel_l2.is_nan() || rung.rel_l2 >= RANDOM_REL_L2))
    {
        Outcome::Fail
    } else {
        Outcome::Pass
    }
}

/// Whether the run shows exactly the manifest's expectation, and one cell per rung.
fn judge(variant: &Variant, ran: &Ran) -> (bool, Vec<String>) {
    let expected = [
        ("ones", variant.expect.ones),
        ("small_int", variant.expect.small_int),
        ("random", variant.expect.random),
    ];
    let mut ok = ran.error.is_none() || ran.hang;
    let mut cells = Vec::new();
    for (input, want) in expected {
        let got = if ran.hang {
            Some(Outcome::Hang)
        } else {
            ran.rungs.iter().find(|r| r.input == input).map(outcome)
        };
        let rung = ran.rungs.iter().find(|r| r.input == input);
        let mut cell = match (got, rung) {
            (Some(Outcome::Hang), _) => "hang".to_owned(),
            (Some(g), Some(r)) => format!(
                "{} (ratio {:.4}, relL2 {:.3e}, max {:.3e}, {} bad{}{})",
                name(g),
                r.ratio,
                r.rel_l2,
                r.max_abs,
                r.mismatches,
                if r.mismatches > 0 {
                    format!(" from ({},{})", r.first_mismatch[0], r.first_mismatch[1])
                } else {
                    String::new()
                },
                if r.nan + r.inf > 0 {
                    format!(", {} NaN, {} Inf", r.nan, r.inf)
                } else {
                    String::new()
                }
            ),
            _ => "missing".to_owned(),
        };
        if got != Some(want) {
            ok = false;
            cell.push_str(&format!(" — expected {}", name(want)));
        }
        if input == "ones"
            && let (Some([lo, hi]), Some(r)) = (variant.expect.ratio_ones, rung)
            && !(lo..=hi).contains(&r.ratio)
        {
            ok = false;
            cell.push_str(&format!(" — expected ratio in [{lo}, {hi}]"));
        }
        cells.push(cell);
    }
    (ok, cells)
}

fn name(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "pass",
        Outcome::Fail => "fail",
        Outcome::Nan => "nan",
        Outcome::Hang => "hang",
    }
}

fn row(b: &Built<'_>, ran: &Ran, ok: bool, cells: &[String]) -> String {
    let shape = ran
        .rungs
        .first()
        .map_or_else(|| "-".to_owned(), |r| format!("{}×{}×{}", r.m, r.n, r.k));
    let shape = format!("{shape}, {}", b.variant.dtypes);
    let mut row = format!(
        "| {} | {} | {} | {} | {} | {} | {:.2} | {} |",
        b.variant.family,
        b.variant.defect,
        b.variant.stage,
        shape,
        cells.join(" | "),
        if ok { "✓" } else { "✗" },
        ran.seconds,
        format!("{} (all-ones: {})", b.variant.symptom, b.variant.ones).replace('|', "/"),
    );
    if let Some(e) = &ran.error {
        row.push_str(&format!(" error: {}", e.replace('|', "/")));
    }
    row
}

/// The GPU and driver, the nvcc version and the UTC date, for a report's header.
/// A GPU report's title and its first lines: date, commit, GPU and nvcc.
pub(crate) fn report_head(
    title: &str,
    commit: Option<&str>,
    toolchain: &kwb_toolchain::Toolchain,
) -> String {
    let (gpu, nvcc, date) = machine(toolchain);
    format!(
        "# {title}\n\n- date: {date}\n- commit: {}\n- GPU: {gpu}\n- nvcc: {nvcc}\n",
        commit.unwrap_or("unknown")
    )
}

pub(crate) fn machine(toolchain: &kwb_toolchain::Toolchain) -> (String, String, String) {
    let gpu = Command::new("nvidia-smi")
        .args(["--query-gpu=name,driver_version", "--format=csv,noheader"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown (nvidia-smi not found)".to_owned());
    let nvcc = kwb_toolchain::nvcc_version(toolchain).unwrap_or_else(|e| e.to_string());
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    (gpu, nvcc, date)
}

fn markdown(
    toolchain: &kwb_toolchain::Toolchain,
    options: &Options,
    built: &[Built<'_>],
    rows: &[String],
    wrong: usize,
) -> String {
    let mut out = report_head(
        "Kernel suite on the GPU",
        options.commit.as_deref(),
        toolchain,
    );
    let _ = writeln!(
        out,
        "- command: `xtask gpu-suite --timeout {}`",
        options.timeout.as_secs()
    );
    let _ = writeln!(
        out,
        "- result: {} of {} variants show exactly their manifest's symptom\n",
        built.len() - wrong,
        built.len()
    );
    let _ = writeln!(
        out,
        "Each rung: outcome (sum|out|/sum|ref|, relative L2 error, max abs error, mismatching elements from the first (m,n)). Exact rungs (ones, small_int) compare bit for bit with the reference rounded to the output type.\n"
    );
    let _ = writeln!(
        out,
        "| family | defect | stage | M×N×K, dtypes | ones | small_int | random | as expected | seconds | symptom |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(out, "{r}");
    }
    out
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// `one` on every item, `jobs` at a time, each result told to `log` as it is ready;
/// the results in the items' order.
pub(crate) fn each_in_parallel<T: Sync, R: Send>(
    jobs: usize,
    items: &[T],
    one: impl Fn(&T) -> R + Sync,
    log: impl Fn(&R) + Sync,
) -> Vec<R> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(item) = items.get(i) else { break };
                    let result = one(item);
                    log(&result);
                    done.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((i, result));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}
