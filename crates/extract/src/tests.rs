//! Extraction on small sources; the suite's kernels are snapshot-tested in tests/.

use super::*;

const SOURCE: &str = r#"#include <cuda_runtime.h>
// The tile.
constexpr int kThreads = 128;
namespace detail {
constexpr int kPad = 8;
__device__ int helper(int x) { return x + kPad; }
__device__ int unused_helper(int x) { return x; }
}  // namespace detail

template <int BM, int BN, bool kSplit = false>
__global__ void __launch_bounds__(kThreads) gemm(int M, float* __restrict__ C) {
  C[threadIdx.x] = detail::helper(BM + BN + (kSplit ? 1 : 0));
}

cudaError_t launch(int M, float* C, cudaStream_t stream) {
  constexpr int BM = 64, BN = BM * 2;
  auto kernel = gemm<BM, BN>;
  dim3 grid(M / BM);
  kernel<<<grid, kThreads, 0, stream>>>(M, C);
  return cudaGetLastError();
}

int main() { return 0; }
"#;

fn request(kernel: &str) -> Request {
    Request {
        kernel: Some(kernel.to_owned()),
        file_name: "k.cu".to_owned(),
        ..Request::default()
    }
}

/// The kernel alone, never through its launcher.
fn alone(kernel: &str) -> Request {
    Request {
        alone: true,
        ..request(kernel)
    }
}

#[test]
fn the_launch_gives_the_instantiation_folded() {
    let x = extract(SOURCE, &request("gemm")).unwrap();
    assert_eq!(x.instantiation, "gemm<64, 128, false>");
    let l = x.launch.as_ref().unwrap();
    assert_eq!((l.line, l.alias_line), (19, Some(17)));
    assert_eq!(x.args[1].written, "BN");
    assert_eq!(x.args[1].value, Some(128));
    assert_eq!(x.args[2].written, "false");
    assert_eq!(x.config[1].value, Some(128));
    assert_eq!(x.config[0].declared.as_deref(), Some("dim3 grid(M / BM);"));
    // The slice: the kernel, its helper and constants; not the unused helper, the
    // launcher or main.
    assert!(x.repro.contains("__device__ int helper"));
    assert!(x.repro.contains("constexpr int kPad = 8;"));
    assert!(x.repro.contains("// kwb-extract: k.cu:10-13"));
    assert!(!x.repro.contains("unused_helper"));
    assert!(!x.repro.contains("cudaError_t launch("));
    assert!(!x.repro.contains("int main"));
    assert!(x.repro.contains("&gemm<64, 128, false>"));
    assert!(x.repro.contains("namespace detail {"));
}

#[test]
fn a_spec_is_folded_with_the_files_constants_and_defines() {
    let mut r = request("gemm");
    r.kernel = None;
    r.template = Some("gemm<kThreads / 2, TILE, true>".to_owned());
    r.defines = vec![("TILE".to_owned(), "32".to_owned())];
    let x = extract(SOURCE, &r).unwrap();
    assert_eq!(x.instantiation, "gemm<64, 32, true>");
    assert!(x.launch.is_none());
}

