//! `kwb-instrument FILE -o OUT`: the Track A instrumenter's command line.

use std::process::ExitCode;

use clap::Parser;
use kwb_cli::commands::instrument;

fn main() -> ExitCode {
    let code = instrument::run(instrument::Args::parse());
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
