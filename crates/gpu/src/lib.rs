//! Track B's runner (`kwb run DIR`): a kwb-extract reproducer, built once, launched
//! through cudarc on the controlled-input ladder, its output compared with the
//! rung's answer by kwb-ladder.
//!
//! The flow is one way: [`plan`] reads the manifest into what to allocate and pass;
//! [`compile`] builds repro.cu into a shared library under a content hash (a rerun
//! compiles nothing); the rungs' inputs are written to a work folder in the operands'
//! storage layout; [`supervise`] starts the [`worker`] (the only code that touches
//! CUDA, in its own process) and kills it when a launch outlives the timeout (HANG);
//! each finished rung's output is read back and compared.
//!
//! Without a GPU everything up to the launch still runs (plan, build, inputs and
//! answers), and the run ends with [`GpuError::NoDriver`], which says so.

pub mod abi;
pub mod compile;
mod error;
pub mod fault;
pub mod insitu;
pub mod job;
pub mod maps;
pub mod plan;
pub mod supervise;
pub mod traced;
pub mod worker;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kwb_extract::manifest::Manifest;
use kwb_ladder::{Comparison, Rung};
use serde::Serialize;

pub use crate::error::GpuError;
use crate::job::{Job, JobRung};
pub use crate::maps::MapReading;
use crate::plan::{Plan, Request, Role};
use crate::supervise::Outcome;

/// Everything `kwb run` was asked.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub rungs: Vec<Rung>,
    pub request: Request,
    pub timeout: Duration,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub smem: Option<u64>,
    /// The command that starts a worker; the job file is appended.
    pub worker: Vec<String>,
    /// Where built libraries are kept.
    pub cache: PathBuf,
    /// Where the answers are computed.
    pub reference: ReferenceOn,
    /// Real operands the user dumped: the last rung, `dump`.
    pub dump: Option<Dump>,
    /// Told each long step as it starts (a terminal's progress line).
    pub progress: Progress,
    /// Variables set in the worker's environment (a traced build's `KWB_TRACE_OUT`).
    pub worker_env: Vec<(String, String)>,
}

/// Where `run` says which long step it is in: building, preparing, on the GPU,
/// comparing. The default says nothing.
#[derive(Clone, Default)]
pub struct Progress(Option<std::sync::Arc<StepFn>>);

/// What a [`Progress`] calls with each step's description.
type StepFn = dyn Fn(&str) + Send + Sync;

impl Progress {
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> Progress {
        Progress(Some(std::sync::Arc::new(f)))
    }

    pub fn step(&self, what: &str) {
        if let Some(f) = &self.0 {
            f(what);
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(on)"
        } else {
            "Progress(off)"
        })
    }
}

/// The user's own operands, logical and row-major (A: M x K, B: K x N, C: M x N), as
/// read from their dumps; rounded to the kernel's input type before use.
#[derive(Debug, Clone, PartialEq)]
pub struct Dump {
    /// Where they came from, for the report.
    pub source: String,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
    pub c: Option<Vec<f32>>,
}

/// Where the reference GEMM runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceOn {
    /// f64 on the host: independent of every GPU, slow for large shapes.
    Host,
    /// kwb's own f64 GEMM kernel (reference.cu), built apart from the kernel under test.
    Gpu,
    /// The GPU above 2^27 multiply-adds per rung, else the host.
    Auto,
}

/// One rung's result.
#[derive(Debug, Clone, Serialize)]
pub struct RungReport {
    pub rung: String,
    /// pass, fail, hang, error or not-run.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// What went wrong when the kernel did not produce an output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_ms: Option<f32>,
    /// Wall milliseconds of the GPU reference on this rung.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
    /// The first mismatch's output and answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<Mismatch>,
    /// Outputs the kernel never wrote, when there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unwritten: Option<Unwritten>,
    /// cuda-gdb's backtraces of a hung launch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<String>,
    /// The shape of the error over the output, on a rung that failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<kwb_diagnose::Classified>,
    /// |output - answer| over the output, pooled for a heat map, on a rung that
    /// failed (not in the JSON: `kwb diagnose --report` draws it).
    #[serde(skip)]
    pub heat: Option<kwb_diagnose::Heat>,
}

