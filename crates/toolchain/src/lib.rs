//! The CUDA toolchain kwb compiles with: where it is and how to run it.
//!
//! This is the only kwb crate that spawns processes. It knows the pinned PyPI
//! packages of the toolchain ([`pins`]), the cache folder they are installed into
//! ([`cache`]), how to find nvcc, cuobjdump and the CUTLASS headers ([`discover`]),
//! how to run nvcc and cuobjdump on a file ([`nvcc`]), and how to read what ptxas
//! says of each kernel ([`ptxas_info`]).
//!
//! Discovery reads an [`Env`], a plain snapshot of the environment variables it
//! looks at, so that tests can describe any environment without touching the real
//! one.

pub mod cache;
pub mod discover;
mod env;
mod error;
pub mod nvcc;
pub mod pins;
pub mod ptxas_info;

pub use crate::discover::{CutlassDir, CutlassSource, Discovery, Toolchain, cutlass, toolchain};
pub use crate::env::Env;
pub use crate::error::{Error, Stderr};
pub use crate::nvcc::{
    CompileFlags, compile_cubin, compile_executable, compile_object, compile_ptx,
    compile_shared_library, nvcc_version, preprocess, resource_usage, sass, sass_instructions,
};

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
