// kwb_trace.cuh: the device half of a kwb trace.
//
// kwb instruments a CUDA/CUTLASS kernel by inserting probes gated at compile time:
//
//     if constexpr (kwb::enabled && (REDUCTION_SIZE == 6144)) {
//       kwb::probe_array(3, kwb::Kind::Accumulator, 0x9e3779b9u, k_tile, m0, n0, acc);
//     }
//
// Build modes:
// - Without KWB_TRACE (a plain build), `kwb::enabled` is false and this header defines
//   no __device__/__global__ function, variable or symbol: only types, constexpr
//   values and templates that are never instantiated, plus host stubs that do nothing.
//   A kernel file that includes it compiles to the same SASS as without it.
// - With -DKWB_TRACE, the probes append fixed-size records (kwb::Record) to a trace
//   buffer in device global memory, and the host functions below read it back and
//   write a trace file that `kwb trace show` decodes.
//
// Configuration macros (define before including, or with -D):
//   KWB_TRACE           turn tracing on.
//   KWB_TRACE_CAPACITY  records the buffer holds (default 262144 = 56 MiB, 224 bytes each);
//                       records past it are not written, only counted as dropped
//                       (a fire-and-forget reduction on the shard's drop count; with
//                       KWB_TRACE_LEASE 0, by the shard's cursor counting past its end).
//   KWB_TRACE_SHARDS    the buffer's shards (default 64, or the capacity if smaller). A
//                       warp always appends to shard (linear CTA * warps per CTA +
//                       warp) % shards, each with its own cursor, so all-CTA tracing
//                       does not serialize on one atomic; a shard holds capacity /
//                       shards records (rounded down).
//   KWB_TRACE_LEASE     the most records a warp reserves with one atomic on its shard's
//                       cursor (default 32; 0: one atomic per claim and no shared
//                       memory). A converged warp keeps its reservation (its lease) in
//                       shared memory and takes its records from it with no atomic and
//                       no wait; a lease holds what the warp's claim asks for, then
//                       twice the warp's last lease, up to this many, and the claim
//                       that takes a new one waits for its atomic. The leases take
//                       1 KiB of static shared memory, 1024-byte aligned, so a kernel's
//                       dynamic shared memory keeps its alignment (a 128-byte swizzle
//                       needs 1024); a kernel whose shared memory is already at the
//                       device's limit needs KWB_TRACE_LEASE=0. Slots a lease reserved
//                       and the warp never wrote stay empty, and the flush skips them.
//   KWB_TRACE_VALUES    values kept per record, 0..8 (default 8); the record always
//                       has 8 slots, the rest hold value 0 and coordinates -1.
//   KWB_TRACE_MINMAX    0: records of values that all count and are all finite
//                       carry absmax only (vmin and vmax NaN), one instruction a
//                       value instead of three; for cheap all-CTA screening
//                       (default 1).
//   KWB_TRACE_FULL      also keep every value a probe looks at, with its coordinates,
//                       in a second buffer (kwb::TileValue, 24 bytes each); what
//                       `kwb-instrument --full-tile` asks for, with one CTA.
//   KWB_TRACE_TILE_CAPACITY  values that buffer holds (default 4194304 = 96 MiB);
//                       values past it are counted as dropped.
//   KWB_TRACE_SUMMARY   fold every probe call into a table per site and K tile
//                       instead of appending a record per warp: the values counted,
//                       absmax, NaN and Inf counts, and which CTA saw the largest |v|
//                       and the first NaN/Inf. A probe then claims nothing and waits
//                       for nothing (its additions are fire-and-forget reductions) and
//                       nothing is ever dropped for want of room: the screen of every
//                       CTA. It keeps no samples, min or max (KWB_TRACE_VALUES and
//                       KWB_TRACE_MINMAX default to 0 and must stay 0), writes no
//                       TileContext, and takes neither KWB_TRACE_FULL nor
//                       KWB_TRACE_MAPPED. The trace file's summary section holds it.
//   KWB_TRACE_SUMMARY_SITES    site ids the table has rows for (default 32); calls of
//                       a site past them are counted as dropped.
//   KWB_TRACE_SUMMARY_K_TILES  rows per site (default 256): one for K tile -1 (outside
//                       the K loop), one per K tile 0.., the last also holding every
//                       later K tile.
//   KWB_TRACE_SUMMARY_STRIPES  copies of each row (default 64), warp w of the grid
//                       adding into copy w % stripes, so the reductions of concurrent
//                       warps spread over many L2 lines; the flush folds them. The
//                       table is 64 bytes * sites * rows * stripes (32 MiB by default).
//   KWB_TRACE_SCREEN    a summary (KWB_TRACE_SUMMARY is implied) whose one row per site
//                       folds every K tile, with a stripe for each warp of the grid
//                       (KWB_TRACE_SUMMARY_STRIPES defaults to 8192; warp w shares
//                       the stripe of w + 8192, which is exact too, and the two run
//                       at once only where an H200 holds over 62 warps an SM), so
//                       concurrent warps do not reduce into one address. A call
//                       reduces one word over the warp (the largest |v|, which is NaN
//                       or Inf exactly when a value is) and counts NaN and Inf values
//                       only when it is: the cheapest screen of every CTA, per site,
//                       naming the CTA of the peak and the first CTA with a NaN or Inf.
//   KWB_TRACE_MAX_REGS  the original kernel's registers a thread (`ptxas -v`; with
//                       several kernels in the file, the largest; kwb-instrument
//                       --max-regs N defines it in the file): a trace build asks
//                       ptxas to keep the CTAs an SM that count gives (the occupancy
//                       floor, below), so probes cost no occupancy where the code
//                       still fits. Unset (the default), ptxas is as free as the
//                       kernel's launch bounds let it be.
//   KWB_TRACE_CTA_X/Y/Z the CTA the probes record at start-up (default -1: any).
//   KWB_TRACE_K_BEGIN/END  the K tiles they record at start-up, [begin, end)
//                       (default 0 and INT_MAX: all).
//   KWB_TRACE_MAPPED    records go to mapped, pinned host memory instead of device
//                       memory, so they outlive a device fault: after an illegal
//                       address the exit flush (KWB_TRACE_OUT) still writes every
//                       record that landed and names the last one of each warp. The
//                       host memory is mapped at start-up when KWB_TRACE_OUT is set,
//                       else at the first kwb::trace_reset()/set_filter()/
//                       trace_map(); until then records go to device memory. Slower
//                       per record (PCIe): for one CTA.
//   KWB_TRACE_UNIT      a name unique to this translation unit (kwb-nvcc passes one):
//                       every kwb symbol moves into `kwb::KWB_TRACE_UNIT`, so several
//                       traced units in one program each keep their own buffer, site
//                       table and flush. At exit the first unit to flush writes
//                       $KWB_TRACE_OUT and the others $KWB_TRACE_OUT.1, .2, …;
//                       kwb_trace_reset(), kwb_trace_flush(path) and
//                       kwb_trace_set_cta(x, y, z) act on every unit.
//   KWB_TRACE_EXTERN    only with -rdc=true and several traced translation units:
//                       every unit but one defines it, and declares the buffer
//                       instead of defining it. In whole-program builds each unit
//                       has its own buffer; trace one unit per program.
//
// The trace buffer is a module global, so a runner can read it with the driver API
// (cuModuleGetGlobal) under these names: `_ZN3kwb13trace_recordsE`,
// `_ZN3kwb12trace_cursorE` (per shard, at every kwb::cursor_words-th word, the records
// reserved, and at the next word the records dropped because the shard was full; with
// KWB_TRACE_LEASE 0 the first word counts the records claimed, those past the shard's
// end dropped, and the second stays 0) and
// `_ZN3kwb12trace_filterE`.
//
// The layout of every struct between a `kwb:layout` marker pair is mirrored by the
// Rust crate kwb-runtime, and a test parses these declarations: the two change
// together. Keep each field on its own line, as `type name;` or `type name[N];`.
//
// Probes never call printf: it breaks warp-specialized producers with tight register
// budgets. The host side writes a one-line reason to stderr when a flush fails.

#ifndef KWB_TRACE_CUH_
#define KWB_TRACE_CUH_

#include <climits>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

// A screen is a summary of one row per site, a cell for each warp of the grid.
#ifdef KWB_TRACE_SCREEN
#ifndef KWB_TRACE_SUMMARY
#define KWB_TRACE_SUMMARY 1
#endif
#ifndef KWB_TRACE_SUMMARY_K_TILES
#define KWB_TRACE_SUMMARY_K_TILES 1
#endif
#ifndef KWB_TRACE_SUMMARY_STRIPES
#define KWB_TRACE_SUMMARY_STRIPES 8192
#endif
#endif
// A summary build keeps no records (a minimal buffer), samples or min/max.
#ifdef KWB_TRACE_SUMMARY
#ifndef KWB_TRACE_CAPACITY
#define KWB_TRACE_CAPACITY 64
#endif
#ifndef KWB_TRACE_VALUES
#define KWB_TRACE_VALUES 0
#endif
#ifndef KWB_TRACE_MINMAX
#define KWB_TRACE_MINMAX 0
#endif
#endif
#ifndef KWB_TRACE_SUMMARY_SITES
#define KWB_TRACE_SUMMARY_SITES 32
#endif
#ifndef KWB_TRACE_SUMMARY_K_TILES
#define KWB_TRACE_SUMMARY_K_TILES 256
#endif
#ifndef KWB_TRACE_SUMMARY_STRIPES
#define KWB_TRACE_SUMMARY_STRIPES 64
#endif
#ifndef KWB_TRACE_CAPACITY
#define KWB_TRACE_CAPACITY 262144
#endif
#ifndef KWB_TRACE_LEASE
#define KWB_TRACE_LEASE 32
#endif
#ifndef KWB_TRACE_VALUES
#define KWB_TRACE_VALUES 8
#endif
#ifndef KWB_TRACE_MINMAX
#define KWB_TRACE_MINMAX 1
#endif
#ifndef KWB_TRACE_TILE_CAPACITY
#define KWB_TRACE_TILE_CAPACITY 4194304
#endif
#ifndef KWB_TRACE_CTA_X
#define KWB_TRACE_CTA_X -1
#endif
#ifndef KWB_TRACE_CTA_Y
#define KWB_TRACE_CTA_Y -1
#endif
#ifndef KWB_TRACE_CTA_Z
#define KWB_TRACE_CTA_Z -1
#endif
// Shards of the record buffer (each warp claims from one): 64 spread the claims of a
// grid's warps, but split the buffer 64 ways; a build that records one CTA (every
// KWB_TRACE_CTA_* set) has at most 32 warps claiming, and one shard gives each of them
// the whole buffer (a one-CTA trace of a long K loop then drops nothing).
#ifndef KWB_TRACE_SHARDS
#if KWB_TRACE_CTA_X >= 0 && KWB_TRACE_CTA_Y >= 0 && KWB_TRACE_CTA_Z >= 0
#define KWB_TRACE_SHARDS 1
#else
#define KWB_TRACE_SHARDS (KWB_TRACE_CAPACITY < 64 ? KWB_TRACE_CAPACITY : 64)
#endif
#endif
#ifndef KWB_TRACE_K_BEGIN
#define KWB_TRACE_K_BEGIN 0
#endif
#ifndef KWB_TRACE_K_END
#define KWB_TRACE_K_END INT_MAX
#endif

#ifdef KWB_TRACE
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#if !defined(__CUDACC_RTC__)
#include <algorithm>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#endif
#endif

// The occupancy floor. Probes add registers, and ptxas, free under a kernel's
// `__launch_bounds__(T, 1)` to give a thread up to 64K / T of them, takes more than the
// code needs once they are there (tma_wgmma_sm90's every-kind screen: 102 registers,
// one CTA an SM, where 80 hold it without a spill and keep the original's two).
// kwb-instrument wraps each probed kernel's launch bounds, `__launch_bounds__(T, B)`
// into `__launch_bounds__(T, KWB_MIN_CTAS((T), B))` and `__launch_bounds__(T)` into
// `__launch_bounds__(T KWB_MORE_CTAS((T)))`, and puts KWB_MAXNREG before the name of a
// kernel that has none. Without KWB_TRACE and KWB_TRACE_MAX_REGS they give back the
// kernel's own tokens; with both, a kernel asks for at least the CTAs an SM whose
// threads KWB_TRACE_MAX_REGS registers each fit in the register file (64K, allocated
// 8 a thread; at most 32 CTAs), never fewer than its own minimum, and one without
// launch bounds is capped at KWB_TRACE_MAX_REGS.
#if defined(KWB_TRACE) && defined(KWB_TRACE_MAX_REGS)
namespace kwb {
constexpr int occupancy_floor(long long threads, long long own) {
  const long long regs = (static_cast<long long>(KWB_TRACE_MAX_REGS) + 7) / 8 * 8;
  const long long lanes = (threads + 31) / 32 * 32;
  const long long fit = lanes > 0 && regs > 0 ? 65536 / (lanes * regs) : 0;
  const long long ctas = fit < 32 ? fit : 32;
  return static_cast<int>(ctas > own ? ctas : own);
}
}  // namespace kwb
#define KWB_MIN_CTAS(threads, ...) (::kwb::occupancy_floor((threads), (__VA_ARGS__)))
#define KWB_MORE_CTAS(threads) , ::kwb::occupancy_floor((threads), 0)
#define KWB_MAXNREG __maxnreg__(KWB_TRACE_MAX_REGS)
#else
#define KWB_MIN_CTAS(threads, ...) __VA_ARGS__
#define KWB_MORE_CTAS(threads)
#define KWB_MAXNREG
#endif

#if defined(KWB_TRACE) && defined(KWB_TRACE_UNIT) && !defined(__CUDACC_RTC__)
#include <string>
// Shared by every traced unit of a program (weak: one definition wins at link time):
// the units' list and how many have flushed at exit.
struct KwbTraceUnit {
  cudaError_t (*reset)();
  cudaError_t (*reset_async)(cudaStream_t);
  bool (*flush)(const char*);
  KwbTraceUnit* next;
  cudaError_t (*set_cta)(int, int, int);
};
extern "C" {
__attribute__((weak)) KwbTraceUnit* kwb_trace_unit_list = nullptr;
__attribute__((weak)) int kwb_trace_units_flushed = 0;
}
#endif

