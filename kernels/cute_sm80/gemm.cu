// CuTe bf16 GEMM for sm_80+ (cp.async + ldmatrix + mma.sync, all through CuTe atoms).
//
//   C = alpha * A * B^T + beta * C
//   A: M x K K-major bf16, B: N x K K-major bf16 ("TN"), C: M x N row-major fp32 (in place).
//
// One CTA computes a 128 x 128 tile of C with 4 warps arranged 2 x 2 by a TiledMMA of
// SM80_16x8x16_F32BF16BF16F32_TN atoms (fp32 accumulate). K is walked in 32-wide tiles
// through a 3-stage shared-memory ring: a cp.async TiledCopy (16 B per thread and copy)
// moves A and B tiles global -> shared, kPipe - 1 tiles ahead of the MMAs; swizzled K-major
// shared layouts feed ldmatrix (SM75_U32x4_LDSM_N) copies into the register fragments,
// and cute::gemm issues the MMAs per 16-wide k block. The epilogue is axpby straight from
// the accumulator registers into C.
//
// The host `main` runs the kwb input rungs (ones, small_int, random) through the shared
// harness with alpha = 2, beta = 0.5 and a C operand, and prints one KWB_RESULT line each.
#include <cute/tensor.hpp>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <vector>

#include "kwb_harness.cuh"

enum class Defect {
  none,
  b_tile_index,
  ldsm_k_block,
  b_cta_row,
  accum_reset,
  kblock_full_gemm,
  alpha_twice,
  axpby_swapped,
};
constexpr Defect kDefect = Defect::KWB_DEFECT;

namespace gemm_sm80 {

using namespace cute;
using bf16 = cute::bfloat16_t;

struct Config {
  using TileM = _128;
  using TileN = _128;
  using TileK = _32;
  using Stages = _3;

  // K-major smem tiles: 8 x 32 element atom (64 B rows), swizzled against ldmatrix
  // bank conflicts while keeping 8-element (16 B) vectors contiguous for cp.async.
  using SmemLayoutAtom =
      decltype(composition(Swizzle<2, 3, 3>{}, Layout<Shape<_8, _32>, Stride<_32, _1>>{}));
  using SmemLayoutA = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<TileM, TileK, Stages>{}));
  using SmemLayoutB = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<TileN, TileK, Stages>{}));

  // 128 threads as 32 x 4, each moving one 16 B vector (8 bf16) per cp.async.
  using GmemTiledCopy = decltype(make_tiled_copy(
      Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, bf16>{},
      Layout<Shape<_32, _4>, Stride<_4, _1>>{}, Layout<Shape<_1, _8>>{}));

  using TiledMma = decltype(make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN{},
                                           Layout<Shape<_2, _2, _1>>{}, Tile<_32, _32, _16>{}));
  using SmemCopyAtom = Copy_Atom<SM75_U32x4_LDSM_N, bf16>;

  static constexpr int kThreads = decltype(size(TiledMma{}))::value;
};

struct SharedStorage {
  cute::array_aligned<bf16, cosize_v<Config::SmemLayoutA>, 128> A;
  cute::array_aligned<bf16, cosize_v<Config::SmemLayoutB>, 128> B;
};

