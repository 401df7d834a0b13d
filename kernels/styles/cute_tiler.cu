// cute_tiler.cu: f16 GEMM written with CuTe; the launcher builds the problem shape, the CTA
// tiler, the gmem strides, the smem layouts, the tiled copies and the tiled MMA, and passes
// them all by value to the kernel.
//
//   C = alpha * A * B^T + beta * C
//
//   A: m x k, k-major (row stride ldA >= k) f16; B: n x k, k-major (row stride ldB) f16;
//   C: m x n column-major (ldC >= m) f32. f32 accumulation with the SM80 16x8x16 f16 MMA atom,
//   a 2 x 2 warp layout, a 3-stage cp.async (128-bit) shared-memory pipeline.
//   CTA tile 128 x 64 x 32.
//
// Ragged edges are not handled: m must be a multiple of 128, n of 64, k of 32, and ldA, ldB
// multiples of 8 (the launcher returns cudaErrorInvalidValue otherwise). main's default shape
// 256 x 192 x 512 is, with a padded A (ldA = k + 8) and alpha = 2, beta = 0.5:
// all-ones gives C = 2k + 0.5.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_80 -I <cutlass>/include [-DKWB_DEFECT=name]
//             cute_tiler.cu -o prog
//        ./prog [--m M --n N --k K]
#include <cuda_runtime.h>

#include <cute/tensor.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifndef KWB_DEFECT
#define KWB_DEFECT none
#endif
enum class Defect { none, a_row_stride, beta_dropped };
constexpr Defect kDefect = Defect::KWB_DEFECT;

#define CUDA_CHECK(expr)                                                                   \
  do {                                                                                     \
    cudaError_t e_ = (expr);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

using namespace cute;

template <class ProblemShape, class CtaTiler,
          class TA, class AStride, class ASmemLayout, class TiledCopyA,
          class TB, class BStride, class BSmemLayout, class TiledCopyB,
          class TC, class CStride, class TiledMma, class Alpha, class Beta>
__global__ static __launch_bounds__(decltype(size(TiledMma{}))::value)
void gemm_tn_kernel(ProblemShape shape_MNK, CtaTiler cta_tiler,
                    TA const* A, AStride dA, ASmemLayout sA_layout, TiledCopyA copy_a,
                    TB const* B, BStride dB, BSmemLayout sB_layout, TiledCopyB copy_b,
                    TC* C, CStride dC, TiledMma mma, Alpha alpha, Beta beta) {
  // Full problem views, then this CTA's tiles.
  Tensor mA = make_tensor(make_gmem_ptr(A), select<0, 2>(shape_MNK), dA);  // (M,K)
  Tensor mB = make_tensor(make_gmem_ptr(B), select<1, 2>(shape_MNK), dB);  // (N,K)
  Tensor mC = make_tensor(make_gmem_ptr(C), select<0, 1>(shape_MNK), dC);  // (M,N)

  auto cta_coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, cta_tiler, cta_coord, Step<_1, X, _1>{});  // (BLK_M,BLK_K,k)
  Tensor gB = local_tile(mB, cta_tiler, cta_coord, Step<X, _1, _1>{});  // (BLK_N,BLK_K,k)
  Tensor gC = local_tile(mC, cta_tiler, cta_coord, Step<_1, _1, X>{});  // (BLK_M,BLK_N)

  __shared__ __align__(128) TA smem_a[cosize_v<ASmemLayout>];
  __shared__ __align__(128) TB smem_b[cosize_v<BSmemLayout>];
  Tensor sA = make_tensor(make_smem_ptr(smem_a), sA_layout);  // (BLK_M,BLK_K,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem_b), sB_layout);  // (BLK_N,BLK_K,PIPE)

  // gmem -> smem partitions.
  ThrCopy thr_copy_a = copy_a.get_slice(threadIdx.x);
  Tensor tAgA = thr_copy_a.partition_S(gA);  // (CPY,CPY_M,CPY_K,k)
  Tensor tAsA = thr_copy_a.partition_D(sA);  // (CPY,CPY_M,CPY_K,PIPE)
  ThrCopy thr_copy_b = copy_b.get_slice(threadIdx.x);
  Tensor tBgB = thr_copy_b.partition_S(gB);  // (CPY,CPY_N,CPY_K,k)
  Tensor tBsB = thr_copy_b.partition_D(sB);  // (CPY,CPY_N,CPY_K,PIPE)

  // MMA partitions and register fragments.
  ThrMMA thr_mma = mma.get_slice(threadIdx.x);
  Tensor tCsA = thr_mma.partition_A(sA);                   // (MMA,MMA_M,MMA_K,PIPE)
  Tensor tCsB = thr_mma.partition_B(sB);                   // (MMA,MMA_N,MMA_K,PIPE)
  Tensor tCgC = thr_mma.partition_C(gC);                   // (MMA,MMA_M,MMA_N)
  Tensor tCrA = thr_mma.make_fragment_A(tCsA(_, _, _, 0));  // (MMA,MMA_M,MMA_K)
  Tensor tCrB = thr_mma.make_fragment_B(tCsB(_, _, _, 0));  // (MMA,MMA_N,MMA_K)
  Tensor tCrC = thr_mma.make_fragment_C(tCgC);              // (MMA,MMA_M,MMA_N)
  clear(tCrC);

  constexpr int kPipe = size<3>(tAsA);
  const int k_tile_count = size<3>(tAgA);
  int k_tile_next = 0;

  // Prologue: fill all stages but one.
  CUTE_UNROLL
  for (int pipe = 0; pipe < kPipe - 1; ++pipe) {
    if (k_tile_next < k_tile_count) {
      copy(copy_a, tAgA(_, _, _, k_tile_next), tAsA(_, _, _, pipe));
      copy(copy_b, tBgB(_, _, _, k_tile_next), tBsB(_, _, _, pipe));
    }
    cp_async_fence();
    ++k_tile_next;
  }

  int pipe_read = 0;
  int pipe_write = kPipe - 1;
  constexpr int kBlocks = size<2>(tCrA);
  for (int k_tile = 0; k_tile < k_tile_count; ++k_tile) {
    cp_async_wait<kPipe - 2>();  // the tile in pipe_read has landed
    __syncthreads();             // ... for every thread; and pipe_write is no longer read

    if (k_tile_next < k_tile_count) {
      copy(copy_a, tAgA(_, _, _, k_tile_next), tAsA(_, _, _, pipe_write));
      copy(copy_b, tBgB(_, _, _, k_tile_next), tBsB(_, _, _, pipe_write));
    }
    cp_async_fence();
    ++k_tile_next;

    CUTE_UNROLL
    for (int k_block = 0; k_block < kBlocks; ++k_block) {
      copy(tCsA(_, _, k_block, pipe_read), tCrA(_, _, k_block));
      copy(tCsB(_, _, k_block, pipe_read), tCrB(_, _, k_block));
      gemm(mma, tCrA(_, _, k_block), tCrB(_, _, k_block), tCrC);
    }

    pipe_write = pipe_read;
    pipe_read = (pipe_read + 1 == kPipe) ? 0 : pipe_read + 1;
  }

  // Epilogue: C = alpha * acc + beta * C.
  CUTE_UNROLL
  for (int i = 0; i < size(tCrC); ++i) {
    if constexpr (kDefect == Defect::beta_dropped) {
      tCgC(i) = alpha * tCrC(i);
    } else {
      tCgC(i) = alpha * tCrC(i) + beta * tCgC(i);
    }
  }
}