/// One output against its answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mismatch {
    pub m: usize,
    pub n: usize,
    pub got: f32,
    pub want: f64,
}

/// Outputs that still hold the runner's fill after the kernel finished.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unwritten {
    pub count: usize,
    /// The first in row-major order, as (m, n).
    pub first: (usize, usize),
    /// sum |output| / sum |answer| with unwritten outputs counted as 0: what a harness
    /// that zero-fills its output would read as the ratio.
    pub ratio_as_zero: f64,
}

impl Unwritten {
    fn of(out: &Output, answer: &[f64], n: usize) -> Unwritten {
        let (mut got, mut want) = (0.0f64, 0.0f64);
        for ((v, u), a) in out.values.iter().zip(&out.unwritten).zip(answer) {
            if *u {
                want += a.abs();
            } else if v.is_finite() && a.is_finite() {
                got += f64::from(v.abs());
                want += a.abs();
            }
        }
        let first = out.unwritten.iter().position(|u| *u).unwrap_or(0);
        Unwritten {
            count: out.unwritten.iter().filter(|u| **u).count(),
            first: (first / n.max(1), first % n.max(1)),
            ratio_as_zero: if want > 0.0 { got / want } else { 1.0 },
        }
    }
}

/// A launch configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub smem: u64,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub instantiation: String,
    pub source: String,
    pub library: PathBuf,
    pub cached: bool,
    pub compile_seconds: f64,
    pub flags: Vec<String>,
    pub device: Option<String>,
    pub plan: Plan,
    pub rungs: Vec<RungReport>,
    /// A failure before any rung ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// The TMA maps the kernel received on the first rung, each held to the canonical
    /// map of the buffer it covers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub maps: Vec<MapReading>,
    /// The operand buffers as the worker allocated them: (role name, device address,
    /// bytes); a fault's address is read against them.
    #[serde(skip)]
    pub buffers: Vec<(String, u64, u64)>,
    pub timing: Timing,
}

/// Wall seconds of the run's phases after the build.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Timing {
    /// Inputs (and host answers) of every rung.
    pub prepare_s: f64,
    /// The worker, from its start to its exit: context, uploads, references, launches.
    pub worker_s: f64,
    /// Reading back and comparing every rung.
    pub compare_s: f64,
}

impl Report {
    pub fn hung(&self) -> bool {
        self.rungs.iter().any(|r| r.status == "hang")
    }
    pub fn passed(&self) -> bool {
        self.failed.is_none() && self.rungs.iter().all(|r| r.status == "pass")
    }
    /// A launch the driver refused (configuration, resources), as opposed to a kernel
    /// that ran and computed or faulted.
    pub fn launch_refused(&self) -> bool {
        // A kernel that faults is a failed rung ("fail"); "error" is every step before.
        self.failed.is_some() || self.rungs.iter().any(|r| r.status == "error")
    }
}

/// Reads `dir/kwb.toml`.
pub fn manifest(dir: &Path) -> Result<Manifest, GpuError> {
    let path = dir.join("kwb.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| GpuError::NotAReproducer {
        path: dir.to_path_buf(),
        why: format!("kwb.toml: {e}"),
    })?;
    if !dir.join("repro.cu").is_file() {
        return Err(GpuError::NotAReproducer {
            path: dir.to_path_buf(),
            why: "it has no repro.cu".to_owned(),
        });
    }
    Manifest::from_toml(&text).map_err(|e| GpuError::NotAReproducer {
        path: dir.to_path_buf(),
        why: e.to_string(),
    })
}

