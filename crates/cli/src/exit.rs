//! Exit codes of every kwb binary, documented in the README.

/// Success (`kwb diagnose`: a VERDICT or a DRAFT was reached).
pub const OK: i32 = 0;
/// kwb itself failed (a bug, or stdout could not be written).
pub const INTERNAL: i32 = 1;
/// Bad usage, unreadable input or unwritable output: missing file, directory, binary,
/// non-UTF-8, empty, too large, a pattern file that does not compile, an output equal
/// to its input, an output path that cannot be written. (clap's usage errors are 2
/// too.)
pub const INPUT: i32 = 2;
/// The input parsed but holds no kernel-like function (or none named by `--kernel`).
pub const NO_KERNEL: i32 = 3;
/// Results were printed, but a reported kernel contains syntax error regions, so
/// sites inside them may be missing.
pub const PARTIAL: i32 = 4;
/// A comparison ran and the output does not match: `kwb ladder check` found a
/// mismatch, NaN or Inf; `kwb run`: a rung failed (wrong numbers, NaN/Inf, or the
/// kernel faulted).
pub const MISMATCH: i32 = 5;
/// `kwb run`: a launch did not finish within `--timeout` (HANG); the worker was killed.
pub const HANG: i32 = 6;
/// `kwb run`: nothing could run on a GPU: no CUDA driver or device here, or the
/// driver refused the launch (configuration, resources, a descriptor the encoder
/// refused). `kwb diagnose`: no GPU for the ladder and no trace given.
pub const NO_GPU: i32 = 7;