// C = alpha * A * B^T + beta * C, BLAS-like argument order; A and B are k-major.
cudaError_t gemm_tn(int m, int n, int k, float alpha, half_t const* A, int ldA,
                    half_t const* B, int ldB, float beta, float* C, int ldC,
                    cudaStream_t stream) {
  auto bM = Int<128>{};
  auto bN = Int<64>{};
  auto bK = Int<32>{};
  auto bP = Int<3>{};
  if (m <= 0 || n <= 0 || k <= 0 || m % bM || n % bN || k % bK || ldA % 8 || ldB % 8 ||
      ldA < k || ldB < k || ldC < m)
    return cudaErrorInvalidValue;

  auto prob_shape = make_shape(m, n, k);
  auto cta_tiler = make_shape(bM, bN, bK);

  // gmem strides: A and B k-major, C column-major.
  auto dA = make_stride(kDefect == Defect::a_row_stride ? k : ldA, Int<1>{});
  auto dB = make_stride(ldB, Int<1>{});
  auto dC = make_stride(Int<1>{}, ldC);

  // smem: k-major tiles, one per pipeline stage.
  auto sA = make_layout(make_shape(bM, bK, bP), make_stride(bK, Int<1>{}, bM * bK));
  auto sB = make_layout(make_shape(bN, bK, bP), make_stride(bK, Int<1>{}, bN * bK));

  // 128 threads, 32 x 4 (k-major), 8 halves (16 bytes) per cp.async.
  TiledCopy copy_a = make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEALWAYS<uint128_t>, half_t>{},
                                     Layout<Shape<_32, _4>, Stride<_4, _1>>{},
                                     Layout<Shape<_1, _8>>{});
  TiledCopy copy_b = make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEALWAYS<uint128_t>, half_t>{},
                                     Layout<Shape<_32, _4>, Stride<_4, _1>>{},
                                     Layout<Shape<_1, _8>>{});

  // 2 x 2 warps of 16x8x16 atoms; each warp covers 16 x 16 of a 32 x 32 x 16 MMA tile.
  TiledMMA mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{}, Layout<Shape<_2, _2>>{},
                                Tile<_32, _32, _16>{});

  dim3 block(size(mma));
  dim3 grid(size(ceil_div(m, bM)), size(ceil_div(n, bN)));
  gemm_tn_kernel<<<grid, block, 0, stream>>>(prob_shape, cta_tiler, A, dA, sA, copy_a, B, dB, sB,
                                             copy_b, C, dC, mma, alpha, beta);
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// Self-check.