__global__ void __launch_bounds__(Config::kThreads)
gemm_cute_sm80(int M, int N, int K, float alpha, bf16 const* A, int ldA, bf16 const* B, int ldB,
               float beta, float* C, int ldC) {
  // Full tensors and this CTA's tiles.
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(ldA, Int<1>{}));
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(ldB, Int<1>{}));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(ldC, Int<1>{}));

  auto cta_tiler = make_shape(Config::TileM{}, Config::TileN{}, Config::TileK{});
  auto cta_coord = make_coord(blockIdx.y, blockIdx.x, _);
  Tensor gA = local_tile(mA, cta_tiler, cta_coord, Step<_1, X, _1>{});  // (BM, BK, k)
  Tensor gB = [&] {
    if constexpr (kDefect == Defect::b_cta_row) {
      return local_tile(mB, cta_tiler, cta_coord, Step<_1, X, _1>{});  // (BN, BK, k)
    } else {
      return local_tile(mB, cta_tiler, cta_coord, Step<X, _1, _1>{});  // (BN, BK, k)
    }
  }();
  Tensor gC = local_tile(mC, cta_tiler, cta_coord, Step<_1, _1, X>{});  // (BM, BN)

  extern __shared__ char smem_buf[];
  SharedStorage& storage = *reinterpret_cast<SharedStorage*>(smem_buf);
  Tensor sA = make_tensor(make_smem_ptr(storage.A.data()), Config::SmemLayoutA{});  // (BM, BK, PIPE)
  Tensor sB = make_tensor(make_smem_ptr(storage.B.data()), Config::SmemLayoutB{});  // (BN, BK, PIPE)

  // Global -> shared partitioning.
  typename Config::GmemTiledCopy g2s_copy;
  ThrCopy g2s_thr = g2s_copy.get_slice(threadIdx.x);
  Tensor tAgA = g2s_thr.partition_S(gA);  // (CPY, CPY_M, CPY_K, k)
  Tensor tAsA = g2s_thr.partition_D(sA);  // (CPY, CPY_M, CPY_K, PIPE)
  Tensor tBgB = g2s_thr.partition_S(gB);  // (CPY, CPY_N, CPY_K, k)
  Tensor tBsB = g2s_thr.partition_D(sB);  // (CPY, CPY_N, CPY_K, PIPE)

  // MMA partitioning: register fragments and the fp32 accumulator.
  typename Config::TiledMma tiled_mma;
  ThrMMA thr_mma = tiled_mma.get_slice(threadIdx.x);
  Tensor tCgC = thr_mma.partition_C(gC);                    // (MMA, MMA_M, MMA_N)
  Tensor tCrA = thr_mma.partition_fragment_A(sA(_, _, 0));  // (MMA, MMA_M, MMA_K)
  Tensor tCrB = thr_mma.partition_fragment_B(sB(_, _, 0));  // (MMA, MMA_N, MMA_K)
  Tensor accum = thr_mma.make_fragment_C(tCgC);             // (MMA, MMA_M, MMA_N)
  clear(accum);

  // Shared -> register partitioning (ldmatrix), retiled onto the MMA fragments.
  auto s2r_copy_a = make_tiled_copy_A(typename Config::SmemCopyAtom{}, tiled_mma);
  auto s2r_thr_a = s2r_copy_a.get_slice(threadIdx.x);
  Tensor tCsA = s2r_thr_a.partition_S(sA);           // (CPY, MMA_M, MMA_K, PIPE)
  Tensor tCrA_copy_view = s2r_thr_a.retile_D(tCrA);  // (CPY, MMA_M, MMA_K)
  auto s2r_copy_b = make_tiled_copy_B(typename Config::SmemCopyAtom{}, tiled_mma);
  auto s2r_thr_b = s2r_copy_b.get_slice(threadIdx.x);
  Tensor tCsB = s2r_thr_b.partition_S(sB);           // (CPY, MMA_N, MMA_K, PIPE)
  Tensor tCrB_copy_view = s2r_thr_b.retile_D(tCrB);  // (CPY, MMA_N, MMA_K)

  constexpr int kPipe = Config::Stages::value;
  constexpr int kBlocks = decltype(size<2>(tCrA))::value;
  const int k_tile_count = size<3>(tAgA);

  // Prologue: kPipe - 1 tiles in flight.
  CUTE_UNROLL
  for (int s = 0; s < kPipe - 1; ++s) {
    if (s < k_tile_count) {
      cute::copy(g2s_copy, tAgA(_, _, _, s), tAsA(_, _, _, s));
      cute::copy(g2s_copy, tBgB(_, _, _, s), tBsB(_, _, _, s));
    }
    cp_async_fence();
  }

  for (int k_tile = 0; k_tile < k_tile_count; ++k_tile) {
    cp_async_wait<kPipe - 2>();
    __syncthreads();
    if constexpr (kDefect == Defect::accum_reset) clear(accum);

    // Refill the stage everybody finished reading in the previous iteration.
    const int k_next = k_tile + kPipe - 1;
    const int pipe_next = k_next % kPipe;
    if (k_next < k_tile_count) {
      cute::copy(g2s_copy, tAgA(_, _, _, k_next), tAsA(_, _, _, pipe_next));
      if constexpr (kDefect == Defect::b_tile_index) {
        cute::copy(g2s_copy, tBgB(_, _, _, pipe_next), tBsB(_, _, _, pipe_next));
      } else {
        cute::copy(g2s_copy, tBgB(_, _, _, k_next), tBsB(_, _, _, pipe_next));
      }
    }
    cp_async_fence();

    // Shared -> registers for the whole k tile, then the MMAs block by block.
    const int pipe = k_tile % kPipe;
    CUTE_UNROLL
    for (int k_block = 0; k_block < kBlocks; ++k_block) {
      cute::copy(s2r_copy_a, tCsA(_, _, k_block, pipe), tCrA_copy_view(_, _, k_block));
      if constexpr (kDefect == Defect::ldsm_k_block) {
        cute::copy(s2r_copy_b, tCsB(_, _, 0, pipe), tCrB_copy_view(_, _, k_block));
      } else {
        cute::copy(s2r_copy_b, tCsB(_, _, k_block, pipe), tCrB_copy_view(_, _, k_block));
      }
    }
    CUTE_UNROLL
    for (int k_block = 0; k_block < kBlocks; ++k_block) {
      if constexpr (kDefect == Defect::kblock_full_gemm) {
        cute::gemm(tiled_mma, tCrA, tCrB, accum);
      } else {
        cute::gemm(tiled_mma, tCrA(_, _, k_block), tCrB(_, _, k_block), accum);
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: C = alpha * accum + beta * C, straight from registers.
  if constexpr (kDefect == Defect::alpha_twice) {
    CUTE_UNROLL
    for (int i = 0; i < size(accum); ++i) accum(i) *= alpha;
  }
  if constexpr (kDefect == Defect::axpby_swapped) {
    axpby(beta, accum, alpha, tCgC);
  } else {
    axpby(alpha, accum, beta, tCgC);
  }
}

}  // namespace gemm_sm80

// Requires M % 128 == 0, N % 128 == 0, K % 32 == 0 and 16 B aligned A / B rows.
cudaError_t gemm_bf16_tn_cute(int M, int N, int K, float alpha, const cute::bfloat16_t* A,
                              int ldA, const cute::bfloat16_t* B, int ldB, float beta, float* C,
                              int ldC, cudaStream_t stream) {
  using namespace gemm_sm80;
  if (M % 128 || N % 128 || K % 32 || ldA % 8 || ldB % 8) return cudaErrorInvalidValue;
  const int smem = int(sizeof(SharedStorage));
  cudaError_t err =
      cudaFuncSetAttribute(gemm_cute_sm80, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  dim3 grid(N / 128, M / 128);
  dim3 block(Config::kThreads);
  gemm_cute_sm80<<<grid, block, smem, stream>>>(M, N, K, alpha, A, ldA, B, ldB, beta, C, ldC);
  return cudaGetLastError();
}

// Rounds `v` to bf16 in place and returns the bf16 bits for the device.
static std::vector<__nv_bfloat16> to_bf16(std::vector<float>& v) {
  std::vector<__nv_bfloat16> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    bits[i] = __float2bfloat16(v[i]);
    v[i] = __bfloat162float(bits[i]);
  }
  return bits;
}

int main(int argc, char** argv) {
  using namespace kwb_harness;
  const Args args = parse_args(argc, argv, 256, 256, 1024);
  const int M = args.m, N = args.n, K = args.k;
  const float alpha = 2.0f, beta = 0.5f;
  const int out_bits = 24;  // fp32 output

  __nv_bfloat16 *dA = nullptr, *dB = nullptr;
  float* dC = nullptr;
  KWB_CUDA_CHECK(cudaMalloc(&dA, sizeof(__nv_bfloat16) * size_t(M) * K));
  KWB_CUDA_CHECK(cudaMalloc(&dB, sizeof(__nv_bfloat16) * size_t(N) * K));
  KWB_CUDA_CHECK(cudaMalloc(&dC, sizeof(float) * size_t(M) * N));

  for (Input input : args.inputs) {
    std::vector<float> a = make_operand(input, size_t(M) * K, 1);  // A(m, k) = a[m * K + k]
    std::vector<float> b = make_operand(input, size_t(N) * K, 2);  // B(k, n) = b[n * K + k]
    std::vector<float> c = make_operand(input, size_t(M) * N, 3);  // C(m, n) = c[m * N + n]
    const std::vector<__nv_bfloat16> a_bits = to_bf16(a);
    const std::vector<__nv_bfloat16> b_bits = to_bf16(b);
    dump_operand(input, "A", a, M, K);
    dump_operand(input, "B", b, N, K);

    KWB_CUDA_CHECK(cudaMemcpy(dA, a_bits.data(), sizeof(__nv_bfloat16) * a_bits.size(),
                              cudaMemcpyHostToDevice));
    KWB_CUDA_CHECK(cudaMemcpy(dB, b_bits.data(), sizeof(__nv_bfloat16) * b_bits.size(),
                              cudaMemcpyHostToDevice));
    KWB_CUDA_CHECK(cudaMemcpy(dC, c.data(), sizeof(float) * c.size(), cudaMemcpyHostToDevice));

    KWB_CUDA_CHECK(gemm_bf16_tn_cute(M, N, K, alpha, reinterpret_cast<const cute::bfloat16_t*>(dA),
                                     K, reinterpret_cast<const cute::bfloat16_t*>(dB), K, beta,
                                     dC, N, nullptr));
    KWB_CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<float> out(size_t(M) * N);
    KWB_CUDA_CHECK(cudaMemcpy(out.data(), dC, sizeof(float) * out.size(), cudaMemcpyDeviceToHost));

    const std::vector<double> ref =
        reference_gemm(M, N, K, a.data(), K, 1, b.data(), 1, K, alpha, beta, c.data(), nullptr);
    const double tol = tolerance(input, ref, out_bits, K);
    const Metrics metrics = compare(out.data(), ref, M, N, tol, out_bits);
    report("cute_sm80", KWB_DEFECT_NAME, input, M, N, K, metrics, tol);
  }

  KWB_CUDA_CHECK(cudaFree(dA));
  KWB_CUDA_CHECK(cudaFree(dB));
  KWB_CUDA_CHECK(cudaFree(dC));
  return 0;
}
