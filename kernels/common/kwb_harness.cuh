// Host harness shared by every family of the kernels/ suite.
//
// A family's `main` fills A and B (and C/bias where it has them) for each input
// rung, launches its kernel, copies the output back, builds the reference with
// `reference_gemm` over the dtype-rounded inputs (f64 accumulate), and calls
// `report`, which prints one line per rung:
//
//   KWB_RESULT {"family":"mma_sync","defect":"none","input":"ones","m":256,...}
//
// `cargo xtask gpu-suite` reads those lines and checks them against
// kernels/suite.toml. Everything here is plain host code: no kernel lives here.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define KWB_CUDA_CHECK(expr)                                                       \
  do {                                                                             \
    cudaError_t kwb_err_ = (expr);                                                 \
    if (kwb_err_ != cudaSuccess) {                                                 \
      std::printf("KWB_ERROR {\"call\":\"%s\",\"error\":\"%s\",\"line\":%d}\n",    \
                  #expr, cudaGetErrorString(kwb_err_), __LINE__);                  \
      std::exit(3);                                                                \
    }                                                                              \
  } while (0)

#ifdef KWB_TRACE
// The trace runtime's reset in stream order (kwb_trace.cuh: a traced build has it
// inlined at the top of the file or included through an overlay header, before or
// after this one).
inline cudaError_t kwb_trace_reset_async(cudaStream_t stream);
#endif

namespace kwb_harness {

// The input rungs every family runs. Each has a closed-form or exactly
// representable answer except `random`, which is compared with a tolerance.
// `wide_int` is not run by default (ask for it with --input): integers in [-8, 8],
// still exact in bf16/fp16 and in every fp32 partial sum here, but with 17^8
// patterns per run of 8 values along K, so a traced operand tile can be located in
// the input by its content alone (the provenance check of `cargo xtask gpu-trace`).
enum class Input { ones, small_int, random, wide_int };

inline const char* input_name(Input input) {
  switch (input) {
    case Input::ones: return "ones";
    case Input::small_int: return "small_int";
    case Input::random: return "random";
    case Input::wide_int: return "wide_int";
  }
  return "?";
}

inline bool parse_input(const char* text, Input* out) {
  for (Input i : {Input::ones, Input::small_int, Input::random, Input::wide_int}) {
    if (std::strcmp(text, input_name(i)) == 0) {
      *out = i;
      return true;
    }
  }
  return false;
}

// Deterministic xorshift64* so every run and every machine sees the same data.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1Dull;
  }
  // Uniform in [-1, 1).
  double uniform() { return double(next() >> 11) * (2.0 / 9007199254740992.0) - 1.0; }
  // Integer in [-range, range].
  int integer(int range) { return int(next() % uint64_t(2 * range + 1)) - range; }
};

// Values of one operand for a rung, as floats already exact in bf16/fp16:
// ones -> 1; small_int -> integers in [-2, 2] (every partial sum of K <= 2^20
// products is an exact fp32 integer); random -> uniform [-1, 1) (the caller rounds
// to its dtype and references the rounded values); wide_int -> integers in [-8, 8].
inline std::vector<float> make_operand(Input input, size_t count, uint64_t seed) {
  std::vector<float> v(count);
  Rng rng(seed);
  for (size_t i = 0; i < count; ++i) {
    switch (input) {
      case Input::ones: v[i] = 1.0f; break;
      case Input::small_int: v[i] = float(rng.integer(2)); break;
      case Input::random: v[i] = float(rng.uniform()); break;
      case Input::wide_int: v[i] = float(rng.integer(8)); break;
    }
  }
  return v;
}

// With KWB_DUMP_DIR set, writes an operand as the kernel sees it (dtype-rounded) to
// `$KWB_DUMP_DIR/<input>.<name>.npy`: little-endian f32, C order, shape [rows, cols],
// where the operand's element (r, c) is values[r * cols + c]. Every family dumps A as
// [M, K] and B as [N, K] (row n of B holds B(k, n) along k), so a host model can
// locate the tiles a trace shows. A failed write is a harness error (exit 3).
inline void dump_operand(Input input, const char* name, const std::vector<float>& values,
                         int rows, int cols) {
  const char* dir = std::getenv("KWB_DUMP_DIR");
  if (dir == nullptr || *dir == 0) return;
  const std::string path = std::string(dir) + "/" + input_name(input) + "." + name + ".npy";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to a
  // multiple of 64 and ended by a newline.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  FILE* f = std::fopen(path.c_str(), "wb");
  bool ok = f != nullptr && size_t(rows) * size_t(cols) == values.size();
  if (ok) {
    const unsigned char preamble[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    const unsigned short len = static_cast<unsigned short>(header.size());
    const unsigned char len_le[2] = {static_cast<unsigned char>(len & 0xff),
                                     static_cast<unsigned char>(len >> 8)};
    ok = std::fwrite(preamble, 1, 8, f) == 8 && std::fwrite(len_le, 1, 2, f) == 2 &&
         std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
         std::fwrite(values.data(), sizeof(float), values.size(), f) == values.size();
  }
  if (f != nullptr) ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::printf("KWB_ERROR {\"call\":\"dump_operand\",\"error\":\"cannot write %s\",\"line\":%d}\n",
                path.c_str(), __LINE__);
    std::exit(3);
  }
}

