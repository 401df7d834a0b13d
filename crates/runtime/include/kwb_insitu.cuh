// kwb_insitu.cuh: one launch of a kernel run on kwb's controlled inputs inside the
// user's own process, the user's data put back before the program goes on.
//
// kwb-instrument --insitu (and kwb-nvcc under `kwb diagnose --kernel K -- CMD`)
// rewrites each launch of the kernel
//
//     gemm<T><<<grid, block, smem, stream>>>(a, b, c, m, n, k);
//
// into a call of kwb_insitu::launch with the launch as a lambda and its arguments:
//
//     kwb_insitu::launch("gemm", "gemm<T>", __FILE__, __LINE__, (grid),
//         [&](auto&&... kwb_a) { gemm<T><<<grid, block, smem, stream>>>(kwb_a...); },
//         a, b, c, m, n, k);
//
// Without KWB_INSITU_DIR in the environment (or for another kernel, or another launch
// of it) launch() makes the launch and nothing else. For the launch chosen it talks to
// the kwb process that started the program through files in KWB_INSITU_DIR:
//
//   1. it waits for the device, and writes launch.txt: the kernel, where it is
//      launched, the device, the grid, and each argument (kind, value, type; a pointer with the
//      allocation it lies in, from cuMemGetAddressRange);
//   2. it waits for plan.txt, which kwb writes from the kernel's parameters and these
//      values: the buffers to keep, and per rung the files to copy into them and the
//      bytes to read back (lines of tab-separated fields: `buffer ARG BYTES`,
//      `rung NAME`, `input ARG FILE`, `fill ARG BYTES`, `output ARG BYTES FILE`,
//      `trace FILE`, `cta X Y Z`, `end`; or `skip WHY`);
//   3. it copies each kept buffer aside (on the device, and to the host), and for each
//      rung writes the inputs, makes the launch, waits, and writes the output to its
//      file (and, where the unit is a trace build of kwb_trace.cuh and the rung asks
//      for it, records CTA (X, Y, Z) where the rung names one, empties the trace
//      buffer before the launch and writes it to FILE after: a trace of that one
//      launch), a line of rungs.txt each (`rung NAME ok MS`, or `rung NAME error WHERE
//      CODE MESSAGE`);
//   4. it copies every kept buffer back, reads it again and compares it with the
//      host copy (`restored ARG BYTES same|differs`), writes done.txt, and makes the
//      user's own launch on the user's own data.
//
// A buffer kwb asks for that does not lie inside one allocation is refused before
// anything is written (`refused ...` in done.txt), so kwb never writes past what the
// program allocated. A kernel that faults leaves the CUDA context unusable: the
// user's data cannot be put back, and done.txt says so.
//
// Environment: KWB_INSITU_DIR (the folder), KWB_INSITU_KERNEL (the kernel's name,
// without template arguments), KWB_INSITU_LAUNCH (which launch of it, from 1; default
// 1), KWB_INSITU_TIMEOUT (seconds to wait for plan.txt; default 600).
//
// Host code only; it defines no __device__ or __global__ function.

#ifndef KWB_INSITU_CUH
#define KWB_INSITU_CUH

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <time.h>

namespace kwb_insitu {

// The compiler's signature of this function names T; type_name() cuts it out.
template <class T>
inline const char* signature() {
  return __PRETTY_FUNCTION__;
}

template <class T>
inline std::string type_name() {
  std::string s = signature<T>();
  std::string::size_type at = s.find("T = ");
  if (at == std::string::npos) return "?";
  std::string t = s.substr(at + 4);
  std::string::size_type end = t.find_first_of(";]");
  if (end != std::string::npos) t = t.substr(0, end);
  while (!t.empty() && t.back() == ' ') t.pop_back();
  for (char& c : t)
    if (c == '\t' || c == '\n') c = ' ';
  return t;
}

inline double now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

inline void sleep_ms(long ms) {
  timespec ts{};
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, nullptr);
}

