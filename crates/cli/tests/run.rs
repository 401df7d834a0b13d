//! End-to-end tests of `kwb run` on a machine without a GPU (CI's): bad input is a
//! clear message and exit 2, a kernel kwb cannot fill is named, the dump rung's files
//! are checked exactly, and a good reproducer is still built (and cached) before the
//! run says that the launch needs a GPU (exit 7).

use std::path::{Path, PathBuf};
use std::process::Command;

struct Run {
    code: i32,
    stderr: String,
}

fn kwb(dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kwb"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("KWB_CACHE_DIR", dir.join("cache"))
        .output()
        .expect("kwb runs");
    Run {
        code: out.status.code().expect("exited, not killed"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `kwb-extract` of a suite family into `dir/repro`.
fn extracted(dir: &Path, family: &str, kernel: &str) -> PathBuf {
    let out = dir.join("repro");
    let status = Command::new(env!("CARGO_BIN_EXE_kwb-extract"))
        .arg(root().join(format!("kernels/{family}/gemm.cu")))
        .args(["--kernel", kernel, "-I"])
        .arg(root().join("kernels/common"))
        .arg("-o")
        .arg(&out)
        .output()
        .expect("kwb-extract runs");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    out
}

/// Whether this machine has a CUDA driver, by the runner's own test.
fn driver_here() -> bool {
    kwb_gpu::worker::driver_present().is_ok()
}

#[test]
fn a_folder_without_a_reproducer_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let r = kwb(dir.path(), &["run", "nowhere"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("is not a reproducer folder"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("kwb-extract"), "{}", r.stderr);
}

#[test]
fn a_parameter_kwb_cannot_fill_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let repro = extracted(dir.path(), "megakernel", "megakernel");
    let r = kwb(dir.path(), &["run", repro.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("kernel parameter `tasks`"),
        "{}",
        r.stderr
    );
}

#[test]
fn dumps_are_checked_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let repro = extracted(dir.path(), "mma_sync", "gemm_mma_sync");
    let d = dir.path();
    // a.npy is 64 x 128, b.npy is 128 x 96 (K x N).
    let w = kwb(
        d,
        &[
            "ladder",
            "write",
            "--rung",
            "random:3",
            "--shape",
            "64,96,128",
            "-o",
            "ops",
        ],
    );
    assert_eq!(w.code, 0, "{}", w.stderr);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            repro.to_str().unwrap(),
            "--dump-a",
            "ops/a.npy",
            "--dump-b",
            "ops/b.npy",
        ];
        args.extend_from_slice(extra);
        kwb(d, &args)
    };
    // Read as N x K (the default), b.npy's 128 x 96 has K = 96, not A's 128.
    let r = run(&[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("has K = 128"), "{}", r.stderr);
    // A shape that disagrees with the dumps.
    let r = run(&["--b-layout", "kn", "--shape", "64,96,64"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--shape says M,N,K = 64,96,64"),
        "{}",
        r.stderr
    );
    // A short dump is an error, never a fallback.
    let a = std::fs::read(d.join("ops/a.npy")).unwrap();
    std::fs::write(d.join("ops/short.npy"), &a[..a.len() / 2]).unwrap();
    let r = kwb(
        d,
        &[
            "run",
            repro.to_str().unwrap(),
            "--dump-a",
            "ops/short.npy",
            "--dump-b",
            "ops/b.npy",
            "--b-layout",
            "kn",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("short.npy"), "{}", r.stderr);
    // A raw dump needs a shape.
    std::fs::write(d.join("ops/a.bin"), [0u8; 16]).unwrap();
    let r = kwb(
        d,
        &[
            "run",
            repro.to_str().unwrap(),
            "--dump-a",
            "ops/a.bin",
            "--dump-b",
            "ops/b.npy",
            "--dump-dtype",
            "f32",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("a raw dump carries no shape"),
        "{}",
        r.stderr
    );
    // Good dumps: without a GPU the reproducer is built, every rung prepared, and the
    // run ends saying what the launch needs.
    if !driver_here() {
        let r = run(&["--b-layout", "kn"]);
        assert_eq!(r.code, 7, "{}", r.stderr);
        assert!(r.stderr.contains("no CUDA driver"), "{}", r.stderr);
        // Piped, the progress line of the long steps draws nothing.
        assert!(
            !r.stderr.contains('\r') && !r.stderr.contains("building the reproducer"),
            "{:?}",
            r.stderr
        );
        assert!(
            r.stderr.contains("random:1, dump;"),
            "the dump rung is last: {}",
            r.stderr
        );
        assert!(r.stderr.contains("repro.so (nvcc"), "built: {}", r.stderr);
        let again = run(&["--b-layout", "kn"]);
        assert!(
            again.stderr.contains("repro.so (cached)"),
            "{}",
            again.stderr
        );
    }
}
