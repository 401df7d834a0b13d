// The program of tests/hook/units: both traced units run on all-ones, 32 x 32 x 64.
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

cudaError_t run_a(int M, int N, int K, const float* A, const float* B, float* D);
cudaError_t run_b(int M, int N, int K, const float* A, const float* B, float* D);

int main() {
  const int M = 32, N = 32, K = 64;
  std::vector<float> ones(size_t(M) * K, 1.0f), out(size_t(M) * N);
  float *a = nullptr, *b = nullptr, *d = nullptr;
  cudaMalloc(&a, sizeof(float) * M * K);
  cudaMalloc(&b, sizeof(float) * K * N);
  cudaMalloc(&d, sizeof(float) * M * N);
  cudaMemcpy(a, ones.data(), sizeof(float) * M * K, cudaMemcpyHostToDevice);
  cudaMemcpy(b, ones.data(), sizeof(float) * K * N, cudaMemcpyHostToDevice);
  const cudaError_t ea = run_a(M, N, K, a, b, d);
  cudaMemcpy(out.data(), d, sizeof(float) * M * N, cudaMemcpyDeviceToHost);
  const float first = out[0];
  const cudaError_t eb = run_b(M, N, K, a, b, d);
  cudaMemcpy(out.data(), d, sizeof(float) * M * N, cudaMemcpyDeviceToHost);
  std::printf("gemm_a: %s, D[0] = %g; gemm_b: %s, D[0] = %g\n", cudaGetErrorString(ea), first,
              cudaGetErrorString(eb), out[0]);
  return ea == cudaSuccess && eb == cudaSuccess ? 0 : 1;
}
