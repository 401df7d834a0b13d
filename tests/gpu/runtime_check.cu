// The trace runtime checked on the GPU: probes over inputs whose statistics are known,
// one site per case. `cargo xtask gpu-runtime` builds this with -DKWB_TRACE, runs it
// with KWB_TRACE_OUT, and compares every record with the expectations written in
// xtask/src/gpu_runtime.rs (computed there by hand from the formulas below, not by
// this file). Cases: the quick tally of a register fragment (sites 0, 9), NaN and Inf
// that send it to the full tally (1), the row filter (2), a packed bf16 shared tile
// (3) with NaN and -Inf (4), an unaligned tile read element-wise (5), a partial warp
// (6), a packed half tile (7), a tile with a row filter (8), the coordinates of an
// mma.sync accumulator of several MMA tiles with a row bound (10), and register
// fragments of packed 16-bit values tallied in pairs: bf16 (11), bf16 with NaN and
// +-Inf (12), half (13), and sites 11 and 12's fragments again as the A and B operands
// of one probe_as_pair, two records from one claim (14, 15). stage_check's two
// warpgroups read pipeline stages as an SS-mode MMA's operands are probed
// (probe_shared_stage): one from its stage's start, with NaN and -Inf (17), one from
// the middle of another stage (18); share_check's consumer warpgroups each read their
// own rows of one stage (19) and half of another (20), then the same two with one
// probe_shared_stage_pair call, as kwb-instrument emits for both operands of an MMA
// (21, 22, both at K tile 21). A summary build
// (KWB_TRACE_SUMMARY) folds the same calls into its table and then also runs
// summary_grid: 30 CTAs whose values name them, for the CTA of the peak and of the
// first NaN, the table's last K-tile row and a site past the table's default 32
// (16, 64). Before check, every build but the summary runs `stale` and resets: its
// records must all be gone. With KWB_CHECK_FOLDS (a screen build) every probe passes
// its site's fold (kwb::Fold, as kwb-instrument --screen emits them), so the calls add
// into registers and each warp folds them into the screen once, at the kernel's end:
// the screen must read the same.
#include <cstdio>
#include <cstring>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kwb_trace.cuh"

static const kwb::SiteInfo kwb_sites[] = {
    {0, "runtime_check.cu", 1, "finite fragment"},
    {1, "runtime_check.cu", 2, "fragment with NaN and Inf"},
    {2, "runtime_check.cu", 3, "fragment with a row filter"},
    {3, "runtime_check.cu", 4, "packed bf16 tile"},
    {4, "runtime_check.cu", 5, "packed bf16 tile with NaN and -Inf"},
    {5, "runtime_check.cu", 6, "unaligned bf16 tile"},
    {6, "runtime_check.cu", 7, "partial warp"},
    {7, "runtime_check.cu", 8, "packed half tile"},
    {8, "runtime_check.cu", 9, "tile with a row filter"},
    {9, "runtime_check.cu", 10, "finite fragment, all negative"},
    {10, "runtime_check.cu", 11, "m16n8k16 accumulator of 2 x 3 tiles, rows < 20"},
    {11, "runtime_check.cu", 12, "bf16 register fragment"},
    {12, "runtime_check.cu", 13, "bf16 register fragment with NaN and Inf"},
    {13, "runtime_check.cu", 14, "half register fragment"},
    {14, "runtime_check.cu", 15, "probe_as_pair: A, bf16"},
    {15, "runtime_check.cu", 16, "probe_as_pair: B, bf16 with NaN and Inf"},
    {17, "runtime_check.cu", 17, "stage from its start, NaN and -Inf"},
    {18, "runtime_check.cu", 18, "stage from its middle"},
    {19, "runtime_check.cu", 19, "stage, each consumer warpgroup its own rows"},
    {20, "runtime_check.cu", 20, "stage, split among the consumer warpgroups"},
    {21, "runtime_check.cu", 21, "probe_shared_stage_pair: A, own rows"},
    {22, "runtime_check.cu", 22, "probe_shared_stage_pair: B, split"},
};
[[maybe_unused]] static const bool kwb_sites_registered = kwb::register_sites(kwb_sites);

