//! `cargo xtask kernels`: compile every variant of `kernels/suite.toml` for every
//! architecture of its family, in parallel — what CI runs to catch a broken kernel
//! without a GPU.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use kwb_toolchain::{CutlassDir, Env, Toolchain};

use crate::suite::{CiBuilds, Family, Suite, Variant, binary_path, flags};
use crate::{Failure, Result, setup};

/// Options of `kernels` and of the build half of `gpu-suite`.
pub struct Build<'a> {
    pub jobs: usize,
    pub family: Option<&'a str>,
    /// Which variants of each family to build, for which of its architectures.
    pub selection: Selection,
    /// Build the instrumented copies under this folder (laid out like `kernels/`)
    /// with `-DKWB_TRACE` instead of the sources; families without a copy are left
    /// out.
    pub traced: Option<&'a Path>,
}

/// Which of a family's variants and architectures a build covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Every variant for every architecture.
    All,
    /// Every variant for the first architecture (the one a GPU run uses).
    First,
    /// What CI builds: every variant for the first architecture and the correct
    /// variant (`none`) for the others too, that the family still builds for them;
    /// of a family whose manifest says `ci = "correct"`, the correct variant alone;
    /// `ci = "none"`, nothing.
    /// The builds left out are never run (GPU runs build their own, first
    /// architecture, every variant); `cargo xtask kernels` makes them all.
    Ci,
}

impl Selection {
    /// Of `family`'s architectures, those to build its variant `defect` for.
    fn of<'f>(self, family: &'f Family, defect: &str) -> &'f [String] {
        let arches = &family.arches[..];
        let first = &arches[..arches.len().min(1)];
        match self {
            Selection::All => arches,
            Selection::First => first,
            Selection::Ci if family.ci == CiBuilds::None => &[],
            Selection::Ci if defect == "none" => arches,
            Selection::Ci if family.ci == CiBuilds::Correct => &[],
            Selection::Ci => first,
        }
    }
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
        for arch in build.selection.of(family, &variant.defect) {
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
    // Started CUTLASS families first: their builds take the longest, so the parallel
    // jobs end together rather than on one long build. Results keep the manifest's
    // order.
    let mut order: Vec<usize> = (0..jobs_list.len()).collect();
    order.sort_by_key(|&i| !suite.families[&jobs_list[i].0.family].cutlass);
    let next = AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Built<'s>>>> = jobs_list
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..build.jobs.max(1) {
            scope.spawn(|| {
                while let Some(&i) = order.get(next.fetch_add(1, Ordering::SeqCst)) {
                    let (variant, arch, source, flags) = &jobs_list[i];
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

#[cfg(test)]
mod tests {
    use super::*;

    fn suite() -> Suite {
        Suite::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("..")).unwrap()
    }

    /// The (family, defect, arch) builds a choice makes of the suite's manifest.
    fn builds(suite: &Suite, selection: Selection) -> Vec<(String, String, String)> {
        suite
            .variant
            .iter()
            .flat_map(|v| {
                let family = &suite.families[&v.family];
                selection
                    .of(family, &v.defect)
                    .iter()
                    .map(|a| (v.family.clone(), v.defect.clone(), a.clone()))
            })
            .collect()
    }

    #[test]
    fn ci_builds_each_family_for_every_arch_and_what_its_manifest_asks() {
        let suite = suite();
        assert_eq!(builds(&suite, Selection::First).len(), suite.variant.len());
        let ci = builds(&suite, Selection::Ci);
        let all = builds(&suite, Selection::All);
        assert!(ci.iter().all(|b| all.contains(b)));
        for (name, family) in &suite.families {
            // The correct variant for every architecture, unless the manifest says none.
            for arch in &family.arches {
                let built = ci.contains(&(name.clone(), "none".to_owned(), arch.clone()));
                assert_eq!(built, family.ci != CiBuilds::None, "{name} {arch}");
            }
            // Every defect variant for the first, unless the manifest says otherwise.
            let defects = suite
                .variant
                .iter()
                .filter(|v| &v.family == name && v.defect != "none");
            for v in defects {
                let built = ci
                    .iter()
                    .filter(|b| b.0 == *name && b.1 == v.defect)
                    .count();
                let expected = usize::from(family.ci == CiBuilds::Every);
                assert_eq!(built, expected, "{name}/{}", v.defect);
            }
        }
    }
}
