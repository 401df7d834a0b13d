//! `kwb diagnose --kernel K -- CMD ARGS…`: the ladder inside the user's own process,
//! for a kernel that cannot be taken out (its launcher takes `torch::Tensor`s, lives in
//! a PyTorch extension or a JIT library, and the failing case is a test).
//!
//! The command runs with kwb-nvcc as its CUDA compiler (`PYTORCH_NVCC`, `nvcc` first
//! on `PATH`, `CMAKE_CUDA_COMPILER_LAUNCHER`; a JIT's own cache moved aside so it
//! builds again), which rewrites the kernel's launch statements
//! (`kwb-instrument --insitu`). At the launch chosen, the program writes the launch's
//! arguments and waits; here they are paired with the kernel's parameters (their roles
//! from the source, as kwb-extract reads them), each rung's inputs are written and the
//! program runs the rungs, puts its buffers back, checks them and goes on
//! (kwb-runtime's `kwb_insitu.cuh`, kwb-gpu's `insitu`). The rung outputs are then
//! compared and judged as `kwb run`'s are. Traced, the program also records the ones
//! rung's launch (CTA (0, 0, 0)) and runs one more rung for the full trace (every value
//! each probe looks at, on wide-int, CTA (1, 0, 0) where the grid has one), judged as
//! the reproducer's traces are ([`crate::record`]).
//!
//! Invariants: the user's files are only read (the rewritten copies are kwb-nvcc's,
//! in its cache); what kwb writes goes under the job's `work` folder; a program that
//! never launches the kernel, a launch kwb cannot pair, a session the program refused
//! or could not finish is said in the diagnosis or as an error, never taken as a rung's
//! evidence; a rung that outlives its timeout ends the program (its process group).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kwb_diagnose::{
    Diagnosis, Evidence, StructuredRun, combine_traces, judge_ladder, judge_ones, judge_structured,
    reconcile, with_descriptors,
};
use kwb_gpu::insitu::{self, Ended, Launch, Served};
use kwb_gpu::{GpuError, Progress, Report, Timing};
use kwb_ladder::Rung;

use crate::{checks, epilogue_inputs, evidence};

/// One run of the user's command.
pub struct InSitu<'a> {
    /// The kernel's name, as the source defines it.
    pub kernel: &'a str,
    /// The program and its arguments.
    pub command: &'a [String],
    /// Where the protocol's files, the rung inputs and outputs and the command's log go.
    pub work: &'a Path,
    pub rungs: &'a [Rung],
    pub request: insitu::Request,
    /// Which launch of the kernel (from 1).
    pub launch: usize,
    /// How long one rung may take before it is a hang (and the program is ended).
    pub rung_timeout: Duration,
    /// How long the program may take in all, its builds included.
    pub timeout: Duration,
    /// kwb-nvcc, and the real nvcc it hands compiles to.
    pub kwb_nvcc: PathBuf,
    pub nvcc: PathBuf,
    /// Build the kernel's unit traced too (one CTA, (0, 0, 0)) and trace the ones
    /// rung's launch.
    pub trace: bool,
    pub progress: Progress,
}

/// The diagnosis, the ladder's report, and how the program's session ended.
#[derive(Debug)]
pub struct InSituOutcome {
    pub diagnosis: Diagnosis,
    pub report: Report,
    pub ended: Ended,
    /// The command's exit status (None: ended by kwb, or by a signal).
    pub status: Option<i32>,
    /// Its output, kept in the work folder.
    pub log: PathBuf,
}