#[test]
fn what_cannot_be_resolved_is_named() {
    let src = SOURCE.replace("constexpr int BM = 64, BN = BM * 2;", "int BM = M, BN = 2;");
    match extract(&src, &alone("gemm")) {
        Err(ExtractError::Unresolved { param, name, .. }) => {
            assert_eq!((param.as_str(), name.as_str()), ("BM", "BM"));
        }
        other => panic!("{other:?}"),
    }
    match extract(SOURCE, &request("gem")) {
        Err(ExtractError::UnknownKernel { available, .. }) => assert_eq!(available, "gemm"),
        other => panic!("{other:?}"),
    }
    let no_launch = SOURCE.replace("kernel<<<grid, kThreads, 0, stream>>>(M, C);", "");
    assert!(matches!(
        extract(&no_launch, &alone("gemm")),
        Err(ExtractError::NoLaunch { .. })
    ));
    let two = SOURCE.replace(
        "return cudaGetLastError();",
        "gemm<1, 2><<<1, 1>>>(M, C);\n  return cudaGetLastError();",
    );
    assert!(matches!(
        extract(&two, &alone("gemm")),
        Err(ExtractError::AmbiguousLaunch { .. })
    ));
    // --instance picks one of the launch sites' instantiations, numbered in order.
    let second = Request {
        instance: Some(2),
        ..request("gemm")
    };
    assert_eq!(
        extract(&two, &second).unwrap().instantiation,
        "gemm<1, 2, false>"
    );
    let none = Request {
        instance: Some(3),
        ..request("gemm")
    };
    match extract(&two, &none) {
        Err(e @ ExtractError::NoInstance { .. }) => {
            assert!(e.to_string().contains("2: line"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn parameter_roles_are_read_from_names_and_types() {
    use crate::kernel::role;
    assert_eq!(
        role("A", "const __nv_bfloat16* __restrict__ A"),
        ("A", Some("__nv_bfloat16".to_owned()))
    );
    assert_eq!(role("D", "float* D"), ("D", Some("float".to_owned())));
    assert_eq!(
        role("tmap_a", "const __grid_constant__ CUtensorMap tmap_a"),
        ("tma-descriptor", None)
    );
    assert_eq!(role("K", "int K"), ("k", None));
    assert_eq!(role("ldA", "int ldA"), ("leading-dimension", None));
    assert_eq!(role("beta", "float beta"), ("beta", None));
    assert_eq!(
        role("tasks", "const Task* tasks"),
        ("pointer", Some("Task".to_owned()))
    );
    assert_eq!(role("flag", "bool flag"), ("other", None));
}

#[test]
fn a_file_without_kernels_says_so() {
    let src = "#include <cutlass/gemm/device/gemm_universal_adapter.h>\nint main() { return 0; }\n";
    match extract(src, &request("device_kernel")) {
        Err(ExtractError::UnknownKernel { available, .. }) => {
            assert!(available.starts_with("none: this file defines no __global__ function"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn type_arguments_left_to_deduction_are_read_off_the_arguments() {
    let src = "template <class T, class U>\n__global__ void copy(T const* in, U* out) { out[0] = in[0]; }\n\
               void run(float const* a, int n) {\n  double* b = nullptr;\n  copy<<<1, 32>>>(a, b);\n}\n";
    let x = extract(src, &request("copy")).unwrap();
    assert_eq!(x.instantiation, "copy<float, double>");
    assert_eq!(x.args[0].written, "(deduced from the launch's arguments)");
    // A cast says its type.
    let cast = src.replace("(a, b)", "(reinterpret_cast<const __half*>(a), b)");
    assert_eq!(
        extract(&cast, &request("copy")).unwrap().instantiation,
        "copy<__half, double>"
    );
    // An argument whose type is not written is not guessed.
    let unknown = src.replace("(a, b)", "(a, get())");
    match extract(&unknown, &request("copy")) {
        Err(ExtractError::Deduced { line, param, .. }) => {
            assert_eq!((line, param.as_str()), (5, "U"))
        }
        other => panic!("{other:?}"),
    }
    // A value parameter is not deduced.
    let value = "template <int N>\n__global__ void k(float* x) { x[0] = N; }\nvoid run(float* x) { k<<<1, 1>>>(x); }\n";
    assert!(matches!(
        extract(value, &request("k")),
        Err(ExtractError::Deduced { .. })
    ));
}

#[test]
fn the_launch_configuration_is_the_launchers_own_code() {
    let x = extract(SOURCE, &request("gemm")).unwrap();
    assert_eq!(x.host.config.as_deref(), Some("kwb_config"));
    // No main(): the kernel has no A or B whose type could be filled.
    assert_eq!(
        x.host.unavailable,
        [
            "main() behind KWB_REPRO_MAIN: the element types of A and B are not known from the parameters"
        ]
    );
    let config = &x.repro[x.repro.find("extern \"C\" int kwb_config").unwrap()..];
    // The parameter M is bound from the problem, the constexpr locals and the grid
    // are copied with their lines; the alias `kernel` is not needed.
    assert!(config.contains("int M = (int)(kwb_p->M);"), "{config}");
    assert!(config.contains("// kwb-extract: k.cu:16\n  constexpr int BM = 64, BN = BM * 2;"));
    assert!(config.contains("dim3 grid(M / BM);"));
    assert!(config.contains("dim3(kThreads)"));
    assert!(config.contains("*kwb_smem = static_cast<unsigned long long>(0);"));
    assert!(!config.contains("auto kernel"));
    // kThreads is a file item the configuration needs: kept.
    assert!(x.repro.contains("constexpr int kThreads = 128;"));
}

#[test]
fn a_descriptor_is_filled_by_the_launchers_call_and_an_unbindable_parameter_is_named() {
    let source = r#"#include <cuda.h>
constexpr int BM = 64;
__global__ void k(const __grid_constant__ CUtensorMap tmap_a, int M) {}
static CUresult encode(CUtensorMap* map, const float* p, int rows, int box) { return CUDA_SUCCESS; }
void launch(const float* A, int M, int blocks, cudaStream_t stream) {
  CUtensorMap tmap_a;
  if (encode(&tmap_a, A, M, BM) != CUDA_SUCCESS) return;
  k<<<blocks, 128, 0, stream>>>(tmap_a, M);
}
"#;
    let x = extract(source, &request("k")).unwrap();
    assert_eq!(x.host.encoders.len(), 1);
    let e = &x.host.encoders[0];
    assert_eq!(
        (
            e.param.as_str(),
            e.function.as_str(),
            e.call.as_str(),
            e.line
        ),
        (
            "tmap_a",
            "kwb_encode_tmap_a",
            "encode(&tmap_a, A, M, BM)",
            7
        )
    );
    let body = &x.repro[x.repro.find("int kwb_encode_tmap_a").unwrap()..];
    assert!(
        body.contains("const float* A = (const float*)(kwb_p->A);"),
        "{body}"
    );
    assert!(body.contains("CUtensorMap& tmap_a = *static_cast<CUtensorMap*>(kwb_map);"));
    // The launcher's own declaration of the map is not copied: the runner's buffer is it.
    assert!(!body.contains("CUtensorMap tmap_a;"));
    assert!(x.repro.contains("static CUresult encode("));
    // The grid is a launcher parameter with no field in kwb_problem.
    assert_eq!(x.host.config, None);
    assert_eq!(
        x.host.unavailable,
        [
            "kwb_config: launcher parameter `blocks` (`int blocks`, role scalar) has no field in kwb_problem",
            "main() behind KWB_REPRO_MAIN: the launch configuration has no entry point",
            "a reproducer through the launcher: launcher `launch`: kwb cannot bind parameter `blocks` (role as-called): no call in the file passes it a value"
        ]
    );
}

#[test]
fn a_gemm_kernel_gets_its_own_main_and_an_unfillable_one_says_why_not() {
    let source = r#"#include <cuda_bf16.h>
__global__ void g(int M, int N, int K, float alpha, const __nv_bfloat16* A,
                  const __nv_bfloat16* B, float* D, int flags) {}
void launch(int M, int N, int K, float alpha, const __nv_bfloat16* A,
            const __nv_bfloat16* B, float* D, cudaStream_t stream) {
  dim3 grid(N / 128, M / 128);
  g<<<grid, 128, 0, stream>>>(M, N, K, alpha, A, B, D, 0);
}
"#;
    // By default a parameter kwb cannot fill sends it through the launcher, which
    // passes the kernel its own value.
    let through = extract(source, &request("g")).unwrap();
    let t = through.host.through.as_ref().unwrap();
    assert_eq!(t.path, ["launch"]);
    assert!(
        t.call.starts_with("launch(static_cast<int>(kwb_p->M)"),
        "{}",
        t.call
    );
    let x = extract(source, &alone("g")).unwrap();
    assert_eq!(x.host.main, None);
    assert!(
        x.host.unavailable.iter().any(|u| u
            == "main() behind KWB_REPRO_MAIN: kernel parameter `flags` (`int flags`, role scalar) has no value"),
        "{:?}",
        x.host.unavailable
    );
    let fillable = source.replace(", int flags", "").replace(", D, 0)", ", D)");
    let x = extract(&fillable, &request("g")).unwrap();
    assert_eq!(x.host.main.as_deref(), Some("KWB_REPRO_MAIN"));
    let main = &x.repro[x.repro.find("#ifdef KWB_REPRO_MAIN").unwrap()..];
    assert!(
        main.contains("p.A = kwb_device_filled<__nv_bfloat16>("),
        "{main}"
    );
    assert!(main.contains("float* out = (float*)(p.D);"), "{main}");
    assert!(main.contains("int kwb_arg0 = (int)(p.M);"));
    assert!(main.contains("const void* kwb_arg4 = p.A;"));
    assert!(main.contains("void* args[] = {&kwb_arg0, &kwb_arg1, &kwb_arg2, &kwb_arg3, &kwb_arg4, &kwb_arg5, &kwb_arg6};"));
    assert!(main.trim_end().ends_with("#endif  // KWB_REPRO_MAIN"));
}

#[test]
fn without_a_launch_a_codegen_string_names_the_instantiation() {
    let source = r#"
constexpr int kTile = 64;
template <int BM, int STAGES>
__global__ void gemm(float* d) { d[0] = BM * STAGES; }
// A JIT registers the name expression it compiles.
void compile(nvrtcProgram prog) { nvrtcAddNameExpression(prog, "gemm<2 * kTile, 3>"); }
"#;
    let x = extract(source, &request("gemm")).unwrap();
    assert_eq!(x.instantiation, "gemm<128, 3>");
    assert!(x.launch.is_none());
    assert!(
        x.repro
            .contains("// as a string of k.cu names it at line 6"),
        "{}",
        x.repro
    );
    // Two strings with different arguments: ambiguous, each named.
    let two = source.replace(
        "void compile",
        "const char* kOther = \"gemm<64, 2>\";\nvoid compile",
    );
    let e = extract(&two, &request("gemm")).unwrap_err().to_string();
    assert!(
        e.contains("is launched with different template arguments"),
        "{e}"
    );
    // No string and no launch: the spec is asked for.
    let none = source.replace("\"gemm<2 * kTile, 3>\"", "name");
    assert!(matches!(
        extract(&none, &request("gemm")),
        Err(ExtractError::NoLaunch { .. })
    ));
}

#[test]
fn a_conditional_block_is_opened_so_its_harness_stays_out() {
    let source = r#"
#if defined(SM90_SUPPORTED)
constexpr int kTile = 64;
struct Options { int m; };
int parse(Options& o) { return o.m; }
#endif
#ifdef WITH_ELSE
constexpr int kOther = 1;
#else
constexpr int kOther = 2;
#endif
template <int BM>
__global__ void gemm(float* d) { d[0] = BM + kOther + kTile; }
void launch(float* d) { gemm<kTile><<<1, 1>>>(d); }
"#;
    let x = extract(source, &request("gemm")).unwrap();
    assert_eq!(x.instantiation, "gemm<64>");
    // The block's member the kernel needs is kept inside its condition; the harness
    // behind the same #if is not.
    assert!(
        x.repro
            .contains("#if defined(SM90_SUPPORTED)\n\n// kwb-extract: k.cu:3\nconstexpr int kTile = 64;\n\n#endif  // defined(SM90_SUPPORTED)"),
        "{}",
        x.repro
    );
    assert!(!x.repro.contains("struct Options"), "{}", x.repro);
    // A block with #else stays whole.
    assert!(
        x.repro.contains("#else\nconstexpr int kOther = 2;\n#endif"),
        "{}",
        x.repro
    );
}

const MEGA: &str = r#"#include <cuda.h>
#include <cuda_runtime.h>
enum TaskType : int { STOP = 0, UP = 1, DOWN = 2 };
struct Task {
  int type, col;
  int wait;
  float beta;
  const CUtensorMap* in_desc;
  const float* bias;
  float* out;
  int unused;
};
using EncodeFn = decltype(&cuTensorMapEncodeTiled);
template <int ROWS, int COLS>
struct view {
  const CUtensorMap* desc;
  static CUresult encode(EncodeFn fn, CUtensorMap* map, const float* gmem) {
    const cuuint64_t dims[2] = {COLS, ROWS};
    const cuuint64_t strides[1] = {COLS * sizeof(float)};
    const cuuint32_t box[2] = {32, 8}, elem[2] = {1, 1};
    return fn(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(gmem), dims, strides, box,
              elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
};
constexpr int kHidden = 64, kThreads = 32;
template <int R, int O>
__device__ void linear(const Task& task, int* events) {
  if (task.wait >= 0) while (atomicAdd(events, 0) < task.wait) {}
  const float v = task.beta * task.bias[task.col] + R + O;
  task.out[task.col + threadIdx.x] = v + (task.in_desc != nullptr);
}
__global__ void mega(const Task* tasks, int num_tasks, int* events) {
  for (int t = blockIdx.x; t < num_tasks; t += gridDim.x) {
    const Task task = tasks[t];
    switch (task.type) {
      case UP: linear<kHidden, 4 * kHidden>(task, events); break;
      case DOWN: linear<4 * kHidden, kHidden>(task, events); break;
      default: return;
    }
  }
}
void launch(const Task* tasks, int n, int* events, int ctas) {
  const int smem = 2 * 1024;
  mega<<<ctas, kThreads, smem>>>(tasks, n, events);
}
"#;

fn task_request(template: &str, bindings: &[(&str, &str)]) -> Request {
    Request {
        template: Some(template.to_owned()),
        file_name: "mega.cu".to_owned(),
        task: TaskRequest {
            bindings: bindings
                .iter()
                .map(|(f, v)| ((*f).to_owned(), (*v).to_owned()))
                .collect(),
            tile: Some((16, 32)),
            ctas: None,
        },
        ..Request::default()
    }
}

const BOUND: &[(&str, &str)] = &[
    ("col", "n0"),
    ("wait", "-1"),
    ("beta", "beta"),
    ("in_desc", "tma(A, view<16, 256>)"),
    ("bias", "bias"),
    ("out", "D"),
];

#[test]
fn a_task_of_a_megakernel_is_run_by_its_kernel_on_a_list_of_its_type() {
    let x = extract(MEGA, &task_request("linear<256, 64>", BOUND)).unwrap();
    assert_eq!(x.instantiation, "mega");
    let t = x.host.tasks.as_ref().unwrap();
    assert_eq!(t.function, "linear<4 * kHidden, kHidden>");
    assert_eq!(t.dispatch, "task.type == DOWN");
    assert_eq!(
        (t.list.as_str(), t.count.as_deref()),
        ("tasks", Some("num_tasks"))
    );
    assert_eq!(t.scratch, ["events"]);
    assert_eq!(t.ctas, 1);
    let how: Vec<(&str, &str, &str)> = t
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.how.as_str(), f.value.as_str()))
        .collect();
    assert_eq!(
        how,
        [
            ("type", "dispatch", "DOWN"),
            ("col", "bound", "n0"),
            ("wait", "bound", "-1"),
            ("beta", "bound", "beta"),
            ("in_desc", "bound", "tma(A, view<16, 256>)"),
            ("bias", "bound", "bias"),
            ("out", "bound", "D"),
            ("unused", "unread", ""),
        ]
    );
    let out = t.fields.iter().find(|f| f.name == "out").unwrap();
    assert_eq!(
        (out.role.as_deref(), out.element.as_deref()),
        (Some("D"), Some("float"))
    );
    let roles: Vec<&str> = x.kernel.params.iter().map(|p| p.role.as_str()).collect();
    assert_eq!(roles, ["task-list", "task-count", "scratch"]);
    // The kernel, the task and the encoding type are copied; the launcher is not.
    for kept in [
        "__global__ void mega(",
        "struct Task {",
        "struct view {",
        "void linear(",
    ] {
        assert!(x.repro.contains(kept), "{kept}: {}", x.repro);
    }
    assert!(!x.repro.contains("void launch("), "{}", x.repro);
    // The list: the case label, the bindings, the descriptor through the file's own
    // encoding function, the launch's block and shared memory.
    for line in [
        "kwb_t.type = (DOWN);",
        "kwb_t.col = kwb_n0;",
        "kwb_t.wait = (-1);",
        "kwb_t.beta = kwb_p->beta;",
        "kwb_t.in_desc = &kwb_device_maps[0];",
        "kwb_t.bias = kwb_any_ptr{kwb_p->bias};",
        "kwb_t.out = kwb_any_ptr{kwb_p->D};",
        "view<16, 256>::encode(kwb_encode_tiled(), &kwb_maps[0], kwb_any_ptr{kwb_p->A})",
        "const int smem = 2 * 1024;",
        "const dim3 kwb_block = dim3(kThreads);",
        "grid[0] = 1,",
        "*smem_bytes = static_cast<unsigned long long>(smem);",
        "((kwb_p->M + 16 - 1) / 16) * ((kwb_p->N + 32 - 1) / 32)",
    ] {
        assert!(x.repro.contains(line), "{line}: {}", x.repro);
    }
    assert!(!x.repro.contains("kwb_t.unused"), "{}", x.repro);
}

#[test]
fn a_task_field_the_instantiation_reads_must_be_bound() {
    let some: Vec<(&str, &str)> = BOUND
        .iter()
        .copied()
        .filter(|(f, _)| *f != "wait")
        .collect();
    let e = extract(MEGA, &task_request("linear<256, 64>", &some)).unwrap_err();
    assert!(
        matches!(&e, ExtractError::UnboundTaskField { field, suggestion, .. }
            if field == "wait" && suggestion == "--task 'wait=-1'"),
        "{e:?}"
    );
    // Every unbound field is named at once, with a guess for each.
    let e = extract(MEGA, &task_request("linear<256, 64>", &[])).unwrap_err();
    let ExtractError::UnboundTaskField { suggestion, .. } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(
        suggestion,
        "--task 'col=n0' --task 'wait=-1' --task 'beta=beta' --task 'in_desc=tma(A, TYPE)' --task 'bias=bias' --task 'out=D'"
    );
    let mut typo = BOUND.to_vec();
    typo.push(("colum", "n0"));
    let e = extract(MEGA, &task_request("linear<256, 64>", &typo)).unwrap_err();
    assert!(
        matches!(&e, ExtractError::BadTaskBinding { why, .. } if why.contains("no field `colum`")),
        "{e:?}"
    );
    let mut scalar = BOUND.to_vec();
    scalar.push(("wait", "A"));
    let e = extract(MEGA, &task_request("linear<256, 64>", &scalar)).unwrap_err();
    assert!(
        matches!(&e, ExtractError::BadTaskBinding { why, .. } if why.contains("not a pointer")),
        "{e:?}"
    );
}

#[test]
fn a_task_call_is_chosen_by_its_folded_arguments() {
    // Two instantiations: --kernel alone is ambiguous, a spec picks by value.
    let mut r = task_request("linear<256, 64>", BOUND);
    r.template = None;
    r.kernel = Some("linear".to_owned());
    let e = extract(MEGA, &r).unwrap_err();
    assert!(
        matches!(&e, ExtractError::AmbiguousTaskCall { calls, .. }
            if calls.contains("<kHidden, 4 * kHidden>") && calls.contains("<4 * kHidden, kHidden>")),
        "{e:?}"
    );
    let x = extract(MEGA, &task_request("linear<64, 256>", BOUND)).unwrap();
    assert_eq!(x.host.tasks.unwrap().dispatch, "task.type == UP");
    let e = extract(MEGA, &task_request("linear<64, 64>", BOUND)).unwrap_err();
    assert!(matches!(e, ExtractError::NoTaskCall { .. }), "{e:?}");
    // Without a tile the tasks cannot be laid over the output.
    let mut r = task_request("linear<256, 64>", BOUND);
    r.task.tile = None;
    let e = extract(MEGA, &r).unwrap_err();
    assert!(
        matches!(&e, ExtractError::TaskList { help, .. } if help.contains("--task-tile")),
        "{e:?}"
    );
}

#[test]
fn a_device_function_called_without_a_dispatch_is_named_as_one() {
    let source = r#"
template <int K>
__device__ void task(const float* a, const float* b, float* d) {
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += a[k] * b[k];
  d[0] = acc;
}
__global__ void mega(const float* a, const float* b, float* d) { task<8>(a, b, d); }
void launch(const float* a, const float* b, float* d) { mega<<<1, 1>>>(a, b, d); }
"#;
    let e = extract(source, &request("task")).unwrap_err();
    assert!(
        matches!(e, ExtractError::NoDispatch { line: 8, .. }),
        "{e:?}"
    );
}

/// A field read only by a helper the task passes itself to counts as read.
#[test]
fn a_task_field_read_by_a_helper_must_be_bound() {
    let source = MEGA
        .replace("  int unused;\n", "  int unused;\n  float scale;\n")
        .replace(
            "template <int R, int O>\n__device__ void linear(",
            "__device__ float scaled(const Task* t, float v) { return t->scale * v; }\ntemplate <int R, int O>\n__device__ void linear(",
        )
        .replace(
            "task.out[task.col + threadIdx.x] = v +",
            "task.out[task.col + threadIdx.x] = scaled(&task, v) +",
        );
    assert!(source.contains("scaled(&task, v)"));
    let e = extract(&source, &task_request("linear<256, 64>", BOUND)).unwrap_err();
    assert!(
        matches!(&e, ExtractError::UnboundTaskField { field, .. } if field == "scale"),
        "{e:?}"
    );
    let mut bound = BOUND.to_vec();
    bound.push(("scale", "1.0f"));
    let x = extract(&source, &task_request("linear<256, 64>", &bound)).unwrap();
    assert!(x.repro.contains("kwb_t.scale = (1.0f);"), "{}", x.repro);
}

/// A Mirage-style dispatch: the kernel passes the task's fields to the task function
/// at the call (`linear_kernel<…>(td.inputs[0].base_ptr, …)`), and a binding may name a
/// member of a field.
#[test]
fn a_task_called_with_its_fields_binds_them_by_member_path() {
    let source = r#"#include <cuda_runtime.h>
struct TensorDesc { void* base_ptr; int dim[2]; };
struct TaskDesc {
  int task_type;
  int tile;
  TensorDesc inputs[3];
  TensorDesc outputs[1];
  int unused;
};
template <int OUT, int RED>
__device__ void linear_kernel(const void* in, const void* w, void* out, int tile) {
  static_cast<float*>(out)[tile + threadIdx.x] =
      static_cast<const float*>(in)[threadIdx.x] * static_cast<const float*>(w)[RED - 1] + OUT;
}
__global__ void persistent(const TaskDesc* tasks, int n) {
  for (int i = blockIdx.x; i < n; i += gridDim.x) {
    const TaskDesc& td = tasks[i];
    switch (td.task_type) {
      case 7:
        linear_kernel<64, 128>(td.inputs[0].base_ptr, td.inputs[1].base_ptr,
                               td.outputs[0].base_ptr, td.tile);
        break;
      default: return;
    }
  }
}
void launch(const TaskDesc* t, int n) { persistent<<<8, 128>>>(t, n); }
"#;
    let mut r = task_request("linear_kernel<64, 128>", &[("tile", "n0")]);
    let e = extract(source, &r).unwrap_err();
    assert!(
        matches!(&e, ExtractError::UnboundTaskField { all, .. }
            if all.contains("`inputs`") && all.contains("`outputs`") && !all.contains("unused")),
        "{e:?}"
    );
    for (f, v) in [
        ("inputs[0].base_ptr", "A"),
        ("inputs[1].base_ptr", "B"),
        ("outputs[0].base_ptr", "D"),
    ] {
        r.task.bindings.push((f.to_owned(), v.to_owned()));
    }
    let x = extract(source, &r).unwrap();
    let t = x.host.tasks.as_ref().unwrap();
    assert_eq!(t.dispatch, "td.task_type == 7");
    for line in [
        "kwb_t.task_type = (7);",
        "kwb_t.tile = kwb_n0;",
        "kwb_t.inputs[0].base_ptr = kwb_any_ptr{kwb_p->A};",
        "kwb_t.inputs[1].base_ptr = kwb_any_ptr{kwb_p->B};",
        "kwb_t.outputs[0].base_ptr = kwb_any_ptr{kwb_p->D};",
    ] {
        assert!(x.repro.contains(line), "{line}: {}", x.repro);
    }
    assert!(!x.repro.contains("kwb_t.unused"), "{}", x.repro);
    // The member paths carry their operands for the runner.
    let roles: Vec<(&str, Option<&str>)> = t
        .fields
        .iter()
        .filter(|f| f.role.is_some())
        .map(|f| (f.name.as_str(), f.role.as_deref()))
        .collect();
    assert_eq!(
        roles,
        [
            ("inputs[0].base_ptr", Some("A")),
            ("inputs[1].base_ptr", Some("B")),
            ("outputs[0].base_ptr", Some("D")),
        ]
    );
}

#[test]
fn an_adapter_alias_inside_a_function_is_named_with_where_it_is() {
    let src = "#include <cutlass/gemm/device/gemm_universal_adapter.h>\nint main() {\n  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int,int,int,int>, M, E>;\n  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;\n  return 0;\n}\n";
    match extract(src, &request("Gemm")) {
        Err(ExtractError::LocalAdapter {
            alias,
            written,
            function,
            line,
        }) => {
            assert_eq!(alias, "Gemm");
            assert_eq!(
                written,
                "cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>"
            );
            assert_eq!(function, "main");
            assert_eq!(line, 4);
        }
        other => panic!("{other:?}"),
    }
    // A name no alias has is still an unknown kernel.
    assert!(matches!(
        extract(src, &request("Other")),
        Err(ExtractError::UnknownKernel { .. })
    ));
}

/// A kernel only declared here (`extern "C" __global__ …;`, compiled apart) is refused
/// with the line of the declaration; a forward declaration before the definition is
/// not that.
#[test]
fn a_kernel_declared_here_and_defined_elsewhere_is_named() {
    let apart = r#"extern "C" __global__ void kern(float* C, int M);
void run(float* C, int M) { kern<<<M / 128, 128>>>(C, M); }
"#;
    match extract(apart, &request("kern")) {
        Err(ExtractError::DefinedElsewhere { name, line, .. }) => {
            assert_eq!((name.as_str(), line), ("kern", 1));
        }
        other => panic!("{other:?}"),
    }
    let forward = format!(
        "__global__ void kern(float* C, int M);\n{apart}__global__ void kern(float* C, int M) {{ C[threadIdx.x] = M; }}\n"
    )
    .replace("extern \"C\" __global__ void kern(float* C, int M);\n", "");
    assert!(extract(&forward, &request("kern")).is_ok());
}
