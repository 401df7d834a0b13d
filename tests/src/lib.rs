//! Shared helpers of the end-to-end and snapshot tests: a compact, reviewable text
//! form of a kernel map, and where the CUTLASS headers are.
//! [`fuzz_props`] holds the fuzz targets' properties, shared with `fuzz/`.

pub mod fuzz_props;

use std::fmt::Write;
use std::path::PathBuf;

use kwb_sites::KernelMap;

/// One line per kernel and per site: `kind line:col confidence | text | note`.
pub fn compact(map: &KernelMap) -> String {
    let mut out = String::new();
    for kernel in &map.kernels {
        let params: Vec<String> = kernel
            .template_params
            .iter()
            .map(|p| format!("{}:{}", p.kind, p.name))
            .collect();
        let _ = writeln!(
            out,
            "kernel {} ({}) lines {}-{} [{}]{}",
            kernel.name,
            kernel.role,
            kernel.line,
            kernel.end_line,
            params.join(", "),
            if kernel.syntax_errors > 0 {
                format!(" SYNTAX ERRORS: {}", kernel.syntax_errors)
            } else {
                String::new()
            }
        );
        for site in &kernel.sites {
            let text: String = site.text.chars().take(90).collect();
            let _ = writeln!(
                out,
                "  {:<14} {}:{} {:?} | {} | {}",
                site.kind.name(),
                site.line,
                site.column,
                site.confidence,
                text,
                site.note.as_deref().unwrap_or("-")
            );
        }
    }
    out
}

/// The CUTLASS source folder (holding `include/` and `examples/`) when the tests run
/// with the toolchain set up (`KWB_CUTLASS_DIR` names its `include/`).
pub fn cutlass_source() -> Option<PathBuf> {
    let include = PathBuf::from(std::env::var_os("KWB_CUTLASS_DIR")?);
    include.parent().map(PathBuf::from)
}

/// Whether a slow check over a set of programs takes the whole set
/// (`KWB_WHOLE_SETS=1`, as `cargo xtask sets` runs them) rather than CI's sample: the
/// units its manifest does not mark `ci = false` (a construct a cheaper unit already
/// covers, or a compile of minutes), so that CI stays within its budget.
pub fn whole_sets() -> bool {
    std::env::var("KWB_WHOLE_SETS").as_deref() == Ok("1")
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository root")
        .to_owned()
}

/// The manifest kwb-extract writes for the suite kernel `kernel` of `family` (built
/// correct, `KWB_DEFECT=none`), with the suite's build flags: what tests that read
/// or perturb a real kwb.toml start from.
pub fn suite_manifest(family: &str, kernel: &str) -> kwb_extract::manifest::Manifest {
    let file = format!("kernels/{family}/gemm.cu");
    let source = std::fs::read_to_string(repo_root().join(&file)).expect("a suite kernel");
    let request = kwb_extract::Request {
        kernel: Some(kernel.to_owned()),
        defines: vec![("KWB_DEFECT".to_owned(), "none".to_owned())],
        file_name: file.clone(),
        ..kwb_extract::Request::default()
    };
    let x = kwb_extract::extract(&source, &request).expect("the suite extracts");
    let build = kwb_extract::manifest::Build {
        std: "c++17".to_owned(),
        arch: "sm_90a".to_owned(),
        defines: vec!["KWB_DEFECT=none".to_owned()],
        includes: vec!["kernels/common".to_owned()],
        other: vec!["--expt-relaxed-constexpr".to_owned()],
        from: "command line".to_owned(),
    };
    kwb_extract::manifest::Manifest::new(&x, &file, build)
}

/// Runs `check` on every unit on all the machine's cores, each in its own folder under
/// `dir` (named by its index), printing `ok  LINE` or `BAD WHY` as each ends (the
/// slow checks take minutes); panics naming every failure. Returns the lines.
#[allow(clippy::print_stderr)] // each unit's line as it ends: the run takes minutes
pub fn check_all<T: Sync>(
    units: &[T],
    dir: &std::path::Path,
    check: impl Fn(&T, &std::path::Path) -> Result<String, String> + Sync,
) -> Vec<String> {
    use std::sync::Mutex;
    let queue = Mutex::new(units.iter().enumerate());
    let results = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let Some((i, unit)) = queue.lock().unwrap_or_else(|p| p.into_inner()).next()
                    else {
                        break;
                    };
                    let result = check(unit, &dir.join(i.to_string()));
                    match &result {
                        Ok(line) => eprintln!("ok  {line}"),
                        Err(why) => eprintln!("BAD {why}"),
                    }
                    results
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(result);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} units failed:\n{}",
        failures.len(),
        results.len(),
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    results.into_iter().filter_map(Result::ok).collect()
}