// The allocation `p` lies in, through the driver (none on a toolkit before 12.5).
inline bool allocation(const void* p, unsigned long long* base, size_t* size) {
#if CUDART_VERSION >= 12050
  typedef int (*range_fn)(unsigned long long*, size_t*, unsigned long long);
  static range_fn fn = nullptr;
  static bool tried = false;
  if (!tried) {
    tried = true;
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<range_fn>(f);
  }
  if (fn == nullptr) return false;
  return fn(base, size, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p))) == 0;
#else
  (void)p;
  (void)base;
  (void)size;
  return false;
#endif
}

// One argument as launch.txt states it: its address, where a buffer is written.
struct Arg {
  std::string line;
  void* pointer = nullptr;
  unsigned long long base = 0;
  size_t size = 0;
  bool ranged = false;
};

template <class T>
inline Arg describe(int index, const T& v) {
  using U = typename std::decay<T>::type;
  Arg a;
  char buf[96];
  std::string kind, value;
  if constexpr (std::is_pointer<U>::value) {
    a.pointer = const_cast<void*>(reinterpret_cast<const void*>(v));
    kind = "ptr";
    std::snprintf(buf, sizeof buf, "0x%llx",
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(a.pointer)));
    value = buf;
    cudaPointerAttributes attributes{};
    const bool device = a.pointer != nullptr &&
                        cudaPointerGetAttributes(&attributes, a.pointer) == cudaSuccess &&
                        (attributes.type == cudaMemoryTypeDevice ||
                         attributes.type == cudaMemoryTypeManaged);
    cudaGetLastError();  // a host pointer is not an error of the program's
    if (device) a.ranged = allocation(a.pointer, &a.base, &a.size);
  } else if constexpr (std::is_integral<U>::value || std::is_enum<U>::value) {
    kind = "int";
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    value = buf;
  } else if constexpr (std::is_floating_point<U>::value) {
    kind = "float";
    std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(v));
    value = buf;
  } else if constexpr (std::is_trivially_copyable<U>::value) {
    kind = "bytes";
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&v);
    for (size_t i = 0; i < sizeof(U); ++i) {
      std::snprintf(buf, sizeof buf, "%02x", p[i]);
      value += buf;
    }
  } else {
    kind = "opaque";
    std::snprintf(buf, sizeof buf, "%zu", sizeof(U));
    value = buf;
  }
  std::snprintf(buf, sizeof buf, "arg\t%d\t", index);
  a.line = buf + kind + "\t" + value + "\t" + type_name<U>();
  if (a.ranged) {
    std::snprintf(buf, sizeof buf, "\t0x%llx\t%zu", a.base, a.size);
    a.line += buf;
  }
  return a;
}

inline std::string path(const char* dir, const char* name) {
  return std::string(dir) + "/" + name;
}

// Writes `text` to DIR/NAME whole: a temporary file renamed into place.
inline bool publish(const char* dir, const char* name, const std::string& text) {
  const std::string final_path = path(dir, name);
  const std::string tmp = final_path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok && std::rename(tmp.c_str(), final_path.c_str()) == 0;
}

inline bool read_file(const std::string& name, std::string* out) {
  FILE* f = std::fopen(name.c_str(), "rb");
  if (f == nullptr) return false;
  out->clear();
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  std::fclose(f);
  return true;
}

inline std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::string::size_type from = 0;
  while (true) {
    std::string::size_type tab = line.find('\t', from);
    out.push_back(line.substr(from, tab == std::string::npos ? std::string::npos : tab - from));
    if (tab == std::string::npos) return out;
    from = tab + 1;
  }
}

struct Step {
  std::string what;  // input, fill, output, trace, cta
  int arg = -1;
  int cta[3] = {-1, -1, -1};
  size_t bytes = 0;
  std::string file;
};

struct Rung {
  std::string name;
  std::vector<Step> steps;
};

struct Plan {
  std::vector<std::pair<int, size_t>> buffers;
  std::vector<Rung> rungs;
  std::string skip;
};