namespace kwb {
#ifdef KWB_TRACE_UNIT
inline namespace KWB_TRACE_UNIT {
#endif

// True exactly when KWB_TRACE is defined: the first operand of every probe's gate.
#ifdef KWB_TRACE
inline constexpr bool enabled = true;
#else
inline constexpr bool enabled = false;
#endif

// The value types a probe reads an MMA's packed operands as, named in both builds: a
// kernel that feeds an fp8 or bf16 MMA from raw 32-bit words need not include the CUDA
// headers that declare those types, and a disabled build (which does not include them)
// still looks the names up where kwb-instrument wrote them.
#ifdef KWB_TRACE
using half = ::__half;
using bfloat16 = ::__nv_bfloat16;
using fp8_e4m3 = ::__nv_fp8_e4m3;
using fp8_e5m2 = ::__nv_fp8_e5m2;
#else
struct half;
struct bfloat16;
struct fp8_e4m3;
struct fp8_e5m2;
#endif

// The version of the record layout and of the trace file; both change together.
// Version 3 added the tile section (--full-tile), version 4 the summary section
// (KWB_TRACE_SUMMARY); readers also take version 2 and 3 files.
inline constexpr uint32_t version = 4;
// "KWBR" read as a little-endian u32: the first field of every written record.
inline constexpr uint32_t record_magic = 0x5242574Bu;
// The value slots of a record (fixed); KWB_TRACE_VALUES of them are filled.
inline constexpr int record_values = 8;
// A row bound that keeps every value: pass it when there are no padding rows.
inline constexpr int all_rows = INT_MAX;
// A CTA coordinate of the filter that matches every CTA.
inline constexpr int any = -1;
// The words of trace_cursor per shard: each shard's cursor (the first word: the slots
// reserved so far) and drop count (the second: the records not written because the
// shard was full) sit alone in a 128-byte line, so claims on different shards do not
// queue behind each other at one line's atomic unit.
inline constexpr int cursor_words = 16;
// The most records one lease reserves (KWB_TRACE_LEASE).
inline constexpr unsigned lease_records = KWB_TRACE_LEASE;

static_assert(KWB_TRACE_VALUES >= 0 && KWB_TRACE_VALUES <= 8,
              "KWB_TRACE_VALUES must be between 0 and 8 (the record has 8 slots)");
static_assert(KWB_TRACE_CAPACITY > 0, "KWB_TRACE_CAPACITY must be positive");
static_assert(KWB_TRACE_SHARDS > 0 && KWB_TRACE_SHARDS <= KWB_TRACE_CAPACITY,
              "KWB_TRACE_SHARDS must be between 1 and KWB_TRACE_CAPACITY");
static_assert(KWB_TRACE_LEASE >= 0 && KWB_TRACE_LEASE <= 1024,
              "KWB_TRACE_LEASE must be between 0 (no leases) and 1024");
static_assert(static_cast<unsigned long long>(KWB_TRACE_CAPACITY) < 0xffffffffull - 1024ull,
              "a record's slot, and a lease's end, fit in 32 bits");

// Whether probes fold into the summary table (KWB_TRACE_SUMMARY) instead of records.
#ifdef KWB_TRACE_SUMMARY
inline constexpr bool summary = true;
static_assert(KWB_TRACE_VALUES == 0,
              "a KWB_TRACE_SUMMARY build keeps no samples: KWB_TRACE_VALUES must be 0");
static_assert(KWB_TRACE_MINMAX == 0,
              "a KWB_TRACE_SUMMARY build keeps absmax only: KWB_TRACE_MINMAX must be 0");
#if defined(KWB_TRACE_FULL) || defined(KWB_TRACE_MAPPED)
#error "KWB_TRACE_SUMMARY takes neither KWB_TRACE_FULL nor KWB_TRACE_MAPPED (it keeps no records)"
#endif
#else
inline constexpr bool summary = false;
#endif
// Whether the summary is a screen (KWB_TRACE_SCREEN): one row per site, which folds
// every K tile, and a stripe for each warp of the grid.
#ifdef KWB_TRACE_SCREEN
inline constexpr bool screen = true;
static_assert(KWB_TRACE_SUMMARY_K_TILES == 1,
              "a KWB_TRACE_SCREEN build folds every K tile into one row: "
              "KWB_TRACE_SUMMARY_K_TILES must be 1");
#else
inline constexpr bool screen = false;
static_assert(KWB_TRACE_SUMMARY_K_TILES >= 2,
              "the summary table needs two K-tile rows (-1 and 0..); only a screen has one");
#endif
static_assert(KWB_TRACE_SUMMARY_SITES > 0 && KWB_TRACE_SUMMARY_STRIPES > 0,
              "the summary table needs a site and a stripe");

// What a probe reads. The numbers are stored in Record::kind.
enum class Kind : uint32_t {
  OperandA = 1,     // the A operand as the MMA consumes it (smem tile or registers)
  OperandB = 2,     // the B operand as the MMA consumes it
  Accumulator = 3,  // the accumulator where it is complete
  Epilogue = 4,     // values the epilogue computes or stores
  Load = 5,         // data a load (TMA, cp.async, ldmatrix) brought in
  TileContext = 6,  // no values: the origin (tile_m, tile_n) of the work tile the warp
                    // starts, for its later records that have none (kwb::tile_context)
  NotProbed = 7,    // no values: the site's probe reads a type the value model cannot;
                    // the flush writes one per such site, the type's name in the bytes
                    // of values[] and value_m/n/k (zero-terminated, at most 127 bytes)
};

// A logical coordinate axis of the GEMM: M and N of the output, K of the reduction.
enum class Axis : uint32_t { M = 0, N = 1, K = 2 };

// The logical (m, n, k) coordinates of one value; -1 where unknown or not applicable.
struct Coord {
  int m;
  int n;
  int k;
};

// Coordinates when only raw order is known: every coordinate is -1. Values with
// unknown coordinates always pass the row filter.
struct NoCoord {
  __host__ __device__ constexpr Coord operator()(int) const { return Coord{-1, -1, -1}; }
};

// Coordinates of a row-major tile: index i is row i / cols and column i % cols, the
// row lies on `row_axis` starting at `row0`, the column on `col_axis` starting at
// `col0`; the third axis is -1. For a B tile of BLOCK_N rows by BLOCK_K columns:
// RowMajor{Axis::N, Axis::K, BLOCK_K, n_block * BLOCK_N, k_tile * BLOCK_K}.
struct RowMajor {
  Axis row_axis;
  Axis col_axis;
  int cols;
  int row0;
  int col0;

  __host__ __device__ constexpr Coord operator()(int i) const {
    Coord c{-1, -1, -1};
    const int row = row0 + i / cols;
    const int col = col0 + i % cols;
    (row_axis == Axis::M ? c.m : row_axis == Axis::N ? c.n : c.k) = row;
    (col_axis == Axis::M ? c.m : col_axis == Axis::N ? c.n : c.k) = col;
    return c;
  }
};

// The instantiation tag of a gate: 32-bit FNV-1a of its text, e.g.
// kwb::tag_of("REDUCTION_SIZE == 6144"). kwb_runtime::tag computes the same.
__host__ __device__ constexpr uint32_t tag_of(const char* text) {
  uint32_t hash = 0x811c9dc5u;
  for (; *text != '\0'; ++text) {
    hash = (hash ^ static_cast<uint8_t>(*text)) * 0x01000193u;
  }
  return hash;
}
static_assert(tag_of("") == 0x811c9dc5u, "FNV-1a offset basis");
static_assert(tag_of("a") == 0xe40c292cu, "FNV-1a of \"a\"");

// One trace record: one warp's view of one probe at one point in time. Fixed size,
// little-endian, 8-byte aligned; the trace file stores records as they are here.
// kwb:layout Record begin
struct alignas(8) Record {
  uint32_t magic;        // record_magic ("KWBR"); a slot never written holds 0
  uint32_t version;      // kwb::version
  uint32_t site;         // the probe's site id, an index into the site table
  uint32_t kind;         // a kwb::Kind
  uint32_t tag;          // instantiation tag: tag_of(the gate text)
  uint32_t cta_x;        // blockIdx.x
  uint32_t cta_y;        // blockIdx.y
  uint32_t cta_z;        // blockIdx.z
  uint32_t warp;         // warp index within the CTA (linear thread index / 32)
  uint32_t lane;         // the lane that wrote the record (lowest active lane)
  uint32_t active_mask;  // the lanes that contributed values
  int32_t k_tile;        // K tile index; -1 when not in the K loop
  int32_t tile_m;        // the CTA tile's first output row as the kernel computes it
                         // (kwb-instrument passes the kernel's own origin local, e.g.
                         // `m0 = blockIdx.y * BM`); -1 where it has none in scope
                         // (the trace reader then gives the record the origin of its
                         // warp's last TileContext record, if any)
  int32_t tile_n;        // the same for the first output column
  int32_t row_bound;     // values count only when their row < row_bound (INT_MAX: all)
  uint32_t row_axis;     // the kwb::Axis that is the row of the row filter
  uint32_t count;        // values that passed the row filter, summed over lanes
  float absmax;          // max |v| over finite counted values (0 when none)
  float vmin;            // smallest finite counted value (+Inf when none; NaN: not
                         // recorded, a KWB_TRACE_MINMAX=0 build)
  float vmax;            // largest finite counted value (-Inf when none; NaN: not
                         // recorded)
  uint32_t nan_count;    // counted values that are NaN
  uint32_t inf_count;    // counted values that are +-Inf
  uint32_t seen;         // values looked at before the row filter
  uint32_t nvalues;      // filled slots of values[] (at most KWB_TRACE_VALUES)
  float values[8];       // the first counted values, in lane order per element
  int32_t value_m[8];    // logical m of each value; -1 when unknown
  int32_t value_n[8];    // logical n of each value; -1 when unknown
  int32_t value_k[8];    // logical k of each value; -1 when unknown
};
// kwb:layout end
static_assert(sizeof(Record) == 224, "the Rust mirror expects 224-byte records");
static_assert(alignof(Record) == 8, "records are 8-byte aligned");
static_assert(offsetof(Record, values) == 96, "the Rust mirror expects values at 96");

// The runtime filter: probes outside it return before doing any work. It lives in
// __constant__ memory; kwb::set_filter changes it between launches.
// kwb:layout Filter begin
struct Filter {
  int32_t cta_x;    // the CTA to record, per coordinate; -1 (kwb::any): every CTA
  int32_t cta_y;
  int32_t cta_z;
  int32_t k_begin;  // K tiles to record: [k_begin, k_end); probes with k_tile -1
  int32_t k_end;    // (outside the K loop) always pass
  uint32_t on;      // 0 turns every probe off
};
// kwb:layout end
static_assert(sizeof(Filter) == 24, "the Rust mirror expects a 24-byte filter");

// The trace file: a FileHeader, then site_count site entries (a SiteEntry, the file
// name bytes, the source text bytes, zero padding to a multiple of 8; the entries
// take site_table_bytes in all), then record_count Records, then (version 3) the tile
// section: a TileHeader and its TileValues, then (version 4) the summary section: a
// SummaryHeader and its SummaryEntries. Little-endian.
// kwb:layout FileHeader begin
struct FileHeader {
  char magic[8];              // "KWBTRACE", no terminating zero
  uint32_t version;           // kwb::version
  uint32_t record_size;       // sizeof(Record)
  uint64_t record_count;      // records in the file
  uint64_t dropped;           // records lost because the buffer was full
  uint64_t capacity;          // KWB_TRACE_CAPACITY of the build
  uint32_t site_count;        // entries in the site table
  uint32_t site_table_bytes;  // bytes of the site table, a multiple of 8
};
// kwb:layout end
static_assert(sizeof(FileHeader) == 48, "the Rust mirror expects a 48-byte header");

// kwb:layout SiteEntry begin
struct SiteEntry {
  uint32_t id;        // the site id records refer to
  uint32_t line;      // 1-based line of the probed statement in `file`
  uint32_t file_len;  // bytes of the file name that follow
  uint32_t text_len;  // bytes of the source text that follow the file name
};
// kwb:layout end
static_assert(sizeof(SiteEntry) == 16, "the Rust mirror expects 16-byte site entries");

// The tile section, after the records (version 3): a TileHeader, then `count`
// TileValues. Its count is 0 unless the build defines KWB_TRACE_FULL.
// kwb:layout TileHeader begin
struct TileHeader {
  char magic[8];        // "KWBTILES", no terminating zero
  uint64_t count;       // values in the section
  uint64_t dropped;     // values lost because the tile buffer was full
  uint64_t capacity;    // KWB_TRACE_TILE_CAPACITY of the build (0: not a full-tile build)
  uint32_t value_size;  // sizeof(TileValue)
  uint32_t reserved;    // 0
};
// kwb:layout end
static_assert(sizeof(TileHeader) == 40, "the Rust mirror expects a 40-byte tile header");

// One value of a full tile.
// kwb:layout TileValue begin
struct TileValue {
  uint32_t record;   // the record it belongs to: its index among the file's records
  uint32_t element;  // its index in the probe: lane rank * N + i (a fragment), i (a tile)
  float value;       // the value, as float
  int32_t m;         // its logical m; -1 when unknown
  int32_t n;         // its logical n; -1 when unknown
  int32_t k;         // its logical k; -1 when unknown
};
// kwb:layout end
static_assert(sizeof(TileValue) == 24, "the Rust mirror expects 24-byte tile values");

// The summary section, after the tile section (version 4): a SummaryHeader, then
// `count` SummaryEntries, one per site and K-tile row that a probe call reached, in
// site and K-tile order. Its count is 0 unless the build defines KWB_TRACE_SUMMARY.
// kwb:layout SummaryHeader begin
struct SummaryHeader {
  char magic[8];        // "KWBSUMMA", no terminating zero
  uint64_t count;       // entries in the section
  uint64_t dropped;     // probe calls not folded in: their site id was past the table's
  uint32_t entry_size;  // sizeof(SummaryEntry)
  uint32_t k_tiles;     // KWB_TRACE_SUMMARY_K_TILES of the build (0: not a summary build)
  uint32_t grid_x;      // the grid of the last launch a probe ran in (0: none seen);
  uint32_t grid_y;      // what the CTAs' linear ids were decoded with
  uint32_t grid_z;
  uint32_t reserved;    // 0
};
// kwb:layout end
static_assert(sizeof(SummaryHeader) == 48, "the Rust mirror expects a 48-byte summary header");

// One site and K tile (or, in the table's last row, K tiles) of a summary build: every
// probe call of every admitted CTA and warp, folded.
// kwb:layout SummaryEntry begin
struct SummaryEntry {
  uint32_t site;        // the probe's site id
  uint32_t kind;        // a kwb::Kind
  uint32_t tag;         // instantiation tag
  int32_t k_tile;       // the first K tile it holds; -1: outside the K loop
  int32_t k_end;        // one past the last: k_tile + 1, or INT_MAX for the table's last
                        // row (every later K tile too)
  uint32_t reserved;    // 0
  uint64_t probes;      // probe calls (one per warp and call) folded in (each of the
                        // table's stripes counts them modulo 2^24)
  uint64_t count;       // values that passed the row filter
  uint64_t seen;        // values looked at before the row filter
  uint64_t nan_count;   // counted values that are NaN
  uint64_t inf_count;   // counted values that are +-Inf
  float absmax;         // max |v| over finite counted values (0 when none)
  int32_t peak_cta_x;   // a CTA whose values reached absmax (the highest linear id of
  int32_t peak_cta_y;   // those that did); -1 when the grid is unknown
  int32_t peak_cta_z;
  int32_t bad_cta_x;    // the lowest-numbered CTA that counted a NaN or an Inf; -1:
  int32_t bad_cta_y;    // none did
  int32_t bad_cta_z;
  uint32_t reserved2;   // 0
};
// kwb:layout end
static_assert(sizeof(SummaryEntry) == 96, "the Rust mirror expects 96-byte summary entries");

// One probe site as the instrumenter describes it. It emits a table and registers it:
//
//   static const kwb::SiteInfo kwb_sites[] = {{0, "gemm.cu", 120, "tCsA(_, _, _, s)"}};
//   [[maybe_unused]] static const bool kwb_sites_registered = kwb::register_sites(kwb_sites);
//
// Without KWB_TRACE the registration is a constant and the table is never used.
struct SiteInfo {
  uint32_t id;
  const char* file;
  uint32_t line;
  const char* text;
};

// A screen's running fold of one site's calls, held in each lane's registers: what the
// lane saw (its largest finite |v|, the values it counted and the ones the row filter
// left out). It does not count the calls: a counter a site costs a register for the
// whole function, and a kernel whose occupancy sits at a register boundary loses a
// CTA an SM for it (tma_wgmma_sm90's every-kind screen: 85 registers with call
// counts, 80 without; 2 CTAs an SM need at most 80). kwb-instrument --screen declares
// one per site at the top of the function body that holds the site's probe and passes
// it with the site id (`kwb::probe(kwb::SiteArg{3u, kwb_fold_3}, ...)`); a call then
// adds into registers, with no reduction over the warp and no memory operation, and the
// fold goes into the warp's cell of the screen once, when the function that declared
// it returns (the destructor): once per warp for a kernel's sites and for those of the
// helper a kernel calls for its MMA (the kernel holds that helper's folds and passes
// them to it), once per call for any other helper's. NaN and Inf, which only a broken
// kernel makes, are counted exactly, value by value, by the lane that saw them,
// straight into the warp's cell. Without KWB_TRACE_SCREEN (and without KWB_TRACE) it
// is three constants, which the compiler drops.
#if defined(KWB_TRACE) && defined(KWB_TRACE_SCREEN)
struct Fold {
  uint32_t site;
  Kind kind;
  uint32_t tag;
  unsigned peak = 0u;      // the bits of the largest finite |v| (non-negative floats
                           // order as their bits)
  unsigned values = 0u;    // values counted
  unsigned filtered = 0u;  // values looked at and left out by the row filter
  // Folds what the lanes hold into the warp's cell and starts again from nothing (the
  // destructor's work, which a hand-written probe may also do earlier).
  __device__ void flush();
  __device__ ~Fold() { flush(); }
};
#else
struct Fold {
  uint32_t site;
  Kind kind;
  uint32_t tag;
};
#endif

// A probe's site: its id, and where a screen folds it (null: the probe folds each call
// into the warp's cell itself). A site id converts to it.
struct SiteArg {
  uint32_t id;
  Fold* fold;
  __host__ __device__ constexpr SiteArg(uint32_t site) : id(site), fold(nullptr) {}
  __host__ __device__ constexpr SiteArg(uint32_t site, Fold& into) : id(site), fold(&into) {}
};

namespace detail {
// The thread's own special registers (its index, its lane) read where they are used. A
// probe sits in a kernel's mainloop: had it read threadIdx as a C++ value, the compiler
// would hoist it (and what it computes from it) out of the loop and keep it in
// registers for the whole loop, in every CTA, traced or not; that costs a wgmma kernel
// its occupancy. A volatile read cannot be hoisted, and costs a traced warp a few
// cycles. (blockIdx, blockDim and gridDim are the same for the whole warp: the compiler
// keeps them in uniform registers, which cost no occupancy.)
__device__ __forceinline__ unsigned tid_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned tid_y() {
  unsigned r;
  asm volatile("mov.u32 %0, %%tid.y;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned tid_z() {
  unsigned r;
  asm volatile("mov.u32 %0, %%tid.z;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned laneid() {
  unsigned r;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));
  return r;
}

// The calling thread's linear index in its CTA (the order warps are formed in). In a
// screen, a one-dimensional CTA (blockDim, the same for the whole CTA, says so) reads
// only its x index: one special register where three took three round trips. Not in
// a record build, where the branch cost mma_sync's one-CTA build more than the two
// registers save (docs/results/track-a-stage-pair.md).
__device__ __forceinline__ unsigned linear_tid() {
  if constexpr (screen) {
    if (blockDim.y * blockDim.z == 1u) return tid_x();
  }
  return tid_x() + blockDim.x * (tid_y() + blockDim.y * tid_z());
}
}  // namespace detail

// The warp index of the calling thread within its CTA; probes of a shared tile are
// usually issued by one warp: `if (kwb::warp_id() == 0) kwb::probe_tile(...)`.
__device__ __forceinline__ int warp_id() { return static_cast<int>(detail::linear_tid() / 32u); }

// The lane of the calling thread within its warp (warps are formed from consecutive
// linear thread indices, so this is the linear index modulo 32).
__device__ __forceinline__ int lane_id() { return static_cast<int>(detail::laneid()); }

// Which index of a fragment array picks the MMA tile along m or n, and how far apart
// consecutive values of that index are. The instrumenter names the dimension (from
// the MMA call, e.g. `mma(acc[i][j], a[i], b[j][0], b[j][1])`: acc's dimension 0 is
// the m tile, 1 the n tile); the probe fills in the spacing from the array's type
// (fit), so that a value's coordinates are within the lane's whole fragment array,
// not one MMA tile. A dimension of -1 (the default) adds no offset.
struct TileIndex {
  int dim = -1;     // the array dimension, -1: none
  int stride = 0;   // values (of the probed type) per step of that index
  int extent = 1;   // the dimension's extent

  __host__ __device__ constexpr int at(int i) const {
    return stride > 0 ? (i / stride) % extent : 0;
  }
};

namespace detail {
// Size in bytes of A's element at depth D (D = 0: A itself).
template <class A, int D>
struct sub_size {
  static constexpr size_t value = sub_size<std::remove_extent_t<A>, D - 1>::value;
};
template <class A>
struct sub_size<A, 0> {
  static constexpr size_t value = sizeof(A);
};

// The spacing of dimension `dim` of array type A, read as values of T.
template <class A, class T>
__host__ __device__ constexpr TileIndex fit_index(int dim) {
  TileIndex t{dim, 0, 1};
  constexpr int rank = static_cast<int>(std::rank<A>::value);
  if (dim < 0 || dim >= rank) return TileIndex{};
  // Dimension d steps over sub_size<A, d + 1> bytes and has extent<A, d> values.
  size_t step = 0;
  size_t extent = 1;
  if (dim == 0) {
    step = sub_size<A, (rank > 0 ? 1 : 0)>::value;
    extent = std::extent<A, 0>::value;
  } else if (dim == 1) {
    step = sub_size<A, (rank > 1 ? 2 : 0)>::value;
    extent = std::extent<A, 1>::value;
  } else if (dim == 2) {
    step = sub_size<A, (rank > 2 ? 3 : 0)>::value;
    extent = std::extent<A, 2>::value;
  } else {
    return TileIndex{};
  }
  t.stride = static_cast<int>(step / sizeof(T));
  t.extent = static_cast<int>(extent);
  return t;
}
}  // namespace detail

// Coordinates of mma.sync .m16n8k16 register fragments, as the PTX ISA lays them out
// ("Matrix Fragments for mma.m16n8k16"): within one MMA tile m in [0, 16), n in [0,
// 8), k in [0, 16), groupID = lane / 4; plus 16 (m) or 8 (n) per step of the array
// index that picks the tile (TileIndex), when the instrumenter knows it.
// A (16-bit types; 8 values per tile in four 32-bit registers): element e = i % 8 is
// on row groupID for e in {0, 1, 4, 5} and groupID + 8 for e in {2, 3, 6, 7}, at k =
// (lane % 4) * 2 + e % 2 + 8 * (e / 4).
struct MmaM16n8k16A {
  int m_dim = -1;  // the array dimension that picks the m tile
  TileIndex m{};

  template <class A, class T>
  __host__ __device__ constexpr MmaM16n8k16A fit() const {
    return MmaM16n8k16A{m_dim, detail::fit_index<A, T>(m_dim)};
  }
  __device__ Coord operator()(int i) const {
    const int e = i % 8;
    const int lane = lane_id();
    return Coord{16 * m.at(i) + lane / 4 + 8 * ((e / 2) % 2), -1,
                 (lane % 4) * 2 + e % 2 + 8 * (e / 4)};
  }
};
// B (16-bit types; 4 values per n8 tile in two 32-bit registers): element e = i % 4 is
// on column n = groupID, at k = (lane % 4) * 2 + e % 2 + 8 * (e / 2).
struct MmaM16n8k16B {
  int n_dim = -1;  // the array dimension that picks the n tile
  TileIndex n{};

  template <class A, class T>
  __host__ __device__ constexpr MmaM16n8k16B fit() const {
    return MmaM16n8k16B{n_dim, detail::fit_index<A, T>(n_dim)};
  }
  __device__ Coord operator()(int i) const {
    const int e = i % 4;
    const int lane = lane_id();
    return Coord{-1, 8 * n.at(i) + lane / 4, (lane % 4) * 2 + e % 2 + 8 * (e / 2)};
  }
};
// Coordinates of mma.sync .m16n8k32 register fragments of 8-bit inputs (e4m3, e5m2,
// s8, u8), as the PTX ISA lays them out ("Matrix Fragments for mma.m16n8k32"): m in
// [0, 16), n in [0, 8), k in [0, 32). The accumulator is laid out as m16n8k16's
// (MmaM16n8k16C).
// A (16 values per tile in four 32-bit registers, four to a register): element e =
// i % 16 is on row groupID for e in 0..4 and 8..12, groupID + 8 otherwise, at k =
// (lane % 4) * 4 + e % 4 + 16 * (e / 8).
struct MmaM16n8k32A {
  int m_dim = -1;  // the array dimension that picks the m tile
  TileIndex m{};

  template <class A, class T>
  __host__ __device__ constexpr MmaM16n8k32A fit() const {
    return MmaM16n8k32A{m_dim, detail::fit_index<A, T>(m_dim)};
  }
  __device__ Coord operator()(int i) const {
    const int e = i % 16;
    const int lane = lane_id();
    return Coord{16 * m.at(i) + lane / 4 + 8 * ((e / 4) % 2), -1,
                 (lane % 4) * 4 + e % 4 + 16 * (e / 8)};
  }
};
// B (8 values per n8 tile in two 32-bit registers): element e = i % 8 is on column n =
// groupID, at k = (lane % 4) * 4 + e % 4 + 16 * (e / 4).
struct MmaM16n8k32B {
  int n_dim = -1;  // the array dimension that picks the n tile
  TileIndex n{};

  template <class A, class T>
  __host__ __device__ constexpr MmaM16n8k32B fit() const {
    return MmaM16n8k32B{n_dim, detail::fit_index<A, T>(n_dim)};
  }
  __device__ Coord operator()(int i) const {
    const int e = i % 8;
    const int lane = lane_id();
    return Coord{-1, 8 * n.at(i) + lane / 4, (lane % 4) * 4 + e % 4 + 16 * (e / 4)};
  }
};
// Coordinates of mma.sync .m16n8k8 register fragments, as the PTX ISA lays them out
// ("Matrix Fragments for mma.m16n8k8"): m in [0, 16), n in [0, 8), k in [0, 8). The
// accumulator is laid out as m16n8k16's (MmaM16n8k16C).
// 16-bit inputs (f16, bf16). A (4 values per tile in two 32-bit registers): element
// e = i % 4 is on row groupID for e < 2 and groupID + 8 otherwise, at k = (lane % 4) *
// 2 + e % 2.
struct MmaM16n8k8A {
  int m_dim = -1;  // the array dimension that picks the m tile
  TileIndex m{};

  template <class A, class T>
  __host__ __device__ constexpr MmaM16n8k8A fit() const {
    return MmaM16n8k8A{m_dim, detail::fit_index<A, T>(m_dim)};
  }
  __device__ Coord operator()(int i) const {
    const int e = i % 4;
    const int lane = lane_id();
    return Coord{16 * m.at(i) + lane / 4 + 8 * (e / 2), -1, (lane % 4) * 2 + e % 2};
  }
};
// 16-bit B (2 values per n8 tile in one 32-bit register): element e = i % 2 is on
// column n = groupID, at k = (lane % 4) * 2 + e.
struct MmaM16n8k8B {
  int n_dim = -1;  // the array dimension that picks the n tile
  TileIndex n{};

  template <class A, class T>
  __host__ __device__ constexpr MmaM16n8k8B fit() const {
    return MmaM16n8k8B{n_dim, detail::fit_index<A, T>(n_dim)};
  }
  __device__ Coord operator()(int i) const {
    const int e = i % 2;
    const int lane = lane_id();
    return Coord{-1, 8 * n.at(i) + lane / 4, (lane % 4) * 2 + e};
  }
};
// tf32 inputs, one value a 32-bit register. A (4 values per tile): element e = i % 4
// is on row groupID for even e and groupID + 8 for odd e, at k = lane % 4 + 4 * (e / 2).
struct MmaM16n8k8Tf32A {
  int m_dim = -1;  // the array dimension that picks the m tile
  TileIndex m{};

  template <class A, class T>
  __host__ __device__ constexpr MmaM16n8k8Tf32A fit() const {
    return MmaM16n8k8Tf32A{m_dim, detail::fit_index<A, T>(m_dim)};
  }
  __device__ Coord operator()(int i) const {
    const int e = i % 4;
    const int lane = lane_id();
    return Coord{16 * m.at(i) + lane / 4 + 8 * (e % 2), -1, lane % 4 + 4 * (e / 2)};
  }
};
// tf32 B (2 values per n8 tile): element e = i % 2 is on column n = groupID, at k =
// lane % 4 + 4 * e.
struct MmaM16n8k8Tf32B {
  int n_dim = -1;  // the array dimension that picks the n tile
  TileIndex n{};

  template <class A, class T>
  __host__ __device__ constexpr MmaM16n8k8Tf32B fit() const {
    return MmaM16n8k8Tf32B{n_dim, detail::fit_index<A, T>(n_dim)};
  }
  __device__ Coord operator()(int i) const {
    const int e = i % 2;
    const int lane = lane_id();
    return Coord{-1, 8 * n.at(i) + lane / 4, lane % 4 + 4 * e};
  }
};
// C/D (f32; 4 values per tile): element e = i % 4 is on row groupID for e < 2 and
// groupID + 8 otherwise, at n = (lane % 4) * 2 + e % 2.
struct MmaM16n8k16C {
  int m_dim = -1;  // the array dimensions that pick the m and the n tile
  int n_dim = -1;
  TileIndex m{};
  TileIndex n{};

  template <class A, class T>
  __host__ __device__ constexpr MmaM16n8k16C fit() const {
    return MmaM16n8k16C{m_dim, n_dim, detail::fit_index<A, T>(m_dim),
                        detail::fit_index<A, T>(n_dim)};
  }
  __device__ Coord operator()(int i) const {
    const int e = i % 4;
    const int lane = lane_id();
    return Coord{16 * m.at(i) + lane / 4 + 8 * (e / 2), 8 * n.at(i) + (lane % 4) * 2 + e % 2,
                 -1};
  }
};

namespace detail {
// A coordinate function fitted to the array type A read as T, when it has fit().
template <class C, class A, class T, class = void>
struct has_fit : std::false_type {};
template <class C, class A, class T>
struct has_fit<C, A, T, std::void_t<decltype(std::declval<C>().template fit<A, T>())>>
    : std::true_type {};
template <class A, class T, class C>
__host__ __device__ constexpr auto fitted(const C& coord) {
  if constexpr (has_fit<C, A, T>::value) {
    return coord.template fit<A, T>();
  } else {
    return coord;
  }
}
}  // namespace detail

// How the consumer warpgroups of a CTA divide a pipeline stage tile between them, as
// kwb-instrument reads it from the MMA's operand pointers (probe_stage's last
// argument). WholeStage (the default): each warpgroup reads from its pointer to the
// stage's end. OwnPart: the pointer's offset in the stage is set from the thread's
// index (`tile_a = sA + stage * S + ((threadIdx.x / 128 - 1) * 64) * BK`); `offset(t)`
// is that offset for thread t, and the warpgroup reads from its pointer to the next
// warpgroup's offset (its own rows). SplitPart: the pointer is the same for every
// warpgroup while the partner operand's pointer (`offset`, in a stage of `stride`
// elements) is set per warpgroup: the consumers all read this tile whole, so each reads
// one part of it (a screen interleaves the parts' 16-byte chunks by rank, a record
// reads a contiguous part). Only a warpgroup that runs the MMA calls the probe, so a
// split leaves a part unread when a consumer by the offsets skips the MMA while its
// partners run it; kwb-instrument says so where it emits one.
struct WholeStage {};
template <class F>
struct OwnPart {
  F offset;
};
template <class F>
struct SplitPart {
  F offset;
  long long stride;
};
template <class F>
__device__ __forceinline__ OwnPart<F> own_part(F offset) {
  return OwnPart<F>{offset};
}
template <class F>
__device__ __forceinline__ SplitPart<F> split_part(F offset, long long stride) {
  return SplitPart<F>{offset, stride};
}

namespace detail {
// The value model: how a probe reads a value of any type as numbers.
//
// A number is a value the tally reads through to_float: an arithmetic type, __half,
// __nv_bfloat16, or any type static_cast<float> accepts (CUTLASS's half_t and
// bfloat16_t, the fp8 scalars __nv_fp8_e4m3 and __nv_fp8_e5m2, fp4 and fp6). Everything
// else is read as the numbers it holds, in memory order:
//   - a C array of any rank, element by element;
//   - a CUDA vector type or a struct of the same shape (members x, y[, z[, w]]:
//     float2, float4, int4, __half2, __nv_bfloat162, ...), member by member;
//   - a packed fp8 pair or quad (__nv_fp8x2_*, __nv_fp8x4_*), through its conversion
//     to float2 or float4;
//   - a fragment with a storage array `x` (nvcuda::wmma::fragment), its storage;
//   - a fragment of static size kElements read with x[i] (cutlass::Array);
//   - a CuTe register tensor of static size (size(x) found by argument-dependent
//     lookup, read with x(i));
// and each of those element by element through this same model, so arrays of
// fragments and fragments of pairs are read too. values<X>::count is how many numbers
// a value of X holds (0: none kwb can read) and values<X>::at(x, i) is number i.
// `direct` says whether each top-level element is one number, so that coordinates the
// instrumenter gives by element index still apply.
template <class X, class = void>
struct float_convertible : std::false_type {};
template <class X>
struct float_convertible<X, std::void_t<decltype(static_cast<float>(std::declval<const X&>()))>>
    : std::true_type {};
template <class X>
inline constexpr bool is_number =
    std::is_arithmetic<X>::value || float_convertible<X>::value
#ifdef KWB_TRACE
    || std::is_same<X, __half>::value || std::is_same<X, __nv_bfloat16>::value
#endif
    ;

template <class X, class = void>
struct has_xy : std::false_type {};
template <class X>
struct has_xy<X, std::void_t<decltype(std::declval<const X&>().x),
                             decltype(std::declval<const X&>().y)>> : std::true_type {};
template <class X, class = void>
struct has_z : std::false_type {};
template <class X>
struct has_z<X, std::void_t<decltype(std::declval<const X&>().z)>> : std::true_type {};
template <class X, class = void>
struct has_w : std::false_type {};
template <class X>
struct has_w<X, std::void_t<decltype(std::declval<const X&>().w)>> : std::true_type {};
template <class X, class = void>
struct has_storage_array : std::false_type {};
template <class X>
struct has_storage_array<X, std::enable_if_t<std::is_array<decltype(X::x)>::value>>
    : std::true_type {};
template <class X, class = void>
struct has_k_elements : std::false_type {};
template <class X>
struct has_k_elements<X, std::void_t<decltype(X::kElements),
                                     decltype(std::declval<const X&>()[0])>> : std::true_type {};
template <class X, class = void>
struct has_static_size : std::false_type {};
template <class X>
struct has_static_size<
    X, std::void_t<decltype(decltype(size(std::declval<const X&>()))::value),
                   decltype(std::declval<const X&>()(0))>> : std::true_type {};
template <class X, class = void>
struct to_float2 : std::false_type {};
template <class X>
struct to_float2<X, std::void_t<decltype(static_cast<float2>(std::declval<const X&>()))>>
    : std::true_type {};
template <class X, class = void>
struct to_float4 : std::false_type {};
template <class X>
struct to_float4<X, std::void_t<decltype(static_cast<float4>(std::declval<const X&>()))>>
    : std::true_type {};

// How values<X> reads X: the first shape that fits, in this order.
enum class Shape { none, number, array, vector, packed2, packed4, storage, elements, tensor };
template <class X>
constexpr Shape shape_of() {
  if constexpr (is_number<X>) {
    return Shape::number;
  } else if constexpr (std::is_array<X>::value) {
    return Shape::array;
  } else if constexpr (has_xy<X>::value) {
    return Shape::vector;
  } else if constexpr (to_float4<X>::value) {
    return Shape::packed4;
  } else if constexpr (to_float2<X>::value) {
    return Shape::packed2;
  } else if constexpr (has_storage_array<X>::value) {
    return Shape::storage;
  } else if constexpr (has_k_elements<X>::value) {
    return Shape::elements;
  } else if constexpr (has_static_size<X>::value) {
    return Shape::tensor;
  } else {
    return Shape::none;
  }
}

template <class X, Shape S = shape_of<X>()>
struct values {
  static constexpr int count = 0;
  static constexpr bool direct = false;
};
template <class X>
struct values<X, Shape::number> {
  static constexpr int count = 1;
  static constexpr bool direct = true;
  __device__ __forceinline__ static const X& at(const X& x, int) { return x; }
};
// `n` elements of type E, each holding values<E>::count numbers.
template <class E, int n>
struct repeated {
  static constexpr int each = values<std::remove_cv_t<E>>::count;
  static constexpr int count = each > 0 ? n * each : 0;
  static constexpr bool direct = each == 1;
};
template <class X>
struct values<X, Shape::array> : repeated<std::remove_extent_t<X>, std::extent<X>::value> {
  using E = std::remove_cv_t<std::remove_extent_t<X>>;
  __device__ __forceinline__ static decltype(auto) at(const X& x, int i) {
    constexpr int each = values<E>::count;
    return values<E>::at(x[i / each], i % each);
  }
};
template <class X>
inline constexpr int vector_width = has_w<X>::value ? 4 : has_z<X>::value ? 3 : 2;
template <class X>
struct values<X, Shape::vector>
    : repeated<std::decay_t<decltype(std::declval<const X&>().x)>, vector_width<X>> {
  using E = std::decay_t<decltype(std::declval<const X&>().x)>;
  __device__ __forceinline__ static decltype(auto) at(const X& x, int i) {
    constexpr int each = values<E>::count;
    const int member = i / each;
    if constexpr (vector_width<X> == 4) {
      return values<E>::at(member == 0 ? x.x : member == 1 ? x.y : member == 2 ? x.z : x.w,
                           i % each);
    } else if constexpr (vector_width<X> == 3) {
      return values<E>::at(member == 0 ? x.x : member == 1 ? x.y : x.z, i % each);
    } else {
      return values<E>::at(member == 0 ? x.x : x.y, i % each);
    }
  }
};
template <class X>
struct values<X, Shape::packed2> {
  static constexpr int count = 2;
  static constexpr bool direct = false;
  __device__ __forceinline__ static float at(const X& x, int i) {
    const float2 f = static_cast<float2>(x);
    return i == 0 ? f.x : f.y;
  }
};
template <class X>
struct values<X, Shape::packed4> {
  static constexpr int count = 4;
  static constexpr bool direct = false;
  __device__ __forceinline__ static float at(const X& x, int i) {
    const float4 f = static_cast<float4>(x);
    return i == 0 ? f.x : i == 1 ? f.y : i == 2 ? f.z : f.w;
  }
};
template <class X>
struct values<X, Shape::storage> : values<std::remove_cv_t<decltype(X::x)>> {
  __device__ __forceinline__ static decltype(auto) at(const X& x, int i) {
    return values<std::remove_cv_t<decltype(X::x)>>::at(x.x, i);
  }
};
template <class X>
struct values<X, Shape::elements>
    : repeated<std::decay_t<decltype(std::declval<const X&>()[0])>, static_cast<int>(X::kElements)> {
  using E = std::decay_t<decltype(std::declval<const X&>()[0])>;
  __device__ __forceinline__ static decltype(auto) at(const X& x, int i) {
    constexpr int each = values<E>::count;
    if constexpr (each == 1) {
      return x[i];  // by value, as a proxy reference of a packed array reads
    } else {
      return values<E>::at(x[i / each], i % each);
    }
  }
};
template <class X>
struct values<X, Shape::tensor>
    : repeated<std::decay_t<decltype(std::declval<const X&>()(0))>,
               static_cast<int>(decltype(size(std::declval<const X&>()))::value)> {
  using E = std::decay_t<decltype(std::declval<const X&>()(0))>;
  __device__ __forceinline__ static decltype(auto) at(const X& x, int i) {
    constexpr int each = values<E>::count;
    if constexpr (each == 1) {
      return x(i);
    } else {
      return values<E>::at(x(i / each), i % each);
    }
  }
};
}  // namespace detail

namespace detail {
// Defined below: names the type X for site `site` as not probed (trace builds).
template <class X>
__device__ __noinline__ void not_probed(uint32_t site);
}  // namespace detail

namespace detail {
// The CUDA 16-bit type whose bits a 16-bit number type holds, so a tile of a library's
// own half or bfloat16 (CUTLASS's half_t, bfloat16_t) is tallied in packed pairs as
// __half or __nv_bfloat16 are: told apart by std::numeric_limits<T>::digits, which
// those libraries specialize. Any other type is itself.
template <class T, class = void>
struct same_bits {
  using type = T;
};
#if defined(KWB_TRACE) && !defined(__CUDACC_RTC__)
template <class T>
struct same_bits<T, std::enable_if_t<sizeof(T) == 2 && !std::is_arithmetic<T>::value &&
                                     std::numeric_limits<T>::is_specialized>> {
  // IEEE counts the implicit bit (11 and 8); CUTLASS counts the stored ones (10, 7).
  static constexpr int digits = std::numeric_limits<T>::digits;
  using type = std::conditional_t<
      digits == 11 || digits == 10, __half,
      std::conditional_t<digits == 8 || digits == 7, __nv_bfloat16, T>>;
};
#endif
// `value`'s bits as a B of the same size (a CUTLASS half_t as a __half).
template <class B, class E>
__device__ __forceinline__ B rebits(const E& value) {
  static_assert(sizeof(B) == sizeof(E), "rebits keeps the size");
  B out;
  __builtin_memcpy(&out, &value, sizeof out);
  return out;
}
}  // namespace detail

// How many numbers a value of X holds as a probe reads it (0: none it can read).
template <class X>
inline constexpr int value_count = detail::values<std::remove_cv_t<X>>::count;

#ifdef KWB_TRACE

#ifdef KWB_TRACE_SUMMARY
// One stripe of one summary row as the probes add into it (device memory only: the
// flush folds a row's stripes into a SummaryEntry). A call costs two reductions in the
// common case (the peak and the count; the rest only when non-zero), and concurrent
// warps spread over the stripes: reductions to one address queue at one L2 slice, and
// every CTA's warps reach the same rows at about the same time. Nothing in a call
// waits for memory.
struct alignas(64) SummaryCell {
  unsigned long long peak;      // max of (bits of absmax) << 32 | linear CTA id
  unsigned long long count;     // values counted + calls << summary_call_shift
  unsigned long long filtered;  // values looked at but left out by the row filter
  unsigned long long nans;
  unsigned long long infs;
  uint32_t bad;                 // max of ~(linear CTA id) over calls that counted a NaN
                                // or an Inf (the lowest such CTA); 0: none
  uint32_t unused;
  uint32_t kind;                // the site's kind and tag: every call stores them (a
  uint32_t tag;                 // store nothing waits for, where a check would wait)
  uint32_t unused2[2];
};
static_assert(sizeof(SummaryCell) == 64, "a summary cell is 64 bytes");
// `count` holds the values in its low 40 bits and the calls above them (modulo 2^24).
inline constexpr int summary_call_shift = 40;
// The table's cells: stripe-major, then site, then K-tile row, so the cells of one
// line (two) are two K tiles of one stripe, which concurrent warps do not share.
inline constexpr long long summary_cells = static_cast<long long>(KWB_TRACE_SUMMARY_SITES) *
                                           KWB_TRACE_SUMMARY_K_TILES *
                                           KWB_TRACE_SUMMARY_STRIPES;
#endif

// The trace buffer (device global memory) and the filter (constant memory).
#ifdef KWB_TRACE_EXTERN
extern __device__ __align__(32) Record trace_records[KWB_TRACE_CAPACITY];
extern __device__ __align__(128) unsigned long long trace_cursor[KWB_TRACE_SHARDS * cursor_words];
extern __constant__ Filter trace_filter;
#ifdef KWB_TRACE_FULL
extern __device__ TileValue trace_tile_values[KWB_TRACE_TILE_CAPACITY];
extern __device__ unsigned long long trace_tile_cursor;
extern __device__ unsigned long long trace_tile_dropped;
#endif
#ifdef KWB_TRACE_SUMMARY
extern __device__ SummaryCell trace_summary[summary_cells];
extern __device__ unsigned long long trace_summary_dropped;
extern __device__ uint4 trace_summary_grid;
#endif
#else
// 32-byte aligned: a record (224 bytes) is then seven whole 32-byte sectors, written in
// 16-byte stores.
__device__ __align__(32) Record trace_records[KWB_TRACE_CAPACITY];
// Per shard: the records claimed so far. Past the shard's capacity they were dropped;
// no other counter is kept, so a probe of a full buffer costs no atomic on a hot
// address (every warp of every CTA counting drops on one word serialized them).
__device__ __align__(128) unsigned long long trace_cursor[KWB_TRACE_SHARDS * cursor_words];
#ifdef KWB_TRACE_FULL
__device__ TileValue trace_tile_values[KWB_TRACE_TILE_CAPACITY];
__device__ unsigned long long trace_tile_cursor;   // next free value
__device__ unsigned long long trace_tile_dropped;  // values not written: buffer full
#endif
#ifdef KWB_TRACE_SUMMARY
__device__ SummaryCell trace_summary[summary_cells];
__device__ unsigned long long trace_summary_dropped;  // calls of sites past the table
// The grid (x, y, z, 1 once written): stored at each call of one admitted CTA's warps,
// so the flush can decode linear CTA ids.
__device__ uint4 trace_summary_grid;
#endif
__constant__ Filter trace_filter = {KWB_TRACE_CTA_X,   KWB_TRACE_CTA_Y, KWB_TRACE_CTA_Z,
                                    KWB_TRACE_K_BEGIN, KWB_TRACE_K_END, 1u};
#endif
// Per site id below KWB_TRACE_SUMMARY_SITES: the name of the type a probe of it could
// not read (detail::not_probed), null for the others.
#ifdef KWB_TRACE_EXTERN
extern __device__ const char* trace_unprobed[KWB_TRACE_SUMMARY_SITES];
#else
__device__ const char* trace_unprobed[KWB_TRACE_SUMMARY_SITES];
#endif
#ifdef KWB_TRACE_MAPPED
// The device address of the mapped host records (null until mapped: device memory).
__device__ Record* trace_records_mapped;
#endif

namespace detail {
// Where records go: the mapped host buffer once there is one, else device memory.
__device__ __forceinline__ Record* records() {
#ifdef KWB_TRACE_MAPPED
  Record* mapped = trace_records_mapped;
  return mapped != nullptr ? mapped : trace_records;
#else
  return trace_records;
#endif
}
}  // namespace detail

namespace detail {

// What a probe call says about itself.
struct Probe {
  uint32_t site;
  Kind kind;
  uint32_t tag;
  int k_tile;
  int tile_m;
  int tile_n;
  int row_bound;
  Axis row_axis;
  Fold* fold;  // where a screen folds the call (SiteArg::fold); null: into the cell
};

// A record slot asked for and not yet waited for: the warp's active lanes and the
// leader's claim. Only this lives across a probe's scan of its values, so a probe in a
// mainloop costs the kernel as few registers as it can.
struct Claim {
  unsigned mask;                // active lanes
  unsigned shard;               // the warp's shard
  int lane;                     // the calling thread's lane
  unsigned long long claimed;  // the leader's: its first record's index in the shard
                               // (past the shard's capacity: dropped). With leases it
                               // is ready when claim() returns; without, it is the
                               // cursor's atomicAdd, read only by land(): reading it
                               // earlier stalls the warp for the atomic's whole round
                               // trip
};

// The landed record and the warp's shape at the probe.
struct Slot {
  Record* record;
  unsigned mask;   // active lanes
  unsigned below;  // lanes below this one
  int lane;
  int leader;      // lowest active lane: claimed and writes the record
};

// One lane's running statistics; `taken` (values sampled so far) is warp-uniform.
struct Stats {
  float absmax;
  float vmin;
  float vmax;
  unsigned seen;
  unsigned counted;
  unsigned nans;
  unsigned infs;
  unsigned taken;
  unsigned total;  // warp-uniform: after a quick tally, the warp's count of values (all
                   // seen, all counted, none NaN or Inf); ~0u: add up the lanes' counts
};

template <class T>
__device__ __forceinline__ float to_float(const T& v) {
  return static_cast<float>(v);
}
__device__ __forceinline__ float to_float(const __half& v) { return __half2float(v); }
__device__ __forceinline__ float to_float(const __nv_bfloat16& v) {
  return __bfloat162float(v);
}

__device__ __forceinline__ int row_of(const Coord& c, Axis axis) {
  return axis == Axis::M ? c.m : axis == Axis::N ? c.n : c.k;
}

// A float's bits as an unsigned that orders like the float (negative below positive),
// so warp maxima of keys give float minima and maxima.
__device__ __forceinline__ unsigned order_key(float v) {
  const unsigned bits = __float_as_uint(v);
  return (bits & 0x80000000u) != 0u ? ~bits : bits | 0x80000000u;
}
__device__ __forceinline__ unsigned from_order_key_bits(unsigned key) {
  return (key & 0x80000000u) != 0u ? key & 0x7fffffffu : ~key;
}

// The 16-bit value whose bits are `bits` (a bf16 or half out of a packed word).
template <class T>
__device__ __forceinline__ T bits_as(unsigned short bits) {
  static_assert(sizeof(T) == sizeof(bits), "bits_as reads 16-bit types");
  T value;
  __builtin_memcpy(&value, &bits, sizeof bits);
  return value;
}

// The bits of a 16-bit value (a bf16 or half), as the low half of an unsigned.
template <class T>
__device__ __forceinline__ unsigned bits_of(const T& value) {
  static_assert(sizeof(T) == 2, "bits_of reads 16-bit types");
  unsigned short bits;
  __builtin_memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Warp sums and maxima over any set of active lanes.
__device__ __forceinline__ unsigned warp_sum(unsigned mask, unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_add_sync(mask, v);
#else
  unsigned total = 0;
  for (unsigned rest = mask; rest != 0; rest &= rest - 1) {
    total += __shfl_sync(mask, v, __ffs(rest) - 1);
  }
  return total;
#endif
}

__device__ __forceinline__ unsigned warp_max(unsigned mask, unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_max_sync(mask, v);
#else
  unsigned best = 0;
  for (unsigned rest = mask; rest != 0; rest &= rest - 1) {
    const unsigned other = __shfl_sync(mask, v, __ffs(rest) - 1);
    best = other > best ? other : best;
  }
  return best;
#endif
}

// Whether the filter lets a probe at `k_tile` record, from the calling CTA.
__device__ __forceinline__ bool admitted(int k_tile) {
  const Filter& f = trace_filter;
  if (f.on == 0u) return false;
  if (f.cta_x >= 0 && blockIdx.x != static_cast<unsigned>(f.cta_x)) return false;
  if (f.cta_y >= 0 && blockIdx.y != static_cast<unsigned>(f.cta_y)) return false;
  if (f.cta_z >= 0 && blockIdx.z != static_cast<unsigned>(f.cta_z)) return false;
  if (k_tile >= 0 && (k_tile < f.k_begin || k_tile >= f.k_end)) return false;
  return true;
}

// The calling warp's shard: spreads the claims of concurrent warps over many cursors.
// `warp` is the warp's index in its CTA (warp_id()).
__device__ __forceinline__ unsigned shard_of_warp(unsigned warp) {
  const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned warps = (blockDim.x * blockDim.y * blockDim.z + 31u) / 32u;
  return (cta * warps + warp) % static_cast<unsigned>(KWB_TRACE_SHARDS);
}

// The records a shard holds; its slots are [shard * per_shard, (shard + 1) * per_shard).
inline constexpr unsigned long long per_shard = KWB_TRACE_CAPACITY / KWB_TRACE_SHARDS;

// A warp's reserved run of record slots, [next, end) of its shard, kept in shared
// memory between its probes: the warp's next claims take slots from it with no atomic
// and no wait. Shared memory starts a CTA with whatever an earlier one left there, so
// a lease is the warp's only while its `owner` is the one the warp computes now
// (owner_now: the grid launch and this CTA, hashed); any other is stale and never taken
// from, so a lease never outlives its launch, and a reset between launches cannot leave
// one pointing at slots the emptied cursor hands out again. Only a converged warp (all
// 32 lanes) uses its lease, so no two claims race on it. A lease ends at its shard's
// end at the latest; one of a full shard has next == end == lease_full, and its claims
// drop their records without an atomic.
struct alignas(16) Lease {
  uint32_t owner;
  uint32_t next;
  uint32_t end;
  uint32_t grant;  // the slots it reserved; the warp's next lease reserves twice as many
};
static_assert(sizeof(Lease) == 16, "a lease is one 16-byte shared-memory access");
inline constexpr uint32_t lease_full = 0xffffffffu;
// The leases of one CTA, one per warp (a CTA has at most 32). They take 1 KiB, a whole
// multiple of the 1024-byte alignment a 128-byte swizzle needs, so the dynamic shared
// memory placed after them keeps the alignment it had without them (CUTLASS's
// descriptors assume it).
inline constexpr int lease_slots = 64;
static_assert(sizeof(Lease) * lease_slots == 1024, "the leases take exactly 1 KiB");

// The CTA's leases. Reached through this reference (never a generic pointer), so the
// compiler addresses them as shared memory directly.
__device__ __forceinline__ Lease (&leases())[lease_slots] {
  __shared__ __align__(1024) Lease table[lease_slots];
  return table;
}

// Who owns a lease written now: the grid launch (%gridid, the PTX ISA's temporal launch
// number, distinct for each launch in a context) and this CTA, hashed to 32 bits. Never
// 0, the owner in cleared shared memory.
__device__ __forceinline__ uint32_t owner_now() {
  unsigned long long grid;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
  const uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  uint32_t h = static_cast<uint32_t>(grid) * 0x9e3779b1u ^ static_cast<uint32_t>(grid >> 32);
  h = (h ^ cta * 0x85ebca77u) * 0x27d4eb2fu;
  return (h ^ (h >> 15)) | 1u;
}

// Counts the records of a claim at `claimed` (`records` of them) that fall past the
// shard's end in the shard's drop count: a reduction nothing waits for.
__device__ __forceinline__ void count_drops(unsigned shard, unsigned long long claimed,
                                            unsigned records) {
  const unsigned long long last = claimed + records;
  if (last > per_shard) {
    const unsigned long long from = claimed > per_shard ? claimed : per_shard;
    atomicAdd(&trace_cursor[shard * cursor_words + 1], last - from);
  }
}

// Asks for `records` consecutive record slots of the warp's shard (probe_as_pair: one
// claim for two probes); the leader asks. A converged warp takes them from its lease
// when it holds enough: a shared-memory load and store, no wait. When it holds fewer,
// the leader reserves a new lease on the shard's cursor (`records`, then twice the
// last lease's grant, up to KWB_TRACE_LEASE) with one atomicAdd and waits for it; that
// is rare, and everything a land() must do then stays here, so land() costs the
// common claim nothing. A refill leaves what the old lease still held unwritten. A
// warp that is not converged adds its records to the cursor and waits too. Drops (a
// record past the shard's end) are counted here.
// With KWB_TRACE_LEASE 0 there are no leases: the leader's atomicAdd is read first by
// land(), so its round trip overlaps whatever the probe does in between, and the
// cursor counts every record claimed, so what passes the shard's end is the drops.
// A summary build claims nothing: its probes add into the summary table instead.
__device__ __forceinline__ Claim claim(unsigned records = 1u) {
  if constexpr (summary) {
    (void)records;
    return Claim{__activemask(), 0u, lane_id(), 0ull};
  } else {
    const unsigned warp = static_cast<unsigned>(warp_id());
    Claim c{__activemask(), shard_of_warp(warp), lane_id(), 0ull};
    if (c.lane != __ffs(c.mask) - 1) return c;
    if constexpr (lease_records == 0) {
      c.claimed = atomicAdd(&trace_cursor[c.shard * cursor_words], records);
    } else if (c.mask != 0xffffffffu) {
      c.claimed = atomicAdd(&trace_cursor[c.shard * cursor_words], records);
      count_drops(c.shard, c.claimed, records);
    } else {
      Lease& lease = leases()[warp];
      const Lease held = lease;
      const uint32_t owner = owner_now();
      const bool mine = held.owner == owner && held.grant <= lease_records;
      const bool full = held.next == lease_full && held.end == lease_full;
      const unsigned left = held.end - held.next;
      // A full lease holds nothing (next == end), so only a refill or a drop can take it.
      if (mine && left >= records && left <= lease_records) {
        c.claimed = held.next;
        lease.next = held.next + records;
      } else if (mine && full) {
        c.claimed = per_shard;
        count_drops(c.shard, c.claimed, records);
      } else {
        unsigned grant = mine ? 2u * held.grant : records;
        grant = grant > lease_records ? lease_records : grant;
        grant = grant < records ? records : grant;  // a claim larger than a lease is its own
        c.claimed = atomicAdd(&trace_cursor[c.shard * cursor_words], grant);
        count_drops(c.shard, c.claimed, records);
        Lease fresh{owner, lease_full, lease_full, grant};
        if (c.claimed + records < per_shard) {
          const unsigned long long end = c.claimed + grant;
          fresh.next = static_cast<uint32_t>(c.claimed) + records;
          fresh.end = static_cast<uint32_t>(end < per_shard ? end : per_shard);
        }
        lease = fresh;
      }
    }
    return c;
  }
}

// Waits for record `offset` of the claim. False when the shard is full: claim() counted
// the drop (with KWB_TRACE_LEASE 0 the cursor's count past the shard's end is it).
__device__ __forceinline__ bool land(const Claim& c, Slot& slot, unsigned offset = 0u) {
  slot.mask = c.mask;
  slot.lane = c.lane;
  slot.below = (1u << slot.lane) - 1u;
  slot.leader = __ffs(c.mask) - 1;
  if constexpr (summary) {
    // Nothing to land: write() adds into the summary table.
    slot.record = nullptr;
    return true;
  }
  const unsigned long long claimed = c.claimed + offset;
  const bool kept = claimed < per_shard;
  const unsigned mine =
      kept ? c.shard * static_cast<unsigned>(per_shard) + static_cast<unsigned>(claimed) : ~0u;
  const unsigned index = __shfl_sync(c.mask, mine, slot.leader);
  if (index == ~0u) return false;
  slot.record = &records()[index];
  return true;
}

// Elements per lane that may be sampled into the record's value slots: the sampling
// (a ballot per element) stops after them, so a fragment of N values costs N cheap
// tallies and at most this many ballots, and the unrolled code stays small.
inline constexpr int sample_elements = 8;

// Independent running statistics per lane in the quick tally: dependency chains a
// quarter as long, so a probe is bound by issue, not by latency.
inline constexpr int quick_ways = 4;
// The same for tiles, where loads dominate and registers are scarcer (a probe in a
// mainloop must not cost the kernel its occupancy).
inline constexpr int tile_ways = 2;

// The largest finite float: |v| <= it is false exactly for NaN and +-Inf.
inline constexpr float finite_max = 3.402823466e38f;

// Fresh statistics: nothing seen, minimum +Inf, maximum -Inf.
__device__ __forceinline__ Stats fresh_stats() {
  return Stats{0.0f, __int_as_float(0x7f800000), __int_as_float(0xff800000), 0u, 0u, 0u, 0u, 0u,
               ~0u};
}

// Counts one value of this lane into the statistics: the full tally, with the row
// filter and the NaN and Inf counts.
__device__ __forceinline__ void tally(Stats& s, bool valid, bool pass, float v) {
  s.seen += valid ? 1u : 0u;
  if (pass) {
    s.counted += 1u;
    const float magnitude = fabsf(v);
    const bool nan = v != v;
    const bool inf = magnitude == __int_as_float(0x7f800000);
    s.nans += nan ? 1u : 0u;
    s.infs += inf ? 1u : 0u;
    if (!nan && !inf) {
      s.absmax = fmaxf(s.absmax, magnitude);
      s.vmin = fminf(s.vmin, v);
      s.vmax = fmaxf(s.vmax, v);
    }
  }
}

// The quick tally, for values that all count (no row filter). Per value, two
// instructions: a running minimum that ignores NaN and a running maximum that
// propagates it (PTX max.NaN); with KWB_TRACE_MINMAX 0, one: the running maximum of
// |v| that propagates NaN (the |v| folded into the instruction). It is exact only while
// every value is finite: a NaN or an Inf shows in `hi` or `lo`, and then the probe reads
// its values again through the full tally.
struct Quick {
  float lo;  // the smallest value (+Inf: none; KWB_TRACE_MINMAX 0: unused, +Inf)
  float hi;  // the largest value (-Inf: none), or with KWB_TRACE_MINMAX 0 the largest
             // |v| (0: none); NaN when a value was NaN
};

__device__ __forceinline__ Quick fresh_quick() {
  return Quick{__int_as_float(0x7f800000),
               KWB_TRACE_MINMAX != 0 ? __int_as_float(0xff800000) : 0.0f};
}

// max(a, v), NaN when either is NaN.
__device__ __forceinline__ float max_nan(float a, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float out;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(out) : "f"(a), "f"(v));
  return out;
#else
  return (a != a || v != v) ? __int_as_float(0x7fffffff) : fmaxf(a, v);
#endif
}

__device__ __forceinline__ void quick(Quick& q, float v) {
  if constexpr (KWB_TRACE_MINMAX != 0) {
    q.lo = fminf(q.lo, v);
    q.hi = max_nan(q.hi, v);
  } else {
    q.hi = max_nan(q.hi, fabsf(v));
  }
}

__device__ __forceinline__ Quick merged(const Quick& a, const Quick& b) {
  return Quick{fminf(a.lo, b.lo), max_nan(a.hi, b.hi)};
}

// The ways of a quick tally combined.
template <int W>
__device__ __forceinline__ Quick merged(const Quick (&q)[W]) {
  Quick all = q[0];
#pragma unroll
  for (int w = 1; w < W; ++w) all = merged(all, q[w]);
  return all;
}

// Whether a quick tally saw a NaN or an Inf.
__device__ __forceinline__ bool poisoned(const Quick& q) {
  return !(q.hi <= finite_max) || !(q.lo >= -finite_max);
}

// Pairs of 16-bit values (bf16 or half) tallied two at a time, packed in 32-bit words
// as the registers and shared tiles hold them: min and max.NaN on both halves in one
// instruction each (sm_80 and newer), no conversion to float until the end. Minimum
// and maximum of 16-bit values are 16-bit values, so this is exact.
template <class T>
struct Pairs {
  unsigned lo;  // both halves' running minimum (KWB_TRACE_MINMAX 0: unused)
  unsigned hi;  // both halves' running maximum (or of |v|), NaN-propagating
};

template <class T>
inline constexpr bool is_bf16 = std::is_same<T, __nv_bfloat16>::value;
template <class T>
inline constexpr bool is_half = std::is_same<T, __half>::value;

// Whether values of T can be tallied in pairs here.
template <class T>
inline constexpr bool pairs_tally =
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    is_bf16<T> || is_half<T>;
#else
    false;
#endif

template <class T>
__device__ __forceinline__ Pairs<T> fresh_pairs() {
  // +Inf and -Inf (or 0) in both halves.
  constexpr unsigned pos_inf = is_bf16<T> ? 0x7f807f80u : 0x7c007c00u;
  constexpr unsigned neg_inf = is_bf16<T> ? 0xff80ff80u : 0xfc00fc00u;
  return Pairs<T>{pos_inf, KWB_TRACE_MINMAX != 0 ? neg_inf : 0u};
}

// Both halves' minimum (NaN ignored; `Max` false) or NaN-propagating maximum (`Max`
// true) of two packed words of T: one instruction on sm_80 and newer, where pairs are
// tallied (`pairs_tally`).
template <class T, bool Max>
__device__ __forceinline__ unsigned pair_extreme(unsigned x, unsigned y) {
  unsigned out = x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (Max && is_bf16<T>) {
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(out) : "r"(x), "r"(y));
  } else if constexpr (Max) {
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(out) : "r"(x), "r"(y));
  } else if constexpr (is_bf16<T>) {
    asm("min.bf16x2 %0, %1, %2;" : "=r"(out) : "r"(x), "r"(y));
  } else {
    asm("min.f16x2 %0, %1, %2;" : "=r"(out) : "r"(x), "r"(y));
  }
#else
  (void)y;
#endif
  return out;
}
template <class T>
__device__ __forceinline__ unsigned pair_min(unsigned x, unsigned y) {
  return pair_extreme<T, false>(x, y);
}
template <class T>
__device__ __forceinline__ unsigned pair_max_nan(unsigned x, unsigned y) {
  return pair_extreme<T, true>(x, y);
}

// Both halves' NaN-propagating max(|x|, |y|) of two packed words of T, in their
// magnitude bits: the sign bits are the XOR of the inputs' (max.xorsign.abs), so they
// mean nothing and only unpaired() reads the word, with them cleared. One instruction
// (sm_86 and newer) where `word & 0x7fff7fff` and a max took two.
template <class T>
__device__ __forceinline__ unsigned pair_absmax_nan(unsigned x, unsigned y) {
  unsigned out = x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 860
  if constexpr (is_bf16<T>) {
    asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(out) : "r"(x), "r"(y));
  } else {
    asm("max.NaN.xorsign.abs.f16x2 %0, %1, %2;" : "=r"(out) : "r"(x), "r"(y));
  }
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  out = pair_max_nan<T>(x & 0x7fff7fffu, y & 0x7fff7fffu);
#else
  (void)y;
#endif
  return out;
}

