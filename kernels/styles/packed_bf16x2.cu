// packed_bf16x2.cu: bf16 GEMM with a fused residual add whose epilogue reads and writes
// packed pairs (__nv_bfloat162), in a plain (non-template) kernel, sm_80+.
//
//   D = alpha * A * W^T + R
//
//   A: rows x hidden row-major bf16 (activations); W: cols x hidden row-major bf16 (weights);
//   R (residual) and D: rows x cols row-major bf16. f32 accumulation with mma.sync.m16n8k16;
//   both operands through ldmatrix.x4 from a double-buffered cp.async shared tile.
//   Each accumulator pair (c0, c1) covers two adjacent columns, so the epilogue moves 4 bytes
//   at a time. CTA tile 128 x 128 x 32, 8 warps (4 x 2), warp tile 32 x 64.
//
// Ragged edges are not handled: rows, cols multiples of 128 and hidden of 32 (launcher returns
// cudaErrorInvalidValue otherwise). main's default 256 x 256 x 768 is; alpha = 0.25, so
// all-ones gives D = hidden / 4 + 1.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_80 [-DKWB_DEFECT=name] packed_bf16x2.cu -o prog
//        ./prog [--m rows --n cols --k hidden]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifndef KWB_DEFECT
#define KWB_DEFECT none
#endif
enum class Defect { none, pair_swap, b_frag_pair };
constexpr Defect kDefect = Defect::KWB_DEFECT;

#define CUDA_CALL(x)                                                                   \
  do {                                                                                 \
    const cudaError_t st = (x);                                                        \
    if (st != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(st)); \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)

constexpr int kBM = 128, kBN = 128, kBK = 32;
constexpr int kThreads = 256;
constexpr int kRowElems = kBK + 8;  // 80-byte shared rows: 16-byte aligned, ldmatrix friendly

__device__ __forceinline__ uint32_t s_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void async_copy16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void ldmatrix4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                          const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(s_addr(p)));
}
__device__ __forceinline__ void mma16816(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(kThreads)
gemm_residual_bf16x2_kernel(const __nv_bfloat16* __restrict__ A,
                            const __nv_bfloat16* __restrict__ W,
                            const __nv_bfloat16* __restrict__ R, __nv_bfloat16* __restrict__ D,
                            int rows, int cols, int hidden, float alpha) {
  __shared__ __align__(128) __nv_bfloat16 sa[2][kBM * kRowElems];
  __shared__ __align__(128) __nv_bfloat16 sw[2][kBN * kRowElems];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 64;
  const int bm = blockIdx.y * kBM, bn = blockIdx.x * kBN;
  const int n_k = hidden / kBK;

  // Each thread moves 2 chunks of A and 2 of W per stage: row = c / 4, 8 columns from (c % 4) * 8.
  auto fill = [&](int buf, int kt) {
#pragma unroll
    for (int c = tid; c < kBM * (kBK / 8); c += kThreads) {
      const int r = c >> 2, col = (c & 3) * 8;
      async_copy16(&sa[buf][r * kRowElems + col], A + size_t(bm + r) * hidden + kt * kBK + col);
      async_copy16(&sw[buf][r * kRowElems + col], W + size_t(bn + r) * hidden + kt * kBK + col);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };

  float acc[2][8][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

  fill(0, 0);
  for (int kt = 0; kt < n_k; ++kt) {
    const int buf = kt & 1;
    if (kt + 1 < n_k) fill(buf ^ 1, kt + 1);
    else asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    __syncthreads();

#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t af[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        ldmatrix4(af[i][0], af[i][1], af[i][2], af[i][3],
                  &sa[buf][(wm + i * 16 + (lane & 15)) * kRowElems + kk + (lane >> 4) * 8]);
#pragma unroll
      for (int j = 0; j < 8; j += 2) {
        uint32_t b0, b1, b2, b3;  // (b0, b1): n-tile j; (b2, b3): n-tile j + 1
        ldmatrix4(b0, b1, b2, b3,
                  &sw[buf][(wn + j * 8 + (lane & 7) + (lane >> 4) * 8) * kRowElems + kk +
                           ((lane >> 3) & 1) * 8]);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          mma16816(acc[i][j], af[i], b0, b1);
          if constexpr (kDefect == Defect::b_frag_pair) mma16816(acc[i][j + 1], af[i], b0, b1);
          else mma16816(acc[i][j + 1], af[i], b2, b3);
        }
      }
    }
    __syncthreads();
  }

  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const size_t off = size_t(bm + wm + i * 16 + g + h * 8) * cols + bn + wn + j * 8 + q * 2;
        const float2 res = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&R[off]));
        const float x = alpha * acc[i][j][2 * h] + res.x;
        const float y = alpha * acc[i][j][2 * h + 1] + res.y;
        if constexpr (kDefect == Defect::pair_swap)
          *reinterpret_cast<__nv_bfloat162*>(&D[off]) = __floats2bfloat162_rn(y, x);
        else
          *reinterpret_cast<__nv_bfloat162*>(&D[off]) = __floats2bfloat162_rn(x, y);
      }
}

