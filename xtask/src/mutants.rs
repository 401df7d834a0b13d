//! `cargo xtask mutants` and `cargo xtask gpu-mutants`: kwb mutate on code we did not
//! write and on our suites (the targets of tests/mutants.toml), then each mutant
//! through `kwb diagnose` as a user runs it.
//!
//! `mutants` runs `kwb mutate TARGET --compile -o OUT/SLUG` on every target (a CuTe
//! tutorial or one of our programs mutated in its own file; a CUTLASS header overlaid
//! on the include path of the example that compiles it) and writes `OUT/report.md`:
//! per target, the mutants kept (compiled, and SASS unlike the original's) per stage
//! and those dropped, and the totals over kernels we did and did not write.
//!
//! `gpu-mutants` (a machine with a GPU) reads those folders and runs `kwb diagnose` on
//! each kept mutant with the target's own arguments (the mutant file in the original's
//! place, or its overlay first on the include path), graded against the stage it was
//! planted in: `right` (a VERDICT of that stage), `draft names it` (a DRAFT whose
//! stage is it), `draft names it later` (among the DRAFT's alternatives), `draft
//! misses it`, `equivalent` (every rung passes: kwb refutes a defect, which is the
//! right answer when the mutant does not change the output), `WRONG VERDICT`, `no
//! diagnosis`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::gpu_one_command::{Row, rows};
use crate::gpu_repro::{Read, binary, json_of};
use crate::{Failure, Result};

#[derive(serde::Deserialize)]
struct Targets {
    target: Vec<TargetEntry>,
}

#[derive(serde::Deserialize)]
struct TargetEntry {
    name: String,
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    header: Option<String>,
    #[serde(default)]
    row: Option<String>,
    #[serde(default)]
    ours: bool,
}

#[derive(serde::Deserialize)]
struct Packaged {
    unit: Vec<PackagedUnit>,
}

#[derive(serde::Deserialize)]
struct PackagedUnit {
    path: String,
    kernel: String,
    shape: [u64; 3],
    #[serde(default)]
    flags: Vec<String>,
    #[serde(default)]
    root: Option<String>,
}

/// One target, resolved: what kwb mutate is given and what kwb diagnose is given.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub ours: bool,
    /// The file mutated.
    pub file: PathBuf,
    /// `--kernel` for kwb mutate (a header: every function of it).
    pub kernel: Option<String>,
    /// For a header: its include root and the unit compiled.
    pub overlay: Option<(PathBuf, PathBuf)>,
    /// `kwb diagnose`'s arguments; the first is the program's file.
    pub diagnose: Vec<String>,
}

impl Target {
    /// The folder name under the output folder.
    pub fn slug(&self) -> String {
        self.name.replace(['/', '@'], ".")
    }

    /// The flags kwb mutate --compile takes from the diagnose arguments: include
    /// folders, macros, the standard and nvcc flags.
    fn compile_flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut args = self.diagnose.iter().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "-I" | "-D" | "--std" => {
                    if let Some(v) = args.next() {
                        out.extend([a.clone(), v.clone()]);
                    }
                }
                "--nvcc-flag" => {
                    if let Some(v) = args.next() {
                        out.push(format!("--nvcc-flag={v}"));
                    }
                }
                _ if a.starts_with("--nvcc-flag=") => out.push(a.clone()),
                _ => {}
            }
        }
        out
    }
}

