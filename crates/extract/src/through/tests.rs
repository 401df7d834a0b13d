use crate::{Request, extract};

const TUTORIAL: &str = r#"#include <cstdio>
template <class TA, class TC>
__global__ void gemm_device(TA const* A, TC* C, int m) { C[0] = A[0]; }

template <class TA, class TC, class Alpha>
void gemm_nt(int m, int n, int k, Alpha alpha, TA const* A, int ldA, TA const* B, int ldB, TC* C, int ldC,
             cudaStream_t stream = 0) {
  auto kernel = &gemm_device<TA, TC>;
  kernel<<<1, 1, 0, stream>>>(A, C, m);
}

template <class TA, class TC, class Alpha>
void gemm_tn(int m, int n, int k, Alpha alpha, TA const* A, int ldA, TA const* B, int ldB, TC* C, int ldC,
             cudaStream_t stream = 0) {
  gemm_device<<<2, 1, 0, stream>>>(A, C, m);
}

template <class TA, class TC, class Alpha>
void gemm(char transA, char transB, int m, int n, int k, Alpha alpha, TA const* A, int ldA,
          TA const* B, int ldB, TC* C, int ldC, cudaStream_t stream = 0) {
  if (transA == 'N') return gemm_nt(m, n, k, alpha, A, ldA, B, ldB, C, ldC, stream);
  return gemm_tn(m, n, k, alpha, A, ldA, B, ldB, C, ldC, stream);
}

int main(int argc, char** argv) {
  int m = 64;
  if (argc > 1) sscanf(argv[1], "%d", &m);
  int n = 64, k = 32;
  char transA = 'N';
  char transB = 'T';
  using TA = float;
  using TC = float;
  TA alpha = 1;
  thrust::device_vector<TA> d_A(m * k);
  thrust::device_vector<TA> d_B(n * k);
  thrust::device_vector<TC> d_C(m * n);
  gemm(transA, transB, m, n, k, alpha, d_A.data().get(), m, d_B.data().get(), n, d_C.data().get(), m);
  return 0;
}
"#;

fn request(kernel: &str) -> Request {
    Request {
        kernel: Some(kernel.to_owned()),
        file_name: "tutorial.cu".to_owned(),
        ..Request::default()
    }
}

#[test]
fn a_deduced_kernel_is_reproduced_through_the_launcher_main_calls() {
    let x = extract(TUTORIAL, &request("gemm_device")).unwrap();
    let t = x.host.through.as_ref().unwrap();
    assert_eq!(t.path, ["gemm", "gemm_nt"]);
    assert_eq!(
        t.call,
        "gemm(transA, transB, static_cast<int>(kwb_p->M), \
         static_cast<int>(kwb_p->N), k, alpha, (TA*)(kwb_p->A), \
         static_cast<int>(kwb_p->lda), (TA*)(kwb_p->B), static_cast<int>(kwb_p->ldb), (TC*)(kwb_p->C), static_cast<int>(kwb_p->ldc), \
         static_cast<cudaStream_t>(kwb_stream))"
    );
    assert_eq!(
        (
            t.layout.a.as_str(),
            t.layout.b.as_str(),
            t.layout.c.as_str()
        ),
        ("km", "kn", "nm")
    );
    let a = x.host.launcher.iter().find(|p| p.role == "A").unwrap();
    assert_eq!(a.element.as_deref(), Some("float"));
    // The unit is the file, main renamed; the entry copies the caller's declarations
    // the call needs and nothing that reads argv.
    assert!(
        x.repro
            .contains("int kwb_user_main(int argc, char** argv) {")
    );
    assert!(!x.repro.contains("int main("));
    let entry = &x.repro[x.repro.find("extern \"C\" int kwb_launch_problem").unwrap()..];
    assert!(entry.contains("char transA = 'N';"));
    assert!(entry.contains("using TA = float;"));
    assert!(entry.contains("TA alpha = 1;"));
    // A variable passed once is bound where it is declared (what follows it sees the
    // problem's value); one passed for several roles (m for M, lda and ldc) is not.
    assert!(
        entry.contains("k = static_cast<std::decay_t<decltype(k)>>(static_cast<int>(kwb_p->K));"),
        "{entry}"
    );
    assert!(!entry.contains("  m = "));
    assert!(!entry.contains("sscanf"));
    assert!(!entry.contains("device_vector"));
    insta::assert_snapshot!(entry);
}

