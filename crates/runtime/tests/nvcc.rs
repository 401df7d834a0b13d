//! Compiles a tiny kernel that includes `kwb_trace.cuh` and checks the zero-cost
//! property: without `KWB_TRACE` its SASS equals that of the same kernel with neither
//! the header nor the probes; with it, the gated instantiation carries the probes and
//! the other instantiation is still untouched.
//!
//! Needs nvcc, so it only runs when `KWB_RUN_SLOW_TESTS=1`; nvcc is
//! `$KWB_CUDA_HOME/bin/nvcc` and cuobjdump sits next to it. kwb-runtime depends on no
//! other kwb crate, so this test spawns the tools itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel. Lines between `// probe {` and `// probe }`, and the `#include` of the
/// header, are the instrumentation: the baseline is this text without them.
const KERNEL: &str = r#"#include "kwb_trace.cuh"
#include <cuda_bf16.h>

// probe {
static const kwb::SiteInfo kwb_sites[] = {{0, "tiny.cu", 31, "acc"}, {1, "tiny.cu", 23, "smem_b"}};
[[maybe_unused]] static const bool kwb_sites_registered = kwb::register_sites(kwb_sites);
// probe }

template <int K>
__global__ void tiny_gemm(const __nv_bfloat16* a, const __nv_bfloat16* b, float* out, int batch) {
  __shared__ __nv_bfloat16 smem_b[16 * 16];
  float acc[2][2][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;
  for (int k_tile = 0; k_tile < K / 16; ++k_tile) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) smem_b[i] = b[k_tile * 256 + i];
    __syncthreads();
    // probe {
    if constexpr (kwb::enabled && (K == 64)) {
      if (kwb::warp_id() == 0) {
        kwb::probe_tile(1, kwb::Kind::OperandB, kwb::tag_of("K == 64"), k_tile, blockIdx.x,
                        blockIdx.y, smem_b, 256, batch, kwb::Axis::N,
                        kwb::RowMajor{kwb::Axis::N, kwb::Axis::K, 16, 0, k_tile * 16});
      }
    }
    // probe }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int v = 0; v < 4; ++v)
          acc[i][j][v] += __bfloat162float(a[threadIdx.x + k_tile]) *
                          __bfloat162float(smem_b[(i * 8 + j * 4 + v + threadIdx.x) % 256]);
    __syncthreads();
    // probe {
    if constexpr (kwb::enabled && (K == 64)) {
      kwb::probe_array(0, kwb::Kind::Accumulator, kwb::tag_of("K == 64"), k_tile, blockIdx.x,
                       blockIdx.y, acc, batch, kwb::Axis::N, [&](int i) {
                         return kwb::Coord{int(threadIdx.x) / 4 + (i / 8) * 8,
                                           (i / 4 % 2) * 8 + i % 4, -1};
                       });
    }
    // probe }
  }
  // probe {
  if constexpr (kwb::enabled && (K == 64)) {
    kwb::probe_value(2, kwb::Kind::Epilogue, kwb::tag_of("K == 64"), -1, blockIdx.x, blockIdx.y,
                     acc[0][0][0], kwb::all_rows, kwb::Axis::M,
                     kwb::Coord{int(threadIdx.x), 0, -1});
  }
  // probe }
  out[threadIdx.x] = acc[0][0][0] + acc[1][1][3] + acc[0][1][2] + acc[1][0][1];
}

__global__ void plain_copy(const float* in, float* out) {
  // probe {
  if constexpr (kwb::enabled) {
    kwb::probe_tile(3, kwb::Kind::Load, 0u, -1, 0, 0, in, 32);
    kwb::tile_context(4, 0u, 0, 32);
  }
  // probe }
  out[threadIdx.x] = in[threadIdx.x] * 2.0f;
}

template __global__ void tiny_gemm<64>(const __nv_bfloat16*, const __nv_bfloat16*, float*, int);
template __global__ void tiny_gemm<128>(const __nv_bfloat16*, const __nv_bfloat16*, float*, int);

// probe {
int kwb_host_side() {
  if (kwb::trace_reset() != cudaSuccess) return 1;
  if (kwb_trace_reset_async(0) != cudaSuccess) return 1;
  if (kwb::set_filter(0, 0, 0, 1, 3) != cudaSuccess) return 1;
  return kwb_trace_flush("trace.kwbt") ? 0 : 1;
}
// probe }
"#;

const GATED: &str = "_Z9tiny_gemmILi64EEvPK13__nv_bfloat16S2_Pfi";
const UNGATED: &str = "_Z9tiny_gemmILi128EEvPK13__nv_bfloat16S2_Pfi";