/// Every target of tests/mutants.toml, resolved against the CUTLASS package
/// (`cutlass`: its include folder; `None` skips the targets in it).
pub fn targets(root: &Path, cutlass: Option<&kwb_toolchain::CutlassDir>) -> Result<Vec<Target>> {
    let read = |path: PathBuf| {
        std::fs::read_to_string(&path).map_err(|e| Failure(format!("{}: {e}", path.display())))
    };
    let parse_err = |path: &str, e: toml::de::Error| Failure(format!("{path}: {e}"));
    let list: Targets = toml::from_str(&read(root.join("tests/mutants.toml"))?)
        .map_err(|e| parse_err("tests/mutants.toml", e))?;
    let packaged: Packaged = toml::from_str(&read(root.join("tests/through.toml"))?)
        .map_err(|e| parse_err("tests/through.toml", e))?;
    let includes: Vec<PathBuf> = cutlass
        .map(|c| {
            std::iter::once(c.include.clone())
                .chain(c.util_include.clone())
                .collect()
        })
        .unwrap_or_default();
    let ours = rows(root, &includes)?;
    let source_root = cutlass.and_then(|c| c.include.parent().map(Path::to_path_buf));
    let mut out = Vec::new();
    for t in list.target {
        if let Some(row) = &t.row {
            let found: &Row = ours
                .iter()
                .find(|r| r.name == *row)
                .ok_or_else(|| Failure(format!("{}: no row {row}", t.name)))?;
            let kernel = kernel_of(&found.args);
            let file = root.join(&found.args[0]);
            let mut diagnose = found.args.clone();
            diagnose[0] = file.display().to_string();
            // The row's include folders are relative to the project root.
            for w in 1..diagnose.len() {
                if diagnose[w - 1] == "-I" && Path::new(&diagnose[w]).is_relative() {
                    diagnose[w] = root.join(&diagnose[w]).display().to_string();
                }
            }
            out.push(Target {
                name: t.name,
                ours: t.ours,
                file,
                kernel,
                overlay: None,
                diagnose,
            });
            continue;
        }
        let (Some(unit), Some(source_root)) = (&t.unit, &source_root) else {
            continue;
        };
        let u = packaged
            .unit
            .iter()
            .find(|u| u.path == *unit && u.root.is_none())
            .ok_or_else(|| Failure(format!("{}: no unit {unit} in through.toml", t.name)))?;
        let program = source_root.join(&u.path);
        let mut diagnose = vec![
            program.display().to_string(),
            "--kernel".to_owned(),
            u.kernel.clone(),
        ];
        for dir in includes
            .iter()
            .cloned()
            .chain(std::iter::once(source_root.join("examples/common")))
        {
            diagnose.extend(["-I".to_owned(), dir.display().to_string()]);
        }
        diagnose.extend(u.flags.iter().cloned());
        diagnose.extend([
            "--shape".to_owned(),
            u.shape.map(|x| x.to_string()).join(","),
        ]);
        let (file, kernel, overlay) = match &t.header {
            Some(h) => (
                source_root.join(h),
                None,
                Some((source_root.join("include"), program)),
            ),
            None => (program, Some(u.kernel.clone()), None),
        };
        out.push(Target {
            name: t.name,
            ours: t.ours,
            file,
            kernel,
            overlay,
            diagnose,
        });
    }
    Ok(out)
}

/// The kernel a row names: `--kernel K`, or the name of its `--template`.
fn kernel_of(args: &[String]) -> Option<String> {
    let at = args
        .iter()
        .position(|a| a == "--kernel" || a == "--template")?;
    let value = args.get(at + 1)?;
    Some(value.split('<').next().unwrap_or(value).trim().to_owned())
}

/// Options of `cargo xtask mutants`.
pub struct Options {
    pub out: PathBuf,
    pub only: Vec<String>,
    pub commit: Option<String>,
    pub operators: Vec<String>,
}

/// One target's compiled set.
struct Tally {
    target: Target,
    kept: Vec<(String, usize)>,
    kept_total: usize,
    not_compiling: usize,
    equivalent: usize,
    failure: Option<String>,
    seconds: f64,
}