constexpr uint32_t kTag = kwb::tag_of("runtime_check");

// Site n's argument: its id, or with KWB_CHECK_FOLDS the id and its fold `fold_n`,
// declared by FOLD at the top of the kernel that probes it.
#ifdef KWB_CHECK_FOLDS
#define SITE(n) kwb::SiteArg(n##u, fold_##n)
#define FOLD(n, kind) kwb::Fold fold_##n{n##u, kwb::Kind::kind, kTag}
#else
#define SITE(n) n
#define FOLD(n, kind) static_assert(true, "")
#endif

// Eight 32-bit registers holding the 16 values v(i), value 2j in the low half of
// register j (as mma.sync operand fragments hold them).
template <class T, class F>
__device__ void pack16(uint32_t (&words)[8], F v) {
  for (int j = 0; j < 8; ++j) {
    const T lo = v(2 * j), hi = v(2 * j + 1);
    unsigned short a, b;
    memcpy(&a, &lo, 2);
    memcpy(&b, &hi, 2);
    words[j] = a | (static_cast<uint32_t>(b) << 16);
  }
}

// Coordinates (lane, -1, i) of element i of this lane's fragment.
struct LaneRow {
  __device__ kwb::Coord operator()(int i) const { return kwb::Coord{kwb::lane_id(), -1, i}; }
};