/// The storage bytes of operand `role` from a rung's logical operands (A: M x K,
/// B: K x N, C: M x N, row-major), laid out as the plan says. What the problem does
/// not hold (padding, and all of C when beta is 0, since C must not be read then) is
/// the all-ones NaN pattern, so a kernel that reads it computes NaN.
pub fn storage(plan: &Plan, role: Role, ops: &kwb_ladder::Operands) -> Vec<u8> {
    let (a, b, c) = (&ops.a, &ops.b, &ops.c);
    let o = plan.operand(role);
    let dtype = o.dtype;
    if role == Role::C && plan.beta == 0.0 {
        return vec![0xff; o.lines() * o.ld * dtype.bytes()];
    }
    let mut values = vec![0.0f32; o.lines() * o.ld];
    let mut held = vec![false; o.lines() * o.ld];
    let (m, n, k) = (plan.m, plan.n, plan.k);
    let mut put = |at: usize, v: f32| {
        values[at] = v;
        held[at] = true;
    };
    match role {
        Role::A => (0..m).for_each(|i| (0..k).for_each(|p| put(o.at(i, p), a[i * k + p]))),
        Role::B => (0..n).for_each(|j| (0..k).for_each(|p| put(o.at(j, p), b[p * n + j]))),
        Role::C => (0..m).for_each(|i| (0..n).for_each(|j| put(o.at(i, j), c[i * n + j]))),
        Role::Bias => (0..n).for_each(|j| put(j, ops.bias[j])),
        Role::D => held.fill(true),
    }
    let mut bytes = dtype.encode(&values);
    let size = dtype.bytes();
    for (i, _) in held.iter().enumerate().filter(|(_, h)| !**h) {
        bytes[i * size..(i + 1) * size].fill(0xff);
    }
    bytes
}

/// The output read back: the M x N logical values, and which of them still hold the
/// runner's fill (the all-ones NaN pattern no arithmetic produces): never written.
pub struct Output {
    pub values: Vec<f32>,
    pub unwritten: Vec<bool>,
}

/// The output from the output buffer's bytes.
pub fn output(plan: &Plan, bytes: &[u8]) -> Output {
    let o = plan.operand(plan.output);
    let dtype = o.dtype;
    let size = dtype.bytes();
    let all = dtype.decode(bytes);
    let mut out = Output {
        values: Vec::with_capacity(plan.m * plan.n),
        unwritten: Vec::with_capacity(plan.m * plan.n),
    };
    for i in 0..plan.m {
        for j in 0..plan.n {
            let at = o.at(i, j);
            out.values.push(all.get(at).copied().unwrap_or(f32::NAN));
            out.unwritten.push(
                bytes
                    .get(at * size..(at + 1) * size)
                    .is_none_or(|b| b.iter().all(|x| *x == 0xff)),
            );
        }
    }
    out
}

