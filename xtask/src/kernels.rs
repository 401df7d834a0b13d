//! `cargo xtask kernels`: compile every variant of `kernels/suite.toml` for every
//! architecture of its family, in parallel — what CI runs to catch a broken kernel
//! without a GPU.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use kwb_toolchain::{CutlassDir, Env, Toolchain};

use crate::suite::{Suite, Variant, binary_path, flags};
use crate::{Failure, Result, setup};

/// Options of `kernels` and of the build half of `gpu-suite`.
pub struct Build<'a> {
    pub jobs: usize,
    pub family: Option<&'a str>,
    /// Only the first architecture of each family (the one a GPU run uses).
    pub first_arch_only: bool,
    /// Build the instrumented copies under this folder (laid out like `kernels/`)
    /// with `-DKWB_TRACE` instead of the sources; families without a copy are left
    /// out.
    pub traced: Option<&'a Path>,
}

/// One compiled (or failed) build.
pub struct Built<'s> {
    pub variant: &'s Variant,
    pub arch: String,
    pub binary: PathBuf,
    pub result: std::result::Result<f64, String>,
}

/// Compiles every selected build; returns how many compiled, or fails naming those
/// that did not.
pub fn run(root: &Path, build: &Build<'_>) -> Result<usize> {
    let suite = Suite::load(root)?;
    let (toolchain, cutlass) = tools()?;
    let built = compile_all(root, &suite, &toolchain, cutlass.as_ref(), build)?;
    let failed: Vec<_> = built.iter().filter(|b| b.result.is_err()).collect();
    println!(
        "compiled {} of {} builds",
        built.len() - failed.len(),
        built.len()
    );
    if failed.is_empty() {
        Ok(built.len())
    } else {
        Err(Failure(format!(
            "{} builds failed: {}",
            failed.len(),
            failed
                .iter()
                .map(|b| format!("{}/{} ({})", b.variant.family, b.variant.defect, b.arch))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

/// The toolchain and CUTLASS headers: found as kwb finds them, else set up.
pub fn tools() -> Result<(Toolchain, Option<CutlassDir>)> {
    let env = Env::from_process();
    match (kwb_toolchain::toolchain(&env), kwb_toolchain::cutlass(&env)) {
        (Ok(toolchain), Ok(cutlass)) => Ok((toolchain, Some(cutlass))),
        _ => {
            let installed = setup::run()?;
            Ok((installed.toolchain, Some(installed.cutlass)))
        }
    }
}

/// Compiles every (variant, architecture) with `jobs` parallel nvcc processes,
/// printing one line per build as it finishes.
pub fn compile_all<'s>(
    root: &Path,
    suite: &'s Suite,
    toolchain: &Toolchain,
    cutlass: Option<&CutlassDir>,
    build: &Build<'_>,
) -> Result<Vec<Built<'s>>> {
    let out_dir = match build.traced {
        Some(dir) => root
            .join("target/kernels-traced")
            .join(dir.file_name().unwrap_or_default()),
        None => root.join("target/kernels"),
    };
    let mut jobs_list = Vec::new();
    for variant in &suite.variant {
        if build.family.is_some_and(|f| f != variant.family) {
            continue;
        }
        let family = &suite.families[&variant.family];
        let traced_source = build.traced.map(|dir| dir.join(&family.source));
        if traced_source.as_ref().is_some_and(|s| !s.is_file()) {
            continue;
        }
        let arches = if build.first_arch_only {
            &family.arches[..1]
        } else {
            &family.arches[..]
        };
        for arch in arches {
            let mut flags = flags(root, family, variant, arch, cutlass)?;
            let mut source = root.join("kernels").join(&family.source);
            if let Some(traced) = &traced_source {
                // Quoted includes still resolve against the original folder.
                if let Some(dir) = source.parent() {
                    flags.includes.push(dir.to_owned());
                }
                // Instrumented library headers (`--overlay`) come first.
                let overlay = traced.with_extension("overlay");
                if overlay.is_dir() {
                    flags.includes.insert(0, overlay);
                }
                flags.defines.push(kwb_runtime::ENABLE_MACRO.to_owned());
                source = traced.clone();
            }
            jobs_list.push((variant, arch.clone(), source, flags));
        }
    }
    let next = AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Built<'s>>>> = jobs_list
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..build.jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some((variant, arch, source, flags)) = jobs_list.get(i) else {
                        break;
                    };
                    let binary = binary_path(&out_dir, variant, arch);
                    let started = Instant::now();
                    let result = std::fs::create_dir_all(binary.parent().unwrap_or(&out_dir))
                        .map_err(|e| e.to_string())
                        .and_then(|()| {
                            kwb_toolchain::compile_executable(toolchain, source, flags, &binary)
                                .map_err(|e| render(&e))
                        })
                        .map(|()| started.elapsed().as_secs_f64());
                    match &result {
                        Ok(s) => println!(
                            "ok   {}/{} {arch} ({s:.1} s)",
                            variant.family, variant.defect
                        ),
                        Err(e) => {
                            println!("FAIL {}/{} {arch}\n{e}", variant.family, variant.defect)
                        }
                    }
                    *results[i].lock().expect("no panics while holding the lock") = Some(Built {
                        variant,
                        arch: arch.clone(),
                        binary,
                        result,
                    });
                }
            });
        }
    });
    Ok(results
        .into_iter()
        .filter_map(|m| m.into_inner().ok().flatten())
        .collect())
}

/// An error with its causes (nvcc's stderr) on following lines.
fn render(error: &kwb_toolchain::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!("\n{cause}"));
        source = cause.source();
    }
    text
}
