//! Mutants of the bundled kernels, as a manifest snapshot, and the refusals.

use crate::{Config, MutateError, Stage, mutants};

fn kernel(path: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap()
}

/// One line per mutant: what a manifest lists.
fn listing(source: &str, config: &Config) -> String {
    mutants(source, config)
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{:>2} {:<12} {:<18} {}:{}\n{}",
                m.id,
                m.stage.name(),
                m.operator,
                m.function,
                m.line,
                m.diff
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_mma_sync_kernel_gets_a_mutant_of_every_stage_it_has() {
    let source = kernel("kernels/mma_sync/gemm.cu");
    let config = Config {
        kernel: Some("gemm_mma_sync".to_owned()),
        ..Config::default()
    };
    insta::assert_snapshot!(listing(&source, &config));
    let all = mutants(&source, &config).unwrap();
    for stage in [Stage::OperandLoad, Stage::Mma, Stage::Epilogue] {
        assert!(all.iter().any(|m| m.stage == stage), "{stage:?}");
    }
    // Each mutant is the file with its one edit: the rest unchanged.
    for m in &all {
        let text = &m.text;
        assert_ne!(*text, source);
        assert!(text.lines().count() >= source.lines().count());
    }
}

#[test]
fn a_tma_kernel_gets_descriptor_mutants_from_its_host_encode() {
    let source = kernel("kernels/tma_wgmma_sm90/gemm.cu");
    let config = Config {
        kernel: Some("gemm_wgmma_tma".to_owned()),
        stages: vec![Stage::Descriptor, Stage::Mma],
        ..Config::default()
    };
    insta::assert_snapshot!(listing(&source, &config));
}

#[test]
fn a_kernel_without_a_site_of_the_stage_asked_for_says_so() {
    let source = kernel("kernels/mma_sync/gemm.cu");
    let no_site = mutants(
        &source,
        &Config {
            kernel: Some("gemm_mma_sync".to_owned()),
            stages: vec![Stage::Descriptor],
            ..Config::default()
        },
    );
    assert!(
        matches!(
            &no_site,
            Err(MutateError::NoSite {
                stage: "descriptor",
                ..
            })
        ),
        "{no_site:?}"
    );
    let unknown = mutants(
        &source,
        &Config {
            kernel: Some("no_such_kernel".to_owned()),
            ..Config::default()
        },
    );
    match unknown {
        Err(MutateError::UnknownKernel { available, .. }) => {
            assert!(available.contains("gemm_mma_sync"), "{available}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn stages_parse_by_their_names() {
    for s in Stage::ALL {
        assert_eq!(Stage::parse(s.name()), Some(s));
    }
    assert_eq!(Stage::parse("tma"), None);
}

/// The listing of one operator's mutants.
fn only(source: &str, operators: &[&str]) -> String {
    mutants(source, &Config::default())
        .unwrap()
        .iter()
        .filter(|m| operators.contains(&m.operator))
        .map(|m| format!("{} {}:{}\n{}", m.operator, m.function, m.line, m.diff))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn stage_index_off_reads_the_neighbouring_stage_of_a_cute_pipeline() {
    let source = kernel("kernels/cute_sm80/gemm.cu");
    insta::assert_snapshot!(only(&source, &["stage-index-off"]));
}

#[test]
fn stage_index_off_needs_a_stage_count() {
    // `stage` has no `% COUNT`, no slice and no stage-count constant in scope; `lane`
    // is a `% 32` local that is no stage; `bar[stage]` is a barrier.
    let source = r#"
__device__ void mma_tile(float* d, const float* s, int lane) {
  const unsigned* a = reinterpret_cast<const unsigned*>(s) + lane;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]));
}
__global__ void k(const float* A, float* D, float* smem, unsigned long long* bar, int stage) {
  float acc[4] = {};
  int lane = threadIdx.x % 32;
  for (int kt = 0; kt < 8; ++kt) {
    wait(&bar[stage]);
    mma_tile(acc, smem + stage * 256, lane);
  }
  D[threadIdx.x] = acc[0];
}
"#;
    assert_eq!(only(source, &["stage-index-off"]), "");
    // With the stage count a template parameter, the stage wraps at it.
    let counted = source.replace("__global__ void", "template <int kStages>\n__global__ void");
    assert!(
        only(&counted, &["stage-index-off"]).contains("smem + ((stage + 1) % kStages) * 256"),
        "{}",
        only(&counted, &["stage-index-off"])
    );
}

#[test]
fn operand_stride_skews_a_leading_dimension_that_multiplies_a_row() {
    let source = kernel("kernels/styles/simt_cp_async.cu");
    insta::assert_snapshot!(only(&source, &["operand-stride"]));
}

#[test]
fn operand_stride_leaves_constants_and_sums_alone() {
    // `LDS` is a shared tile's pitch (a constant); `lda` is only added, never a row
    // stride here.
    let source = r#"
constexpr int LDS = 40;
__global__ void k(const float* A, int lda, float* D) {
  __shared__ float sA[64 * LDS];
  float acc = 0.f;
  for (int kt = 0; kt < 8; ++kt) {
    sA[threadIdx.y * LDS + threadIdx.x] = A[kt + lda + threadIdx.x];
    __syncthreads();
    acc += sA[threadIdx.x] * sA[threadIdx.y];
  }
  D[threadIdx.x] = acc;
}
"#;
    assert_eq!(only(source, &["operand-stride"]), "");
}

#[test]
fn store_scaled_doubles_the_value_an_epilogue_stores() {
    let source = kernel("kernels/styles/namespaced_blas.cu");
    insta::assert_snapshot!(only(&source, &["store-scaled"]));
}

#[test]
fn store_scaled_leaves_half_values_and_register_updates_alone() {
    // `h` is a half: `h + h` may not compile under `__CUDA_NO_HALF_OPERATORS__`; the
    // update of `acc` is no store.
    let source = r#"
__device__ void mma16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__global__ void k(const unsigned* A, __half* D, int n) {
  float acc[4] = {};
  for (int kt = 0; kt < n; ++kt) {
    unsigned a[4] = {A[kt], A[kt + 1], A[kt + 2], A[kt + 3]};
    mma16816(acc, a, A[kt], A[kt + 1]);
  }
  __half h = __float2half(acc[0]);
  acc[1] = acc[1] + 1.f;
  D[threadIdx.x] = h;
}
"#;
    assert_eq!(only(source, &["store-scaled"]), "");
}

#[test]
fn tma_arrays_change_the_dims_stride_and_box_an_encode_is_given() {
    let source = kernel("kernels/styles/tma_map_fp8.cu");
    insta::assert_snapshot!(only(&source, &["tma-dims", "tma-stride", "tma-box"]));
}

#[test]
fn tma_arrays_follow_a_wrapper_and_skip_equal_dims() {
    // The encode's arrays are parameters: the caller's arrays are mutated. Square
    // dims are not swapped; a square box is halved instead.
    let source = r#"
static CUresult encode(CUtensorMap* map, void* ptr, const cuuint64_t* dims,
                       const cuuint64_t* strides, const cuuint32_t* box) {
  const cuuint32_t elem[2] = {1, 1};
  return cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr, dims, strides,
                                box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}
void make(CUtensorMap* map, void* ptr, int n) {
  const cuuint64_t dims[2] = {cuuint64_t(n), cuuint64_t(n)};
  const cuuint64_t strides[1] = {cuuint64_t(n) * 2};
  const cuuint32_t box[2] = {64, 64};
  encode(map, ptr, dims, strides, box);
}
"#;
    insta::assert_snapshot!(only(source, &["tma-dims", "tma-stride", "tma-box"]), @r"
    tma-stride make:12
    -const cuuint64_t strides[1] = {cuuint64_t(n) * 2};
    +const cuuint64_t strides[1] = {(cuuint64_t(n) * 2) * 2};
    tma-box make:13
    -const cuuint32_t box[2] = {64, 64};
    +const cuuint32_t box[2] = {(64) / 2, 64};
    ");
}

#[test]
fn accumulator_not_zeroed_fires_in_no_kernel_of_ours() {
    // None of our kernels is persistent with an accumulator carried across tiles:
    // removing a zeroing there would read uninitialized registers.
    for path in [
        "kernels/cute_sm80/gemm.cu",
        "kernels/mma_sync/gemm.cu",
        "kernels/megakernel/gemm.cu",
        "kernels/styles/wmma_f16.cu",
    ] {
        assert_eq!(
            only(&kernel(path), &["accumulator-not-zeroed"]),
            "",
            "{path}"
        );
    }
}

/// A persistent kernel: a loop over output tiles around the mainloop.
const PERSISTENT: &str = r#"
__device__ void mma16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__global__ void k(const unsigned* A, float* D, int tiles, int n) {
  float acc[4] = {};
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    for (int i = 0; i < 4; ++i) acc[i] = 0.f;
    for (int kt = 0; kt < n; ++kt) {
      unsigned a[4] = {A[kt], A[kt + 1], A[kt + 2], A[kt + 3]};
      mma16816(acc, a, A[kt], A[kt + 1]);
    }
    D[tile * 4 + threadIdx.x % 4] = acc[threadIdx.x % 4];
  }
}
"#;

#[test]
fn accumulator_not_zeroed_only_where_the_accumulator_carries_across_tiles() {
    insta::assert_snapshot!(only(PERSISTENT, &["accumulator-not-zeroed"]), @r"
    accumulator-not-zeroed k:10
    -for (int i = 0; i < 4; ++i) acc[i] = 0.f;
    +for (int i = 0; i < 4; ++i) ;
    ");
    // Declared inside the tile loop: each tile's accumulator is fresh, removing its
    // zeroing reads uninitialized registers.
    let fresh = PERSISTENT
        .replace("  float acc[4] = {};\n", "")
        .replace("{\n    for (int i", "{\n    float acc[4];\n    for (int i");
    assert_eq!(only(&fresh, &["accumulator-not-zeroed"]), "");
    // Not persistent: no loop around the mainloop.
    let single = PERSISTENT
        .replace(
            "for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {",
            "{ int tile = blockIdx.x;",
        )
        .replace("  float acc[4] = {};\n", "")
        .replace(
            "{ int tile = blockIdx.x;\n    for",
            "{ int tile = blockIdx.x;\n    float acc[4];\n    for",
        );
    assert_eq!(only(&single, &["accumulator-not-zeroed"]), "");
}

#[test]
fn ab_swapped_swaps_the_operands_an_mma_call_is_given() {
    let source = kernel("kernels/cute_sm80/gemm.cu");
    insta::assert_snapshot!(only(&source, &["ab-swapped"]));
}

#[test]
fn ab_swapped_leaves_a_call_with_two_b_arguments_or_an_asm_mma_alone() {
    // The helper's B is two registers (`b0`, `b1`): which one would take A's place is
    // no swap of operands. The asm statement has four A and two B operands.
    let source = r#"
__device__ void mma16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__global__ void k(const unsigned* A, float* D, int n) {
  float acc[4] = {};
  for (int kt = 0; kt < n; ++kt) {
    unsigned a[4] = {A[kt], A[kt + 1], A[kt + 2], A[kt + 3]};
    unsigned b[2] = {A[kt + 4], A[kt + 5]};
    mma16816(acc, a, b[0], b[1]);
  }
  D[threadIdx.x] = acc[0];
}
"#;
    let listed = only(source, &["ab-swapped"]);
    assert!(!listed.contains("asm"), "{listed}");
    assert!(
        listed.is_empty()
            || listed
                .lines()
                .all(|l| !l.starts_with("+mma16816(acc, b[0], a")),
        "{listed}"
    );
}

#[test]
fn bias_axis_reads_a_per_column_vector_at_the_row() {
    let functor = kernel("kernels/styles/epilogue_functor.cu");
    let decode = kernel("kernels/styles/decode_linear.cu");
    insta::assert_snapshot!(format!(
        "{}\n{}",
        only(&functor, &["bias-axis"]),
        only(&decode, &["bias-axis"])
    ));
}

#[test]
fn bias_axis_needs_another_axis_and_memory_the_kernel_is_given() {
    // `scale` is a local array, not given; `bias[i]` is read where no second index
    // names a matrix with `i`; `w[col]` is read inside the mainloop (an operand).
    let source = r#"
__global__ void k(const float* A, const float* w, const float* bias, float* D, int n) {
  float acc = 0.f;
  float scale[4] = {1.f, 1.f, 1.f, 1.f};
  const int row = blockIdx.x, col = threadIdx.x;
  for (int kt = 0; kt < n; ++kt) acc += A[row * n + kt] * w[col];
  const int i = threadIdx.y;
  float v = acc * scale[col] + bias[i];
  D[row * n + col] = v;
}
"#;
    assert_eq!(only(source, &["bias-axis"]), "");
}

#[test]
fn store_transposed_swaps_the_row_and_column_of_an_epilogue_store() {
    let mma_sync = kernel("kernels/mma_sync/gemm.cu");
    let tile_config = kernel("kernels/styles/tile_config.cu");
    insta::assert_snapshot!(format!(
        "{}\n{}",
        only(&mma_sync, &["store-transposed"]),
        only(&tile_config, &["store-transposed"])
    ));
}

#[test]
fn store_transposed_leaves_literal_steps_and_mixed_rows_alone() {
    // The row term of `off` is a sum (no one row name) and `j * 8` is a step; the
    // index local `idx` is declared before the mainloop.
    let source = r#"
__global__ void k(const float* A, float* D, int n, int cols) {
  const int bm = blockIdx.x * 16, wm = threadIdx.y, bn = blockIdx.y * 16, j = threadIdx.x;
  const size_t idx = size_t(bm) * cols + bn;
  float acc = 0.f;
  for (int kt = 0; kt < n; ++kt) acc += A[bm * n + kt];
  const size_t off = size_t(bm + wm) * cols + bn + j * 8;
  D[off] = acc;
  D[idx] = acc;
}
"#;
    assert_eq!(only(source, &["store-transposed"]), "");
}

#[test]
fn an_operator_filter_keeps_the_ids_of_the_whole_listing_and_refuses_unknown_names() {
    let source = kernel("kernels/mma_sync/gemm.cu");
    let whole = mutants(&source, &Config::default()).unwrap();
    let config = Config {
        operators: vec!["store-transposed".to_owned(), "alpha-twice".to_owned()],
        ..Config::default()
    };
    let some = mutants(&source, &config).unwrap();
    assert!(!some.is_empty());
    for m in &some {
        assert!(["store-transposed", "alpha-twice"].contains(&m.operator));
        let same = whole.iter().find(|w| w.id == m.id).unwrap();
        assert_eq!((same.operator, same.line), (m.operator, m.line));
    }
    let unknown = mutants(
        &source,
        &Config {
            operators: vec!["a-typo".to_owned()],
            ..Config::default()
        },
    );
    assert!(
        matches!(&unknown, Err(MutateError::UnknownOperator { name, .. }) if name == "a-typo"),
        "{unknown:?}"
    );
    let none = mutants(
        &source,
        &Config {
            operators: vec!["tma-box".to_owned()],
            ..Config::default()
        },
    );
    assert!(
        matches!(&none, Err(MutateError::NoOperatorSite { .. })),
        "{none:?}"
    );
}

#[test]
fn every_operator_a_listing_shows_is_named_in_the_operator_table() {
    for path in [
        "kernels/mma_sync/gemm.cu",
        "kernels/cute_sm80/gemm.cu",
        "kernels/styles/tma_map_fp8.cu",
        "kernels/styles/epilogue_functor.cu",
    ] {
        for m in mutants(&kernel(path), &Config::default()).unwrap() {
            let known = crate::operators::OPERATORS
                .iter()
                .find(|(n, _)| *n == m.operator);
            assert_eq!(
                known.map(|(_, s)| *s),
                Some(m.stage),
                "{path}: {}",
                m.operator
            );
        }
    }
}

#[test]
fn bias_axis_reads_only_what_the_epilogue_combines_with_the_accumulator() {
    // `bar[s]` is a barrier array and `scale[h]` a value nothing in the epilogue reads,
    // though both are read after the mainloop at an index paired with another.
    let source = r#"
struct Barrier { __device__ void wait(int) const; };
__global__ void k(const float* A, Barrier** bar, const float* scale, float* D, int n) {
  float acc = 0.f;
  const int row = blockIdx.x, col = threadIdx.x, s = threadIdx.y, h = blockIdx.y;
  for (int kt = 0; kt < n; ++kt) acc += A[row * n + kt] * A[col * n + kt];
  bar[s]->wait(0);
  float unused = scale[h];
  D[row * n + col] = acc;
  D[s * n + h] = acc;
}
"#;
    assert_eq!(only(source, &["bias-axis"]), "");
}
