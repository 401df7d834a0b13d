//! The TMA maps a kernel receives by value, read at its launch. A reproducer through
//! the user's launcher leaves the maps to the launcher (its own encoder, its own
//! helper that returns them), so the runner never holds them: the capture section
//! appended to such a reproducer catches the launch itself. Linked with
//! `--wrap=SYMBOL` for each of [`WRAPPED`] (the runner's build adds the flags where
//! the reproducer defines [`WRAPPER`]), every kernel launch of the library passes
//! through it; the first launch of the kernel (its demangled name, less namespaces
//! and template arguments, is the kernel's) has its `CUtensorMap` parameters copied,
//! and [`LAUNCHED_MAPS`] hands them to the runner after the launcher returns. A
//! megakernel's task list, whose maps kwb's own fill encodes, keeps them in the same
//! [`storage`] (no wrapping needed there).
//!
//! Invariant: the capture reads the launch's argument array and calls the real entry
//! with it unchanged; a launch it cannot name is launched as it is and captures
//! nothing.

use crate::kernel::KernelDef;

/// `int kwb_launched_maps(const unsigned char** bytes, const char* const** names)`:
/// how many maps the capture holds (0 before the kernel's launch), their 128 bytes
/// each, one after another, and the parameters they were passed as.
pub const LAUNCHED_MAPS: &str = "kwb_launched_maps";

/// The first wrapper the capture section defines: a reproducer that holds it is
/// linked with the `--wrap` flags.
pub const WRAPPER: &str = "__wrap___cudaLaunchKernel";

/// The launch entries of the CUDA runtime the capture stands in front of: what a
/// `<<<…>>>` launch's stub calls (and its per-thread-stream twin), and the
/// runtime's launch calls a launcher may make itself (`cudaLaunchKernelEx` is an inline
/// template over `cudaLaunchKernelExC`).
pub const WRAPPED: [&str; 4] = [
    "__cudaLaunchKernel",
    "__cudaLaunchKernel_ptsz",
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
];

/// The kernel's parameters passed as a `CUtensorMap` by value: (index, name).
pub(crate) fn map_params(def: &KernelDef) -> Vec<(usize, String)> {
    def.params
        .iter()
        .enumerate()
        // The role the kernel's parameters already have, less pointers to a map.
        .filter(|(_, p)| {
            p.role == "tma-descriptor"
                && !p.declaration.contains('*')
                && !p.declaration.contains('&')
        })
        .map(|(i, p)| (i, p.name.clone()))
        .collect()
}

/// The storage the runner reads the maps from: `count` maps of 128 bytes, the
/// parameter or field `names` they are, and [`LAUNCHED_MAPS`] over them. A map is
/// stored with `kwb_keep_map(i, &map)`; the count is the highest stored index + 1.
pub(crate) fn storage(names: &[String]) -> String {
    let count = names.len();
    let names = names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"static const char* const kwb_map_names[{count}] = {{{names}}};
static unsigned char kwb_maps_seen[{count}][128];
static int kwb_maps_count = 0;
static void kwb_keep_map(int i, const void* map) {{
  std::memcpy(kwb_maps_seen[i], map, 128);
  if (kwb_maps_count < i + 1) kwb_maps_count = i + 1;
}}
extern "C" int {LAUNCHED_MAPS}(const unsigned char** bytes, const char* const** names) {{
  *bytes = &kwb_maps_seen[0][0];
  *names = kwb_map_names;
  return kwb_maps_count;
}}
"#
    )
}

