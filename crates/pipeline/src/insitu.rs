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
//! compared and judged as `kwb run`'s are.
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
    Diagnosis, Evidence, judge_ladder, judge_ones, nan_origin, reconcile, sites_of,
    with_descriptors,
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
                "kernel={};cta=0,0,0",
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
                    let trace_file = job.work.join("ones.trace");
                    let traced = (job.trace && job.rungs.contains(&Rung::Ones))
                        .then_some((Rung::Ones, trace_file.as_path()));
                    let s = insitu::serve(job.work, &plan, &buffers, job.rungs, traced)?;
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
    let rungs = insitu::judge(&plan, &served, &outcomes, hung_after)?;
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
    let trace = if job.trace {
        read_trace(&job.work.join("ones.trace"))
    } else {
        Err(None)
    };
    let diagnosis = judge(&report, &launch, &ended, trace);
    Ok(InSituOutcome {
        diagnosis,
        report,
        ended,
        status,
        log,
    })
}

/// The ones rung's trace: `Err(None)` where none was asked for, `Err(Some(why))` where
/// it was and is not there or does not read.
fn read_trace(path: &Path) -> Result<kwb_runtime::Trace, Option<String>> {
    let bytes = std::fs::read(path).map_err(|_| {
        Some("the ones rung's launch wrote no trace: the kernel's unit was not built traced (kwb-nvcc says why in the program's output), or the rung did not run".to_owned())
    })?;
    kwb_runtime::decode(&bytes)
        .map_err(|e| Some(format!("the ones rung's trace does not read: {e}")))
}

/// The ladder's reading of an in-process run and the ones rung's trace (one launch,
/// CTA (0, 0, 0)), with the TMA maps the kernel received; `not_run` says what a
/// reproducer would add.
fn judge(
    report: &Report,
    launch: &Launch,
    ended: &Ended,
    trace: Result<kwb_runtime::Trace, Option<String>>,
) -> Diagnosis {
    let rungs = evidence::outcomes(report);
    let ladder = (!rungs.is_empty()).then(|| judge_ladder(&rungs, epilogue_inputs(Some(report))));
    let shape = (report.plan.m, report.plan.n, report.plan.k);
    let ones = rungs.iter().find(|r| r.rung == "ones");
    let (trace, trace_missing) = match trace {
        Ok(t) => (Some(t), None),
        Err(why) => (None, why),
    };
    let traced = trace
        .as_ref()
        .map(|t| judge_ones(t, &evidence::ones_run(shape, ones, true)));
    let source = std::fs::read_to_string(&launch.file).unwrap_or_default();
    let mut descriptors = checks::received_issues(&report.maps, &[]);
    descriptors.extend(checks::swizzle_issues(
        &report.maps,
        kwb_diagnose::mma_swizzle(&source).as_ref(),
    ));
    let verdict = with_descriptors(reconcile(traced.as_ref(), ladder.as_ref()), &descriptors);
    let mut sites = Vec::new();
    if let (Some(stage), Some(t)) = (verdict.stage, trace.as_ref()) {
        for site in sites_of(t, stage) {
            if !sites.contains(&site) {
                sites.push(site);
            }
        }
    }
    let mut not_run = Vec::new();
    if let Some(why) = &report.failed {
        not_run.push(format!("the ladder: {why}"));
    }
    if !ended.restored_all() && ended.lost.is_none() && ended.finished {
        not_run.push(
            "the program's buffers: at least one read back differently after kwb put it back (done.txt in the work folder names it)".to_owned(),
        );
    }
    match (&traced, trace_missing) {
        (Some(_), _) => not_run.push(format!(
            "the full trace: in the program's own process kwb traces the ones rung's launch (CTA (0, 0, 0)); the full trace on integer inputs, which tells a K slice fed twice or another CTA's rows, comes from the kernel taken out (`kwb diagnose {} --kernel {}`)",
            launch.file, launch.kernel
        )),
        (None, Some(why)) => not_run.push(format!("the trace: {why}")),
        (None, None) => not_run.push(format!(
            "the traces: --no-trace; in the program kwb traces the ones rung's launch, and the full trace comes from the kernel taken out (`kwb diagnose {} --kernel {}`)",
            launch.file, launch.kernel
        )),
    }
    if rungs
        .iter()
        .any(|r| r.state == kwb_diagnose::RungState::Fault)
    {
        not_run.push("memcheck: a rung faulted inside the program; run the command under `compute-sanitizer --tool memcheck` to see the access".to_owned());
    }
    Diagnosis {
        instantiation: launch.callee.clone(),
        source: launch.file.clone(),
        verdict,
        evidence: traced
            .map(|finding| Evidence {
                track: "trace",
                finding,
            })
            .into_iter()
            .chain(ladder.map(|finding| Evidence {
                track: "ladder",
                finding,
            }))
            .collect(),
        rungs,
        sites,
        nan_origin: trace.as_ref().and_then(nan_origin),
        descriptors,
        maps: report.maps.iter().map(kwb_gpu::MapReading::line).collect(),
        not_run,
        reproduce: format!(
            "the launch at {}:{} in the program's own process",
            launch.file, launch.line
        ),
    }
}
