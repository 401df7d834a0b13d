//! `cargo xtask gpu-repro`: Track B on the kernel suite, end to end through the
//! user's own commands. On a machine with a GPU, for every variant of every family
//! that names a kernel in kernels/suite.toml: `kwb-extract` the instantiation with
//! `-DKWB_DEFECT=<defect>` into a reproducer folder, then `kwb run` it on the default
//! ladder, and check each rung the suite's manifest states (ones, small-int, random)
//! against the outcome it expects, and the ones rung's output/answer ratio against
//! its bounds; correct and confound builds must pass every rung. A planted hang
//! (fixtures/run/hang.cu) must come back as HANG within the timeout. The binaries are
//! the ones next to this xtask binary; `report.md` in `--out` is the evidence.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::suite::{Outcome, Suite, Variant};
use crate::{Failure, Result};

/// Options of the task.
pub struct Options {
    pub jobs: usize,
    pub timeout: Duration,
    pub out: PathBuf,
    pub commit: Option<String>,
}

/// One variant's result.
struct Row {
    family: String,
    defect: String,
    stage: String,
    expected: String,
    /// Per rung: name, status, ratio.
    rungs: Vec<(String, String, Option<f64>)>,
    agrees: bool,
    /// A defect its reproducer cannot show (the manifest's `repro_expect` says every
    /// rung passes): listed apart, never counted as reproduced.
    outside: bool,
    note: String,
    seconds: f64,
}

pub(crate) fn binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| Failure(e.to_string()))?;
    let path = exe
        .parent()
        .map(|d| d.join(name))
        .ok_or_else(|| Failure("the xtask binary has no folder".to_owned()))?;
    if path.is_file() {
        Ok(path)
    } else {
        Err(Failure(format!(
            "{} is missing: build it beside xtask (cargo build --release -p kwb)",
            path.display()
        )))
    }
}

pub fn run(root: &Path, options: &Options) -> Result {
    let suite = Suite::load(root)?;
    let (extract, kwb) = (binary("kwb-extract")?, binary("kwb")?);
    std::fs::create_dir_all(&options.out)
        .map_err(|e| Failure(format!("{}: {e}", options.out.display())))?;
    let cutlass = kwb_toolchain::cutlass(&kwb_toolchain::Env::from_process()).ok();
    let work: Vec<&Variant> = suite.variant.iter().collect();
    let rows: Vec<(usize, Row)> = crate::gpu_suite::each_in_parallel(
        options.jobs,
        &work,
        |v| {
            let family = &suite.families[&v.family];
            one(root, options, &extract, &kwb, family, v, cutlass.as_ref())
        },
        |row| {
            println!(
                "{} {}/{}: {}",
                if row.agrees { "ok  " } else { "DIFF" },
                row.family,
                row.defect,
                row.note
            );
        },
    )
    .into_iter()
    .enumerate()
    .collect();
    let hang = planted_hang(root, options, &extract, &kwb);
    let report = report(&rows, &hang, options);
    let path = options.out.join("report.md");
    std::fs::write(&path, &report).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    println!("{}", report.lines().take(12).collect::<Vec<_>>().join("\n"));
    println!("wrote {}", path.display());
    Ok(())
}

/// The rung of `kwb run`'s default ladder that a suite expectation names.
const STATED: [(&str, &str); 3] = [
    ("ones", "ones"),
    ("small_int", "small-int:1"),
    ("random", "random:1"),
];

