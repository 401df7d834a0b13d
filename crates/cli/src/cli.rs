//! The `kwb` command line: its subcommands and their dispatch. The binaries hold
//! nothing else, so the man pages and shell completions (`kwb man`, `kwb
//! completions`) are generated from these same definitions.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::commands;

#[derive(Parser)]
#[command(
    name = "kwb",
    version,
    about = "kernel white-box: localize wrong numbers in CUDA/CUTLASS GEMM kernels"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// The kernel map: mainloop, MMA, operands, accumulator, loads, epilogue, TMA
    /// descriptors and syncs of every kernel-like function
    Sites(commands::sites::Args),
    /// Read a trace written by an instrumented build
    #[command(subcommand)]
    Trace(TraceCommand),
    /// Track B's controlled inputs: write a rung's operands, check a kernel's output
    #[command(subcommand)]
    Ladder(LadderCommand),
    /// Track B: build a kwb-extract reproducer and run it on the controlled-input
    /// ladder on the GPU; exit 5 on a failed rung, 6 on a hang, 7 without a GPU
    Run(commands::run::Args),
    /// The stage verdict: extract and run the instantiation on the ladder, judge a
    /// trace, reconcile them into a VERDICT or a DRAFT
    Diagnose(Box<commands::diagnose::Args>),
    /// Plant stage-labelled defects in a kernel (mutation testing): each mutant a copy
    /// of the file with one edit, labelled with its stage, in a manifest
    Mutate(commands::mutate::Args),
    /// The GPU half of `kwb run`, started by it in its own process
    #[command(hide = true)]
    RunWorker {
        /// The job file `kwb run` wrote
        job: PathBuf,
    },
    /// ERROR/MISSING counts of parsing every C++/CUDA file under a directory
    ParseStats(commands::parse_stats::Args),
    /// Shell completions for kwb, kwb-instrument or kwb-extract, on stdout
    Completions(commands::docs::CompletionArgs),
    /// Man pages of every kwb command (kwb and its subcommands, kwb-instrument,
    /// kwb-extract, kwb-nvcc), written into a folder
    Man(commands::docs::ManArgs),
    /// Debug: print the syntax tree kwb sees (macros blanked), for bug reports
    #[command(next_help_heading = "Debug")]
    DumpTree {
        /// Source file
        file: PathBuf,
    },
    /// Debug: run a tree-sitter query over a file and print every capture
    Query {
        /// Query file (.scm)
        query: PathBuf,
        /// Source file
        file: PathBuf,
    },
}

#[derive(Subcommand)]
pub enum LadderCommand {
    /// Write a rung's operands (and its answer) as .npy files, to feed a kernel
    Write(commands::ladder::WriteArgs),
    /// Compare a kernel's output (.npy, M x N) with the rung's answer; exit 5 on a
    /// mismatch
    Check(commands::ladder::CheckArgs),
}

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Per site and K tile: values seen, absmax, NaN/Inf counts, first values
    Show(commands::trace::ShowArgs),
}

/// Runs the command line `Cli::parse()` reads; the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    match cli.command {
        Command::Sites(args) => commands::sites::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Diagnose(args) => commands::diagnose::run(*args),
        Command::Mutate(args) => commands::mutate::run(args),
        Command::RunWorker { job } => commands::run::worker(job),
        Command::ParseStats(args) => commands::parse_stats::run(args),
        Command::Trace(TraceCommand::Show(args)) => commands::trace::show(args),
        Command::Ladder(LadderCommand::Write(args)) => commands::ladder::write(args),
        Command::Ladder(LadderCommand::Check(args)) => commands::ladder::check(args),
        Command::Completions(args) => commands::docs::completions(&args),
        Command::Man(args) => commands::docs::man(&args),
        Command::DumpTree { file } => commands::debug::dump_tree(&file),
        Command::Query { query, file } => commands::debug::query(&query, &file),
    }
}