fn io(path: &Path, source: std::io::Error) -> GpuError {
    GpuError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The last `lines` lines of the command's log, for a message.
fn tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Starts the command with kwb-nvcc as its CUDA compiler and the protocol's
/// environment, in a process group of its own.
fn start(job: &InSitu<'_>, log: &Path) -> Result<Child, GpuError> {
    let shim = job.work.join("bin");
    std::fs::create_dir_all(&shim).map_err(|e| io(&shim, e))?;
    let link = shim.join("nvcc");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&job.kwb_nvcc, &link).map_err(|e| io(&link, e))?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![shim.clone()];
    paths.extend(std::env::split_paths(&path));
    let joined = std::env::join_paths(paths).map_err(|e| GpuError::Worker(e.to_string()))?;
    let out = std::fs::File::create(log).map_err(|e| io(log, e))?;
    let err = out.try_clone().map_err(|e| io(log, e))?;
    let (program, args) = job
        .command
        .split_first()
        .ok_or_else(|| GpuError::Worker("no command after `--`".to_owned()))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .env("PATH", joined)
        .env("KWB_INSITU_DIR", job.work)
        .env(
            "KWB_INSITU_KERNEL",
            job.kernel.rsplit("::").next().unwrap_or(job.kernel),
        )
        .env("KWB_INSITU_LAUNCH", job.launch.to_string())
        .env("KWB_NVCC_REAL", &job.nvcc)
        .env("PYTORCH_NVCC", &job.kwb_nvcc)
        .env("CMAKE_CUDA_COMPILER_LAUNCHER", &job.kwb_nvcc)
        // A JIT's cached build of the unrewritten source would be loaded as it is.
        .env("TORCH_EXTENSIONS_DIR", job.work.join("torch_extensions"))
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    if job.trace {
        command.env(
            "KWB_TRACE",
            format!(
                "kernel={};cta=0,0,0;full-tile=1",
                job.kernel.rsplit("::").next().unwrap_or(job.kernel)
            ),
        );
    } else {
        command.env_remove("KWB_TRACE");
    }
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    command
        .spawn()
        .map_err(|e| GpuError::Worker(format!("cannot start `{program}`: {e}")))
}

