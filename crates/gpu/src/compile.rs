//! Building a reproducer into a shared library, once: the library is kept in the
//! cache under a hash of everything that decides its bytes (repro.cu, the flags,
//! nvcc's version and path), so a rerun loads it without compiling.
//!
//! Invariant: a cache entry is complete or absent. nvcc writes to a temporary name in
//! the entry's folder and the file is renamed into place only after nvcc succeeded.

use std::path::{Path, PathBuf};
use std::time::Instant;

use kwb_extract::manifest::Manifest;
use kwb_toolchain::{CompileFlags, Env, Toolchain};

use crate::error::GpuError;

/// The built library.
#[derive(Debug, Clone)]
pub struct Built {
    pub library: PathBuf,
    /// Found in the cache: nothing was compiled.
    pub cached: bool,
    /// Seconds nvcc took (0 when cached).
    pub seconds: f64,
    /// The nvcc command's flags, for the report.
    pub flags: Vec<String>,
}

use kwb_toolchain::cache::content_key as fnv;

/// The flags of the manifest's build, plus the CUTLASS include folder kwb knows of
/// (last, so it never shadows one the build names).
pub fn flags(manifest: &Manifest, dir: &Path, env: &Env) -> CompileFlags {
    // The folder by its canonical path, so the cache key does not depend on how the
    // user spelled it.
    let mut includes: Vec<PathBuf> = vec![dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())];
    includes.extend(manifest.build.includes.iter().map(PathBuf::from));
    if let Ok(cutlass) = kwb_toolchain::cutlass(env)
        && !includes.contains(&cutlass.include)
    {
        includes.push(cutlass.include);
    }
    let mut extra = manifest.build.other.clone();
    if !extra.iter().any(|f| f.starts_with("-O")) {
        extra.push("-O3".to_owned());
    }
    // Line numbers for a sanitizer's report of a fault; the code is the same.
    if !extra.iter().any(|f| f == "-lineinfo" || f == "-G") {
        extra.push("-lineinfo".to_owned());
    }
    CompileFlags {
        arch: manifest.build.arch.clone(),
        std: manifest.build.std.clone(),
        includes,
        defines: manifest.build.defines.clone(),
        extra,
        // The binary the description below tells the user to build: plain `-arch`.
        ptx: true,
    }
}

fn describe(flags: &CompileFlags) -> Vec<String> {
    let mut out = vec![
        format!("-std={}", flags.std),
        format!("-arch={}", flags.arch),
    ];
    out.extend(flags.includes.iter().map(|i| format!("-I{}", i.display())));
    out.extend(flags.defines.iter().map(|d| format!("-D{d}")));
    out.extend(flags.extra.iter().cloned());
    out
}

/// Builds `dir/repro.cu` with `flags` into the cache folder `cache`, or finds it
/// there; `version` is the toolchain's nvcc version (part of the key).
pub fn build(
    toolchain: &Toolchain,
    version: &str,
    dir: &Path,
    flags: &CompileFlags,
    cache: &Path,
) -> Result<Built, GpuError> {
    let source = dir.join("repro.cu");
    let text = std::fs::read(&source).map_err(|e| GpuError::Io {
        path: source.clone(),
        source: e,
    })?;
    // A reproducer that reads the maps its kernel receives at the launch stands in
    // front of the runtime's launch entries (crates/extract/src/through/maps.rs).
    let mut flags = flags.clone();
    if contains(&text, kwb_extract::WRAPPER.as_bytes()) {
        for symbol in kwb_extract::LAUNCH_ENTRIES_WRAPPED {
            flags.extra.push(format!("-Xlinker=--wrap={symbol}"));
        }
    }
    let flags = &flags;
    let described = describe(flags);
    let key = fnv(&[
        &text,
        described.join("\u{1f}").as_bytes(),
        version.as_bytes(),
        toolchain.nvcc.to_string_lossy().as_bytes(),
    ]);
    let entry = cache.join(format!("{key:016x}"));
    let library = entry.join("repro.so");
    if library.is_file() {
        return Ok(Built {
            library,
            cached: true,
            seconds: 0.0,
            flags: described,
        });
    }
    std::fs::create_dir_all(&entry).map_err(|e| GpuError::Io {
        path: entry.clone(),
        source: e,
    })?;
    let partial = entry.join(format!("repro.so.partial-{}", std::process::id()));
    let started = Instant::now();
    let built = kwb_toolchain::compile_shared_library(toolchain, &source, flags, &partial);
    settle(built, &source, &partial, &library)?;
    Ok(Built {
        library,
        cached: false,
        seconds: started.elapsed().as_secs_f64(),
        flags: described,
    })
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// kwb's reference GEMM kernels (`reference.cu`), built for `arch` into a cubin in
/// the cache, or found there.
pub fn build_reference(
    toolchain: &Toolchain,
    version: &str,
    arch: &str,
    cache: &Path,
) -> Result<PathBuf, GpuError> {
    const SOURCE: &str = include_str!("reference.cu");
    let key = fnv(&[SOURCE.as_bytes(), arch.as_bytes(), version.as_bytes()]);
    let entry = cache.join(format!("reference-{key:016x}"));
    let cubin = entry.join("reference.cubin");
    if cubin.is_file() {
        return Ok(cubin);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |e| GpuError::Io { path, source: e }
    };
    std::fs::create_dir_all(&entry).map_err(io(&entry))?;
    let source = entry.join("reference.cu");
    std::fs::write(&source, SOURCE).map_err(io(&source))?;
    let partial = entry.join(format!("reference.cubin.partial-{}", std::process::id()));
    let flags = CompileFlags {
        arch: arch.to_owned(),
        extra: vec!["-O3".to_owned()],
        ..CompileFlags::default()
    };
    let built = kwb_toolchain::compile_cubin(toolchain, &source, &flags, &partial);
    settle(built, &source, &partial, &cubin)?;
    Ok(cubin)
}

/// Moves nvcc's `partial` output into place as `target` once it succeeded; else
/// removes it and says why, with nvcc's own words when it ran and failed.
fn settle(
    built: kwb_toolchain::Result<()>,
    source: &Path,
    partial: &Path,
    target: &Path,
) -> Result<(), GpuError> {
    if let Err(e) = built {
        let _ = std::fs::remove_file(partial);
        return Err(match e {
            kwb_toolchain::Error::ToolFailed { stderr, .. } => GpuError::Build {
                path: source.to_path_buf(),
                stderr: stderr.0,
            },
            other => GpuError::Toolchain(other),
        });
    }
    std::fs::rename(partial, target).map_err(|e| GpuError::Io {
        path: target.to_path_buf(),
        source: e,
    })
}
