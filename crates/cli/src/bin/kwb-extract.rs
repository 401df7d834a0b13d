//! `kwb-extract FILE (--kernel NAME | --template SPEC) -o DIR`: Track B's extractor.

use std::process::ExitCode;

use clap::Parser;
use kwb_cli::commands::extract;

fn main() -> ExitCode {
    let code = extract::run(extract::Args::parse());
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
