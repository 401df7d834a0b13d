// The driver's CUtensorMap layout, measured: encodes maps with cuTensorMapEncodeTiled
// over a table of cases, each changing one parameter of a baseline (a few change two,
// where one alone is refused), and prints one line per case: its id, the parameters,
// the CUresult and the 128 bytes written. `cargo xtask gpu-tensormap` decodes every
// accepted map and compares it with the parameters.
//
// Nothing is allocated: the addresses are fake, aligned values, which encoding never
// dereferences. Each map is encoded twice, into zeroed and into 0xff-filled memory;
// `filled=` is `same` unless the driver leaves some bytes as it found them.
//
// The driver is opened at run time (libcuda.so.1), so this builds where no driver or
// stub library is installed, and says "no CUDA driver" plainly when run there.
//
// Output: `driver <version>`, `device cc=<major>.<minor> name=<name>`, then per case
// `case <id> dtype=<n> rank=<n> address=0x<hex> dims=<a,b,..> strides=<a,..|-> box=<..>
// estrides=<..> interleave=<n> swizzle=<n> l2=<n> oob=<n> result=<n>:<name>
// map=<256 hex digits|-> filled=<same|256 hex digits|->`.

#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

struct Driver {
  decltype(&cuInit) init;
  decltype(&cuDriverGetVersion) version;
  decltype(&cuDeviceGet) device;
  decltype(&cuDeviceGetName) name;
  decltype(&cuDeviceGetAttribute) attribute;
  decltype(&cuDevicePrimaryCtxRetain) retain;
  decltype(&cuCtxSetCurrent) set_current;
  decltype(&cuGetErrorName) error_name;
  decltype(&cuTensorMapEncodeTiled) encode;
};

int no_driver(const char* what, const char* detail) {
  std::fprintf(stderr, "no CUDA driver: %s: %s\n", what, detail);
  return 3;
}

template <typename F>
bool load(void* library, const char* symbol, F* out) {
  *out = reinterpret_cast<F>(dlsym(library, symbol));
  return *out != nullptr;
}

struct Case {
  std::string id;
  CUtensorMapDataType dtype;
  cuuint32_t rank;
  uint64_t address;
  // Room for a sixth dimension, which only the refused rank-6 case reads.
  cuuint64_t dims[6];
  cuuint64_t strides[5];
  cuuint32_t box[6];
  cuuint32_t estrides[6];
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2;
  CUtensorMapFloatOOBfill oob;
};