pub fn run(root: &Path, options: &Options) -> Result {
    let kwb = binary("kwb")?;
    let cutlass = kwb_toolchain::cutlass(&kwb_toolchain::Env::from_process()).ok();
    let mut work = targets(root, cutlass.as_ref())?;
    work.retain(|t| options.only.is_empty() || options.only.iter().any(|o| t.name.contains(o)));
    std::fs::create_dir_all(&options.out)
        .map_err(|e| Failure(format!("{}: {e}", options.out.display())))?;
    let mut tallies = Vec::new();
    for t in work {
        let dir = options.out.join(t.slug());
        let started = Instant::now();
        let mut command = Command::new(&kwb);
        command.arg("mutate").arg(&t.file);
        if let Some(k) = &t.kernel {
            command.args(["--kernel", k]);
        }
        if let Some((include_root, unit)) = &t.overlay {
            command.arg("--include-root").arg(include_root);
            command.arg("--unit").arg(unit);
        }
        if !options.operators.is_empty() {
            command.arg("--operator").arg(options.operators.join(","));
        }
        command
            .args(t.compile_flags())
            .arg("--compile")
            .arg("--json");
        command.arg("-o").arg(&dir);
        let result = json_of("kwb mutate", command.output());
        let seconds = started.elapsed().as_secs_f64();
        let mut tally = Tally {
            target: t,
            kept: Vec::new(),
            kept_total: 0,
            not_compiling: 0,
            equivalent: 0,
            failure: None,
            seconds,
        };
        match result {
            // With an operator filter, a target with no site of those operators keeps
            // none; that is no failure.
            Err(why)
                if !options.operators.is_empty()
                    && why.contains("has no site for the operators") => {}
            Err(why) => tally.failure = Some(why),
            Ok(manifest) => {
                let mutants = manifest["mutants"].as_array().cloned().unwrap_or_default();
                tally.kept_total = mutants.len();
                for stage in ["operand-load", "mma", "epilogue", "descriptor"] {
                    let n = mutants.iter().filter(|m| m["stage"] == stage).count();
                    if n > 0 {
                        tally.kept.push((stage.to_owned(), n));
                    }
                }
                for d in manifest["dropped"].as_array().into_iter().flatten() {
                    if d["why"]
                        .as_str()
                        .is_some_and(|w| w.starts_with("equivalent"))
                    {
                        tally.equivalent += 1;
                    } else {
                        tally.not_compiling += 1;
                    }
                }
            }
        }
        println!(
            "{}: {} kept, {} not compiling, {} equivalent ({:.0} s){}",
            tally.target.name,
            tally.kept_total,
            tally.not_compiling,
            tally.equivalent,
            tally.seconds,
            tally
                .failure
                .as_deref()
                .map_or(String::new(), |f| format!(": {f}"))
        );
        tallies.push(tally);
    }
    let report = compiled_report(&tallies, options);
    let path = options.out.join("report.md");
    std::fs::write(&path, &report).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    println!("{}", report.lines().take(8).collect::<Vec<_>>().join("\n"));
    println!("wrote {}", path.display());
    Ok(())
}

fn compiled_report(tallies: &[Tally], options: &Options) -> String {
    let mut out = String::new();
    let with = |ours: bool| {
        let of: Vec<&Tally> = tallies
            .iter()
            .filter(|t| t.target.ours == ours && t.kept_total > 0)
            .collect();
        (of.len(), of.iter().map(|t| t.kept_total).sum::<usize>())
    };
    let (theirs_kernels, theirs) = with(false);
    let (ours_kernels, ours) = with(true);
    let _ = writeln!(
        out,
        "# kwb mutate --compile: the compiled set\n\n- commit: {}\n- command: `cargo xtask mutants{}`\n- **{} compiling mutants over {} kernels; {} of them over {} kernels we did not write**, {} over {} of ours\n- kept: compiled with nvcc `-cubin` (sm_90a) and SASS unlike the original's\n",
        options.commit.as_deref().unwrap_or("(not given)"),
        if options.operators.is_empty() {
            String::new()
        } else {
            format!(" --operator {}", options.operators.join(","))
        },
        theirs + ours,
        theirs_kernels + ours_kernels,
        theirs,
        theirs_kernels,
        ours,
        ours_kernels
    );
    let _ = writeln!(
        out,
        "| target | ours | kept | per stage | not compiling | equivalent (same SASS) | wall |\n|---|---|---|---|---|---|---|"
    );
    for t in tallies {
        let per = t
            .kept
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {:.0} s |",
            t.target.name,
            if t.target.ours { "yes" } else { "no" },
            t.failure
                .as_deref()
                .map_or(t.kept_total.to_string(), |f| format!(
                    "failed: {}",
                    f.replace('|', "/")
                )),
            per,
            t.not_compiling,
            t.equivalent,
            t.seconds
        );
    }
    out
}

/// Options of `cargo xtask gpu-mutants`.
pub struct GpuOptions {
    pub from: PathBuf,
    pub out: PathBuf,
    pub jobs: usize,
    pub timeout: Duration,
    pub gpus: usize,
    pub only: Vec<String>,
    pub commit: Option<String>,
    /// Start no mutant after this long: the rest are reported as not run, so a run
    /// under a wall-clock limit still ends with its report.
    pub budget: Option<Duration>,
}

/// One mutant's `kwb diagnose` command.
#[derive(Debug, Clone)]
struct Job {
    target: String,
    ours: bool,
    id: u64,
    stage: String,
    operator: String,
    args: Vec<String>,
}

