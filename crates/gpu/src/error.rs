//! Why a run could not be made. A kernel that runs and computes wrong numbers is a
//! result, not an error.

use std::path::PathBuf;

use miette::Diagnostic;
use thiserror::Error;

#[derive(Debug, Error, Diagnostic)]
pub enum GpuError {
    #[error("{path}: {source}")]
    #[diagnostic(code(kwb::run::io))]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a reproducer folder: {why}")]
    #[diagnostic(
        code(kwb::run::not_a_reproducer),
        help("write one with kwb-extract FILE --kernel NAME -o DIR, then kwb run DIR")
    )]
    NotAReproducer { path: PathBuf, why: String },
    #[error("kernel parameter `{param}` (`{declaration}`) cannot be filled: {why}")]
    #[diagnostic(
        code(kwb::run::parameter),
        help(
            "kwb run fills GEMM operands (A, B, C, D, bias), M/N/K, leading dimensions, alpha/beta and TMA descriptors the launcher encodes"
        )
    )]
    Unfillable {
        param: String,
        declaration: String,
        why: String,
    },
    #[error("parameter `{param}` points to `{element}`, which is not bf16, f16 or f32")]
    #[diagnostic(code(kwb::run::element), help("name the element type with --dtype"))]
    UnknownElement { param: String, element: String },
    #[error("neither the kernel nor its launcher says what type operand {role} holds")]
    #[diagnostic(code(kwb::run::element), help("name it with --dtype"))]
    NoOperandType { role: String },
    #[error("the kernel has no output operand (a D, or a C it updates in place)")]
    #[diagnostic(
        code(kwb::run::output),
        help(
            "kwb run reads the output back from the parameter whose role is D (else C); see kwb.toml's [[params]]"
        )
    )]
    NoOutput,
    #[error("the manifest's epilogue activation `{0}` is none kwb's answer applies")]
    #[diagnostic(
        code(kwb::run::activation),
        help(
            "kwb models `relu`; re-extract with this kwb-extract, which refuses what it cannot model"
        )
    )]
    UnknownActivation(String),
    #[error("the traced reproducer: {0}")]
    #[diagnostic(code(kwb::run::trace))]
    Trace(String),
    #[error("the launch configuration is unknown: {why}")]
    #[diagnostic(
        code(kwb::run::config),
        help("give it: --grid X,Y,Z --block X,Y,Z --smem BYTES")
    )]
    NoConfig { why: String },
    #[error(transparent)]
    #[diagnostic(transparent)]
    Ladder(kwb_ladder::LadderError),
    #[error("nvcc could not build {path}")]
    #[diagnostic(
        code(kwb::run::build),
        help("the reproducer is built with build.sh's flags; nvcc said:\n{stderr}")
    )]
    Build { path: PathBuf, stderr: String },
    #[error(transparent)]
    #[diagnostic(transparent)]
    Toolchain(#[from] kwb_toolchain::Error),
    #[error("no CUDA driver on this machine ({why})")]
    #[diagnostic(
        code(kwb::run::no_gpu),
        help(
            "built {library} and the inputs of {rungs}; the launch needs a machine with an NVIDIA GPU and its driver (libcuda.so.1): there each rung's output is read back and compared with its answer"
        )
    )]
    NoDriver {
        why: String,
        library: String,
        rungs: String,
    },
    #[error("the dumps {source_} do not make one {m} x {n} x {k} problem")]
    #[diagnostic(
        code(kwb::run::dump_shape),
        help("A must be M x K, B N x K (or K x N with --b-layout kn) and C M x N")
    )]
    DumpShape {
        source_: String,
        m: usize,
        n: usize,
        k: usize,
    },
    #[error("the GPU worker failed: {0}")]
    #[diagnostic(code(kwb::run::worker))]
    Worker(String),
}
