//! `cargo xtask bench`: the speed figures of docs/BENCHMARKS.md, measured side by
//! side on this machine.
//!
//! 1. `kwb sites --json` over every CUTLASS header (target ≤ 3 s wall).
//! 2. `kwb sites` against `nvcc -E` on one kernel translation unit (target ≥ 20×).
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
    Ok(())
}

/// Median wall seconds of `runs` runs after one warm-up; output is discarded, and a
/// failing run is an error unless it only reported files without kernels.
fn median(command: &mut Command, runs: usize) -> Result<f64> {
    command.stdout(Stdio::null()).stderr(Stdio::null());
    let mut times = Vec::new();
    for i in 0..=runs.max(1) {
        let started = Instant::now();
        let status = command
            .status()
            .map_err(|e| Failure(format!("cannot run {:?}: {e}", command.get_program())))?;
        if !matches!(status.code(), Some(0 | 3)) {
            return Err(Failure(format!(
                "{:?} failed: {status}",
                command.get_program()
            )));
        }
        if i > 0 {
            times.push(started.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("h" | "hpp" | "inl")
        ) {
            out.push(path);
        }
    }
}
