//! `cargo xtask bench`: the speed figures of docs/BENCHMARKS.md, measured side by
//! side on this machine.
//!
//! 1. `kwb sites --json` over every CUTLASS header (target ≤ 3 s wall).
//! 2. `kwb sites` against `nvcc -E` on one kernel translation unit (target ≥ 20×).
//! 3. `kwb sites --json` over every `.cu`/`.cuh` of flashinfer-python (the corpus
//!    `cargo xtask setup` installs; 3,279 files), skipped with a note without it.
//!
//! 3. With `--hook`: `kwb-nvcc` in front of nvcc on the cutlass3x_sm90 translation
//!    unit, disabled (target ≤ 1.01×) and enabled (target ≤ 1.05×), against plain nvcc.
//!
//! Each command runs `--runs` times after one warm-up; the median wall time counts.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::kernels::tools;
use crate::{Failure, Result};

/// The translation unit of the nvcc comparison, under the CUTLASS source folder.
const TU: &str = "examples/cute/tutorial/hopper/wgmma_tma_sm90.cu";

pub fn run(root: &Path, runs: usize) -> Result {
    let (toolchain, cutlass) = tools()?;
    let cutlass = cutlass.ok_or_else(|| Failure("CUTLASS headers not found".to_owned()))?;
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--quiet", "-p", "kwb"])
        .current_dir(root)
        .status()
        .map_err(|e| Failure(format!("cannot run cargo: {e}")))?;
    if !status.success() {
        return Err(Failure("cargo build --release -p kwb failed".to_owned()));
    }
    let kwb = root.join("target/release/kwb");

    let mut headers = Vec::new();
    collect(&cutlass.include, &mut headers);
    headers.sort();
    let mut sites_all = Command::new(&kwb);
    sites_all.arg("sites").arg("--json").args(&headers);
    let all = median(&mut sites_all, runs)?;
    println!(
        "kwb sites --json over {} CUTLASS headers: median {all:.3} s (target ≤ 3 s)",
        headers.len()
    );

    let source = cutlass
        .include
        .parent()
        .map(|p| p.join(TU))
        .ok_or_else(|| Failure("no CUTLASS source folder".to_owned()))?;
    let mut sites_one = Command::new(&kwb);
    sites_one.arg("sites").arg("--json").arg(&source);
    let one = median(&mut sites_one, runs)?;
    let mut preprocess = Command::new(&toolchain.nvcc);
    preprocess
        .args(["-E", "-std=c++17", "-arch=sm_90a", "-o", "/dev/null"])
        .arg("-I")
        .arg(&cutlass.include);
    if let Some(util) = &cutlass.util_include {
        preprocess.arg("-I").arg(util);
    }
    preprocess.arg(&source);
    let nvcc = median(&mut preprocess, runs)?;
    println!(
        "{TU}: kwb sites median {one:.3} s, nvcc -E median {nvcc:.3} s: {:.1}× (target ≥ 20×)",
        nvcc / one
    );

    let env = kwb_toolchain::Env::from_process();
    match kwb_toolchain::cache::corpus(&env) {
        Some(corpus) => {
            let mut files = Vec::new();
            files_with(&corpus.flashinfer, &["cu", "cuh"], &mut files);
            files.sort();
            let bytes: u64 = files
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .sum();
            let mut sites_flashinfer = Command::new(&kwb);
            sites_flashinfer.arg("sites").arg("--json").args(&files);
            let flashinfer = median(&mut sites_flashinfer, runs)?;
            println!(
                "kwb sites --json over {} flashinfer-python files ({:.1} MB): median {flashinfer:.3} s",
                files.len(),
                bytes as f64 / 1e6
            );
        }
        None => println!("flashinfer-python: not installed (`cargo xtask setup`); not measured"),
    }
    Ok(())
}

