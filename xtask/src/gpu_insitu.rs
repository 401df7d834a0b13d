//! `cargo xtask gpu-insitu`: `kwb diagnose --kernel K -- python -m pytest …` on the
//! PyTorch extension of kernels/insitu (a tiled bf16 GEMM whose launcher takes
//! `torch::Tensor`s, built by `torch.utils.cpp_extension.load` inside its test), once
//! per planted defect of kernels/insitu/insitu.toml, all at once. Each diagnosis is
//! held to the defect's stage as `gpu-one-command` holds its rows (`none` must be
//! refuted), and each run must leave the test's tensors as they were: kwb's session
//! reads every buffer back against its copy, and the test itself checks its inputs
//! after the call. `report.md` in `--out` has the table.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::gpu_one_command::grade;
use crate::gpu_repro::{Read, binary, json_of};
use crate::{Failure, Result};

#[derive(serde::Deserialize)]
struct Manifest {
    kernel: String,
    test: String,
    defect: Vec<Defect>,
}

#[derive(serde::Deserialize, Clone)]
struct Defect {
    name: String,
    stage: String,
}

/// Options of the task.
pub struct Options {
    pub out: PathBuf,
    pub commit: Option<String>,
    /// The Python that runs pytest (with torch).
    pub python: String,
}

struct Graded {
    defect: Defect,
    read: Option<Read>,
    grade: &'static str,
    /// Every buffer read back as it was (kwb's line), and the program's exit.
    buffers: String,
    program: String,
    why: String,
    seconds: f64,
}

pub fn run(root: &Path, options: &Options) -> Result {
    let path = root.join("kernels/insitu/insitu.toml");
    let text =
        std::fs::read_to_string(&path).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    let manifest: Manifest =
        toml::from_str(&text).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    let kwb = binary("kwb")?;
    std::fs::create_dir_all(&options.out)
        .map_err(|e| Failure(format!("{}: {e}", options.out.display())))?;
    let graded: Vec<Graded> = std::thread::scope(|s| {
        let handles: Vec<_> = manifest
            .defect
            .iter()
            .map(|d| {
                let (kwb, manifest) = (&kwb, &manifest);
                s.spawn(move || one(root, options, kwb, manifest, d))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a row"))
            .collect()
    });
    let report = report(&graded, options, &manifest);
    let out = options.out.join("report.md");
    std::fs::write(&out, &report).map_err(|e| Failure(format!("{}: {e}", out.display())))?;
    println!("{report}");
    println!("wrote {}", out.display());
    Ok(())
}

fn one(root: &Path, options: &Options, kwb: &Path, m: &Manifest, d: &Defect) -> Graded {
    let folder = options.out.join(&d.name);
    let _ = std::fs::remove_dir_all(&folder);
    let started = Instant::now();
    let out = Command::new(kwb)
        .current_dir(root)
        .args(["diagnose", "--kernel", &m.kernel, "--json", "--report"])
        .arg(&folder)
        .args(["--", &options.python, "-m", "pytest", "-x", "-q", &m.test])
        .env("KWB_DEFECT", &d.name)
        .output();
    let seconds = started.elapsed().as_secs_f64();
    let stderr = out
        .as_ref()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .unwrap_or_default();
    let mut g = Graded {
        defect: d.clone(),
        read: None,
        grade: "no diagnosis",
        buffers: String::new(),
        program: String::new(),
        why: String::new(),
        seconds,
    };
    let json = json_of("kwb diagnose", out);
    // The buffers' and program's lines come after the JSON in the terminal form only:
    // read them from the session's own files.
    let done = std::fs::read_to_string(folder.join("insitu/done.txt")).unwrap_or_default();
    let restored: Vec<&str> = done.lines().filter(|l| l.starts_with("restored")).collect();
    let same = restored.iter().filter(|l| l.ends_with("\tsame")).count();
    g.buffers = if done.is_empty() {
        "no done.txt".to_owned()
    } else {
        format!("{same} of {} read back as they were", restored.len())
    };
    let log = std::fs::read_to_string(folder.join("insitu/command.log")).unwrap_or_default();
    g.program = log
        .lines()
        .rev()
        .find(|l| l.contains(" passed") || l.contains(" failed") || l.contains(" error"))
        .unwrap_or("")
        .trim_matches('=')
        .trim()
        .to_owned();
    match json {
        Ok(v) => {
            let read = Read::of(&v);
            g.grade = grade(read.is_verdict(), read.fits(&d.stage), &d.stage);
            g.read = Some(read);
        }
        Err(why) => {
            g.why = format!(
                "{why}{}",
                stderr.lines().rev().take(3).collect::<Vec<_>>().join(" / ")
            )
        }
    }
    g
}

fn report(rows: &[Graded], options: &Options, m: &Manifest) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# kwb diagnose inside the user's program: a PyTorch extension and its pytest\n\n- commit: {}\n- command: `xtask gpu-insitu` (each row: `KWB_DEFECT=<defect> kwb diagnose --kernel {} --json --report DIR -- {} -m pytest -x -q {}`, all rows at once)",
        options.commit.as_deref().unwrap_or("(not given)"),
        m.kernel,
        options.python,
        m.test
    );
    let count = |grade: &str| rows.iter().filter(|g| g.grade == grade).count();
    let _ = writeln!(
        out,
        "- defects: {} VERDICT with the planted stage, {} DRAFT naming it, {} DRAFT missing it; correct builds refuted {}; **{} wrong VERDICTs**; no diagnosis {}",
        count("right"),
        count("draft names it"),
        count("draft misses it"),
        count("refuted"),
        count("WRONG VERDICT"),
        count("no diagnosis")
    );
    let _ = writeln!(
        out,
        "\n| defect | planted | kwb diagnose | grade | the program's buffers | the test | wall | summary |\n|---|---|---|---|---|---|---|---|"
    );
    for g in rows {
        let (said, summary) = match &g.read {
            Some(r) => {
                let alternatives = if r.alternatives.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", r.alternatives.join(", "))
                };
                (
                    format!(
                        "{} {}{alternatives}",
                        r.status,
                        r.stage.as_deref().unwrap_or("none")
                    ),
                    r.summary.clone(),
                )
            }
            None => ("-".to_owned(), g.why.clone()),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {said} | {} | {} | {} | {:.0} s | {} |",
            g.defect.name,
            g.defect.stage,
            g.grade,
            g.buffers,
            g.program,
            g.seconds,
            summary.replace('|', "\\|")
        );
    }
    out
}