fn slow_tests_enabled() -> bool {
    std::env::var_os("KWB_RUN_SLOW_TESTS").is_some_and(|value| value == "1")
}

/// The CUDA `bin` folder, or `None` (with a message) when KWB_CUDA_HOME is unset.
#[allow(clippy::print_stderr, reason = "a skipped slow test says why")]
fn cuda_bin() -> Option<PathBuf> {
    let Some(home) = std::env::var_os("KWB_CUDA_HOME") else {
        eprintln!("skipped: KWB_CUDA_HOME is unset; point it at a CUDA home with bin/nvcc");
        return None;
    };
    let bin = PathBuf::from(home).join("bin");
    assert!(
        bin.join("nvcc").is_file(),
        "KWB_CUDA_HOME has no bin/nvcc: {}",
        bin.display()
    );
    Some(bin)
}

/// The kernel without its instrumentation.
fn baseline(source: &str) -> String {
    let mut out = String::new();
    let mut in_probe = false;
    for line in source.lines() {
        match line.trim() {
            "// probe {" => in_probe = true,
            "// probe }" => in_probe = false,
            "#include \"kwb_trace.cuh\"" => {}
            _ if in_probe => {}
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

fn run(bin: &Path, tool: &str, args: &[&str], dir: &Path) -> String {
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let output = Command::new(bin.join(tool))
        .args(args)
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .unwrap_or_else(|err| panic!("cannot run {tool}: {err}"));
    assert!(
        output.status.success(),
        "{tool} {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn compile(bin: &Path, dir: &Path, source: &str, arch: &str, defines: &[&str]) -> PathBuf {
    let object = format!("{source}.{arch}{}.o", defines.concat());
    let arch = format!("-arch={arch}");
    let mut args = vec![
        "-std=c++17",
        "-O3",
        arch.as_str(),
        "-c",
        source,
        "-o",
        &object,
    ];
    args.extend(defines);
    run(bin, "nvcc", &args, dir);
    dir.join(object)
}

/// The SASS of each kernel function, addresses and whitespace normalized.
fn sass(bin: &Path, object: &Path) -> BTreeMap<String, String> {
    let dump = run(
        bin,
        "cuobjdump",
        &["-sass", object.to_str().unwrap()],
        object.parent().unwrap(),
    );
    let mut functions = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in dump.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("Function : ") {
            functions.extend(current.take());
            current = Some((name.to_owned(), String::new()));
        } else if line.starts_with("Fatbin") {
            functions.extend(current.take());
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(&normalize(line));
            body.push('\n');
        }
    }
    functions.extend(current);
    assert!(
        !functions.is_empty(),
        "no SASS in {}:\n{dump}",
        object.display()
    );
    functions
}

/// One SASS line without its `/*0a40*/` address and with single spaces.
fn normalize(line: &str) -> String {
    let line = match line.strip_prefix("/*") {
        Some(rest)
            if rest
                .find("*/")
                .is_some_and(|end| rest[..end].chars().all(|c| c.is_ascii_hexdigit())) =>
        {
            &rest[rest.find("*/").unwrap() + 2..]
        }
        _ => line,
    };
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The nvcc `bin` folder and a temporary folder holding the header, when the slow
/// tests are enabled and nvcc is there.
fn setup() -> Option<(PathBuf, tempfile::TempDir)> {
    if !slow_tests_enabled() {
        return None;
    }
    let bin = cuda_bin()?;
    let temp = tempfile::tempdir().unwrap();
    std::fs::write(
        temp.path().join(kwb_runtime::HEADER_NAME),
        kwb_runtime::HEADER,
    )
    .unwrap();
    Some((bin, temp))
}

#[test]
fn header_costs_nothing_without_kwb_trace_and_probes_with_it() {
    let Some((bin, temp)) = setup() else {
        return;
    };
    let dir = temp.path();
    let tag = kwb_runtime::tag("K == 64");
    let probed = format!("{KERNEL}\nstatic_assert(kwb::tag_of(\"K == 64\") == {tag}u);\n");
    std::fs::write(dir.join("probed.cu"), &probed).unwrap();
    std::fs::write(dir.join("plain.cu"), baseline(KERNEL)).unwrap();

    // Zero cost: the same SASS, function by function.
    let plain = sass(&bin, &compile(&bin, dir, "plain.cu", "sm_90a", &[]));
    let disabled_object = compile(&bin, dir, "probed.cu", "sm_90a", &[]);
    let disabled = sass(&bin, &disabled_object);
    assert_eq!(
        plain.keys().collect::<Vec<_>>(),
        disabled.keys().collect::<Vec<_>>()
    );
    for (name, code) in &plain {
        assert_eq!(code, &disabled[name], "{name}: the header changed the SASS");
    }
    let elf = run(
        &bin,
        "cuobjdump",
        &["-elf", disabled_object.to_str().unwrap()],
        dir,
    );
    assert!(
        !elf.contains("_ZN3kwb"),
        "a plain build defines kwb symbols:\n{elf}"
    );

    // Traced: the gated instantiation probes, the other one is untouched.
    let traced_object = compile(&bin, dir, "probed.cu", "sm_90a", &["-DKWB_TRACE"]);
    let traced = sass(&bin, &traced_object);
    assert_ne!(traced[GATED], plain[GATED], "the gated kernel has no probe");
    assert!(
        traced[GATED].contains("ATOMG.E.ADD.64"),
        "{}",
        traced[GATED]
    );
    assert!(
        !traced[GATED].contains("LDL") && !traced[GATED].contains("STL"),
        "probing the accumulator moved it to local memory:\n{}",
        traced[GATED]
    );
    assert_eq!(
        traced[UNGATED], plain[UNGATED],
        "the gate leaked into K == 128"
    );
    let elf = run(
        &bin,
        "cuobjdump",
        &["-elf", traced_object.to_str().unwrap()],
        dir,
    );
    for symbol in [
        kwb_runtime::symbols::RECORDS,
        kwb_runtime::symbols::CURSOR,
        kwb_runtime::symbols::FILTER,
    ] {
        assert!(elf.contains(symbol), "no {symbol} in the traced cubin");
    }

    // Ampere compiles too (the shuffle fallbacks are for older targets).
    let ampere = sass(
        &bin,
        &compile(&bin, dir, "probed.cu", "sm_80", &["-DKWB_TRACE"]),
    );
    assert!(ampere[GATED].contains("ATOMG"), "{}", ampere[GATED]);
}

#[test]
fn values_macro_and_capacity_macro_compile() {
    let Some((bin, temp)) = setup() else {
        return;
    };
    let dir = temp.path();
    std::fs::write(dir.join("probed.cu"), KERNEL).unwrap();
    let traced = sass(
        &bin,
        &compile(
            &bin,
            dir,
            "probed.cu",
            "sm_90a",
            &[
                "-DKWB_TRACE",
                "-DKWB_TRACE_VALUES=0",
                "-DKWB_TRACE_CAPACITY=16",
                "-DKWB_TRACE_CTA_X=0",
            ],
        ),
    );
    assert!(traced[GATED].contains("ATOMG"), "{}", traced[GATED]);
}

/// A summary build's probes claim nothing and wait for nothing: the gated kernel's
/// atomics are all reductions whose results nothing reads (RED), none an ATOMG.
#[test]
fn summary_probes_only_reduce() {
    let Some((bin, temp)) = setup() else {
        return;
    };
    let dir = temp.path();
    let (object, _) = reducing_build(&bin, dir, "-DKWB_TRACE_SUMMARY");
    // The table is a module global under the name the symbols module gives.
    let elf = run(&bin, "cuobjdump", &["-elf", object.to_str().unwrap()], dir);
    assert!(
        elf.contains(kwb_runtime::symbols::SUMMARY),
        "no summary table"
    );
    // Samples have nowhere to go in a summary: asking for them is a compile error.
    let error = compile_error(&bin, dir, &["-DKWB_TRACE_SUMMARY", "-DKWB_TRACE_VALUES=4"]);
    assert!(error.contains("KWB_TRACE_VALUES must be 0"), "{error}");
}

/// probed.cu built with -DKWB_TRACE and `define` (a summary or a screen): the object and
/// the gated kernel's SASS, whose atomics are all reductions nothing reads (a 64-bit
/// add and max), none an ATOMG.
fn reducing_build(bin: &Path, dir: &Path, define: &str) -> (PathBuf, String) {
    std::fs::write(dir.join("probed.cu"), KERNEL).unwrap();
    let object = compile(bin, dir, "probed.cu", "sm_90a", &["-DKWB_TRACE", define]);
    let gated = sass(bin, &object)[GATED].clone();
    assert!(gated.contains("REDG.E.ADD.64"), "{gated}");
    assert!(gated.contains("REDG.E.MAX.64"), "{gated}");
    assert!(!gated.contains("ATOMG"), "{gated}");
    (object, gated)
}

/// The compiler's messages for probed.cu built with -DKWB_TRACE and `defines`, which
/// must fail.
fn compile_error(bin: &Path, dir: &Path, defines: &[&str]) -> String {
    let rejected = std::process::Command::new(bin.join("nvcc"))
        .current_dir(dir)
        .args(["-c", "-arch=sm_90a", "-std=c++17", "-DKWB_TRACE"])
        .args(defines)
        .args(["probed.cu", "-o", "rejected.o"])
        .output()
        .unwrap();
    assert!(!rejected.status.success(), "{defines:?} compiled");
    String::from_utf8_lossy(&rejected.stderr).into_owned()
}

/// A screen's probes (a summary of one row per site, a cell per warp) reduce one word
/// over the warp and, like a summary's, claim nothing and wait for nothing; a screen
/// with K-tile rows is a compile error.
#[test]
fn screen_probes_only_reduce() {
    let Some((bin, temp)) = setup() else {
        return;
    };
    let dir = temp.path();
    let (_, gated) = reducing_build(&bin, dir, "-DKWB_TRACE_SCREEN");
    assert!(gated.contains("REDUX.MAX"), "{gated}");
    let error = compile_error(
        &bin,
        dir,
        &["-DKWB_TRACE_SCREEN", "-DKWB_TRACE_SUMMARY_K_TILES=4"],
    );
    assert!(
        error.contains("KWB_TRACE_SUMMARY_K_TILES must be 1"),
        "{error}"
    );
}

/// The tile spacing a probe derives from a fragment array's type, checked by the
/// compiler itself (static_assert), in a plain and a traced build.
#[test]
fn tile_indices_fit_the_array_type() {
    let Some((bin, temp)) = setup() else {
        return;
    };
    let dir = temp.path();
    std::fs::write(
        dir.join("fit.cu"),
        r#"#include <cuda_bf16.h>
#include "kwb_trace.cuh"
using kwb::detail::fit_index;
// float acc[4][8][4]: dimension 0 (m tiles) steps 32 floats, dimension 1 (n tiles) 4.
static_assert(fit_index<float[4][8][4], float>(0).stride == 32, "");
static_assert(fit_index<float[4][8][4], float>(0).extent == 4, "");
static_assert(fit_index<float[4][8][4], float>(1).stride == 4, "");
static_assert(fit_index<float[4][8][4], float>(1).extent == 8, "");
static_assert(fit_index<float[4][8][4], float>(-1).stride == 0, "");
// uint32_t a_frag[4][4] and b_frag[8][2] read as bf16: 8 and 4 values per tile.
static_assert(fit_index<unsigned[4][4], __nv_bfloat16>(0).stride == 8, "");
static_assert(fit_index<unsigned[8][2], __nv_bfloat16>(0).stride == 4, "");
// Value 100 of acc[4][8][4] is acc[3][1][0]: m tile 3, n tile 1.
static_assert(kwb::MmaM16n8k16C{0, 1}.fit<float[4][8][4], float>().m.at(100) == 3, "");
static_assert(kwb::MmaM16n8k16C{0, 1}.fit<float[4][8][4], float>().n.at(100) == 1, "");
// Without a dimension, coordinates stay within one MMA tile.
static_assert(kwb::MmaM16n8k16C{}.fit<float[4][8][4], float>().m.at(100) == 0, "");
__global__ void k(float* out) {
  float acc[4][8][4] = {};
  kwb::probe(0, kwb::Kind::Accumulator, 0u, 0, 0, 0, acc, 8, kwb::Axis::M,
             kwb::MmaM16n8k16C{0, 1});
  out[0] = acc[0][0][0];
}
"#,
    )
    .unwrap();
    compile(&bin, dir, "fit.cu", "sm_90a", &[]);
    compile(&bin, dir, "fit.cu", "sm_90a", &["-DKWB_TRACE"]);
}

/// A probe of a value kwb cannot read (a struct the kernel map took for a fragment)
/// compiles, plain and traced, and records nothing: the build never breaks on it.
#[test]
fn a_probe_of_an_unreadable_type_still_compiles() {
    let Some((bin, temp)) = setup() else {
        return;
    };
    let dir = temp.path();
    std::fs::write(
        dir.join("odd.cu"),
        r#"#include "kwb_trace.cuh"
struct TileWork { int k_iters; int tile_idx; };
__global__ void k(float* out) {
  TileWork w{3, 4};
  float acc[4] = {1, 2, 3, 4};
  kwb::probe(0, kwb::Kind::Accumulator, 0u, 0, 0, 0, w);
  kwb::probe(1, kwb::Kind::Accumulator, 0u, 0, 0, 0, acc);
  out[0] = acc[0] + w.k_iters;
}
"#,
    )
    .unwrap();
    compile(&bin, dir, "odd.cu", "sm_90a", &[]);
    compile(&bin, dir, "odd.cu", "sm_90a", &["-DKWB_TRACE"]);
}