// The packed |v| tally (pair_absmax_nan's word) of one 16-byte chunk of T, four words.
template <class T>
__device__ __forceinline__ unsigned chunk_absmax(const unsigned (&v)[4]) {
  return pair_absmax_nan<T>(pair_absmax_nan<T>(v[0], v[1]), pair_absmax_nan<T>(v[2], v[3]));
}

// KWB_TRACE_MINMAX 0 keeps |v| (pair_absmax_nan) in `hi`, its sign bits meaningless.
template <class T>
__device__ __forceinline__ void quick_pair(Pairs<T>& q, unsigned word) {
  if constexpr (KWB_TRACE_MINMAX != 0) {
    q.lo = pair_min<T>(q.lo, word);
    q.hi = pair_max_nan<T>(q.hi, word);
  } else {
    q.hi = pair_absmax_nan<T>(q.hi, word);
  }
}

// Two pairs tallies as one: both halves' minimum and NaN-propagating maximum (of |v|
// with KWB_TRACE_MINMAX 0).
template <class T>
__device__ __forceinline__ Pairs<T> merged_pairs(Pairs<T> a, const Pairs<T>& b) {
  if constexpr (KWB_TRACE_MINMAX != 0) {
    a.lo = pair_min<T>(a.lo, b.lo);
    a.hi = pair_max_nan<T>(a.hi, b.hi);
  } else {
    a.hi = pair_absmax_nan<T>(a.hi, b.hi);
  }
  return a;
}

