// The runtime's value model checked on the GPU: one warp probes values of the types
// kernels written elsewhere keep their operands, accumulators and outputs in, each
// through kwb::probe (the call kwb-instrument emits), from a kernel that is not a
// template, the calls inside kwb::dependent as kwb-instrument wraps them. `cargo xtask
// gpu-runtime` builds this with -DKWB_TRACE, runs it with KWB_TRACE_OUT and compares
// each site's record with what the values below make (xtask/src/gpu_runtime.rs,
// `values_expectations`), and checks that the one type the model cannot read is named
// by a NotProbed record. Lane l of the warp:
//   site 0: a __nv_bfloat162 (l, -2l);
//   site 1: float4 a[2], a[j] = l * 8 + 4j + (0, 1, 2, 3);
//   site 2: two WMMA accumulator fragments (16x16x16, f32), filled with 1 and -2;
//   site 3: a __nv_fp8x2_e4m3 (l % 8, -(l % 8));
//   site 4: a fragment of static size read with x[i] (kElements = 4): l * 4 + i;
//   site 5: a struct of a pointer, which no model reads: not probed;
//   site 6: probe_values of a float l, a __half2 (1, 2) and an int -l;
//   site 7: a shared tile of 64 __nv_bfloat162, pair p = (p, -p), read by the warp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <mma.h>

#include <cstdio>

#include "kwb_trace.cuh"

struct Fragment4 {
  static constexpr int kElements = 4;
  float data[4];
  __device__ float operator[](int i) const { return data[i]; }
};

struct Opaque {
  int* where;
};

constexpr uint32_t kTag = kwb::tag_of("values_check");

__global__ void values(int* sink) {
  const int lane = static_cast<int>(threadIdx.x);
  __shared__ __nv_bfloat162 tile[64];
  for (int p = lane; p < 64; p += 32) {
    tile[p] = __floats2bfloat162_rn(static_cast<float>(p), static_cast<float>(-p));
  }
  __syncthreads();
  const __nv_bfloat162 pair = __floats2bfloat162_rn(static_cast<float>(lane), -2.0f * lane);
  float4 quads[2];
  for (int j = 0; j < 2; ++j) {
    const float base = static_cast<float>(lane * 8 + 4 * j);
    quads[j] = make_float4(base, base + 1.0f, base + 2.0f, base + 3.0f);
  }
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc[2];
  nvcuda::wmma::fill_fragment(acc[0], 1.0f);
  nvcuda::wmma::fill_fragment(acc[1], -2.0f);
  const __nv_fp8x2_e4m3 fp8(make_float2(static_cast<float>(lane % 8), -static_cast<float>(lane % 8)));
  Fragment4 frag;
  for (int i = 0; i < 4; ++i) frag.data[i] = static_cast<float>(lane * 4 + i);
  const Opaque opaque{sink};
  const float scalar = static_cast<float>(lane);
  const __half2 halves = __floats2half2_rn(1.0f, 2.0f);
  const int count = -lane;
  if constexpr (kwb::enabled) {
    kwb::dependent(kTag, [&](auto tag) {
      kwb::probe(0, kwb::Kind::Epilogue, tag, -1, -1, -1, pair);
      kwb::probe(1, kwb::Kind::OperandA, tag, 0, -1, -1, quads);
      kwb::probe(2, kwb::Kind::Accumulator, tag, -1, -1, -1, acc);
      kwb::probe(3, kwb::Kind::OperandB, tag, 0, -1, -1, fp8);
      kwb::probe(4, kwb::Kind::Accumulator, tag, 0, -1, -1, frag);
      kwb::probe(5, kwb::Kind::OperandA, tag, 0, -1, -1, opaque);
      kwb::probe_values(6, kwb::Kind::Epilogue, tag, -1, -1, -1, scalar, halves, count);
      kwb::probe_tile(7, kwb::Kind::OperandA, tag, 1, -1, -1, tile, 64);
    });
  }
  if (lane == 0 && sink != nullptr) *sink = 1;
}

int main() {
  int* sink = nullptr;
  cudaError_t err = cudaMalloc(&sink, sizeof(int));
  if (err == cudaSuccess) err = kwb::trace_reset();
  if (err == cudaSuccess) {
    values<<<1, 32>>>(sink);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "values_check: %s\n", cudaGetErrorString(err));
    return 1;
  }
  std::printf("values_check: ran\n");
  return 0;
}
