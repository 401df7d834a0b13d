//! End-to-end tests of the `kwb-extract` binary: the three files it writes, a
//! `build.sh` whose every argument is quoted (paths with spaces and shell
//! metacharacters survive), and bad input — a clear message, the documented exit code,
//! the input untouched, nothing written.

use std::path::Path;
use std::process::Command;

use tempfile::TempDir;

const SOURCE: &str = r#"constexpr int kThreads = 128;
template <int BM, int BN>
__global__ void gemm(int M, float* C) { C[threadIdx.x] = BM + BN + M; }
__global__ void plain(float* C) { C[0] = 1.f; }
void launch(int M, float* C) {
  constexpr int BM = 64;
  gemm<BM, BM * 2><<<M / BM, kThreads>>>(M, C);
}
"#;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn extract(dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kwb-extract"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("kwb-extract runs");
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn setup() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.cu"), SOURCE).unwrap();
    dir
}

#[test]
fn writes_the_reproducer_the_manifest_and_a_quoted_build_script() {
    let dir = setup();
    let out = "out dir $(touch pwned)";
    let run = extract(
        dir.path(),
        &[
            "k.cu",
            "--kernel",
            "gemm",
            "-D",
            "TILE=4",
            "-I",
            "inc; rm -rf x",
            "-o",
            out,
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("instantiation: gemm<64, 128>"),
        "{}",
        run.stdout
    );
    let written = dir.path().join(out);
    let repro = std::fs::read_to_string(written.join("repro.cu")).unwrap();
    assert!(repro.contains("&gemm<64, 128>") && !repro.contains("void launch("));
    let manifest = std::fs::read_to_string(written.join("kwb.toml")).unwrap();
    assert!(
        manifest.contains("instantiation = \"gemm<64, 128>\""),
        "{manifest}"
    );
    assert!(manifest.contains("entry = \"kwb_launch\""));
    assert!(manifest.contains("written = \"BM * 2\""));
    assert!(manifest.contains("role = \"m\""), "{manifest}");
    assert!(manifest.contains("role = \"C\""), "{manifest}");
    let script = std::fs::read_to_string(written.join("build.sh")).unwrap();
    assert!(script.contains("'-DTILE=4'"), "{script}");
    // build.sh names no path of this machine: the include folders are in includes.txt
    // (or KWB_INCLUDES where the reproducer is built).
    let root = dir.path().canonicalize().unwrap();
    assert!(!script.contains(&*root.display().to_string()), "{script}");
    let includes = std::fs::read_to_string(written.join("includes.txt")).unwrap();
    assert!(includes.contains("inc; rm -rf x\n"), "{includes}");
    // Run with a stand-in compiler, it passes each folder whole; KWB_INCLUDES replaces
    // them.
    let echoed = |env: Option<&str>| {
        let mut c = Command::new("sh");
        c.arg(written.join("build.sh")).env("NVCC", "echo");
        match env {
            Some(v) => c.env("KWB_INCLUDES", v),
            None => c.env_remove("KWB_INCLUDES"),
        };
        let o = c.output().unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let here = echoed(None);
    assert!(here.contains("inc; rm -rf x"), "{here}");
    assert!(here.contains("-I. "), "{here}");
    let elsewhere = echoed(Some("/opt/cutlass/include:/opt/a b"));
    assert!(
        elsewhere.contains("-I/opt/cutlass/include -I/opt/a b"),
        "{elsewhere}"
    );
    assert!(!elsewhere.contains("rm -rf"), "{elsewhere}");
    // Nothing in the paths ran.
    assert!(!dir.path().join("pwned").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("k.cu")).unwrap(),
        SOURCE
    );
    // The script parses as shell (without running nvcc).
    let check = Command::new("sh")
        .arg("-n")
        .arg(written.join("build.sh"))
        .status()
        .unwrap();
    assert!(check.success());
}

#[test]
fn bad_input_gets_a_clear_message_and_writes_nothing() {
    let dir = setup();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["missing.cu", "--kernel", "gemm", "-o", "o1"],
            2,
            "missing.cu",
        ),
        (
            &["k.cu", "--kernel", "gem", "-o", "o2"],
            3,
            "kernels defined here: gemm, plain",
        ),
        (
            &["k.cu", "--template", "gemm<1", "-o", "o3"],
            2,
            "is not a template spec",
        ),
        (
            &["k.cu", "--template", "gemm<1, 2, 3>", "-o", "o4"],
            2,
            "takes 2 template arguments",
        ),
        (
            &["k.cu", "--template", "gemm<1>", "-o", "o5"],
            2,
            "no argument for template parameter `BN`",
        ),
        (&["k.cu", "-o", "o6"], 2, "--kernel"),
        (
            &[
                "k.cu",
                "--kernel",
                "gemm",
                "--template",
                "gemm<1, 2>",
                "-o",
                "o7",
            ],
            2,
            "cannot be used with",
        ),
    ];
    for (args, code, message) in cases {
        let run = extract(dir.path(), args);
        assert_eq!(run.code, *code, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
        let out = args.last().unwrap();
        assert!(!dir.path().join(out).exists(), "{args:?} wrote {out}");
    }
    // A library kernel behind an adapter: the file must build its Arguments.
    std::fs::write(
        dir.path().join("adapter.cu"),
        "#include \"cutlass/gemm/device/gemm_universal_adapter.h\"\n\
         using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;\n\
         void run() { Gemm gemm; }\n",
    )
    .unwrap();
    let run = extract(dir.path(), &["adapter.cu", "--kernel", "Gemm", "-o", "o9"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "no function in this file declares the adapter's arguments, `Gemm::Arguments`"
        ),
        "{}",
        run.stderr
    );
    assert!(!dir.path().join("o9").exists());
    let run = extract(dir.path(), &["adapter.cu", "--kernel", "gemm", "-o", "o10"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("library kernels behind an adapter (--kernel ALIAS): Gemm (= cutlass::gemm::device::GemmUniversalAdapter<Kernel>)"),
        "{}",
        run.stderr
    );
    // A kernel without template parameters needs no launch.
    let run = extract(dir.path(), &["k.cu", "--kernel", "plain", "-o", "o8"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("k.cu")).unwrap(),
        SOURCE
    );
}

#[cfg(unix)]
#[test]
fn an_unwritable_output_folder_is_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = setup();
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    // Root ignores permissions; the check means something only where they hold.
    if std::fs::write(locked.join("probe"), "").is_ok() {
        return;
    }
    let run = extract(dir.path(), &["k.cu", "--kernel", "gemm", "-o", "locked"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("locked"), "{}", run.stderr);
    assert!(std::fs::read_dir(&locked).unwrap().next().is_none());
}

#[test]
fn the_production_flags_come_from_compile_commands() {
    let dir = setup();
    let root = dir.path().canonicalize().unwrap();
    let db = format!(
        r#"[{{"directory": "{}", "file": "k.cu",
             "command": "/opt/cuda/bin/nvcc -Iinc -DTILE=8 -std=c++20 -gencode arch=compute_80,code=sm_80 --expt-relaxed-constexpr -O2 -c k.cu -o k.o"}}]"#,
        root.display()
    );
    std::fs::write(dir.path().join("compile_commands.json"), db).unwrap();
    let run = extract(
        dir.path(),
        &[
            "k.cu",
            "--kernel",
            "gemm",
            "-p",
            "compile_commands.json",
            "-o",
            "out",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let script = std::fs::read_to_string(dir.path().join("out/build.sh")).unwrap();
    for flag in [
        "'-std=c++20'",
        "'-arch=sm_80'",
        "'--expt-relaxed-constexpr'",
        "'-O2'",
        "'-DTILE=8'",
    ] {
        assert!(script.contains(flag), "{flag} missing: {script}");
    }
    let includes = std::fs::read_to_string(dir.path().join("out/includes.txt")).unwrap();
    assert!(
        includes.contains(&format!("{}/inc\n", root.display())),
        "{includes}"
    );
    assert!(!script.contains("'-O3'"), "{script}");
    let manifest = std::fs::read_to_string(dir.path().join("out/kwb.toml")).unwrap();
    assert!(
        manifest.contains("compile_commands.json and the command line"),
        "{manifest}"
    );
    // A database without the file: an error, nothing written.
    std::fs::write(dir.path().join("other.json"), "[]").unwrap();
    let run = extract(
        dir.path(),
        &["k.cu", "--kernel", "gemm", "-p", "other.json", "-o", "o2"],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("none of its 0 entries compiles"),
        "{}",
        run.stderr
    );
    assert!(!dir.path().join("o2").exists());
}

#[test]
fn the_production_flags_come_from_a_build_log() {
    let dir = setup();
    let log = "[jit] compiling\nRunning: cuda/bin/nvcc -std=c++20 -arch=sm_90a \\\n  -DTILE=16 -O2 -c jit_7/k.cu -o jit_7/k.o\n";
    std::fs::write(dir.path().join("jit.log"), log).unwrap();
    let run = extract(
        dir.path(),
        &[
            "k.cu",
            "--kernel",
            "gemm",
            "--flags-from",
            "jit.log",
            "-o",
            "out",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let script = std::fs::read_to_string(dir.path().join("out/build.sh")).unwrap();
    for flag in ["'-std=c++20'", "'-arch=sm_90a'", "'-DTILE=16'", "'-O2'"] {
        assert!(script.contains(flag), "{flag} missing: {script}");
    }
    let manifest = std::fs::read_to_string(dir.path().join("out/kwb.toml")).unwrap();
    assert!(manifest.contains("the build log jit.log"), "{manifest}");
    // A log without nvcc: an error, nothing written; -p and --flags-from exclude each other.
    std::fs::write(dir.path().join("empty.log"), "make: nothing to be done\n").unwrap();
    let run = extract(
        dir.path(),
        &[
            "k.cu",
            "--kernel",
            "gemm",
            "--flags-from",
            "empty.log",
            "-o",
            "o2",
        ],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("it shows no nvcc command"),
        "{}",
        run.stderr
    );
    assert!(!dir.path().join("o2").exists());
    let run = extract(
        dir.path(),
        &[
            "k.cu",
            "--kernel",
            "gemm",
            "-p",
            "x.json",
            "--flags-from",
            "jit.log",
            "-o",
            "o3",
        ],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
}

/// A launcher that declares its kernel `extern` (the kernel compiled in a translation
/// unit of its own, as JIT libraries generate them): the refusal says where it is
/// declared and which file beside it defines it, and writes nothing; run on that file,
/// the kernel is reproduced alone.
#[test]
fn a_kernel_defined_in_another_file_is_named_with_the_file_that_defines_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gemm_binding.cu"),
        r#"// launcher for kernel 'kernel_gemm'
extern "C" __global__ void kernel_gemm(const float* A, const float* B, float* D, int M, int N, int K);
void run(const float* A, const float* B, float* D, int M, int N, int K) {
  kernel_gemm<<<dim3(N / 16, M / 16), 256>>>(A, B, D, M, N, K);
}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("gemm_kernel.cu"),
        r#"extern "C" __global__ void kernel_gemm(const float* A, const float* B, float* D, int M, int N, int K) {
  int m = blockIdx.y * 16 + threadIdx.x / 16, n = blockIdx.x * 16 + threadIdx.x % 16;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += A[m * K + k] * B[n * K + k];
  D[m * N + n] = acc;
}
"#,
    )
    .unwrap();
    let run = extract(
        dir.path(),
        &["gemm_binding.cu", "--kernel", "kernel_gemm", "-o", "out"],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("declared in this file (line 2)"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("`gemm_kernel.cu`"), "{}", run.stderr);
    assert!(!dir.path().join("out").exists());

    let run = extract(
        dir.path(),
        &["gemm_kernel.cu", "--kernel", "kernel_gemm", "-o", "out"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(dir.path().join("out/repro.cu").exists());
}

#[test]
fn a_reproducer_that_reads_its_maps_at_the_launch_builds_with_the_wrap_flags() {
    // The launcher builds the maps; the kernel takes them by value.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("maps.cu"),
        r#"#include <cuda.h>
__global__ void tma_gemm(const __grid_constant__ CUtensorMap map_a, float* D, int K) {}
static CUtensorMap make_map(const void* p, int rows, int cols) { CUtensorMap m{}; return m; }
int launch(const float* A, const float* B, float* D, int M, int N, int K, cudaStream_t s) {
  CUtensorMap a = make_map(A, M, K);
  tma_gemm<<<dim3(N / 64, M / 64), 128, 0, s>>>(a, D, K);
  return 0;
}
int main() { return launch(nullptr, nullptr, nullptr, 128, 128, 64, 0); }
"#,
    )
    .unwrap();
    let run = extract(
        dir.path(),
        &["maps.cu", "--kernel", "tma_gemm", "-o", "out"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let repro = std::fs::read_to_string(dir.path().join("out/repro.cu")).unwrap();
    assert!(repro.contains(kwb_extract::WRAPPER), "no capture section");
    let script = std::fs::read_to_string(dir.path().join("out/build.sh")).unwrap();
    for symbol in kwb_extract::LAUNCH_ENTRIES_WRAPPED {
        assert!(
            script.contains(&format!("'-Xlinker=--wrap={symbol}'")),
            "{script}"
        );
    }
}