// The float quick tally of a pairs tally.
template <class T>
__device__ __forceinline__ Quick unpaired(const Pairs<T>& q) {
  const auto half = [](unsigned word, int i) {
    return to_float(bits_as<T>(static_cast<unsigned short>(i == 0 ? word & 0xffffu : word >> 16)));
  };
  // With KWB_TRACE_MINMAX 0, hi's sign bits are pair_absmax_nan's: cleared.
  const unsigned hi = KWB_TRACE_MINMAX != 0 ? q.hi : q.hi & 0x7fff7fffu;
  return Quick{fminf(half(q.lo, 0), half(q.lo, 1)), max_nan(half(hi, 0), half(hi, 1))};
}

// unpaired(q), cheaper for a tally of bf16 |v| (KWB_TRACE_MINMAX 0, whose `hi` is the
// larger half): a bf16 is the top half of the float it stands for, so the larger
// magnitude is the larger of the two halves moved up, as integers (non-negative floats
// order as their bits; a NaN or Inf half, 0x7f80 and above, stays at or above +Inf's
// bits): three instructions where unpaired() converts both halves.
template <class T>
__device__ __forceinline__ Quick absmax_of(const Pairs<T>& q) {
  if constexpr (is_bf16<T> && KWB_TRACE_MINMAX == 0) {
    const unsigned low = (q.hi << 16) & 0x7fff0000u, high = q.hi & 0x7fff0000u;
    return Quick{__int_as_float(0x7f800000), __uint_as_float(low > high ? low : high)};
  } else {
    return unpaired(q);
  }
}

// The float bits of the larger |v| of a word of two packed values of T whose sign bits
// mean nothing (pair_absmax_nan's): absmax_of() for bf16, the halves converted for
// half. At or above +Inf's bits (0x7f800000) exactly when a half is NaN or Inf.
template <class T>
__device__ __forceinline__ unsigned pairs_peak(unsigned word) {
  return __float_as_uint(absmax_of(Pairs<T>{0u, word}).hi);
}

// The statistics of `n` finite values that all counted, from their quick tally;
// minimum and maximum are NaN (not recorded) when KWB_TRACE_MINMAX is 0. `total` is
// the warp's count of them (warp-uniform), so finish() need not add the lanes' counts.
__device__ __forceinline__ void settle(Stats& s, const Quick& q, unsigned n, unsigned total) {
  s.seen = n;
  s.counted = n;
  s.nans = 0u;
  s.infs = 0u;
  s.total = total;
  if constexpr (KWB_TRACE_MINMAX != 0) {
    s.vmin = q.lo;
    s.vmax = q.hi;
    // max |v| = max(-min, max); 0 when the lane has none (lo +Inf, hi -Inf).
    s.absmax = fmaxf(0.0f, fmaxf(-q.lo, q.hi));
  } else {
    s.vmin = __int_as_float(0x7fffffff);
    s.vmax = __int_as_float(0x7fffffff);
    s.absmax = q.hi;
  }
}

// Samples one value of this lane into the record's first free slot. Every active lane
// calls it the same number of times, so the ballot is uniform.
__device__ __forceinline__ void sample(Stats& s, const Slot& slot, bool pass, float v,
                                       const Coord& c) {
  if (static_cast<int>(s.taken) >= KWB_TRACE_VALUES) return;
  const unsigned ballot = __ballot_sync(slot.mask, pass);
  const unsigned pos = s.taken + __popc(ballot & slot.below);
  if (pass && static_cast<int>(pos) < KWB_TRACE_VALUES) {
    slot.record->values[pos] = v;
    slot.record->value_m[pos] = c.m;
    slot.record->value_n[pos] = c.n;
    slot.record->value_k[pos] = c.k;
  }
  s.taken += __popc(ballot);
}

// Four 32-bit words as one 16-byte store.
__device__ __forceinline__ void store4(void* at, unsigned a, unsigned b, unsigned c,
                                       unsigned d) {
  *static_cast<uint4*>(at) = make_uint4(a, b, c, d);
}

// A record without samples (KWB_TRACE_VALUES 0: the all-CTA screen) is known whole to
// every lane once the warp's totals are: the warp writes it in one coalesced 224-byte
// store (each of the first 14 active lanes one 16-byte chunk, seven full sectors)
// instead of 13 single-lane stores of the leader. Not with KWB_TRACE_MAPPED, whose
// records must land body first, header last.
#if KWB_TRACE_VALUES == 0 && !defined(KWB_TRACE_MAPPED)
inline constexpr bool whole_records = true;
#else
inline constexpr bool whole_records = false;
#endif

// Marks every value slot of the landed record empty (value 0, coordinates -1): the
// leader's 16-byte stores, ordered before the lanes' samples by __syncwarp. A whole
// record's write does it.
__device__ __forceinline__ void clear_slots(const Slot& slot) {
  if constexpr (whole_records || summary) return;
  if (slot.lane == slot.leader) {
    unsigned* words = reinterpret_cast<unsigned*>(slot.record->values);
#pragma unroll
    for (int i = 0; i < 4 * record_values; i += 4) {
      const unsigned empty = i < record_values ? 0u : 0xffffffffu;
      store4(words + i, empty, empty, empty, empty);
    }
  }
  __syncwarp(slot.mask);
}

// Samples when every value counts, without a ballot: active lane r (r below the
// slots and `count`) writes value(r) into slot r. Clears the slots first only when
// some stay empty (a partial warp, a short tile, fewer value slots).
template <class ValueFn, class CoordFn>
__device__ __forceinline__ void sample_each(Stats& s, const Slot& slot, int count,
                                            ValueFn&& value, CoordFn&& coord) {
  const int stride = __popc(slot.mask);
  const int rank = __popc(slot.mask & slot.below);
  const int taken = stride < count ? stride : count;
  if (taken < KWB_TRACE_VALUES || KWB_TRACE_VALUES < record_values) clear_slots(slot);
  if constexpr (KWB_TRACE_VALUES > 0) {
    if (rank < KWB_TRACE_VALUES && rank < count) {
      const Coord c = coord(rank);
      slot.record->values[rank] = value(rank);
      slot.record->value_m[rank] = c.m;
      slot.record->value_n[rank] = c.n;
      slot.record->value_k[rank] = c.k;
    }
  }
  s.taken = static_cast<unsigned>(taken);
}

// Full tiles (KWB_TRACE_FULL): every value a probe looks at, with its coordinates.
// The leader reserves the warp's values in one atomicAdd; when they do not fit, they
// are counted as dropped and the reserved places below the capacity are marked
// unused (record ~0u), so the host never reads a value that was not written.
template <class ValueFn, class CoordFn>
__device__ __forceinline__ void keep_values(const Slot& slot, unsigned total, int per_lane,
                                            bool lane_major, ValueFn&& value,
                                            CoordFn&& coord) {
#ifdef KWB_TRACE_FULL
  unsigned long long base = 0;
  if (slot.lane == slot.leader) {
    base = atomicAdd(&trace_tile_cursor, static_cast<unsigned long long>(total));
    if (base + total > static_cast<unsigned long long>(KWB_TRACE_TILE_CAPACITY)) {
      atomicAdd(&trace_tile_dropped, static_cast<unsigned long long>(total));
    }
  }
  base = __shfl_sync(slot.mask, base, slot.leader);
  const bool fits = base + total <= static_cast<unsigned long long>(KWB_TRACE_TILE_CAPACITY);
  const unsigned record = static_cast<unsigned>(slot.record - records());
  const int stride = __popc(slot.mask);
  const int rank = __popc(slot.mask & slot.below);
  // Fragments: lane rank holds elements rank * per_lane + i. Tiles: lanes stride over
  // the `total` elements.
  const int count = lane_major ? per_lane : static_cast<int>((total + stride - 1 - rank) / stride);
  for (int j = 0; j < count; ++j) {
    const unsigned element =
        lane_major ? static_cast<unsigned>(rank * per_lane + j) : static_cast<unsigned>(rank + j * stride);
    if (!lane_major && element >= total) break;
    const unsigned long long at = base + element;
    if (at >= static_cast<unsigned long long>(KWB_TRACE_TILE_CAPACITY)) break;
    const int i = lane_major ? j : static_cast<int>(element);
    if (fits) {
      const Coord c = coord(i);
      trace_tile_values[at] = TileValue{record, element, to_float(value(i)), c.m, c.n, c.k};
    } else {
      trace_tile_values[at] = TileValue{~0u, element, 0.0f, -1, -1, -1};
    }
  }
#else
  (void)slot, (void)total, (void)per_lane, (void)lane_major, (void)value, (void)coord;
#endif
}

// A probe's statistics reduced over the warp (every lane holds them).
struct Totals {
  unsigned absmax;
  unsigned vmin;  // order key
  unsigned vmax;  // order key
  unsigned seen;
  unsigned counted;
  unsigned nans;
  unsigned infs;
};

// Reduces the statistics over the warp's active lanes `mask`.
__device__ __forceinline__ Totals totals(unsigned mask, const Stats& s) {
  Totals t{warp_max(mask, __float_as_uint(s.absmax)), ~warp_max(mask, ~order_key(s.vmin)),
           warp_max(mask, order_key(s.vmax)), s.total, s.total, 0u, 0u};
  if (s.total == ~0u) {
    t.seen = warp_sum(mask, s.seen);
    t.counted = warp_sum(mask, s.counted);
    t.nans = warp_sum(mask, s.nans);
    t.infs = warp_sum(mask, s.infs);
  }
  return t;
}

#ifdef KWB_TRACE_SUMMARY
// The summary's stand-in for writing a record: the warp's totals added into the row of
// (site, K tile), in the stripe of the warp (its global index modulo the stripes).
// Each of the first eight active lanes does one thing, with reductions whose results
// nothing waits for (RED, not ATOM): the peak and the count, and only when non-zero
// the filtered, NaN and Inf counts and the first bad CTA; and a store of the site's
// kind and tag.
// `calls`: the probe calls these totals hold (a screen's fold passes 0: it counts
// values, not calls).
__device__ __forceinline__ void summarize(const Slot& slot, const Totals& t, const Probe& p,
                                          unsigned calls = 1u) {
  const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int rank = __popc(slot.mask & slot.below);
  if (p.site >= static_cast<uint32_t>(KWB_TRACE_SUMMARY_SITES)) {
    if (rank == 0) atomicAdd(&trace_summary_dropped, 1ull);
    __syncwarp(slot.mask);
    return;
  }
  constexpr int rows = KWB_TRACE_SUMMARY_K_TILES;
  const int row = p.k_tile < 0 ? 0 : p.k_tile < rows - 2 ? p.k_tile + 1 : rows - 1;
  const unsigned warps = (blockDim.x * blockDim.y * blockDim.z + 31u) / 32u;
  const unsigned stripe = (cta * warps + static_cast<unsigned>(warp_id())) %
                          static_cast<unsigned>(KWB_TRACE_SUMMARY_STRIPES);
  SummaryCell& cell =
      trace_summary[(static_cast<long long>(stripe) * KWB_TRACE_SUMMARY_SITES + p.site) * rows +
                    row];
  const Filter& f = trace_filter;
  // Any warp of one CTA the filter admits: in a warp-specialized kernel warp 0 may be
  // a producer that never reaches a probe.
  const bool anchor = blockIdx.x == static_cast<unsigned>(f.cta_x < 0 ? 0 : f.cta_x) &&
                      blockIdx.y == static_cast<unsigned>(f.cta_y < 0 ? 0 : f.cta_y) &&
                      blockIdx.z == static_cast<unsigned>(f.cta_z < 0 ? 0 : f.cta_z);
  const int active = __popc(slot.mask);
  for (int w = rank; w < 8; w += active) {
    // Words 1..4 of the cell: count (with the call), filtered, nans, infs.
    unsigned long long add =
        (static_cast<unsigned long long>(calls) << summary_call_shift) | t.counted;
    add = w == 2 ? t.seen - t.counted : add;
    add = w == 3 ? t.nans : add;
    add = w == 4 ? t.infs : add;
    if (w >= 1 && w <= 4 && add != 0ull) atomicAdd(&cell.count + (w - 1), add);
    if (w == 0) {
      atomicMax(&cell.peak, (static_cast<unsigned long long>(t.absmax) << 32) | cta);
    }
    if (w == 5 && (t.nans | t.infs) != 0u) atomicMax(&cell.bad, ~cta);
    if (w == 6) {
      *reinterpret_cast<uint2*>(&cell.kind) = make_uint2(static_cast<unsigned>(p.kind), p.tag);
    }
    if (w == 7 && anchor) trace_summary_grid = make_uint4(gridDim.x, gridDim.y, gridDim.z, 1u);
  }
  // The lanes part ways above: meet again, so the warp reaches its next probe whole.
  __syncwarp(slot.mask);
}
#else
__device__ __forceinline__ void summarize(const Slot&, const Totals&, const Probe&,
                                          unsigned = 1u) {}
#endif

// A small fragment's values, passed by value to the out-of-line probe.
template <class T, int N>
struct SmallValues {
  T v[N];
};

// Whether poisoned_fragment takes N values of T: trivially copyable, in whole words.
template <class T, int N>
inline constexpr bool poisonable =
    std::is_trivially_copyable<T>::value && (sizeof(T) * N) % 4 == 0;

#ifdef KWB_TRACE_SCREEN
// Folds `Count` calls of one warp (each site's probe p[i], the warp's largest |v|
// peak[i], all finite, and its total[i] values) into the warp's cells of their sites
// (one row: K tiles fold), one thing for each of 3 * Count + 1 lanes and nothing that
// waits: each site's peak, its count with the call, its kind and tag, and (one CTA)
// the grid. Fewer active lanes, or a site past the table, go through summarize().
template <int Count>
__device__ __forceinline__ void fold_screen(const Slot& slot, const Probe (&p)[Count],
                                            const unsigned (&peak)[Count],
                                            const unsigned (&total)[Count]) {
  bool inside = true;
#pragma unroll
  for (int i = 0; i < Count; ++i) {
    inside = inside && p[i].site < static_cast<uint32_t>(KWB_TRACE_SUMMARY_SITES);
  }
  if (__popc(slot.mask) < 3 * Count + 1 || !inside) {
#pragma unroll
    for (int i = 0; i < Count; ++i) {
      summarize(slot, Totals{peak[i], 0u, 0u, total[i], total[i], 0u, 0u}, p[i]);
    }
    return;
  }
  const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned warps = (blockDim.x * blockDim.y * blockDim.z + 31u) / 32u;
  const unsigned stripe = (cta * warps + static_cast<unsigned>(warp_id())) %
                          static_cast<unsigned>(KWB_TRACE_SUMMARY_STRIPES);
  SummaryCell* cells = &trace_summary[static_cast<long long>(stripe) * KWB_TRACE_SUMMARY_SITES];
  const int rank = __popc(slot.mask & slot.below);
  const int i = rank / 3 < Count ? rank / 3 : Count - 1;
  // Picked by selects, not indexed: the arrays stay in registers.
  uint32_t site = p[0].site, kind = static_cast<uint32_t>(p[0].kind), tag = p[0].tag;
  unsigned mine = peak[0], values = total[0];
#pragma unroll
  for (int c = 1; c < Count; ++c) {
    site = i == c ? p[c].site : site;
    kind = i == c ? static_cast<uint32_t>(p[c].kind) : kind;
    tag = i == c ? p[c].tag : tag;
    mine = i == c ? peak[c] : mine;
    values = i == c ? total[c] : values;
  }
  SummaryCell& cell = cells[site];
  const int role = rank < 3 * Count ? rank - 3 * i : 3;
  const Filter& f = trace_filter;
  const bool anchor = blockIdx.x == static_cast<unsigned>(f.cta_x < 0 ? 0 : f.cta_x) &&
                      blockIdx.y == static_cast<unsigned>(f.cta_y < 0 ? 0 : f.cta_y) &&
                      blockIdx.z == static_cast<unsigned>(f.cta_z < 0 ? 0 : f.cta_z);
  // Four independent tests, each guarding one memory instruction (predicated, where an
  // if-else chain on the lane compiles to an indirect branch).
  if (role == 0) atomicMax(&cell.peak, (static_cast<unsigned long long>(mine) << 32) | cta);
  if (role == 1) atomicAdd(&cell.count, (1ull << summary_call_shift) | values);
  if (role == 2) *reinterpret_cast<uint2*>(&cell.kind) = make_uint2(kind, tag);
  if (rank == 3 * Count && anchor) {
    trace_summary_grid = make_uint4(gridDim.x, gridDim.y, gridDim.z, 1u);
  }
  __syncwarp(slot.mask);
}

// A screen's call whose values all count (no row filter), from their quick tally
// `all` (KWB_TRACE_MINMAX 0: `all.hi` is the lane's largest |v|, NaN or Inf exactly
// when one of its values is): one reduction over the warp, of that word, and the
// warp's `total` values folded into its cell. True when done; false when the warp saw
// a NaN or an Inf, and the caller counts them through the full tally.
__device__ __forceinline__ bool screened(const Claim& claimed, unsigned offset, const Probe& p,
                                         const Quick& all, unsigned total) {
  static_assert(KWB_TRACE_MINMAX == 0, "a screen's quick tally is of |v|");
  const unsigned peak = warp_max(claimed.mask, __float_as_uint(all.hi));
  if (peak >= 0x7f800000u) return false;
  Slot slot;
  land(claimed, slot, offset);
  fold_screen<1>(slot, {p}, {peak}, {total});
  return true;
}

// screened() for the two operands of one MMA (probe_as_pair): one fold for both. False
// when either saw a NaN or an Inf; nothing is folded then.
__device__ __forceinline__ bool screened_pair(const Claim& claimed, const Probe& a,
                                              const Probe& b, const Quick& qa, const Quick& qb,
                                              unsigned total_a, unsigned total_b) {
  const unsigned peak_a = warp_max(claimed.mask, __float_as_uint(qa.hi));
  const unsigned peak_b = warp_max(claimed.mask, __float_as_uint(qb.hi));
  if ((peak_a > peak_b ? peak_a : peak_b) >= 0x7f800000u) return false;
  Slot slot;
  land(claimed, slot, 0u);
  fold_screen<2>(slot, {a, b}, {peak_a, peak_b}, {total_a, total_b});
  return true;
}

// The exact statistics of a lane's N values value(0..N), every one counting. Where
// they are whole 32-bit words (`poisonable`), each word of a copy of them passes
// through an empty volatile asm first, so the compiler cannot hoist this rare path's
// work (unpacking 16-bit halves) above the check into the common call, as it does with
// the plain values.
template <int N, class ValueFn>
__device__ __forceinline__ Stats lane_exact(ValueFn&& value) {
  using T = std::decay_t<decltype(value(0))>;
  Stats s = fresh_stats();
  if constexpr (poisonable<T, N>) {
    SmallValues<T, N> values;
#pragma unroll
    for (int i = 0; i < N; ++i) values.v[i] = value(i);
    unsigned* words = reinterpret_cast<unsigned*>(&values);
#pragma unroll
    for (int w = 0; w < static_cast<int>(sizeof(values) / 4); ++w) {
      asm volatile("" : "+r"(words[w]));
    }
#pragma unroll
    for (int i = 0; i < N; ++i) tally(s, true, true, to_float(values.v[i]));
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) tally(s, true, true, to_float(value(i)));
  }
  return s;
}

// A screen's fragment whose warp saw a NaN or an Inf (screened() was false): its N
// values value(0..N) counted exactly (lane_exact) and summarized. Every value counts.
// Only for fragments of whole 32-bit words (`poisonable`).
template <int N, class ValueFn>
__device__ __forceinline__ void poisoned_fragment(const Probe& p, ValueFn&& value,
                                                  const Claim& claimed, unsigned offset) {
  static_assert(poisonable<std::decay_t<decltype(value(0))>, N>,
                "fragments hold whole 32-bit words");
  const Stats s = lane_exact<N>(value);
  Slot slot;
  land(claimed, slot, offset);
  summarize(slot, totals(claimed.mask, s), p);
}

// `n` values whose largest |v| has the float bits `peak`, all finite, into p's fold.
__device__ __forceinline__ void fold_finite(const Probe& p, unsigned peak, unsigned n) {
  Fold& f = *p.fold;
  f.peak = f.peak > peak ? f.peak : peak;
  f.values += n;
}

// A screen's call with a fold (p.fold, kwb::Fold): the lane's quick tally `all` of its
// `n` values goes into the fold's registers. False when one of the lane's values was
// NaN or Inf: the caller then counts the lane's values exactly, through fold_exact().
// Nothing here reduces over the warp or touches memory.
__device__ __forceinline__ bool fold_quick(const Probe& p, const Quick& all, unsigned n) {
  const unsigned h = __float_as_uint(all.hi);
  if (h >= 0x7f800000u) return false;
  fold_finite(p, h, n);
  return true;
}

// The warp's cell of `site` in the screen (one row per site, a stripe per warp of the
// grid); null for a site past the table (the fold counts it as dropped).
__device__ __forceinline__ SummaryCell* screen_cell(uint32_t site) {
  if (site >= static_cast<uint32_t>(KWB_TRACE_SUMMARY_SITES)) return nullptr;
  const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned warps = (blockDim.x * blockDim.y * blockDim.z + 31u) / 32u;
  const unsigned stripe = (cta * warps + static_cast<unsigned>(warp_id())) %
                          static_cast<unsigned>(KWB_TRACE_SUMMARY_STRIPES);
  return &trace_summary[static_cast<long long>(stripe) * KWB_TRACE_SUMMARY_SITES + site];
}

// One lane's exact statistics `s` of a call (a row-filtered call, or one whose quick
// tally saw a NaN or an Inf) into p's fold; its NaN and Inf counts, and its CTA as one
// that saw them, go straight into the warp's cell (atomics of this lane alone: the lanes
// of a call need not agree on whether they take this path).
__device__ __forceinline__ void fold_exact(const Probe& p, const Stats& s) {
  Fold& f = *p.fold;
  const unsigned a = __float_as_uint(s.absmax);
  f.peak = f.peak > a ? f.peak : a;
  f.values += s.counted;
  // A call without a row filter counts every value it sees (seen == counted). Testing
  // for the filter lets the compiler drop `filtered` where no call can filter (a
  // shared tile's), which saves the fold a register.
  if (p.row_bound != all_rows) f.filtered += s.seen - s.counted;
  if ((s.nans | s.infs) == 0u) return;
  SummaryCell* cell = screen_cell(p.site);
  if (cell == nullptr) return;
  const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (s.nans != 0u) atomicAdd(&cell->nans, static_cast<unsigned long long>(s.nans));
  if (s.infs != 0u) atomicAdd(&cell->infs, static_cast<unsigned long long>(s.infs));
  atomicMax(&cell->bad, ~cta);
}