/// Runs the reproducer in `dir`.
pub fn run(dir: &Path, options: &RunOptions) -> Result<Report, GpuError> {
    let manifest = manifest(dir)?;
    let plan = Plan::new(&manifest, &options.request)?;
    if manifest.host.through.is_none()
        && manifest.host.config.is_none()
        && (options.grid.is_none() || options.block.is_none())
    {
        return Err(GpuError::NoConfig {
            why: if manifest.host.unavailable.is_empty() {
                "the reproducer has no kwb_config".to_owned()
            } else {
                manifest.host.unavailable.join("; ")
            },
        });
    }
    let problem = plan.problem()?;
    let ladder: Vec<Rung> = options
        .rungs
        .iter()
        .copied()
        .chain(options.dump.as_ref().map(|_| Rung::Dump))
        .collect();
    if let Some(d) = &options.dump {
        let (m, n, k) = (plan.m, plan.n, plan.k);
        let c_ok = d.c.as_ref().is_none_or(|c| c.len() == m * n);
        if d.a.len() != m * k || d.b.len() != k * n || !c_ok {
            return Err(GpuError::DumpShape {
                source_: d.source.clone(),
                m,
                n,
                k,
            });
        }
    }
    // Build first: it needs no GPU.
    options
        .progress
        .step("building the reproducer (nvcc, unless cached)");
    let env = kwb_toolchain::Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env)?;
    let flags = compile::flags(&manifest, dir, &env);
    let version = kwb_toolchain::nvcc_version(&toolchain)?;
    let built = compile::build(&toolchain, &version, dir, &flags, &options.cache)?;
    let reference = match reference_function(&plan, options.reference) {
        Some(function) => Some(job::Reference {
            cubin: compile::build_reference(
                &toolchain,
                &version,
                &manifest.build.arch,
                &options.cache,
            )?,
            function,
        }),
        None => None,
    };
    // Inputs and answers.
    let work = tempfile::Builder::new()
        .prefix("kwb-run-")
        .tempdir()
        .map_err(|e| GpuError::Io {
            path: std::env::temp_dir(),
            source: e,
        })?;
    // Each rung's inputs (and host answer) are independent: prepared in parallel.
    options
        .progress
        .step(&format!("preparing the inputs of {} rungs", ladder.len()));
    let prepare_started = Instant::now();
    let prepared: Vec<Result<(JobRung, Vec<f64>), GpuError>> = std::thread::scope(|s| {
        let handles: Vec<_> = ladder
            .iter()
            .enumerate()
            .map(|(i, rung)| {
                let (plan, problem, work, host) =
                    (&plan, &problem, work.path(), reference.is_none());
                let dump = options.dump.as_ref();
                s.spawn(move || prepare(i, *rung, dump, plan, problem, work, host))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(GpuError::Worker("preparing a rung panicked".to_owned()))
                })
            })
            .collect()
    });
    let mut rungs = Vec::new();
    let mut answers = Vec::new();
    for p in prepared {
        let (rung, answer) = p?;
        rungs.push(rung);
        answers.push(answer);
    }
    let prepare_seconds = prepare_started.elapsed().as_secs_f64();
    if let Err(why) = worker::driver_present() {
        return Err(GpuError::NoDriver {
            why,
            library: format!(
                "{} ({})",
                built.library.display(),
                if built.cached {
                    "cached".to_owned()
                } else {
                    format!("nvcc {:.1} s", built.seconds)
                }
            ),
            rungs: ladder
                .iter()
                .map(|r| r.name())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let job = Job {
        library: built.library.clone(),
        entry: manifest
            .host
            .through
            .as_ref()
            .map_or_else(|| manifest.kernel.entry.clone(), |t| t.entry.clone()),
        through: manifest.host.through.is_some(),
        config: manifest.host.config.clone(),
        grid: options.grid,
        block: options.block,
        smem: options.smem,
        plan: plan.clone(),
        rungs,
        reference,
    };
    let job_path = work.path().join("job.json");
    write(
        &job_path,
        &serde_json::to_vec_pretty(&job).map_err(|e| GpuError::Worker(e.to_string()))?,
    )?;
    let Some((program, prefix)) = options.worker.split_first() else {
        return Err(GpuError::Worker("no worker command".to_owned()));
    };
    let mut command = Command::new(program);
    command.args(prefix);
    command.envs(options.worker_env.iter().map(|(k, v)| (k, v)));
    options.progress.step(&format!(
        "running {} rungs on the GPU (timeout {:.0} s each)",
        ladder.len(),
        options.timeout.as_secs_f64()
    ));
    let worker_started = Instant::now();
    let supervised = supervise::supervise(command, &job_path, job.rungs.len(), options.timeout)
        .map_err(|e| GpuError::Worker(format!("{program}: {e}")))?;
    let worker_seconds = worker_started.elapsed().as_secs_f64();
    options
        .progress
        .step("comparing the outputs with their answers");
    let compare_started = Instant::now();
    let config_source = config_source(&manifest);
    // Each finished rung is read back and compared on its own thread.
    let judged: Vec<Result<RungReport, GpuError>> = std::thread::scope(|s| {
        let handles: Vec<_> = ladder
            .iter()
            .zip(&supervised.rungs)
            .zip(&job.rungs)
            .zip(&answers)
            .map(|(((rung, (launch, outcome)), files), host_answer)| {
                let context = Judging {
                    plan: &plan,
                    problem: &problem,
                    config_source: &config_source,
                    timeout: options.timeout,
                };
                s.spawn(move || context.judge(*rung, *launch, outcome, files, host_answer))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(GpuError::Worker("comparing a rung panicked".to_owned()))
                })
            })
            .collect()
    });
    let reports = judged.into_iter().collect::<Result<Vec<_>, _>>()?;
    let timing = Timing {
        prepare_s: prepare_seconds,
        worker_s: worker_seconds,
        compare_s: compare_started.elapsed().as_secs_f64(),
    };
    Ok(Report {
        instantiation: manifest.kernel.instantiation.clone(),
        source: manifest.source.file.clone(),
        library: built.library,
        cached: built.cached,
        compile_seconds: built.seconds,
        flags: built.flags,
        device: supervised.device,
        maps: maps::readings(&plan, &supervised.buffers, &supervised.maps),
        buffers: supervised.buffers.clone(),
        plan,
        rungs: reports,
        failed: supervised.failed.map(|(stage, message)| {
            // Through the launcher, the launcher's own code ran with the choices the
            // caller's call made: say which, and how to make others.
            let choices = manifest.host.through.as_ref().map(|t| {
                let chosen: Vec<String> = t
                    .bindings
                    .iter()
                    .filter(|b| matches!(b.role.as_str(), "trans-a" | "trans-b" | "as-called"))
                    .map(|b| format!("{} = {}", b.param, b.value))
                    .collect();
                if chosen.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (the launcher {} ran with {}, from {}; another choice: --bind NAME=VALUE to kwb-extract)",
                        t.path.first().map_or("", String::as_str),
                        chosen.join(", "),
                        t.bindings
                            .iter()
                            .find(|b| b.role != "stream" && b.from != "name and type (a guess)")
                            .map_or("its parameters", |b| b.from.as_str())
                    )
                }
            });
            format!("{stage}: {message}{}", choices.unwrap_or_default())
        }),
        timing,
    })
}

