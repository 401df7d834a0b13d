//! Finding the CUDA toolchain and the CUTLASS headers.
//!
//! The CUDA home is the first of: `KWB_CUDA_HOME`, `CUDA_HOME`, the folder above the
//! folder of the first `nvcc` on `PATH`, and the pip install in the cache. A variable
//! that is set but names no `bin/nvcc` is an error rather than skipped, so a typo
//! never silently selects another toolchain.
//!
//! The CUTLASS include folder is `KWB_CUTLASS_DIR`, else the pip install in the cache.

use std::path::{Path, PathBuf};

use crate::{Env, Error, Result, cache};

/// Which rule found the CUDA toolchain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discovery {
    /// The `KWB_CUDA_HOME` variable.
    KwbCudaHome,
    /// The `CUDA_HOME` variable.
    CudaHome,
    /// An `nvcc` on `PATH`.
    Path,
    /// The pip install in the cache, made by `cargo xtask setup`.
    Cache,
}

/// A CUDA toolchain: its home and the tools kwb runs from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolchain {
    /// The CUDA home, holding `bin/` and `include/`.
    pub home: PathBuf,
    /// `bin/nvcc`.
    pub nvcc: PathBuf,
    /// `bin/cuobjdump`.
    pub cuobjdump: PathBuf,
    /// `bin/nvdisasm`, when the toolchain has it.
    pub nvdisasm: Option<PathBuf>,
    /// Which rule found it.
    pub source: Discovery,
}

impl Toolchain {
    /// The folder that holds the tools.
    pub fn bin(&self) -> &Path {
        self.nvcc.parent().unwrap_or(&self.home)
    }
}

/// Which rule found the CUTLASS headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutlassSource {
    /// The `KWB_CUTLASS_DIR` variable.
    KwbCutlassDir,
    /// The pip install in the cache, made by `cargo xtask setup`.
    Cache,
}

/// The CUTLASS headers, plus the parts of its source tree found next to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutlassDir {
    /// The `include` folder, holding `cutlass/` and `cute/`; pass it with `-I`.
    pub include: PathBuf,
    /// The `examples` folder next to `include`, when there is one.
    pub examples: Option<PathBuf>,
    /// The `tools/util/include` folder next to `include`, when there is one; the
    /// CUTLASS examples include `cutlass/util/...` from it.
    pub util_include: Option<PathBuf>,
    /// Which rule found it.
    pub source: CutlassSource,
}

/// Finds the CUDA toolchain named by `env`.
pub fn toolchain(env: &Env) -> Result<Toolchain> {
    let homes = [
        ("KWB_CUDA_HOME", &env.kwb_cuda_home, Discovery::KwbCudaHome),
        ("CUDA_HOME", &env.cuda_home, Discovery::CudaHome),
    ];
    for (var, home, source) in homes {
        if let Some(home) = home {
            return in_home(home, source)?.ok_or_else(|| Error::BadCudaHome {
                var,
                home: home.clone(),
            });
        }
    }
    if let Some(home) = env.path.as_deref().and_then(home_of_nvcc_on_path) {
        if let Some(toolchain) = in_home(&home, Discovery::Path)? {
            return Ok(toolchain);
        }
    }
    match installed_target(env) {
        Some(target) => in_home(&cache::cuda_home(&target), Discovery::Cache)?,
        None => None,
    }
    .ok_or(Error::NvccNotFound)
}

/// Finds the CUTLASS headers named by `env`.
pub fn cutlass(env: &Env) -> Result<CutlassDir> {
    if let Some(dir) = &env.kwb_cutlass_dir {
        return in_include(dir, CutlassSource::KwbCutlassDir)
            .ok_or_else(|| Error::BadCutlassDir { dir: dir.clone() });
    }
    installed_target(env)
        .and_then(|target| {
            in_include(
                &cache::cutlass_source(&target).join("include"),
                CutlassSource::Cache,
            )
        })
        .ok_or(Error::CutlassNotFound)
}

/// The toolchain in `home`, `None` when it has no `bin/nvcc`, and an error when it
/// has nvcc but no cuobjdump.
fn in_home(home: &Path, source: Discovery) -> Result<Option<Toolchain>> {
    let bin = home.join("bin");
    let nvcc = bin.join(exe("nvcc"));
    if !nvcc.is_file() {
        return Ok(None);
    }
    let cuobjdump = bin.join(exe("cuobjdump"));
    if !cuobjdump.is_file() {
        return Err(Error::CuobjdumpNotFound { bin });
    }
    let nvdisasm = Some(bin.join(exe("nvdisasm"))).filter(|path| path.is_file());
    Ok(Some(Toolchain {
        home: home.to_owned(),
        nvcc,
        cuobjdump,
        nvdisasm,
        source,
    }))
}

/// The home of the first `nvcc` on `path`: the folder above the folder that holds
/// it, after following symbolic links (`/usr/bin/nvcc` is often a link into a home).
fn home_of_nvcc_on_path(path: &std::ffi::OsStr) -> Option<PathBuf> {
    let nvcc = std::env::split_paths(path)
        .map(|dir| dir.join(exe("nvcc")))
        .find(|candidate| candidate.is_file())?;
    let nvcc = nvcc.canonicalize().unwrap_or(nvcc);
    Some(nvcc.parent()?.parent()?.to_owned())
}

/// The CUTLASS headers in `include`, `None` unless it holds `cutlass/` and `cute/`.
fn in_include(include: &Path, source: CutlassSource) -> Option<CutlassDir> {
    if !(include.join("cutlass").is_dir() && include.join("cute").is_dir()) {
        return None;
    }
    let tree = include.parent();
    let existing = |relative: &str| {
        tree.map(|tree| tree.join(relative))
            .filter(|dir| dir.is_dir())
    };
    Some(CutlassDir {
        include: include.to_owned(),
        examples: existing("examples"),
        util_include: existing("tools/util/include"),
        source,
    })
}

/// The cache's install folder of the current pins, when it is finished.
fn installed_target(env: &Env) -> Option<PathBuf> {
    let target = cache::toolchain_dir(&cache::cache_dir(env).ok()?);
    cache::is_installed(&target).then_some(target)
}

fn exe(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

#[cfg(test)]
mod tests;