// A lane's quick tally `all` of its N values value(0..N) into p's fold, and the values
// again, exactly, when one was NaN or Inf.
template <int N, class ValueFn>
__device__ __forceinline__ void fold_fragment(const Probe& p, const Quick& all,
                                              ValueFn&& value) {
  if (!fold_quick(p, all, static_cast<unsigned>(N))) fold_exact(p, lane_exact<N>(value));
}
#else
// Not a screen: never called (every call is behind `if constexpr (screen)`).
__device__ __forceinline__ bool screened(const Claim&, unsigned, const Probe&, const Quick&,
                                         unsigned) {
  return false;
}
__device__ __forceinline__ bool screened_pair(const Claim&, const Probe&, const Probe&,
                                              const Quick&, const Quick&, unsigned, unsigned) {
  return false;
}
template <int N, class ValueFn>
__device__ __forceinline__ void poisoned_fragment(const Probe&, ValueFn&&, const Claim&,
                                                  unsigned) {}
__device__ __forceinline__ bool fold_quick(const Probe&, const Quick&, unsigned) { return true; }
__device__ __forceinline__ void fold_finite(const Probe&, unsigned, unsigned) {}
__device__ __forceinline__ void fold_exact(const Probe&, const Stats&) {}
template <int N, class ValueFn>
__device__ __forceinline__ void fold_fragment(const Probe&, const Quick&, ValueFn&&) {}
#endif

// The leader writes the record's fields in 16-byte stores (records are 16-byte
// aligned: 224 bytes each in a 16-byte aligned buffer), the header's first four
// words last.
__device__ __forceinline__ void write(const Slot& slot, const Totals& t, unsigned taken,
                                      const Probe& p) {
  if constexpr (summary) {
    summarize(slot, t, p);
    return;
  }
  if constexpr (whole_records) {
    // Every input is warp-uniform. Chunk c of the record goes out from the active lane
    // of rank c (mod the active lanes, for a partial warp), picked by selects, not a
    // branch per chunk: a lane-dependent branch would run the chunks one by one.
    (void)taken;
    const int active = __popc(slot.mask);
    const unsigned warp = static_cast<unsigned>(warp_id());
    const unsigned vmin = from_order_key_bits(t.vmin), vmax = from_order_key_bits(t.vmax);
    uint4* chunks = reinterpret_cast<uint4*>(slot.record);
    for (int c = __popc(slot.mask & slot.below); c < 14; c += active) {
      // Chunks 0..5 are the header; 6..7 the empty values (0), 8..13 their
      // coordinates (-1).
      const unsigned rest = c < 8 ? 0u : ~0u;
      const auto pick = [c, rest](unsigned c0, unsigned c1, unsigned c2, unsigned c3,
                                  unsigned c4, unsigned c5) {
        unsigned v = rest;
        v = c == 5 ? c5 : v;
        v = c == 4 ? c4 : v;
        v = c == 3 ? c3 : v;
        v = c == 2 ? c2 : v;
        v = c == 1 ? c1 : v;
        return c == 0 ? c0 : v;
      };
      chunks[c] = make_uint4(
          pick(record_magic, p.tag, warp, static_cast<unsigned>(p.tile_m), t.counted, t.nans),
          pick(version, blockIdx.x, static_cast<unsigned>(slot.leader),
               static_cast<unsigned>(p.tile_n), t.absmax, t.infs),
          pick(p.site, blockIdx.y, slot.mask, static_cast<unsigned>(p.row_bound), vmin, t.seen),
          pick(static_cast<unsigned>(p.kind), blockIdx.z, static_cast<unsigned>(p.k_tile),
               static_cast<unsigned>(p.row_axis), vmax, 0u));
    }
    return;
  }
  if (slot.lane != slot.leader) return;
  Record* r = slot.record;
  const unsigned filled = static_cast<int>(taken) < KWB_TRACE_VALUES ? taken : KWB_TRACE_VALUES;
  store4(&r->tag, p.tag, blockIdx.x, blockIdx.y, blockIdx.z);
  store4(&r->warp, static_cast<unsigned>(warp_id()), static_cast<unsigned>(slot.lane),
         slot.mask, static_cast<unsigned>(p.k_tile));
  store4(&r->tile_m, static_cast<unsigned>(p.tile_m), static_cast<unsigned>(p.tile_n),
         static_cast<unsigned>(p.row_bound), static_cast<unsigned>(p.row_axis));
  store4(&r->count, t.counted, t.absmax, from_order_key_bits(t.vmin),
         from_order_key_bits(t.vmax));
  store4(&r->nan_count, t.nans, t.infs, t.seen, filled);
#ifdef KWB_TRACE_MAPPED
  // Host memory: the body lands before the header that says it is complete.
  __threadfence_system();
#endif
  store4(&r->magic, record_magic, version, p.site, static_cast<unsigned>(p.kind));
}

// Reduces the statistics over the warp and writes the record.
__device__ __forceinline__ void finish(const Slot& slot, const Stats& s, const Probe& p) {
  write(slot, totals(slot.mask, s), s.taken, p);
}

// The quick tally of a lane's N values value(0..N), in `quick_ways` independent chains;
// 16-bit values two to a register.
template <int N, class ValueFn>
__device__ __forceinline__ Quick quick_fragment(ValueFn&& value) {
  using Element = std::decay_t<decltype(value(0))>;
  // Generic, so that it is instantiated only for 16-bit values.
  const auto word = [&](auto j) {
    return bits_of(value(2 * j)) | (bits_of(value(2 * j + 1)) << 16);
  };
  if constexpr (pairs_tally<Element> && N % 2 == 0) {
    // Values 2j and 2j + 1 are the halves of one 32-bit register.
    constexpr int ways = N / 2 < quick_ways ? N / 2 : quick_ways;
    Pairs<Element> q[ways];
#pragma unroll
    for (int w = 0; w < ways; ++w) q[w] = fresh_pairs<Element>();
#pragma unroll
    for (int j = 0; j < N / 2; ++j) quick_pair(q[j % ways], word(j));
    // The ways merge while still packed (two instructions a way), and only their
    // union is unpacked to floats.
#pragma unroll
    for (int w = 1; w < ways; ++w) q[0] = merged_pairs(q[0], q[w]);
    return unpaired(q[0]);
  } else {
    constexpr int ways = N < quick_ways ? N : quick_ways;
    Quick q[ways];
#pragma unroll
    for (int w = 0; w < ways; ++w) q[w] = fresh_quick();
#pragma unroll
    for (int i = 0; i < N; ++i) quick(q[i % ways], to_float(value(i)));
    return merged(q);
  }
}

// Values held per lane: each lane looks at value(i) for i in [0, N). N is a constant
// and the loops are unrolled, so register fragments stay in registers. Without a row
// filter the values go through the quick tally, and through the full one only when
// the warp saw a NaN or an Inf. The first elements are sampled last, once the slot
// has landed.
// The probe writes record `offset` of `claimed` (a claim made after admitted()).
template <int N, class ValueFn, class CoordFn>
__device__ __forceinline__ void fragment_claimed(const Probe& p, ValueFn&& value, CoordFn&& coord,
                                                 const Claim& claimed, unsigned offset) {
  const unsigned mask = claimed.mask;
  Stats s = fresh_stats();
  bool done = false;
  if (p.row_bound == all_rows) {
    using Element = std::decay_t<decltype(value(0))>;
    const Quick all = quick_fragment<N>(value);
    if constexpr (screen) {
      if (p.fold != nullptr) {
        fold_fragment<N>(p, all, value);
        return;
      }
      if (screened(claimed, offset, p, all, static_cast<unsigned>(N) * __popc(mask))) return;
      if constexpr (poisonable<Element, N>) {
        poisoned_fragment<N>(p, value, claimed, offset);
        return;
      }
    } else if (!__any_sync(mask, poisoned(all))) {
      settle(s, all, static_cast<unsigned>(N), static_cast<unsigned>(N) * __popc(mask));
      done = true;
    }
  }
  if (!done) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float v = to_float(value(i));
      tally(s, true, row_of(coord(i), p.row_axis) < p.row_bound, v);
    }
  }
  if constexpr (screen) {
    if (p.fold != nullptr) {
      // A row-filtered call: the lane's exact statistics into its fold.
      fold_exact(p, s);
      return;
    }
  }
  // Every value counts: the warp's totals and each lane's sample (its element 0, for
  // the first active lanes) need no record, so they are worked out while the claim's
  // atomic is still in flight.
  const bool early = p.row_bound == all_rows;
  Totals t{};
  float first = 0.0f;
  Coord at{-1, -1, -1};
  if (early) {
    t = totals(mask, s);
    first = to_float(value(0));
    at = coord(0);
  }
  Slot slot;
  if (!land(claimed, slot, offset)) return;
  if (early) {
    sample_each(s, slot, INT_MAX, [&](int) { return first; }, [&](int) { return at; });
  } else {
    clear_slots(slot);
    if constexpr (KWB_TRACE_VALUES > 0) {
#pragma unroll
      for (int i = 0; i < (N < sample_elements ? N : sample_elements); ++i) {
        const float v = to_float(value(i));
        const Coord c = coord(i);
        sample(s, slot, row_of(c, p.row_axis) < p.row_bound, v, c);
      }
    }
  }
#ifdef KWB_TRACE_FULL
  keep_values(slot, static_cast<unsigned>(N) * __popc(slot.mask), N, true, value, coord);
#endif
  write(slot, early ? t : totals(slot.mask, s), s.taken, p);
}

// At most this many values per lane make a small fragment (an epilogue's pair of
// outputs, a scalar): its probe is one out-of-line copy shared by every call site.
// Such probes sit in fully unrolled loops (an epilogue stores 64 pairs a warp), where
// inlined copies are tens of thousands of instructions the traced CTA runs once each,
// every one a miss in the instruction cache; one copy stays hot. The filter's check
// stays inline, so a CTA it leaves out makes no call.
inline constexpr int small_fragment_values = 8;

template <int N, class T, class CoordFn>
__device__ __noinline__ void small_fragment(Probe p, SmallValues<T, N> values, CoordFn coord) {
  fragment_claimed<N>(p, [&](int i) -> const T& { return values.v[i]; }, coord, claim(), 0u);
}

template <int N, class ValueFn, class CoordFn>
__device__ __forceinline__ void fragment(const Probe& p, ValueFn&& value, CoordFn&& coord) {
  if constexpr (screen) {
    // A screen's call with a fold and no row filter: the quick tally, register
    // arithmetic, comes before the filter is asked, so the compiler may schedule it
    // among the kernel's own instructions; behind the filter's branch it may not
    // (tma_wgmma_sm90's accumulator screen: 1.21x the kernel with the branch first,
    // 1.09x without it: docs/results/track-a-stage-reads.md, call 13).
    if (p.fold != nullptr && p.row_bound == all_rows) {
      const Quick all = quick_fragment<N>(value);
      if (admitted(p.k_tile)) fold_fragment<N>(p, all, value);
      return;
    }
  }
  if (!admitted(p.k_tile)) return;
  using Element = std::decay_t<decltype(value(0))>;
  using Coords = std::decay_t<CoordFn>;
  if constexpr (N <= small_fragment_values && std::is_trivially_copyable<Element>::value &&
                std::is_trivially_copyable<Coords>::value) {
    if constexpr (screen) {
      // A fold is a few register operations: inline, and its address must not escape
      // into the out-of-line call, or it would leave the registers.
      if (p.fold != nullptr) {
        fragment_claimed<N>(p, value, coord, claim(), 0u);
        return;
      }
    }
    SmallValues<Element, N> values;
#pragma unroll
    for (int i = 0; i < N; ++i) values.v[i] = value(i);
    small_fragment<N>(p, values, Coords(coord));
  } else {
    fragment_claimed<N>(p, value, coord, claim(), 0u);
  }
}

// The full tally of values shared by the warp: active lanes stride over value(i),
// i in [0, count).
template <class ValueFn, class CoordFn>
__device__ __forceinline__ void strided_full(Stats& s, const Slot& slot, const Probe& p,
                                             int count, ValueFn&& value, CoordFn&& coord) {
  const int stride = __popc(slot.mask);
  const int rank = __popc(slot.mask & slot.below);
#pragma unroll 8
  for (int i = rank; i < count; i += stride) {
    const float v = to_float(value(i));
    tally(s, true, row_of(coord(i), p.row_axis) < p.row_bound, v);
  }
}

// Samples the first values of a shared tile that pass the row filter, in index
// order: rounds of one value per active lane, a ballot each, until the slots are full
// or `sample_elements` rounds have gone by.
template <class ValueFn, class CoordFn>
__device__ __forceinline__ void sample_tile(Stats& s, const Slot& slot, const Probe& p,
                                            int count, ValueFn&& value, CoordFn&& coord) {
  if constexpr (KWB_TRACE_VALUES == 0) {
    clear_slots(slot);
  } else {
    const int stride = __popc(slot.mask);
    const int rank = __popc(slot.mask & slot.below);
    if (p.row_bound == all_rows) {
      // Every value counts: active lane r takes value r.
      sample_each(s, slot, count, [&](int i) { return to_float(value(i)); }, coord);
      return;
    }
    clear_slots(slot);
    int base = 0;
    for (int round = 0; round < sample_elements && base < count; ++round, base += stride) {
      const int i = base + rank;
      const bool valid = i < count;
      const float v = valid ? to_float(value(i)) : 0.0f;
      const Coord c = valid ? coord(i) : Coord{-1, -1, -1};
      sample(s, slot, valid && row_of(c, p.row_axis) < p.row_bound, v, c);
    }
  }
}

// Values shared by the warp: active lanes stride over value(i), i in [0, count). The
// slot is claimed before the scan and landed after it, so only the claim lives across
// the scan; the samples are taken once it has landed.
template <class ValueFn, class CoordFn>
__device__ __forceinline__ void strided(const Probe& p, int count, ValueFn&& value,
                                        CoordFn&& coord) {
  if (!admitted(p.k_tile)) return;
  const Claim claimed = claim();
  Quick all = fresh_quick();
  unsigned mine = 0;
  bool quick_ok = false;
  if (p.row_bound == all_rows) {
    const int stride = __popc(claimed.mask);
    const int rank = __popc(claimed.mask & ((1u << claimed.lane) - 1u));
    Quick q[tile_ways];
#pragma unroll
    for (int w = 0; w < tile_ways; ++w) q[w] = fresh_quick();
#pragma unroll 1
    for (int i = rank; i < count; i += tile_ways * stride) {
#pragma unroll
      for (int w = 0; w < tile_ways; ++w) {
        const int at = i + w * stride;
        if (at < count) {
          quick(q[w], to_float(value(at)));
          ++mine;
        }
      }
    }
    all = merged(q);
    if constexpr (screen) {
      if (p.fold != nullptr) {
        if (!fold_quick(p, all, mine)) {
          // The lane's own values again, exactly.
          Stats s = fresh_stats();
#pragma unroll 1
          for (int i = rank; i < count; i += stride) tally(s, true, true, to_float(value(i)));
          fold_exact(p, s);
        }
        return;
      }
      if (screened(claimed, 0u, p, all, static_cast<unsigned>(count))) return;
    } else {
      quick_ok = !__any_sync(claimed.mask, poisoned(all));
    }
  }
  Slot slot;
  if (!land(claimed, slot)) return;
  Stats s = fresh_stats();
  if constexpr (screen) {
    if (p.fold != nullptr) {
      // A row-filtered call: the lane's exact statistics into its fold.
      strided_full(s, slot, p, count, value, coord);
      fold_exact(p, s);
      return;
    }
  }
  sample_tile(s, slot, p, count, value, coord);
#ifdef KWB_TRACE_FULL
  keep_values(slot, static_cast<unsigned>(count), 0, false, value, coord);
#endif
  if (quick_ok) {
    settle(s, all, mine, static_cast<unsigned>(count));
  } else {
    strided_full(s, slot, p, count, value, coord);
  }
  finish(slot, s, p);
}

// A tile of 16-bit values (bf16, half) at a 16-byte aligned address, `count` a multiple
// of 8, all counting: lanes read 16-byte chunks (lane r chunks r, r + stride, ...) and
// tally eight values each, an eighth of the loads of the element-wise scan. Claimed
// before the scan and landed after it, as strided() is. `Shared`: the caller knows the
// tile is in shared memory (probe_shared_tile), so no __isShared query is issued.
template <bool Shared = false, class T, class CoordFn>
__device__ __forceinline__ void packed_tile(const Probe& p, const T* tile, int count,
                                            CoordFn&& coord) {
  static_assert(sizeof(T) == 2, "packed tiles hold 16-bit values");
  if (!admitted(p.k_tile)) return;
  const Claim claimed = claim();
  const int stride = __popc(claimed.mask);
  const int rank = __popc(claimed.mask & ((1u << claimed.lane) - 1u));
  const int n = count / 8;
  unsigned read = 0u;  // chunks this lane read
  // Eight values a chunk: four words, tallied in pairs where the target can.
  Quick q = fresh_quick();
  Pairs<T> pairs = fresh_pairs<T>();
  const auto tally8 = [&](unsigned x, unsigned y, unsigned z, unsigned w) {
    if constexpr (pairs_tally<T> && KWB_TRACE_MINMAX == 0) {
      // |v| as a tree (depth 3, not a chain of 4 on the running word).
      quick_pair(pairs, pair_absmax_nan<T>(pair_absmax_nan<T>(x, y), pair_absmax_nan<T>(z, w)));
      return;
    }
    const unsigned words[4] = {x, y, z, w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (pairs_tally<T>) {
        quick_pair(pairs, words[j]);
      } else {
        quick(q, to_float(bits_as<T>(static_cast<unsigned short>(words[j] & 0xffffu))));
        quick(q, to_float(bits_as<T>(static_cast<unsigned short>(words[j] >> 16))));
      }
    }
  };
  if (Shared || __isShared(tile)) {
    // A shared tile (the usual case; with `Shared` known, not asked): 32-bit shared
    // addresses, ld.shared.v4, two chunks in flight (a lane's loads are otherwise one
    // after another, each waited for; four in flight took tma_wgmma_sm90's every-kind
    // screen from 80 to 90 registers, past its two CTAs an SM, and its operand screen,
    // where they fit in 80, no faster: docs/results/track-a-shared-tiles.md, call 5).
    const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    const unsigned step = 16u * stride, end = base + 16u * n;
    const auto load = [](unsigned at, unsigned (&v)[4]) {
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                   : "r"(at));
    };
    unsigned at = base + 16u * rank;
#pragma unroll 1
    for (; at + step < end; at += 2u * step) {
      unsigned a[4], b[4];
      load(at, a);
      load(at + step, b);
      tally8(a[0], a[1], a[2], a[3]);
      tally8(b[0], b[1], b[2], b[3]);
      read += 2u;
    }
    if (at < end) {
      unsigned a[4];
      load(at, a);
      tally8(a[0], a[1], a[2], a[3]);
      ++read;
    }
  } else {
    const uint4* chunks = reinterpret_cast<const uint4*>(tile);
#pragma unroll 1
    for (int c = rank; c < n; c += stride) {
      const uint4 chunk = chunks[c];
      tally8(chunk.x, chunk.y, chunk.z, chunk.w);
      ++read;
    }
  }
  if constexpr (pairs_tally<T>) q = unpaired(pairs);
  const Quick all = q;
  if constexpr (screen) {
    if (p.fold != nullptr) {
      if (!fold_quick(p, all, 8u * read)) {
        // The lane's own chunks again, value by value, exactly.
        Stats s = fresh_stats();
#pragma unroll 1
        for (int c = rank; c < n; c += stride) {
#pragma unroll
          for (int j = 0; j < 8; ++j) tally(s, true, true, to_float(tile[8 * c + j]));
        }
        fold_exact(p, s);
      }
      return;
    }
    if (screened(claimed, 0u, p, all, static_cast<unsigned>(count))) return;
  }
  const bool quick_ok = !screen && !__any_sync(claimed.mask, poisoned(all));
  Slot slot;
  if (!land(claimed, slot)) return;
  Stats s = fresh_stats();
  const auto value = [&](int i) -> const T& { return tile[i]; };
  sample_tile(s, slot, p, count, value, coord);
#ifdef KWB_TRACE_FULL
  keep_values(slot, static_cast<unsigned>(count), 0, false, value, coord);
#endif
  if (quick_ok) {
    // Chunks this lane read: rank, rank + stride, ... below n.
    const int r = __popc(slot.mask & slot.below);
    settle(s, all, r < n ? 8u * static_cast<unsigned>((n - 1 - r) / stride + 1) : 0u,
           static_cast<unsigned>(count));
  } else {
    strided_full(s, slot, p, count, value, coord);
  }
  finish(slot, s, p);
}

// Whether probe_tile may read `tile` as packed 16-byte chunks.
template <class T>
__device__ __forceinline__ bool packs(const T* tile, int count, int row_bound) {
  return sizeof(T) == 2 && (reinterpret_cast<uintptr_t>(tile) % 16u) == 0u && count % 8 == 0 &&
         row_bound == all_rows;
}

// probe_tile's read: 16-bit values as packed chunks where they can be (packs), every
// other tile value by value. `Shared`: the tile is known to be in shared memory.
template <bool Shared, class T, class CoordFn>
__device__ __forceinline__ void read_tile(const Probe& p, const T* tile, int count,
                                          CoordFn&& coord) {
  if constexpr (sizeof(T) == 2) {
    if (packs(tile, count, p.row_bound)) {
      packed_tile<Shared>(p, tile, count, coord);
      return;
    }
  }
  strided(p, count, [&](int i) -> const T& { return tile[i]; }, coord);
}

// The number type an element of a tile is made of when its bytes are nothing but
// values<E>::count numbers of one type (a __nv_bfloat162 of two bf16, a float4 of four
// floats, a float[8]): then a tile of E is a tile of that number, read as fast; void
// for anything else.
template <class E, class = void>
struct packed_number {
  using type = void;
};
template <class E>
struct packed_number<E, std::enable_if_t<shape_of<E>() == Shape::vector ||
                                         shape_of<E>() == Shape::array>> {
  using Member = std::conditional_t<shape_of<E>() == Shape::array,
                                    std::remove_cv_t<std::remove_all_extents_t<E>>,
                                    std::decay_t<decltype(std::declval<const E&>().x)>>;
  using type = std::conditional_t<is_number<Member> &&
                                      sizeof(E) == sizeof(Member) * values<E>::count,
                                  Member, void>;
};

// probe_tile of a tile whose elements are not numbers: read as the numbers they pack
// (packed_number), or element by element through the value model, or not probed.
template <class E>
__device__ __forceinline__ void read_tile_model(const Probe& p, const E* tile, int count) {
  using Model = values<E>;
  using Number = typename packed_number<E>::type;
  if constexpr (!std::is_void<Number>::value) {
    read_tile<false>(p, reinterpret_cast<const Number*>(tile), count * Model::count, NoCoord{});
  } else if constexpr (Model::count > 0) {
    strided(p, count * Model::count,
            [&](int i) { return Model::at(tile[i / Model::count], i % Model::count); },
            NoCoord{});
  } else {
    not_probed<E>(p.site);
  }
}


// The threads of a warpgroup: an SS-mode MMA (wgmma) is issued by all of them at once.
inline constexpr unsigned warpgroup = 128u;
// Chunks a thread of a screen's stage read has in flight at once (2 x 16 bytes: 8
// registers; the loop is rolled, so a larger stage adds no register). Four took
// tma_wgmma_sm90's every-kind screen to 82 registers, past the 80 that keep two CTAs an
// SM (3.27x the kernel against 2.47x with two; its operand screen alone 2.00x against
// 2.10x: docs/results/track-a-stage-reads.md).
inline constexpr int stage_batch = 2;
// The most chunks a thread reads of a usual part (usual_tally), unrolled.
inline constexpr unsigned unrolled_chunks = 16u;

// A screen's read of a stage tile into its fold (p.fold), `count` 16-bit values from
// `base` (a shared address, 16-byte aligned, count % 8 == 0) shared out among the
// calling warpgroup's threads, and among `ranks` warpgroups when several read parts of
// one tile: thread t (of 128) of the warpgroup of rank r reads 16-byte chunks
// r * 128 + t, then every ranks * 128 on, and folds its quick tally into its
// registers. A thread's loads are issued `stage_batch` at a time and waited for
// together (a thread whose second chunk lies past the tile loads its first again,
// which leaves the maximum as it is and is not counted: a load predicated off would
// still be issued), its chunks walked by shared address, so a call costs a thread a
// few round trips to shared memory however large the stage. Nothing here
// touches global memory unless a value is NaN or Inf: then the thread counts its
// chunks again, value by value (fold_exact).
template <class T>
__device__ __forceinline__ void screen_stage(const Probe& p, unsigned base, int count, int rank,
                                             int ranks, unsigned t) {
  static_assert(stage_batch == 2, "the loop reads two chunks a round trip");
  // In bytes of shared memory (below 2^24: nothing wraps): the thread's chunks are
  // `step` apart from `at` up to `end`. A round trip whose second chunk is past `end`
  // loads its first again (same maximum, not counted).
  const unsigned n = static_cast<unsigned>(count) / 8u;
  const unsigned first = static_cast<unsigned>(rank) * warpgroup + t;
  const unsigned step = static_cast<unsigned>(ranks) * warpgroup;
  const unsigned end = base + 16u * n;
  Pairs<T> pairs = fresh_pairs<T>();
  unsigned read = 0u;
#pragma unroll 1
  for (unsigned at = base + 16u * first; at < end; at += 32u * step) {
    const unsigned next = at + 16u * step;
    const bool two = next < end;
    unsigned v[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[j][0]), "=r"(v[j][1]), "=r"(v[j][2]), "=r"(v[j][3])
                   : "r"(j == 0 || !two ? at : next));
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      quick_pair(pairs, chunk_absmax<T>(v[j]));
    }
    read += two ? 2u : 1u;
  }
  if (fold_quick(p, absmax_of(pairs), 8u * read)) return;
  // The thread's own chunks again, value by value, exactly.
  Stats s = fresh_stats();