// f16, rank 2 (dims 32 x 64, a 256-byte row pitch), a 16 x 8 box, no interleave,
// swizzle, L2 promotion or NaN fill. The outer dimensions, used from rank 3 on, nest.
Case baseline() {
  Case c;
  c.id = "base";
  c.dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  c.rank = 2;
  c.address = 0x7f1234567800ull;
  const cuuint64_t dims[6] = {32, 64, 4, 3, 2, 2};
  const cuuint64_t strides[5] = {256, 256 * 64, 256 * 64 * 4, 256 * 64 * 4 * 3,
                                 256 * 64 * 4 * 3 * 2};
  const cuuint32_t box[6] = {16, 8, 2, 2, 2, 1};
  for (int i = 0; i < 6; ++i) {
    c.dims[i] = dims[i];
    c.box[i] = box[i];
    c.estrides[i] = 1;
  }
  for (int i = 0; i < 5; ++i) c.strides[i] = strides[i];
  c.interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  c.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  c.l2 = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  c.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  auto add = [&](const std::string& id, const std::function<void(Case&)>& change) {
    Case c = baseline();
    c.id = id;
    change(c);
    all.push_back(c);
  };
  add("base", [](Case&) {});

  const char* dtypes[16] = {"u8",   "u16",     "u32",  "i32",          "u64",          "i64",
                            "f16",  "f32",     "f64",  "bf16",         "f32_ftz",      "tf32",
                            "tf32_ftz", "16u4_align8b", "16u4_align16b", "16u6_align16b"};
  for (int d = 0; d < 16; ++d) {
    if (d == CU_TENSOR_MAP_DATA_TYPE_FLOAT16) continue;
    add(std::string("dtype.") + dtypes[d],
        [d](Case& c) { c.dtype = static_cast<CUtensorMapDataType>(d); });
  }
  // The packed types want globalDim[0] a multiple of 128 and boxDim[0] of 128.
  for (int d = 13; d < 16; ++d) {
    add(std::string("dtype.") + dtypes[d] + ".fit", [d](Case& c) {
      c.dtype = static_cast<CUtensorMapDataType>(d);
      c.dims[0] = 128;
      c.box[0] = 128;
    });
  }

  for (cuuint32_t r : {1u, 3u, 4u, 5u}) {
    add("rank." + std::to_string(r), [r](Case& c) { c.rank = r; });
  }
  add("rank.6", [](Case& c) { c.rank = 6; });

  // 64 rows of 256 bytes is 16 KiB; 512 rows is 128 KiB.
  for (cuuint64_t d : {1ull, 2ull, 511ull, 512ull, 65535ull, 65536ull, (1ull << 31) - 1,
                       1ull << 31, (1ull << 31) + 1, 1ull << 32}) {
    add("dims.1=" + std::to_string(d), [d](Case& c) { c.dims[1] = d; });
  }
  for (cuuint64_t d : {1ull, 16ull, 128ull, 1ull << 31}) {
    add("dims.0=" + std::to_string(d), [d](Case& c) { c.dims[0] = d; });
  }
  add("dims.0=2^31.pitch", [](Case& c) {
    c.dims[0] = 1ull << 31;
    c.strides[0] = 1ull << 32;
  });
  add("dims.rank1=65535", [](Case& c) {
    c.rank = 1;
    c.dims[0] = 65535;
  });
  add("dims.rank1=65536", [](Case& c) {
    c.rank = 1;
    c.dims[0] = 65536;
  });
  add("dims.rank5.distinct", [](Case& c) {
    c.rank = 5;
    const cuuint64_t dims[5] = {48, 5, 7, 11, 13};
    for (int i = 0; i < 5; ++i) c.dims[i] = dims[i];
  });

  for (cuuint64_t s : {48ull, 64ull, 264ull, 272ull, 4096ull, (1ull << 32) - 16, 1ull << 32,
                       (1ull << 32) + 16, (1ull << 36) - 16, 1ull << 36, (1ull << 36) + 16,
                       1ull << 37, (1ull << 38) + (1ull << 36), 1ull << 39, (1ull << 40) - 16,
                       1ull << 40}) {
    add("strides.0=" + std::to_string(s), [s](Case& c) { c.strides[0] = s; });
  }
  for (cuuint64_t s : {1ull << 36, (1ull << 39) + 16}) {
    add("strides.rank3.1=" + std::to_string(s), [s](Case& c) {
      c.rank = 3;
      c.strides[1] = s;
    });
  }
  // A different high part in each stride, to find where each one's bits above 2^36 go.
  add("strides.rank5.high", [](Case& c) {
    c.rank = 5;
    const cuuint64_t strides[4] = {(1ull << 36) + 16, (2ull << 36) + 32, (4ull << 36) + 48,
                                   (8ull << 36) + 64};
    for (int i = 0; i < 4; ++i) c.strides[i] = strides[i];
  });

  for (cuuint32_t b : {1u, 8u, 24u, 32u, 64u, 128u, 256u, 257u}) {
    add("box.0=" + std::to_string(b), [b](Case& c) { c.box[0] = b; });
  }
  for (cuuint32_t b : {1u, 2u, 64u, 255u, 256u, 257u}) {
    add("box.1=" + std::to_string(b), [b](Case& c) { c.box[1] = b; });
  }
  add("box.rank5.distinct", [](Case& c) {
    c.rank = 5;
    const cuuint32_t box[5] = {16, 7, 3, 2, 1};
    for (int i = 0; i < 5; ++i) c.box[i] = box[i];
  });

  for (cuuint32_t e : {0u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u}) {
    add("estrides.1=" + std::to_string(e), [e](Case& c) { c.estrides[1] = e; });
  }
  for (cuuint32_t e : {2u, 8u}) {
    add("estrides.0=" + std::to_string(e), [e](Case& c) { c.estrides[0] = e; });
  }
  add("estrides.rank5.distinct", [](Case& c) {
    c.rank = 5;
    const cuuint32_t estrides[5] = {1, 2, 3, 4, 5};
    for (int i = 0; i < 5; ++i) c.estrides[i] = estrides[i];
  });

  add("interleave.16b", [](Case& c) { c.interleave = CU_TENSOR_MAP_INTERLEAVE_16B; });
  add("interleave.16b.rank3", [](Case& c) {
    c.rank = 3;
    c.interleave = CU_TENSOR_MAP_INTERLEAVE_16B;
  });
  // NC/8HWC8: 8 f16 channels (16 bytes) innermost.
  add("interleave.16b.c8", [](Case& c) {
    c.rank = 3;
    c.interleave = CU_TENSOR_MAP_INTERLEAVE_16B;
    c.dims[0] = 8;
    c.strides[0] = 16;
    c.strides[1] = 16 * 64;
    c.box[0] = 8;
  });
  add("interleave.32b.rank3", [](Case& c) {
    c.rank = 3;
    c.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
  });
  add("interleave.32b.rank3.swizzle32", [](Case& c) {
    c.rank = 3;
    c.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
  });
  // NC/16HWC16: 16 f16 channels (32 bytes) innermost.
  add("interleave.32b.c16", [](Case& c) {
    c.rank = 3;
    c.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
    c.dims[0] = 16;
    c.strides[0] = 32;
    c.strides[1] = 32 * 64;
  });

  // The baseline's 32-byte inner box fits every span.
  const char* swizzles[7] = {"none",        "32b",        "64b",        "128b",
                             "128b_atom32", "128b_atom32_flip8", "128b_atom64"};
  for (int s = 1; s < 7; ++s) {
    add(std::string("swizzle.") + swizzles[s],
        [s](Case& c) { c.swizzle = static_cast<CUtensorMapSwizzle>(s); });
  }
  add("swizzle.32b.box64bytes", [](Case& c) {
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
    c.box[0] = 32;
  });
  add("swizzle.64b.box64bytes", [](Case& c) {
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_64B;
    c.box[0] = 32;
  });
  add("swizzle.128b.box128bytes", [](Case& c) {
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    c.box[0] = 64;
  });
  add("swizzle.128b.box256bytes", [](Case& c) {
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    c.box[0] = 128;
  });

  for (int l = 1; l < 4; ++l) {
    add("l2." + std::to_string(l),
        [l](Case& c) { c.l2 = static_cast<CUtensorMapL2promotion>(l); });
  }

  add("oob.nan", [](Case& c) { c.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA; });
  add("oob.nan.f32", [](Case& c) {
    c.dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    c.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
  });
  add("oob.nan.u8", [](Case& c) {
    c.dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8;
    c.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
  });

  for (uint64_t a : {0x0ull, 0x8ull, 0x10ull, 0x20ull, 0x1000ull, 0xfffffff0ull, 0x100000000ull,
                     0x123456780ull, 0x7ffffffffff0ull, 0xffffffffffe0ull, 0xfffffffffff0ull,
                     0x1000000000000ull, 0x1000000000010ull, 0xfffffffffffff0ull,
                     0x8000000000000000ull, 0xfffffffffffffff0ull}) {
    char id[40];
    std::snprintf(id, sizeof id, "address=0x%llx", static_cast<unsigned long long>(a));
    add(id, [a](Case& c) { c.address = a; });
  }
  add("address=0x10.interleave32", [](Case& c) {
    c.rank = 3;
    c.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
    c.address = 0x7f1234567810ull;
  });
  return all;
}

