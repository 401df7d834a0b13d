// simt_cp_async.cu: a CUDA-core (SIMT) f32 GEMM: register-blocked scalar FMAs over shared
// tiles that cp.async double-buffers. No tensor cores, no templates.
//
//   C = alpha * At^T * B + beta * C
//
//   At: K x M row-major f32 (i.e. A column-major, lda = ldat >= M); B: K x N row-major f32
//   (ldb >= N); C: M x N row-major f32 (ldc >= N). Both shared tiles are k-major, so each
//   16-byte cp.async moves 4 consecutive M (or N) values of one k. CTA tile 64 x 64 x 16,
//   256 threads as 16 x 16, each thread a 4 x 4 block of C.
//
// Ragged edges are not handled: M, N multiples of 64, K of 16, ldat, ldb multiples of 4
// (launcher returns cudaErrorInvalidValue otherwise). main's default 192 x 256 x 384 is;
// alpha = 1, beta = -1, so all-ones gives C = K - 1.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_80 [-DKWB_DEFECT=name] simt_cp_async.cu -o prog
//        ./prog [--m M --n N --k K]
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
enum class Defect { none, b_prefetch_rows, kk_bound };
constexpr Defect kDefect = Defect::KWB_DEFECT;

#define CUDA_OK(stmt)                                                                  \
  do {                                                                                 \
    cudaError_t code = (stmt);                                                         \
    if (code != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s -> %s\n", #stmt, cudaGetErrorString(code));             \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16
#define THREAD_M 4
#define THREAD_N 4
#define BLOCK_THREADS 256

__device__ __forceinline__ void cp_async_f4(float* smem, const float* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

__global__ void __launch_bounds__(BLOCK_THREADS)
sgemm_simt_kernel(int M, int N, int K, float alpha, const float* __restrict__ At, int ldat,
                  const float* __restrict__ B, int ldb, float beta, float* __restrict__ C,
                  int ldc) {
  __shared__ __align__(16) float As[2][TILE_K][TILE_M];
  __shared__ __align__(16) float Bs[2][TILE_K][TILE_N];

  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;  // thread block of C: rows ty*4.., cols tx*4..
  const int m0 = blockIdx.y * TILE_M, n0 = blockIdx.x * TILE_N;

  // One 16-byte chunk of each tile per thread: row kr of the tile, 4 values from column kc.
  const int kr = tid / (TILE_M / 4), kc = (tid % (TILE_M / 4)) * 4;
  const float* a_src = At + size_t(kr) * ldat + m0 + kc;
  const float* b_src = B + size_t(kr) * ldb + n0 + kc;

  float acc[THREAD_M][THREAD_N];
  for (int i = 0; i < THREAD_M; ++i)
    for (int j = 0; j < THREAD_N; ++j) acc[i][j] = 0.0f;

  const int k_tiles = K / TILE_K;
  cp_async_f4(&As[0][kr][kc], a_src);
  cp_async_f4(&Bs[0][kr][kc], b_src);
  cp_async_commit();

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < k_tiles) {
      const size_t next_k = size_t(kt + 1) * TILE_K;
      cp_async_f4(&As[cur ^ 1][kr][kc], a_src + next_k * ldat);
      if constexpr (kDefect == Defect::b_prefetch_rows)
        cp_async_f4(&Bs[cur ^ 1][kr][kc], b_src + size_t(kt) * TILE_K * ldb);
      else
        cp_async_f4(&Bs[cur ^ 1][kr][kc], b_src + next_k * ldb);
    }
    cp_async_commit();
    cp_async_wait_1();  // tile kt has landed (tile kt + 1 may be in flight)
    __syncthreads();

    const int kk_end = (kDefect == Defect::kk_bound) ? TILE_K - 1 : TILE_K;
#pragma unroll
    for (int kk = 0; kk < kk_end; ++kk) {
      const float4 a4 = *reinterpret_cast<const float4*>(&As[cur][kk][ty * THREAD_M]);
      const float4 b4 = *reinterpret_cast<const float4*>(&Bs[cur][kk][tx * THREAD_N]);
      const float a_frag[THREAD_M] = {a4.x, a4.y, a4.z, a4.w};
      const float b_frag[THREAD_N] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
      for (int i = 0; i < THREAD_M; ++i)
#pragma unroll
        for (int j = 0; j < THREAD_N; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
    }
    __syncthreads();  // the buffer read here is refilled in the next iteration
  }

#pragma unroll
  for (int i = 0; i < THREAD_M; ++i) {
    float* c = C + size_t(m0 + ty * THREAD_M + i) * ldc + n0 + tx * THREAD_N;
    float4 old = *reinterpret_cast<float4*>(c);
    float4 out;
    out.x = alpha * acc[i][0] + beta * old.x;
    out.y = alpha * acc[i][1] + beta * old.y;
    out.z = alpha * acc[i][2] + beta * old.z;
    out.w = alpha * acc[i][3] + beta * old.w;
    *reinterpret_cast<float4*>(c) = out;
  }
}

// C = alpha * At^T * B + beta * C on CUDA cores.
cudaError_t sgemm_simt(int M, int N, int K, float alpha, const float* At, int ldat,
                       const float* B, int ldb, float beta, float* C, int ldc,
                       cudaStream_t stream) {
  if (M <= 0 || N <= 0 || K <= 0 || M % TILE_M || N % TILE_N || K % TILE_K || ldat % 4 ||
      ldb % 4 || ldc % 4 || ldat < M || ldb < N || ldc < N)
    return cudaErrorInvalidValue;
  dim3 grid(N / TILE_N, M / TILE_M);
  sgemm_simt_kernel<<<grid, BLOCK_THREADS, 0, stream>>>(M, N, K, alpha, At, ldat, B, ldb, beta, C,
                                                       ldc);
  return cudaGetLastError();
}

// ---- self-check ---------------------------------------------------------------------------

static uint64_t rng_state;
static uint32_t rng_next() {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return uint32_t(rng_state >> 33);
}
static float sample(const char* kind) {
  if (!std::strcmp(kind, "ones")) return 1.0f;
  if (!std::strcmp(kind, "small_int")) return float(int(rng_next() % 5) - 2);
  return float(rng_next() & 0xFFFFFF) / 8388608.0f - 1.0f;
}

int main(int argc, char** argv) {
  int M = 192, N = 256, K = 384;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--m")) M = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--n")) N = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--k")) K = std::atoi(argv[i + 1]);
  }
  const float alpha = 1.0f, beta = -1.0f;
  const int ldat = M, ldb = N, ldc = N;
  std::printf("simt_cp_async: M=%d N=%d K=%d alpha=%g beta=%g\n", M, N, K, alpha, beta);

  float *dAt, *dB, *dC;
  CUDA_OK(cudaMalloc(&dAt, sizeof(float) * size_t(K) * ldat));
  CUDA_OK(cudaMalloc(&dB, sizeof(float) * size_t(K) * ldb));
  CUDA_OK(cudaMalloc(&dC, sizeof(float) * size_t(M) * ldc));

  bool all = true;
  for (const char* kind : {"ones", "small_int", "random"}) {
    rng_state = 42;
    std::vector<float> at(size_t(K) * ldat), b(size_t(K) * ldb), c(size_t(M) * ldc);
    for (auto& v : at) v = sample(kind);
    for (auto& v : b) v = sample(kind);
    for (auto& v : c) v = sample(kind);
    CUDA_OK(cudaMemcpy(dAt, at.data(), sizeof(float) * at.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dB, b.data(), sizeof(float) * b.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dC, c.data(), sizeof(float) * c.size(), cudaMemcpyHostToDevice));
    CUDA_OK(sgemm_simt(M, N, K, alpha, dAt, ldat, dB, ldb, beta, dC, ldc, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> out(c.size());
    CUDA_OK(cudaMemcpy(out.data(), dC, sizeof(float) * out.size(), cudaMemcpyDeviceToHost));

    const bool exact = std::strcmp(kind, "random") != 0;
    size_t bad = 0;
    double max_err = 0.0;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double s = 0.0;
        for (int p = 0; p < K; ++p) s += double(at[size_t(p) * ldat + i]) * double(b[size_t(p) * ldb + j]);
        const double ref = alpha * s + beta * double(c[size_t(i) * ldc + j]);
        const double got = out[size_t(i) * ldc + j];
        const double err = std::isfinite(got) ? std::fabs(got - ref) : INFINITY;
        max_err = std::fmax(max_err, err);
        if (exact ? got != ref : err > 1e-4 * std::fabs(ref) + 1e-3) ++bad;
      }
    std::printf("%-9s max_abs_err=%.4g mismatches=%zu %s\n", kind, max_err, bad,
                bad == 0 ? "PASS" : "FAIL");
    all = all && bad == 0;
  }
  CUDA_OK(cudaFree(dAt));
  CUDA_OK(cudaFree(dB));
  CUDA_OK(cudaFree(dC));
  std::printf("%s\n", all ? "PASS" : "FAIL");
  return all ? 0 : 1;
}