fn one(
    root: &Path,
    options: &Options,
    extract: &Path,
    kwb: &Path,
    family: &crate::suite::Family,
    v: &Variant,
    cutlass: Option<&kwb_toolchain::CutlassDir>,
) -> Row {
    let started = Instant::now();
    let expect = v.repro_expect.as_ref().unwrap_or(&v.expect);
    let mut expected = format!(
        "ones {:?}, small-int {:?}, random {:?}",
        expect.ones, expect.small_int, expect.random
    )
    .to_lowercase();
    if let Some(note) = &v.repro_note {
        expected.push_str(&format!(" (the task alone: {note})"));
    }
    let mut row = Row {
        family: v.family.clone(),
        defect: v.defect.clone(),
        stage: v.stage.clone(),
        expected,
        rungs: Vec::new(),
        agrees: false,
        outside: v.stage != "none"
            && v.repro_expect.as_ref().is_some_and(|e| {
                [e.ones, e.small_int, e.random]
                    .iter()
                    .all(|o| *o == Outcome::Pass)
            }),
        note: String::new(),
        seconds: 0.0,
    };
    let dir = options.out.join(&v.family).join(&v.defect);
    let _ = std::fs::remove_dir_all(&dir);
    let target = match extract_target(root, &options.out, family, v, cutlass) {
        Ok(t) => t,
        Err(why) => {
            row.note = why;
            return row;
        }
    };
    let mut x = Command::new(extract);
    x.current_dir(root).args(&target).arg("-o").arg(&dir);
    match x.output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            row.note = format!("kwb-extract failed: {}", first_line(&o.stderr));
            return row;
        }
        Err(e) => {
            row.note = format!("kwb-extract: {e}");
            return row;
        }
    }
    let out = Command::new(kwb)
        .current_dir(root)
        .arg("run")
        .arg(&dir)
        .args(["--json", "--timeout"])
        .arg(options.timeout.as_secs().to_string())
        .args(&family.run_flags)
        .args(ladder_shape(family, v))
        .output();
    row.seconds = started.elapsed().as_secs_f64();
    let report = match json_of("kwb run", out) {
        Ok(r) => r,
        Err(why) => {
            // A kernel kwb cannot fill is reported, not judged.
            row.note = why;
            return row;
        }
    };
    let rungs = report["rungs"].as_array().cloned().unwrap_or_default();
    for r in &rungs {
        row.rungs.push((
            r["rung"].as_str().unwrap_or("?").to_owned(),
            r["status"].as_str().unwrap_or("?").to_owned(),
            r["unwritten"]["ratio_as_zero"]
                .as_f64()
                .or_else(|| r["comparison"]["ratio"].as_f64()),
        ));
    }
    let status = |name: &str| {
        rungs.iter().find(|r| r["rung"] == name).map(|r| {
            let nan = r["comparison"]["nan"].as_u64().unwrap_or(0);
            let all = report["plan"]["m"].as_u64().unwrap_or(0)
                * report["plan"]["n"].as_u64().unwrap_or(0);
            match r["status"].as_str() {
                Some("pass") => Outcome::Pass,
                Some("hang") => Outcome::Hang,
                // Mostly NaN: what the suite calls a NaN outcome.
                _ if nan > 0 && nan * 2 >= all => Outcome::Nan,
                _ => Outcome::Fail,
            }
        })
    };
    let mut wrong = Vec::new();
    let mut nan_for_fail: Vec<&str> = Vec::new();
    for ((field, rung), want) in STATED
        .iter()
        .zip([expect.ones, expect.small_int, expect.random])
    {
        match status(rung) {
            Some(got) if got == want => {}
            // A mostly-NaN output fails too, and says more: the kernel read memory the
            // problem does not hold (kwb run's padding and its C when beta = 0 are NaN,
            // where the suite's harness holds numbers).
            Some(Outcome::Nan) if want == Outcome::Fail => nan_for_fail.push(*field),
            Some(got) => wrong.push(format!("{field}: {got:?}, suite says {want:?}")),
            None => wrong.push(format!("{field}: not run")),
        }
    }
    // The suite's ratio is a zero-filled harness's: outputs the kernel never wrote
    // count as 0.
    let ones_ratio = rungs.iter().find(|r| r["rung"] == "ones").and_then(|r| {
        r["unwritten"]["ratio_as_zero"]
            .as_f64()
            .or_else(|| r["comparison"]["ratio"].as_f64())
    });
    if let (Some([lo, hi]), Some(ratio)) = (expect.ratio_ones, ones_ratio)
        && !nan_for_fail.contains(&"ones")
        && !(lo..=hi).contains(&ratio)
    {
        wrong.push(format!("ones ratio {ratio:.4} outside [{lo}, {hi}]"));
    }
    if v.stage == "none" && rungs.iter().any(|r| r["status"] != "pass") {
        wrong.push("a correct build failed a rung".to_owned());
    }
    row.agrees = wrong.is_empty();
    let failing: Vec<&str> = row
        .rungs
        .iter()
        .filter(|r| r.1 != "pass")
        .map(|r| r.0.as_str())
        .collect();
    row.note = if row.agrees {
        let nan = if nan_for_fail.is_empty() {
            String::new()
        } else {
            format!(
                " ({} mostly NaN where the suite's harness reads wrong numbers)",
                nan_for_fail.join(", ")
            )
        };
        if failing.is_empty() && row.outside {
            "every rung passes: the defect is outside what this reproducer replays (see what the suite expects)".to_owned()
        } else if failing.is_empty() {
            "every rung passes".to_owned()
        } else {
            format!("fails {}{nan}", failing.join(", "))
        }
    } else {
        wrong.join("; ")
    };
    row
}

