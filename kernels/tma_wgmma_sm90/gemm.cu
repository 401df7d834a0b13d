// tma_wgmma_sm90 family: Hopper (sm_90a) warp-specialized bf16 GEMM, PTX inline.
//
//   D = alpha * A * B^T + beta * C
//   A: M x K bf16 (row pitch lda), B: N x K bf16 (row pitch ldb), both K-major ("TN");
//   C/D: M x N row-major bf16, f32 accumulate.
//
// CTA tile 128 x 64 x 64, 384 threads. Warpgroup 0 is the producer: one thread issues
// cp.async.bulk.tensor.2d (TMA) loads of the A and B boxes into a STAGES-deep ring of
// 128B-swizzled shared-memory stages, signalled through full/empty mbarriers. Warpgroups
// 1 and 2 consume: each runs wgmma.mma_async m64n64k16 (both operands from shared memory,
// GMMA matrix descriptors) over its 64 rows of the tile; the last K tile is peeled out of
// the mainloop. The epilogue applies alpha/beta from registers and stores straight to
// global memory.
//
// The tensor maps are encoded on the host with cuTensorMapEncodeTiled, obtained through
// cudaGetDriverEntryPointByVersion so the binary links against the runtime only.
//
// Harness: alpha = 2, beta = 0 on every rung, so all-ones gives out == 2 * K everywhere.
// A and B are stored with a padded row pitch (ld = K + 64). The output is poisoned with
// NaN before each launch and the GEMM runs in place (C == D); beta == 0 means C is not
// read (BLAS convention). Default shape M = 256, N = 256, K = 1024.
//
// Build: nvcc -std=c++17 -O3 -arch=sm_90a -I kernels/common -DKWB_DEFECT=<name> \
//        kernels/tma_wgmma_sm90/gemm.cu -o gemm
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kwb_harness.cuh"

enum class Defect {
  none,
  tmap_stride,
  tmap_dim_order,
  tmap_swizzle,
  stale_last_tile,
  accum_reset,
  alpha_twice,
  beta_zero_reads_c,
};
constexpr Defect kDefect = Defect::KWB_DEFECT;

namespace {

constexpr int BM = 128, BN = 64, BK = 64, STAGES = 4;
constexpr int kConsumers = 2;  // consumer warpgroups, 64 rows each
constexpr int kThreads = 128 * (kConsumers + 1);
constexpr int kTileBytesA = BM * BK * 2, kTileBytesB = BN * BK * 2;
constexpr int kStageBytes = kTileBytesA + kTileBytesB;
constexpr size_t kSmemBytes = size_t(STAGES) * kStageBytes + 1024;  // + alignment slack

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(count));
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  } while (!done);
}

// TMA: one 2D box, coordinates are (inner = K column, outer = row).
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const CUtensorMap* map,
                                            uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n"
      :: "r"(smem_u32(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1),
         "r"(smem_u32(bar))
      : "memory");
}

// GMMA shared-memory matrix descriptor for a K-major tile stored with the 128B swizzle
// that TMA wrote: 8-row core-matrix groups are 1024 B apart (SBO), LBO unused (16 B).
__device__ __forceinline__ uint64_t make_smem_desc(const __nv_bfloat16* tile) {
  const uint64_t addr = smem_u32(tile);
  uint64_t desc = (addr & 0x3FFFF) >> 4;  // start address
  desc |= uint64_t(16 >> 4) << 16;        // leading byte offset
  desc |= uint64_t(1024 >> 4) << 32;      // stride byte offset
  desc |= uint64_t(1) << 62;              // swizzle mode: 128B
  return desc;
}

// wgmma is sm_90a-only; nvcc also emits portable compute_90 PTX, where these become no-ops
// or a trap. The sm_90a cubin is the one that runs.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GEMM_SM90A_ENABLED 1
#endif

__device__ __forceinline__ void wgmma_fence() {
#ifdef GEMM_SM90A_ENABLED
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#ifdef GEMM_SM90A_ENABLED
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_wait_all() {
#ifdef GEMM_SM90A_ENABLED
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}

// scale_d == 0 overwrites d, otherwise d += A * B. Both operands come from shared memory.
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                int scale_d) {
#ifdef GEMM_SM90A_ENABLED
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
        "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#else
  __trap();
#endif
}