__global__ void check() {
  __shared__ __align__(16) __nv_bfloat16 tile[1040];
  __shared__ __align__(16) __half halves[256];
  const int lane = kwb::lane_id();
  const int warp = kwb::warp_id();
  FOLD(0, Accumulator);
  FOLD(1, OperandA);
  FOLD(2, OperandB);
  FOLD(3, OperandA);
  FOLD(4, OperandA);
  FOLD(5, OperandA);
  FOLD(6, Epilogue);
  FOLD(7, OperandB);
  FOLD(8, OperandA);
  FOLD(9, Accumulator);
  FOLD(10, Accumulator);
  FOLD(11, OperandA);
  FOLD(12, OperandB);
  FOLD(13, OperandA);
  FOLD(14, OperandA);
  FOLD(15, OperandB);

  // Site 0 (both warps): v = (lane * 16 + i) * 0.5 - 100.
  float f[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) f[i] = (lane * 16 + i) * 0.5f - 100.0f;
  kwb::probe_array(SITE(0), kwb::Kind::Accumulator, kTag, warp, 0, 0, f);

  // Site 9: v = -(lane * 16 + i) - 1.
  float neg[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) neg[i] = -static_cast<float>(lane * 16 + i) - 1.0f;
  if (warp == 0) kwb::probe_array(SITE(9), kwb::Kind::Accumulator, kTag, -1, 0, 0, neg);

  // Site 1: site 0's values with +Inf at (0, 0), -Inf at (0, 1), NaN at (31, 15).
  float g[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) g[i] = f[i];
  if (lane == 0) {
    g[0] = __int_as_float(0x7f800000);
    g[1] = __int_as_float(0xff800000);
  }
  if (lane == 31) g[15] = __int_as_float(0x7fc00000);
  if (warp == 0) kwb::probe_array(SITE(1), kwb::Kind::OperandA, kTag, 0, 0, 0, g);

  // Site 2: 1.0 on lanes < 20, 1000 on the padding lanes; rows are lanes, bound 20.
  float h[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) h[i] = lane < 20 ? 1.0f : 1000.0f;
  if (warp == 0) kwb::probe_array(SITE(2), kwb::Kind::OperandB, kTag, 1, 0, 0, h, 20, kwb::Axis::M, LaneRow{});

  // The shared tiles: tile[i] = (i % 64) - 32 (exact in bf16), halves[i] = i * 0.5.
  for (int i = threadIdx.x; i < 1040; i += blockDim.x) {
    tile[i] = __float2bfloat16(static_cast<float>(i % 64 - 32));
  }
  for (int i = threadIdx.x; i < 256; i += blockDim.x) halves[i] = __float2half(i * 0.5f);
  __syncthreads();
  if (warp == 0) {
    // Site 3: 1024 elements, packed.
    kwb::probe_tile(SITE(3), kwb::Kind::OperandA, kTag, 3, 0, 0, tile, 1024);
    // Site 5: 1001 elements from tile + 1 (not 16-byte aligned): element-wise.
    kwb::probe_tile(SITE(5), kwb::Kind::OperandA, kTag, 5, 0, 0, tile + 1, 1001);
    // Site 7: 256 halves, packed.
    kwb::probe_tile(SITE(7), kwb::Kind::OperandB, kTag, 7, 0, 0, halves, 256);
    // Site 8: the tile as 32 rows of 32 columns (m, k); rows < 5 count.
    kwb::probe_tile(SITE(8), kwb::Kind::OperandA, kTag, 8, 0, 0, tile, 1024, 5, kwb::Axis::M,
                    kwb::RowMajor{kwb::Axis::M, kwb::Axis::K, 32, 0, 0});
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tile[777] = __float2bfloat16(__int_as_float(0x7fc00000));
    tile[100] = __float2bfloat16(__int_as_float(0xff800000));
  }
  __syncthreads();
  // Site 4: site 3's tile with NaN at 777 and -Inf at 100, read as a tile known to be
  // in shared memory (probe_shared_tile: no address-space query; the same record).
  if (warp == 0) kwb::probe_shared_tile(SITE(4), kwb::Kind::OperandA, kTag, 4, 0, 0, tile, 1024);

  // Site 10: float acc[2][3][4] in the m16n8k16 C layout, dimension 0 the m tile and 1
  // the n tile; each value is m * 100 + n of its own coordinates; rows < 20 count.
  float t10[2][3][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int nj = 0; nj < 3; ++nj)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = 16 * mi + lane / 4 + 8 * (e / 2);
        const int n = 8 * nj + (lane % 4) * 2 + e % 2;
        t10[mi][nj][e] = static_cast<float>(m * 100 + n);
      }
  if (warp == 0) {
    kwb::probe(SITE(10), kwb::Kind::Accumulator, kTag, 10, 0, 0, t10, 20, kwb::Axis::M,
               kwb::MmaM16n8k16C{0, 1});
  }

  // Site 11: bf16 v = lane * 16 + i - 256 (exact), read from packed registers.
  uint32_t w11[8];
  pack16<__nv_bfloat16>(w11, [&](int i) {
    return __float2bfloat16(static_cast<float>(lane * 16 + i - 256));
  });
  if (warp == 0) kwb::probe_as<__nv_bfloat16>(SITE(11), kwb::Kind::OperandA, kTag, 11, 0, 0, w11);

  // Site 12: site 11's values with +Inf at (0, 2), NaN at (3, 5), -Inf at (31, 15).
  uint32_t w12[8];
  pack16<__nv_bfloat16>(w12, [&](int i) {
    float v = static_cast<float>(lane * 16 + i - 256);
    if (lane == 0 && i == 2) v = __int_as_float(0x7f800000);
    if (lane == 3 && i == 5) v = __int_as_float(0x7fc00000);
    if (lane == 31 && i == 15) v = __int_as_float(0xff800000);
    return __float2bfloat16(v);
  });
  if (warp == 0) kwb::probe_as<__nv_bfloat16>(SITE(12), kwb::Kind::OperandB, kTag, 12, 0, 0, w12);

  // Site 13: half v = (lane * 16 + i) * 0.25 (exact), read from packed registers.
  uint32_t w13[8];
  pack16<__half>(w13, [&](int i) { return __float2half((lane * 16 + i) * 0.25f); });
  if (warp == 0) kwb::probe_as<__half>(SITE(13), kwb::Kind::OperandA, kTag, 13, 0, 0, w13);

  // Sites 14 and 15: w11 as operand A and w12 as operand B of one pair probe.
  if (warp == 0) kwb::probe_as_pair<__nv_bfloat16>(SITE(14), SITE(15), kTag, 14, 0, 0, w11, w12);

  // Site 6: only lanes < 20 of warp 0: v = lane + i * 0.25.
  if (warp == 0 && lane < 20) {
    float p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = lane + i * 0.25f;
    kwb::probe_array(SITE(6), kwb::Kind::Epilogue, kTag, -1, 0, 0, p);
  }
}