pub(crate) fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("kwb::"))
        .unwrap_or("")
        .to_owned()
}

/// The planted hang: extracted and run with a short timeout.
fn planted_hang(root: &Path, options: &Options, extract: &Path, kwb: &Path) -> String {
    let dir = options.out.join("hang");
    let _ = std::fs::remove_dir_all(&dir);
    let extracted = Command::new(extract)
        .current_dir(root)
        .args(["fixtures/run/hang.cu", "--kernel", "spin_gemm", "-o"])
        .arg(&dir)
        .output();
    if let Ok(o) = &extracted
        && !o.status.success()
    {
        return format!("kwb-extract failed: {}", first_line(&o.stderr));
    }
    let started = Instant::now();
    let out = Command::new(kwb)
        .current_dir(root)
        .arg("run")
        .arg(&dir)
        .args(["--ladder", "ones", "--timeout", "5"])
        .output();
    let seconds = started.elapsed().as_secs_f64();
    match out {
        Ok(o) => format!(
            "`kwb run fixtures/run/hang.cu's reproducer --ladder ones --timeout 5`: exit {} after {seconds:.1} s wall (build included)\n\n```\n{}\n```\n",
            o.status.code().unwrap_or(-1),
            without_machine_paths(String::from_utf8_lossy(&o.stdout).trim_end())
        ),
        Err(e) => format!("kwb run: {e}"),
    }
}

/// `text` with this machine's folders written as variables, so the report can be
/// committed as evidence: the kwb cache, the temporary folder.
fn without_machine_paths(text: &str) -> String {
    let mut out = text.to_owned();
    if let Ok(cache) = kwb_toolchain::cache::cache_dir(&kwb_toolchain::Env::from_process()) {
        out = out.replace(&format!("{}/", cache.display()), "$KWB_CACHE_DIR/");
    }
    let temp = std::env::temp_dir();
    out.replace(
        &format!("{}/", temp.display().to_string().trim_end_matches('/')),
        "$TMPDIR/",
    )
}

/// What kwb-extract (and kwb diagnose) are told about a variant: its source, the
/// kernel or template, the family's extraction flags, and `-p` with a compile database
/// (written under `out`) holding the family's production nvcc command, as a user's
/// build would give it.
pub(crate) fn extract_target(
    root: &Path,
    out: &Path,
    family: &crate::suite::Family,
    v: &Variant,
    cutlass: Option<&kwb_toolchain::CutlassDir>,
) -> std::result::Result<Vec<String>, String> {
    let template = v.repro_template.as_ref().or(family.template.as_ref());
    let what = match (template, &family.kernel) {
        (Some(t), _) => ["--template".to_owned(), t.clone()],
        (None, Some(k)) => ["--kernel".to_owned(), k.clone()],
        (None, None) => {
            return Err("not reproduced: the family names no kernel for kwb-extract".to_owned());
        }
    };
    let source = format!("kernels/{}", family.source);
    let db = out
        .join(&v.family)
        .join(format!("{}.compile_commands.json", v.defect));
    let flags = crate::suite::flags(root, family, v, &family.arches[0], cutlass)
        .map_err(|e| format!("flags: {e}"))?;
    let mut command = vec![
        "nvcc".to_owned(),
        format!("-arch={}", flags.arch),
        format!("-std={}", flags.std),
    ];
    command.extend(flags.includes.iter().map(|i| format!("-I{}", i.display())));
    command.extend(flags.defines.iter().map(|d| format!("-D{d}")));
    command.extend(flags.extra.iter().cloned());
    command.extend(["-c".to_owned(), source.clone()]);
    let entry = serde_json::json!([{
        "directory": root.display().to_string(),
        "file": source,
        "arguments": command,
    }]);
    std::fs::create_dir_all(out.join(&v.family))
        .and_then(|()| std::fs::write(&db, entry.to_string()))
        .map_err(|e| format!("{}: {e}", db.display()))?;
    let mut args = vec![source];
    args.extend(what);
    args.extend(
        v.repro_extract_flags
            .as_ref()
            .unwrap_or(&family.extract_flags)
            .iter()
            .cloned(),
    );
    args.push("-p".to_owned());
    args.push(db.display().to_string());
    Ok(args)
}

/// A `kwb diagnose` verdict as its JSON reports it.
pub(crate) struct Read {
    /// VERDICT or DRAFT.
    pub status: String,
    /// The stage, `None` for none.
    pub stage: Option<String>,
    pub alternatives: Vec<String>,
    pub summary: String,
}