/// What judging a rung needs besides its own files.
pub(crate) struct Judging<'a> {
    pub(crate) plan: &'a Plan,
    pub(crate) problem: &'a kwb_ladder::Problem,
    pub(crate) config_source: &'a str,
    pub(crate) timeout: Duration,
}

impl Judging<'_> {
    /// The report of one rung from how it ended.
    pub(crate) fn judge(
        &self,
        rung: Rung,
        launch: Option<supervise::Config>,
        outcome: &Outcome,
        files: &JobRung,
        host_answer: &[f64],
    ) -> Result<RungReport, GpuError> {
        let plan = self.plan;
        let mut report = RungReport {
            rung: rung.name(),
            status: "not-run",
            comparison: None,
            error: None,
            kernel_ms: None,
            reference_ms: None,
            launch: launch.map(|(grid, block, smem)| Launch { grid, block, smem }),
            first: None,
            unwritten: None,
            backtrace: None,
            pattern: None,
            heat: None,
        };
        match outcome {
            Outcome::Done { ms, reference_ms } => {
                report.reference_ms = *reference_ms;
                let bytes = std::fs::read(&files.output).map_err(|e| GpuError::Io {
                    path: files.output.clone(),
                    source: e,
                })?;
                let out = output(plan, &bytes);
                let answer: Vec<f64> = match &files.answer {
                    Some(file) => {
                        let raw = std::fs::read(file).map_err(|e| GpuError::Io {
                            path: file.clone(),
                            source: e,
                        })?;
                        let mut answer: Vec<f64> = raw
                            .chunks_exact(8)
                            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                            .collect();
                        // kwb's GPU reference has no bias term: it is added here, from
                        // the very bytes the kernel was given.
                        if let Some((_, file)) = files.inputs.iter().find(|(r, _)| *r == Role::Bias)
                        {
                            let bytes = std::fs::read(file).map_err(|e| GpuError::Io {
                                path: file.clone(),
                                source: e,
                            })?;
                            let bias = plan.operand(Role::Bias).dtype.decode(&bytes);
                            for (i, v) in answer.iter_mut().enumerate() {
                                *v += f64::from(bias[i % plan.n]);
                            }
                        }
                        // Nor an epilogue's activation: applied after the bias.
                        for v in answer.iter_mut() {
                            *v = self.problem.activation.apply(*v);
                        }
                        answer
                    }
                    None => host_answer.to_vec(),
                };
                let c = kwb_ladder::compare(rung, self.problem, &answer, &out.values, plan.tile)
                    .map_err(GpuError::Ladder)?;
                report.first = c.first_mismatch.map(|(m, n)| Mismatch {
                    m,
                    n,
                    got: out.values[m * plan.n + n],
                    want: answer[m * plan.n + n],
                });
                if out.unwritten.iter().any(|u| *u) {
                    report.unwritten = Some(Unwritten::of(&out, &answer, plan.n));
                }
                if !c.pass {
                    let grid = kwb_diagnose::ErrorGrid {
                        m: plan.m,
                        n: plan.n,
                        k: self.problem.k,
                        output: &out.values,
                        answer: &answer,
                        tile: plan.tile,
                        tolerance: c.tolerance,
                        rounding: 2f64.powi(-self.problem.output.precision()),
                    };
                    let mut pattern = kwb_diagnose::classify(&grid);
                    if !plan.tile_known {
                        pattern.tiles = pattern.tiles.with_tile_guessed();
                    }
                    report.pattern = Some(pattern);
                    report.heat = Some(kwb_diagnose::Heat::of(&grid));
                }
                report.status = if c.pass { "pass" } else { "fail" };
                report.comparison = Some(c);
                report.kernel_ms = Some(*ms);
            }
            Outcome::Failed { stage, message } => {
                report.status = if stage == "kernel" { "fail" } else { "error" };
                let hint = match stage.as_str() {
                    "launch" | "config" => {
                        format!(" (the configuration came from {})", self.config_source)
                    }
                    _ => String::new(),
                };
                report.error = Some(format!("{stage}: {message}{hint}"));
            }
            Outcome::Hang { seconds, backtrace } => {
                report.status = "hang";
                report.error = Some(format!(
                    "the kernel did not finish within {seconds:.1} s (timeout {:.1} s); the worker was killed",
                    self.timeout.as_secs_f64()
                ));
                report.backtrace = backtrace.clone();
            }
            Outcome::NotRun => {}
        }
        Ok(report)
    }
}

