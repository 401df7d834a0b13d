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

mod ci;
mod demo;
mod setup;
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
}

fn main() -> ExitCode {
    let result = match Cli::parse().task {
        Task::Setup => setup::run().map(drop),
        Task::Test => ci::run(&project_root()),
        Task::Tidy => tidy::run(&project_root()),
        Task::Demo => demo::run(&project_root()),
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

/// The workspace root: the folder above this crate's.
fn project_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_owned()
}
