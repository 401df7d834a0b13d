//! A trace of the reproducer itself, so `kwb diagnose` needs no harness and no trace
//! from the user: the reproducer's kernel is instrumented with kwb-instrument (every
//! default probe kind, one CTA), the copy is built with `-DKWB_TRACE` (and no shared
//! memory lease, `KWB_TRACE_LEASE=0`, so a kernel at its shared-memory limit still
//! launches) beside the plain one, and it runs on one rung with `KWB_TRACE_OUT` set,
//! so the worker's exit flush writes the trace.
//!
//! A library kernel (a CUTLASS `device_kernel<GemmKernel>`) has no mainloop in
//! repro.cu: the headers the build includes that hold one (the collective) are
//! instrumented into an overlay folder inside the copy, first on its include path
//! (kwb-instrument's overlay), and the library itself is never edited.
//!
//! Invariant: the plain reproducer's folder is only read; the traced copy and the
//! trace are written where the caller says.

use std::path::{Path, PathBuf};

use kwb_extract::manifest::Manifest;
use kwb_ladder::Rung;

use crate::error::GpuError;
use crate::{Report, RunOptions};

/// What to record.
#[derive(Debug, Clone)]
pub struct TraceRequest {
    /// The kernel to instrument, as the reproducer names it.
    pub kernel: String,
    /// The CTA whose records are kept.
    pub cta: [u32; 3],
    /// Every value each probe looks at, with its coordinates (`--full-tile`).
    pub full_tile: bool,
    /// The rung the traced build runs on.
    pub rung: Rung,
    /// Values the full-tile buffer holds (`KWB_TRACE_TILE_CAPACITY`); `None`: the
    /// runtime's default.
    pub tile_capacity: Option<u64>,
    /// The folder of the traced copy (created).
    pub dir: PathBuf,
    /// The trace file.
    pub out: PathBuf,
}

/// The traced run: the ladder's report of its rung and the trace it wrote.
#[derive(Debug)]
pub struct Recorded {
    pub report: Report,
    pub trace: PathBuf,
    /// The probes kwb-instrument placed, and in which kernels where not the one
    /// requested.
    pub placed: Placed,
}

/// The probes a traced copy holds.
#[derive(Debug, Clone, Default)]
pub struct Placed {
    /// What each reads, and its line in its file.
    pub probes: Vec<(String, usize)>,
    /// The kernels traced in place of the one requested, which holds no mainloop kwb
    /// can probe (the reduction of a split-K GEMM); empty when the kernel itself, or
    /// its library collective, was traced.
    pub instead: Vec<String>,
}

impl Placed {
    /// The probes of `plan`; with `requested`, the kernels they are in, where that is
    /// not the requested kernel.
    fn of(plan: &kwb_instrument::Plan, requested: Option<&str>) -> Placed {
        let mut instead: Vec<String> = Vec::new();
        if let Some(requested) = requested {
            for p in &plan.probes {
                if p.kernel != requested && !instead.contains(&p.kernel) {
                    instead.push(p.kernel.clone());
                }
            }
        }
        Placed {
            probes: plan
                .probes
                .iter()
                .map(|p| (p.what.clone(), p.line))
                .collect(),
            instead,
        }
    }
}

