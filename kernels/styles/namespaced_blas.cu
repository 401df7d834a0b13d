// namespaced_blas.cu: a column-major, BLAS-style f32 GEMM (TF32 tensor cores) whose kernel
// and launcher live entirely inside namespace mylib::gemm.
//
//   C = alpha * op(A) * op(B) + beta * C,   op(X) = X or X^T per transa / transb ('N' / 'T')
//
//   Column-major storage as in BLAS: op(A) is m x k, op(B) is k x n, C is m x n (ldc >= m).
//   Operands are rounded to TF32 (cvt.rna) on their way into shared memory; f32 accumulation
//   with mma.sync.m16n8k8.tf32. CTA tile 64 x 64 x 16, 4 warps (2 x 2), warp tile 32 x 32.
//   Ragged edges are handled: out-of-range operand elements load as zero and stores are
//   guarded, so any m, n, k >= 1 works. When beta == 0, C is not read.
//
// main runs transa = 'N', transb = 'T', alpha = 2, beta = 0.5, with lda = m + 16;
// default 300 x 200 x 520 (ragged in every dimension). All-ones gives C = 2k + 0.5.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_80 [-DKWB_DEFECT=name] namespaced_blas.cu -o prog
//        ./prog [--m M --n N --k K] [--transa N|T] [--transb N|T]
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
enum class Defect { none, lda_as_m, beta_times_alpha };
constexpr Defect kDefect = Defect::KWB_DEFECT;

