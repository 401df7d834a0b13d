use super::*;

fn check(source: &str) -> KernelMap {
    let parsed = kwb_syntax::parse(source);
    kernel_map(&parsed, &[])
}

fn kinds(map: &KernelMap, kernel: usize) -> Vec<(SiteKind, usize)> {
    map.kernels[kernel]
        .sites
        .iter()
        .map(|s| (s.kind, s.line))
        .collect()
}

#[test]
fn builtin_queries_compile_and_every_capture_names_a_kind() {
    let pattern = builtin_pattern();
    assert!(
        pattern.unknown_captures().is_empty(),
        "{:?}",
        pattern.unknown_captures()
    );
    for (name, text) in BUILTIN_QUERIES {
        let one = Pattern::compile(name, text).expect(name);
        assert!(one.unknown_captures().is_empty(), "{name}");
        assert!(
            text.starts_with("; Site kind:"),
            "{name} needs a header comment"
        );
    }
}

/// The built-in query run from the index's roots finds what it finds run over the
/// whole tree, on every CUDA source of the repository's fixtures and kernels.
#[test]
fn rooted_query_run_finds_what_the_whole_tree_run_finds() {
    assert!(
        builtin_pattern().root_kinds().is_some(),
        "every built-in pattern has one node kind at its root"
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    let mut dirs = vec![root.join("fixtures"), root.join("kernels")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("fixture folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .extension()
                .is_some_and(|e| e == "cu" || e == "cuh" || e == "h" || e == "hpp")
            {
                files.push(path);
            }
        }
    }
    assert!(files.len() > 20, "{files:?}");
    for path in files {
        let source = std::fs::read_to_string(&path).expect("fixture reads");
        let parsed = kwb_syntax::parse(&source);
        let key = |h: &patterns::Hit<'_>| (format!("{:?}", h.mark), h.node.id());
        let index = index::Index::build(
            &parsed.tree,
            builtin_pattern().root_kinds().unwrap_or_default(),
        );
        let rooted: std::collections::BTreeSet<_> = patterns::run(&parsed, &index.roots, &[])
            .iter()
            .map(key)
            .collect();
        let mut whole = Vec::new();
        patterns::run_one(builtin_pattern(), &parsed, false, &mut whole);
        let whole: std::collections::BTreeSet<_> = whole.iter().map(key).collect();
        assert_eq!(rooted, whole, "{}", path.display());
    }
}

#[test]
fn user_pattern_without_site_capture_is_rejected() {
    let err = Pattern::compile("x.scm", "(call_expression) @call")
        .err()
        .unwrap();
    assert!(err.to_string().contains("captures no site kind"));
    let err = Pattern::compile("x.scm", "(call_expression").err().unwrap();
    assert!(err.to_string().contains("does not compile"));
}

#[test]
fn cute_gemm_in_k_loop_with_ss_operands() {
    let map = check(
        r#"
template <class TiledMma>
CUTLASS_DEVICE void mma(TiledMma tiled_mma, FrgTensorC& accum, int k_tile_count) {
  Tensor sA = make_tensor(make_smem_ptr(storage.smem_A.data()), SmemLayoutA{});
  Tensor tCsA = thr_mma.partition_A(sA);
  Tensor tCrA = thr_mma.make_fragment_A(tCsA);
  Tensor tCrB = thr_mma.make_fragment_B(tCsB);
  CUTLASS_PRAGMA_NO_UNROLL
  for ( ; k_tile_count > 0; --k_tile_count) {
    pipeline.consumer_wait(smem_pipe_read);
    for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
      cute::gemm(tiled_mma, tCrA(_,_,k_block,read_stage), tCrB(_,_,k_block,read_stage), accum);
    }
    warpgroup_wait<0>();
    pipeline.consumer_release(smem_pipe_release);
  }
}
"#,
    );
    assert_eq!(map.kernels.len(), 1);
    let k = &map.kernels[0];
    assert_eq!(k.role, "device");
    assert_eq!(k.template_params[0].name, "TiledMma");
    let got = kinds(&map, 0);
    assert!(got.contains(&(SiteKind::Mainloop, 9)), "{got:?}");
    assert!(got.contains(&(SiteKind::Mma, 12)), "{got:?}");
    // The SS operand A resolves to tCsA (shared); the descriptor view tCrA and the
    // shared tile sA under it are reported as what feeds it.
    assert!(got.contains(&(SiteKind::Operand, 5)), "{got:?}");
    let feeds = |line: usize| {
        k.sites.iter().any(|s| {
            s.kind == SiteKind::Operand
                && s.line == line
                && s.note
                    .as_deref()
                    .is_some_and(|n| n.starts_with("feeds operand"))
        })
    };
    assert!(feeds(4) && feeds(6), "{got:?}");
    assert!(got.contains(&(SiteKind::Accumulator, 3)), "{got:?}");
    assert!(got.contains(&(SiteKind::Sync, 10)), "{got:?}");
    assert!(got.contains(&(SiteKind::Sync, 14)), "{got:?}");
    let op = k
        .sites
        .iter()
        .find(|s| s.kind == SiteKind::Operand && s.line == 5)
        .unwrap();
    assert!(
        op.note.as_deref().unwrap().contains("shared memory"),
        "{:?}",
        op.note
    );
}