/// Writes the traced copy of the reproducer in `plain` into `request.dir`: its files,
/// `repro.cu` instrumented, `-DKWB_TRACE` in its manifest's build. The probes placed:
/// (what each reads, its line in repro.cu).
pub fn prepare(plain: &Path, request: &TraceRequest) -> Result<Placed, GpuError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| GpuError::Io { path, source }
    };
    std::fs::create_dir_all(&request.dir).map_err(io(&request.dir))?;
    // The reproducer's files (repro.cu, kwb.toml, build.sh, the local headers).
    for entry in std::fs::read_dir(plain).map_err(io(plain))? {
        let entry = entry.map_err(io(plain))?;
        if entry.file_type().map_err(io(plain))?.is_file() {
            let to = request.dir.join(entry.file_name());
            std::fs::copy(entry.path(), &to).map_err(io(&to))?;
        }
    }
    let source_path = request.dir.join("repro.cu");
    let source = std::fs::read_to_string(&source_path).map_err(io(&source_path))?;
    let config = kwb_instrument::Config {
        kernel: Some(request.kernel.clone()),
        file_name: "repro.cu".to_owned(),
        cta: Some(request.cta),
        full_tile: request.full_tile,
        ..kwb_instrument::Config::default()
    };
    let manifest_path = request.dir.join("kwb.toml");
    let manifest_text = std::fs::read_to_string(&manifest_path).map_err(io(&manifest_path))?;
    let mut manifest = Manifest::from_toml(&manifest_text)
        .map_err(|e| GpuError::Trace(format!("{}: {e}", manifest_path.display())))?;
    let placed = match kwb_instrument::instrument(&source, &config) {
        Ok((text, plan)) if !plan.probes.is_empty() => {
            std::fs::write(&source_path, text).map_err(io(&source_path))?;
            Placed::of(&plan, None)
        }
        // The kernel's mainloop is in the headers it includes (a library kernel), or,
        // for a kernel of repro.cu with none, in another kernel its launch runs (a
        // split-K GEMM beside its reduction).
        Ok(_) | Err(kwb_instrument::InstrumentError::NothingToProbe { .. }) => {
            match overlay(request, &source, &config, &mut manifest)? {
                Some(placed) => placed,
                None => beside(request, &source, &config, &source_path)?,
            }
        }
        Err(kwb_instrument::InstrumentError::UnknownKernel { .. }) => {
            overlay(request, &source, &config, &mut manifest)?.ok_or_else(|| {
                GpuError::Trace(format!(
                    "kwb-instrument found no kernel `{}` in the reproducer, nor a staged mainloop in a header it includes",
                    request.kernel
                ))
            })?
        }
        Err(e) => {
            return Err(GpuError::Trace(format!(
                "kwb-instrument on the reproducer: {e}"
            )));
        }
    };
    // No shared-memory lease for the records: a kernel whose own shared memory is at
    // the launch's limit (48 KiB without the opt-in) would not launch with it, and a
    // diagnostic run at the ladder's shape does not need its speed.
    let capacity = request
        .tile_capacity
        .map(|n| format!("KWB_TRACE_TILE_CAPACITY={n}"));
    for define in ["KWB_TRACE", "KWB_TRACE_LEASE=0"]
        .map(str::to_owned)
        .into_iter()
        .chain(capacity)
    {
        if !manifest.build.defines.contains(&define) {
            manifest.build.defines.push(define);
        }
    }
    std::fs::write(&manifest_path, manifest.to_toml()).map_err(io(&manifest_path))?;
    Ok(placed)
}

/// The kernels of repro.cu other than `request.kernel` that hold a mainloop kwb can
/// probe, instrumented with `config` in place of the named one. The reproducer runs
/// its launcher, so these run in the same launch sequence: a split-K GEMM whose named
/// kernel is the reduction (no MMA of its own) is traced at the GEMM kernel that makes
/// its partials. An error names the kernel when there is none.
fn beside(
    request: &TraceRequest,
    source: &str,
    config: &kwb_instrument::Config,
    source_path: &Path,
) -> Result<Placed, GpuError> {
    let none = || {
        GpuError::Trace(format!(
            "kwb-instrument found no site to probe in `{}` of the reproducer, nor a staged mainloop in a header it includes, nor another kernel with a mainloop that its launcher runs",
            request.kernel
        ))
    };
    let config = kwb_instrument::Config {
        kernel: None,
        ..config.clone()
    };
    match kwb_instrument::instrument(source, &config) {
        Ok((text, plan)) if !plan.probes.is_empty() => {
            std::fs::write(source_path, text).map_err(|source| GpuError::Io {
                path: source_path.to_path_buf(),
                source,
            })?;
            Ok(Placed::of(&plan, Some(&request.kernel)))
        }
        _ => Err(none()),
    }
}