// Two warpgroups (256 threads), each probing a stage of 2048 bf16 as kwb-instrument
// probes the tile an SS-mode MMA reads (kwb::probe_shared_stage: from the tile to the
// stage's end). Warpgroup 0, site 17: all of stage x, x[i] = (i % 64) - 32 with NaN at
// i % 256 == 77 and -Inf at i % 256 == 200. Warpgroup 1, site 18: stage y from element
// 1024, y[i] = (i % 64) * 0.5 - 16. Without a screen each warp reads a quarter and
// writes a record (site 17: 512 values with 2 NaN and 2 -Inf; site 18: 256 values); a
// screen with folds reads each stage with the warpgroup's threads together.
__global__ void stage_check() {
  __shared__ __align__(16) __nv_bfloat16 x[2048];
  __shared__ __align__(16) __nv_bfloat16 y[2048];
  FOLD(17, OperandA);
  FOLD(18, OperandB);
  for (int i = threadIdx.x; i < 2048; i += blockDim.x) {
    float v = static_cast<float>(i % 64 - 32);
    if (i % 256 == 77) v = __int_as_float(0x7fc00000);
    if (i % 256 == 200) v = __int_as_float(0xff800000);
    x[i] = __float2bfloat16(v);
    y[i] = __float2bfloat16((i % 64) * 0.5f - 16.0f);
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    kwb::probe_shared_stage(SITE(17), kwb::Kind::OperandA, kTag, 17, 0, 0, x, x, 2048);
  } else {
    kwb::probe_shared_stage(SITE(18), kwb::Kind::OperandB, kTag, 18, 0, 0, y + 1024, y, 2048);
  }
}

// share_check's three warpgroups divide stages as a cooperative wgmma kernel's do
// (kwb::own_part, kwb::split_part): warpgroup 0 (a producer's) lies outside A's stage,
// warpgroups 1 and 2 each own half of A's stage 1 (site 19) and read half of B's
// stage 1 (site 20), which both consume whole; then both again as one pair (21, 22). Stage 0 and what follows stage 1 hold
// NaN, which a read past its part would count.
__global__ void share_check() {
  __shared__ __align__(16) __nv_bfloat16 a[3][2048];
  __shared__ __align__(16) __nv_bfloat16 b[3][1024];
  FOLD(19, OperandA);
  FOLD(20, OperandB);
  FOLD(21, OperandA);
  FOLD(22, OperandB);
  for (int i = threadIdx.x; i < 3 * 2048; i += blockDim.x) {
    const bool inside = i / 2048 == 1;
    a[i / 2048][i % 2048] =
        __float2bfloat16(inside ? static_cast<float>(i % 64 - 32) : __int_as_float(0x7fc00000));
  }
  for (int i = threadIdx.x; i < 3 * 1024; i += blockDim.x) {
    const bool inside = i / 1024 == 1;
    b[i / 1024][i % 1024] =
        __float2bfloat16(inside ? (i % 64) * 0.5f - 16.0f : __int_as_float(0x7fc00000));
  }
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const int row_base = (wg - 1) * 1024;
  if (wg == 0) return;
  const int stage = 1;
  const __nv_bfloat16* tile_a = &a[0][0] + stage * 2048 + row_base;
  const __nv_bfloat16* tile_b = &b[0][0] + stage * 1024;
  auto offset = [&](unsigned t) {
    return static_cast<long long>((static_cast<int>(t / 128) - 1) * 1024);
  };
  kwb::probe_shared_stage(SITE(19), kwb::Kind::OperandA, kTag, 19, 0, 0, tile_a,
                          &a[0][0] + stage * 2048, 2048, kwb::own_part(offset));
  kwb::probe_shared_stage(SITE(20), kwb::Kind::OperandB, kTag, 20, 0, 0, tile_b,
                          &b[0][0] + stage * 1024, 1024, kwb::split_part(offset, 2048));
  // The same two reads in one call: the same records (sites 21, 22).
  kwb::probe_shared_stage_pair(SITE(21), SITE(22), kTag, 21, 0, 0, tile_a, &a[0][0] + stage * 2048,
                               2048, kwb::own_part(offset), tile_b, &b[0][0] + stage * 1024, 1024,
                               kwb::split_part(offset, 2048));
}

