//! `cargo xtask test` (alias `ci`): exactly what CI runs, in order.
//!
//! Steps: setup, `cargo fmt --check`, `cargo clippy -D warnings`, tidy, then
//! `cargo test --workspace` with `KWB_CUDA_HOME` and `KWB_CUTLASS_DIR` pointing at
//! the cache (unless already set) and `KWB_RUN_SLOW_TESTS=1`, so the tests that need
//! nvcc or the CUTLASS headers run too, then `kernels` (the kernel suite compiles:
//! [`crate::kernels::Selection::Ci`]), `corpus` (the kernel map scored on the labelled
//! third-party corpus, held to tests/corpus-floor.toml) and last `demo` (the README's first quickstart
//! command, on the dev build of kwb the tests made). Each step prints a one-line header; the first failing step
//! stops the run.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use crate::{Failure, Result, setup, tidy};

pub fn run(root: &Path) -> Result {
    header("setup");
    let installed = setup::run()?;

    cargo(root, &["fmt", "--all", "--", "--check"])?;
    cargo(
        root,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;

    header("tidy");
    tidy::run(root)?;

    let mut test = cargo_command(root, &["test", "--workspace"]);
    if is_unset("KWB_CUDA_HOME") {
        test.env("KWB_CUDA_HOME", &installed.toolchain.home);
    }
    if is_unset("KWB_CUTLASS_DIR") {
        test.env("KWB_CUTLASS_DIR", &installed.cutlass.include);
    }
    test.env("KWB_RUN_SLOW_TESTS", "1");
    let tests = counted_step("cargo test --workspace", test)?;

    // The suite compiles with the pinned nvcc (every variant of the families whose
    // builds are quick, the correct one of every family): a broken kernel is caught
    // without a GPU.
    header("kernels");
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let compiled = crate::kernels::run(
        root,
        &crate::kernels::Build {
            jobs,
            family: None,
            selection: crate::kernels::Selection::Ci,
            traced: None,
        },
    )?;
    // The kernel map on the hand-labelled third-party corpus, held to its floors.
    header("corpus");
    crate::corpus::run(
        root,
        &crate::corpus::Options {
            out: root.join("target/corpus"),
            only: Vec::new(),
            check_floor: true,
            raise_floor: false,
        },
    )?;
    // The README's first quickstart command keeps working.
    header("demo");
    crate::demo::run(root, crate::demo::Profile::Dev)?;
    // One closing line for every check: the Rust tests, the kernel builds, the corpus
    // floors, the demo.
    println!("xtask: {} passed, 0 failed", tests + compiled + 2);
    Ok(())
}

/// Runs a `cargo test` step, echoing its output, and returns how many tests passed
/// (the sum of its `test result:` lines).
fn counted_step(name: &str, mut command: Command) -> Result<usize> {
    use std::io::{BufRead, BufReader};
    header(name);
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Failure(format!("cannot run `{name}`: {e}")))?;
    let mut passed = 0;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout)
            .lines()
            .map_while(std::result::Result::ok)
        {
            println!("{line}");
            if let Some(rest) = line.strip_prefix("test result: ok. ") {
                passed += rest
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(0);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| Failure(format!("cannot wait for `{name}`: {e}")))?;
    if status.success() {
        Ok(passed)
    } else {
        Err(Failure(format!("`{name}` failed ({status})")))
    }
}

/// A step's one-line header, with the seconds since this task's first header, so a
/// CI log shows where its time went.
pub fn header(step: &str) {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    println!("==> {step}  [{:.0} s]", start.elapsed().as_secs_f64());
}

/// Runs `cargo <args>` in `root` as one step.
fn cargo(root: &Path, args: &[&str]) -> Result {
    run_step(
        &format!("cargo {}", args.join(" ")),
        cargo_command(root, args),
    )
}

pub fn cargo_command(root: &Path, args: &[&str]) -> Command {
    // Cargo sets CARGO for the programs it runs: use the same cargo.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(args).current_dir(root);
    command
}

pub fn run_step(name: &str, mut command: Command) -> Result {
    header(name);
    let status = command
        .status()
        .map_err(|e| Failure(format!("cannot run `{name}`: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure(format!("`{name}` failed ({status})")))
    }
}

/// Whether `name` is unset or empty, as kwb-toolchain's discovery reads it.
pub fn is_unset(name: &str) -> bool {
    std::env::var_os(name).is_none_or(|value| value == OsStr::new(""))
}