inline bool parse_plan(const std::string& text, Plan* plan) {
  std::string::size_type from = 0;
  bool ended = false;
  while (from < text.size()) {
    std::string::size_type nl = text.find('\n', from);
    const std::string line =
        text.substr(from, nl == std::string::npos ? std::string::npos : nl - from);
    from = nl == std::string::npos ? text.size() : nl + 1;
    if (line.empty()) continue;
    const std::vector<std::string> f = fields(line);
    if (f[0] == "end") {
      ended = true;
    } else if (f[0] == "skip" && f.size() >= 2) {
      plan->skip = f[1];
    } else if (f[0] == "buffer" && f.size() == 3) {
      plan->buffers.emplace_back(std::atoi(f[1].c_str()), std::strtoull(f[2].c_str(), nullptr, 10));
    } else if (f[0] == "rung" && f.size() == 2) {
      plan->rungs.push_back(Rung{f[1], {}});
    } else if (!plan->rungs.empty() && f[0] == "cta" && f.size() == 4) {
      Step s;
      s.what = f[0];
      for (int i = 0; i < 3; ++i) s.cta[i] = std::atoi(f[1 + i].c_str());
      plan->rungs.back().steps.push_back(s);
    } else if (!plan->rungs.empty() && f[0] == "trace" && f.size() == 2) {
      Step s;
      s.what = f[0];
      s.file = f[1];
      plan->rungs.back().steps.push_back(s);
    } else if (!plan->rungs.empty() && (f[0] == "input" || f[0] == "fill" || f[0] == "output")) {
      Step s;
      s.what = f[0];
      s.arg = std::atoi(f[1].c_str());
      if (f[0] == "input" && f.size() == 3) {
        s.file = f[2];
      } else if (f[0] == "fill" && f.size() == 3) {
        s.bytes = std::strtoull(f[2].c_str(), nullptr, 10);
      } else if (f[0] == "output" && f.size() == 4) {
        s.bytes = std::strtoull(f[2].c_str(), nullptr, 10);
        s.file = f[3];
      } else {
        return false;
      }
      plan->rungs.back().steps.push_back(s);
    } else {
      return false;
    }
  }
  return ended;
}

// The launch chosen by KWB_INSITU_KERNEL and KWB_INSITU_LAUNCH, once per process.
inline bool chosen(const char* kernel) {
  static const char* dir = std::getenv("KWB_INSITU_DIR");
  static const char* wanted = std::getenv("KWB_INSITU_KERNEL");
  static std::atomic<long> seen{0};
  if (dir == nullptr || *dir == '\0') return false;
  if (wanted != nullptr && *wanted != '\0' && std::strcmp(wanted, kernel) != 0) return false;
  const char* which = std::getenv("KWB_INSITU_LAUNCH");
  const long n = which != nullptr && *which != '\0' ? std::atol(which) : 1;
  return seen.fetch_add(1) + 1 == n;
}

inline std::string error_line(const char* rung, const char* where, cudaError_t e) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "\t%d\t", static_cast<int>(e));
  return std::string("rung\t") + rung + "\terror\t" + where + buf + cudaGetErrorName(e) + ": " +
         cudaGetErrorString(e) + "\n";
}

// One session at the chosen launch: everything between launch.txt and done.txt.
// The launch's grid, as launch.txt states it.
template <class G>
inline std::string grid_line(const G& grid) {
  dim3 g;
  if constexpr (std::is_integral<G>::value) {
    g = dim3(static_cast<unsigned>(grid));
  } else {
    g = dim3(grid);
  }
  return "grid\t" + std::to_string(g.x) + "\t" + std::to_string(g.y) + "\t" +
         std::to_string(g.z) + "\n";
}