/// The same spelling as an SM90 descriptor view, `tCrA = thr_mma.make_fragment_A(…)`,
/// in an SM80 kernel that copies each k block into it from shared memory: the
/// fragment holds its own values, in registers, and is what the MMA reads.
#[test]
fn a_fragment_a_copy_fills_is_the_operand_in_registers_not_a_view() {
    let map = check(
        r#"
template <class TiledMma>
__global__ void gemm_tn(TiledMma mma, half_t const* A, float* C, int k_tiles) {
  Tensor sA = make_tensor(make_smem_ptr(smem_a), sA_layout);
  Tensor tCsA = thr_mma.partition_A(sA);
  Tensor tCrA = thr_mma.make_fragment_A(tCsA(_, _, _, 0));
  Tensor tCrB = thr_mma.make_fragment_B(tCsB(_, _, _, 0));
  for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
    __syncthreads();
    for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
      copy(tCsA(_, _, k_block, pipe), tCrA(_, _, k_block));
      copy(tCsB(_, _, k_block, pipe), tCrB(_, _, k_block));
      gemm(mma, tCrA(_, _, k_block), tCrB(_, _, k_block), tCrC);
    }
  }
}
"#,
    );
    let k = &map.kernels[0];
    let operand = |line: usize| {
        k.sites
            .iter()
            .find(|s| s.kind == SiteKind::Operand && s.line == line)
            .and_then(|s| s.note.clone())
    };
    let a = operand(6).expect("tCrA is the operand");
    assert!(a.contains("values in registers"), "{a}");
    assert!(operand(7).is_some_and(|n| n.contains("registers")));
    // Nothing copies into the view of the test above: it stays a view of shared memory.
}

#[test]
fn inline_ptx_mma_with_cp_async_and_epilogue() {
    let map = check(
        r#"
__global__ void k(const bf16* A, float* C, int K) {
  __shared__ bf16 sA[2][64 * 32];
  unsigned a[4], b[2];
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int kt = 0; kt < K / 32; ++kt) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(A + kt));
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(acc[0]), "=f"(acc[1]), "=f"(acc[2]), "=f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(acc[0]), "f"(acc[1]), "f"(acc[2]), "f"(acc[3]));
  }
  C[threadIdx.x] = alpha * acc[0];
}
void launch() { k<<<grid, 128>>>(A, C, K); }
"#,
    );
    assert_eq!(
        map.kernels.len(),
        1,
        "{:?}",
        map.kernels.iter().map(|k| &k.name).collect::<Vec<_>>()
    );
    let got = kinds(&map, 0);
    assert_eq!(map.kernels[0].role, "global");
    assert!(got.contains(&(SiteKind::Mainloop, 6)), "{got:?}");
    assert!(got.contains(&(SiteKind::OperandLoad, 7)), "{got:?}");
    assert!(got.contains(&(SiteKind::Sync, 8)), "{got:?}");
    assert!(got.contains(&(SiteKind::Sync, 9)), "{got:?}");
    assert!(got.contains(&(SiteKind::Mma, 10)), "{got:?}");
    assert!(got.contains(&(SiteKind::Operand, 4)), "{got:?}");
    assert!(got.contains(&(SiteKind::Accumulator, 5)), "{got:?}");
    assert!(got.contains(&(SiteKind::Epilogue, 15)), "{got:?}");
}