/// One rung's input files in the work folder, and its answer: the closed form where
/// the rung has one, else the host reference when `host` (else the GPU's, later).
pub(crate) fn prepare(
    i: usize,
    rung: Rung,
    dump: Option<&Dump>,
    plan: &Plan,
    problem: &kwb_ladder::Problem,
    work: &Path,
    host: bool,
) -> Result<(JobRung, Vec<f64>), GpuError> {
    let ops = match (rung, dump) {
        (Rung::Dump, Some(d)) => {
            // The reference must see what the kernel sees: the dtype-rounded values.
            let round = |v: &[f32]| v.iter().map(|x| problem.input.round(*x)).collect();
            kwb_ladder::Operands {
                a: round(&d.a),
                b: round(&d.b),
                c: d.c.clone().unwrap_or_else(|| vec![0.0; plan.m * plan.n]),
                // A dump carries no bias: a kernel with one gets zeros.
                bias: vec![0.0; plan.n],
            }
        }
        _ => rung.operands(problem).map_err(GpuError::Ladder)?,
    };
    let closed = rung.answer(problem);
    let gpu_answer = closed.is_none() && !host;
    // The operands' files are written on threads of their own, the host answer here.
    let (inputs, answer) = std::thread::scope(|s| {
        let writers: Vec<_> = plan
            .operands
            .iter()
            // C with beta = 0 is not read: the worker fills it on the device.
            .filter(|o| {
                matches!(o.role, Role::A | Role::B | Role::Bias)
                    || (o.role == Role::C && plan.beta != 0.0)
            })
            .map(|o| {
                let (file, ops) = (work.join(format!("rung{i}.{}.bin", o.role.name())), &ops);
                s.spawn(move || write(&file, &storage(plan, o.role, ops)).map(|()| (o.role, file)))
            })
            .collect();
        // A closed form needs no reference; otherwise the host's, or the GPU's later.
        let answer = match (closed, host) {
            (Some(a), _) => a,
            (None, true) => problem.reference(&ops),
            (None, false) => Vec::new(),
        };
        let inputs = writers
            .into_iter()
            .map(|w| {
                w.join().unwrap_or_else(|_| {
                    Err(GpuError::Worker("writing an input panicked".to_owned()))
                })
            })
            .collect::<Result<Vec<_>, _>>();
        (inputs, answer)
    });
    let inputs = inputs?;
    let mut fill = vec![plan.output];
    if plan.beta == 0.0 && plan.output != Role::C {
        fill.push(Role::C);
    }
    let job = JobRung {
        name: rung.name(),
        inputs,
        fill,
        output: work.join(format!("rung{i}.out.bin")),
        answer: gpu_answer.then(|| work.join(format!("rung{i}.answer.bin"))),
    };
    Ok((job, answer))
}

