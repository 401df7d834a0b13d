//! The command-line layer shared by the `kwb` binaries: argument types, input
//! checks, rendering and exit codes. No analysis lives here.

#![allow(
    clippy::print_stdout,
    reason = "a command-line tool prints its results"
)]

pub mod binaries;
pub mod cli;
pub mod commands;
pub mod dump;
pub mod error;
pub mod exit;
pub mod input;
pub mod ladder_args;
pub mod local_headers;
pub mod mutant_build;
pub mod mutant_test;
pub mod npy;
pub mod output;
pub mod progress;
pub mod register_floor;
pub mod render;
pub mod reproducer;
pub mod tiles;