#[test]
fn dead_code_is_not_a_site_and_wrappers_count() {
    let map = check(
        r#"
__device__ void mma16816(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__global__ void k(int K) {
  float acc[4];
  unsigned fa[4], fb[2];
  for (int kt = 0; kt < K; kt += 32) {
#if 0
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 ...");
#endif
    mma16816(acc, fa, fb);
  }
}
"#,
    );
    let k = map.kernels.iter().find(|k| k.name == "k").unwrap();
    let mma: Vec<_> = k.sites.iter().filter(|s| s.kind == SiteKind::Mma).collect();
    assert_eq!(mma.len(), 1);
    assert_eq!(mma[0].line, 13);
    assert!(mma[0].note.as_deref().unwrap().contains("mma16816"));
    assert!(
        k.sites
            .iter()
            .any(|s| s.kind == SiteKind::Mainloop && s.line == 9)
    );
}

#[test]
fn persistent_scheduler_loop_is_not_the_mainloop() {
    let map = check(
        r#"
__global__ void k() {
  while (work_tile_info.is_valid()) {
    for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
      cute::gemm(tiled_mma, tCrA, tCrB, accum);
    }
  }
}
"#,
    );
    let loops: Vec<_> = map.kernels[0]
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Mainloop)
        .map(|s| s.line)
        .collect();
    assert_eq!(loops, vec![4]);
}

#[test]
fn tma_descriptors_but_not_gmma_descriptors() {
    let map = check(
        r#"
__global__ void k(const __grid_constant__ CUtensorMap tmap_a, int K) {
  uint64_t desc = make_smem_desc(&sA[0]);
  auto tma = make_tma_copy(SM90_TMA_LOAD{}, mA, sA_layout);
  copy(tma.with(bar), tAgA(_, k), tAsA(_, s));
  copy(tma_store_d, tDsD, tDgD);
}
"#,
    );
    let got = kinds(&map, 0);
    assert!(got.contains(&(SiteKind::TmaDescriptor, 2)), "{got:?}");
    assert!(!got.contains(&(SiteKind::TmaDescriptor, 3)), "{got:?}");
    assert!(got.contains(&(SiteKind::TmaDescriptor, 4)), "{got:?}");
    assert!(got.contains(&(SiteKind::OperandLoad, 5)), "{got:?}");
    assert!(got.contains(&(SiteKind::Epilogue, 6)), "{got:?}");
}

#[test]
fn scalar_fma_with_plain_shared_loads() {
    let map = check(
        r#"
__global__ void sgemm(const float* A, const float* B, float* C, int K) {
  __shared__ float As[16][16];
  float acc = 0.f;
  for (int t = 0; t < K; t += 16) {
    As[ty][tx] = A[row * K + t + tx];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * N + col] = acc;
}
"#,
    );
    let got = kinds(&map, 0);
    assert!(got.contains(&(SiteKind::OperandLoad, 6)), "{got:?}");
    assert!(got.contains(&(SiteKind::Mainloop, 5)), "{got:?}");
}