/// The reference kernel for the plan's element types, when the answers are to be
/// computed on the GPU.
fn reference_function(plan: &Plan, on: ReferenceOn) -> Option<String> {
    let macs = plan.m as u128 * plan.n as u128 * plan.k as u128;
    let gpu = match on {
        ReferenceOn::Host => false,
        ReferenceOn::Gpu => true,
        ReferenceOn::Auto => macs > 1 << 27,
    };
    let (a, b, c) = (
        plan.operand(Role::A).dtype,
        plan.operand(Role::B).dtype,
        plan.operand(Role::C).dtype,
    );
    // reference.cu has A = B of one type, and C of that type or f32.
    let c = match c {
        c if c == a => a,
        kwb_ladder::Dtype::F32 => c,
        _ => return None,
    };
    (gpu && a == b).then(|| format!("kwb_reference_{}_{}", a.name(), c.name()))
}

/// Where the launch configuration came from, for a refused launch.
fn config_source(manifest: &Manifest) -> String {
    if let Some(p) = &manifest.host.params {
        return format!(
            "kwb_config: the adapter's grid, block and shared memory for the launcher's Arguments at {}:{} ({})",
            manifest.source.file, p.line, p.adapter
        );
    }
    let lines: Vec<String> = manifest
        .launch
        .iter()
        .flat_map(|l| &l.config)
        .filter(|c| c.role != "stream")
        .map(|c| match &c.declared {
            Some(d) => format!("{} = `{}` (`{d}`)", c.role, c.written),
            None => format!("{} = `{}`", c.role, c.written),
        })
        .collect();
    format!(
        "kwb_config, the launcher's code at {}:{}: {}",
        manifest.source.file,
        manifest.source.launch_line.unwrap_or(0),
        lines.join(", ")
    )
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), GpuError> {
    std::fs::write(path, bytes).map_err(|e| GpuError::Io {
        path: path.to_path_buf(),
        source: e,
    })
}

#[cfg(test)]
mod tests;