struct Lcg {
  uint64_t s;
  explicit Lcg(uint64_t seed) : s(seed * 2654435761ull + 1) {}
  uint32_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s >> 33);
  }
};

enum class Input { ones, small_int, random };

static float draw(Input in, Lcg& rng) {
  switch (in) {
    case Input::ones: return 1.0f;
    case Input::small_int: return float(int(rng.next() % 5) - 2);
    default: return float(rng.next() & 0xFFFFFF) / 8388608.0f - 1.0f;
  }
}

int main(int argc, char** argv) {
  int m = 256, n = 192, k = 512;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--m")) m = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--n")) n = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--k")) k = std::atoi(argv[i + 1]);
  }
  const int ldA = k + 8, ldB = k, ldC = m;
  const float alpha = 2.0f, beta = 0.5f;
  std::printf("cute_tiler: m=%d n=%d k=%d ldA=%d alpha=%g beta=%g\n", m, n, k, ldA, alpha, beta);

  half_t *dA, *dB;
  float* dC;
  CUDA_CHECK(cudaMalloc(&dA, sizeof(half_t) * size_t(m) * ldA));
  CUDA_CHECK(cudaMalloc(&dB, sizeof(half_t) * size_t(n) * ldB));
  CUDA_CHECK(cudaMalloc(&dC, sizeof(float) * size_t(ldC) * n));

  bool all_pass = true;
  const Input kinds[] = {Input::ones, Input::small_int, Input::random};
  const char* names[] = {"ones", "small_int", "random"};
  for (int t = 0; t < 3; ++t) {
    const Input in = kinds[t];
    Lcg rng(7 + t);
    std::vector<half_t> hA(size_t(m) * ldA, half_t(0.0f)), hB(size_t(n) * ldB);
    std::vector<float> hC(size_t(ldC) * n);
    for (int i = 0; i < m; ++i)
      for (int p = 0; p < k; ++p) hA[size_t(i) * ldA + p] = half_t(draw(in, rng));
    for (auto& x : hB) x = half_t(draw(in, rng));
    for (auto& x : hC) x = draw(in, rng);
    CUDA_CHECK(cudaMemcpy(dA, hA.data(), sizeof(half_t) * hA.size(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dB, hB.data(), sizeof(half_t) * hB.size(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dC, hC.data(), sizeof(float) * hC.size(), cudaMemcpyHostToDevice));

    CUDA_CHECK(gemm_tn(m, n, k, alpha, dA, ldA, dB, ldB, beta, dC, ldC, nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(hC.size());
    CUDA_CHECK(cudaMemcpy(out.data(), dC, sizeof(float) * out.size(), cudaMemcpyDeviceToHost));

    size_t bad = 0;
    double worst = 0.0;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double acc = 0.0;
        for (int p = 0; p < k; ++p)
          acc += double(float(hA[size_t(i) * ldA + p])) * double(float(hB[size_t(j) * ldB + p]));
        const double ref = alpha * acc + beta * double(hC[size_t(j) * ldC + i]);
        const float got = out[size_t(j) * ldC + i];
        const double err = std::isfinite(got) ? std::fabs(got - ref) : INFINITY;
        worst = std::fmax(worst, err);
        const bool ok = (in == Input::random) ? err <= 1e-4 * std::fabs(ref) + 1e-3
                                              : double(got) == ref;
        if (!ok) ++bad;
      }
    const bool pass = bad == 0;
    all_pass &= pass;
    std::printf("%-9s max_abs_err=%.4g mismatches=%zu %s\n", names[t], worst, bad,
                pass ? "PASS" : "FAIL");
  }
  CUDA_CHECK(cudaFree(dA));
  CUDA_CHECK(cudaFree(dB));
  CUDA_CHECK(cudaFree(dC));
  std::printf("%s\n", all_pass ? "PASS" : "FAIL");
  return all_pass ? 0 : 1;
}