#[test]
fn simt_multiply_accumulates_are_mmas_and_index_arithmetic_is_not() {
    let map = check(
        r#"
__global__ void simt(const __nv_bfloat16* A, const float* B, __nv_bfloat162* C, int K, int ld) {
  __shared__ __nv_bfloat16 sA[32][16];
  float acc[2][2] = {};
  float dot = 0.f;
  int offset = 0;
  for (int k0 = 0; k0 < K; k0 += 16) {
    sA[threadIdx.y][threadIdx.x] = A[k0 + threadIdx.x];
    __syncthreads();
    for (int kk = 0; kk < 16; ++kk) {
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
          acc[i][j] += __bfloat162float(sA[ty * 2 + i][kk]) * B[kk * ld + j];
        }
      }
      dot = fmaf(B[kk], B[kk + 1], dot);
      offset += threadIdx.x * ld;
      float norm = 0.f;
      norm += B[kk] * B[kk];
    }
    __syncthreads();
  }
  C[threadIdx.x] = __floats2bfloat162_rn(acc[0][0], dot);
}
double host_norm(const double* v, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += v[i] * v[2 * i];
  return s;
}
"#,
    );
    let mmas: Vec<usize> = map.kernels[0]
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Mma)
        .map(|s| s.line)
        .collect();
    // The register-blocked product and the fmaf dot product; not the index update, not
    // the norm declared inside the loop, not the square.
    assert_eq!(mmas, [13, 16], "{:?}", kinds(&map, 0));
    let got = kinds(&map, 0);
    assert!(got.contains(&(SiteKind::Mainloop, 7)), "{got:?}");
    assert!(
        map.kernels
            .iter()
            .all(|k| k.name != "host_norm" || k.sites.is_empty()),
        "host code is not a kernel: {:?}",
        map.kernels.iter().map(|k| &k.name).collect::<Vec<_>>()
    );
}

#[test]
fn accumulator_passed_by_reference_into_an_mma_step_helper() {
    let map = check(
        r#"
__device__ void mma16816(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ void mma_k_tile(float (&acc)[2][4], const unsigned* fa, const unsigned* fb) {
  for (int kk = 0; kk < 2; ++kk)
    for (int j = 0; j < 2; ++j) mma16816(acc[j], fa, fb);
}
__global__ void k(float* C, int K) {
  float acc[2][4] = {};
  unsigned fa[4], fb[2];
  for (int kt = 0; kt < K / 32 - 1; ++kt) {
    mma_k_tile(acc, fa, fb);
  }
  mma_k_tile(acc, fa, fb);
  C[threadIdx.x] = acc[0][0];
}
"#,
    );
    let k = map.kernels.iter().find(|k| k.name == "k").unwrap();
    let got: Vec<_> = k.sites.iter().map(|s| (s.kind, s.line)).collect();
    assert!(got.contains(&(SiteKind::Accumulator, 11)), "{got:?}");
    assert!(got.contains(&(SiteKind::Mma, 14)), "{got:?}");
    assert!(got.contains(&(SiteKind::Mma, 16)), "{got:?}");
    assert!(got.contains(&(SiteKind::Epilogue, 17)), "{got:?}");
    assert!(!got.contains(&(SiteKind::Epilogue, 16)), "{got:?}");
    let main = k
        .sites
        .iter()
        .find(|s| s.kind == SiteKind::Mainloop)
        .unwrap();
    assert_eq!(main.line, 13);
    assert!(
        main.note
            .as_deref()
            .unwrap()
            .contains("last K tile peeled after the loop (line 16)"),
        "{:?}",
        main.note
    );
    // The helper's k-block loop is not a mainloop of its own.
    let helper = map.kernels.iter().find(|k| k.name == "mma_k_tile").unwrap();
    assert!(!helper.sites.iter().any(|s| s.kind == SiteKind::Mainloop));
}

/// A DeepGEMM-shaped consumer: a WGMMA wrapper struct, a stage loop around a k-block
/// loop, a promotion of the partial sums, and an epilogue staged through shared
/// memory and stored by a TMA helper.
#[test]
fn wgmma_wrapper_stage_loop_promotion_and_staged_epilogue() {
    let map = check(
        r#"
__global__ void gemm(const __grid_constant__ CUtensorMap tensor_map_d, float* scales) {
  float accum[WGMMA::kNumAccum], final_accum[WGMMA::kNumAccum] = {0};
  for (int s = 0; s < kNumStages; ++s) {
    full_barriers[s]->wait(phase);
    for (int k = 0; k < BLOCK_K / WGMMA::K; ++k) {
      auto desc_a = make_smem_desc(smem_a[s] + k * WGMMA::K, 1);
      auto desc_b = make_smem_desc(smem_b[s] + k * WGMMA::K, 1);
      WGMMA::wgmma(desc_a, desc_b, accum, k);
    }
    for (int i = 0; i < WGMMA::kNumAccum; ++i) final_accum[i] += scales[s] * accum[i];
    empty_barriers[s]->arrive();
  }
  for (int i = 0; i < WGMMA::kNumAccum; ++i) {
    smem_d[i] = __float2bfloat16(final_accum[i]);
  }
  cute::tma_store_fence();
  cute::SM90_TMA_STORE_2D::copy(&tensor_map_d, smem_d, 0, 0);
}
"#,
    );
    let got = kinds(&map, 0);
    assert!(
        got.contains(&(SiteKind::Mma, 9)),
        "the wrapper call: {got:?}"
    );
    assert!(
        !got.contains(&(SiteKind::Mma, 11)),
        "a promotion is no MMA: {got:?}"
    );
    assert!(
        got.contains(&(SiteKind::Mainloop, 4)),
        "the stage loop: {got:?}"
    );
    assert!(!got.contains(&(SiteKind::Mainloop, 6)), "{got:?}");
    for line in [3, 7, 8] {
        assert!(
            got.contains(&(SiteKind::Operand, line))
                || got.contains(&(SiteKind::Accumulator, line)),
            "line {line}: {got:?}"
        );
    }
    for line in [15, 18] {
        assert!(
            got.contains(&(SiteKind::Epilogue, line)),
            "line {line}: {got:?}"
        );
    }
    for line in [5, 12, 17] {
        assert!(
            got.contains(&(SiteKind::Sync, line)),
            "line {line}: {got:?}"
        );
    }
}

/// Shared→register operand copies are operand loads; an encode through a function
/// pointer makes a TMA descriptor.
#[test]
fn s2r_copies_and_encode_through_a_pointer() {
    let map = check(
        r#"
__device__ void mma(TiledMma tiled_mma, Tensor tCsA, Tensor tCrA, Tensor tCsB, Tensor tCrB, Tensor accum) {
  for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
    copy(s2r_copy_a, tCsA(_, _, k_tile), tCrA);
    copy(s2r_copy_b, tCsB(_, _, k_tile), tCrB);
    cute::gemm(tiled_mma, tCrA, tCrB, accum);
  }
}
CUresult make_map(CUtensorMap* map, void* ptr, EncodeFn encode_func) {
  return encode_func(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr, dims, strides, box, elem,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promo, oob);
}
"#,
    );
    let got: Vec<(SiteKind, usize)> = map
        .kernels
        .iter()
        .flat_map(|k| k.sites.iter().map(|s| (s.kind, s.line)))
        .collect();
    assert!(got.contains(&(SiteKind::OperandLoad, 4)), "{got:?}");
    assert!(got.contains(&(SiteKind::OperandLoad, 5)), "{got:?}");
    assert!(got.contains(&(SiteKind::TmaDescriptor, 10)), "{got:?}");
}