struct Graded {
    job: Job,
    status: String,
    stage: String,
    alternatives: Vec<String>,
    grade: &'static str,
    summary: String,
    seconds: f64,
}

/// Every kept mutant of the folders `from` holds, as a diagnose command.
fn jobs(targets: &[Target], from: &Path) -> Result<Vec<Job>> {
    let mut out = Vec::new();
    for t in targets {
        let dir = from.join(t.slug());
        let path = dir.join("mutants.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let manifest: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
        for m in manifest["mutants"].as_array().into_iter().flatten() {
            let (Some(id), Some(file)) = (m["id"].as_u64(), m["file"].as_str()) else {
                continue;
            };
            let mut args = t.diagnose.clone();
            match (&t.overlay, m["overlay"].as_str()) {
                (Some(_), Some(overlay)) => {
                    args.splice(
                        1..1,
                        ["-I".to_owned(), dir.join(overlay).display().to_string()],
                    );
                }
                _ => {
                    // The mutant in the original's place; the original's folder still
                    // on the include path for the headers beside it.
                    let beside = t.file.parent().unwrap_or(Path::new(".")).to_path_buf();
                    args[0] = dir.join(file).display().to_string();
                    args.extend(["-I".to_owned(), beside.display().to_string()]);
                }
            }
            out.push(Job {
                target: t.name.clone(),
                ours: t.ours,
                id,
                stage: m["stage"].as_str().unwrap_or("?").to_owned(),
                operator: m["operator"].as_str().unwrap_or("?").to_owned(),
                args,
            });
        }
    }
    Ok(out)
}

pub fn gpu_run(root: &Path, options: &GpuOptions) -> Result {
    let kwb = binary("kwb")?;
    let cutlass = kwb_toolchain::cutlass(&kwb_toolchain::Env::from_process()).ok();
    let targets = targets(root, cutlass.as_ref())?;
    let mut work = jobs(&targets, &options.from)?;
    work.retain(|j| {
        options.only.is_empty()
            || options
                .only
                .iter()
                .any(|o| format!("{}#{}", j.target, j.id).contains(o.as_str()))
    });
    if work.is_empty() {
        return Err(Failure(format!(
            "{}: no mutants (run `cargo xtask mutants` first)",
            options.from.display()
        )));
    }
    std::fs::create_dir_all(&options.out)
        .map_err(|e| Failure(format!("{}: {e}", options.out.display())))?;
    let indexed: Vec<(usize, Job)> = work.into_iter().enumerate().collect();
    let started = Instant::now();
    let graded = crate::gpu_suite::each_in_parallel(
        options.jobs,
        &indexed,
        |(i, j)| match options.budget {
            Some(budget) if started.elapsed() > budget => Graded {
                job: j.clone(),
                status: "n/a".to_owned(),
                stage: "none".to_owned(),
                alternatives: Vec::new(),
                grade: NOT_RUN,
                summary: format!("not started: past the budget of {} s", budget.as_secs()),
                seconds: 0.0,
            },
            _ => diagnose_one(root, options, &kwb, *i, j),
        },
        |g| {
            println!(
                "{:<22} {}#{} {} {}: {} {}",
                g.grade, g.job.target, g.job.id, g.job.stage, g.job.operator, g.status, g.stage
            )
        },
    );
    let report = gpu_report(&graded, options);
    let path = options.out.join("report.md");
    std::fs::write(&path, &report).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    println!("{}", report.lines().take(14).collect::<Vec<_>>().join("\n"));
    println!("wrote {}", path.display());
    Ok(())
}

fn diagnose_one(root: &Path, options: &GpuOptions, kwb: &Path, i: usize, job: &Job) -> Graded {
    let report = options.out.join(format!(
        "{}.{}",
        job.target.replace(['/', '@'], "."),
        job.id
    ));
    let _ = std::fs::remove_dir_all(&report);
    let started = Instant::now();
    let mut command = Command::new(kwb);
    command
        .current_dir(root)
        .arg("diagnose")
        .args(&job.args)
        .args(["--json", "--timeout"])
        .arg(options.timeout.as_secs().to_string())
        .arg("--report")
        .arg(&report);
    if options.gpus > 1 {
        command.env("CUDA_VISIBLE_DEVICES", (i % options.gpus).to_string());
    }
    let out = command.output();
    let mut g = Graded {
        job: job.clone(),
        status: "n/a".to_owned(),
        stage: "none".to_owned(),
        alternatives: Vec::new(),
        grade: "no diagnosis",
        summary: String::new(),
        seconds: started.elapsed().as_secs_f64(),
    };
    match json_of("kwb diagnose", out) {
        Err(why) => g.summary = why,
        Ok(d) => {
            let read = Read::of(&d);
            g.grade = grade(&read, &job.stage);
            g.stage = read.stage.clone().unwrap_or_else(|| "none".to_owned());
            (g.status, g.alternatives, g.summary) = (read.status, read.alternatives, read.summary);
        }
    }
    g
}

/// The grade of a mutant left unstarted by `--budget`.
const NOT_RUN: &str = "not run";

/// A diagnosis of a mutant planted in stage `want`.
fn grade(read: &Read, want: &str) -> &'static str {
    match (read.is_verdict(), read.stage.as_deref()) {
        (true, None) => "equivalent",
        (false, None) => "no diagnosis",
        (true, Some(s)) if s == want => "right",
        (true, Some(_)) => "WRONG VERDICT",
        (false, Some(s)) if s == want => "draft names it",
        (false, Some(_)) if read.alternatives.iter().any(|a| a == want) => "draft names it later",
        (false, Some(_)) => "draft misses it",
    }
}

