//! `cargo xtask gpu-one-command`: `kwb diagnose` as a user runs it, one command per
//! build, on every variant of the kernel suite (kernels/suite.toml) and every correct
//! and defective program of the second suite (kernels/styles/styles.toml), on a
//! machine with a GPU. Each command gets only what a user has: the file, the kernel
//! (or a megakernel task's template and the `--task` bindings the family lists),
//! `-D KWB_DEFECT=…`, the include folders, the flags the manifest names, the program's
//! beta and shape. No trace, no harness: kwb records its own traces. Each verdict is
//! held to the manifest: its stage (a VERDICT's or one of its alternatives, the rule of
//! `gpu-diagnose`) for a defect, no stage for a correct build or a confound; a VERDICT
//! naming another stage is a wrong verdict. `report.md` in `--out` has the table, the
//! counts and every row's wall time (its compiles included, under `--jobs` at once).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::gpu_repro::{Read, binary, json_of};
use crate::suite::Suite;
use crate::{Failure, Result};

/// Options of the task.
pub struct Options {
    pub jobs: usize,
    pub timeout: Duration,
    pub out: PathBuf,
    pub commit: Option<String>,
    /// Only rows whose name (`suite/FAMILY/DEFECT`, `styles/PROGRAM/DEFECT`) contains
    /// one of these; empty: every row.
    pub only: Vec<String>,
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
    #[serde(default)]
    flags: Vec<String>,
    shape: [u64; 3],
    #[serde(default)]
    extract_flags: Vec<String>,
    #[serde(default)]
    defect: Vec<StyleDefect>,
}

#[derive(serde::Deserialize)]
struct StyleDefect {
    name: String,
    stage: String,
    /// The kernel the defect lives in, when not the program's main one.
    #[serde(default)]
    kernel: Option<String>,
}

/// One `kwb diagnose` command and the stage its manifest states.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    pub stage: String,
    /// The arguments after `kwb diagnose` (paths relative to the project root).
    pub args: Vec<String>,
}

/// A row's diagnosis against its manifest.
struct Graded {
    row: Row,
    status: String,
    stage: String,
    alternatives: Vec<String>,
    summary: String,
    grade: &'static str,
    seconds: f64,
}

/// Every row of both suites, in manifest order (`cutlass`: the CUTLASS include
/// folders a family or program that needs them is given).
pub fn rows(root: &Path, cutlass: &[PathBuf]) -> Result<Vec<Row>> {
    let mut out = Vec::new();
    let suite = Suite::load(root)?;
    for v in &suite.variant {
        let family = suite
            .families
            .get(&v.family)
            .ok_or_else(|| Failure(format!("{}: no such family", v.family)))?;
        let mut args = vec![format!("kernels/{}", family.source)];
        match (
            v.repro_template.as_ref().or(family.template.as_ref()),
            &family.kernel,
        ) {
            (Some(t), _) => args.extend(["--template".to_owned(), t.clone()]),
            (None, Some(k)) => args.extend(["--kernel".to_owned(), k.clone()]),
            (None, None) => continue,
        }
        args.extend(["-D".to_owned(), format!("KWB_DEFECT={}", v.defect)]);
        args.extend(["-I".to_owned(), "kernels/common".to_owned()]);
        if family.cutlass {
            for dir in cutlass {
                args.extend(["-I".to_owned(), dir.display().to_string()]);
            }
        }
        args.extend(family.flags.iter().map(|f| format!("--nvcc-flag={f}")));
        args.extend(
            v.repro_extract_flags
                .as_ref()
                .unwrap_or(&family.extract_flags)
                .iter()
                .cloned(),
        );
        args.extend(family.run_flags.iter().cloned());
        args.extend([
            "--shape".to_owned(),
            shape(v.repro_shape.as_ref().unwrap_or(&v.shape)),
        ]);
        out.push(Row {
            name: format!("suite/{}/{}", v.family, v.defect),
            stage: v.stage.clone(),
            args,
        });
    }
    let path = root.join("kernels/styles/styles.toml");
    let text =
        std::fs::read_to_string(&path).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    let styles: Styles =
        toml::from_str(&text).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    for p in &styles.program {
        let correct = StyleDefect {
            name: "none".to_owned(),
            stage: "none".to_owned(),
            kernel: None,
        };
        for d in std::iter::once(&correct).chain(&p.defect) {
            let mut args = vec![
                format!("kernels/styles/{}", p.source),
                "--kernel".to_owned(),
                d.kernel.clone().unwrap_or_else(|| p.kernel.clone()),
                "-D".to_owned(),
                format!("KWB_DEFECT={}", d.name),
            ];
            if p.cutlass {
                for dir in cutlass {
                    args.extend(["-I".to_owned(), dir.display().to_string()]);
                }
            }
            for flag in &p.flags {
                match flag.strip_prefix("-std=") {
                    Some(std) => args.extend(["--std".to_owned(), std.to_owned()]),
                    None => args.push(format!("--nvcc-flag={flag}")),
                }
            }
            args.extend(p.extract_flags.iter().cloned());
            // The programs' own checks run at beta 0.5: C is read.
            args.extend(["--beta".to_owned(), "0.5".to_owned()]);
            args.extend(["--shape".to_owned(), shape(&p.shape)]);
            let program = p.source.trim_end_matches(".cu");
            out.push(Row {
                name: format!("styles/{program}/{}", d.name),
                stage: d.stage.clone(),
                args,
            });
        }
    }
    Ok(out)
}

