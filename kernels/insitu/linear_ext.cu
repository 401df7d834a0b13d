// linear_ext.cu: a PyTorch C++/CUDA extension, `out = x @ w.T` in bf16 with fp32
// accumulation, the way a model's custom linear layer is written: a tiled SIMT GEMM
// whose launcher takes torch::Tensor and launches on PyTorch's current stream.
//
// It exists to be diagnosed where it runs: `kwb diagnose --kernel linear_kernel --
// python -m pytest kernels/insitu/test_linear_ext.py` builds it through kwb-nvcc
// (torch.utils.cpp_extension.load with PYTORCH_NVCC), runs the launch the test makes
// on kwb's inputs inside the test's process, and puts the test's tensors back.
//
// Build (what the test does): torch.utils.cpp_extension.load(name, [this file],
// extra_cuda_cflags=["-DKWB_DEFECT=<name>"]) with a defect planted, or none.
//
// Defects (KWB_DEFECT):
//   none           correct
//   k_tile_twice   the last K tile is accumulated twice (mma)
//   load_k_offset  A's tile is loaded one k further along than it belongs (operand-load)
//   store_scaled   the output is stored times 2 (epilogue)

#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>

#ifndef KWB_DEFECT
#define KWB_DEFECT none
#endif

enum class Defect { none, k_tile_twice, load_k_offset, store_scaled };
constexpr Defect kDefect = Defect::KWB_DEFECT;

constexpr int BM = 64;
constexpr int BN = 64;
constexpr int BK = 16;

// out[m][n] = sum_k x[m][k] * w[n][k]; x is M x K, w is N x K, out is M x N, all
// row-major. 16 x 16 threads, each 4 x 4 outputs of a 64 x 64 tile.
__global__ void linear_kernel(const __nv_bfloat16* __restrict__ A,
                              const __nv_bfloat16* __restrict__ B,
                              __nv_bfloat16* __restrict__ D, int M, int N, int K) {
  __shared__ float As[BK][BM + 1];
  __shared__ float Bs[BK][BN + 1];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int tid = ty * 16 + tx;
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * BN;
  float acc[4][4] = {};
  const int k_tiles = (K + BK - 1) / BK;
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int k0 = kt * BK;
    for (int i = tid; i < BM * BK; i += 256) {
      const int r = i / BK;
      const int c = i % BK;
      const int gk = k0 + c + (kDefect == Defect::load_k_offset ? 1 : 0);
      const int gm = m0 + r;
      const int gn = n0 + r;
      As[c][r] = (gm < M && gk < K) ? __bfloat162float(A[size_t(gm) * K + gk]) : 0.0f;
      Bs[c][r] = (gn < N && k0 + c < K) ? __bfloat162float(B[size_t(gn) * K + k0 + c]) : 0.0f;
    }
    __syncthreads();
    const int passes = (kDefect == Defect::k_tile_twice && kt == k_tiles - 1) ? 2 : 1;
    for (int p = 0; p < passes; ++p) {
      for (int kk = 0; kk < BK; ++kk) {
        float a[4];
        float b[4];
        for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i];
        for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx * 4 + j];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }
  const float scale = kDefect == Defect::store_scaled ? 2.0f : 1.0f;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      const int gm = m0 + ty * 4 + i;
      const int gn = n0 + tx * 4 + j;
      if (gm < M && gn < N) D[size_t(gm) * N + gn] = __float2bfloat16(acc[i][j] * scale);
    }
  }
}

torch::Tensor linear(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda(), "x and w must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == at::kBFloat16 && w.scalar_type() == at::kBFloat16,
              "x and w must be bf16");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "x is M x K, w is N x K");
  x = x.contiguous();
  w = w.contiguous();
  const int M = x.size(0);
  const int K = x.size(1);
  const int N = w.size(0);
  auto out = torch::empty({M, N}, x.options());
  const dim3 block(16, 16);
  const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  linear_kernel<<<grid, block, 0, stream>>>(
      reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>()),
      reinterpret_cast<const __nv_bfloat16*>(w.data_ptr<at::BFloat16>()),
      reinterpret_cast<__nv_bfloat16*>(out.data_ptr<at::BFloat16>()), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("linear", &linear, "x @ w.T in bf16"); }