// One BK-deep K tile of a warpgroup's 64 x 64 block: BK / 16 wgmmas, then wait for them
// so the stage can be handed back. With zero_init the first wgmma overwrites acc.
__device__ __forceinline__ void mma_k_tile(float (&acc)[32], const __nv_bfloat16* tile_a,
                                           const __nv_bfloat16* tile_b, bool zero_init) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    // Inside a 128B swizzle atom, stepping K by 16 elements = +32 bytes of start address.
    wgmma_m64n64k16(acc, make_smem_desc(tile_a + kk * 16), make_smem_desc(tile_b + kk * 16),
                    (zero_init && kk == 0) ? 0 : 1);
  }
  wgmma_commit();
  wgmma_wait_all();
}

}  // namespace

__global__ void __launch_bounds__(kThreads, 1)
gemm_wgmma_tma(const __grid_constant__ CUtensorMap tmap_a,
               const __grid_constant__ CUtensorMap tmap_b, int M, int N, int K, float alpha,
               float beta, const __nv_bfloat16* C, __nv_bfloat16* D) {
  extern __shared__ unsigned char smem_raw[];
  // TMA 128B swizzle needs 1024 B aligned destinations.
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  __nv_bfloat16* sA = reinterpret_cast<__nv_bfloat16*>(smem);                        // [STAGES][BM][BK]
  __nv_bfloat16* sB = reinterpret_cast<__nv_bfloat16*>(smem + STAGES * kTileBytesA);  // [STAGES][BN][BK]
  __shared__ __align__(8) uint64_t full_bar[STAGES];
  __shared__ __align__(8) uint64_t empty_bar[STAGES];

  const int wg = threadIdx.x / 128;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full_bar[s], 1);                  // producer's arrive + TMA bytes
      mbar_init(&empty_bar[s], kConsumers * 128);  // every consumer thread releases
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // Producer warpgroup: a single elected thread drives the TMA engine.
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<uint64_t>(&tmap_a)));
      asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<uint64_t>(&tmap_b)));
      int stage = 0;
      uint32_t phase = 0;
      for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(&empty_bar[stage], phase ^ 1);  // first pass falls through
        mbar_arrive_expect_tx(&full_bar[stage], kStageBytes);
        tma_load_2d(sA + stage * BM * BK, &tmap_a, &full_bar[stage], kt * BK, m0);
        tma_load_2d(sB + stage * BN * BK, &tmap_b, &full_bar[stage], kt * BK, n0);
        if (++stage == STAGES) { stage = 0; phase ^= 1; }
      }
    }
    return;
  }

  // Consumer warpgroups: wg 1 owns rows [0, 64) of the tile, wg 2 rows [64, 128).
  const int row_base = (wg - 1) * 64;
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.0f;

  int stage = 0;
  uint32_t phase = 0;
  const __nv_bfloat16* tile_a = sA + row_base * BK;
  const __nv_bfloat16* tile_b = sB;
  for (int kt = 0; kt + 1 < k_tiles; ++kt) {
    tile_a = sA + stage * BM * BK + row_base * BK;
    tile_b = sB + stage * BN * BK;
    mbar_wait(&full_bar[stage], phase);
    if constexpr (kDefect == Defect::accum_reset) mma_k_tile(acc, tile_a, tile_b, stage == 0);
    else mma_k_tile(acc, tile_a, tile_b, kt == 0);
    mbar_arrive(&empty_bar[stage]);  // stage fully read: hand it back to the producer
    if (++stage == STAGES) { stage = 0; phase ^= 1; }
  }
  // Last K tile: the producer has nothing left to load, so the stage is not handed back.
  mbar_wait(&full_bar[stage], phase);
  if constexpr (kDefect != Defect::stale_last_tile) {
    tile_a = sA + stage * BM * BK + row_base * BK;
    tile_b = sB + stage * BN * BK;
  }
  mma_k_tile(acc, tile_a, tile_b, k_tiles == 1);

  // Epilogue. Warp w of the warpgroup holds rows 16w..16w+15; acc[4j + {0,1}] are
  // columns 8j + 2*(lane%4) + {0,1} of row lane/4, acc[4j + {2,3}] the same 8 rows lower.
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  bool read_c = beta != 0.0f;
  if constexpr (kDefect == Defect::beta_zero_reads_c) read_c = C != nullptr;
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] *= alpha;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = n0 + j * 8 + (lane % 4) * 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + row_base + warp * 16 + lane / 4 + h * 8;
      if (row >= M || col >= N) continue;
      const size_t off = size_t(row) * N + col;
      float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
      if constexpr (kDefect == Defect::alpha_twice) v0 *= alpha, v1 *= alpha;
      if (read_c) {
        const __nv_bfloat162 c = *reinterpret_cast<const __nv_bfloat162*>(C + off);
        v0 += beta * __low2float(c);
        v1 += beta * __high2float(c);
      }
      *reinterpret_cast<__nv_bfloat162*>(D + off) = __floats2bfloat162_rn(v0, v1);
    }
  }
}