template <class Go, class... Args>
inline void session(const char* dir, const char* kernel, const char* callee, const char* file,
                    int line, const std::string& grid, Go& go, const Args&... args) {
  std::string done;
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    publish(dir, "done.txt", std::string("refused\tthe device had an error before the launch: ") +
                                 cudaGetErrorName(e) + "\n");
    return;
  }
  std::vector<Arg> described;
  int index = 0;
  (described.push_back(describe(index++, args)), ...);
  std::string text = "kwb-insitu\t1\nkernel\t" + std::string(kernel) + "\ncallee\t" + callee +
                     "\nat\t" + file + "\t" + std::to_string(line) + "\n";
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaGetDeviceProperties(&prop, device) == cudaSuccess)
    text += "device\t" + std::string(prop.name) + "\t" + std::to_string(prop.major) +
            std::to_string(prop.minor) + "\n";
  text += grid;
  for (const Arg& a : described) text += a.line + "\n";
  if (!publish(dir, "launch.txt", text)) return;

  const char* t = std::getenv("KWB_INSITU_TIMEOUT");
  const double timeout_ms = (t != nullptr && *t != '\0' ? std::atof(t) : 600.0) * 1e3;
  const double started = now_ms();
  std::string plan_text;
  Plan plan;
  while (true) {
    if (read_file(path(dir, "plan.txt"), &plan_text) && parse_plan(plan_text, &plan)) break;
    if (now_ms() - started > timeout_ms) {
      publish(dir, "done.txt", "refused\tno plan.txt came within the timeout\n");
      return;
    }
    plan = Plan{};
    sleep_ms(20);
  }
  if (!plan.skip.empty()) {
    publish(dir, "done.txt", "skipped\t" + plan.skip + "\n");
    return;
  }
  // Every buffer inside one allocation, or nothing is written.
  for (const auto& b : plan.buffers) {
    const Arg* a = b.first >= 0 && b.first < int(described.size()) ? &described[b.first] : nullptr;
    const bool inside =
        a != nullptr && a->pointer != nullptr && a->ranged &&
        reinterpret_cast<uintptr_t>(a->pointer) + b.second <= a->base + a->size;
    if (!inside) {
      publish(dir, "done.txt",
              "refused\targument " + std::to_string(b.first) + ": " + std::to_string(b.second) +
                  " bytes do not lie inside the allocation it points into\n");
      return;
    }
  }
  struct Kept {
    int arg;
    size_t bytes;
    void* device;
    std::vector<unsigned char> host;
  };
  std::vector<Kept> kept;
  auto release = [&]() {
    for (Kept& k : kept)
      if (k.device != nullptr) cudaFree(k.device);
  };
  for (const auto& b : plan.buffers) {
    Kept k{b.first, b.second, nullptr, std::vector<unsigned char>(b.second)};
    void* at = described[b.first].pointer;
    if (cudaMalloc(&k.device, b.second) != cudaSuccess ||
        cudaMemcpy(k.device, at, b.second, cudaMemcpyDeviceToDevice) != cudaSuccess ||
        cudaMemcpy(k.host.data(), at, b.second, cudaMemcpyDeviceToHost) != cudaSuccess) {
      cudaGetLastError();
      kept.push_back(std::move(k));
      release();
      publish(dir, "done.txt", "refused\tcannot keep a copy of argument " +
                                   std::to_string(b.first) + "\n");
      return;
    }
    kept.push_back(std::move(k));
  }
  // The bytes of the kept buffer of argument `arg` (0: it is none): no step writes or
  // reads more.
  auto kept_bytes = [&](int arg) -> size_t {
    for (const auto& b : plan.buffers)
      if (b.first == arg) return b.second;
    return 0;
  };
  std::string rungs;
  bool lost = false;
  std::string bytes;
  for (const Rung& r : plan.rungs) {
    bool ok = true;
    for (const Step& s : r.steps) {
      if (s.what != "input" && s.what != "fill" && s.what != "output") continue;
      const size_t room = kept_bytes(s.arg);
      const size_t wants = s.what == "input" ? 0 : s.bytes;
      if (room == 0 || wants > room) {
        rungs += "rung\t" + r.name + "\terror\t" + s.what + "\t0\targument " +
                 std::to_string(s.arg) + " is no kept buffer of that size\n";
        ok = false;
        break;
      }
    }
    for (const Step& s : r.steps) {
      if (!ok) break;
      if (s.what != "input" && s.what != "fill") continue;
      void* at = described[s.arg].pointer;
      cudaError_t e = cudaSuccess;
      if (s.what == "input") {
        if (!read_file(s.file, &bytes) || bytes.size() > kept_bytes(s.arg)) {
          rungs += "rung\t" + r.name + "\terror\tinput\t0\tcannot read " + s.file +
                   " into its buffer\n";
          ok = false;
          break;
        }
        e = cudaMemcpy(at, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
      } else if (s.what == "fill") {
        e = cudaMemset(at, 0xff, s.bytes);
      }
      if (e != cudaSuccess) {
        rungs += error_line(r.name.c_str(), "input", e);
        ok = false;
        break;
      }
    }
    if (!ok) {
      publish(dir, "rungs.txt", rungs);
      continue;
    }
    const Step* trace = nullptr;
    const Step* cta = nullptr;
    for (const Step& s : r.steps) {
      if (s.what == "trace") trace = &s;
      if (s.what == "cta") cta = &s;
    }
#if defined(KWB_TRACE_CUH_) && defined(KWB_TRACE)
    if (trace != nullptr && cta != nullptr) kwb_trace_set_cta(cta->cta[0], cta->cta[1], cta->cta[2]);
    if (trace != nullptr) kwb_trace_reset();
#else
    (void)cta;
#endif
    cudaDeviceSynchronize();
    const double t0 = now_ms();
    go(args...);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      rungs += error_line(r.name.c_str(), "launch", e);
      publish(dir, "rungs.txt", rungs);
      continue;
    }
    e = cudaDeviceSynchronize();
    const double ms = now_ms() - t0;
    if (e != cudaSuccess) {
      rungs += error_line(r.name.c_str(), "kernel", e);
      publish(dir, "rungs.txt", rungs);
      lost = true;
      break;
    }
#if defined(KWB_TRACE_CUH_) && defined(KWB_TRACE)
    if (trace != nullptr) kwb_trace_flush(trace->file.c_str());
#else
    (void)trace;
#endif
    for (const Step& s : r.steps) {
      if (s.what != "output") continue;
      std::vector<unsigned char> out(s.bytes);
      FILE* f = nullptr;
      if (cudaMemcpy(out.data(), described[s.arg].pointer, s.bytes, cudaMemcpyDeviceToHost) !=
              cudaSuccess ||
          (f = std::fopen(s.file.c_str(), "wb")) == nullptr ||
          std::fwrite(out.data(), 1, out.size(), f) != out.size()) {
        ok = false;
      }
      if (f != nullptr) std::fclose(f);
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "\tok\t%.4f\n", ms);
    rungs += ok ? "rung\t" + r.name + buf
                : "rung\t" + r.name + "\terror\toutput\t0\tcannot read the output back\n";
    publish(dir, "rungs.txt", rungs);
  }
  if (lost) {
    publish(dir, "done.txt",
            "lost\tthe kernel faulted: the CUDA context cannot be used again, so the "
            "program's buffers were not put back\n");
    return;
  }
  for (Kept& k : kept) {
    void* at = described[k.arg].pointer;
    std::vector<unsigned char> again(k.bytes);
    const bool back =
        cudaMemcpy(at, k.device, k.bytes, cudaMemcpyDeviceToDevice) == cudaSuccess &&
        cudaDeviceSynchronize() == cudaSuccess &&
        cudaMemcpy(again.data(), at, k.bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
    done += "restored\t" + std::to_string(k.arg) + "\t" + std::to_string(k.bytes) + "\t" +
            (back && std::memcmp(again.data(), k.host.data(), k.bytes) == 0 ? "same" : "differs") +
            "\n";
  }
  release();
  publish(dir, "done.txt", done + "end\n");
}

// The launch, and for the one chosen a session before it.
template <class G, class Go, class... Args>
inline void launch(const char* kernel, const char* callee, const char* file, int line,
                   const G& grid, Go&& go, const Args&... args) {
  if (chosen(kernel))
    session(std::getenv("KWB_INSITU_DIR"), kernel, callee, file, line, grid_line(grid), go,
            args...);
  go(args...);
}

}  // namespace kwb_insitu

#endif  // KWB_INSITU_CUH