// Over a (5, 3, 2) grid of 64 threads, each warp probes site 16 twice: at K tile 0,
// v = (linear CTA + 1) * (lane + 1) for each of 4 elements, with a NaN at lane 5,
// element 0 in CTAs (3, 0, 1) and (2, 1, 1); at K tile 300 (past the table's rows:
// its last row), twice that. CTA (0, 0, 0) also probes site 64, past the table.
__global__ void summary_grid() {
  const int cta = static_cast<int>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  const int lane = kwb::lane_id();
  FOLD(16, Accumulator);
  FOLD(64, Epilogue);
  const bool poisoned = (blockIdx.x == 3 && blockIdx.y == 0 && blockIdx.z == 1) ||
                        (blockIdx.x == 2 && blockIdx.y == 1 && blockIdx.z == 1);
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = static_cast<float>((cta + 1) * (lane + 1));
  if (poisoned && lane == 5) v[0] = __int_as_float(0x7fc00000);
  kwb::probe_array(SITE(16), kwb::Kind::Accumulator, kTag, 0, 0, 0, v);
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = static_cast<float>(2 * (cta + 1) * (lane + 1));
  kwb::probe_array(SITE(16), kwb::Kind::Accumulator, kTag, 300, 0, 0, v);
  if (cta == 0) kwb::probe_array(SITE(64), kwb::Kind::Epilogue, kTag, -1, 0, 0, v);
}

// Site 99, 40 records a warp over check's own grid, so they fill the slots (and the
// shards) check's records later take, and more: main runs it and then resets the
// buffer, and not one of its records may be in the trace, nor its drops counted.
__global__ void stale() {
  float v[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  for (int i = 0; i < 40; ++i) kwb::probe_array(99, kwb::Kind::Accumulator, kTag, i, 0, 0, v);
}

int main() {
  if (kwb_trace_reset() != cudaSuccess) {
    std::fprintf(stderr, "runtime_check: no CUDA device\n");
    return 2;
  }
#ifndef KWB_TRACE_SUMMARY
  stale<<<1, 64>>>();
  if (cudaDeviceSynchronize() != cudaSuccess || kwb_trace_reset() != cudaSuccess) {
    std::fprintf(stderr, "runtime_check: the stale records' launch or the reset failed\n");
    return 1;
  }
#endif
  check<<<1, 64>>>();
  stage_check<<<1, 256>>>();
  share_check<<<1, 384>>>();
#ifdef KWB_TRACE_SUMMARY
  summary_grid<<<dim3(5, 3, 2), 64>>>();
#endif
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "runtime_check: %s\n", cudaGetErrorString(err));
    return 1;
  }
  std::printf("runtime_check: ran\n");
  return 0;
}