/// The overlay of a library kernel's traced copy: the headers repro.cu includes
/// through the build's include path that hold a staged mainloop, instrumented with
/// `config` into `DIR/overlay`, which goes first on the copy's include path. The
/// copies' content names the build (a define), so a cached build of another overlay
/// is never reused. The probes placed: (what each reads, its line in its header).
fn overlay(
    request: &TraceRequest,
    source: &str,
    config: &kwb_instrument::Config,
    manifest: &mut Manifest,
) -> Result<Option<Placed>, GpuError> {
    let dir = request.dir.join("overlay");
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| GpuError::Io { path, source }
    };
    let roots =
        crate::compile::flags(manifest, &request.dir, &kwb_toolchain::Env::from_process()).includes;
    let config = kwb_instrument::Config {
        kernel: None,
        lenient_gate: true,
        ..config.clone()
    };
    let copies = kwb_instrument::overlay::plan(
        &request.dir.join("repro.cu"),
        source,
        &roots,
        &dir,
        &config,
        0,
    );
    if copies.is_empty() {
        return Ok(None);
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    let mut probes = Vec::new();
    for (written, text) in &copies {
        if let Some(parent) = written.copy.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&written.copy, text).map_err(io(&written.copy))?;
        parts.push(text.as_bytes());
        probes.extend(written.plan.probes.iter().map(|p| (p.what.clone(), p.line)));
    }
    let (runtime, runtime_text) = kwb_instrument::overlay::runtime_header(&dir);
    std::fs::write(&runtime, runtime_text).map_err(io(&runtime))?;
    manifest.build.includes.insert(0, dir.display().to_string());
    manifest.build.defines.push(format!(
        "KWB_OVERLAY={:#x}",
        kwb_toolchain::cache::content_key(&parts)
    ));
    Ok(Some(Placed {
        probes,
        instead: Vec::new(),
    }))
}

/// [`prepare`]s the traced copy, builds and runs it on `request.rung` with `options`
/// (its rungs replaced), and returns the trace the worker's exit flush wrote.
pub fn record(
    plain: &Path,
    request: &TraceRequest,
    options: &RunOptions,
) -> Result<Recorded, GpuError> {
    let placed = prepare(plain, request)?;
    run_prepared(request, placed, options)
}