/// Shapes of real third-party code the map learnt from the labelled corpus: an
/// operand unpacked from a parameter struct (`auto [mma, tCrA, tCrB] = inputs;`), a
/// register copy of a converted array's element (`float a = a_float[k];`), a warp MMA
/// with a trailing argument, and an epilogue that stores through a view and a lambda.
#[test]
fn bindings_element_copies_trailing_arguments_views_and_store_lambdas() {
    let bound = check(
        r#"
template <class Params, class Acc>
__device__ void mma(Params const& inputs, Acc& acc, int k_tiles) {
  auto [tiled_mma, tCrA, tCrB] = inputs;
  for (int k = 0; k < k_tiles; ++k) {
    cute::gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}
"#,
    );
    let operands: Vec<&str> = bound.kernels[0]
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Operand)
        .map(|s| s.note.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(operands.len(), 2, "{operands:?}");
    assert!(
        operands
            .iter()
            .all(|n| n.ends_with("values in a parameter")),
        "{operands:?}"
    );

    let simt = check(
        r#"
__global__ void gemv(const uint4* a, const uint4* b, float* out, int K) {
  float acc = 0.f;
  for (int kb = 0; kb < K; kb += 8) {
    float a_float[8];
    to_float8(a[kb / 8], a_float);
    float b_float[8];
    to_float8(b[kb / 8], b_float);
    for (int k = 0; k < 8; k++) {
      float x = a_float[k];
      float y = b_float[k];
      acc += x * y;
    }
  }
  out[threadIdx.x] = acc;
}
"#,
    );
    let operand_lines: Vec<usize> = simt.kernels[0]
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Operand)
        .map(|s| s.line)
        .collect();
    for line in [5, 7, 10, 11] {
        assert!(operand_lines.contains(&line), "{line}: {operand_lines:?}");
    }
    // A global pointer's element is a load, not a fragment.
    assert!(!operand_lines.contains(&2), "{operand_lines:?}");

    let trailing = check(
        r#"
template <class Mma>
__device__ void iters(Mma& warp_mma, typename Mma::FragmentC& accum, int k_tiles) {
  typename Mma::FragmentA warp_frag_A[2];
  typename Mma::FragmentB converted_B;
  for (int k = 0; k < k_tiles; ++k) {
    warp_mma(accum, warp_frag_A[k % 2], converted_B, accum, k);
  }
}
"#,
    );
    let roles: Vec<(SiteKind, usize)> = kinds(&trailing, 0)
        .into_iter()
        .filter(|(k, _)| matches!(k, SiteKind::Operand | SiteKind::Accumulator))
        .collect();
    assert!(roles.contains(&(SiteKind::Operand, 4)), "{roles:?}");
    assert!(roles.contains(&(SiteKind::Operand, 5)), "{roles:?}");
    assert!(roles.contains(&(SiteKind::Accumulator, 3)), "{roles:?}");

    let epilogue = check(
        r#"
template <class Acc>
__device__ void store(Acc const& accumulators, Params const& params) {
  Tensor tRS_rAcc = thread_r2s.retile_S(accumulators);
  Tensor tRS_rD = make_tensor<half_t>(layout);
  Tensor tRS_rD_frg = recast<Array<half_t, 4>>(tRS_rD);
  auto tma_store_fn = [&](int m, int n) {
    cutlass::arch::fence_view_async_shared();
    copy(params.tma_store_d, bSG_sD, bSG_gD(_, _, _, m, n));
  };
  for (int i = 0; i < size(tRS_rD_frg); ++i) {
    tRS_rD_frg(i) = convert(tRS_rAcc(i));
  }
  copy(tiled_r2s, tRS_rD, tRS_sD);
  tma_store_fn(0, 0);
}
"#,
    );
    let lines: Vec<usize> = epilogue.kernels[0]
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Epilogue)
        .map(|s| s.line)
        .collect();
    for line in [12, 14, 15] {
        assert!(lines.contains(&line), "{line}: {lines:?}");
    }
}

