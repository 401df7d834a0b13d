//! The reproducer's own `main()`, behind `KWB_REPRO_MAIN`, so repro.cu also runs
//! alone (`nvcc -DKWB_REPRO_MAIN … repro.cu -o repro && ./repro [M N K]`): the
//! all-ones rung with alpha = 2, every output checked against 2·K, the first mismatch
//! printed. It uses the same entry points a runner does (`kwb_config`,
//! `kwb_encode_<param>`, `kwb_launch`), so a file that runs alone runs the same launch.
//!
//! Invariant: it is written only when every kernel parameter is an operand, a size, a
//! leading dimension, alpha/beta or a descriptor an encoder fills, the operands' element
//! types are known, and the launch configuration has its entry point; otherwise the
//! manifest says why not.

use crate::host::{CONFIG, ENCODE_PREFIX, HostEntries, cast_type, field};
use crate::kernel::Param;

/// The macro that turns the standalone `main()` on.
pub const MAIN_MACRO: &str = "KWB_REPRO_MAIN";

/// The standalone `main()` for a kernel with `params`, or why there is none.
pub fn standalone(params: &[Param], host: &HostEntries) -> Result<String, String> {
    if host.config.is_none() {
        return Err("the launch configuration has no entry point".to_owned());
    }
    // The launcher's types first: main() is at file scope, as the launcher is, while
    // the kernel's parameter types may be names of its namespace.
    let all = || host.launcher.iter().chain(params);
    let element = |role: &str| {
        all()
            .find(|p| p.role == role)
            .and_then(|p| p.element.clone())
            .map(|e| e.trim_start_matches("const ").trim().to_owned())
    };
    let (Some(a), Some(b)) = (element("A"), element("B")) else {
        return Err("the element types of A and B are not known from the parameters".to_owned());
    };
    let (output, out_type) = match (element("D"), element("C")) {
        (Some(d), _) => ("D", d),
        (None, Some(c)) => ("C", c),
        (None, None) => {
            return Err("the kernel has no output operand (D, or C in place)".to_owned());
        }
    };
    let c_type = element("C").unwrap_or_else(|| out_type.clone());
    let mut args = String::new();
    let mut pointers = Vec::new();
    for (i, p) in params.iter().enumerate() {
        let local = format!("kwb_arg{i}");
        if p.role == "params" {
            let Some(e) = &host.params else {
                return Err(format!("nothing fills the Params blob `{}`", p.name));
            };
            let (fill, size, workspace) = (&e.fill, &e.size, &e.workspace);
            args.push_str(&format!(
                "  unsigned long long kwb_workspace_bytes = 0;\n  \
                 if (int e = {workspace}(&p, &kwb_workspace_bytes)) {{\n    std::printf(\"KWB_REPRO {workspace} returned %d\\n\", e);\n    return 2;\n  }}\n  \
                 void* kwb_workspace = nullptr;\n  \
                 if (kwb_workspace_bytes > 0 && (cudaMalloc(&kwb_workspace, kwb_workspace_bytes) != cudaSuccess ||\n                                  cudaMemset(kwb_workspace, 0, kwb_workspace_bytes) != cudaSuccess)) {{\n    \
                 std::printf(\"KWB_REPRO could not allocate %llu bytes of workspace\\n\", kwb_workspace_bytes);\n    return 2;\n  }}\n  \
                 void* {local} = std::aligned_alloc(64, ({size}() + 63) / 64 * 64);\n  \
                 const char* kwb_why = \"\";\n  \
                 if (int e = {fill}(&p, kwb_workspace, {local}, &kwb_why)) {{\n    std::printf(\"KWB_REPRO {fill} returned %d: %s\\n\", e, kwb_why);\n    return 2;\n  }}\n"
            ));
            // The blob itself is the argument's bytes.
            pointers.push(local);
            continue;
        }
        if p.role == "tma-descriptor" {
            let function = format!("{ENCODE_PREFIX}{}", p.name);
            if !host.encoders.iter().any(|e| e.function == function) {
                return Err(format!("no encoder fills the descriptor `{}`", p.name));
            }
            args.push_str(&format!(
                "  alignas(64) CUtensorMap {local};\n  if (int e = {function}(&p, &{local})) {{\n    std::printf(\"KWB_REPRO {function} returned %d\\n\", e);\n    return 2;\n  }}\n"
            ));
        } else {
            let f = field(p).map_err(|role| {
                format!(
                    "kernel parameter `{}` (`{}`, role {role}) has no value",
                    p.name, p.declaration
                )
            })?;
            let ty = cast_type(p);
            if ty.contains('*') {
                // A device address: its bytes are the same whatever it points to.
                args.push_str(&format!("  const void* {local} = p.{f};\n"));
            } else {
                args.push_str(&format!("  {ty} {local} = ({ty})(p.{f});\n"));
            }
        }
        pointers.push(format!("&{local}"));
    }
    let pointers = if pointers.is_empty() {
        "nullptr".to_owned()
    } else {
        pointers.join(", ")
    };
    Ok(format!(
        r#"
#ifdef {MAIN_MACRO}
// kwb-extract: the reproducer alone, on all-ones: nvcc -D{MAIN_MACRO} <build.sh's flags>
// repro.cu -o repro && ./repro [M N K]. Every output must be alpha * K = 2 * K.
#include <cstdio>
#include <cstdlib>
#include <vector>

template <class T>
static T* kwb_device_filled(size_t count, float value) {{
  std::vector<T> host(count, static_cast<T>(value));
  T* device = nullptr;
  if (cudaMalloc(&device, count * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(device, host.data(), count * sizeof(T), cudaMemcpyHostToDevice);
  return device;
}}

int main(int argc, char** argv) {{
  kwb_problem p{{}};
  p.M = argc > 3 ? std::atoll(argv[1]) : 256;
  p.N = argc > 3 ? std::atoll(argv[2]) : 384;
  p.K = argc > 3 ? std::atoll(argv[3]) : 1024;
  p.lda = p.K;
  p.ldb = p.K;
  p.ldc = p.N;
  p.ldd = p.N;
  p.alpha = 2.0f;
  p.beta = 0.0f;
  const size_t mn = size_t(p.M) * size_t(p.N);
  p.A = kwb_device_filled<{a}>(size_t(p.M) * size_t(p.K), 1.0f);
  p.B = kwb_device_filled<{b}>(size_t(p.N) * size_t(p.K), 1.0f);
  p.C = kwb_device_filled<{c_type}>(mn, 0.0f);
  p.D = {d_alloc};{bias_alloc}
  {out_type}* out = ({out_type}*)(p.{output});
  cudaMemset(out, 0xff, mn * sizeof({out_type}));
  if (!p.A || !p.B || !p.C || !out) {{
    std::printf("KWB_REPRO could not allocate the operands\n");
    return 2;
  }}
  unsigned grid[3], block[3];
  unsigned long long smem = 0;
  if (int e = {CONFIG}(&p, grid, block, &smem)) {{
    std::printf("KWB_REPRO {CONFIG} returned %d\n", e);
    return 2;
  }}
{args}  void* args[] = {{{pointers}}};
  cudaError_t e = kwb_launch(dim3(grid[0], grid[1], grid[2]), dim3(block[0], block[1], block[2]),
                             size_t(smem), nullptr, args);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {{
    std::printf("KWB_REPRO launch: %s\n", cudaGetErrorString(e));
    return 2;
  }}
  std::vector<{out_type}> host(mn);
  cudaMemcpy(host.data(), out, mn * sizeof({out_type}), cudaMemcpyDeviceToHost);
  const float want = 2.0f * float(p.K);
  size_t bad = 0, first = mn;
  for (size_t i = 0; i < mn; ++i) {{
    if (!(static_cast<float>(host[i]) == want)) {{
      if (bad++ == 0) first = i;
    }}
  }}
  if (bad == 0) {{
    std::printf("KWB_REPRO ones: PASS, all %zu outputs are %g\n", mn, want);
    return 0;
  }}
  std::printf("KWB_REPRO ones: FAIL, %zu of %zu outputs differ; first at (m, n) = (%zu, %zu): %g, want %g\n",
              bad, mn, first / size_t(p.N), first % size_t(p.N), static_cast<float>(host[first]), want);
  return 1;
}}
#endif  // {MAIN_MACRO}
"#,
        bias_alloc = match element("bias") {
            Some(t) => format!("\n  p.bias = kwb_device_filled<{t}>(size_t(p.N), 0.0f);"),
            None => String::new(),
        },
        d_alloc = if output == "D" {
            format!("kwb_device_filled<{out_type}>(mn, 0.0f)")
        } else {
            "nullptr".to_owned()
        },
    ))
}