// ref[m][n] = alpha * sum_k A(m, k) * B(k, n) + beta * C(m, n) + bias(n), in f64,
// over the values the kernel really sees (pass dtype-rounded inputs).
// A(m, k) = a[m * lda_m + k * lda_k], B(k, n) = b[k * ldb_k + n * ldb_n],
// C(m, n) = c[m * N + n] when c is non-null, bias(n) = bias[n] when non-null.
inline std::vector<double> reference_gemm(int M, int N, int K, const float* a, long lda_m,
                                          long lda_k, const float* b, long ldb_k, long ldb_n,
                                          double alpha, double beta, const float* c,
                                          const float* bias) {
  std::vector<double> ref(size_t(M) * N);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int k = 0; k < K; ++k) {
        acc += double(a[m * lda_m + k * lda_k]) * double(b[k * ldb_k + n * ldb_n]);
      }
      double v = alpha * acc;
      if (c) v += beta * double(c[size_t(m) * N + n]);
      if (bias) v += double(bias[n]);
      ref[size_t(m) * N + n] = v;
    }
  }
  return ref;
}

struct Metrics {
  double max_abs = 0.0;
  double rel_l2 = 0.0;
  double ratio = 0.0;  // sum |out| / sum |ref|
  long nan = 0;
  long inf = 0;
  long mismatches = 0;  // |out - ref| > tolerance
  int first_m = -1;
  int first_n = -1;
};

// `v` rounded to a float type with `bits` significant bits (bf16: 8, fp16: 11,
// f32: 24), round-to-nearest-even, as the kernel's output conversion does.
inline double round_to_bits(double v, int bits) {
  if (v == 0.0 || !std::isfinite(v)) return v;
  int exp;
  const double mant = std::frexp(v, &exp);  // v = mant * 2^exp, 0.5 <= |mant| < 1
  return std::ldexp(std::nearbyint(std::ldexp(mant, bits)), exp - bits);
}

// Compares out (M x N, row-major, converted to float) with ref. Exact rungs
// (`tolerance == 0`) compare with ref rounded to the output type: integer results
// and all-ones sums must match bit for bit.
inline Metrics compare(const float* out, const std::vector<double>& ref, int M, int N,
                       double tolerance, int out_bits) {
  Metrics r;
  double err2 = 0.0, ref2 = 0.0, sum_out = 0.0, sum_ref = 0.0;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      const double o = out[size_t(m) * N + n];
      const double e = tolerance == 0.0 ? round_to_bits(ref[size_t(m) * N + n], out_bits)
                                        : ref[size_t(m) * N + n];
      if (std::isnan(o)) ++r.nan;
      if (std::isinf(o)) ++r.inf;
      const double d = std::isfinite(o) ? std::fabs(o - e) : INFINITY;
      if (std::isfinite(o)) {
        err2 += d * d;
        sum_out += std::fabs(o);
      }
      ref2 += e * e;
      sum_ref += std::fabs(e);
      if (!(d <= r.max_abs)) r.max_abs = d;
      if (!(d <= tolerance)) {
        if (r.mismatches == 0) {
          r.first_m = m;
          r.first_n = n;
        }
        ++r.mismatches;
      }
    }
  }
  r.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  r.ratio = sum_ref > 0 ? sum_out / sum_ref : (sum_out > 0 ? INFINITY : 1.0);
  return r;
}

// The absolute tolerance of a rung: 0 (exact, see `compare`) for ones and
// small_int; for random, a few output ulps of the peak plus accumulation-order noise.
inline double tolerance(Input input, const std::vector<double>& ref, int out_bits, int K) {
  if (input != Input::random) return 0.0;
  double peak = 0.0;
  for (double v : ref) peak = std::fmax(peak, std::fabs(v));
  return std::ldexp(peak, -out_bits + 2) + 1e-5 * std::sqrt(double(K)) * (peak + 1.0);
}

inline void json_number(const char* key, double v, bool comma = true) {
  if (std::isnan(v)) std::printf("\"%s\":\"nan\"", key);
  else if (std::isinf(v)) std::printf("\"%s\":\"inf\"", key);
  else std::printf("\"%s\":%.9g", key, v);
  if (comma) std::printf(",");
}