/// sm100-style collectives make the UMMA fragments in one member (`mma_init`) and
/// unpack them from a parameter in another (`mma`): the fragments, and the shared
/// tiles they are made from, are operand sites where they are declared, whether the
/// aggregate is a named struct, a named local, or a tuple whose names match.
#[test]
fn operands_returned_by_one_member_and_unpacked_by_another() {
    let named = r#"
struct Collective {
  template <class Storage>
  __device__ auto mma_init(Storage& shared_tensors) const {
    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.begin()), SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.begin()), SmemLayoutB{});
    Tensor tCrA = TiledMma::make_fragment_A(sA);
    Tensor tCrB = TiledMma::make_fragment_B(sB);
    TiledMma tiled_mma;
    RETURN_INIT
  }
  template <class Acc>
  __device__ void mma(Acc& accumulators, PARAM const& mma_inputs, int k_tiles) {
    auto [tiled_mma, tCrA, tCrB] = mma_inputs;
    for (int k = 0; k < k_tiles; ++k) {
      cute::gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), accumulators);
    }
  }
};
"#;
    let forms = [
        ("MmaParams", "return MmaParams{tiled_mma, tCrA, tCrB};"),
        (
            "MmaParams",
            "MmaParams<decltype(tCrA), decltype(tCrB)> p{tiled_mma, tCrA, tCrB}; return p;",
        ),
        (
            "cute::tuple<TiledMma, FragA, FragB>",
            "return cute::make_tuple(tiled_mma, tCrA, tCrB);",
        ),
    ];
    for (param, ret) in forms {
        let source = named.replace("PARAM", param).replace("RETURN_INIT", ret);
        let map = check(&source);
        let init = map
            .kernels
            .iter()
            .find(|k| k.name.ends_with("mma_init"))
            .unwrap_or_else(|| panic!("{ret}: mma_init has no site"));
        let lines: Vec<usize> = init
            .sites
            .iter()
            .filter(|s| s.kind == SiteKind::Operand)
            .map(|s| s.line)
            .collect();
        // sA, sB (5, 6) and tCrA, tCrB (7, 8).
        assert_eq!(lines, vec![5, 6, 7, 8], "{ret}");
    }
    // A tuple whose element at the binding's position has another name is not it.
    let other = named
        .replace("PARAM", "cute::tuple<TiledMma, FragA, FragB>")
        .replace(
            "RETURN_INIT",
            "return cute::make_tuple(tiled_mma, tCrB, tCrA);",
        );
    let map = check(&other);
    assert!(
        map.kernels.iter().all(|k| !k.name.ends_with("mma_init")),
        "swapped tuple names"
    );
}