/// The capture section for `def`, or `None` when it takes no map by value.
pub(crate) fn capture_section(def: &KernelDef) -> Option<String> {
    let maps = map_params(def);
    if maps.is_empty() {
        return None;
    }
    let indices = maps
        .iter()
        .map(|(i, _)| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let names: Vec<String> = maps.iter().map(|(_, n)| n.clone()).collect();
    let storage = storage(&names);
    let count = maps.len();
    let kernel = &def.name;
    let [stub, stub_ptsz, launch, launch_ex] = WRAPPED;
    Some(format!(
        r#"// ---- kwb-extract: the TMA maps `{kernel}` receives, read at its launch ----
// Linked with --wrap for each launch entry below (kwb's build adds the flags): the
// first launch of `{kernel}` has its CUtensorMap parameters copied for the runner.
#include <cuda_runtime.h>
#include <cxxabi.h>
#include <cstdlib>
#include <cstring>
static const int kwb_map_params[{count}] = {{{indices}}};
{storage}// Whether a launch's symbol is `{kernel}`: its demangled name up to the parameter
// list, less template arguments, return type and namespaces.
static bool kwb_is_kernel(const char* mangled) {{
  if (mangled == nullptr) return false;
  int status = 0;
  char* full = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  const char* text = (status == 0 && full != nullptr) ? full : mangled;
  const char* end = std::strchr(text, '(');
  size_t length = end != nullptr ? size_t(end - text) : std::strlen(text);
  // Template arguments close the name: cut at the '<' that opens the last group.
  int depth = 0;
  size_t name_end = length;
  for (size_t i = length; i > 0; --i) {{
    const char c = text[i - 1];
    if (c == '>') ++depth;
    if (c == '<' && --depth == 0) {{ name_end = i - 1; break; }}
    if (depth == 0 && c != '>') break;
  }}
  size_t name_start = name_end;
  while (name_start > 0 && text[name_start - 1] != ':' && text[name_start - 1] != ' ') --name_start;
  const bool same = name_end - name_start == std::strlen("{kernel}") &&
                    std::strncmp(text + name_start, "{kernel}", name_end - name_start) == 0;
  std::free(full);
  return same;
}}
static void kwb_capture(const char* mangled, void** args) {{
  if (kwb_maps_count != 0 || args == nullptr || !kwb_is_kernel(mangled)) return;
  for (int i = 0; i < {count}; ++i) kwb_keep_map(i, args[kwb_map_params[i]]);
}}
// A launch's symbol: through the driver for a kernel handle, the runtime for a
// function; none on a toolkit older than the calls (12.5), where nothing is captured.
static const char* kwb_kernel_name(void* kernel) {{
#if CUDART_VERSION >= 12050
  typedef int (*kwb_get_name_fn)(const char**, void*);
  static kwb_get_name_fn get_name = nullptr;
  if (get_name == nullptr) {{
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{{}};
    if (cudaGetDriverEntryPointByVersion("cuKernelGetName", &p, 12030, cudaEnableDefault, &q) != cudaSuccess || q != cudaDriverEntryPointSuccess) return nullptr;
    get_name = reinterpret_cast<kwb_get_name_fn>(p);
  }}
  const char* name = nullptr;
  return get_name(&name, kernel) == 0 ? name : nullptr;
#else
  (void)kernel;
  return nullptr;
#endif
}}
static const char* kwb_function_name(const void* function) {{
#if CUDART_VERSION >= 12050
  const char* name = nullptr;
  return cudaFuncGetName(&name, function) == cudaSuccess ? name : nullptr;
#else
  (void)function;
  return nullptr;
#endif
}}
// Each real entry is a weak reference: a runtime without one (an older toolkit's
// stub calls another) leaves it unresolved and its wrapper uncalled, not a library
// that fails to load. A kernel handle is passed as the pointer it is.
extern "C" __attribute__((weak)) cudaError_t __real_{stub}(void*, dim3, dim3, void**, size_t, cudaStream_t);
extern "C" cudaError_t __wrap_{stub}(void* k, dim3 g, dim3 b, void** args, size_t smem, cudaStream_t s) {{
  kwb_capture(kwb_kernel_name(k), args);
  return __real_{stub}(k, g, b, args, smem, s);
}}
extern "C" __attribute__((weak)) cudaError_t __real_{stub_ptsz}(void*, dim3, dim3, void**, size_t, cudaStream_t);
extern "C" cudaError_t __wrap_{stub_ptsz}(void* k, dim3 g, dim3 b, void** args, size_t smem, cudaStream_t s) {{
  kwb_capture(kwb_kernel_name(k), args);
  return __real_{stub_ptsz}(k, g, b, args, smem, s);
}}
extern "C" __attribute__((weak)) cudaError_t __real_{launch}(const void*, dim3, dim3, void**, size_t, cudaStream_t);
extern "C" cudaError_t __wrap_{launch}(const void* f, dim3 g, dim3 b, void** args, size_t smem, cudaStream_t s) {{
  kwb_capture(kwb_function_name(f), args);
  return __real_{launch}(f, g, b, args, smem, s);
}}
extern "C" __attribute__((weak)) cudaError_t __real_{launch_ex}(const cudaLaunchConfig_t*, const void*, void**);
extern "C" cudaError_t __wrap_{launch_ex}(const cudaLaunchConfig_t* config, const void* f, void** args) {{
  kwb_capture(kwb_function_name(f), args);
  return __real_{launch_ex}(config, f, args);
}}
"#
    ))
}