inline void report(const char* family, const char* defect, Input input, int M, int N, int K,
                   const Metrics& r, double tol) {
  std::printf("KWB_RESULT {\"family\":\"%s\",\"defect\":\"%s\",\"input\":\"%s\",", family,
              defect, input_name(input));
  std::printf("\"m\":%d,\"n\":%d,\"k\":%d,", M, N, K);
  json_number("max_abs", r.max_abs);
  json_number("rel_l2", r.rel_l2);
  json_number("ratio", r.ratio);
  json_number("tolerance", tol);
  std::printf("\"nan\":%ld,\"inf\":%ld,\"mismatches\":%ld,\"first_mismatch\":[%d,%d]}\n",
              r.nan, r.inf, r.mismatches, r.first_m, r.first_n);
  std::fflush(stdout);
}

// Parses `--m M --n N --k K --input NAME --time LAUNCHES` (any subset); unknown flags
// exit 2. With --time the harness times LAUNCHES launches on the first input and
// prints one KWB_TIME line instead of checking the output (for benchmarks).
struct Args {
  int m, n, k;
  std::vector<Input> inputs{Input::ones, Input::small_int, Input::random};
  int time = 0;
};

inline Args parse_args(int argc, char** argv, int m, int n, int k) {
  Args a{m, n, k};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--m") a.m = std::atoi(argv[i + 1]);
    else if (flag == "--n") a.n = std::atoi(argv[i + 1]);
    else if (flag == "--k") a.k = std::atoi(argv[i + 1]);
    else if (flag == "--time") a.time = std::atoi(argv[i + 1]);
    else if (flag == "--input") {
      Input in;
      if (!parse_input(argv[i + 1], &in)) {
        std::fprintf(stderr, "unknown input %s\n", argv[i + 1]);
        std::exit(2);
      }
      a.inputs = {in};
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return a;
}

// Times `launches` calls of `launch` (after one warm-up) with CUDA events and prints
// KWB_TIME {"family":…,"defect":…,"m":…,"n":…,"k":…,"launches":…,"ms":…}, the mean
// milliseconds per launch. A traced build empties its trace buffer ahead of each
// launch (memsets queued on the stream), so every timed launch writes its records, as
// the launch a trace is taken of does, instead of finding the buffer filled by the
// launches before it; every other build queues a memset of the trace cursors' size, so
// every build leaves the same kind of gap between its launches. Each launch is timed
// alone, between an event recorded after its reset and one after
// it, so what a reset clears (a summary build's table is megabytes) is never timed.
template <class Launch>
inline void time_launches(const char* family, const char* defect, int m, int n, int k,
                          int launches, Launch launch) {
#ifdef KWB_TRACE
  const auto reset = [] { return kwb_trace_reset_async(0); };
#else
  void* scratch = nullptr;
  // The trace cursors' size with the default 64 shards, a 128-byte line each.
  constexpr size_t kCursorBytes = 64 * 128;
  KWB_CUDA_CHECK(cudaMalloc(&scratch, kCursorBytes));
  const auto reset = [scratch] { return cudaMemsetAsync(scratch, 0, kCursorBytes, 0); };
#endif
  KWB_CUDA_CHECK(reset());
  KWB_CUDA_CHECK(launch());
  KWB_CUDA_CHECK(cudaDeviceSynchronize());
  const int timed = launches > 0 ? launches : 0;
  std::vector<cudaEvent_t> events(2 * static_cast<size_t>(timed));
  for (cudaEvent_t& e : events) KWB_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < timed; ++i) {
    KWB_CUDA_CHECK(reset());
    KWB_CUDA_CHECK(cudaEventRecord(events[2 * i]));
    KWB_CUDA_CHECK(launch());
    KWB_CUDA_CHECK(cudaEventRecord(events[2 * i + 1]));
  }
  KWB_CUDA_CHECK(cudaDeviceSynchronize());
  double total = 0.0;
  for (int i = 0; i < timed; ++i) {
    float ms = 0.0f;
    KWB_CUDA_CHECK(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]));
    total += ms;
  }
  std::printf(
      "KWB_TIME {\"family\":\"%s\",\"defect\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,"
      "\"launches\":%d,\"ms\":%.6f}\n",
      family, defect, m, n, k, launches, total / (timed > 0 ? timed : 1));
  std::fflush(stdout);
  for (cudaEvent_t& e : events) KWB_CUDA_CHECK(cudaEventDestroy(e));
#ifndef KWB_TRACE
  KWB_CUDA_CHECK(cudaFree(scratch));
#endif
}

}  // namespace kwb_harness

// The defect switch: a family declares `enum class Defect { none, … };` and uses
// `kDefect`; build with -DKWB_DEFECT=<name> (default: none). An unknown name is a
// compile error, so a typo never silently builds the correct kernel.
#ifndef KWB_DEFECT
#define KWB_DEFECT none
#endif
#define KWB_STRINGIFY_(x) #x
#define KWB_STRINGIFY(x) KWB_STRINGIFY_(x)
#define KWB_DEFECT_NAME KWB_STRINGIFY(KWB_DEFECT)
