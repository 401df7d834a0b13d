//! `kernels/suite.toml`: the families and variants of the kernel suite, and how one
//! variant is built.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::{Failure, Result};

/// The whole manifest.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Build settings per family, by family name.
    pub families: BTreeMap<String, Family>,
    /// Every variant, in manifest order.
    pub variant: Vec<Variant>,
}

/// How a family builds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Family {
    /// The source, relative to `kernels/`.
    pub source: String,
    /// Architectures every variant compiles for; the first is the one the GPU runs.
    pub arches: Vec<String>,
    /// Whether it needs the CUTLASS include folders.
    #[serde(default)]
    pub cutlass: bool,
    /// Extra nvcc arguments.
    #[serde(default)]
    pub flags: Vec<String>,
    /// `kwb-instrument --gate` for the traced build (`xtask gpu-trace`): the one
    /// instantiation to trace.
    #[serde(default)]
    pub trace_gate: Option<String>,
    /// `kwb-instrument --rows` for the traced build: the live-row bound.
    #[serde(default)]
    pub trace_rows: Option<String>,
    /// The `__global__` kernel Track B reproduces (`xtask gpu-repro`: kwb-extract
    /// `--kernel`, then `kwb run`); none for a library kernel behind an adapter.
    #[serde(default)]
    pub kernel: Option<String>,
    /// Further `kwb run` flags that give the family's harness problem (its alpha and
    /// beta), so the manifest's symptom is the one to expect.
    #[serde(default)]
    pub run_flags: Vec<String>,
    /// `kwb-extract --template` instead of `--kernel`: for a task of a megakernel,
    /// the device function's instantiation as the kernel's dispatch calls it.
    #[serde(default)]
    pub template: Option<String>,
    /// Further kwb-extract flags (a task's field bindings and output tile).
    #[serde(default)]
    pub extract_flags: Vec<String>,
    /// Pass each variant's shape to `kwb run --shape` (a kernel whose shape is fixed
    /// at compile time).
    #[serde(default)]
    pub run_shape: bool,
    /// What CI's `kernels` step builds of the family: `every` variant (the default),
    /// or only the `correct` one, for a family whose every build takes minutes of a
    /// core. `cargo xtask kernels` and every GPU run build every variant regardless.
    #[serde(default)]
    pub ci: CiBuilds,
}

/// What CI builds of a family (`ci` in the manifest).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CiBuilds {
    /// Every variant.
    #[default]
    Every,
    /// The correct variant (`none`) only.
    Correct,
    /// No build: the zero-cost test (tests/tests/zero_cost.rs) compiles the family's
    /// kernel, correct, instrumented and not (device pass); the whole programs, every
    /// variant, are built by `cargo xtask kernels` and every GPU run.
    None,
}

/// One (family, defect) build and what it must show.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub family: String,
    pub defect: String,
    pub stage: String,
    pub symptom: String,
    pub line: u32,
    pub shape: Vec<u64>,
    pub dtypes: String,
    pub ones: String,
    pub expect: Expect,
    /// Why `xtask gpu-trace` cannot judge this variant by closed forms (its
    /// all-ones rung is not all ones, say); it is listed, not judged.
    #[serde(default)]
    pub trace_skip: Option<String>,
    /// What Track B's reproducer shows where it differs from `expect`: a task of a
    /// megakernel is reproduced alone on the ladder's inputs, not as the whole program
    /// the harness runs. `repro_note` says why.
    #[serde(default)]
    pub repro_expect: Option<Expect>,
    #[serde(default)]
    pub repro_note: Option<String>,
    /// A defect in another task of the megakernel than the family's: Track B
    /// reproduces this task instead (`--template`), with these kwb-extract flags and
    /// `kwb run --shape` of this problem.
    #[serde(default)]
    pub repro_template: Option<String>,
    #[serde(default)]
    pub repro_extract_flags: Option<Vec<String>>,
    #[serde(default)]
    pub repro_shape: Option<Vec<u64>>,
}

/// The outcome each input rung must have.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub ones: Outcome,
    pub small_int: Outcome,
    pub random: Outcome,
    /// Bounds of sum|out| / sum|ref| on the ones rung.
    #[serde(default)]
    pub ratio_ones: Option<[f64; 2]>,
}

/// What a rung shows.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    Fail,
    Nan,
    Hang,
}

const STAGES: [&str; 5] = ["operand-load", "mma", "epilogue", "descriptor", "none"];

impl Suite {
    /// Reads and checks `kernels/suite.toml` under `root`.
    pub fn load(root: &Path) -> Result<Suite> {
        let path = root.join("kernels/suite.toml");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Failure(format!("cannot read {}: {e}", path.display())))?;
        let suite: Suite =
            toml::from_str(&text).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
        suite.check(root)?;
        Ok(suite)
    }

    fn check(&self, root: &Path) -> Result {
        let mut seen = std::collections::BTreeSet::new();
        for v in &self.variant {
            let name = format!("{}/{}", v.family, v.defect);
            let family = self
                .families
                .get(&v.family)
                .ok_or_else(|| Failure(format!("{name}: no [families.{}] table", v.family)))?;
            if !seen.insert(name.clone()) {
                return Err(Failure(format!("{name}: listed twice")));
            }
            if !STAGES.contains(&v.stage.as_str()) {
                return Err(Failure(format!(
                    "{name}: stage `{}` is not one of {STAGES:?}",
                    v.stage
                )));
            }
            if (v.defect == "none") != (v.line == 0) {
                return Err(Failure(format!(
                    "{name}: line must be 0 exactly for defect `none`"
                )));
            }
            if v.shape.len() != 3 {
                return Err(Failure(format!("{name}: shape must be [M, N, K]")));
            }
            let source = root.join("kernels").join(&family.source);
            if v.line > 0 {
                let lines = std::fs::read_to_string(&source)
                    .map_err(|e| Failure(format!("{name}: cannot read {}: {e}", source.display())))?
                    .lines()
                    .count();
                if v.line as usize > lines {
                    return Err(Failure(format!(
                        "{name}: line {} is past the end of {}",
                        v.line, family.source
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Where the build of a variant for an architecture goes.
pub fn binary_path(out_dir: &Path, variant: &Variant, arch: &str) -> PathBuf {
    out_dir
        .join(&variant.family)
        .join(format!("{}.{arch}", variant.defect))
}

/// The nvcc flags of a variant.
pub fn flags(
    root: &Path,
    family: &Family,
    variant: &Variant,
    arch: &str,
    cutlass: Option<&kwb_toolchain::CutlassDir>,
) -> Result<kwb_toolchain::CompileFlags> {
    let mut includes = vec![root.join("kernels/common")];
    if family.cutlass {
        let dir = cutlass.ok_or_else(|| {
            Failure(format!(
                "{} needs the CUTLASS headers: run `cargo xtask setup` or set KWB_CUTLASS_DIR",
                variant.family
            ))
        })?;
        includes.push(dir.include.clone());
        includes.extend(dir.util_include.clone());
    }
    let mut extra = vec!["-O3".to_owned(), "-lineinfo".to_owned()];
    extra.extend(family.flags.iter().cloned());
    Ok(kwb_toolchain::CompileFlags {
        arch: arch.to_owned(),
        std: "c++17".to_owned(),
        includes,
        defines: vec![format!("KWB_DEFECT={}", variant.defect)],
        extra,
        // A suite build runs only on the GPU it names: its SASS alone, without the
        // portable PTX pass.
        ptx: false,
    })
}