/// Builds and runs the traced copy [`prepare`] wrote (its probes `placed`) on
/// `request.rung` with `options` (its rungs replaced), and returns the trace the
/// worker's exit flush wrote.
pub fn run_prepared(
    request: &TraceRequest,
    placed: Placed,
    options: &RunOptions,
) -> Result<Recorded, GpuError> {
    // A trace left by an earlier run must not pass for this one's.
    if request.out.exists() {
        std::fs::remove_file(&request.out).map_err(|source| GpuError::Io {
            path: request.out.clone(),
            source,
        })?;
    }
    let mut traced = options.clone();
    traced.rungs = vec![request.rung];
    traced.worker_env.push((
        "KWB_TRACE_OUT".to_owned(),
        request.out.display().to_string(),
    ));
    let report = crate::run(&request.dir, &traced)?;
    // A traced launch that did not run (more shared memory than the device gives, a
    // fault) leaves an empty trace: say why instead.
    if let Some(r) = report
        .rungs
        .iter()
        .find(|r| !matches!(r.status, "pass" | "fail"))
    {
        return Err(GpuError::Trace(format!(
            "the traced build's {} run is {}{}",
            r.rung,
            r.status,
            r.error.as_ref().map_or(String::new(), |e| format!(": {e}"))
        )));
    }
    if !request.out.is_file() {
        return Err(GpuError::Trace(format!(
            "the traced run wrote no trace to {}{}",
            request.out.display(),
            report
                .failed
                .as_ref()
                .map_or(String::new(), |why| format!(" ({why})"))
        )));
    }
    Ok(Recorded {
        report,
        trace: request.out.clone(),
        placed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bundled mma_sync kernel extracted alone, then its traced copy: the plain
    /// folder untouched, the copy instrumented for CTA (0, 0, 0) and built with
    /// `KWB_TRACE`.
    #[test]
    fn the_traced_copy_is_the_reproducer_instrumented_and_built_with_kwb_trace() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let file = root.join("kernels/mma_sync/gemm.cu");
        let source = std::fs::read_to_string(&file).unwrap();
        let request = kwb_extract::Request {
            kernel: Some("gemm_mma_sync".to_owned()),
            file_name: "gemm.cu".to_owned(),
            ..kwb_extract::Request::default()
        };
        let x = kwb_extract::extract(&source, &request).expect("extracts");
        let tmp = tempfile::tempdir().unwrap();
        let plain = tmp.path().join("repro");
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::write(plain.join("repro.cu"), &x.repro).unwrap();
        let build = kwb_extract::manifest::Build {
            std: "c++17".to_owned(),
            arch: "sm_90a".to_owned(),
            defines: Vec::new(),
            includes: Vec::new(),
            other: Vec::new(),
            from: "command line".to_owned(),
        };
        let manifest = Manifest::new(&x, "gemm.cu", build);
        std::fs::write(plain.join("kwb.toml"), manifest.to_toml()).unwrap();
        let request = TraceRequest {
            kernel: x.kernel.name.clone(),
            cta: [0, 0, 0],
            full_tile: false,
            rung: Rung::Ones,
            tile_capacity: None,
            dir: tmp.path().join("traced"),
            out: tmp.path().join("trace.bin"),
        };
        let placed = prepare(&plain, &request).expect("prepares");
        assert!(placed.probes.len() >= 3, "{placed:?}");
        assert!(placed.instead.is_empty(), "the kernel itself is traced");
        let traced = std::fs::read_to_string(request.dir.join("repro.cu")).unwrap();
        assert!(kwb_instrument::is_instrumented(&traced));
        assert!(traced.contains("KWB_TRACE_CTA_X"), "the CTA is pinned");
        let m =
            Manifest::from_toml(&std::fs::read_to_string(request.dir.join("kwb.toml")).unwrap())
                .unwrap();
        assert_eq!(m.build.defines, ["KWB_TRACE", "KWB_TRACE_LEASE=0"]);
        // The plain reproducer is only read.
        assert_eq!(
            std::fs::read_to_string(plain.join("repro.cu")).unwrap(),
            x.repro
        );
        // A kernel with no mainloop, beside one that has it in the same reproducer
        // (a split-K GEMM's reduction): the other kernel is traced, and named.
        let reduce = "__global__ void reduce_partials(float* d, const float* w, int n, int s) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) { float v = 0.f; for (int j = 0; j < s; ++j) v += w[j * n + i]; d[i] = v; }\n}\n";
        std::fs::write(plain.join("repro.cu"), format!("{}\n{reduce}", x.repro)).unwrap();
        let reduction = TraceRequest {
            kernel: "reduce_partials".to_owned(),
            dir: tmp.path().join("traced-beside"),
            ..request.clone()
        };
        let placed = prepare(&plain, &reduction).expect("prepares");
        assert!(placed.instead.contains(&x.kernel.name), "{placed:?}");
        assert!(!placed.instead.iter().any(|k| k == "reduce_partials"));
        assert!(placed.probes.len() >= 3, "{placed:?}");
        std::fs::write(plain.join("repro.cu"), &x.repro).unwrap();
        // A kernel the reproducer lacks is a traced-copy error, not a panic.
        let missing = TraceRequest {
            kernel: "no_such_kernel".to_owned(),
            ..request
        };
        assert!(matches!(prepare(&plain, &missing), Err(GpuError::Trace(_))));
    }
}
