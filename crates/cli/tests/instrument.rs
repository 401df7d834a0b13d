//! End-to-end tests of the `kwb-instrument` binary: the rewrite, the strip round trip,
//! and bad input (output = input, unknown kernel, a gate out of scope, damaged markers,
//! an unwritable output) — a clear message, the documented exit code, the input
//! untouched and no partial output.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

const KERNEL: &str = r#"template <int REDUCTION_SIZE>
__global__ void gemm(const float* A, const float* B, float* C, int K) {
  __shared__ float As[16][16], Bs[16][16];
  float acc = 0.f;
  for (int kt = 0; kt < REDUCTION_SIZE / 16; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[kt * 16 + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[kt * 16 + threadIdx.y];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[threadIdx.x] = acc;
}
"#;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn instrument(dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kwb-instrument"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("kwb-instrument runs");
    let run = Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn instrument_then_strip_round_trips_through_the_binary() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "gemm.cu", KERNEL);
    let run = instrument(
        dir.path(),
        &[
            "gemm.cu",
            "-o",
            "traced.cu",
            "--gate",
            "REDUCTION_SIZE == 6144",
            "--diff",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("--- gemm.cu\n+++ traced.cu\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr
            .contains("probe 0: accumulator `acc` after each K tile in `gemm`"),
        "{}",
        run.stderr
    );
    let traced = std::fs::read_to_string(dir.path().join("traced.cu")).unwrap();
    assert!(traced.contains("if constexpr (kwb::enabled && (REDUCTION_SIZE == 6144))"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("gemm.cu")).unwrap(),
        KERNEL
    );
    let run = instrument(dir.path(), &["--strip", "traced.cu", "-o", "plain.cu"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("plain.cu")).unwrap(),
        KERNEL
    );
    // Instrumenting the instrumented file gives the same file.
    let run = instrument(
        dir.path(),
        &[
            "traced.cu",
            "-o",
            "again.cu",
            "--gate",
            "REDUCTION_SIZE == 6144",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let again = std::fs::read_to_string(dir.path().join("again.cu")).unwrap();
    assert_eq!(again.replace("traced.cu", "gemm.cu"), traced);
}

#[test]
fn the_output_may_not_be_the_input() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "gemm.cu", KERNEL);
    for output in ["gemm.cu", "./gemm.cu"] {
        let run = instrument(dir.path(), &["gemm.cu", "-o", output]);
        assert_eq!(run.code, 2);
        assert!(run.stderr.contains("is the input file"), "{}", run.stderr);
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("gemm.cu")).unwrap(),
        KERNEL
    );
}

#[test]
fn unknown_kernel_and_out_of_scope_gate_write_nothing() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "gemm.cu", KERNEL);
    let run = instrument(dir.path(), &["gemm.cu", "-o", "out.cu", "--kernel", "nope"]);
    assert_eq!(run.code, 3);
    assert!(
        run.stderr.contains("no kernel named `nope`"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("kernels here: gemm"), "{}", run.stderr);
    let run = instrument(
        dir.path(),
        &["gemm.cu", "-o", "out.cu", "--gate", "BATCH == 8"],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("names no template parameter of `gemm`"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("REDUCTION_SIZE"), "{}", run.stderr);
    let run = instrument(
        dir.path(),
        &["gemm.cu", "-o", "out.cu", "--k-tiles", "4..2"],
    );
    assert_eq!(run.code, 2);
    assert!(!dir.path().join("out.cu").exists());
}

#[test]
fn damaged_markers_and_unwritable_outputs_are_refused() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "gemm.cu", KERNEL);
    assert_eq!(
        instrument(dir.path(), &["gemm.cu", "-o", "traced.cu"]).code,
        0
    );
    let traced = std::fs::read_to_string(dir.path().join("traced.cu")).unwrap();
    write(
        dir.path(),
        "damaged.cu",
        &traced.replacen("/*}:kwb*/", "", 1),
    );
    let run = instrument(dir.path(), &["--strip", "damaged.cu", "-o", "plain.cu"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("has no partner"), "{}", run.stderr);
    assert!(!dir.path().join("plain.cu").exists());
    let run = instrument(dir.path(), &["gemm.cu", "-o", "missing/dir/out.cu"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("cannot write"), "{}", run.stderr);
}

#[test]
fn a_file_without_a_mainloop_has_nothing_to_probe() {
    let dir = TempDir::new().unwrap();
    write(
        dir.path(),
        "host.cu",
        "int add(int a, int b) { return a + b; }\n",
    );
    let run = instrument(dir.path(), &["host.cu", "-o", "out.cu"]);
    assert_eq!(run.code, 3);
    assert!(
        run.stderr.contains("no kernel with a mainloop"),
        "{}",
        run.stderr
    );
    assert!(!dir.path().join("out.cu").exists());
}
