//! `kwb-nvcc [nvcc] ARGS…`: the precompile hook (see `kwb_cli::commands::nvcc`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let code = kwb_cli::commands::nvcc::main();
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
