//! `cargo xtask gpu-styles`: Track B on code we did not shape around kwb, end to end
//! through the user's own commands. On a machine with a GPU, for every program of the
//! second suite (kernels/styles/styles.toml), correct and with each planted defect
//! (`-DKWB_DEFECT=<name>`), and for the programs of nvidia-cutlass that
//! tests/through.toml marks `gpu` (the CuTe tutorials, CUTLASS example 00):
//! `kwb-extract FILE --kernel K` (with the file's include folders only: no binding, no
//! layout given) into a reproducer folder, then `kwb run` it on the default ladder at
//! the program's shape. A correct build must pass every rung; a defect must fail the
//! rungs of the input kinds its manifest says fail and pass the others. `report.md` in
//! `--out` is the evidence: which route each reproducer took (the kernel alone, or
//! through the launcher) and every rung.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::gpu_repro::{binary, first_line, json_of};
use crate::{Failure, Result};

/// Options of the task.
pub struct Options {
    pub jobs: usize,
    pub timeout: Duration,
    pub out: PathBuf,
    pub commit: Option<String>,
}

#[derive(serde::Deserialize)]
struct Styles {
    program: Vec<Program>,
}

#[derive(serde::Deserialize)]
struct Program {
    source: String,
    kernel: String,
    cutlass: bool,
    shape: [u64; 3],
    #[serde(default)]
    extract_flags: Vec<String>,
    #[serde(default)]
    defect: Vec<Defect>,
}

#[derive(serde::Deserialize)]
struct Defect {
    name: String,
    stage: String,
    fails: Vec<String>,
    /// Where kwb's rung of a kind differs from the program's own inputs of it.
    #[serde(default)]
    ladder_fails: Option<Vec<String>>,
}

/// One build to reproduce: a file, its kernel, a defect (or none) and what it must do.
struct Unit {
    name: String,
    source: PathBuf,
    kernel: String,
    cutlass: bool,
    shape: [u64; 3],
    /// What the user tells kwb-extract beyond the file's flags (the manifest's).
    extract_flags: Vec<String>,
    defect: Option<String>,
    stage: String,
    /// The input kinds (ones, small_int, random) whose rungs must fail.
    fails: Vec<String>,
}

/// `tests/through.toml`: programs of the nvidia-cutlass package, the kernel a user
/// names, the flags they add, and whether the GPU run takes them.
#[derive(serde::Deserialize)]
struct Packaged {
    unit: Vec<PackagedUnit>,
}

#[derive(serde::Deserialize)]
struct PackagedUnit {
    path: String,
    kernel: String,
    gpu: bool,
    shape: [u64; 3],
    #[serde(default)]
    flags: Vec<String>,
}

/// The rung of `kwb run`'s default ladder each manifest input kind names.
const KINDS: [(&str, &str); 3] = [
    ("ones", "ones"),
    ("small_int", "small-int:1"),
    ("random", "random:1"),
];

struct Row {
    /// The flags given beyond the file's own (none for most).
    flags: String,
    unit: String,
    defect: String,
    stage: String,
    route: String,
    rungs: Vec<(String, String)>,
    agrees: bool,
    note: String,
    seconds: f64,
}

fn units(root: &Path, cutlass: Option<&kwb_toolchain::CutlassDir>) -> Result<Vec<Unit>> {
    let path = root.join("kernels/styles/styles.toml");
    let text =
        std::fs::read_to_string(&path).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    let styles: Styles =
        toml::from_str(&text).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    for p in &styles.program {
        let source = root.join("kernels/styles").join(&p.source);
        let unit = |defect: Option<&Defect>| Unit {
            name: p.source.clone(),
            source: source.clone(),
            kernel: p.kernel.clone(),
            cutlass: p.cutlass,
            shape: p.shape,
            extract_flags: p.extract_flags.clone(),
            defect: defect.map(|d| d.name.clone()),
            stage: defect.map_or("none".to_owned(), |d| d.stage.clone()),
            fails: defect
                .map(|d| d.ladder_fails.clone().unwrap_or_else(|| d.fails.clone()))
                .unwrap_or_default(),
        };
        out.push(unit(None));
        out.extend(p.defect.iter().map(|d| unit(Some(d))));
    }
    if let Some(c) = cutlass {
        // The nvidia-cutlass package's source folder holds include/ and examples/.
        let source_root = c
            .include
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let path = root.join("tests/through.toml");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Failure(format!("{}: {e}", path.display())))?;
        let packaged: Packaged =
            toml::from_str(&text).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
        for u in packaged.unit.into_iter().filter(|u| u.gpu) {
            out.push(Unit {
                name: u
                    .path
                    .trim_start_matches("examples/cute/tutorial/")
                    .trim_start_matches("examples/")
                    .to_owned(),
                source: source_root.join(&u.path),
                kernel: u.kernel,
                cutlass: true,
                shape: u.shape,
                extract_flags: u.flags,
                defect: None,
                stage: "none".to_owned(),
                fails: Vec::new(),
            });
        }
    }
    Ok(out)
}