/// `kwb-nvcc` against plain nvcc, side by side, on the suite's CUTLASS 3.x TU.
pub fn hook(root: &Path, runs: usize) -> Result {
    let (toolchain, cutlass) = tools()?;
    let cutlass = cutlass.ok_or_else(|| Failure("CUTLASS headers not found".to_owned()))?;
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "kwb",
            "--bin",
            "kwb-nvcc",
        ])
        .current_dir(root)
        .status()
        .map_err(|e| Failure(format!("cannot run cargo: {e}")))?;
    if !status.success() {
        return Err(Failure(
            "cargo build --release -p kwb --bin kwb-nvcc failed".to_owned(),
        ));
    }
    let hook = root.join("target/release/kwb-nvcc");
    let out = tempfile::tempdir().map_err(|e| Failure(e.to_string()))?;
    let mut args: Vec<String> = vec![
        "-std=c++17".into(),
        "-O3".into(),
        "-arch=sm_90a".into(),
        "--expt-relaxed-constexpr".into(),
        "-DKWB_DEFECT=none".into(),
        format!("-I{}", root.join("kernels/common").display()),
        format!("-I{}", cutlass.include.display()),
    ];
    if let Some(util) = &cutlass.util_include {
        args.push(format!("-I{}", util.display()));
    }
    args.extend([
        "-c".into(),
        root.join("kernels/cutlass3x_sm90/gemm.cu")
            .display()
            .to_string(),
        "-o".into(),
        out.path().join("gemm.o").display().to_string(),
    ]);
    let command = |hooked: bool, trace: Option<&str>| {
        let mut c = if hooked {
            let mut c = Command::new(&hook);
            c.arg(&toolchain.nvcc);
            c
        } else {
            Command::new(&toolchain.nvcc)
        };
        c.args(&args).env("KWB_CACHE_DIR", out.path().join("cache"));
        match trace {
            Some(t) => c.env("KWB_TRACE", t),
            None => c.env_remove("KWB_TRACE"),
        };
        c
    };
    // Interleaved (plain, disabled, enabled; again), so that the machine's drift
    // falls on all three alike; the first round warms up (and fills the hook's cache).
    let mut commands = [
        command(false, None),
        command(true, None),
        command(true, Some("probe=accumulator,epilogue")),
    ];
    let mut times: [Vec<f64>; 3] = Default::default();
    for round in 0..=runs.max(1) {
        for (c, t) in commands.iter_mut().zip(times.iter_mut()) {
            let seconds = median(c, 0)?;
            if round > 0 {
                t.push(seconds);
            }
        }
    }
    let mid = |t: &mut Vec<f64>| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let (plain, off, on) = (mid(&mut times[0]), mid(&mut times[1]), mid(&mut times[2]));
    println!(
        "kernels/cutlass3x_sm90/gemm.cu -c, {runs} interleaved rounds: nvcc median {plain:.2} s; kwb-nvcc disabled {off:.2} s ({:.3}×, target ≤ 1.01×); enabled (probe=accumulator,epilogue, the CUTLASS collective through the overlay) {on:.2} s ({:.3}×, target ≤ 1.05×)",
        off / plain,
        on / plain
    );
    Ok(())
}

/// Median wall seconds of `runs` runs after one warm-up (`runs` 0: one run, timed);
/// output is discarded, and a failing run is an error unless it only reported files
/// without kernels (3) or kernels inside syntax the parser skipped (4, partial results:
/// a third-party sweep has such files).
fn median(command: &mut Command, runs: usize) -> Result<f64> {
    command.stdout(Stdio::null()).stderr(Stdio::null());
    let mut times = Vec::new();
    let warm_up = usize::from(runs > 0);
    for i in 0..runs.max(1) + warm_up {
        let started = Instant::now();
        let status = command
            .status()
            .map_err(|e| Failure(format!("cannot run {:?}: {e}", command.get_program())))?;
        if !matches!(status.code(), Some(0 | 3 | 4)) {
            return Err(Failure(format!(
                "{:?} failed: {status}",
                command.get_program()
            )));
        }
        if i >= warm_up {
            times.push(started.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    files_with(dir, &["h", "hpp", "inl"], out);
}

/// Every file below `dir` whose extension is one of `extensions`, appended to `out`.
pub fn files_with(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_with(&path, extensions, out);
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| extensions.contains(&e))
        {
            out.push(path);
        }
    }
}