/// A value the epilogue brings in beside the accumulator (a bias, a scale read after
/// the mainloop) is an epilogue site where it is read; a loop counter or an index
/// used next to the accumulator is not.
#[test]
fn epilogue_side_inputs_are_epilogue() {
    let map = check(
        r#"
__global__ void gemv(const float* a, const float* b, const float* bias, float* out, int K) {
  float acc = 0.f;
  for (int k = 0; k < K; ++k) {
    acc += a[k] * b[k];
  }
  float bias_v = bias[threadIdx.x];
  int row = threadIdx.x;
  for (auto i = 0; i < 1; ++i) {
    out[row + i] = acc + bias_v;
  }
}
"#,
    );
    let epilogue: Vec<usize> = map.kernels[0]
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Epilogue)
        .map(|s| s.line)
        .collect();
    assert!(epilogue.contains(&7), "bias read: {epilogue:?}");
    assert!(epilogue.contains(&10), "store: {epilogue:?}");
    assert!(!epilogue.contains(&8), "index: {epilogue:?}");
    assert!(!epilogue.contains(&9), "loop counter: {epilogue:?}");
}

/// A caller that hands its accumulator to a same-file function whose MMA accumulates
/// into that parameter declares the accumulator too (CUTLASS 2.x `operator()` →
/// `gemm_iters`; a kernel's `float acc[4]` passed to its mainloop), two levels up.
#[test]
fn accumulators_passed_down_are_the_callers_accumulators() {
    let map = check(
        r#"
__device__ void step(float (&acc)[4], const float* a, const float* b, int k) {
  for (int i = 0; i < 4; ++i) {
    acc[i] = fmaf(a[k], b[k], acc[i]);
  }
}
__device__ void mainloop(float (&acc)[4], const float* a, const float* b, int K) {
  for (int k = 0; k < K; ++k) {
    step(acc, a, b, k);
  }
}
__global__ void kernel(const float* a, const float* b, float* out, int K) {
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  int unused = 0;
  mainloop(acc, a, b, K);
  out[threadIdx.x] = acc[0] + unused;
}
"#,
    );
    let kernel = map
        .kernels
        .iter()
        .find(|k| k.name == "kernel")
        .expect("the kernel has sites");
    let accumulators: Vec<usize> = kernel
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Accumulator)
        .map(|s| s.line)
        .collect();
    assert_eq!(accumulators, vec![13], "{:?}", kernel.sites);
}