#[test]
fn a_binding_overrides_a_guess_and_an_unbindable_parameter_names_the_flag() {
    let src = "__global__ void k(float* y, Epi e) {}\n\
               void run(const float* x, const float* w, float* y, int count, Epi e) { k<<<count, 128>>>(y, e); }\n";
    let err = extract(
        src,
        &Request {
            through: true,
            ..request("k")
        },
    )
    .unwrap_err();
    let text = format!("{err}");
    assert!(text.contains("parameter `count`"), "{text}");
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(
        help.contains("--bind x=A --bind w=B --bind y=D --bind count=VALUE"),
        "{help}"
    );
    let x = extract(
        src,
        &Request {
            through: true,
            binds: vec![("count".into(), "M".into()), ("e".into(), "Epi{}".into())],
            ..request("k")
        },
    )
    .unwrap();
    let t = x.host.through.unwrap();
    assert_eq!(
        t.call,
        "run((float*)(kwb_p->A), (float*)(kwb_p->B), (float*)(kwb_p->D), static_cast<int>(kwb_p->M), Epi{})"
    );
    assert_eq!(t.bindings[4].from, "--bind");
    assert_eq!(t.bindings[0].from, "name and type (a guess)");
    assert!(t.layout.from.contains("default"));
}

#[test]
fn a_wrapper_that_makes_its_own_buffers_gives_way_to_the_launcher_it_calls() {
    let src = "__global__ void k(const float* a, const float* b, float* c, int m) {}\n\
               void sgemm(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {\n\
                 k<<<M, 128>>>(A, B, C, M);\n}\n\
               void test(int M, int N, int K) {\n  float *A, *B, *C;\n  sgemm(M, N, K, 1.0f, A, M, B, K, 0.0f, C, M);\n}\n\
               int main() { test(128, 64, 32); }\n";
    let x = extract(
        src,
        &Request {
            through: true,
            ..request("k")
        },
    )
    .unwrap();
    let t = x.host.through.unwrap();
    assert_eq!(t.path, ["sgemm"]);
    // The wrapper's sizes are its own parameters: the problem's values are passed;
    // its buffers are locals, bound where they are declared.
    assert!(
        t.call.starts_with("sgemm(static_cast<int>(kwb_p->M), "),
        "{}",
        t.call
    );
    assert!(
        x.repro
            .contains("A = static_cast<std::decay_t<decltype(A)>>((float*)(kwb_p->A));")
    );
}

#[test]
fn a_size_no_name_says_takes_its_role_from_the_kernel_parameter_it_reaches() {
    let src = "__global__ void k(const float* x, const float* w, float* y, int M, int N, int K) {}\n\
               void inner(const float* x, const float* w, float* y, int bsz, int d_model, int d_ff) {\n\
                 k<<<bsz, 128>>>(x, w, y, bsz, d_ff, d_model);\n}\n\
               void outer(const float* x, const float* w, float* y, int bsz, int d_model, int d_ff) {\n\
                 inner(x, w, y, bsz, d_model, d_ff);\n}\n";
    let x = extract(
        src,
        &Request {
            through: true,
            ..request("k")
        },
    )
    .unwrap();
    let t = x.host.through.unwrap();
    let roles: Vec<(&str, &str)> = t
        .bindings
        .iter()
        .map(|b| (b.param.as_str(), b.role.as_str()))
        .collect();
    assert_eq!(roles[3..], [("bsz", "m"), ("d_model", "k"), ("d_ff", "n")]);
    assert_eq!(
        t.bindings[3].from,
        "it flows into the kernel's `M` (a guess)"
    );
}

const MAPS_BY_VALUE: &str = r#"#include <cuda.h>
namespace ops {
__global__ void tma_gemm(const __grid_constant__ CUtensorMap map_a, float* D, const CUtensorMap* spare,
                         const __grid_constant__ CUtensorMap map_b, int K) {}
}
static CUtensorMap make_map(const void* p, int rows, int cols) { CUtensorMap m{}; return m; }
int launch(const void* A, const void* B, float* D, int M, int N, int K, cudaStream_t s) {
  CUtensorMap a = make_map(A, M, K), b = make_map(B, N, K);
  ops::tma_gemm<<<dim3(N / 64, M / 64), 128, 0, s>>>(a, D, nullptr, b, K);
  return 0;
}
int main() { return launch(nullptr, nullptr, nullptr, 128, 128, 64, 0); }
"#;

#[test]
fn a_kernel_that_takes_maps_by_value_has_them_read_at_its_launch() {
    let x = extract(MAPS_BY_VALUE, &request("tma_gemm")).unwrap();
    assert!(x.host.through.is_some());
    // Parameters 0 and 3 are maps by value; the pointer to one is not read.
    assert_eq!(
        super::maps::map_params(&x.kernel),
        [(0, "map_a".to_owned()), (3, "map_b".to_owned())]
    );
    let capture = x
        .repro
        .split("// ---- kwb-extract: the TMA maps")
        .nth(1)
        .expect("a capture section");
    insta::assert_snapshot!(format!("// ---- kwb-extract: the TMA maps{capture}"));
    // A kernel that takes none has no section.
    let x = extract(TUTORIAL, &request("gemm_device")).unwrap();
    assert!(!x.repro.contains(crate::LAUNCHED_MAPS));
}