fn shape(s: &[u64]) -> String {
    s.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

pub fn run(root: &Path, options: &Options) -> Result {
    let kwb = binary("kwb")?;
    std::fs::create_dir_all(&options.out)
        .map_err(|e| Failure(format!("{}: {e}", options.out.display())))?;
    let cutlass: Vec<PathBuf> = kwb_toolchain::cutlass(&kwb_toolchain::Env::from_process())
        .map(|c| std::iter::once(c.include).chain(c.util_include).collect())
        .unwrap_or_default();
    let mut work = rows(root, &cutlass)?;
    if !options.only.is_empty() {
        work.retain(|r| options.only.iter().any(|o| r.name.contains(o.as_str())));
    }
    if work.is_empty() {
        return Err(Failure(format!(
            "--only {}: no row",
            options.only.join(",")
        )));
    }
    let graded = crate::gpu_suite::each_in_parallel(
        options.jobs,
        &work,
        |r| one(root, options, &kwb, r),
        |g| println!("{:<18} {}: {} {}", g.grade, g.row.name, g.status, g.stage),
    );
    let report = report(&graded, options);
    let path = options.out.join("report.md");
    std::fs::write(&path, &report).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    println!("{}", report.lines().take(12).collect::<Vec<_>>().join("\n"));
    println!("wrote {}", path.display());
    Ok(())
}

fn one(root: &Path, options: &Options, kwb: &Path, row: &Row) -> Graded {
    let report = options.out.join(row.name.replace('/', "."));
    let _ = std::fs::remove_dir_all(&report);
    let started = Instant::now();
    let out = Command::new(kwb)
        .current_dir(root)
        .arg("diagnose")
        .args(&row.args)
        .args(["--json", "--timeout"])
        .arg(options.timeout.as_secs().to_string())
        .arg("--report")
        .arg(&report)
        .output();
    let seconds = started.elapsed().as_secs_f64();
    let mut g = Graded {
        row: row.clone(),
        status: "n/a".to_owned(),
        stage: "none".to_owned(),
        alternatives: Vec::new(),
        summary: String::new(),
        grade: "no diagnosis",
        seconds,
    };
    let d = match json_of("kwb diagnose", out) {
        Ok(d) => d,
        Err(why) => {
            g.summary = why;
            return g;
        }
    };
    let read = Read::of(&d);
    g.grade = grade(read.is_verdict(), read.fits(&row.stage), &row.stage);
    g.stage = read.stage.unwrap_or_else(|| "none".to_owned());
    (g.status, g.alternatives, g.summary) = (read.status, read.alternatives, read.summary);
    g
}

/// A verdict against the manifest's stage (`none`: a correct build or a confound):
/// `verdict` whether it is a VERDICT, `fits` whether its stage fits (`Read::fits`).
pub(crate) fn grade(verdict: bool, fits: bool, want: &str) -> &'static str {
    match (want, verdict, fits) {
        ("none", true, true) => "refuted",
        ("none", false, _) => "not refuted",
        (_, true, true) => "right",
        (_, false, true) => "draft names it",
        (_, false, false) => "draft misses it",
        (_, true, false) => "WRONG VERDICT",
    }
}

