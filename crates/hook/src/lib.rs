//! The precompile hook's pure parts, no IO: what `KWB_TRACE` asks for ([`spec`]) and
//! the nvcc command line `kwb-nvcc` reads and rewrites ([`command`]). The binary
//! (crates/cli) reads files, instruments, caches and runs nvcc.

pub mod command;
pub mod spec;

pub use crate::command::{Mode, NvccCommand};
pub use crate::spec::Spec;