template <typename T>
std::string list(const T* values, int count) {
  if (count <= 0) return "-";
  std::string out;
  for (int i = 0; i < count; ++i) {
    if (i > 0) out += ",";
    out += std::to_string(static_cast<unsigned long long>(values[i]));
  }
  return out;
}

std::string hex(const CUtensorMap& map) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&map);
  std::string out;
  char digits[3];
  for (size_t i = 0; i < sizeof map; ++i) {
    std::snprintf(digits, sizeof digits, "%02x", bytes[i]);
    out += digits;
  }
  return out;
}

CUresult encode(const Driver& cu, const Case& c, CUtensorMap* map) {
  return cu.encode(map, c.dtype, c.rank, reinterpret_cast<void*>(c.address), c.dims, c.strides,
                   c.box, c.estrides, c.interleave, c.swizzle, c.l2, c.oob);
}

}  // namespace

int main() {
  void* library = dlopen("libcuda.so.1", RTLD_NOW);
  if (library == nullptr) return no_driver("dlopen", dlerror());
  Driver cu;
  if (!load(library, "cuInit", &cu.init) || !load(library, "cuDriverGetVersion", &cu.version) ||
      !load(library, "cuDeviceGet", &cu.device) || !load(library, "cuDeviceGetName", &cu.name) ||
      !load(library, "cuDeviceGetAttribute", &cu.attribute) ||
      !load(library, "cuDevicePrimaryCtxRetain", &cu.retain) ||
      !load(library, "cuCtxSetCurrent", &cu.set_current) ||
      !load(library, "cuGetErrorName", &cu.error_name) ||
      !load(library, "cuTensorMapEncodeTiled", &cu.encode)) {
    return no_driver("libcuda.so.1", "a driver entry point is missing (driver older than 12.0?)");
  }
  const char* name = nullptr;
  auto error = [&](CUresult r) {
    name = nullptr;
    if (cu.error_name(r, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown";
    return name;
  };
  CUresult r = cu.init(0);
  if (r != CUDA_SUCCESS) return no_driver("cuInit", error(r));
  int version = 0;
  cu.version(&version);
  CUdevice device;
  CUcontext context;
  if ((r = cu.device(&device, 0)) != CUDA_SUCCESS ||
      (r = cu.retain(&context, device)) != CUDA_SUCCESS ||
      (r = cu.set_current(context)) != CUDA_SUCCESS) {
    return no_driver("device 0", error(r));
  }
  char device_name[256] = {0};
  int major = 0, minor = 0;
  cu.name(device_name, sizeof device_name - 1, device);
  cu.attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  cu.attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  std::printf("driver %d\ndevice cc=%d.%d name=%s\n", version, major, minor, device_name);

  for (const Case& c : cases()) {
    CUtensorMap zeroed, filled;
    std::memset(&zeroed, 0, sizeof zeroed);
    std::memset(&filled, 0xff, sizeof filled);
    r = encode(cu, c, &zeroed);
    const CUresult again = encode(cu, c, &filled);
    const int rank = static_cast<int>(c.rank > 6 ? 6 : c.rank);
    std::string map = r == CUDA_SUCCESS ? hex(zeroed) : "-";
    std::string refilled = "-";
    if (r == CUDA_SUCCESS && again == CUDA_SUCCESS) {
      refilled = std::memcmp(&zeroed, &filled, sizeof zeroed) == 0 ? "same" : hex(filled);
    }
    std::printf(
        "case %s dtype=%d rank=%u address=0x%llx dims=%s strides=%s box=%s estrides=%s "
        "interleave=%d swizzle=%d l2=%d oob=%d result=%d:%s map=%s filled=%s\n",
        c.id.c_str(), static_cast<int>(c.dtype), c.rank,
        static_cast<unsigned long long>(c.address), list(c.dims, rank).c_str(),
        list(c.strides, rank - 1).c_str(), list(c.box, rank).c_str(),
        list(c.estrides, rank).c_str(), static_cast<int>(c.interleave),
        static_cast<int>(c.swizzle), static_cast<int>(c.l2), static_cast<int>(c.oob),
        static_cast<int>(r), error(r), map.c_str(), refilled.c_str());
  }
  return 0;
}