#pragma unroll 1
  for (unsigned c = first; c < n; c += step) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      unsigned short bits;
      asm volatile("ld.shared.u16 %0, [%1];"
                   : "=h"(bits)
                   : "r"(base + 16u * static_cast<unsigned>(c) + 2u * static_cast<unsigned>(j)));
      tally(s, true, true, to_float(bits_as<T>(bits)));
    }
  }
  fold_exact(p, s);
}

// Warpgroups a CTA can hold (1024 threads).
inline constexpr unsigned max_warpgroups = 8u;

// The part of a stage tile a warpgroup reads: the `count` values from its pointer, or,
// with `ranks` > 1, the part of rank `rank` of them when `ranks` warpgroups share
// it out (a screen interleaves the ranks' chunks, a record reads a contiguous part).
// Worked out at every call, without branches: a value kept in registers across the
// mainloop would cost a wgmma kernel its occupancy (two CTAs an SM of tma_wgmma_sm90
// need at most 80), and every instruction a call adds is issue time the consumer
// warpgroups' wgmmas wait for (docs/BENCHMARKS.md, "The screen").
struct Span {
  int count;
  int rank;
  int ranks;
};

// Whole: the tile from the MMA's pointer to the end of its stage (`count` values).
__device__ __forceinline__ Span span_of(const WholeStage&, unsigned, int, int, int count) {
  return Span{count, 0, 1};
}

// Own rows: the calling warpgroup's (thread `tid`'s) operand rows, from its pointer (`at`
// elements into the stage, where offset() must put it) to the offset the next
// warpgroup would have when that lies above it in the stage, otherwise to the stage's
// end. (When no next warpgroup runs, no MMA reads past that offset either.) Every
// element from the lowest consumer's offset up to that is read by some consumer
// whatever order the offsets come in (the consumer with the highest offset at or below
// an element stops only at an offset above it). The whole tile when the
// pointer is not where offset() puts it or the CTA is not one-dimensional (the
// offsets were written with threadIdx.x).
template <class F>
__device__ __forceinline__ Span span_of(const OwnPart<F>& part, unsigned tid, int at, int size,
                                        int count) {
  const F& offset = part.offset;
  const unsigned me = tid / warpgroup;
  const long long mine = static_cast<long long>(offset(me * warpgroup));
  const long long next = static_cast<long long>(offset((me + 1u) * warpgroup));
  const bool flat = blockDim.y * blockDim.z == 1u;
  const int own = flat && mine == at && next > mine && next < size ? static_cast<int>(next - mine)
                                                                    : count;
  return Span{own < count ? own : count, 0, 1};
}

// Which warpgroups consume a stage, as an operand pointer's offset in its stage says:
// `offset(t)` is that offset (in elements) for thread t (threadIdx.x), so offset(128 w)
// is warpgroup w's. Bit w is set for a consumer, a warpgroup whose offset lies in the
// stage, [0, stride), whether the CTA has it or not. None (0) when the consumers'
// offsets do not rise with w (two would share rows: no partition). A constant where
// the offsets are (kwb-instrument's lambdas of the kernel's constants).
template <class F>
__device__ __forceinline__ unsigned stage_consumers(const F& offset, long long stride) {
  unsigned in_stage = 0u;
  long long last = -1;
  bool ordered = true;
#pragma unroll
  for (unsigned w = 0; w < max_warpgroups; ++w) {
    const long long o = static_cast<long long>(offset(w * warpgroup));
    if (o >= 0 && o < stride) {
      ordered = ordered && o > last;
      last = o;
      in_stage |= 1u << w;
    }
  }
  return ordered ? in_stage : 0u;
}
// The consumers the calling CTA has (stage_consumers masked by its warpgroups); none
// when the CTA is not one-dimensional (the offsets were written with threadIdx.x).
template <class F>
__device__ __forceinline__ unsigned consumer_mask(const F& offset, long long stride) {
  const unsigned groups = blockDim.x / warpgroup;
  const unsigned present = groups >= 32u ? ~0u : (1u << groups) - 1u;
  return blockDim.y * blockDim.z == 1u ? stage_consumers(offset, stride) & present : 0u;
}

// Split: an operand every consumer warpgroup reads whole (the partner operand's
// offsets, in its stage of part.stride elements, say which those are) is read once,
// shared out among the consumers by rank. The whole tile when the calling warpgroup
// is not a consumer, it is the only one, or the offsets do not partition the
// partner's stage.
template <class F>
__device__ __forceinline__ Span span_of(const SplitPart<F>& part, unsigned tid, int, int,
                                        int count) {
  const unsigned mask = consumer_mask(part.offset, part.stride);
  const unsigned me = tid / warpgroup;
  const bool shared = ((mask >> me) & 1u) != 0u && __popc(mask) > 1;
  return Span{count, shared ? __popc(mask & ((1u << me) - 1u)) : 0, shared ? __popc(mask) : 1};
}

// Where `tile` is in its stage (the `stride` elements from `stage`) and the calling
// thread's (`tid`'s) warpgroup's part of it (span_of): from `tile` to the stage's end,
// none when `tile` is outside it. In 32-bit arithmetic (a stage of 2^31 elements or
// more is read as if it held INT_MAX): `at` is where the pointer is in the stage, -1
// before it (read a stage's worth from the pointer), `size` past it (nothing).
template <class T, class Part>
__device__ __forceinline__ Span stage_span(const T* tile, const T* stage, long long stride,
                                           const Part& part, unsigned tid) {
  const int size = stride > INT_MAX ? INT_MAX : static_cast<int>(stride);
  const long long from = static_cast<long long>(tile - stage);
  const int at = from < 0 ? -1 : from > size ? size : static_cast<int>(from);
  const int whole = at < 0 ? size : size - at;
  return span_of(part, tid, at, size, whole);
}

// The calling warpgroup's part `span` of a stage tile from `tile` (stage_span). A
// screen's call with a fold whose tile is 16-bit values in shared memory, packed, is
// read by the whole warpgroup at once (screen_stage); any other call by each warp of
// the warpgroup for a quarter of it, as probe_tile reads (a record per warp).
template <bool Shared, class T>
__device__ __forceinline__ void read_part(const Probe& p, const T* tile, const Span& span,
                                          unsigned tid) {
  int count = span.count;
  if constexpr (screen && pairs_tally<T> && KWB_TRACE_MINMAX == 0) {
    if (p.fold != nullptr && packs(tile, count, p.row_bound) && (Shared || __isShared(tile))) {
      screen_stage<T>(p, static_cast<unsigned>(__cvta_generic_to_shared(tile)), count,
                      span.rank, span.ranks, tid % warpgroup);
      return;
    }
  }
  // A record reads a contiguous part of a shared tile: its rank's of `ranks` parts, a
  // multiple of 8 values each so that parts stay 16-byte chunks.
  if (span.ranks > 1) {
    // Two or four ranks (a power of two) divide by a shift, any other number by a
    // division.
    const int r = span.ranks;
    const int share = (r & (r - 1)) == 0 ? (count + r - 1) >> (__ffs(r) - 1) : (count + r - 1) / r;
    const int each = (share + 7) & ~7;
    const int from = span.rank * each;
    tile += from;
    count = count - from < 0 ? 0 : count - from < each ? count - from : each;
  }
  const int quarter = (count + 3) / 4;
  const int first = static_cast<int>((tid / 32u) % 4u) * quarter;
  const int mine = count - first < quarter ? (count > first ? count - first : 0) : quarter;
  read_tile<Shared>(p, tile + first, mine, NoCoord{});
}

// ---- The usual part: a screen's stage read in a few instructions ----
//
// kwb-instrument writes a part's offsets as lambdas of the kernel's constants and the
// thread index, and a stage's size as the kernel's expression for it, so the compiler
// knows the part each warpgroup reads when the kernel runs as those offsets say (the
// MMA's pointer where offset() puts it, every consumer warpgroup present, a
// one-dimensional CTA): its size, how many warpgroups share it and how many chunks
// each thread reads are constants. A screen's call checks that it is in that case
// (a few compares), reads its chunks with no loop and no test a chunk (usual_tally),
// and only otherwise works the part out the general way (stage_span, read_part).
// Offsets known only at run time make the same decision correctly, at a cost.

// A part as usual_of() sees it: `ok` when the call is in the usual case, then
// `count` values (from the MMA's pointer) shared out among `ranks` warpgroups, the
// caller's of rank `rank`. `count` and `ranks` do not depend on the call.
struct UsualPart {
  bool ok;
  int count;
  int rank;
  int ranks;
};

// Whole: the stage from its start; usual when the pointer is at the start.
__device__ __forceinline__ UsualPart usual_of(const WholeStage&, unsigned, int at, int size) {
  return UsualPart{at == 0, size, 0, 1};
}

// Own rows whose offsets rise by the same `slope` from each warpgroup to the next
// (a test the compiler folds where the offsets are constants): `slope` values from
// the caller's offset, usual when the pointer is there and they end inside the stage
// (the general way reads the same values: up to the next warpgroup's offset, or the
// stage's end when that is where it lies).
template <class F>
__device__ __forceinline__ UsualPart usual_of(const OwnPart<F>& part, unsigned me, int at,
                                              int size) {
  const F& offset = part.offset;
  const long long first = static_cast<long long>(offset(0u));
  const long long slope = static_cast<long long>(offset(warpgroup)) - first;
  bool even = slope > 0 && first >= INT_MIN &&
              first + static_cast<long long>(max_warpgroups) * slope <= INT_MAX;
#pragma unroll
  for (unsigned w = 2; w <= max_warpgroups; ++w) {
    even = even && static_cast<long long>(offset(w * warpgroup)) -
                           static_cast<long long>(offset((w - 1u) * warpgroup)) ==
                       slope;
  }
  const int step = even ? static_cast<int>(slope) : 0;
  const int mine = static_cast<int>(even ? first : 0) + step * static_cast<int>(me);
  const bool flat = blockDim.y * blockDim.z == 1u;
  return UsualPart{even && flat && at >= 0 && mine == at && mine + step <= size, step, 0, 1};
}

// Split among the consumers (the warpgroups whose offsets in the partner's stage lie
// in it, stage_consumers): the whole stage from its start, shared out by rank, usual
// when the pointer is at the start, the caller is a consumer and every consumer is
// in the CTA.
template <class F>
__device__ __forceinline__ UsualPart usual_of(const SplitPart<F>& part, unsigned me, int at,
                                              int size) {
  const unsigned consumers = stage_consumers(part.offset, part.stride);
  const unsigned present = (1u << (blockDim.x / warpgroup)) - 1u;
  const bool flat = blockDim.y * blockDim.z == 1u;
  const bool ok = at == 0 && flat && ((consumers >> me) & 1u) != 0u &&
                  (consumers & ~present) == 0u;
  return UsualPart{ok, size, __popc(consumers & ((1u << me) - 1u)),
                   __popc(consumers) > 0 ? __popc(consumers) : 1};
}

// How a screen's call reads the usual part of the stage tile at `tile` (usual_tally):
// `ok` when it can (a fold to go into, the usual part, shared out evenly, packed
// 16-bit values in shared memory), then the tile's shared address, the caller's first
// chunk, the step between its chunks and how many it reads (a constant where the
// kernel's offsets and stage size are). `tid` is linear_tid().
struct UsualRead {
  bool ok;
  unsigned base;
  unsigned first;
  unsigned step;
  unsigned each;
};
template <bool Shared, class T, class Part>
__device__ __forceinline__ UsualRead usual_read(const Probe& p, const T* tile, const T* stage,
                                                long long stride, const Part& part,
                                                unsigned tid) {
  // Where the pointer is in the stage, in values: from shared addresses (32-bit), so
  // both must be in shared memory; -1 outside the stage.
  const int size = stride > INT_MAX / 2 ? INT_MAX / 2 : static_cast<int>(stride);
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  const unsigned bytes = base - static_cast<unsigned>(__cvta_generic_to_shared(stage));
  const bool inside = bytes % sizeof(T) == 0u && bytes / sizeof(T) <= static_cast<unsigned>(size);
  const int at = inside ? static_cast<int>(bytes / sizeof(T)) : -1;
  const UsualPart u = usual_of(part, tid / warpgroup, at, size);
  const unsigned n = static_cast<unsigned>(u.count) / 8u;
  const unsigned step = static_cast<unsigned>(u.ranks) * warpgroup;
  const bool even = u.count >= 0 && u.count % 8 == 0 && n % step == 0u &&
                    n / step <= unrolled_chunks;
  const bool ok = even && u.ok && p.fold != nullptr && p.row_bound == all_rows &&
                  sizeof(T) == 2 && base % 16u == 0u &&
                  (Shared || (__isShared(tile) && __isShared(stage)));
  return UsualRead{ok, base,
                   static_cast<unsigned>(u.rank) * warpgroup + tid % warpgroup, step,
                   even ? n / step : 0u};
}

// The packed |v| tally (pair_absmax_nan's word: both halves' largest magnitude, sign
// bits meaningless) of the `each` 16-byte chunks of T a usual read takes, `step`
// chunks apart from chunk `first` of `base`, two a round trip: unrolled (`each` is a
// constant where the read is usual), every address a constant offset from the first.
// 0 for none.
template <class T>
__device__ __forceinline__ unsigned usual_tally(const UsualRead& r) {
  const unsigned at = r.base + 16u * r.first;
  unsigned word = 0u;
#pragma unroll
  for (unsigned i = 0; i < r.each; i += 2u) {
    unsigned v[2][4];
#pragma unroll
    for (unsigned j = 0; j < 2u; ++j) {
      // An odd count's last round loads its chunk twice (same maximum).
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[j][0]), "=r"(v[j][1]), "=r"(v[j][2]), "=r"(v[j][3])
                   : "r"(at + 16u * r.step * (i + j < r.each ? i + j : i)));
    }
    const unsigned round = pair_absmax_nan<T>(chunk_absmax<T>(v[0]), chunk_absmax<T>(v[1]));
    word = i == 0u ? round : pair_absmax_nan<T>(word, round);
  }
  return word;
}

// probe_stage's read: the calling warpgroup's part of the stage tile at `tile`
// (stage_span, read_part).
template <bool Shared, class T, class Part>
__device__ __forceinline__ void read_stage(const Probe& p, const T* tile, const T* stage,
                                           long long stride, const Part& part) {
  if (!admitted(p.k_tile)) return;
  const unsigned tid = linear_tid();
  if constexpr (screen && pairs_tally<T> && KWB_TRACE_MINMAX == 0) {
    const UsualRead r = usual_read<Shared>(p, tile, stage, stride, part, tid);
    if (r.ok) {
      const unsigned peak = pairs_peak<T>(usual_tally<T>(r));
      if (peak < 0x7f800000u) {
        fold_finite(p, peak, 8u * r.each);
        return;
      }
      // A NaN or an Inf: the part again, as any call reads it (exactly).
    }
  }
  read_part<Shared>(p, tile, stage_span(tile, stage, stride, part, tid), tid);
}

// probe_stage_pair's read. A screen's: both operands' parts, the filter asked and the
// thread's index read once, both parts worked out before either is read (A's first,
// as two probe_stage calls would). Any other build's: the two reads one after the
// other, as two probe_stage calls; a record's read holds more registers, and both
// parts live at once took tma_wgmma_sm90's one-CTA build past the 80 registers that
// keep two CTAs an SM (1.38x the kernel, docs/results/track-a-stage-pair.md).
template <bool Shared, class TA, class PartA, class TB, class PartB>
__device__ __forceinline__ void read_stage_pair(const Probe& pa, const TA* tile_a,
                                                const TA* stage_a, long long stride_a,
                                                const PartA& part_a, const Probe& pb,
                                                const TB* tile_b, const TB* stage_b,
                                                long long stride_b, const PartB& part_b) {
  if constexpr (screen) {
    if (!admitted(pa.k_tile)) return;
    const unsigned tid = linear_tid();
    if constexpr (pairs_tally<TA> && pairs_tally<TB> && KWB_TRACE_MINMAX == 0) {
      // Both parts the usual way: both read, then one test for NaN and Inf, so that
      // B's loads need not wait for A's tally.
      const UsualRead ra = usual_read<Shared>(pa, tile_a, stage_a, stride_a, part_a, tid);
      const UsualRead rb = usual_read<Shared>(pb, tile_b, stage_b, stride_b, part_b, tid);
      if (ra.ok && rb.ok) {
        const unsigned ha = pairs_peak<TA>(usual_tally<TA>(ra));
        const unsigned hb = pairs_peak<TB>(usual_tally<TB>(rb));
        if ((ha > hb ? ha : hb) < 0x7f800000u) {
          fold_finite(pa, ha, 8u * ra.each);
          fold_finite(pb, hb, 8u * rb.each);
          return;
        }
        // A NaN or an Inf: both parts again, each as any call reads it (exactly).
      }
    }
    const Span a = stage_span(tile_a, stage_a, stride_a, part_a, tid);
    const Span b = stage_span(tile_b, stage_b, stride_b, part_b, tid);
    read_part<Shared>(pa, tile_a, a, tid);
    read_part<Shared>(pb, tile_b, b, tid);
  } else {
    read_stage<Shared>(pa, tile_a, stage_a, stride_a, part_a);
    read_stage<Shared>(pb, tile_b, stage_b, stride_b, part_b);
  }
}

}  // namespace detail

#ifdef KWB_TRACE_SCREEN
// A fold goes into the warp's cell of its site once, when its scope ends (the function
// that declared it returns): the lanes that saw anything reduce their registers over
// the warp and summarize() adds them as one call's totals would be, with no call
// counted (the cell's calls stay 0: the reader shows them as not counted). A lane that
// saw nothing (a producer warp, an instantiation the gate leaves out, where the
// compiler knows it) does nothing.
__device__ __forceinline__ void Fold::flush() {
  if ((values | filtered) == 0u) return;
  const unsigned mask = __activemask();
  detail::Slot slot;
  slot.record = nullptr;
  slot.mask = mask;
  slot.lane = lane_id();
  slot.below = (1u << slot.lane) - 1u;
  slot.leader = __ffs(mask) - 1;
  const unsigned counted = detail::warp_sum(mask, values);
  const unsigned seen = counted + detail::warp_sum(mask, filtered);
  detail::summarize(slot,
                    detail::Totals{detail::warp_max(mask, peak), 0u, 0u, seen, counted, 0u, 0u},
                    detail::Probe{site, kind, tag, -1, -1, -1, all_rows, Axis::M, nullptr}, 0u);
  peak = values = filtered = 0u;
}
#endif

#endif  // KWB_TRACE

// Calls `f(tag)` in a trace build and does nothing otherwise. kwb-instrument puts each
// probe's calls in a generic lambda it passes here, its parameter the instantiation
// tag, so that they depend on a template parameter: a discarded `if constexpr` branch
// outside a template is still checked, and without KWB_TRACE the lambda's body is never
// instantiated, whatever types its calls read.
template <class F>
__device__ __forceinline__ void dependent(uint32_t tag, F&& f) {
#ifdef KWB_TRACE
  f(tag);
#else
  (void)tag, (void)f;
#endif
}

namespace detail {
// A probe of a value of type X, which the value model cannot read: in a trace build
// the site's entry names X (__PRETTY_FUNCTION__ holds it), and the flush writes a
// NotProbed record for it, so `kwb trace show` says what was not read and why.
template <class X>
__device__ __noinline__ void not_probed(uint32_t site) {
#ifdef KWB_TRACE
  if (site < static_cast<uint32_t>(KWB_TRACE_SUMMARY_SITES)) {
    trace_unprobed[site] = __PRETTY_FUNCTION__;
  }
#else
  (void)site;
#endif
}
}  // namespace detail


namespace detail {
// not_probed of the first of Xs the value model cannot read.
template <class X, class... Rest>
__device__ __forceinline__ void not_probed_first(uint32_t site) {
  if constexpr (value_count<X> == 0 || sizeof...(Rest) == 0) {
    not_probed<X>(site);
  } else {
    not_probed_first<Rest...>(site);
  }
}
}  // namespace detail

// The probes. Every lane of the warp that reaches a probe must call it (the warp's
// active lanes cooperate and the lowest one appends one record). All take:
//   site, kind, tag         the site id, what is read, tag_of(the gate text);
//   k_tile, tile_m, tile_n  where: the K tile (-1 outside the K loop) and the CTA
//                           tile's coordinates;
//   row_bound, row_axis     the padding-row filter: a value counts only when its
//                           coordinate on row_axis is < row_bound (all_rows: all);
//   coord                   i -> kwb::Coord, the logical coordinates of value i
//                           (NoCoord when only raw order is known).

// Whether the runtime filter lets this CTA record at `k_tile` (always false without
// KWB_TRACE). kwb-instrument puts a shared tile's probe, and the work of choosing the
// warp and part of the tile it reads, behind it: a CTA the filter leaves out then does
// nothing but this check, which the compiler hoists out of the mainloop (the CTA's
// part of it; the K tile's is a compare).
__device__ __forceinline__ bool admits(int k_tile) {
#ifdef KWB_TRACE
  return detail::admitted(k_tile);
#else
  (void)k_tile;
  return false;
#endif
}

