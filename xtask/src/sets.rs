//! `cargo xtask sets`: the slow checks over sets of programs, each over its whole set.
//!
//! CI (`cargo xtask test`) runs the Track A compile check (tests/tests/unseen.rs) and
//! the Track B reproducer check (tests/tests/through.rs) on a sample: the units their
//! manifests (tests/unseen.toml, tests/through.toml) do not mark `ci = false`, and each
//! program of the second suite built correct. This task runs both with
//! `KWB_WHOLE_SETS=1`: every unit, every planted defect, and the zero-cost check of the
//! suite's CuTe family (tests/tests/zero_cost.rs), which CI leaves to the tutorials. Each unit's line (and its
//! seconds) is printed as it ends; the first failing check fails the task.

use std::path::Path;

use crate::ci::{cargo_command, is_unset, run_step};
use crate::{Result, setup};

pub fn run(root: &Path) -> Result {
    let installed = setup::run()?;
    let mut test = cargo_command(
        root,
        &[
            "test",
            "-p",
            "kwb-tests",
            "--test",
            "unseen",
            "--test",
            "through",
            "--test",
            "zero_cost",
            "--",
            "--nocapture",
        ],
    );
    if is_unset("KWB_CUDA_HOME") {
        test.env("KWB_CUDA_HOME", &installed.toolchain.home);
    }
    if is_unset("KWB_CUTLASS_DIR") {
        test.env("KWB_CUTLASS_DIR", &installed.cutlass.include);
    }
    test.env("KWB_RUN_SLOW_TESTS", "1")
        .env("KWB_WHOLE_SETS", "1");
    run_step(
        "the whole sets: unseen and zero_cost (Track A), through (Track B)",
        test,
    )
}
