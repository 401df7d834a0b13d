//! kwb's development tasks, run as `cargo xtask <task>`.
//!
//! `setup` installs the pinned CUDA toolchain and CUTLASS headers into the cache,
//! `test` (alias `ci`) runs exactly what CI runs, and `tidy` checks conventions
//! that rustfmt and clippy do not; `demo` runs the README's main job.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "xtask is a command-line tool: printing progress is its job"
)]

mod bench;
mod ci;
mod corpus;
mod demo;
mod gpu_bench;
mod gpu_diagnose;
mod gpu_insitu;
mod gpu_one_command;
mod gpu_provenance;
mod gpu_repro;
mod gpu_runtime;
mod gpu_styles;
mod gpu_suite;
mod gpu_tensormap;
mod gpu_trace;
mod kernels;
mod mutants;
mod sets;
mod setup;
mod suite;
mod sweep;
mod tidy;

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// kwb's development tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Install the pinned CUDA toolchain and CUTLASS headers into the kwb cache
    Setup,
    /// Run what CI runs: setup, fmt, clippy, tidy and the workspace tests
    #[command(alias = "ci")]
    Test,
    /// Check that every non-test `.rs` file starts with a `//!` module doc
    Tidy,
    /// The main job on bundled examples: the kernel map of a megakernel fixture and
    /// of a real CUTLASS collective
    Demo,
    /// Measure the speed figures of docs/BENCHMARKS.md
    Bench {
        /// Timed runs of each command (after one warm-up)
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Instead: kwb-nvcc against plain nvcc on the cutlass3x_sm90 translation unit
        /// (disabled and enabled), side by side
        #[arg(long)]
        hook: bool,
    },
    /// Track A over the whole of flashinfer-python (the corpus setup installs): every
    /// file that names an MMA instrumented in process, the outcomes and probes counted
    Sweep {
        /// Where to write the Markdown figures
        #[arg(long, default_value = "target/sweep.md")]
        out: PathBuf,
    },
    /// The third-party compile checks over their whole sets (Track A's compile check and
    /// Track B's reproducers: every unit, every planted defect); CI checks a sample
    Sets,
    /// The kernel map scored against the hand-labelled third-party corpus
    /// (tests/corpus.toml): recall and precision per kind, held to tests/corpus-floor.toml
    Corpus {
        /// The folder for report.md and misses.md
        #[arg(long, default_value = "target/corpus")]
        out: PathBuf,
        /// Only files whose path contains one of these, comma-separated
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Report only; do not hold the scores to tests/corpus-floor.toml
        #[arg(long)]
        no_floor: bool,
        /// Raise the floors of tests/corpus-floor.toml to today's scores (never lowers)
        #[arg(long)]
        raise_floor: bool,
    },
    /// Compile every variant of kernels/suite.toml for every architecture of its family
    Kernels {
        /// Parallel nvcc processes
        #[arg(short, long, default_value_t = default_jobs())]
        jobs: usize,
        /// Only this family
        #[arg(long)]
        family: Option<String>,
    },
    /// On a machine with a GPU: build, run and check every variant; write
    /// docs/results/suite.md
    GpuSuite {
        /// Parallel nvcc processes
        #[arg(short, long, default_value_t = default_jobs())]
        jobs: usize,
        /// Seconds before a run counts as a hang
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// Where to write the report
        #[arg(long, default_value = "docs/results/suite.md")]
        out: PathBuf,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
    },
    /// On a machine with a GPU: instrument every family, build and run every variant
    /// traced on all-ones, and read the defect's stage from the trace alone
    GpuTrace {
        /// Parallel nvcc processes
        #[arg(short, long, default_value_t = default_jobs())]
        jobs: usize,
        /// Seconds before a run counts as a hang
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// The folder for the traces and report.md
        #[arg(long, default_value = "target/gpu-trace")]
        out: PathBuf,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
    },
    /// On a machine with a GPU: kwb-extract and kwb run every variant (Track B), check
    /// each rung against kernels/suite.toml, and run the planted hang
    GpuRepro {
        /// Variants extracted, built and run at once
        #[arg(short, long, default_value_t = default_jobs())]
        jobs: usize,
        /// Seconds before a launch counts as a hang
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// The folder for the reproducers and report.md
        #[arg(long, default_value = "target/gpu-repro")]
        out: PathBuf,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
    },
    /// On a machine with a GPU: kwb-extract and kwb run every program of the second
    /// suite (kernels/styles), correct and with each planted defect, and the CuTe
    /// tutorials, with no binding given; each rung held to the program's manifest
    GpuStyles {
        /// Builds extracted, built and run at once
        #[arg(short, long, default_value_t = default_jobs())]
        jobs: usize,
        /// Seconds before a launch counts as a hang
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// The folder for the reproducers and report.md
        #[arg(long, default_value = "target/gpu-styles")]
        out: PathBuf,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
    },
    /// On a machine with a GPU: `kwb diagnose` on every variant (a trace recorded on
    /// all-ones, the ladder, the verdict), held to kernels/suite.toml
    GpuDiagnose {
        /// Builds and diagnoses run at once
        #[arg(short, long, default_value_t = default_jobs())]
        jobs: usize,
        /// Seconds before a launch counts as a hang
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// The folder for the traces, reports and report.md
        #[arg(long, default_value = "target/gpu-diagnose")]
        out: PathBuf,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
        /// Only these variants (FAMILY/DEFECT) or families (FAMILY), comma-separated
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// On a machine with a GPU: `kwb diagnose` alone, one command per build as a user
    /// runs it (no trace given, no harness), on both suites, held to their manifests
    /// `kwb diagnose --kernel K -- python -m pytest …` on the PyTorch extension of
    /// kernels/insitu, once per planted defect (needs a GPU, PyTorch and pytest)
    GpuInsitu {
        /// The folder for the report folders and report.md
        #[arg(long, default_value = "target/gpu-insitu")]
        out: PathBuf,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
        /// The Python that runs pytest
        #[arg(long, default_value = "python")]
        python: String,
    },
    GpuOneCommand {
        /// Commands run at once
        #[arg(short, long, default_value_t = default_jobs())]
        jobs: usize,
        /// Seconds before a launch counts as a hang
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// The folder for the report folders and report.md
        #[arg(long, default_value = "target/gpu-one-command")]
        out: PathBuf,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
        /// Only rows whose name (suite/FAMILY/DEFECT, styles/PROGRAM/DEFECT) contains
        /// one of these, comma-separated
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// kwb mutate --compile on every target of tests/mutants.toml (CuTe tutorials,
    /// CUTLASS headers through the examples that compile them, our suites): the
    /// compiled set, per target and stage, in OUT/report.md
    Mutants {
        /// The folder for each target's mutants and report.md
        #[arg(long, default_value = "target/mutants")]
        out: PathBuf,
        /// Only targets whose name contains one of these, comma-separated
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
        /// Only these operators (kwb mutate --operator), comma-separated
        #[arg(long = "operator", value_delimiter = ',')]
        operators: Vec<String>,
    },
    /// On a machine with a GPU: `kwb diagnose` on every mutant `cargo xtask mutants`
    /// kept, one command each, graded against the stage it was planted in
    GpuMutants {
        /// The folder `cargo xtask mutants` wrote
        #[arg(long, default_value = "target/mutants")]
        from: PathBuf,
        /// The folder for the report folders and report.md
        #[arg(long, default_value = "target/gpu-mutants")]
        out: PathBuf,
        /// Commands run at once
        #[arg(short, long, default_value_t = default_jobs())]
        jobs: usize,
        /// Seconds before a launch counts as a hang
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// GPUs to spread the commands over (CUDA_VISIBLE_DEVICES round robin)
        #[arg(long, default_value_t = 1)]
        gpus: usize,
        /// Only mutants whose `TARGET#ID` contains one of these, comma-separated
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
        /// Seconds after which no further mutant is started (the rest are reported as
        /// not run)
        #[arg(long)]
        budget: Option<u64>,
    },
    /// On a machine with a GPU: check the trace runtime's records against statistics
    /// known by hand (tests/gpu/runtime_check.cu)
    GpuRuntime {
        /// Where to write the report
        #[arg(long, default_value = "target/gpu-runtime.txt")]
        out: PathBuf,
    },
    /// On a machine with a GPU: encode a table of tensor maps with the driver's
    /// cuTensorMapEncodeTiled and check that kwb-diagnose decodes each to its parameters
    GpuTensormap {
        /// Where to write the Markdown report
        #[arg(long, default_value = "target/gpu-tensormap.md")]
        out: PathBuf,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
    },
    /// On a machine with a GPU: time the original, instrumented-disabled, one-CTA,
    /// all-CTA and memcheck builds; registers and spills of each
    GpuBench {
        /// Timed launches per build
        #[arg(long, default_value_t = 50)]
        launches: u32,
        /// Timed launches under compute-sanitizer memcheck
        #[arg(long, default_value_t = 3)]
        memcheck_launches: u32,
        /// M = N = K
        #[arg(long, default_value_t = 4096)]
        size: u32,
        /// Where to write the Markdown table
        #[arg(long, default_value = "target/gpu-bench.md")]
        out: PathBuf,
        /// The commit the report is for (the checkout may have no .git)
        #[arg(long)]
        commit: Option<String>,
    },
}

fn main() -> ExitCode {
    let result = match Cli::parse().task {
        Task::Setup => setup::run().map(drop),
        Task::Test => ci::run(&project_root()),
        Task::Tidy => tidy::run(&project_root()),
        Task::Demo => demo::run(&project_root(), demo::Profile::Release),
        Task::Sweep { out } => sweep::run(&project_root().join(out)),
        Task::Sets => sets::run(&project_root()),
        Task::Corpus {
            out,
            only,
            no_floor,
            raise_floor,
        } => corpus::run(
            &project_root(),
            &corpus::Options {
                out: project_root().join(out),
                check_floor: !no_floor && only.is_empty(),
                raise_floor: raise_floor && only.is_empty(),
                only,
            },
        ),
        Task::Bench { runs, hook: false } => bench::run(&project_root(), runs),
        Task::Bench { runs, hook: true } => bench::hook(&project_root(), runs),
        Task::Kernels { jobs, family } => kernels::run(
            &project_root(),
            &kernels::Build {
                jobs,
                family: family.as_deref(),
                selection: crate::kernels::Selection::All,
                traced: None,
            },
        )
        .map(drop),
        Task::GpuSuite {
            jobs,
            timeout,
            out,
            commit,
        } => gpu_suite::run(
            &project_root(),
            &gpu_suite::Options {
                jobs,
                timeout: std::time::Duration::from_secs(timeout),
                out: project_root().join(out),
                commit,
            },
        ),
        Task::GpuTrace {
            jobs,
            timeout,
            out,
            commit,
        } => gpu_trace::run(
            &project_root(),
            &gpu_trace::Options {
                jobs,
                timeout: std::time::Duration::from_secs(timeout),
                out: project_root().join(out),
                commit,
            },
        ),
        Task::GpuStyles {
            jobs,
            timeout,
            out,
            commit,
        } => gpu_styles::run(
            &project_root(),
            &gpu_styles::Options {
                jobs,
                timeout: std::time::Duration::from_secs(timeout),
                out: project_root().join(out),
                commit,
            },
        ),
        Task::GpuRepro {
            jobs,
            timeout,
            out,
            commit,
        } => gpu_repro::run(
            &project_root(),
            &gpu_repro::Options {
                jobs,
                timeout: std::time::Duration::from_secs(timeout),
                out: project_root().join(out),
                commit,
            },
        ),
        Task::GpuDiagnose {
            jobs,
            timeout,
            out,
            commit,
            only,
        } => gpu_diagnose::run(
            &project_root(),
            &gpu_diagnose::Options {
                jobs,
                timeout: std::time::Duration::from_secs(timeout),
                out: project_root().join(out),
                commit,
                only,
            },
        ),
        Task::GpuInsitu {
            out,
            commit,
            python,
        } => gpu_insitu::run(
            &project_root(),
            &gpu_insitu::Options {
                out: project_root().join(out),
                commit,
                python,
            },
        ),
        Task::GpuOneCommand {
            jobs,
            timeout,
            out,
            commit,
            only,
        } => gpu_one_command::run(
            &project_root(),
            &gpu_one_command::Options {
                jobs,
                timeout: std::time::Duration::from_secs(timeout),
                out: project_root().join(out),
                commit,
                only,
            },
        ),
        Task::Mutants {
            out,
            only,
            commit,
            operators,
        } => mutants::run(
            &project_root(),
            &mutants::Options {
                out: project_root().join(out),
                only,
                commit,
                operators,
            },
        ),
        Task::GpuMutants {
            from,
            out,
            jobs,
            timeout,
            gpus,
            only,
            commit,
            budget,
        } => mutants::gpu_run(
            &project_root(),
            &mutants::GpuOptions {
                from: project_root().join(from),
                out: project_root().join(out),
                jobs,
                timeout: std::time::Duration::from_secs(timeout),
                gpus,
                only,
                commit,
                budget: budget.map(std::time::Duration::from_secs),
            },
        ),
        Task::GpuRuntime { out } => gpu_runtime::run(&project_root(), &project_root().join(out)),
        Task::GpuTensormap { out, commit } => gpu_tensormap::run(
            &project_root(),
            &gpu_tensormap::Options {
                out: project_root().join(out),
                commit,
            },
        ),
        Task::GpuBench {
            launches,
            memcheck_launches,
            size,
            out,
            commit,
        } => gpu_bench::run(
            &project_root(),
            &gpu_bench::Options {
                launches,
                memcheck_launches,
                size,
                out: project_root().join(out),
                commit,
            },
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::FAILURE
        }
    }
}

/// Why a task failed, already worded for the user.
#[derive(Debug)]
struct Failure(String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<kwb_toolchain::Error> for Failure {
    /// The message, its causes and its help, one per line.
    fn from(error: kwb_toolchain::Error) -> Self {
        use miette::Diagnostic;
        let mut text = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            text.push_str(&format!("\n  caused by: {cause}"));
            source = cause.source();
        }
        if let Some(help) = error.help() {
            text.push_str(&format!("\n  help: {help}"));
        }
        Failure(text)
    }
}

type Result<T = (), E = Failure> = std::result::Result<T, E>;

/// The workspace root: `KWB_ROOT` when set (a carried xtask binary on another
/// machine), else the folder above this crate's.
fn project_root() -> PathBuf {
    if let Some(root) = std::env::var_os("KWB_ROOT") {
        return PathBuf::from(root);
    }
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_owned()
}

/// Parallel jobs: the machine's cores.
fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}