// A register array of any rank (e.g. float acc[M][N][4]) held by each lane.
template <class A, class CoordFn = NoCoord>
__device__ __forceinline__ void probe_array(SiteArg site, Kind kind, uint32_t tag, int k_tile,
                                            int tile_m, int tile_n, const A& fragment,
                                            int row_bound = all_rows, Axis row_axis = Axis::M,
                                            CoordFn coord = CoordFn{}) {
  static_assert(std::is_array<A>::value, "probe_array takes a C array");
#ifdef KWB_TRACE
  // A library's 16-bit type as the CUDA type of the same bits (detail::same_bits).
  using Element = typename detail::same_bits<std::remove_cv_t<std::remove_all_extents_t<A>>>::type;
  constexpr int n = static_cast<int>(sizeof(A) / sizeof(Element));
  const Element* flat = reinterpret_cast<const Element*>(&fragment);
  detail::fragment<n>(
      detail::Probe{site.id, kind, tag, k_tile, tile_m, tile_n, row_bound, row_axis, site.fold},
      [&](int i) -> const Element& { return flat[i]; }, detail::fitted<A, Element>(coord));
#else
  (void)site, (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
  (void)fragment, (void)row_bound, (void)row_axis, (void)coord;
#endif
}

// N values held by each lane, read through value(i) (e.g. a CuTe register tensor:
// [&](int i) { return tCrC(i); }); N is a compile-time constant.
template <int N, class ValueFn, class CoordFn = NoCoord>
__device__ __forceinline__ void probe_fragment(SiteArg site, Kind kind, uint32_t tag,
                                               int k_tile, int tile_m, int tile_n,
                                               ValueFn value, int row_bound = all_rows,
                                               Axis row_axis = Axis::M,
                                               CoordFn coord = CoordFn{}) {
#ifdef KWB_TRACE
  using Element = std::decay_t<decltype(value(0))>;
  if constexpr (!detail::is_number<Element>) {
    detail::not_probed<Element>(site.id);
  } else {
    detail::fragment<N>(
        detail::Probe{site.id, kind, tag, k_tile, tile_m, tile_n, row_bound, row_axis, site.fold},
        value, coord);
  }
#else
  (void)site, (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
  (void)value, (void)row_bound, (void)row_axis, (void)coord;
#endif
}

template <class... Xs>
__device__ __forceinline__ void probe_values(SiteArg site, Kind kind, uint32_t tag, int k_tile,
                                             int tile_m, int tile_n, const Xs&... xs);

// One value per lane at a known coordinate (e.g. an epilogue scalar). A value that is
// not one number (an output element stored as a __nv_bfloat162 pair) is read through
// the value model, without the coordinate.
template <class T>
__device__ __forceinline__ void probe_value(SiteArg site, Kind kind, uint32_t tag, int k_tile,
                                            int tile_m, int tile_n, const T& value,
                                            int row_bound = all_rows, Axis row_axis = Axis::M,
                                            Coord coord = Coord{-1, -1, -1}) {
#ifdef KWB_TRACE
  if constexpr (!detail::is_number<T>) {
    (void)row_bound, (void)row_axis, (void)coord;
    probe_values(site, kind, tag, k_tile, tile_m, tile_n, value);
    return;
  }
  detail::fragment<1>(
      detail::Probe{site.id, kind, tag, k_tile, tile_m, tile_n, row_bound, row_axis, site.fold},
      [&](int) -> const T& { return value; }, [coord](int) { return coord; });
#else
  (void)site, (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
  (void)value, (void)row_bound, (void)row_axis, (void)coord;
#endif
}

// A tile in shared or global memory, `count` elements from `tile`, read by the calling
// warp's lanes in turn (lane r reads r, r + 32, ...). Call it from one warp.
template <class T, class CoordFn = NoCoord>
__device__ __forceinline__ void probe_tile(SiteArg site, Kind kind, uint32_t tag, int k_tile,
                                           int tile_m, int tile_n, const T* tile, int count,
                                           int row_bound = all_rows, Axis row_axis = Axis::M,
                                           CoordFn coord = CoordFn{}) {
#ifdef KWB_TRACE
  using Element = std::remove_cv_t<T>;
  if constexpr (detail::is_number<Element>) {
    detail::read_tile<false>(
        detail::Probe{site.id, kind, tag, k_tile, tile_m, tile_n, row_bound, row_axis, site.fold},
        tile, count, coord);
  } else {
    detail::read_tile_model<Element>(
        detail::Probe{site.id, kind, tag, k_tile, tile_m, tile_n, row_bound, row_axis, site.fold},
        tile, count);
  }
#else
  (void)site, (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
  (void)tile, (void)count, (void)row_bound, (void)row_axis, (void)coord;
#endif
}

// probe_tile of a tile that is in shared memory, every value counting: `tile` must
// point into shared memory (kwb-instrument emits this only for a pointer it traced to
// a `__shared__` declaration), so a tile of 16-bit values is read as 16-byte chunks
// with no query of the pointer's address space (one memory round trip less a call).
template <class T>
__device__ __forceinline__ void probe_shared_tile(SiteArg site, Kind kind, uint32_t tag,
                                                  int k_tile, int tile_m, int tile_n,
                                                  const T* tile, int count) {
#ifdef KWB_TRACE
  using Element = std::remove_cv_t<T>;
  if constexpr (detail::is_number<Element>) {
    detail::read_tile<true>(
        detail::Probe{site.id, kind, tag, k_tile, tile_m, tile_n, all_rows, Axis::M, site.fold},
        tile, count, NoCoord{});
  } else {
    detail::read_tile_model<Element>(
        detail::Probe{site.id, kind, tag, k_tile, tile_m, tile_n, all_rows, Axis::M, site.fold},
        tile, count);
  }
#else
  (void)site, (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
  (void)tile, (void)count;
#endif
}

// The tile an SS-mode MMA (wgmma) reads from a pipeline stage, probed by the warpgroup
// that issues the MMA (all of its threads call this): from `tile` to the end of its
// stage, the `stride` elements from `stage` (kwb-instrument passes the stage the
// pointer was last set in: `tile = sA + stage * STRIDE + offset`), so that a probe never
// reads past the stage and reads every row the warpgroup's MMAs can, those of later
// warpgroups of the CTA too. Without a screen (and in a screen for a hand-written call
// with a bare site id) each warp of the warpgroup reads a quarter of it, as probe_tile
// reads, and writes its own record; a screen's call with a fold reads a tile of 16-bit
// values in shared memory with the warpgroup's threads together, each loading a few
// 16-byte chunks at once (docs/BENCHMARKS.md, "The screen"). Values are in the stage's
// memory order (swizzled as TMA wrote them): no coordinates. probe_shared_stage
// (probe_stage<true>): `tile` must point into shared memory (no address-space query);
// probe_stage asks.
template <bool Shared = false, class T, class Part = WholeStage>
__device__ __forceinline__ void probe_stage(SiteArg site, Kind kind, uint32_t tag, int k_tile,
                                            int tile_m, int tile_n, const T* tile,
                                            const typename std::remove_cv<T>::type* stage,
                                            long long stride, Part part = Part{}) {
#ifdef KWB_TRACE
  if constexpr (!detail::is_number<std::remove_cv_t<T>>) {
    (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
    (void)tile, (void)stage, (void)stride, (void)part;
    detail::not_probed<std::remove_cv_t<T>>(site.id);
  } else {
    detail::read_stage<Shared, T>(
        detail::Probe{site.id, kind, tag, k_tile, tile_m, tile_n, all_rows, Axis::M, site.fold},
        tile, stage, stride, part);
  }
#else
  (void)site, (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
  (void)tile, (void)stage, (void)stride, (void)part;
#endif
}

template <class T, class Part = WholeStage>
__device__ __forceinline__ void probe_shared_stage(SiteArg site, Kind kind, uint32_t tag,
                                                   int k_tile, int tile_m, int tile_n,
                                                   const T* tile,
                                                   const typename std::remove_cv<T>::type* stage,
                                                   long long stride, Part part = Part{}) {
  probe_stage<true>(site, kind, tag, k_tile, tile_m, tile_n, tile, stage, stride, part);
}


// A pipeline stage held in a tensor of a tile library (CuTe: `sA(_, _, stage)`), read as
// probe_stage reads a raw stage, by every thread of the warpgroup that issues the MMA:
// its memory from the tensor's first element over cosize(layout) elements (raw_pointer_
// cast and cosize found by argument-dependent lookup), in memory order, no
// coordinates. What a screen reads, where element by element through the layout would
// serialize a warp over the whole stage.
template <class Tensor>
__device__ __forceinline__ void probe_tensor_stage(SiteArg site, Kind kind, uint32_t tag,
                                                   int k_tile, int tile_m, int tile_n,
                                                   const Tensor& tensor) {
  using Element =
      std::remove_cv_t<std::remove_reference_t<decltype(*raw_pointer_cast(tensor.data()))>>;
  using Bits = typename detail::same_bits<Element>::type;
  const Bits* first = reinterpret_cast<const Bits*>(raw_pointer_cast(tensor.data()));
  const long long extent = static_cast<long long>(cosize(tensor.layout()));
  probe_stage(site, kind, tag, k_tile, tile_m, tile_n, first, first, extent);
}

// Operands A and B of one MMA, each a tile in its pipeline stage, read as probe_stage
// reads each (sites `site_a` and `site_b`, A's record or fold first) with one call:
// the K-tile filter, the thread's index and both parts are worked out once, where two
// probe_stage calls would each work them out (every instruction a probe adds to a
// consumer's K tile is issue time its MMAs wait for). kwb-instrument emits it where
// both operands of an MMA are stage tiles probed before the same statement.
template <bool Shared = false, class TA, class TB, class PartA = WholeStage,
          class PartB = WholeStage>
__device__ __forceinline__ void probe_stage_pair(
    SiteArg site_a, SiteArg site_b, uint32_t tag, int k_tile, int tile_m, int tile_n,
    const TA* tile_a, const typename std::remove_cv<TA>::type* stage_a, long long stride_a,
    PartA part_a, const TB* tile_b, const typename std::remove_cv<TB>::type* stage_b,
    long long stride_b, PartB part_b) {
#ifdef KWB_TRACE
  if constexpr (!detail::is_number<std::remove_cv_t<TA>> ||
                !detail::is_number<std::remove_cv_t<TB>>) {
    probe_stage<Shared>(site_a, Kind::OperandA, tag, k_tile, tile_m, tile_n, tile_a, stage_a,
                        stride_a, part_a);
    probe_stage<Shared>(site_b, Kind::OperandB, tag, k_tile, tile_m, tile_n, tile_b, stage_b,
                        stride_b, part_b);
    return;
  }
  detail::read_stage_pair<Shared>(
      detail::Probe{site_a.id, Kind::OperandA, tag, k_tile, tile_m, tile_n, all_rows, Axis::M,
                    site_a.fold},
      tile_a, static_cast<const TA*>(stage_a), stride_a, part_a,
      detail::Probe{site_b.id, Kind::OperandB, tag, k_tile, tile_m, tile_n, all_rows, Axis::M,
                    site_b.fold},
      tile_b, static_cast<const TB*>(stage_b), stride_b, part_b);
#else
  (void)site_a, (void)site_b, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
  (void)tile_a, (void)stage_a, (void)stride_a, (void)part_a;
  (void)tile_b, (void)stage_b, (void)stride_b, (void)part_b;
#endif
}

// probe_stage_pair of tiles known to be in shared memory (probe_shared_stage).
template <class TA, class TB, class PartA = WholeStage, class PartB = WholeStage>
__device__ __forceinline__ void probe_shared_stage_pair(
    SiteArg site_a, SiteArg site_b, uint32_t tag, int k_tile, int tile_m, int tile_n,
    const TA* tile_a, const typename std::remove_cv<TA>::type* stage_a, long long stride_a,
    PartA part_a, const TB* tile_b, const typename std::remove_cv<TB>::type* stage_b,
    long long stride_b, PartB part_b) {
  probe_stage_pair<true>(site_a, site_b, tag, k_tile, tile_m, tile_n, tile_a, stage_a,
                         stride_a, part_a, tile_b, stage_b, stride_b, part_b);
}

// The registers an MMA takes one by one (`mma16816(acc, af, b0, b1)` takes B's fragment
// as `b0`, `b1`), gathered in the order it takes them: one fragment, which probe_as
// reads as it reads a register array.
template <class R, int N>
struct Regs {
  R r[N];
};
template <class R, class... More>
__device__ __forceinline__ Regs<R, 1 + sizeof...(More)> regs(R first, More... more) {
  return Regs<R, 1 + sizeof...(More)>{{first, static_cast<R>(more)...}};
}

namespace detail {
// Whether probe_as can read an A as values of T: a C array, or a plain struct of
// registers (`uint2`, `uint4`), whose bytes are whole values of T. A pointer is not:
// its type does not say the extent it points to.
template <class T, class A>
inline constexpr bool readable_as =
    (std::is_array<A>::value || (std::is_class<A>::value && std::is_trivially_copyable<A>::value)) &&
    sizeof(A) % sizeof(T) == 0;
}  // namespace detail

// A register array or plain struct whose bytes hold values of another type (`uint32_t
// a[4]` packing eight bf16 for mma.sync, a `uint2` packing four bf16 for a vector
// store): read as T. Anything else (a pointer to the registers, whose extent the type
// does not say) is recorded as not probed.
template <class T, class A, class CoordFn = NoCoord>
__device__ __forceinline__ void probe_as(SiteArg site, Kind kind, uint32_t tag, int k_tile,
                                         int tile_m, int tile_n, const A& fragment,
                                         int row_bound = all_rows, Axis row_axis = Axis::M,
                                         CoordFn coord = CoordFn{}) {
  if constexpr (!detail::readable_as<T, A>) {
    (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n, (void)fragment;
    (void)row_bound, (void)row_axis, (void)coord;
    detail::not_probed<A>(site.id);
  } else {
    constexpr int n = static_cast<int>(sizeof(A) / sizeof(T));
    const T* flat = reinterpret_cast<const T*>(&fragment);
    probe_fragment<n>(site, kind, tag, k_tile, tile_m, tile_n,
                      [&](int i) -> const T& { return flat[i]; }, row_bound, row_axis,
                      detail::fitted<A, T>(coord));
  }
}

// Operands A and B of one MMA read as probe_as reads each (two records, sites
// `site_a` and `site_b`), with one claim of two records: the B probe's wait for its
// record is then over before it starts. kwb-instrument emits this where both operands
// are probed at the same point.
template <class T, class FA, class FB, class CoordA = NoCoord, class CoordB = NoCoord>
__device__ __forceinline__ void probe_as_pair(SiteArg site_a, SiteArg site_b, uint32_t tag,
                                              int k_tile, int tile_m, int tile_n, const FA& a,
                                              const FB& b, int row_bound = all_rows,
                                              Axis row_axis = Axis::M,
                                              CoordA coord_a = CoordA{},
                                              CoordB coord_b = CoordB{}) {
  if constexpr (!detail::readable_as<T, FA> || !detail::readable_as<T, FB>) {
    // Each on its own: what cannot be read is recorded as not probed.
    probe_as<T>(site_a, Kind::OperandA, tag, k_tile, tile_m, tile_n, a, row_bound, row_axis,
                coord_a);
    probe_as<T>(site_b, Kind::OperandB, tag, k_tile, tile_m, tile_n, b, row_bound, row_axis,
                coord_b);
    return;
  }
#ifdef KWB_TRACE
  const T* flat_a = reinterpret_cast<const T*>(&a);
  const T* flat_b = reinterpret_cast<const T*>(&b);
  constexpr int na = static_cast<int>(sizeof(FA) / sizeof(T));
  constexpr int nb = static_cast<int>(sizeof(FB) / sizeof(T));
  const auto value_a = [&](int i) -> const T& { return flat_a[i]; };
  const auto value_b = [&](int i) -> const T& { return flat_b[i]; };
  const detail::Probe pa{site_a.id, Kind::OperandA, tag, k_tile, tile_m, tile_n, row_bound,
                        row_axis, site_a.fold};
  const detail::Probe pb{site_b.id, Kind::OperandB, tag, k_tile, tile_m, tile_n, row_bound,
                        row_axis, site_b.fold};
  if constexpr (screen) {
    // A screen folds both in one go, each tally worked out before the filter is asked
    // (see detail::fragment); a warp that saw a NaN or an Inf in either goes on below,
    // through each operand's own probe.
    if (row_bound == all_rows && pa.fold != nullptr && pb.fold != nullptr) {
      const detail::Quick qa = detail::quick_fragment<na>(value_a);
      const detail::Quick qb = detail::quick_fragment<nb>(value_b);
      if (!detail::admitted(k_tile)) return;
      detail::fold_fragment<na>(pa, qa, value_a);
      detail::fold_fragment<nb>(pb, qb, value_b);
      return;
    }
  }
  if (!detail::admitted(k_tile)) return;
  const detail::Claim both = detail::claim(2u);
  if constexpr (screen) {
    if (row_bound == all_rows) {
      const unsigned lanes = static_cast<unsigned>(__popc(both.mask));
      if (detail::screened_pair(both, pa, pb, detail::quick_fragment<na>(value_a),
                                detail::quick_fragment<nb>(value_b), na * lanes, nb * lanes)) {
        return;
      }
      if constexpr (detail::poisonable<T, na> && detail::poisonable<T, nb>) {
        // Counted exactly, without tallying either again.
        detail::poisoned_fragment<na>(pa, value_a, both, 0u);
        detail::poisoned_fragment<nb>(pb, value_b, both, 1u);
        return;
      }
    }
  }
  detail::fragment_claimed<na>(pa, value_a, detail::fitted<FA, T>(coord_a), both, 0u);
  detail::fragment_claimed<nb>(pb, value_b, detail::fitted<FB, T>(coord_b), both, 1u);
#else
  (void)site_a, (void)site_b, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n, (void)a;
  (void)b, (void)row_bound, (void)row_axis, (void)coord_a, (void)coord_b;
#endif
}

// The work tile the calling warp starts, where the code whose probes record its values
// has no origin in scope (a CUTLASS 3.x collective's mma() is handed the tile's
// coordinate by its caller, the kernel). One record per warp, of kind TileContext, no
// values, its tile_m / tile_n the origin. A warp appends its records in program order,
// so the trace reader gives each later record of that warp without an origin this
// one, up to the warp's next context; (-1, -1) ends it. Obeys the CTA filter.
__device__ __forceinline__ void tile_context(uint32_t site, uint32_t tag, int tile_m, int tile_n) {
#ifdef KWB_TRACE
  // A summary has no warps' record streams to place.
  if constexpr (summary) return;
  if (!detail::admitted(-1)) return;
  const detail::Claim claimed = detail::claim();
  detail::Slot slot;
  if (!detail::land(claimed, slot)) return;
  detail::clear_slots(slot);
  const detail::Totals none{0u, detail::order_key(__int_as_float(0x7f800000)),
                            detail::order_key(__int_as_float(0xff800000)), 0u, 0u, 0u, 0u};
  detail::write(slot, none, 0u,
                detail::Probe{site, Kind::TileContext, tag, -1, tile_m, tile_n, all_rows, Axis::M, nullptr});
#else
  (void)site, (void)tag, (void)tile_m, (void)tile_n;
#endif
}

// Waits for every wgmma of the warpgroup: a wgmma accumulator is complete only then.
// Only arch-specific targets (sm_90a, sm_100a, ...) have the instruction; elsewhere
// there is no wgmma to wait for. A template, so a plain build emits nothing.
template <int = 0>
__device__ __forceinline__ void wgmma_wait_all() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_FEAT_SM100_ALL) || \
    defined(__CUDA_ARCH_FEAT_SM101_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}

// Whatever a kernel keeps its values in, by its type (this is the call kwb-instrument
// emits, since it sees names, not types): a C array of numbers (probe_array, the
// fragment layouts' coordinates applying), and anything else the value model reads
// (detail::values) as that many numbers, coordinates applying where each element is
// one number. A type it cannot read compiles too, and is recorded as not probed.
template <class X, class CoordFn = NoCoord>
__device__ __forceinline__ void probe(SiteArg site, Kind kind, uint32_t tag, int k_tile,
                                      int tile_m, int tile_n, const X& x,
                                      int row_bound = all_rows, Axis row_axis = Axis::M,
                                      CoordFn coord = CoordFn{}) {
  using Model = detail::values<std::remove_cv_t<X>>;
  if constexpr (std::is_array<X>::value &&
                detail::is_number<std::remove_cv_t<std::remove_all_extents_t<X>>>) {
    probe_array(site, kind, tag, k_tile, tile_m, tile_n, x, row_bound, row_axis, coord);
  } else if constexpr (Model::count > 0 && Model::direct) {
    // A library's 16-bit type read as the CUDA type of the same bits, so its pairs are
    // tallied packed, as they sit in registers (one instruction a register, where
    // unpacking a 128-value half_t accumulator to floats took 90 more registers).
    using Element = std::decay_t<decltype(Model::at(x, 0))>;
    using Bits = typename detail::same_bits<Element>::type;
    if constexpr (!std::is_same<Bits, Element>::value) {
      probe_fragment<Model::count>(
          site, kind, tag, k_tile, tile_m, tile_n,
          [&](int i) { return detail::rebits<Bits>(Model::at(x, i)); }, row_bound, row_axis,
          coord);
    } else {
      probe_fragment<Model::count>(site, kind, tag, k_tile, tile_m, tile_n,
                                   [&](int i) { return Model::at(x, i); }, row_bound,
                                   row_axis, coord);
    }
  } else if constexpr (Model::count > 0) {
    probe_fragment<Model::count>(site, kind, tag, k_tile, tile_m, tile_n,
                                 [&](int i) { return Model::at(x, i); }, row_bound, row_axis,
                                 NoCoord{});
  } else {
    (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n, (void)x;
    (void)row_bound, (void)row_axis, (void)coord;
    detail::not_probed<X>(site.id);
  }
}

// Several values read as one fragment, in order (an epilogue's values as the store
// that writes them names them: `*reinterpret_cast<__nv_bfloat162*>(p) = pack(x, y)`
// reads x and y), each through the value model; a value of a type it cannot read
// makes the whole probe not probed, naming that type.
template <class... Xs>
__device__ __forceinline__ void probe_values(SiteArg site, Kind kind, uint32_t tag, int k_tile,
                                             int tile_m, int tile_n, const Xs&... xs) {
  constexpr int n = (0 + ... + value_count<Xs>);
  if constexpr (!enabled) {
    (void)site, (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
    ((void)xs, ...);
  } else if constexpr (((value_count<Xs> > 0) && ...)) {
    float flat[n];
    int at = 0;
    const auto put = [&](const auto& x) {
      using Model = detail::values<std::remove_cv_t<std::remove_reference_t<decltype(x)>>>;
      for (int i = 0; i < Model::count; ++i) flat[at++] = static_cast<float>(Model::at(x, i));
    };
    (put(xs), ...);
    probe_array(site, kind, tag, k_tile, tile_m, tile_n, flat);
  } else {
    (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
    detail::not_probed_first<Xs...>(site.id);
  }
}

// A shared tile read through value(i), i in [0, count), e.g. a swizzled CuTe smem
// tensor: [&](int i) { return sB(i); }. Call it from one warp.
template <class ValueFn, class CoordFn = NoCoord>
__device__ __forceinline__ void probe_tile_fn(SiteArg site, Kind kind, uint32_t tag,
                                              int k_tile, int tile_m, int tile_n, int count,
                                              ValueFn value, int row_bound = all_rows,
                                              Axis row_axis = Axis::M,
                                              CoordFn coord = CoordFn{}) {
#ifdef KWB_TRACE
  using Element = std::decay_t<decltype(value(0))>;
  using Model = detail::values<Element>;
  const detail::Probe p{site.id, kind, tag, k_tile, tile_m, tile_n, row_bound, row_axis, site.fold};
  if constexpr (detail::is_number<Element>) {
    detail::strided(p, count, value, coord);
  } else if constexpr (Model::count > 0) {
    detail::strided(p, count * Model::count,
                    [&](int i) { return Model::at(value(i / Model::count), i % Model::count); },
                    NoCoord{});
  } else {
    detail::not_probed<Element>(site.id);
  }
#else
  (void)site, (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n;
  (void)count, (void)value, (void)row_bound, (void)row_axis, (void)coord;
#endif
}

// Coordinates from a CuTe tensor of coordinates with the probed fragment's layout, e.g.
// the identity-tensor partition `thr_mma.partition_C(make_identity_tensor(shape(gC)))`
// for an accumulator `thr_mma.make_fragment_C(thr_mma.partition_C(gC))`: value i of
// the fragment is at `coords(i)`, a tuple whose elements 0 and 1 are on axes R and C
// (accumulator and epilogue: m, n; operand A: m, k; operand B: n, k). Written without
// naming CuTe, so this header needs none of it.
template <class Coords, Axis R, Axis C>
struct TensorCoords {
  Coords coords;
  __device__ Coord operator()(int i) const {
    using std::get;
    const auto c = coords(i);
    Coord out{-1, -1, -1};
    (R == Axis::M ? out.m : R == Axis::N ? out.n : out.k) = static_cast<int>(get<0>(c));
    (C == Axis::M ? out.m : C == Axis::N ? out.n : out.k) = static_cast<int>(get<1>(c));
    return out;
  }
};

// TensorCoords with the axes deduced from the tensor: tensor_coords<Axis::M,
// Axis::N>(thr_mma.partition_C(make_identity_tensor(shape(gC)))).
template <Axis R, Axis C, class Coords>
__device__ __forceinline__ TensorCoords<Coords, R, C> tensor_coords(const Coords& coords) {
  return TensorCoords<Coords, R, C>{coords};
}

// Coordinates of a tcgen05.ld 32x32b load: each thread reads one TMEM lane (the row,
// m = the address's lane field + the thread's lane) and `N` consecutive columns (n =
// the address's column field + i: the accumulator's n when it starts at column 0).
struct Tmem32x32b {
  uint32_t taddr;
  __device__ Coord operator()(int i) const {
    return Coord{static_cast<int>(taddr >> 16) + lane_id(),
                 static_cast<int>(taddr & 0xffffu) + i, -1};
  }
};

#if defined(KWB_TRACE) &&                                                               \
    (defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM101_ALL) ||      \
     defined(__CUDA_ARCH_FEAT_SM103_ALL) || defined(__CUDA_ARCH_FEAT_SM110_ALL))
#define KWB_TMEM 1
#endif

namespace detail {
#ifdef KWB_TMEM
// Eight TMEM columns of this warp's 32 lanes, one lane per thread (not yet waited for).
__device__ __forceinline__ void tmem_ld8(uint32_t taddr, uint32_t* r) {
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]),
                 "=r"(r[6]), "=r"(r[7])
               : "r"(taddr));
}
__device__ __forceinline__ void tmem_ld1(uint32_t taddr, uint32_t* r) {
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];\n" : "=r"(r[0]) : "r"(taddr));
}
#endif
}  // namespace detail

// An f32 accumulator in tensor memory (UMMA, sm_100a): the N columns at `taddr` of the
// calling warp's 32 TMEM lanes, loaded with tcgen05.ld 32x32b and waited for
// (tcgen05.wait::ld) — the read the kernel's own epilogue does. Call it where the
// kernel's epilogue loads the accumulator (after the MMA's completion is waited for),
// with every thread of the warp, as that load needs. A no-op where the target has no
// tensor memory (sm_90a and older) or without KWB_TRACE.
template <int N>
__device__ __forceinline__ void probe_tmem(SiteArg site, Kind kind, uint32_t tag, int k_tile,
                                           int tile_m, int tile_n, uint32_t taddr,
                                           int row_bound = all_rows, Axis row_axis = Axis::M) {
  static_assert(N >= 1 && N <= 128, "a tcgen05.ld 32x32b load reads 1 to 128 columns");
#ifdef KWB_TMEM
  uint32_t r[N];
#pragma unroll
  for (int c = 0; c + 8 <= N; c += 8) detail::tmem_ld8(taddr + c, r + c);
#pragma unroll
  for (int c = N - N % 8; c < N; ++c) detail::tmem_ld1(taddr + c, r + c);
  asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory");
  detail::fragment<N>(
      detail::Probe{site.id, kind, tag, k_tile, tile_m, tile_n, row_bound, row_axis, site.fold},
      [&](int i) { return __uint_as_float(r[i]); }, Tmem32x32b{taddr});
#else
  (void)site, (void)kind, (void)tag, (void)k_tile, (void)tile_m, (void)tile_n, (void)taddr;
  (void)row_bound, (void)row_axis;
#endif
}

// ---------------------------------------------------------------------------------
// Host side. NVRTC (__CUDACC_RTC__) compiles device code only and gets none of it;
// a runner reads the buffer through the module globals instead.

#if !defined(__CUDACC_RTC__)
#ifdef KWB_TRACE

namespace detail {

// The registered site tables. Never destroyed, so a flush at exit can still read it.
inline std::vector<SiteInfo>& site_registry() {
  static std::vector<SiteInfo>* sites = new std::vector<SiteInfo>();
  return *sites;
}

inline void flush_at_exit();
inline bool write_trace(const char* path, const std::vector<Record>& records,
                        unsigned long long dropped, TileHeader tiles,
                        const std::vector<TileValue>& values, SummaryHeader summary_header,
                        const std::vector<SummaryEntry>& entries);
#ifdef KWB_TRACE_MAPPED
inline bool flush_after_fault(const char* path, cudaError_t fault);
#endif

// Registers the exit flush. Handlers run in reverse order of registration, and the
// CUDA runtime registers its own teardown, so registering again later (from the
// first reset or set_filter, after CUDA is up) runs the flush before the teardown.
inline bool arm_exit_flush() {
  std::atexit(&flush_at_exit);
  return true;
}
inline void arm_exit_flush_late() {
  static const bool armed = arm_exit_flush();
  (void)armed;
}
// At start-up: when KWB_TRACE_OUT asks for an exit flush, bring the CUDA runtime up
// first, so its teardown is registered before the flush and runs after it (a flush
// registered earlier would find the driver shutting down).
#ifdef KWB_TRACE_MAPPED
// The mapped host records (null until mapped).
inline Record*& mapped_host() {
  static Record* host = nullptr;
  return host;
}
constexpr size_t mapped_bytes = sizeof(Record) * static_cast<size_t>(KWB_TRACE_CAPACITY);
// Maps the record buffer into pinned host memory and points the device at it; true
// once it is. Quiet on failure (records then stay in device memory).
inline bool map_records() {
  if (mapped_host() != nullptr) return true;
  void* host = nullptr;
  if (cudaHostAlloc(&host, mapped_bytes, cudaHostAllocMapped | cudaHostAllocPortable) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  std::memset(host, 0, mapped_bytes);
  void* device = nullptr;
  if (cudaHostGetDevicePointer(&device, host, 0) != cudaSuccess ||
      cudaMemcpyToSymbol(trace_records_mapped, &device, sizeof device) != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaFreeHost(host);
    return false;
  }
  mapped_host() = static_cast<Record*>(host);
  return true;
}
#endif

inline bool arm_exit_flush_at_start() {
  const char* path = std::getenv("KWB_TRACE_OUT");
  if (path != nullptr && *path != '\0') {
    (void)cudaFree(nullptr);
#ifdef KWB_TRACE_MAPPED
    (void)map_records();
#endif
  }
  return arm_exit_flush();
}
inline const bool exit_flush_armed = arm_exit_flush_at_start();

inline void append(std::vector<unsigned char>& out, const void* data, size_t size) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  out.insert(out.end(), bytes, bytes + size);
}

inline bool fail(const char* what, const char* detail_text) {
  std::fprintf(stderr, "kwb: %s: %s\n", what, detail_text);
  return false;
}

// Appends a NotProbed record for every site whose probe read a type the value model
// cannot (detail::not_probed), the type's name taken out of the device's
// __PRETTY_FUNCTION__ text ("... [with X = TYPE]"), read a byte at a time: the text
// lives in the module's data, and nothing says how far past its end may be read.
inline cudaError_t read_unprobed(std::vector<Record>& records) {
  std::vector<const char*> names(KWB_TRACE_SUMMARY_SITES, nullptr);
  cudaError_t err =
      cudaMemcpyFromSymbol(names.data(), trace_unprobed, names.size() * sizeof(const char*));
  for (size_t site = 0; site < names.size() && err == cudaSuccess; ++site) {
    if (names[site] == nullptr) continue;
    std::string text;
    for (int i = 0; i < 512 && err == cudaSuccess; ++i) {
      char c = 0;
      err = cudaMemcpy(&c, names[site] + i, 1, cudaMemcpyDeviceToHost);
      if (c == 0) break;
      text.push_back(c);
    }
    const size_t with = text.find("X = ");
    std::string type = with == std::string::npos ? text : text.substr(with + 4);
    if (!type.empty() && type.back() == ']') type.pop_back();
    Record r{};
    r.magic = record_magic;
    r.version = version;
    r.site = static_cast<uint32_t>(site);
    r.kind = static_cast<uint32_t>(Kind::NotProbed);
    r.k_tile = r.tile_m = r.tile_n = -1;
    r.row_bound = all_rows;
    unsigned char* bytes = reinterpret_cast<unsigned char*>(&r.values);
    const size_t room = sizeof(Record) - offsetof(Record, values) - 1;
    std::memcpy(bytes, type.data(), type.size() < room ? type.size() : room);
    records.push_back(r);
  }
  return err;
}

// The summary section of a build that keeps none.
inline SummaryHeader empty_summary() {
  SummaryHeader header{};
  std::memcpy(header.magic, "KWBSUMMA", 8);
  header.entry_size = sizeof(SummaryEntry);
  return header;
}

#ifdef KWB_TRACE_SUMMARY
// Reads the summary table and folds each row's stripes into one entry, for the rows a
// probe call reached, in site and K-tile order.
inline cudaError_t read_summary(SummaryHeader& header, std::vector<SummaryEntry>& entries) {
  std::vector<SummaryCell> cells(static_cast<size_t>(summary_cells));
  uint4 grid{};
  cudaError_t err = cudaMemcpyFromSymbol(cells.data(), trace_summary, sizeof trace_summary);
  if (err == cudaSuccess) {
    err = cudaMemcpyFromSymbol(&header.dropped, trace_summary_dropped, sizeof header.dropped);
  }
  if (err == cudaSuccess) err = cudaMemcpyFromSymbol(&grid, trace_summary_grid, sizeof grid);
  if (err != cudaSuccess) return err;
  header.k_tiles = KWB_TRACE_SUMMARY_K_TILES;
  if (grid.w != 0u) {
    header.grid_x = grid.x;
    header.grid_y = grid.y;
    header.grid_z = grid.z;
  }
  // A linear CTA id as (x, y, z); -1s when the grid is unknown.
  const auto place = [&header](unsigned linear, int32_t& x, int32_t& y, int32_t& z) {
    if (header.grid_x == 0u || header.grid_y == 0u) {
      x = y = z = -1;
      return;
    }
    x = static_cast<int32_t>(linear % header.grid_x);
    y = static_cast<int32_t>(linear / header.grid_x % header.grid_y);
    z = static_cast<int32_t>(linear / header.grid_x / header.grid_y);
  };
  constexpr int rows = KWB_TRACE_SUMMARY_K_TILES;
  constexpr int sites = KWB_TRACE_SUMMARY_SITES;
  constexpr unsigned long long values_mask = (1ull << summary_call_shift) - 1ull;
  for (int site = 0; site < sites; ++site) {
    for (int row = 0; row < rows; ++row) {
      SummaryEntry e{};
      unsigned long long peak = 0, filtered = 0;
      unsigned bad = 0;
      bool reached = false;
      for (int s = 0; s < KWB_TRACE_SUMMARY_STRIPES; ++s) {
        const SummaryCell& c = cells[(static_cast<size_t>(s) * sites + site) * rows + row];
        if (c.count == 0) continue;  // no call reached this stripe
        reached = true;
        e.kind = c.kind;
        e.tag = c.tag;
        e.probes += c.count >> summary_call_shift;
        e.count += c.count & values_mask;
        filtered += c.filtered;
        e.nan_count += c.nans;
        e.inf_count += c.infs;
        peak = c.peak > peak ? c.peak : peak;
        bad = c.bad > bad ? c.bad : bad;
      }
      if (!reached) continue;
      e.site = static_cast<uint32_t>(site);
      e.seen = e.count + filtered;
      e.k_tile = row - 1;
      e.k_end = row == rows - 1 ? INT_MAX : row;
      const uint32_t absmax_bits = static_cast<uint32_t>(peak >> 32);
      std::memcpy(&e.absmax, &absmax_bits, sizeof e.absmax);
      place(static_cast<unsigned>(peak & 0xffffffffull), e.peak_cta_x, e.peak_cta_y,
            e.peak_cta_z);
      if (bad != 0u) {
        place(~bad, e.bad_cta_x, e.bad_cta_y, e.bad_cta_z);
      } else {
        e.bad_cta_x = e.bad_cta_y = e.bad_cta_z = -1;
      }
      entries.push_back(e);
    }
  }
  return cudaSuccess;
}
#endif

}  // namespace detail

// Zeroes the magic of every slot the shard cursors reserved, written or not, so that no
// record of a launch before a reset is read as one of the trace after it (a lease
// reserves slots its warp may never write, and the flush keeps the slots whose magic
// says written). Only reserved slots are touched: a reset does not sweep the whole
// buffer (56 MiB by default) through L2 ahead of a timed launch.
namespace detail {
static __global__ void clear_reserved_slots() {
  constexpr unsigned long long total = per_shard * KWB_TRACE_SHARDS;
  Record* slots = records();
  const unsigned long long step = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
       i < total; i += step) {
    const unsigned long long shard = i / per_shard;
    if (i - shard * per_shard < trace_cursor[shard * cursor_words]) slots[i].magic = 0u;
  }
}
}  // namespace detail

// Registers a site table; returns true so it can initialize a static.
inline bool register_sites(const SiteInfo* sites, size_t count) {
  detail::site_registry().insert(detail::site_registry().end(), sites, sites + count);
  return true;
}
template <size_t N>
inline bool register_sites(const SiteInfo (&sites)[N]) {
  return register_sites(sites, N);
}

// With KWB_TRACE_MAPPED: maps the record buffer into host memory now (so records
// outlive a device fault); true once it is. Without it: false, nothing to do.
inline bool trace_map() {
#ifdef KWB_TRACE_MAPPED
  return detail::map_records();
#else
  return false;
#endif
}

// Empties the trace buffer in stream order, without waiting: a kernel that clears the
// slots the shard cursors reserved, then memsets of the cursors (in a full-tile build
// also of the tile cursor and drop count, in a summary build of the summary table),
// queued on `stream`. For a loop of launches that should each write their records, e.g. a timed
// loop, where trace_reset()'s wait would stall the queue. With
// KWB_TRACE_MAPPED it also clears the mapped records through their device mapping.
inline cudaError_t trace_reset_async(cudaStream_t stream = 0) {
  detail::arm_exit_flush_late();
  const auto clear = [stream](const auto& symbol, size_t bytes) {
    void* at = nullptr;
    cudaError_t err = cudaGetSymbolAddress(&at, symbol);
    return err == cudaSuccess ? cudaMemsetAsync(at, 0, bytes, stream) : err;
  };
  cudaError_t err = cudaSuccess;
  if constexpr (!summary) {
    detail::clear_reserved_slots<<<256, 256, 0, stream>>>();
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = clear(trace_cursor, sizeof trace_cursor);
  if (err == cudaSuccess) err = clear(trace_unprobed, sizeof trace_unprobed);
#ifdef KWB_TRACE_FULL
  if (err == cudaSuccess) err = clear(trace_tile_cursor, sizeof trace_tile_cursor);
  if (err == cudaSuccess) err = clear(trace_tile_dropped, sizeof trace_tile_dropped);
#endif
#ifdef KWB_TRACE_SUMMARY
  if (err == cudaSuccess) err = clear(trace_summary, sizeof trace_summary);
  if (err == cudaSuccess) err = clear(trace_summary_dropped, sizeof trace_summary_dropped);
  if (err == cudaSuccess) err = clear(trace_summary_grid, sizeof trace_summary_grid);
#endif
#ifdef KWB_TRACE_MAPPED
  void* mapped = nullptr;
  if (err == cudaSuccess && detail::map_records() &&
      (err = cudaHostGetDevicePointer(&mapped, detail::mapped_host(), 0)) == cudaSuccess) {
    err = cudaMemsetAsync(mapped, 0, detail::mapped_bytes, stream);
  }
#endif
  return err;
}

// Empties the trace buffer and waits until it is: trace_reset_async on the default
// stream, then a synchronize. Call it before the launches to trace.
inline cudaError_t trace_reset() {
  const cudaError_t err = trace_reset_async(0);
  return err == cudaSuccess ? cudaStreamSynchronize(0) : err;
}

// Sets the runtime filter for the following launches.
inline cudaError_t set_filter(const Filter& filter) {
  detail::arm_exit_flush_late();
  (void)trace_map();
  return cudaMemcpyToSymbol(trace_filter, &filter, sizeof filter);
}

// Records only CTA (cta_x, cta_y, cta_z) (each coordinate may be kwb::any) and the K
// tiles in [k_begin, k_end).
inline cudaError_t set_filter(int cta_x, int cta_y, int cta_z, int k_begin = 0,
                              int k_end = INT_MAX) {
  return set_filter(Filter{cta_x, cta_y, cta_z, k_begin, k_end, 1u});
}

// Waits for the device, reads the trace buffer and writes the trace file to `path`.
// Returns false, with a one-line reason on stderr, when it cannot.
inline bool trace_flush(const char* path) {
  if (path == nullptr || *path == '\0') return detail::fail("trace flush", "no path");
  std::vector<unsigned long long> lines(sizeof trace_cursor / sizeof(unsigned long long), 0ull);
  std::vector<unsigned long long> cursors(KWB_TRACE_SHARDS, 0ull);
  unsigned long long dropped = 0;
  cudaError_t err = cudaDeviceSynchronize();
#ifdef KWB_TRACE_MAPPED
  if (err != cudaSuccess && detail::mapped_host() != nullptr) {
    return detail::flush_after_fault(path, err);
  }
#endif
  if (err == cudaSuccess) err = cudaMemcpyFromSymbol(lines.data(), trace_cursor, sizeof trace_cursor);
  constexpr unsigned long long per_shard = detail::per_shard;
  // Per shard, the slots reserved (word 0 of its line) and the records dropped because
  // it was full (word 1; without leases, what the cursor counted past the shard's end).
  for (int s = 0; s < KWB_TRACE_SHARDS; ++s) {
    cursors[s] = lines[static_cast<size_t>(s) * cursor_words];
    if constexpr (lease_records == 0) {
      dropped += cursors[s] > per_shard ? cursors[s] - per_shard : 0ull;
    } else {
      dropped += lines[static_cast<size_t>(s) * cursor_words + 1];
    }
  }
  // The shards' reserved prefixes, one after another (each warp's records stay in the
  // order it appended them).
  std::vector<Record> records;
  std::vector<size_t> first(KWB_TRACE_SHARDS, 0);  // each shard's first slot in `records`
  for (int s = 0; s < KWB_TRACE_SHARDS && err == cudaSuccess; ++s) {
    const size_t n = static_cast<size_t>(cursors[s] < per_shard ? cursors[s] : per_shard);
    first[static_cast<size_t>(s)] = records.size();
    if (n == 0) continue;
    const size_t at = records.size();
    records.resize(at + n);
#ifdef KWB_TRACE_MAPPED
    if (detail::mapped_host() != nullptr) {
      std::memcpy(records.data() + at, detail::mapped_host() + static_cast<size_t>(s) * per_shard,
                  n * sizeof(Record));
      continue;
    }
#endif
    err = cudaMemcpyFromSymbol(records.data() + at, trace_records, n * sizeof(Record),
                               static_cast<size_t>(s) * per_shard * sizeof(Record));
  }
  // Only written slots hold records: a lease may reserve slots its warp never writes.
  // file_index: each slot's record's index in the file, ~0u for an empty slot.
  std::vector<uint32_t> file_index(records.size(), ~0u);
  size_t kept_records = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].magic != record_magic) continue;
    file_index[i] = static_cast<uint32_t>(kept_records);
    records[kept_records++] = records[i];
  }
  records.resize(kept_records);
  // The full-tile values, their records renumbered from buffer slots to file order.
  TileHeader tiles{};
  std::memcpy(tiles.magic, "KWBTILES", 8);
  tiles.value_size = sizeof(TileValue);
  std::vector<TileValue> values;
#ifdef KWB_TRACE_FULL
  unsigned long long tile_cursor = 0;
  if (err == cudaSuccess) err = cudaMemcpyFromSymbol(&tile_cursor, trace_tile_cursor, sizeof tile_cursor);
  if (err == cudaSuccess) {
    err = cudaMemcpyFromSymbol(&tiles.dropped, trace_tile_dropped, sizeof tiles.dropped);
  }
  tiles.capacity = KWB_TRACE_TILE_CAPACITY;
  const size_t kept = static_cast<size_t>(
      tile_cursor < KWB_TRACE_TILE_CAPACITY ? tile_cursor : KWB_TRACE_TILE_CAPACITY);
  if (err == cudaSuccess && kept != 0) {
    values.resize(kept);
    err = cudaMemcpyFromSymbol(values.data(), trace_tile_values, kept * sizeof(TileValue));
  }
  size_t written = 0;
  for (const TileValue& v : values) {
    if (v.record == ~0u) continue;  // reserved, not written: counted as dropped
    const size_t shard = v.record / per_shard;
    const size_t index = v.record % per_shard;
    if (shard >= static_cast<size_t>(KWB_TRACE_SHARDS)) continue;
    const size_t filled = static_cast<size_t>(cursors[shard] < per_shard ? cursors[shard] : per_shard);
    if (index >= filled || file_index[first[shard] + index] == ~0u) continue;
    TileValue kept_value = v;
    kept_value.record = file_index[first[shard] + index];
    values[written++] = kept_value;
  }
  values.resize(written);
#endif
  tiles.count = values.size();
  if (err == cudaSuccess) err = detail::read_unprobed(records);
  SummaryHeader summary_header = detail::empty_summary();
  std::vector<SummaryEntry> entries;
#ifdef KWB_TRACE_SUMMARY
  if (err == cudaSuccess) err = detail::read_summary(summary_header, entries);
#endif
  if (err != cudaSuccess) {
    return detail::fail(
        "cannot read the trace buffer (a device fault loses it; build with "
        "-DKWB_TRACE_MAPPED to keep the records that landed)",
        cudaGetErrorString(err));
  }
  if (dropped != 0) {
    std::fprintf(stderr,
                 "kwb: warning: %llu trace records dropped (kept %zu): the buffer of %d records "
                 "in %d shards was full; rebuild with -DKWB_TRACE_CAPACITY=N (or trace fewer "
                 "CTAs or K tiles)\n",
                 dropped, records.size(), static_cast<int>(KWB_TRACE_CAPACITY),
                 static_cast<int>(KWB_TRACE_SHARDS));
  }
  return detail::write_trace(path, records, dropped, tiles, values, summary_header, entries);
}

namespace detail {
// The registered sites, one per id.
inline std::vector<SiteInfo> sites_by_id() {
  std::vector<SiteInfo> sites = detail::site_registry();
  std::stable_sort(sites.begin(), sites.end(),
                   [](const SiteInfo& a, const SiteInfo& b) { return a.id < b.id; });
  sites.erase(std::unique(sites.begin(), sites.end(),
                          [](const SiteInfo& a, const SiteInfo& b) { return a.id == b.id; }),
              sites.end());
  return sites;
}

// Writes the trace file: header, site table, records, full-tile section, summary section.
inline bool write_trace(const char* path, const std::vector<Record>& records,
                        unsigned long long dropped, TileHeader tiles,
                        const std::vector<TileValue>& values, SummaryHeader summary_header,
                        const std::vector<SummaryEntry>& entries) {
  const size_t count = records.size();
  const std::vector<SiteInfo> sites = sites_by_id();
  std::vector<unsigned char> table;
  for (const SiteInfo& site : sites) {
    const char* file = site.file != nullptr ? site.file : "";
    const char* text = site.text != nullptr ? site.text : "";
    const SiteEntry entry{site.id, site.line, static_cast<uint32_t>(std::strlen(file)),
                          static_cast<uint32_t>(std::strlen(text))};
    detail::append(table, &entry, sizeof entry);
    detail::append(table, file, entry.file_len);
    detail::append(table, text, entry.text_len);
    table.resize((table.size() + 7) / 8 * 8, 0);
  }

  FileHeader header{};
  std::memcpy(header.magic, "KWBTRACE", 8);
  header.version = version;
  header.record_size = sizeof(Record);
  header.record_count = count;
  header.dropped = dropped;
  header.capacity = KWB_TRACE_CAPACITY;
  header.site_count = static_cast<uint32_t>(sites.size());
  header.site_table_bytes = static_cast<uint32_t>(table.size());

  std::FILE* out = std::fopen(path, "wb");
  if (out == nullptr) return detail::fail("cannot create the trace file", path);
  bool ok = std::fwrite(&header, sizeof header, 1, out) == 1;
  ok = ok && (table.empty() || std::fwrite(table.data(), table.size(), 1, out) == 1);
  ok = ok && (count == 0 || std::fwrite(records.data(), sizeof(Record), count, out) == count);
  ok = ok && std::fwrite(&tiles, sizeof tiles, 1, out) == 1;
  ok = ok && (values.empty() ||
              std::fwrite(values.data(), sizeof(TileValue), values.size(), out) == values.size());
  summary_header.count = entries.size();
  ok = ok && std::fwrite(&summary_header, sizeof summary_header, 1, out) == 1;
  ok = ok && (entries.empty() || std::fwrite(entries.data(), sizeof(SummaryEntry), entries.size(),
                                             out) == entries.size());
  ok = (std::fclose(out) == 0) && ok;
  if (!ok) return detail::fail("cannot write the trace file", path);
  return true;
}

#ifdef KWB_TRACE_MAPPED
// After a device fault the device is gone, but the mapped records are host memory:
// every complete record (its header written last) goes to the file, and stderr names
// the fault and the last record of each warp that wrote one.
inline bool flush_after_fault(const char* path, cudaError_t fault) {
  const Record* host = mapped_host();
  constexpr size_t per_shard = KWB_TRACE_CAPACITY / KWB_TRACE_SHARDS;
  std::vector<Record> records;
  for (size_t i = 0; i < static_cast<size_t>(KWB_TRACE_CAPACITY); ++i) {
    if (host[i].magic == record_magic && host[i].version == version) records.push_back(host[i]);
  }
  TileHeader tiles{};
  std::memcpy(tiles.magic, "KWBTILES", 8);
  tiles.value_size = sizeof(TileValue);
  const bool written = write_trace(path, records, 0, tiles, {}, empty_summary(), {});
  std::fprintf(stderr,
               "kwb: the device faulted (%s: %s); %zu trace records had landed in mapped host "
               "memory%s%s\n",
               cudaGetErrorName(fault), cudaGetErrorString(fault), records.size(),
               written ? " and are in " : "", written ? path : "");
  // The last record of each (CTA, warp): a warp's records fill its shard in order.
  const std::vector<SiteInfo> sites = sites_by_id();
  int shown = 0;
  for (size_t shard = 0; shard < static_cast<size_t>(KWB_TRACE_SHARDS) && shown < 16; ++shard) {
    const Record* last = nullptr;
    // Slots a lease reserved and its warp never wrote are empty: look past them.
    for (size_t i = shard * per_shard; i < (shard + 1) * per_shard; ++i) {
      if (host[i].magic == record_magic) last = &host[i];
    }
    if (last == nullptr) continue;
    const SiteInfo* site = nullptr;
    for (const SiteInfo& s : sites) {
      if (s.id == last->site) site = &s;
    }
    std::fprintf(stderr,
                 "kwb:   last record of CTA (%u, %u, %u) warp %u: site %u (%s:%u `%s`), "
                 "K tile %d, %u values, absmax %g, NaN %u, Inf %u\n",
                 last->cta_x, last->cta_y, last->cta_z, last->warp, last->site,
                 site != nullptr && site->file != nullptr ? site->file : "?",
                 site != nullptr ? site->line : 0u,
                 site != nullptr && site->text != nullptr ? site->text : "",
                 last->k_tile, last->count, static_cast<double>(last->absmax), last->nan_count,
                 last->inf_count);
    ++shown;
  }
  return written;
}
#endif
}  // namespace detail

namespace detail {
// Flushes to $KWB_TRACE_OUT once, at process exit, when it is set.
inline void flush_at_exit() {
  static bool done = false;
  if (done) return;
  done = true;
  const char* path = std::getenv("KWB_TRACE_OUT");
  if (path == nullptr || *path == '\0') return;
#ifdef KWB_TRACE_UNIT
  // Units of one program flush in turn: the first to $KWB_TRACE_OUT, then .1, .2, ….
  const int n = kwb_trace_units_flushed++;
  if (n > 0) {
    const std::string numbered = std::string(path) + "." + std::to_string(n);
    if (trace_flush(numbered.c_str())) {
      std::fprintf(stderr, "kwb: this program has several traced units; one more trace: %s\n",
                   numbered.c_str());
    }
    return;
  }
#endif
  trace_flush(path);
}
}  // namespace detail

#ifdef KWB_TRACE_UNIT
// This unit in the program's list, so kwb_trace_reset/kwb_trace_flush reach every unit.
namespace detail {
inline cudaError_t set_cta(int cta_x, int cta_y, int cta_z) {
  return set_filter(cta_x, cta_y, cta_z);
}
inline KwbTraceUnit unit_entry{&trace_reset, &trace_reset_async, &trace_flush, nullptr, &set_cta};
inline const bool unit_listed = [] {
  unit_entry.next = kwb_trace_unit_list;
  kwb_trace_unit_list = &unit_entry;
  return true;
}();
}  // namespace detail
#endif

#else  // !KWB_TRACE: host stubs that do nothing.

inline constexpr bool register_sites(const SiteInfo*, size_t) { return true; }
template <size_t N>
inline constexpr bool register_sites(const SiteInfo (&)[N]) {
  return true;
}
inline cudaError_t trace_reset() { return cudaSuccess; }
inline cudaError_t trace_reset_async(cudaStream_t = 0) { return cudaSuccess; }
inline cudaError_t set_filter(const Filter&) { return cudaSuccess; }
inline cudaError_t set_filter(int, int, int, int = 0, int = INT_MAX) { return cudaSuccess; }
// Writes nothing: the build has no trace. Returns false.
inline bool trace_flush(const char*) { return false; }

#endif  // KWB_TRACE
#endif  // !__CUDACC_RTC__

#ifdef KWB_TRACE_UNIT
}  // inline namespace KWB_TRACE_UNIT
#endif
}  // namespace kwb

#if !defined(__CUDACC_RTC__)
// The host entry points under the names harness code uses.
#if defined(KWB_TRACE) && defined(KWB_TRACE_UNIT)
// Every traced unit of the program: reset them all; flush the first to `path`, the
// others to `path`.1, .2, ….
inline cudaError_t kwb_trace_reset() {
  cudaError_t err = cudaSuccess;
  for (KwbTraceUnit* u = kwb_trace_unit_list; u != nullptr; u = u->next) {
    const cudaError_t e = u->reset();
    if (err == cudaSuccess) err = e;
  }
  return err;
}
inline cudaError_t kwb_trace_reset_async(cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  for (KwbTraceUnit* u = kwb_trace_unit_list; u != nullptr; u = u->next) {
    const cudaError_t e = u->reset_async(stream);
    if (err == cudaSuccess) err = e;
  }
  return err;
}
// Every traced unit records only CTA (cta_x, cta_y, cta_z) (-1: any) from the next
// launch on.
inline cudaError_t kwb_trace_set_cta(int cta_x, int cta_y, int cta_z) {
  cudaError_t err = cudaSuccess;
  for (KwbTraceUnit* u = kwb_trace_unit_list; u != nullptr; u = u->next) {
    const cudaError_t e = u->set_cta(cta_x, cta_y, cta_z);
    if (err == cudaSuccess) err = e;
  }
  return err;
}
inline bool kwb_trace_flush(const char* path) {
  bool ok = true;
  int n = 0;
  for (KwbTraceUnit* u = kwb_trace_unit_list; u != nullptr; u = u->next, ++n) {
    const std::string name = n == 0 ? std::string(path) : std::string(path) + "." + std::to_string(n);
    ok = u->flush(name.c_str()) && ok;
  }
  return ok;
}
#else
inline cudaError_t kwb_trace_reset() { return kwb::trace_reset(); }
inline cudaError_t kwb_trace_reset_async(cudaStream_t stream) {
  return kwb::trace_reset_async(stream);
}
inline bool kwb_trace_flush(const char* path) { return kwb::trace_flush(path); }
inline cudaError_t kwb_trace_set_cta(int cta_x, int cta_y, int cta_z) {
  return kwb::set_filter(cta_x, cta_y, cta_z);
}
#endif
#endif

#endif  // KWB_TRACE_CUH_