namespace mylib::gemm {

enum class Op { N, T };

namespace detail {

constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 128;
constexpr int kLds = kBK + 4;  // floats per shared row

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ void mma_tf32_1688(float (&d)[4], const uint32_t (&a)[4],
                                              const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__global__ void __launch_bounds__(kThreads)
sgemm_tf32_kernel(Op opa, Op opb, int m, int n, int k, float alpha, const float* __restrict__ A,
                  int lda, const float* __restrict__ B, int ldb, float beta,
                  float* __restrict__ C, int ldc) {
  __shared__ uint32_t As[kBM][kLds];  // As[i][p] = op(A)(row0 + i, k0 + p)
  __shared__ uint32_t Bs[kBN][kLds];  // Bs[j][p] = op(B)(k0 + p, col0 + j)

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t4 = lane % 4;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  const int row0 = blockIdx.x * kBM, col0 = blockIdx.y * kBN;

  float acc[2][4][4] = {};
  for (int k0 = 0; k0 < k; k0 += kBK) {
    // op(A) tile, kBM x kBK: consecutive threads walk the contiguous dimension.
    for (int e = tid; e < kBM * kBK; e += kThreads) {
      const int i = (opa == Op::N) ? e % kBM : e / kBK;
      const int p = (opa == Op::N) ? e / kBM : e % kBK;
      const int gi = row0 + i, gp = k0 + p;
      float v = 0.0f;
      if (gi < m && gp < k) {
        if (opa == Op::N) {
          if constexpr (kDefect == Defect::lda_as_m) v = A[gi + size_t(gp) * m];
          else v = A[gi + size_t(gp) * lda];
        } else {
          v = A[gp + size_t(gi) * lda];
        }
      }
      As[i][p] = to_tf32(v);
    }
    // op(B) tile, kBK x kBN.
    for (int e = tid; e < kBN * kBK; e += kThreads) {
      const int j = (opb == Op::T) ? e % kBN : e / kBK;
      const int p = (opb == Op::T) ? e / kBN : e % kBK;
      const int gj = col0 + j, gp = k0 + p;
      float v = 0.0f;
      if (gj < n && gp < k) v = (opb == Op::N) ? B[gp + size_t(gj) * ldb] : B[gj + size_t(gp) * ldb];
      Bs[j][p] = to_tf32(v);
    }
    __syncthreads();

#pragma unroll
    for (int kk = 0; kk < kBK; kk += 8) {
      uint32_t af[2][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = wm + i * 16 + g;
        af[i][0] = As[r][kk + t4];
        af[i][1] = As[r + 8][kk + t4];
        af[i][2] = As[r][kk + t4 + 4];
        af[i][3] = As[r + 8][kk + t4 + 4];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        bf[j][0] = Bs[wn + j * 8 + g][kk + t4];
        bf[j][1] = Bs[wn + j * 8 + g][kk + t4 + 4];
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_tf32_1688(acc[i][j], af[i], bf[j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + wm + i * 16 + g + (e / 2) * 8;
        const int c = col0 + wn + j * 8 + t4 * 2 + (e % 2);
        if (r >= m || c >= n) continue;
        float* out = C + r + size_t(c) * ldc;
        float v = alpha * acc[i][j][e];
        if (beta != 0.0f) {
          if constexpr (kDefect == Defect::beta_times_alpha) v = alpha * (acc[i][j][e] + beta * *out);
          else v += beta * *out;
        }
        *out = v;
      }
}

}  // namespace detail

inline Op to_op(char t) { return (t == 'T' || t == 't' || t == 'C' || t == 'c') ? Op::T : Op::N; }

// Column-major SGEMM (TF32 tensor cores): C = alpha * op(A) * op(B) + beta * C.
cudaError_t sgemm(char transa, char transb, int m, int n, int k, float alpha, const float* A,
                  int lda, const float* B, int ldb, float beta, float* C, int ldc,
                  cudaStream_t stream = nullptr) {
  const Op opa = to_op(transa), opb = to_op(transb);
  if (m < 0 || n < 0 || k < 0) return cudaErrorInvalidValue;
  if (lda < (opa == Op::N ? m : k) || ldb < (opb == Op::N ? k : n) || ldc < m || lda < 1 ||
      ldb < 1 || ldc < 1)
    return cudaErrorInvalidValue;
  if (m == 0 || n == 0) return cudaSuccess;
  const dim3 grid((m + detail::kBM - 1) / detail::kBM, (n + detail::kBN - 1) / detail::kBN);
  detail::sgemm_tf32_kernel<<<grid, detail::kThreads, 0, stream>>>(opa, opb, m, n, k, alpha, A,
                                                                   lda, B, ldb, beta, C, ldc);
  return cudaGetLastError();
}

}  // namespace mylib::gemm

// ---- self-check (outside the library) --------------------------------------------------

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t err = (x);                                                              \
    if (err != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err)); \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

static uint64_t lcg_state;
static float next_value(int kind) {
  lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
  const uint32_t r = uint32_t(lcg_state >> 33);
  if (kind == 0) return 1.0f;
  if (kind == 1) return float(int(r % 5) - 2);
  return float(r & 0xFFFFFF) / 8388608.0f - 1.0f;
}

int main(int argc, char** argv) {
  int m = 300, n = 200, k = 520;
  char transa = 'N', transb = 'T';
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--m")) m = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--n")) n = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--k")) k = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--transa")) transa = argv[i + 1][0];
    else if (!std::strcmp(argv[i], "--transb")) transb = argv[i + 1][0];
  }
  const bool ta = transa == 'T' || transa == 't', tb = transb == 'T' || transb == 't';
  const int a_rows = ta ? k : m, a_cols = ta ? m : k;  // stored shape of A
  const int b_rows = tb ? n : k, b_cols = tb ? k : n;
  const int lda = a_rows + 16, ldb = b_rows, ldc = m;
  const float alpha = 2.0f, beta = 0.5f;
  std::printf("namespaced_blas: m=%d n=%d k=%d trans=%c%c lda=%d alpha=%g beta=%g\n", m, n, k,
              transa, transb, lda, alpha, beta);

  float *dA, *dB, *dC;
  CHECK(cudaMalloc(&dA, sizeof(float) * size_t(lda) * a_cols));
  CHECK(cudaMalloc(&dB, sizeof(float) * size_t(ldb) * b_cols));
  CHECK(cudaMalloc(&dC, sizeof(float) * size_t(ldc) * n));

  const char* names[] = {"ones", "small_int", "random"};
  bool pass_all = true;
  for (int kind = 0; kind < 3; ++kind) {
    lcg_state = 0x9E3779B97F4A7C15ull + kind;
    std::vector<float> hA(size_t(lda) * a_cols, 0.0f), hB(size_t(ldb) * b_cols), hC(size_t(ldc) * n);
    for (int c = 0; c < a_cols; ++c)
      for (int r = 0; r < a_rows; ++r) hA[r + size_t(c) * lda] = next_value(kind);
    for (auto& x : hB) x = next_value(kind);
    for (auto& x : hC) x = next_value(kind);
    CHECK(cudaMemcpy(dA, hA.data(), sizeof(float) * hA.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB, hB.data(), sizeof(float) * hB.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dC, hC.data(), sizeof(float) * hC.size(), cudaMemcpyHostToDevice));

    CHECK(mylib::gemm::sgemm(transa, transb, m, n, k, alpha, dA, lda, dB, ldb, beta, dC, ldc));
    CHECK(cudaDeviceSynchronize());
    std::vector<float> out(hC.size());
    CHECK(cudaMemcpy(out.data(), dC, sizeof(float) * out.size(), cudaMemcpyDeviceToHost));

    size_t bad = 0;
    double max_err = 0.0;
    // TF32 keeps 10 mantissa bits: random inputs carry ~2^-11 relative error per operand.
    const double tol_abs = 5e-3 * std::sqrt(double(k));
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double s = 0.0;
        for (int p = 0; p < k; ++p) {
          const double av = ta ? hA[p + size_t(i) * lda] : hA[i + size_t(p) * lda];
          const double bv = tb ? hB[j + size_t(p) * ldb] : hB[p + size_t(j) * ldb];
          s += av * bv;
        }
        const double ref = alpha * s + beta * hC[i + size_t(j) * ldc];
        const double got = out[i + size_t(j) * ldc];
        const double err = std::isfinite(got) ? std::fabs(got - ref) : INFINITY;
        max_err = std::fmax(max_err, err);
        const bool good = kind == 2 ? err <= tol_abs + 1e-3 * std::fabs(ref) : got == ref;
        bad += good ? 0 : 1;
      }
    const bool pass = bad == 0;
    pass_all = pass_all && pass;
    std::printf("%-9s max_abs_err=%.4g mismatches=%zu %s\n", names[kind], max_err, bad,
                pass ? "PASS" : "FAIL");
  }
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dC));
  std::printf("%s\n", pass_all ? "PASS" : "FAIL");
  return pass_all ? 0 : 1;
}
