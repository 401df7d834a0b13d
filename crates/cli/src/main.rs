//! `kwb`: localize wrong numbers in CUDA/CUTLASS GEMM kernels.
//!
//! This binary holds nothing but the exit; the command line is `kwb_cli::cli`, the
//! work happens in the library crates.

use std::process::ExitCode;

fn main() -> ExitCode {
    let code = kwb_cli::cli::main();
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
