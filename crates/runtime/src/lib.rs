//! The device half of a kwb trace and its Rust mirror.
//!
//! kwb-instrument inserts probes into a CUDA/CUTLASS kernel, each gated at compile
//! time with `if constexpr (kwb::enabled && (GATE))`. The probes, the trace buffer
//! they append to and the host code that writes the trace file are one header,
//! `kwb_trace.cuh` ([`HEADER`]), which the instrumenter emits inline so that the
//! traced file stays self-contained. Without `-DKWB_TRACE` the header defines no
//! device code at all, and the kernel compiles to the same SASS as before.
//!
//! This crate holds that header and mirrors what crosses from the device to Rust:
//! the record layout ([`TraceRecord`], [`RECORD_SIZE`], [`TraceRecord::FIELDS`]),
//! the runtime filter ([`Filter`]), the names of the module globals ([`symbols`]),
//! instantiation tags ([`tag`]) and the versioned trace file ([`decode`],
//! [`encode`]). A test parses the header's struct declarations and checks them
//! against the mirrors, so the two change together.
//!
//! It depends on no other kwb crate and does no IO.

mod error;
pub mod filter;
pub mod layout;
pub mod record;
mod tag;
pub mod trace_file;

pub use crate::error::TraceError;
pub use crate::filter::{FILTER_SIZE, Filter};
pub use crate::layout::Field;
pub use crate::record::{
    Axis, Kind, RECORD_MAGIC, RECORD_SIZE, RECORD_VALUES, Sample, TraceRecord,
};
pub use crate::tag::{UNGATED, tag};
pub use crate::trace_file::{
    FILE_MAGIC, SUMMARY_MAGIC, SiteInfo, SummaryEntry, TILE_MAGIC, TileValue, Trace, decode, encode,
};

/// The text of `kwb_trace.cuh`, for the instrumenter to emit inline or write out.
pub const HEADER: &str = include_str!("../include/kwb_trace.cuh");

/// The header's file name, for an `#include` of a written-out copy.
pub const HEADER_NAME: &str = "kwb_trace.cuh";

/// The text of `kwb_insitu.cuh`: the host code a launch rewritten by
/// `kwb-instrument --insitu` calls, which runs that launch on kwb's inputs inside the
/// user's process and puts the user's data back (host only; no device code).
pub const INSITU_HEADER: &str = include_str!("../include/kwb_insitu.cuh");

/// The version of the record layout and of the trace file (`kwb::version`); version 3
/// added the tile section of `--full-tile` builds, version 4 the summary section of
/// `--summary` builds.
pub const VERSION: u32 = 4;

/// The oldest trace file version [`decode`] reads (version 2: no tile section).
pub const OLDEST_VERSION: u32 = 2;

/// The trace buffer's capacity in records when the build does not set
/// `KWB_TRACE_CAPACITY`.
pub const DEFAULT_CAPACITY: u64 = 262_144;

/// The site ids a summary build's table has rows for when the build does not set
/// `KWB_TRACE_SUMMARY_SITES`; calls of a site past them are only counted.
pub const DEFAULT_SUMMARY_SITES: u32 = 32;

/// The K-tile rows per site of a summary build's table (`KWB_TRACE_SUMMARY_K_TILES`'s
/// default).
pub const DEFAULT_SUMMARY_K_TILES: u32 = 256;

/// The stripes of each row of a summary build's table (`KWB_TRACE_SUMMARY_STRIPES`'s
/// default).
pub const DEFAULT_SUMMARY_STRIPES: u32 = 64;

/// The stripes of a screen's table (`KWB_TRACE_SCREEN`: one row per site, a stripe per
/// warp of the grid; warp w shares the stripe of w + this).
pub const DEFAULT_SCREEN_STRIPES: u32 = 8192;

/// The bytes of one cell of a summary build's table (`kwb::SummaryCell`): the table is
/// this × sites × K-tile rows × stripes of device memory.
pub const SUMMARY_CELL_SIZE: u32 = 64;

/// The macro that turns tracing on (`-DKWB_TRACE`).
pub const ENABLE_MACRO: &str = "KWB_TRACE";

/// The environment variable that makes a traced program flush at exit, to the path
/// it names.
pub const OUT_ENV: &str = "KWB_TRACE_OUT";

/// The names of the trace's module globals in a traced cubin, as the driver API
/// (`cuModuleGetGlobal`) finds them: the header's variables in `namespace kwb`,
/// mangled.
pub mod symbols {
    /// `kwb::trace_records`: `Record[capacity]`.
    pub const RECORDS: &str = "_ZN3kwb13trace_recordsE";
    /// `kwb::trace_cursor`: `u64[KWB_TRACE_SHARDS * 16]`, one 128-byte line per shard
    /// (its records are capacity / shards from s × that): at word 16 × s the slots
    /// shard s's warps reserved (a warp's lease may reserve slots it never writes,
    /// whose records keep magic 0), at word 16 × s + 1 the records dropped because the
    /// shard was full. Built with `KWB_TRACE_LEASE=0`, word 16 × s counts the records
    /// claimed (what passes the shard's capacity was dropped) and word 16 × s + 1
    /// stays 0.
    pub const CURSOR: &str = "_ZN3kwb12trace_cursorE";
    /// `kwb::trace_filter`: a [`Filter`](crate::Filter) in `__constant__` memory.
    pub const FILTER: &str = "_ZN3kwb12trace_filterE";
    /// `kwb::trace_tile_values`: `TileValue[KWB_TRACE_TILE_CAPACITY]` (full-tile builds).
    pub const TILE_VALUES: &str = "_ZN3kwb17trace_tile_valuesE";
    /// `kwb::trace_tile_cursor`: `u64`, the next free tile value.
    pub const TILE_CURSOR: &str = "_ZN3kwb17trace_tile_cursorE";
    /// `kwb::trace_tile_dropped`: `u64`, the tile values not written.
    pub const TILE_DROPPED: &str = "_ZN3kwb18trace_tile_droppedE";
    /// `kwb::trace_summary`: the summary table of a `KWB_TRACE_SUMMARY` build, 64-byte
    /// cells (site-major, then K-tile row, then stripe) that the flush folds into
    /// [`SummaryEntry`](crate::SummaryEntry)s.
    pub const SUMMARY: &str = "_ZN3kwb13trace_summaryE";
}