fn report(rows: &[Graded], options: &Options) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# kwb diagnose alone, one command per build\n\n- commit: {}\n- command: `xtask gpu-one-command -j {} --timeout {}`",
        options.commit.as_deref().unwrap_or("(not given)"),
        options.jobs,
        options.timeout.as_secs()
    );
    for suite in ["suite", "styles"] {
        let of: Vec<&Graded> = rows
            .iter()
            .filter(|g| g.row.name.starts_with(&format!("{suite}/")))
            .collect();
        if of.is_empty() {
            continue;
        }
        let count = |grade: &str| of.iter().filter(|g| g.grade == grade).count();
        let defects = of.iter().filter(|g| g.row.stage != "none").count();
        let longest = of.iter().map(|g| g.seconds).fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "- {suite}: defects {} of {defects} a VERDICT with the manifest's stage, {} a DRAFT naming it, {} a DRAFT missing it; correct builds and confounds {} of {} refuted; **{} wrong VERDICTs**; no diagnosis {}; longest wall {longest:.0} s",
            count("right"),
            count("draft names it"),
            count("draft misses it"),
            count("refuted"),
            of.len() - defects,
            count("WRONG VERDICT"),
            count("no diagnosis"),
        );
    }
    let _ = writeln!(
        out,
        "\n| row | manifest | kwb diagnose | grade | wall | summary |\n|---|---|---|---|---|---|"
    );
    for g in rows {
        let alternatives = if g.alternatives.is_empty() {
            String::new()
        } else {
            format!(" ({})", g.alternatives.join(", "))
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} {}{alternatives} | {} | {:.0} s | {} |",
            g.row.name,
            g.row.stage,
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

    /// Every variant and program becomes one command of what a user has; the
    /// megakernel's task rows carry the family's bindings, the styles their beta.
    #[test]
    fn both_suites_become_one_command_each() {
        let root = crate::project_root();
        let rows = rows(&root, &[PathBuf::from("CUTLASS")]).unwrap();
        let suite = Suite::load(&root).unwrap();
        assert_eq!(
            rows.iter().filter(|r| r.name.starts_with("suite/")).count(),
            suite.variant.len()
        );
        let mma = rows
            .iter()
            .find(|r| r.name == "suite/mma_sync/last_tile_twice")
            .unwrap();
        assert_eq!(
            mma.args,
            [
                "kernels/mma_sync/gemm.cu",
                "--kernel",
                "gemm_mma_sync",
                "-D",
                "KWB_DEFECT=last_tile_twice",
                "-I",
                "kernels/common",
                "--shape",
                "256,384,1024"
            ]
        );
        let task = rows
            .iter()
            .find(|r| r.name == "suite/megakernel/bias_twice")
            .unwrap();
        assert!(task.args.contains(&"--template".to_owned()));
        assert!(task.args.windows(2).any(|w| w == ["--task", "output=D"]));
        let cutlass = rows
            .iter()
            .find(|r| r.name == "suite/cutlass3x_sm90/none")
            .unwrap();
        assert!(cutlass.args.contains(&"CUTLASS".to_owned()));
        assert!(
            cutlass
                .args
                .contains(&"--nvcc-flag=--expt-relaxed-constexpr".to_owned())
        );
        let reduce = rows
            .iter()
            .find(|r| r.name == "styles/splitk_workspace/reduce_from_one")
            .unwrap();
        assert!(
            reduce
                .args
                .windows(2)
                .any(|w| w == ["--kernel", "splitk_reduce_kernel"])
        );
        assert!(reduce.args.windows(2).any(|w| w == ["--beta", "0.5"]));
        assert!(reduce.args.windows(2).any(|w| w == ["--std", "c++17"]));
        assert_eq!(
            rows.iter()
                .filter(|r| r.name.starts_with("styles/"))
                .count(),
            30
        );
    }

    #[test]
    fn a_verdict_is_graded_against_the_manifest() {
        let read = |status: &str, stage: Option<&str>, alt: &[&str]| Read {
            status: status.to_owned(),
            stage: stage.map(str::to_owned),
            alternatives: alt.iter().map(|s| s.to_string()).collect(),
            summary: String::new(),
        };
        let graded = |r: Read, want: &str| grade(r.is_verdict(), r.fits(want), want);
        assert_eq!(graded(read("VERDICT", None, &[]), "none"), "refuted");
        assert_eq!(
            graded(read("DRAFT", Some("mma"), &[]), "none"),
            "not refuted"
        );
        assert_eq!(
            graded(read("VERDICT", Some("mma"), &[]), "none"),
            "WRONG VERDICT"
        );
        assert_eq!(
            graded(
                read("VERDICT", Some("operand-load"), &["descriptor"]),
                "descriptor"
            ),
            "right"
        );
        assert_eq!(
            graded(read("DRAFT", Some("mma"), &["epilogue"]), "epilogue"),
            "draft names it"
        );
        assert_eq!(
            graded(read("DRAFT", Some("mma"), &[]), "epilogue"),
            "draft misses it"
        );
        assert_eq!(
            graded(read("VERDICT", Some("epilogue"), &[]), "mma"),
            "WRONG VERDICT"
        );
        assert_eq!(graded(read("VERDICT", None, &[]), "mma"), "WRONG VERDICT");
    }
}