pub fn run(root: &Path, options: &Options) -> Result {
    let (extract, kwb) = (binary("kwb-extract")?, binary("kwb")?);
    std::fs::create_dir_all(&options.out)
        .map_err(|e| Failure(format!("{}: {e}", options.out.display())))?;
    let cutlass = kwb_toolchain::cutlass(&kwb_toolchain::Env::from_process()).ok();
    if cutlass.is_none() {
        println!("no CUTLASS include folder (KWB_CUTLASS_DIR): the CuTe units are skipped");
    }
    let work = units(root, cutlass.as_ref())?;
    let rows = crate::gpu_suite::each_in_parallel(
        options.jobs,
        &work,
        |u| one(root, options, &extract, &kwb, u, cutlass.as_ref()),
        |row| {
            println!(
                "{} {}/{}: {}",
                if row.agrees { "ok  " } else { "DIFF" },
                row.unit,
                row.defect,
                row.note
            );
        },
    );
    let report = report(&rows, options);
    let path = options.out.join("report.md");
    std::fs::write(&path, &report).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    println!("{}", report.lines().take(8).collect::<Vec<_>>().join("\n"));
    println!("wrote {}", path.display());
    Ok(())
}

fn one(
    root: &Path,
    options: &Options,
    extract: &Path,
    kwb: &Path,
    u: &Unit,
    cutlass: Option<&kwb_toolchain::CutlassDir>,
) -> Row {
    let started = Instant::now();
    let defect = u.defect.clone().unwrap_or_else(|| "none".to_owned());
    let mut row = Row {
        flags: u.extract_flags.join(" "),
        unit: u.name.clone(),
        defect: defect.clone(),
        stage: u.stage.clone(),
        route: String::new(),
        rungs: Vec::new(),
        agrees: false,
        note: String::new(),
        seconds: 0.0,
    };
    let dir = options.out.join(u.name.replace('/', "_")).join(&defect);
    let _ = std::fs::remove_dir_all(&dir);
    let mut x = Command::new(extract);
    x.current_dir(root)
        .arg(&u.source)
        .args(["--kernel", &u.kernel, "--arch", "sm_90a", "-o"])
        .arg(&dir);
    if let Some(d) = &u.defect {
        x.arg(format!("-DKWB_DEFECT={d}"));
    }
    x.args(&u.extract_flags);
    if u.cutlass {
        let Some(c) = cutlass else {
            row.note = "needs CUTLASS (KWB_CUTLASS_DIR)".to_owned();
            return row;
        };
        x.arg("-I").arg(&c.include);
        if let Some(root) = c.include.parent() {
            x.arg("-I").arg(root.join("tools/util/include"));
            x.arg("-I").arg(root.join("examples/common"));
        }
    }
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
    row.route = match std::fs::read_to_string(dir.join("kwb.toml")) {
        Ok(t) if t.contains("[host.through]") => "through the launcher".to_owned(),
        Ok(_) => "the kernel alone".to_owned(),
        Err(e) => {
            row.note = format!("kwb.toml: {e}");
            return row;
        }
    };
    let shape = u.shape.map(|v| v.to_string()).join(",");
    let out = Command::new(kwb)
        .current_dir(root)
        .arg("run")
        .arg(&dir)
        // beta = 0.5 as the programs' own checks run: C is read, and a kernel that
        // reads C whatever beta is (as BLAS allows a library not to) is not run on the
        // NaN a runner fills an unread C with.
        .args(["--json", "--beta", "0.5", "--shape", &shape, "--timeout"])
        .arg(options.timeout.as_secs().to_string())
        .output();
    row.seconds = started.elapsed().as_secs_f64();
    // kwb run's own report beside the reproducer, for a row to be read in full.
    if let Ok(o) = &out {
        let _ = std::fs::write(dir.join("run.json"), &o.stdout);
        let _ = std::fs::write(dir.join("run.stderr"), &o.stderr);
    }
    let report = match json_of("kwb run", out) {
        Ok(r) => r,
        Err(why) => {
            row.note = why;
            return row;
        }
    };
    let rungs = report["rungs"].as_array().cloned().unwrap_or_default();
    for r in &rungs {
        row.rungs.push((
            r["rung"].as_str().unwrap_or("?").to_owned(),
            r["status"].as_str().unwrap_or("?").to_owned(),
        ));
    }
    let status = |name: &str| {
        row.rungs
            .iter()
            .find(|(r, _)| r == name)
            .map(|(_, s)| s.clone())
    };
    let mut wrong = Vec::new();
    if u.defect.is_none() {
        for (rung, s) in row.rungs.iter().filter(|(_, s)| s != "pass") {
            wrong.push(format!("{rung}: {s} on a correct build"));
        }
    } else {
        for (kind, rung) in KINDS {
            let must_fail = u.fails.iter().any(|f| f == kind);
            match status(rung).as_deref() {
                Some("pass") if must_fail => {
                    wrong.push(format!("{rung}: pass, the defect fails it"))
                }
                Some(s) if !must_fail && s != "pass" => {
                    wrong.push(format!("{rung}: {s}, the defect passes it"))
                }
                None => wrong.push(format!("{rung}: not run")),
                _ => {}
            }
        }
    }
    row.agrees = wrong.is_empty() && !row.rungs.is_empty();
    let failing: Vec<&str> = row
        .rungs
        .iter()
        .filter(|r| r.1 != "pass")
        .map(|r| r.0.as_str())
        .collect();
    row.note = if !row.agrees {
        wrong.join("; ")
    } else if failing.is_empty() {
        "every rung passes".to_owned()
    } else {
        format!("fails {}", failing.join(", "))
    };
    row
}