impl Read {
    /// The `verdict` of a `kwb diagnose --json` report.
    pub(crate) fn of(report: &Value) -> Read {
        let v = &report["verdict"];
        Read {
            status: v["status"].as_str().unwrap_or("?").to_owned(),
            stage: v["stage"].as_str().map(str::to_owned),
            alternatives: v["alternatives"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            summary: v["summary"].as_str().unwrap_or("").to_owned(),
        }
    }

    /// Whether it fits the manifest's stage `want` (`none`: a correct build or a
    /// confound): its stage or one of its alternatives, which the same evidence fits.
    pub(crate) fn fits(&self, want: &str) -> bool {
        match &self.stage {
            None => want == "none",
            Some(s) => s == want || self.alternatives.iter().any(|a| a == want),
        }
    }

    pub(crate) fn is_verdict(&self) -> bool {
        self.status == "VERDICT"
    }
}

/// The JSON a kwb command printed, or why there is none (it did not start, or printed
/// no JSON: its exit code and the first line it wrote on stderr).
pub(crate) fn json_of(
    what: &str,
    out: std::io::Result<std::process::Output>,
) -> std::result::Result<Value, String> {
    let out = out.map_err(|e| format!("{what}: {e}"))?;
    serde_json::from_slice::<Value>(&out.stdout).map_err(|_| {
        format!(
            "{what} gave no report (exit {}): {}",
            out.status.code().unwrap_or(-1),
            first_line(&out.stderr)
        )
    })
}

/// `--shape` of the variant's ladder run, where the family asks for the variant's own.
pub(crate) fn ladder_shape(family: &crate::suite::Family, v: &Variant) -> Vec<String> {
    if family.run_shape {
        vec![
            "--shape".to_owned(),
            v.repro_shape
                .as_ref()
                .unwrap_or(&v.shape)
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ]
    } else {
        Vec::new()
    }
}

fn report(rows: &[(usize, Row)], hang: &str, options: &Options) -> String {
    let mut out = String::new();
    let judged: Vec<&Row> = rows
        .iter()
        .map(|(_, r)| r)
        .filter(|r| !r.rungs.is_empty())
        .collect();
    let agree = judged.iter().filter(|r| r.agrees && !r.outside).count();
    let outside: Vec<String> = judged
        .iter()
        .filter(|r| r.outside)
        .map(|r| format!("{}/{}", r.family, r.defect))
        .collect();
    let _ = writeln!(
        out,
        "# Track B on the kernel suite: kwb-extract + kwb run\n"
    );
    let _ = writeln!(
        out,
        "- commit: {}\n- command: `xtask gpu-repro -j {} --timeout {}`\n- {} of {} reproduced variants agree with kernels/suite.toml on every stated rung; {} variants not reproduced (listed){}\n",
        options.commit.as_deref().unwrap_or("unknown"),
        options.jobs,
        options.timeout.as_secs(),
        agree,
        judged.len() - outside.len(),
        rows.len() - judged.len(),
        if outside.is_empty() {
            String::new()
        } else {
            format!(
                "; {} defect(s) outside what their reproducer replays, run and found passing as the manifest says, not counted: {}",
                outside.len(),
                outside.join(", ")
            )
        }
    );
    let _ = writeln!(
        out,
        "| family | defect | stage | suite expects | kwb run (zeros, ones, seq-identity, onehot-k:0, small-int, random) | ones ratio | agrees | s |\n|---|---|---|---|---|---|---|---|"
    );
    for (_, r) in rows {
        let rungs: Vec<&str> = r.rungs.iter().map(|x| x.1.as_str()).collect();
        let ratio = r
            .rungs
            .iter()
            .find(|x| x.0 == "ones")
            .and_then(|x| x.2)
            .map_or("-".to_owned(), |v| format!("{v:.4}"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} |",
            r.family,
            r.defect,
            r.stage,
            r.expected,
            if rungs.is_empty() {
                r.note.clone()
            } else {
                rungs.join(" ")
            },
            ratio,
            if r.rungs.is_empty() {
                "n/a"
            } else if r.agrees {
                "yes"
            } else {
                "NO"
            },
            r.seconds
        );
    }
    let _ = writeln!(out, "\n## Notes\n");
    for (_, r) in rows
        .iter()
        .filter(|(_, r)| !r.agrees || r.note.contains("NaN"))
    {
        let _ = writeln!(out, "- {}/{}: {}", r.family, r.defect, r.note);
    }
    let _ = writeln!(out, "\n## Planted hang (fixtures/run/hang.cu)\n\n{hang}");
    out
}
