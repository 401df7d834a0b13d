// One of two traced translation units linked into one program (tests/hook/units): a
// tiled SIMT GEMM, D = A B, f32, 16 x 16 tiles. kwb-nvcc names each unit
// (KWB_TRACE_UNIT), so each keeps its own trace buffer, site table and trace file.
#include <cuda_runtime.h>

namespace {
constexpr int kTile = 16;

__global__ void gemm_a(int M, int N, int K, const float* A, const float* B, float* D) {
  __shared__ float As[kTile][kTile];
  __shared__ float Bs[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int kt = 0; kt < K / kTile; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[row * K + kt * kTile + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(kt * kTile + threadIdx.y) * N + col];
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  D[row * N + col] = acc;
}
}  // namespace

// D = A B for M x K and K x N device matrices (multiples of 16).
cudaError_t run_a(int M, int N, int K, const float* A, const float* B, float* D) {
  gemm_a<<<dim3(N / kTile, M / kTile), dim3(kTile, kTile)>>>(M, N, K, A, B, D);
  return cudaDeviceSynchronize();
}