fn report(rows: &[Row], options: &Options) -> String {
    let mut out = String::new();
    let judged: Vec<&Row> = rows.iter().filter(|r| !r.rungs.is_empty()).collect();
    let agree = judged.iter().filter(|r| r.agrees).count();
    let through = rows
        .iter()
        .filter(|r| r.route.starts_with("through"))
        .count();
    let _ = writeln!(
        out,
        "# Track B on code we did not write: kwb-extract + kwb run\n\n- commit: {}\n- command: `xtask gpu-styles -j {} --timeout {}` (kwb run at beta 0.5 and each program's shape)\n- {} of {} builds reached the ladder; {} of those agree with their manifest on every stated rung (a correct build passes every rung); {} reproduced through their launcher\n",
        options.commit.as_deref().unwrap_or("unknown"),
        options.jobs,
        options.timeout.as_secs(),
        judged.len(),
        rows.len(),
        agree,
        through,
    );
    let _ = writeln!(
        out,
        "| program | defect | stage | route | flags given | kwb run (zeros, ones, seq-identity, onehot-k:0, small-int, random) | agrees | s |\n|---|---|---|---|---|---|---|---|"
    );
    for r in rows {
        let rungs: Vec<&str> = r.rungs.iter().map(|x| x.1.as_str()).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} |",
            r.unit,
            r.defect,
            r.stage,
            if r.route.is_empty() { "-" } else { &r.route },
            if r.flags.is_empty() { "-" } else { &r.flags },
            if rungs.is_empty() {
                r.note.clone()
            } else {
                rungs.join(" ")
            },
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
    for r in rows.iter().filter(|r| !r.agrees) {
        let _ = writeln!(out, "- {}/{}: {}", r.unit, r.defect, r.note);
    }
    out
}