fn gpu_report(rows: &[Graded], options: &GpuOptions) -> String {
    let mut out = String::new();
    let count = |of: &[&Graded], grade: &str| of.iter().filter(|g| g.grade == grade).count();
    let _ = writeln!(
        out,
        "# kwb diagnose on kwb mutate's mutants, one command each\n\n- commit: {}\n- command: `xtask gpu-mutants -j {} --timeout {} --gpus {}`\n- right stage: a VERDICT of the planted stage, or a DRAFT whose stage is it; changed: every mutant but the equivalent ones (every rung passes)\n",
        options.commit.as_deref().unwrap_or("(not given)"),
        options.jobs,
        options.timeout.as_secs(),
        options.gpus
    );
    let not_run = rows.iter().filter(|g| g.grade == NOT_RUN).count();
    if not_run > 0 {
        let _ = writeln!(
            out,
            "- **{not_run} mutants not run** (past `--budget`); every figure below is over the {} that ran\n",
            rows.len() - not_run
        );
    }
    let rows: Vec<&Graded> = rows.iter().filter(|g| g.grade != NOT_RUN).collect();
    let all: Vec<&Graded> = rows.clone();
    let theirs: Vec<&Graded> = rows.iter().copied().filter(|g| !g.job.ours).collect();
    let ours: Vec<&Graded> = rows.iter().copied().filter(|g| g.job.ours).collect();
    for (label, of) in [("all", &all), ("not ours", &theirs), ("ours", &ours)] {
        if of.is_empty() {
            continue;
        }
        let changed = of.len() - count(of, "equivalent");
        let right = count(of, "right") + count(of, "draft names it");
        let _ = writeln!(
            out,
            "- {label}: {} mutants, {changed} change the output; **right stage {right} of {changed} ({:.0}%)** ({} VERDICT, {} DRAFT naming it first); DRAFT naming it later {}; DRAFT missing it {}; **{} wrong VERDICTs**; no diagnosis {}; equivalent {}",
            of.len(),
            if changed == 0 {
                0.0
            } else {
                100.0 * right as f64 / changed as f64
            },
            count(of, "right"),
            count(of, "draft names it"),
            count(of, "draft names it later"),
            count(of, "draft misses it"),
            count(of, "WRONG VERDICT"),
            count(of, "no diagnosis"),
            count(of, "equivalent"),
        );
    }
    let _ = writeln!(
        out,
        "\n## Per stage\n\n| stage | mutants | changed | right | wrong VERDICT |\n|---|---|---|---|---|"
    );
    for stage in ["operand-load", "mma", "epilogue", "descriptor"] {
        let of: Vec<&Graded> = rows
            .iter()
            .copied()
            .filter(|g| g.job.stage == stage)
            .collect();
        if of.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "| {stage} | {} | {} | {} | {} |",
            of.len(),
            of.len() - count(&of, "equivalent"),
            count(&of, "right") + count(&of, "draft names it"),
            count(&of, "WRONG VERDICT")
        );
    }
    let _ = writeln!(
        out,
        "\n## Per target\n\n| target | mutants | changed | right | wrong VERDICT |\n|---|---|---|---|---|"
    );
    let mut names: Vec<&str> = rows.iter().map(|g| g.job.target.as_str()).collect();
    names.dedup();
    for name in names {
        let of: Vec<&Graded> = rows
            .iter()
            .copied()
            .filter(|g| g.job.target == name)
            .collect();
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} |",
            of.len(),
            of.len() - count(&of, "equivalent"),
            count(&of, "right") + count(&of, "draft names it"),
            count(&of, "WRONG VERDICT")
        );
    }
    let _ = writeln!(
        out,
        "\n## Every mutant\n\n| mutant | planted | kwb diagnose | grade | wall | summary |\n|---|---|---|---|---|---|"
    );
    for g in &rows {
        let alternatives = if g.alternatives.is_empty() {
            String::new()
        } else {
            format!(" ({})", g.alternatives.join(", "))
        };
        let _ = writeln!(
            out,
            "| {}#{} | {} {} | {} {}{alternatives} | {} | {:.0} s | {} |",
            g.job.target,
            g.job.id,
            g.job.stage,
            g.job.operator,
            g.status,
            g.stage,
            g.grade,
            g.seconds,
            g.summary.replace('|', "/")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every target resolves: our rows to their files and kernels, the CUTLASS ones
    /// (given a package folder) to a unit of through.toml, a header with its overlay.
    #[test]
    fn every_target_resolves() {
        let root = crate::project_root();
        let fake = kwb_toolchain::CutlassDir {
            include: PathBuf::from("CUTLASS/include"),
            examples: None,
            util_include: Some(PathBuf::from("CUTLASS/tools/util/include")),
            source: kwb_toolchain::CutlassSource::KwbCutlassDir,
        };
        let all = targets(&root, Some(&fake)).unwrap();
        let theirs = all.iter().filter(|t| !t.ours).count();
        assert!(theirs >= 8, "{theirs} targets we did not write");
        let mma = all.iter().find(|t| t.name == "ours/mma_sync").unwrap();
        assert_eq!(mma.kernel.as_deref(), Some("gemm_mma_sync"));
        assert!(mma.file.ends_with("kernels/mma_sync/gemm.cu"));
        assert!(
            mma.compile_flags()
                .windows(2)
                .any(|w| w == ["-D", "KWB_DEFECT=none"])
        );
        let task = all.iter().find(|t| t.name == "ours/megakernel").unwrap();
        assert_eq!(task.kernel.as_deref(), Some("linear_task"));
        let header = all
            .iter()
            .find(|t| t.name == "cutlass/mma_multistage@14")
            .unwrap();
        assert!(header.kernel.is_none());
        let (include_root, unit) = header.overlay.as_ref().unwrap();
        assert!(include_root.ends_with("CUTLASS/include"));
        assert!(unit.ends_with("ampere_tf32_tensorop_gemm.cu"));
        assert_eq!(header.diagnose[0], unit.display().to_string());
        assert!(
            header
                .diagnose
                .windows(2)
                .any(|w| w == ["--kernel", "Gemm"])
        );
    }

    #[test]
    fn a_mutant_is_graded_against_its_planted_stage() {
        let read = |status: &str, stage: Option<&str>, alt: &[&str]| Read {
            status: status.to_owned(),
            stage: stage.map(str::to_owned),
            alternatives: alt.iter().map(|s| s.to_string()).collect(),
            summary: String::new(),
        };
        assert_eq!(grade(&read("VERDICT", None, &[]), "mma"), "equivalent");
        assert_eq!(grade(&read("VERDICT", Some("mma"), &[]), "mma"), "right");
        assert_eq!(
            grade(&read("VERDICT", Some("epilogue"), &[]), "mma"),
            "WRONG VERDICT"
        );
        assert_eq!(
            grade(&read("DRAFT", Some("mma"), &["epilogue"]), "mma"),
            "draft names it"
        );
        assert_eq!(
            grade(&read("DRAFT", Some("epilogue"), &["mma"]), "mma"),
            "draft names it later"
        );
        assert_eq!(
            grade(&read("DRAFT", Some("epilogue"), &[]), "mma"),
            "draft misses it"
        );
        assert_eq!(grade(&read("DRAFT", None, &[]), "mma"), "no diagnosis");
    }
}
