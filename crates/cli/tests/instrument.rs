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
fn full_tile_needs_one_cta_and_defines_the_macro() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "gemm.cu", KERNEL);
    let run = instrument(dir.path(), &["gemm.cu", "-o", "out.cu", "--full-tile"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("needs one CTA"), "{}", run.stderr);
    assert!(!dir.path().join("out.cu").exists());
    let run = instrument(
        dir.path(),
        &[
            "gemm.cu",
            "-o",
            "out.cu",
            "--full-tile",
            "--cta",
            "1,0,0",
            "--absmax-only",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = std::fs::read_to_string(dir.path().join("out.cu")).unwrap();
    assert!(out.contains("#define KWB_TRACE_FULL 1"));
    assert!(out.contains("#define KWB_TRACE_MINMAX 0"));
    assert!(out.contains("#define KWB_TRACE_CTA_X 1"));
}

#[test]
fn a_screen_is_a_summary_of_one_row_per_site() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "gemm.cu", KERNEL);
    let run = instrument(
        dir.path(),
        &["gemm.cu", "-o", "out.cu", "--screen", "--values", "3"],
    );
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("keeps no samples"), "{}", run.stderr);
    assert!(!dir.path().join("out.cu").exists());
    let run = instrument(
        dir.path(),
        &["gemm.cu", "-o", "out.cu", "--screen", "--cta", "all"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = std::fs::read_to_string(dir.path().join("out.cu")).unwrap();
    let runtime = out.find("namespace kwb").expect("the runtime is inlined");
    for define in ["#define KWB_TRACE_SUMMARY 1", "#define KWB_TRACE_SCREEN 1"] {
        let at = out.find(define).unwrap_or_else(|| panic!("no {define}"));
        assert!(at < runtime, "{define} after the runtime");
    }
    assert!(
        run.stderr
            .contains("screen: every CTA's probe calls fold into one row per site"),
        "{}",
        run.stderr
    );
}

#[test]
fn max_regs_defines_the_occupancy_floor_and_says_where_it_went() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "gemm.cu", KERNEL);
    for bad in ["0", "256", "many"] {
        let run = instrument(
            dir.path(),
            &["gemm.cu", "-o", "out.cu", "--screen", "--max-regs", bad],
        );
        assert_eq!(run.code, 2, "--max-regs {bad}: {}", run.stderr);
        assert!(!dir.path().join("out.cu").exists());
    }
    let run = instrument(
        dir.path(),
        &["gemm.cu", "-o", "out.cu", "--screen", "--max-regs", "58"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = std::fs::read_to_string(dir.path().join("out.cu")).unwrap();
    let runtime = out.find("namespace kwb").expect("the runtime is inlined");
    let at = out
        .find("#define KWB_TRACE_MAX_REGS 58")
        .expect("the register count is defined");
    assert!(at < runtime, "KWB_TRACE_MAX_REGS after the runtime");
    assert!(run.stderr.contains("occupancy floor"), "{}", run.stderr);
}

#[test]
fn summary_defines_the_macro_and_refuses_samples() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "gemm.cu", KERNEL);
    let run = instrument(
        dir.path(),
        &["gemm.cu", "-o", "out.cu", "--summary", "--values", "4"],
    );
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("keeps no samples"), "{}", run.stderr);
    assert!(!dir.path().join("out.cu").exists());
    let run = instrument(
        dir.path(),
        &[
            "gemm.cu",
            "-o",
            "out.cu",
            "--summary",
            "--full-tile",
            "--cta",
            "0,0,0",
        ],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(!dir.path().join("out.cu").exists());
    let run = instrument(
        dir.path(),
        &["gemm.cu", "-o", "out.cu", "--summary", "--cta", "all"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = std::fs::read_to_string(dir.path().join("out.cu")).unwrap();
    assert!(out.contains("#define KWB_TRACE_SUMMARY 1"));
    assert!(out.find("#define KWB_TRACE_SUMMARY 1") < out.find("namespace kwb"));
    assert!(
        run.stderr.contains("summary: every CTA's probe calls fold"),
        "{}",
        run.stderr
    );
    // The table has a row for each of the file's sites, not the header's default.
    let probes = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("probe "))
        .count();
    let define = format!("#define KWB_TRACE_SUMMARY_SITES {probes}\n");
    assert!(out.find(&define) < out.find("namespace kwb"), "{define}");
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

#[test]
fn overlay_instruments_included_library_headers_without_touching_them() {
    let dir = TempDir::new().unwrap();
    std::fs::create_dir_all(dir.path().join("inc/lib")).unwrap();
    let header = format!("#pragma once\n{KERNEL}");
    write(dir.path(), "inc/lib/collective.hpp", &header);
    // A header with only a thread-level loop (no stage wait) stays out of the overlay.
    write(
        dir.path(),
        "inc/lib/thread.hpp",
        "#pragma once\n__device__ void fma4(float* d, const float* a, const float* b) {\n  for (int i = 0; i < 4; ++i) d[i] += a[i] * b[i];\n}\n",
    );
    let main = "#include <cstdio>\n#include \"lib/collective.hpp\"\n#include \"lib/thread.hpp\"\nint main() { return 0; }\n";
    write(dir.path(), "main.cu", main);
    let run = instrument(
        dir.path(),
        &[
            "main.cu",
            "-o",
            "traced.cu",
            "--overlay",
            "overlay",
            "-I",
            "inc",
            "--gate",
            "REDUCTION_SIZE == 64",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("1 overlay header(s)"), "{}", run.stderr);
    // The input has no kernel of its own: copied unchanged, and said so.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("traced.cu")).unwrap(),
        main
    );
    assert!(run.stderr.contains("copied unchanged"), "{}", run.stderr);
    // The library header is untouched; its instrumented copy sits at the same
    // relative path under the overlay, gated, and strips back to the original.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("inc/lib/collective.hpp")).unwrap(),
        header
    );
    let copy = std::fs::read_to_string(dir.path().join("overlay/lib/collective.hpp")).unwrap();
    assert!(
        copy.contains("kwb::enabled && (REDUCTION_SIZE == 64)"),
        "{copy}"
    );
    assert_eq!(kwb_instrument::strip(&copy).unwrap(), header);
    assert!(!dir.path().join("overlay/lib/thread.hpp").exists());
    // The copies include one shared runtime in the overlay's root instead of each
    // carrying its text.
    assert!(copy.contains("#include \"kwb_trace.cuh\""), "{copy}");
    assert!(!copy.contains("KWB_TRACE_CUH_"), "{copy}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("overlay/kwb_trace.cuh")).unwrap(),
        kwb_runtime::HEADER
    );
    // -I belongs to the overlay.
    let run = instrument(dir.path(), &["main.cu", "-o", "t2.cu", "-I", "inc"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

/// `main.cu` (a kernel) including `inc/task.cuh` (another), both with sites.
fn kernel_with_a_task_header() -> TempDir {
    let dir = TempDir::new().unwrap();
    std::fs::create_dir_all(dir.path().join("inc")).unwrap();
    write(
        dir.path(),
        "inc/task.cuh",
        &format!("#pragma once\n{KERNEL}"),
    );
    write(
        dir.path(),
        "main.cu",
        &format!(
            "#include \"task.cuh\"\n{}",
            KERNEL.replace("gemm(", "gemm2(")
        ),
    );
    dir
}

#[test]
fn overlay_site_ids_continue_after_the_input_s_own() {
    let dir = kernel_with_a_task_header();
    let run = instrument(
        dir.path(),
        &["main.cu", "-o", "traced.cu", "--overlay", "ov", "-I", "inc"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let own = std::fs::read_to_string(dir.path().join("traced.cu")).unwrap();
    let copy = std::fs::read_to_string(dir.path().join("ov/task.cuh")).unwrap();
    // Probe calls after the inlined runtime header (whose comments show examples).
    let ids = |text: &str| -> Vec<u32> {
        let text = &text[text.find("#line 1 ").unwrap()..];
        text.match_indices("kwb::probe")
            .filter_map(|(i, _)| {
                let rest = &text[i..];
                let open = rest.find('(')?;
                rest[open + 1..].split(',').next()?.trim().parse().ok()
            })
            .collect()
    };
    let (a, b) = (ids(&own), ids(&copy));
    assert!(!a.is_empty() && !b.is_empty(), "{own}\n{copy}");
    assert!(
        a.iter().max() < b.iter().min(),
        "ids overlap: {a:?} vs {b:?}"
    );
    // Two site tables, one per file, under different guards.
    assert!(
        copy.contains(&format!("_{}\n", b.iter().min().unwrap())),
        "{copy}"
    );
}

/// A summary through an overlay: the input and every copy name the unit's site count
/// (the input's ids and the copies'), so whichever includes the runtime first sizes the
/// table with a row for every site.
#[test]
fn a_summary_through_an_overlay_has_a_row_for_every_site() {
    let dir = kernel_with_a_task_header();
    let run = instrument(
        dir.path(),
        &[
            "main.cu",
            "-o",
            "traced.cu",
            "--overlay",
            "ov",
            "-I",
            "inc",
            "--summary",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let probes = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("probe "))
        .count();
    assert!(probes > 1, "{}", run.stderr);
    let define = format!("#define KWB_TRACE_SUMMARY_SITES {probes}\n");
    for file in ["traced.cu", "ov/task.cuh"] {
        let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
        assert!(text.contains(&define), "{file} lacks {define}");
    }
    assert!(
        run.stderr.contains(&format!("{probes} site rows")),
        "{}",
        run.stderr
    );
}

/// The suite's CUTLASS 3.x GEMM (`kernels/cutlass3x_sm90`), whose mainloop lives in a
/// CUTLASS collective: instrumented through `--overlay` and compiled with the overlay
/// first on the include path, it gives the original's SASS without `KWB_TRACE`, and
/// carries probes with it. Needs nvcc and the CUTLASS headers: runs when
/// `KWB_RUN_SLOW_TESTS=1` (as `cargo xtask test` sets it).
#[test]
fn the_cutlass_family_through_the_overlay_costs_nothing_disabled() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let env = kwb_toolchain::Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).expect("the CUDA toolchain");
    let cutlass = kwb_toolchain::cutlass(&env).expect("the CUTLASS headers");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let source = repo.join("kernels/cutlass3x_sm90/gemm.cu");
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("gemm.cu");
    let overlay = dir.path().join("overlay");
    let run = instrument(
        dir.path(),
        &[
            source.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--overlay",
            overlay.to_str().unwrap(),
            "-I",
            cutlass.include.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let flags = |first: Option<&Path>, defines: &[&str]| {
        let mut includes: Vec<PathBuf> = first.into_iter().map(Path::to_owned).collect();
        includes.push(repo.join("kernels/common"));
        includes.push(cutlass.include.clone());
        includes.extend(cutlass.util_include.clone());
        kwb_toolchain::CompileFlags {
            includes,
            defines: defines.iter().map(|d| (*d).to_owned()).collect(),
            extra: vec!["-O3".to_owned(), "--expt-relaxed-constexpr".to_owned()],
            ..kwb_toolchain::CompileFlags::default()
        }
    };
    let builds = [
        ("orig", source.clone(), flags(None, &["KWB_DEFECT=none"])),
        (
            "off",
            out.clone(),
            flags(Some(&overlay), &["KWB_DEFECT=none"]),
        ),
        (
            "on",
            out.clone(),
            flags(Some(&overlay), &["KWB_DEFECT=none", "KWB_TRACE"]),
        ),
    ];
    let sass: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = builds
            .iter()
            .map(|(name, file, flags)| {
                let (toolchain, dir) = (&toolchain, dir.path());
                scope.spawn(move || {
                    // The device pass alone: the SASS is what is compared.
                    let object = dir.join(format!("{name}.cubin"));
                    kwb_toolchain::compile_cubin(toolchain, file, flags, &object)
                        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
                    kwb_toolchain::sass_instructions(
                        &kwb_toolchain::sass(toolchain, &object).unwrap(),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(sass[0].lines().count() > 100, "no kernel SASS");
    assert!(sass[0] == sass[1], "SASS differs without KWB_TRACE");
    assert!(
        sass[2].lines().count() > sass[0].lines().count(),
        "the traced build carries no probe"
    );
}
