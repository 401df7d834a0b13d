//! Compiles a tiny CuTe kernel for sm_90a with the discovered nvcc and reads its SASS.
//!
//! Needs nvcc and the CUTLASS headers, so it only runs when `KWB_RUN_SLOW_TESTS=1`,
//! which `cargo xtask test` sets along with `KWB_CUDA_HOME` and `KWB_CUTLASS_DIR`.

use kwb_toolchain::{CompileFlags, Env};

const KERNEL: &str = r#"
#include <cute/tensor.hpp>

#ifndef KWB_VALUE
#error "KWB_VALUE is not defined"
#endif

__global__ void kwb_fill(float* out) {
  using namespace cute;
  auto tensor = make_tensor(make_gmem_ptr(out), make_shape(Int<4>{}, Int<8>{}));
  tensor(threadIdx.x % 4, threadIdx.x / 4) = KWB_VALUE;
}
"#;

fn slow_tests_enabled() -> bool {
    std::env::var_os("KWB_RUN_SLOW_TESTS").is_some_and(|value| value == "1")
}

#[test]
fn compiles_a_cute_kernel_and_reads_its_sass() {
    if !slow_tests_enabled() {
        return;
    }
    let env = Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let cutlass = kwb_toolchain::cutlass(&env).unwrap();

    let version = kwb_toolchain::nvcc_version(&toolchain).unwrap();
    assert!(version.starts_with("13."), "nvcc {version}");

    let temp = tempfile::tempdir().unwrap();
    let source = temp.path().join("fill.cu");
    std::fs::write(&source, KERNEL).unwrap();
    let flags = CompileFlags {
        includes: vec![cutlass.include.clone()],
        defines: vec!["KWB_VALUE=2.0f".to_owned()],
        ..CompileFlags::default()
    };

    let preprocessed = kwb_toolchain::preprocess(&toolchain, &source, &flags).unwrap();
    assert!(
        preprocessed.contains("= 2.0f;"),
        "the define reached the preprocessor"
    );

    let object = temp.path().join("fill.o");
    kwb_toolchain::compile_object(&toolchain, &source, &flags, &object).unwrap();
    let sass = kwb_toolchain::sass(&toolchain, &object).unwrap();
    assert!(sass.contains("code for sm_90a"), "{sass}");
    assert!(sass.contains("Function : _Z8kwb_fillPf"), "{sass}");
    assert!(sass.contains("STG.E"), "{sass}");
    assert!(sass.contains("EXIT"), "{sass}");
}

#[test]
fn compile_errors_carry_nvcc_stderr() {
    if !slow_tests_enabled() {
        return;
    }
    let toolchain = kwb_toolchain::toolchain(&Env::from_process()).unwrap();
    let temp = tempfile::tempdir().unwrap();
    let source = temp.path().join("broken.cu");
    std::fs::write(
        &source,
        "__global__ void broken() { undeclared_name = 1; }\n",
    )
    .unwrap();
    let object = temp.path().join("broken.o");
    let err = kwb_toolchain::compile_object(&toolchain, &source, &CompileFlags::default(), &object)
        .unwrap_err();
    match err {
        kwb_toolchain::Error::ToolFailed { tool, stderr, .. } => {
            assert_eq!(tool, "nvcc");
            assert!(stderr.0.contains("undeclared_name"), "{}", stderr.0);
        }
        other => panic!("expected ToolFailed, got {other:?}"),
    }
}
