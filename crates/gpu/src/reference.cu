// kwb's independent reference GEMM, compiled apart from the kernel under test:
//   R[m][n] = alpha * sum_k A[m][k] * B[n][k] + beta * C[m][n]
// over the operands exactly as the runner stored them (A: M x K, element (m, k) at
// m * a_row + k * a_col; B: N x K, (n, k) at n * b_row + k * b_col; C: M x N, (m, n) at
// m * c_row + n * c_col: a row-major operand has (pitch, 1), a column-major one (1, pitch);
// each of its element type), the
// products and their sum in double, the result packed M x N doubles. C is read only
// when beta != 0 (it holds NaN otherwise). A block of 16 x 16 threads computes a
// 64 x 64 output tile, 4 x 4 outputs per thread (rows ty + 16 i, columns tx + 16 j),
// K staged through shared memory 16 at a time; each output's sum runs over k in order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace {

__device__ double wide(float v) { return v; }
__device__ double wide(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ double wide(__half v) { return __half2float(v); }
__device__ double wide(__nv_fp8_e4m3 v) { return static_cast<float>(v); }

constexpr int kTile = 64, kStep = 16, kPer = kTile / 16;

template <class T, class TC>
__device__ void reference(long long M, long long N, long long K, const T* A, long long a_row,
                          long long a_col, const T* B, long long b_row, long long b_col,
                          const TC* C, long long c_row, long long c_col, double alpha,
                          double beta, double* R) {
  // [k][row]: a thread reads 4 rows (or columns) of one k from one shared row.
  __shared__ double a[kStep][kTile + 1];
  __shared__ double b[kStep][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long m0 = blockIdx.y * (long long)kTile, n0 = blockIdx.x * (long long)kTile;
  double acc[kPer][kPer] = {};
  for (long long k0 = 0; k0 < K; k0 += kStep) {
    // 64 rows x 16 k of A and of B: each thread loads 4 of each, k fastest (coalesced).
    for (int r = ty; r < kTile; r += 16) {
      const long long k = k0 + tx;
      const long long am = m0 + r, bn = n0 + r;
      a[tx][r] = (am < M && k < K) ? wide(A[am * a_row + k * a_col]) : 0.0;
      b[tx][r] = (bn < N && k < K) ? wide(B[bn * b_row + k * b_col]) : 0.0;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kStep; ++k) {
      double av[kPer], bv[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        av[i] = a[k][ty + 16 * i];
        bv[i] = b[k][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < kPer; ++i)
#pragma unroll
        for (int j = 0; j < kPer; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const long long m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m < M && n < N) {
        double r = alpha * acc[i][j];
        if (beta != 0.0) r += beta * wide(C[m * c_row + n * c_col]);
        R[m * N + n] = r;
      }
    }
  }
}

}  // namespace

#define KWB_REFERENCE(NAME, T, TC)                                                          \
  extern "C" __global__ void NAME(long long M, long long N, long long K, const T* A,        \
                                  long long a_row, long long a_col, const T* B,            \
                                  long long b_row, long long b_col, const TC* C,           \
                                  long long c_row, long long c_col, double alpha,          \
                                  double beta, double* R) {                                \
    reference<T, TC>(M, N, K, A, a_row, a_col, B, b_row, b_col, C, c_row, c_col, alpha,    \
                     beta, R);                                                             \
  }

KWB_REFERENCE(kwb_reference_bf16_bf16, __nv_bfloat16, __nv_bfloat16)
KWB_REFERENCE(kwb_reference_bf16_f32, __nv_bfloat16, float)
KWB_REFERENCE(kwb_reference_f16_f16, __half, __half)
KWB_REFERENCE(kwb_reference_f16_f32, __half, float)
KWB_REFERENCE(kwb_reference_f32_f32, float, float)
KWB_REFERENCE(kwb_reference_e4m3_e4m3, __nv_fp8_e4m3, __nv_fp8_e4m3)
KWB_REFERENCE(kwb_reference_e4m3_f32, __nv_fp8_e4m3, float)