/// A producer warp that binds its TMA destination from `tma_partition` of a tile the
/// shared-storage object hands out: that tile is where the load puts the operand. A
/// shared name bound from a call that makes tensors (not a partitioning) stays where
/// it is bound.
#[test]
fn tma_partition_bindings_lead_to_the_shared_storage_tile() {
    let map = check(
        r#"
template <class Storage, class Atom>
__device__ void dma_a(Storage& shared_storage, Atom const* tma_atom_A, Tensor mA, int k_tiles) {
  Tensor tCsA = shared_storage.tensor_sA();
  Tensor gA = local_tile(mA, make_shape(Int<128>{}, Int<64>{}), make_coord(0, _));
  auto [tAgA, tAsA] = tma_partition(*tma_atom_A, Int<0>{}, Layout<_1>{},
                                    group_modes<0, 3>(tCsA), group_modes<0, 3>(gA));
  for (int k = 0; k < k_tiles; ++k) {
    copy(tma_atom_A->with(bar), tAgA(_, k), tAsA(_, k % 4));
  }
}
"#,
    );
    let operands: Vec<usize> = map.kernels[0]
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Operand)
        .map(|s| s.line)
        .collect();
    assert_eq!(operands, vec![4], "{:?}", map.kernels[0].sites);
}

#[test]
fn a_line_is_read_as_the_site_that_holds_it_or_calls_it() {
    let source = r#"
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  unsigned a = smem_u32(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(a), "l"(src));
}
__device__ void load_tile(bf16* dst, const bf16* src, int k0) {
  const int c = threadIdx.x * 8;
  cp16(dst + c, src + k0 + c);
}
__global__ void k(const bf16* A, float* C, int K) {
  extern __shared__ bf16 sA[];
  unsigned a[4], b[2];
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int kt = 0; kt < K / 32; ++kt) {
    load_tile(sA, A, kt * 32);
    __syncthreads();
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(acc[0]), "=f"(acc[1]), "=f"(acc[2]), "=f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(acc[0]), "f"(acc[1]), "f"(acc[2]), "f"(acc[3]));
  }
  C[threadIdx.x] = alpha * acc[0];
}
"#;
    let parsed = kwb_syntax::parse(source);
    let map = kernel_map(&parsed, &[]);
    let kinds_at = |line: usize| -> Vec<SiteKind> {
        sites_of_line(&parsed, &map, line)
            .iter()
            .map(|s| s.kind)
            .collect()
    };
    // The cp.async inside the helper: an operand load, wherever the map files it.
    let at_copy = sites_of_line(&parsed, &map, 4);
    assert_eq!(
        at_copy.first().map(|s| s.kind),
        Some(SiteKind::OperandLoad),
        "{at_copy:?}"
    );
    // A line of the load helper with no site of its own: followed to its call.
    let at_index = sites_of_line(&parsed, &map, 7);
    assert_eq!(
        at_index.first().map(|s| s.kind),
        Some(SiteKind::OperandLoad),
        "{at_index:?}"
    );
    assert_eq!(at_index[0].line, 15, "{at_index:?}");
    assert_eq!(at_index[0].via, vec![("load_tile".to_owned(), 15)]);
    assert_eq!(kinds_at(17).first(), Some(&SiteKind::Mma));
    assert_eq!(kinds_at(22), vec![SiteKind::Epilogue]);
    // The loop header and the barrier belong to no one stage.
    assert!(kinds_at(14).is_empty(), "{:?}", kinds_at(14));
    assert!(kinds_at(16).is_empty(), "{:?}", kinds_at(16));
}

#[test]
fn a_kernels_own_barrier_is_not_read_through_its_launcher() {
    // The kernel's barrier line holds no stage; its launcher calls it from a host
    // function named like CuTe's `gemm`, which must not lend it the MMA's stage.
    let source = r#"
__global__ void gemm_device(const float* A, float* C, int K) {
  float acc = 0.f;
  for (int k = 0; k < K; ++k) {
    __syncthreads();
    acc += A[k] * A[k + 1];
  }
  C[threadIdx.x] = acc;
}
void gemm(const float* A, float* C, int K) {
  gemm_device(A, C, K);
}
"#;
    let parsed = kwb_syntax::parse(source);
    let map = kernel_map(&parsed, &[]);
    assert!(
        sites_of_line(&parsed, &map, 5).is_empty(),
        "{:?}",
        sites_of_line(&parsed, &map, 5)
    );
    assert!(!sites_of_line(&parsed, &map, 6).is_empty());
}