/// Ends the program's whole process group.
fn end(child: &mut Child) {
    let group = child.id();
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// The plan of a launch: the kernel's parameters read from the file the launch names.
fn plan_of(
    launch: &Launch,
    request: &insitu::Request,
) -> Result<(kwb_gpu::plan::Plan, insitu::Buffers), String> {
    let source = std::fs::read_to_string(&launch.file).map_err(|e| {
        format!(
            "the launch is at {}, which kwb cannot read: {e}",
            launch.file
        )
    })?;
    let defs = kwb_extract::kernel_definitions(&source, &launch.kernel);
    let def = match defs.as_slice() {
        [one] => one,
        [] => {
            return Err(format!(
                "{} launches `{}` but defines no __global__ function of that name",
                launch.file, launch.kernel
            ));
        }
        _ => defs
            .iter()
            .find(|d| d.params.len() == launch.args.len())
            .ok_or_else(|| {
                format!(
                    "{} defines `{}` {} times, none with the launch's {} parameters",
                    launch.file,
                    launch.kernel,
                    defs.len(),
                    launch.args.len()
                )
            })?,
    };
    insitu::plan(&def.params, launch, request).map_err(|e| e.to_string())
}

/// Runs the command, serves the launch, and judges the rungs it ran.
pub fn in_situ(job: InSitu<'_>) -> Result<InSituOutcome, GpuError> {
    std::fs::create_dir_all(job.work).map_err(|e| io(job.work, e))?;
    for name in [
        insitu::LAUNCH_FILE,
        insitu::PLAN_FILE,
        insitu::RUNGS_FILE,
        insitu::DONE_FILE,
    ] {
        let _ = std::fs::remove_file(job.work.join(name));
    }
    let log = job.work.join("command.log");
    job.progress.step(&format!(
        "running `{}` with kwb-nvcc as its CUDA compiler, until it launches `{}`",
        job.command.join(" "),
        job.kernel
    ));
    let started = Instant::now();
    let mut child = start(&job, &log)?;
    let mut served: Option<(Launch, kwb_gpu::plan::Plan, insitu::Buffers, Served)> = None;
    let mut refused: Option<String> = None;
    let mut last_progress = Instant::now();
    let mut rungs_seen = 0;
    let mut hung_after = None;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| io(&log, e))? {
            break status.code();
        }
        let launch_file = job.work.join(insitu::LAUNCH_FILE);
        if served.is_none() && refused.is_none() && launch_file.is_file() {
            let text = std::fs::read_to_string(&launch_file).map_err(|e| io(&launch_file, e))?;
            let launch = Launch::parse(&text)?;
            match plan_of(&launch, &job.request) {
                Ok((plan, buffers)) => {
                    job.progress.step(&format!(
                        "running {} rungs at the launch at {}:{} (M {}, N {}, K {})",
                        job.rungs.len(),
                        launch.file,
                        launch.line,
                        plan.m,
                        plan.n,
                        plan.k
                    ));
                    let (rungs, traced) = passes(&job, &launch);
                    let s = insitu::serve(job.work, &plan, &buffers, &rungs, &traced)?;
                    served = Some((launch, plan, buffers, s));
                }
                Err(why) => {
                    // The program is told to go on with its own launch.
                    let plan = job.work.join(insitu::PLAN_FILE);
                    std::fs::write(&plan, format!("skip\t{why}\nend\n"))
                        .map_err(|e| io(&plan, e))?;
                    refused = Some(why);
                }
            }
            last_progress = Instant::now();
        }
        if served.is_some() && !job.work.join(insitu::DONE_FILE).is_file() {
            let seen = std::fs::read_to_string(job.work.join(insitu::RUNGS_FILE))
                .map_or(0, |t| t.lines().count());
            if seen != rungs_seen {
                rungs_seen = seen;
                last_progress = Instant::now();
            } else if last_progress.elapsed() > job.rung_timeout {
                hung_after = Some(last_progress.elapsed().as_secs_f64());
                end(&mut child);
                break None;
            }
        }
        if started.elapsed() > job.timeout {
            end(&mut child);
            return Err(GpuError::Worker(format!(
                "`{}` ran past {:.0} s{}; its output is in {}",
                job.command.join(" "),
                job.timeout.as_secs_f64(),
                if served.is_none() {
                    format!(" without launching `{}`", job.kernel)
                } else {
                    String::new()
                },
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let worker_s = started.elapsed().as_secs_f64();
    if let Some(why) = refused {
        return Err(GpuError::Worker(format!(
            "the program launched `{}`, but kwb cannot run that launch on its inputs: {why}",
            job.kernel
        )));
    }
    let Some((launch, plan, buffers, served)) = served else {
        // The program reached the launch, but its session ended before launch.txt
        // (the device already had an error: no GPU, or an earlier fault).
        if let Some(why) = std::fs::read_to_string(job.work.join(insitu::DONE_FILE))
            .ok()
            .and_then(|t| Ended::parse(&t).refused)
        {
            return Err(GpuError::Worker(format!(
                "`{}` reached the launch of `{}`, but kwb could not run it there: {why}. Its last lines ({}):\n{}",
                job.command.join(" "),
                job.kernel,
                log.display(),
                tail(&log, 12)
            )));
        }
        return Err(GpuError::Worker(format!(
            "`{}` ended (exit {}) without launching `{}` through kwb: either it never launches it, or the build that launches it did not go through kwb-nvcc (a prebuilt or cached extension; the build's nvcc is found through PYTORCH_NVCC, PATH or CMAKE_CUDA_COMPILER_LAUNCHER). Its last lines ({}):\n{}",
            job.command.join(" "),
            status.map_or("by a signal".to_owned(), |c| c.to_string()),
            job.kernel,
            log.display(),
            tail(&log, 12)
        )));
    };
    let ended = match std::fs::read_to_string(job.work.join(insitu::DONE_FILE)) {
        Ok(text) => Ended::parse(&text),
        Err(_) => Ended::default(),
    };
    if let Some(why) = &ended.refused {
        return Err(GpuError::Worker(format!(
            "the program did not run the rungs: {why}"
        )));
    }
    job.progress
        .step("comparing the outputs with their answers");
    let compare_started = Instant::now();
    let rung_text = std::fs::read_to_string(job.work.join(insitu::RUNGS_FILE)).unwrap_or_default();
    let outcomes = insitu::outcomes(&rung_text, &served);
    let mut rungs = insitu::judge(&plan, &served, &outcomes, hung_after)?;
    // The full pass's rung, where it was added to the ladder's: its output goes with
    // the full trace, not to the ladder.
    let full_rung = full_rung();
    let full_report = (!job.rungs.contains(&full_rung))
        .then(|| rungs.iter().position(|r| r.rung == full_rung.name()))
        .flatten()
        .map(|i| rungs.remove(i));
    let full_problem = plan.problem()?;
    let failed = match (&ended.lost, ended.finished, hung_after) {
        (Some(lost), _, _) => Some(format!("in the program: {lost}")),
        (None, false, Some(s)) => Some(format!(
            "a rung ran past {s:.0} s; the program was ended, and its buffers were not put back"
        )),
        (None, false, None) => Some(format!(
            "the program ended before it finished the rungs (exit {}); see {}",
            status.map_or("by a signal".to_owned(), |c| c.to_string()),
            log.display()
        )),
        _ => None,
    };
    let report = insitu::report(
        &launch,
        plan,
        &buffers,
        rungs,
        failed,
        Timing {
            prepare_s: served.prepare_s,
            worker_s,
            compare_s: compare_started.elapsed().as_secs_f64(),
        },
    );
    let traces = if job.trace {
        let full = read_trace(&job.work.join(FULL_TRACE), "the full pass's").and_then(|trace| {
            let ops = crate::record::operands_of(&full_problem)
                .map_err(|e| Some(format!("the full trace: {}", e.why)))?;
            Ok(Full {
                trace,
                a: ops.a,
                b: ops.b,
                cta: full_cta(&launch),
                output: full_report.as_ref().and_then(evidence::traced_output),
            })
        });
        Traces {
            ones: read_trace(&job.work.join(ONES_TRACE), "the ones rung's"),
            full,
        }
    } else {
        Traces {
            ones: Err(None),
            full: Err(None),
        }
    };
    let diagnosis = judge(&report, &launch, &ended, traces);
    Ok(InSituOutcome {
        diagnosis,
        report,
        ended,
        status,
        log,
    })
}

/// The traces' files in the work folder.
const ONES_TRACE: &str = "ones.trace";
const FULL_TRACE: &str = "full.trace";

/// The rung of the full pass: integers in [-8, 8], as the reproducer's full trace.
fn full_rung() -> Rung {
    Rung::WideInt {
        seed: crate::record::FULL_SEED,
    }
}

/// The CTA the full pass records: (1, 0, 0) where the grid has a second CTA along x
/// (off the diagonal, so a swapped row and column index shows), else (0, 0, 0).
fn full_cta(launch: &Launch) -> [u32; 3] {
    match launch.grid {
        Some([x, _, _]) if x > 1 => [1, 0, 0],
        _ => [0, 0, 0],
    }
}

/// The rungs the program runs, and those it traces: the ladder's rungs; where the
/// unit is traced, the ones rung at CTA (0, 0, 0) and the full pass's rung (added
/// when the ladder has none) at [`full_cta`].
fn passes(job: &InSitu<'_>, launch: &Launch) -> (Vec<Rung>, Vec<insitu::Traced>) {
    let mut rungs = job.rungs.to_vec();
    let mut traced = Vec::new();
    if !job.trace {
        return (rungs, traced);
    }
    if rungs.contains(&Rung::Ones) {
        traced.push(insitu::Traced {
            rung: Rung::Ones,
            cta: [0, 0, 0],
            file: job.work.join(ONES_TRACE),
        });
    }
    let full = full_rung();
    if !rungs.contains(&full) {
        rungs.push(full);
    }
    traced.push(insitu::Traced {
        rung: full,
        cta: full_cta(launch),
        file: job.work.join(FULL_TRACE),
    });
    (rungs, traced)
}

/// A trace: `Err(None)` where none was asked for, `Err(Some(why))` where it was and is
/// not there or does not read. `whose`: "the ones rung's", "the full pass's".
fn read_trace(path: &Path, whose: &str) -> Result<kwb_runtime::Trace, Option<String>> {
    let bytes = std::fs::read(path).map_err(|_| {
        Some(format!("{whose} launch wrote no trace: the kernel's unit was not built traced (kwb-nvcc says why in the program's output), or the rung did not run"))
    })?;
    let trace = kwb_runtime::decode(&bytes)
        .map_err(|e| Some(format!("{whose} trace does not read: {e}")))?;
    if trace.records.is_empty() {
        return Err(Some(format!(
            "{whose} trace holds no record: no probe ran in the CTA it records ({})",
            path.display()
        )));
    }
    Ok(trace)
}

/// The full pass: its trace, the operands kwb wrote for it (A M x K, B N x K), the CTA
/// it records and its output against the answer.
struct Full {
    trace: kwb_runtime::Trace,
    a: kwb_reconcile::Matrix,
    b: kwb_reconcile::Matrix,
    cta: [u32; 3],
    output: Option<kwb_diagnose::OutputCheck>,
}

/// The traces of a session (`Err` as [`read_trace`]'s).
struct Traces {
    ones: Result<kwb_runtime::Trace, Option<String>>,
    full: Result<Full, Option<String>>,
}

/// The ladder's reading of an in-process run, the ones rung's trace (one launch, CTA
/// (0, 0, 0)) and the full pass's, with the TMA maps the kernel received; `not_run`
/// says what did not run and why.
fn judge(report: &Report, launch: &Launch, ended: &Ended, traces: Traces) -> Diagnosis {
    let rungs = evidence::outcomes(report);
    let ladder = (!rungs.is_empty()).then(|| judge_ladder(&rungs, epilogue_inputs(Some(report))));
    let shape = (report.plan.m, report.plan.n, report.plan.k);
    let ones = rungs.iter().find(|r| r.rung == "ones");
    let (ones_trace, ones_missing) = split(traces.ones);
    let (full, full_missing) = split(traces.full);
    let traced = ones_trace
        .as_ref()
        .map(|t| judge_ones(t, &evidence::ones_run(shape, ones, true)));
    let full_finding = full.as_ref().map(|f| {
        let run = StructuredRun {
            input: format!(
                "wide-int:{} (CTA ({}, {}, {}))",
                crate::record::FULL_SEED,
                f.cta[0],
                f.cta[1],
                f.cta[2]
            ),
            output: f.output.clone(),
            // The accumulator's type is not known in the program: f32's.
            accumulator_bits: 24,
        };
        judge_structured(&f.trace, &f.a, &f.b, &run)
    });
    let source = std::fs::read_to_string(&launch.file).unwrap_or_default();
    let mut descriptors = checks::received_issues(&report.maps, &[]);
    descriptors.extend(checks::swizzle_issues(
        &report.maps,
        kwb_diagnose::mma_swizzle(&source).as_ref(),
    ));
    let combined = combine_traces(traced.clone(), full_finding.clone());
    let verdict = with_descriptors(reconcile(combined.as_ref(), ladder.as_ref()), &descriptors);
    let full_trace = full.as_ref().map(|f| &f.trace);
    let sites = evidence::stage_sites(verdict.stage, ones_trace.as_ref(), full_trace);
    let mut not_run = Vec::new();
    if let Some(why) = &report.failed {
        not_run.push(format!("the ladder: {why}"));
    }
    if !ended.restored_all() && ended.lost.is_none() && ended.finished {
        not_run.push(
            "the program's buffers: at least one read back differently after kwb put it back (done.txt in the work folder names it)".to_owned(),
        );
    }
    match (ones_missing, full_missing) {
        (None, None) if ones_trace.is_none() && full.is_none() => not_run.push(format!(
            "the traces: --no-trace; in the program kwb traces the ones rung's launch and a full pass on wide-int, or take the kernel out (`kwb diagnose {} --kernel {}`)",
            launch.file, launch.kernel
        )),
        (ones, full) => {
            if let Some(why) = ones {
                not_run.push(format!("the trace: {why}"));
            }
            if let Some(why) = full {
                not_run.push(format!("the full trace: {why}"));
            }
        }
    }
    if rungs
        .iter()
        .any(|r| r.state == kwb_diagnose::RungState::Fault)
    {
        not_run.push("memcheck: a rung faulted inside the program; run the command under `compute-sanitizer --tool memcheck` to see the access".to_owned());
    }
    let evidence = [
        ("trace", traced),
        ("full trace", full_finding),
        ("ladder", ladder),
    ]
    .into_iter()
    .filter_map(
        |(track, f): (&'static str, Option<kwb_diagnose::Finding>)| {
            f.map(|finding| Evidence { track, finding })
        },
    )
    .collect();
    Diagnosis {
        instantiation: launch.callee.clone(),
        source: launch.file.clone(),
        verdict,
        evidence,
        rungs,
        sites,
        nan_origin: evidence::first_nan(ones_trace.as_ref(), full_trace),
        descriptors,
        maps: report.maps.iter().map(kwb_gpu::MapReading::line).collect(),
        not_run,
        reproduce: format!(
            "the launch at {}:{} in the program's own process",
            launch.file, launch.line
        ),
    }
}

/// A trace result as (what there is, why there is none where one was asked for).
fn split<T>(r: Result<T, Option<String>>) -> (Option<T>, Option<String>) {
    match r {
        Ok(t) => (Some(t), None),
        Err(why) => (None, why),
    }
}