// D = alpha * A * W^T + R (R and D distinct).
cudaError_t linear_residual(const __nv_bfloat16* A, const __nv_bfloat16* W,
                            const __nv_bfloat16* R, __nv_bfloat16* D, int rows, int cols,
                            int hidden, float alpha, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || hidden <= 0 || rows % kBM || cols % kBN || hidden % kBK)
    return cudaErrorInvalidValue;
  const dim3 grid(cols / kBN, rows / kBM);
  gemm_residual_bf16x2_kernel<<<grid, kThreads, 0, stream>>>(A, W, R, D, rows, cols, hidden, alpha);
  return cudaGetLastError();
}

// ---- self-check ---------------------------------------------------------------------------

static uint64_t lcg = 1;
static float draw(int kind) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  const uint32_t r = uint32_t(lcg >> 33);
  return kind == 0 ? 1.0f : kind == 1 ? float(int(r % 5) - 2) : float(r & 0xFFFFFF) / 8388608.0f - 1.0f;
}

int main(int argc, char** argv) {
  int rows = 256, cols = 256, hidden = 768;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--m")) rows = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--n")) cols = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--k")) hidden = std::atoi(argv[i + 1]);
  }
  const float alpha = 0.25f;
  std::printf("packed_bf16x2: rows=%d cols=%d hidden=%d alpha=%g\n", rows, cols, hidden, alpha);

  using bf16 = __nv_bfloat16;
  bf16 *dA, *dW, *dR, *dD;
  CUDA_CALL(cudaMalloc(&dA, sizeof(bf16) * size_t(rows) * hidden));
  CUDA_CALL(cudaMalloc(&dW, sizeof(bf16) * size_t(cols) * hidden));
  CUDA_CALL(cudaMalloc(&dR, sizeof(bf16) * size_t(rows) * cols));
  CUDA_CALL(cudaMalloc(&dD, sizeof(bf16) * size_t(rows) * cols));

  const char* label[] = {"ones", "small_int", "random"};
  bool every = true;
  for (int kind = 0; kind < 3; ++kind) {
    lcg = 77 + kind;
    std::vector<bf16> hA(size_t(rows) * hidden), hW(size_t(cols) * hidden), hR(size_t(rows) * cols);
    for (auto& v : hA) v = __float2bfloat16_rn(draw(kind));
    for (auto& v : hW) v = __float2bfloat16_rn(draw(kind));
    for (auto& v : hR) v = __float2bfloat16_rn(draw(kind));
    CUDA_CALL(cudaMemcpy(dA, hA.data(), sizeof(bf16) * hA.size(), cudaMemcpyHostToDevice));
    CUDA_CALL(cudaMemcpy(dW, hW.data(), sizeof(bf16) * hW.size(), cudaMemcpyHostToDevice));
    CUDA_CALL(cudaMemcpy(dR, hR.data(), sizeof(bf16) * hR.size(), cudaMemcpyHostToDevice));
    CUDA_CALL(cudaMemset(dD, 0xFF, sizeof(bf16) * size_t(rows) * cols));
    CUDA_CALL(linear_residual(dA, dW, dR, dD, rows, cols, hidden, alpha, nullptr));
    CUDA_CALL(cudaDeviceSynchronize());
    std::vector<bf16> hD(size_t(rows) * cols);
    CUDA_CALL(cudaMemcpy(hD.data(), dD, sizeof(bf16) * hD.size(), cudaMemcpyDeviceToHost));

    std::vector<float> a(hA.size()), w(hW.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = __bfloat162float(hA[i]);
    for (size_t i = 0; i < w.size(); ++i) w[i] = __bfloat162float(hW[i]);
    size_t bad = 0;
    double max_err = 0.0;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        double s = 0.0;
        for (int p = 0; p < hidden; ++p) s += double(a[size_t(r) * hidden + p]) * w[size_t(c) * hidden + p];
        const double ref = alpha * s + __bfloat162float(hR[size_t(r) * cols + c]);
        const float got = __bfloat162float(hD[size_t(r) * cols + c]);
        const double err = std::isfinite(got) ? std::fabs(got - ref) : INFINITY;
        max_err = std::fmax(max_err, err);
        const bool ok = kind == 2 ? err <= 1e-2 * std::fabs(ref) + 1e-3
                                  : got == __bfloat162float(__float2bfloat16_rn(float(ref)));
        if (!ok) ++bad;
      }
    std::printf("%-9s max_abs_err=%.4g mismatches=%zu %s\n", label[kind], max_err, bad,
                bad == 0 ? "PASS" : "FAIL");
    every = every && bad == 0;
  }
  CUDA_CALL(cudaFree(dA));
  CUDA_CALL(cudaFree(dW));
  CUDA_CALL(cudaFree(dR));
  CUDA_CALL(cudaFree(dD));
  std::printf("%s\n", every ? "PASS" : "FAIL");
  return every ? 0 : 1;
}
