// kwb's independent reference GEMM, compiled apart from the kernel under test:
//   R[m][n] = alpha * sum_k A[m][k] * B[n][k] + beta * C[m][n]
// over the operands exactly as the runner stored them (A: M x K, row pitch lda; B:
// N x K, row pitch ldb; C: M x N, row pitch ldc; each of its element type), the
// products and their sum in double, the result packed M x N doubles. C is read only
// when beta != 0 (it holds NaN otherwise). 16 x 16 output tiles, K staged through
// shared memory 16 at a time.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

__device__ double wide(float v) { return v; }
__device__ double wide(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ double wide(__half v) { return __half2float(v); }

template <class T, class TC>
__device__ void reference(long long M, long long N, long long K, const T* A, long long lda,
                          const T* B, long long ldb, const TC* C, long long ldc, double alpha,
                          double beta, double* R) {
  __shared__ double a[16][17];
  __shared__ double b[16][17];
  const long long m = blockIdx.y * 16LL + threadIdx.y;
  const long long n = blockIdx.x * 16LL + threadIdx.x;
  double acc = 0.0;
  for (long long k0 = 0; k0 < K; k0 += 16) {
    const long long ka = k0 + threadIdx.x;
    const long long am = blockIdx.y * 16LL + threadIdx.y;
    const long long bn = blockIdx.x * 16LL + threadIdx.y;
    a[threadIdx.y][threadIdx.x] = (am < M && ka < K) ? wide(A[am * lda + ka]) : 0.0;
    b[threadIdx.y][threadIdx.x] = (bn < N && ka < K) ? wide(B[bn * ldb + ka]) : 0.0;
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc += a[threadIdx.y][k] * b[threadIdx.x][k];
    __syncthreads();
  }
  if (m < M && n < N) {
    double r = alpha * acc;
    if (beta != 0.0) r += beta * wide(C[m * ldc + n]);
    R[m * N + n] = r;
  }
}

}  // namespace

#define KWB_REFERENCE(NAME, T, TC)                                                          \
  extern "C" __global__ void NAME(long long M, long long N, long long K, const T* A,        \
                                  long long lda, const T* B, long long ldb, const TC* C,    \
                                  long long ldc, double alpha, double beta, double* R) {    \
    reference<T, TC>(M, N, K, A, lda, B, ldb, C, ldc, alpha, beta, R);                     \
  }

KWB_REFERENCE(kwb_reference_bf16_bf16, __nv_bfloat16, __nv_bfloat16)
KWB_REFERENCE(kwb_reference_bf16_f32, __nv_bfloat16, float)
KWB_REFERENCE(kwb_reference_f16_f16, __half, __half)
KWB_REFERENCE(kwb_reference_f16_f32, __half, float)
KWB_REFERENCE(kwb_reference_f32_f32, float, float)
