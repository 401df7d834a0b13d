//! A rung whose kernel faulted, run again alone under compute-sanitizer's memcheck:
//! the same reproducer library (built with `-lineinfo`, so memcheck names the source
//! line), the same inputs, the worker started through the sanitizer with its report
//! in a file of its own (the worker's events stay on stdout). What comes back is the
//! sanitizer's report and the run's operand buffers, whose addresses the report's
//! address is read against.
//!
//! Invariant: nothing here judges; a sanitizer that is missing, or a rerun that does
//! not fault, is said as such.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kwb_ladder::Rung;

use crate::{Report, RunOptions};

/// What the memcheck rerun of one rung left.
#[derive(Debug)]
pub struct Memchecked {
    /// The sanitizer's report.
    pub log: String,
    /// The rerun itself (its buffers' addresses are the ones the log names).
    pub report: Report,
    /// The sanitizer that ran.
    pub tool: PathBuf,
}

/// compute-sanitizer: beside the toolchain's nvcc (a CUDA toolkit's `bin`), in the
/// toolkit's own folder for it, or on PATH.
pub fn sanitizer() -> Option<PathBuf> {
    let env = kwb_toolchain::Env::from_process();
    let mut candidates = Vec::new();
    if let Ok(t) = kwb_toolchain::toolchain(&env) {
        let bin = t.bin().to_path_buf();
        candidates.push(bin.join("compute-sanitizer"));
        if let Some(home) = bin.parent() {
            candidates.push(home.join("compute-sanitizer").join("compute-sanitizer"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("compute-sanitizer")));
    }
    candidates.into_iter().find(|p| p.is_file())
}

/// Runs `rung` of the reproducer in `dir` again under memcheck, with `options`' worker,
/// request and launch configuration; `work` receives the sanitizer's log.
pub fn memcheck(
    dir: &Path,
    options: &RunOptions,
    rung: Rung,
    work: &Path,
) -> Result<Memchecked, String> {
    let tool = sanitizer().ok_or_else(|| {
        "compute-sanitizer was not found (beside nvcc, in the CUDA toolkit, or on PATH)".to_owned()
    })?;
    std::fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    let log = work.join("memcheck.txt");
    let _ = std::fs::remove_file(&log);
    let mut o = options.clone();
    o.rungs = if rung == Rung::Dump {
        Vec::new()
    } else {
        o.dump = None;
        vec![rung]
    };
    o.progress = crate::Progress::default();
    // memcheck slows a kernel by tens of times.
    o.timeout = (options.timeout * 20).max(Duration::from_secs(120));
    let mut worker = vec![
        tool.display().to_string(),
        "--tool".to_owned(),
        "memcheck".to_owned(),
        "--print-limit".to_owned(),
        "4".to_owned(),
        "--show-backtrace".to_owned(),
        "device".to_owned(),
        "--log-file".to_owned(),
        log.display().to_string(),
    ];
    worker.extend(options.worker.iter().cloned());
    o.worker = worker;
    let report = crate::run(dir, &o).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(&log)
        .map_err(|e| format!("the sanitizer wrote no report ({}: {e})", log.display()))?;
    Ok(Memchecked {
        log: text,
        report,
        tool,
    })
}