using EncodeTiledFn = decltype(&cuTensorMapEncodeTiled);

// cuTensorMapEncodeTiled from the driver, looked up once through the runtime.
static EncodeTiledFn tensor_map_encoder() {
  static const EncodeTiledFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<EncodeTiledFn>(p);
  }();
  return fn;
}

// rows x cols bf16 matrix, row pitch ld elements -> 2D tensor map with a box of
// box_rows x BK, 128B-swizzled as make_smem_desc expects.
static CUresult encode_kmajor_map(CUtensorMap* map, const __nv_bfloat16* ptr, int rows, int cols,
                                  int ld, int box_rows) {
  const EncodeTiledFn encode = tensor_map_encoder();
  if (encode == nullptr) return CUDA_ERROR_NOT_FOUND;
  cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  if constexpr (kDefect == Defect::tmap_dim_order) dims[0] = cuuint64_t(rows), dims[1] = cuuint64_t(cols);
  cuuint64_t strides[1] = {cuuint64_t(ld) * sizeof(__nv_bfloat16)};
  if constexpr (kDefect == Defect::tmap_stride) strides[0] = cuuint64_t(cols) * sizeof(__nv_bfloat16);
  const cuuint32_t box[2] = {cuuint32_t(BK), cuuint32_t(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  if constexpr (kDefect == Defect::tmap_swizzle) swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(ptr), dims,
                strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// Requires K % 8 == 0, lda/ldb >= K and multiples of 8 (16 B global pitches), N % 2 == 0.
// C may alias D (in-place update); C is read only when beta != 0.
cudaError_t launch_gemm_wgmma(int M, int N, int K, float alpha, const __nv_bfloat16* A, int lda,
                              const __nv_bfloat16* B, int ldb, float beta, const __nv_bfloat16* C,
                              __nv_bfloat16* D, cudaStream_t stream) {
  if (M <= 0 || N <= 0 || K <= 0 || K % 8 != 0 || N % 2 != 0 || lda < K || ldb < K ||
      lda % 8 != 0 || ldb % 8 != 0)
    return cudaErrorInvalidValue;
  CUtensorMap tmap_a, tmap_b;
  if (encode_kmajor_map(&tmap_a, A, M, K, lda, BM) != CUDA_SUCCESS ||
      encode_kmajor_map(&tmap_b, B, N, K, ldb, BN) != CUDA_SUCCESS)
    return cudaErrorInvalidValue;
  cudaError_t err = cudaFuncSetAttribute(gemm_wgmma_tma, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(kSmemBytes));
  if (err != cudaSuccess) return err;
  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  gemm_wgmma_tma<<<grid, kThreads, kSmemBytes, stream>>>(tmap_a, tmap_b, M, N, K, alpha, beta, C, D);
  return cudaGetLastError();
}

int main(int argc, char** argv) {
  using namespace kwb_harness;
  const Args args = parse_args(argc, argv, 256, 256, 1024);
  const int M = args.m, N = args.n, K = args.k;
  const int lda = K + 64, ldb = K + 64;
  const float alpha = 2.0f, beta = 0.0f;
  constexpr int kOutBits = 8;  // bf16

  __nv_bfloat16 *dA = nullptr, *dB = nullptr, *dD = nullptr;
  KWB_CUDA_CHECK(cudaMalloc(&dA, size_t(M) * lda * sizeof(__nv_bfloat16)));
  KWB_CUDA_CHECK(cudaMalloc(&dB, size_t(N) * ldb * sizeof(__nv_bfloat16)));
  KWB_CUDA_CHECK(cudaMalloc(&dD, size_t(M) * N * sizeof(__nv_bfloat16)));

  std::vector<__nv_bfloat16> hA(size_t(M) * K), hB(size_t(N) * K), hD(size_t(M) * N);
  std::vector<float> out(size_t(M) * N);

  for (Input input : args.inputs) {
    // Operands as the kernel sees them: rounded to bf16, and the reference uses exactly these.
    std::vector<float> a = make_operand(input, size_t(M) * K, 11);
    std::vector<float> b = make_operand(input, size_t(N) * K, 23);
    for (size_t i = 0; i < a.size(); ++i) {
      hA[i] = __float2bfloat16(a[i]);
      a[i] = __bfloat162float(hA[i]);
    }
    for (size_t i = 0; i < b.size(); ++i) {
      hB[i] = __float2bfloat16(b[i]);
      b[i] = __bfloat162float(hB[i]);
    }
    dump_operand(input, "A", a, M, K);
    dump_operand(input, "B", b, N, K);

    // Pitched operands (padding zeroed); output poisoned with NaN (0xFFFF) so any element
    // the kernel does not write shows up.
    KWB_CUDA_CHECK(cudaMemset(dA, 0, size_t(M) * lda * sizeof(__nv_bfloat16)));
    KWB_CUDA_CHECK(cudaMemset(dB, 0, size_t(N) * ldb * sizeof(__nv_bfloat16)));
    KWB_CUDA_CHECK(cudaMemcpy2D(dA, size_t(lda) * sizeof(__nv_bfloat16), hA.data(),
                                size_t(K) * sizeof(__nv_bfloat16), size_t(K) * sizeof(__nv_bfloat16),
                                M, cudaMemcpyHostToDevice));
    KWB_CUDA_CHECK(cudaMemcpy2D(dB, size_t(ldb) * sizeof(__nv_bfloat16), hB.data(),
                                size_t(K) * sizeof(__nv_bfloat16), size_t(K) * sizeof(__nv_bfloat16),
                                N, cudaMemcpyHostToDevice));
    KWB_CUDA_CHECK(cudaMemset(dD, 0xFF, size_t(M) * N * sizeof(__nv_bfloat16)));

    KWB_CUDA_CHECK(launch_gemm_wgmma(M, N, K, alpha, dA, lda, dB, ldb, beta, dD, dD, nullptr));
    KWB_CUDA_CHECK(cudaDeviceSynchronize());
    if (args.time > 0) {
      time_launches("tma_wgmma_sm90", KWB_DEFECT_NAME, M, N, K, args.time, [&] {
        return launch_gemm_wgmma(M, N, K, alpha, dA, lda, dB, ldb, beta, dD, dD, nullptr);
      });
      break;
    }
    KWB_CUDA_CHECK(cudaMemcpy(hD.data(), dD, hD.size() * sizeof(__nv_bfloat16),
                              cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < hD.size(); ++i) out[i] = __bfloat162float(hD[i]);

    // A(m, k) = a[m * K + k], B(k, n) = b[n * K + k].
    const std::vector<double> ref =
        reference_gemm(M, N, K, a.data(), K, 1, b.data(), 1, K, alpha, beta, nullptr, nullptr);
    const double tol = tolerance(input, ref, kOutBits, K);
    const Metrics metrics = compare(out.data(), ref, M, N, tol, kOutBits);
    report("tma_wgmma_sm90", KWB_DEFECT_NAME, input, M, N, K, metrics, tol);
  }

  KWB_CUDA_CHECK(cudaFree(dA));
  KWB_CUDA_CHECK(cudaFree(dB));
  KWB_CUDA_CHECK(cudaFree(dD));
  return 0;
}
