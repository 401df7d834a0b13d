//! `cargo xtask demo`: the README's main job on bundled examples.
//!
//! Installs the toolchain cache if needed, then runs `kwb sites` on the bundled
//! megakernel fixture and on CUTLASS's SM90 TMA warp-specialized GMMA collective.
//! Without a GPU this is the whole product so far; the GPU tracks (in-kernel trace,
//! standalone reproducer) come with later stages.

use std::path::Path;

use crate::{Result, ci, setup};

/// The CUTLASS collective the demo maps, under the CUTLASS include folder.
const COLLECTIVE: &str = "cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp";

pub fn run(root: &Path) -> Result {
    let installed = setup::run()?;
    let collective = installed.cutlass.include.join(COLLECTIVE);
    let fixture = root.join("fixtures/sites/megakernel_task.cu");
    let mut command = ci::cargo_command(
        root,
        &[
            "run",
            "--release",
            "--quiet",
            "-p",
            "kwb",
            "--bin",
            "kwb",
            "--",
            "sites",
        ],
    );
    command.arg(fixture).arg(collective);
    ci::run_step(
        "kwb sites (bundled megakernel + CUTLASS SM90 collective)",
        command,
    )
}
