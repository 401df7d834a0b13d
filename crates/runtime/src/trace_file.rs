//! The versioned binary trace file that `kwb_trace_flush` writes.
//!
//! Layout, little-endian throughout:
//!
//! 1. a [`FileHeader`] (48 bytes): magic `KWBTRACE`, version, record size, record
//!    count, dropped count, capacity, site count and site table size;
//! 2. the site table: per site a [`SiteEntry`] (16 bytes), the file name bytes, the
//!    source text bytes, zero padding to a multiple of 8;
//! 3. the records, [`RECORD_SIZE`] bytes each, as the device wrote them;
//! 4. from version 3, the tile section: a [`TileHeader`] (40 bytes: magic
//!    `KWBTILES`, count, dropped, capacity, value size) and `count` [`TileValue`]s
//!    (24 bytes each), empty unless the build kept full tiles (`KWB_TRACE_FULL`).
//!
//! 5. from version 4, the summary section: a [`SummaryHeader`] (48 bytes: magic
//!    `KWBSUMMA`, count, dropped, entry size, K-tile rows, grid) and `count`
//!    [`SummaryEntry`]s (96 bytes each), empty unless the build folded its probes
//!    into the summary table (`KWB_TRACE_SUMMARY`).
//!
//! Version 2 files (no tile section) and version 3 files (no summary section) are
//! read too.
//!
//! [`decode`] checks the magic and the version before anything else, so a file of
//! another version is reported as such even when its header has another shape.

use serde::Serialize;

use crate::error::TraceError;
use crate::layout::{Le, mirror};
use crate::record::{Kind, RECORD_MAGIC, RECORD_SIZE, TraceRecord};
use crate::{OLDEST_VERSION, VERSION};

/// The first eight bytes of every trace file.
pub const FILE_MAGIC: [u8; 8] = *b"KWBTRACE";
/// The size of the file header in bytes.
pub const FILE_HEADER_SIZE: usize = 48;
/// The size of a site entry's fixed part in bytes.
pub const SITE_ENTRY_SIZE: usize = 16;
/// The first eight bytes of the tile section.
pub const TILE_MAGIC: [u8; 8] = *b"KWBTILES";
/// The size of the tile section's header in bytes.
pub const TILE_HEADER_SIZE: usize = 40;
/// The size of one tile value in bytes.
pub const TILE_VALUE_SIZE: usize = 24;
/// The first eight bytes of the summary section.
pub const SUMMARY_MAGIC: [u8; 8] = *b"KWBSUMMA";
/// The size of the summary section's header in bytes.
pub const SUMMARY_HEADER_SIZE: usize = 48;
/// The size of one summary entry in bytes.
pub const SUMMARY_ENTRY_SIZE: usize = 96;

mirror! {
    /// The trace file's header, `kwb::FileHeader`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct FileHeader {
        /// [`FILE_MAGIC`].
        pub magic: [u8; 8],
        /// [`VERSION`].
        pub version: u32,
        /// [`RECORD_SIZE`].
        pub record_size: u32,
        /// The records in the file.
        pub record_count: u64,
        /// The records lost because the buffer was full.
        pub dropped: u64,
        /// The buffer's capacity in records (`KWB_TRACE_CAPACITY`).
        pub capacity: u64,
        /// The entries of the site table.
        pub site_count: u32,
        /// The bytes of the site table, a multiple of 8.
        pub site_table_bytes: u32,
    }
}

mirror! {
    /// The fixed part of one site table entry, `kwb::SiteEntry`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SiteEntry {
        /// The site id that records refer to.
        pub id: u32,
        /// The 1-based line of the probed statement.
        pub line: u32,
        /// The bytes of the file name that follow.
        pub file_len: u32,
        /// The bytes of the source text that follow the file name.
        pub text_len: u32,
    }
}

mirror! {
    /// The tile section's header, `kwb::TileHeader`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct TileHeader {
        /// [`TILE_MAGIC`].
        pub magic: [u8; 8],
        /// The values in the section.
        pub count: u64,
        /// The values lost because the tile buffer was full.
        pub dropped: u64,
        /// The tile buffer's capacity (`KWB_TRACE_TILE_CAPACITY`; 0: not a full-tile
        /// build).
        pub capacity: u64,
        /// [`TILE_VALUE_SIZE`].
        pub value_size: u32,
        /// 0.
        pub reserved: u32,
    }
}

mirror! {
    /// One value of a full tile, `kwb::TileValue`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, PartialEq, Serialize)]
    pub struct TileValue {
        /// The record it belongs to: an index into [`Trace::records`].
        pub record: u32,
        /// Its index in the probe: lane rank × values per lane + i for a register
        /// fragment, the element index for a tile.
        pub element: u32,
        /// The value, as float.
        pub value: f32,
        /// Its logical m (-1: unknown).
        pub m: i32,
        /// Its logical n (-1: unknown).
        pub n: i32,
        /// Its logical k (-1: unknown).
        pub k: i32,
    }
}

mirror! {
    /// The summary section's header, `kwb::SummaryHeader`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SummaryHeader {
        /// [`SUMMARY_MAGIC`].
        pub magic: [u8; 8],
        /// The entries in the section.
        pub count: u64,
        /// Probe calls not folded in: their site id was past the table's.
        pub dropped: u64,
        /// [`SUMMARY_ENTRY_SIZE`].
        pub entry_size: u32,
        /// The table's K-tile rows (`KWB_TRACE_SUMMARY_K_TILES`; 0: not a summary build).
        pub k_tiles: u32,
        /// The grid the CTAs' linear ids were decoded with (0: none seen).
        pub grid_x: u32,
        /// See `grid_x`.
        pub grid_y: u32,
        /// See `grid_x`.
        pub grid_z: u32,
        /// 0.
        pub reserved: u32,
    }
}

mirror! {
    /// One site and K tile of a summary build (`KWB_TRACE_SUMMARY`), `kwb::SummaryEntry`:
    /// every probe call of every admitted CTA and warp, folded.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, PartialEq, Serialize)]
    pub struct SummaryEntry {
        /// The probe's site id.
        pub site: u32,
        /// A [`Kind`] number.
        pub kind: u32,
        /// The instantiation tag.
        pub tag: u32,
        /// The first K tile it holds; -1: outside the K loop.
        pub k_tile: i32,
        /// One past the last K tile it holds: `k_tile + 1`, or `i32::MAX` for the
        /// table's last row, which also holds every later K tile.
        pub k_end: i32,
        /// 0.
        pub reserved: u32,
        /// Probe calls (one per warp and call) folded in (each of the table's stripes
        /// counts them modulo 2^24).
        pub probes: u64,
        /// Values that passed the row filter.
        pub count: u64,
        /// Values looked at before the row filter.
        pub seen: u64,
        /// Counted values that are NaN.
        pub nan_count: u64,
        /// Counted values that are ±Inf.
        pub inf_count: u64,
        /// Max |v| over finite counted values (0 when none).
        pub absmax: f32,
        /// A CTA whose values reached `absmax` (-1: the grid is unknown).
        pub peak_cta_x: i32,
        /// See `peak_cta_x`.
        pub peak_cta_y: i32,
        /// See `peak_cta_x`.
        pub peak_cta_z: i32,
        /// The lowest-numbered CTA that counted a NaN or an Inf (-1: none did).
        pub bad_cta_x: i32,
        /// See `bad_cta_x`.
        pub bad_cta_y: i32,
        /// See `bad_cta_x`.
        pub bad_cta_z: i32,
        /// 0.
        pub reserved2: u32,
    }
}

impl SummaryEntry {
    /// What the probe read.
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_u32(self.kind)
    }

    /// Whether the entry also holds every K tile after `k_tile` (the table's last row).
    pub fn holds_later_k_tiles(&self) -> bool {
        self.k_end == i32::MAX
    }

    /// The CTA whose values reached `absmax`, when the grid was known.
    pub fn peak_cta(&self) -> Option<[u32; 3]> {
        cta([self.peak_cta_x, self.peak_cta_y, self.peak_cta_z])
    }

    /// The lowest-numbered CTA that counted a NaN or an Inf.
    pub fn bad_cta(&self) -> Option<[u32; 3]> {
        cta([self.bad_cta_x, self.bad_cta_y, self.bad_cta_z])
    }
}

fn cta(c: [i32; 3]) -> Option<[u32; 3]> {
    Some([
        u32::try_from(c[0]).ok()?,
        u32::try_from(c[1]).ok()?,
        u32::try_from(c[2]).ok()?,
    ])
}

const _: () = assert!(std::mem::size_of::<FileHeader>() == FILE_HEADER_SIZE);
const _: () = assert!(std::mem::size_of::<SummaryHeader>() == SUMMARY_HEADER_SIZE);
const _: () = assert!(std::mem::size_of::<SummaryEntry>() == SUMMARY_ENTRY_SIZE);
const _: () = assert!(std::mem::size_of::<TileHeader>() == TILE_HEADER_SIZE);
const _: () = assert!(std::mem::size_of::<TileValue>() == TILE_VALUE_SIZE);
const _: () = assert!(std::mem::size_of::<SiteEntry>() == SITE_ENTRY_SIZE);

/// One probe site: where the instrumenter put it and what it reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SiteInfo {
    /// The id that records carry in `site`.
    pub id: u32,
    /// The source file of the probed statement.
    pub file: String,
    /// Its 1-based line.
    pub line: u32,
    /// Its source text.
    pub text: String,
}

/// A decoded trace file.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Trace {
    /// The site table, in file order (sorted by id when the header wrote it).
    pub sites: Vec<SiteInfo>,
    /// The records, in the order the warps appended them. [`decode`] gives a record
    /// without a tile origin that of its warp's last [`Kind::TileContext`] record.
    pub records: Vec<TraceRecord>,
    /// Records lost because the buffer was full.
    pub dropped: u64,
    /// The buffer's capacity in records.
    pub capacity: u64,
    /// Full-tile values (`--full-tile` builds), in the order the warps wrote them.
    pub tiles: Vec<TileValue>,
    /// Tile values lost because the tile buffer was full.
    pub tile_dropped: u64,
    /// The tile buffer's capacity (0: not a full-tile build, or a version 2 file).
    pub tile_capacity: u64,
    /// A summary build's table (`KWB_TRACE_SUMMARY`), one entry per site and K-tile
    /// row a probe call reached, in site and K-tile order; empty otherwise.
    pub summary: Vec<SummaryEntry>,
    /// Probe calls a summary build could not fold in (site id past its table).
    pub summary_dropped: u64,
    /// The summary table's K-tile rows (0: not a summary build, or a file before
    /// version 4).
    pub summary_k_tiles: u32,
    /// The grid the summary's CTAs were decoded with (zeros: unknown).
    pub summary_grid: [u32; 3],
}

impl Trace {
    /// The site with this id.
    pub fn site(&self, id: u32) -> Option<&SiteInfo> {
        self.sites.iter().find(|site| site.id == id)
    }

    /// For each record, how many records the same warp (same CTA, warp, site and
    /// tag) appended before it. A warp claims its records in program order, so this
    /// numbers the calls of a probe that has no K-tile counter — one inside a device
    /// helper called once per K tile — in the order the warp made them.
    pub fn call_numbers(&self) -> Vec<u32> {
        let mut seen: std::collections::HashMap<(u32, u32, u32, u32, u32, u32), u32> =
            std::collections::HashMap::new();
        self.records
            .iter()
            .map(|r| {
                let n = seen
                    .entry((r.site, r.tag, r.cta_x, r.cta_y, r.cta_z, r.warp))
                    .or_insert(0);
                *n += 1;
                *n - 1
            })
            .collect()
    }
}

/// Decodes a trace file.
pub fn decode(bytes: &[u8]) -> Result<Trace, TraceError> {
    let len = bytes.len();
    let need = |what: &'static str, offset: usize, needed: usize| match offset.checked_add(needed) {
        Some(end) if end <= len => Ok(&bytes[offset..end]),
        _ => Err(TraceError::Truncated {
            what,
            offset,
            needed,
            len,
        }),
    };

    let prefix = &bytes[..len.min(FILE_MAGIC.len())];
    if !FILE_MAGIC.starts_with(prefix) {
        return Err(TraceError::BadMagic {
            found: prefix.escape_ascii().to_string(),
        });
    }
    let mut le = Le::new(need("file header", 0, 12)?);
    let _magic: [u8; 8] = le.array();
    let version = le.u32();
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(TraceError::Version {
            found: version,
            expected: VERSION,
        });
    }

    let header = file_header(need("file header", 0, FILE_HEADER_SIZE)?);
    if header.record_size as usize != RECORD_SIZE {
        return Err(TraceError::RecordSize {
            found: header.record_size,
            expected: RECORD_SIZE,
            version,
        });
    }

    let table = need(
        "site table",
        FILE_HEADER_SIZE,
        header.site_table_bytes as usize,
    )?;
    let sites = site_table(table, header.site_count)?;

    let records_at = FILE_HEADER_SIZE + table.len();
    let records_len = usize::try_from(header.record_count)
        .ok()
        .and_then(|count| count.checked_mul(RECORD_SIZE))
        .unwrap_or(usize::MAX);
    let record_bytes = need("records", records_at, records_len)?;
    let mut at = records_at + records_len;
    let (tiles, tile_dropped, tile_capacity) = if version >= 3 {
        let section = tile_section(bytes, at, header.record_count)?;
        at = section.3;
        (section.0, section.1, section.2)
    } else {
        (Vec::new(), 0, 0)
    };
    let summary = if version >= 4 {
        let (section, end) = summary_section(bytes, at)?;
        at = end;
        section
    } else {
        SummarySection::default()
    };
    let extra = len - at;
    if extra != 0 {
        return Err(TraceError::TrailingBytes { extra });
    }
    let mut records = record_bytes
        .chunks_exact(RECORD_SIZE)
        .enumerate()
        .map(|(index, chunk)| {
            let mut bytes = [0; RECORD_SIZE];
            bytes.copy_from_slice(chunk);
            let record = TraceRecord::from_le_bytes(&bytes);
            if record.magic != RECORD_MAGIC || record.version != version {
                return Err(TraceError::BadRecord {
                    index,
                    magic: record.magic,
                    version: record.version,
                    expected: version,
                });
            }
            Ok(record)
        })
        .collect::<Result<Vec<_>, _>>()?;
    place_in_contexts(&mut records);

    Ok(Trace {
        sites,
        records,
        dropped: header.dropped,
        capacity: header.capacity,
        tiles,
        tile_dropped,
        tile_capacity,
        summary: summary.entries,
        summary_dropped: summary.dropped,
        summary_k_tiles: summary.k_tiles,
        summary_grid: summary.grid,
    })
}

/// A decoded summary section.
#[derive(Default)]
struct SummarySection {
    entries: Vec<SummaryEntry>,
    dropped: u64,
    k_tiles: u32,
    grid: [u32; 3],
}

/// The summary section at `at` and the offset past it.
fn summary_section(bytes: &[u8], at: usize) -> Result<(SummarySection, usize), TraceError> {
    let len = bytes.len();
    let corrupt = |reason: String| TraceError::BadSummary { reason };
    let head = bytes
        .get(at..at + SUMMARY_HEADER_SIZE)
        .ok_or(TraceError::Truncated {
            what: "summary section",
            offset: at,
            needed: SUMMARY_HEADER_SIZE,
            len,
        })?;
    let mut le = Le::new(head);
    let header = SummaryHeader {
        magic: le.array(),
        count: le.u64(),
        dropped: le.u64(),
        entry_size: le.u32(),
        k_tiles: le.u32(),
        grid_x: le.u32(),
        grid_y: le.u32(),
        grid_z: le.u32(),
        reserved: le.u32(),
    };
    if header.magic != SUMMARY_MAGIC {
        return Err(corrupt(format!(
            "magic {:?}, expected KWBSUMMA",
            header.magic.escape_ascii().to_string()
        )));
    }
    if header.entry_size as usize != SUMMARY_ENTRY_SIZE {
        return Err(corrupt(format!(
            "{}-byte entries, expected {SUMMARY_ENTRY_SIZE}",
            header.entry_size
        )));
    }
    let entries_at = at + SUMMARY_HEADER_SIZE;
    let entries_len = usize::try_from(header.count)
        .ok()
        .and_then(|count| count.checked_mul(SUMMARY_ENTRY_SIZE))
        .unwrap_or(usize::MAX);
    let end = entries_at
        .checked_add(entries_len)
        .filter(|end| *end <= len)
        .ok_or(TraceError::Truncated {
            what: "summary entries",
            offset: entries_at,
            needed: entries_len,
            len,
        })?;
    let mut entries = Vec::new();
    for (index, chunk) in bytes[entries_at..end]
        .chunks_exact(SUMMARY_ENTRY_SIZE)
        .enumerate()
    {
        let mut le = Le::new(chunk);
        let entry = SummaryEntry {
            site: le.u32(),
            kind: le.u32(),
            tag: le.u32(),
            k_tile: le.i32(),
            k_end: le.i32(),
            reserved: le.u32(),
            probes: le.u64(),
            count: le.u64(),
            seen: le.u64(),
            nan_count: le.u64(),
            inf_count: le.u64(),
            absmax: le.f32(),
            peak_cta_x: le.i32(),
            peak_cta_y: le.i32(),
            peak_cta_z: le.i32(),
            bad_cta_x: le.i32(),
            bad_cta_y: le.i32(),
            bad_cta_z: le.i32(),
            reserved2: le.u32(),
        };
        if entry.k_end <= entry.k_tile {
            return Err(corrupt(format!(
                "entry {index} holds K tiles {}..{}",
                entry.k_tile, entry.k_end
            )));
        }
        entries.push(entry);
    }
    let section = SummarySection {
        entries,
        dropped: header.dropped,
        k_tiles: header.k_tiles,
        grid: [header.grid_x, header.grid_y, header.grid_z],
    };
    Ok((section, end))
}

/// Gives each record that has no tile origin (`tile_m` and `tile_n` both -1) the origin
/// of the last [`Kind::TileContext`] record its warp (CTA, warp) appended before it, if
/// that context has one. A warp appends its records in program order, and `records`
/// are in the order they were appended, so "before" is the warp's own order.
fn place_in_contexts(records: &mut [TraceRecord]) {
    use std::collections::HashMap;
    let mut current: HashMap<(u32, u32, u32, u32), (i32, i32)> = HashMap::new();
    for r in records.iter_mut() {
        let warp = (r.cta_x, r.cta_y, r.cta_z, r.warp);
        if r.kind() == Some(Kind::TileContext) {
            current.insert(warp, (r.tile_m, r.tile_n));
        } else if (r.tile_m, r.tile_n) == (-1, -1)
            && let Some(&origin) = current.get(&warp)
        {
            (r.tile_m, r.tile_n) = origin;
        }
    }
}

/// The tile section at `at`: its values (each checked to name a record), dropped
/// count, capacity, and the offset past it.
fn tile_section(
    bytes: &[u8],
    at: usize,
    records: u64,
) -> Result<(Vec<TileValue>, u64, u64, usize), TraceError> {
    let len = bytes.len();
    let corrupt = |reason: String| TraceError::BadTiles { reason };
    let head = bytes
        .get(at..at + TILE_HEADER_SIZE)
        .ok_or(TraceError::Truncated {
            what: "tile section",
            offset: at,
            needed: TILE_HEADER_SIZE,
            len,
        })?;
    let mut le = Le::new(head);
    let header = TileHeader {
        magic: le.array(),
        count: le.u64(),
        dropped: le.u64(),
        capacity: le.u64(),
        value_size: le.u32(),
        reserved: le.u32(),
    };
    if header.magic != TILE_MAGIC {
        return Err(corrupt(format!(
            "magic {:?}, expected KWBTILES",
            header.magic.escape_ascii().to_string()
        )));
    }
    if header.value_size as usize != TILE_VALUE_SIZE {
        return Err(corrupt(format!(
            "{}-byte values, expected {TILE_VALUE_SIZE}",
            header.value_size
        )));
    }
    let values_at = at + TILE_HEADER_SIZE;
    let values_len = usize::try_from(header.count)
        .ok()
        .and_then(|count| count.checked_mul(TILE_VALUE_SIZE))
        .unwrap_or(usize::MAX);
    let end = values_at
        .checked_add(values_len)
        .filter(|end| *end <= len)
        .ok_or(TraceError::Truncated {
            what: "tile values",
            offset: values_at,
            needed: values_len,
            len,
        })?;
    let mut values = Vec::new();
    for (index, chunk) in bytes[values_at..end]
        .chunks_exact(TILE_VALUE_SIZE)
        .enumerate()
    {
        let mut le = Le::new(chunk);
        let value = TileValue {
            record: le.u32(),
            element: le.u32(),
            value: le.f32(),
            m: le.i32(),
            n: le.i32(),
            k: le.i32(),
        };
        if u64::from(value.record) >= records {
            return Err(corrupt(format!(
                "value {index} belongs to record {}, the file has {records}",
                value.record
            )));
        }
        values.push(value);
    }
    Ok((values, header.dropped, header.capacity, end))
}

/// Encodes a trace as `kwb_trace_flush` writes it, at [`VERSION`] (so a trace decoded
/// from an older file is written as a current one); [`decode`] reads it back.
pub fn encode(trace: &Trace) -> Vec<u8> {
    let mut table = Vec::new();
    for site in &trace.sites {
        for word in [
            site.id,
            site.line,
            len_u32(site.file.len()),
            len_u32(site.text.len()),
        ] {
            table.extend_from_slice(&word.to_le_bytes());
        }
        table.extend_from_slice(site.file.as_bytes());
        table.extend_from_slice(site.text.as_bytes());
        table.resize(table.len().next_multiple_of(8), 0);
    }

    let mut out =
        Vec::with_capacity(FILE_HEADER_SIZE + table.len() + trace.records.len() * RECORD_SIZE);
    out.extend_from_slice(&FILE_MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&len_u32(RECORD_SIZE).to_le_bytes());
    out.extend_from_slice(&(trace.records.len() as u64).to_le_bytes());
    out.extend_from_slice(&trace.dropped.to_le_bytes());
    out.extend_from_slice(&trace.capacity.to_le_bytes());
    out.extend_from_slice(&len_u32(trace.sites.len()).to_le_bytes());
    out.extend_from_slice(&len_u32(table.len()).to_le_bytes());
    out.extend_from_slice(&table);
    // Records read from an older file carry its version: written here, they are
    // records of this one.
    for record in &trace.records {
        let current = TraceRecord {
            version: VERSION,
            ..*record
        };
        out.extend_from_slice(&current.to_le_bytes());
    }
    out.extend_from_slice(&TILE_MAGIC);
    out.extend_from_slice(&(trace.tiles.len() as u64).to_le_bytes());
    out.extend_from_slice(&trace.tile_dropped.to_le_bytes());
    out.extend_from_slice(&trace.tile_capacity.to_le_bytes());
    out.extend_from_slice(&len_u32(TILE_VALUE_SIZE).to_le_bytes());
    out.extend_from_slice(&0_u32.to_le_bytes());
    for v in &trace.tiles {
        out.extend_from_slice(&v.record.to_le_bytes());
        out.extend_from_slice(&v.element.to_le_bytes());
        out.extend_from_slice(&v.value.to_le_bytes());
        for c in [v.m, v.n, v.k] {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
    out.extend_from_slice(&SUMMARY_MAGIC);
    out.extend_from_slice(&(trace.summary.len() as u64).to_le_bytes());
    out.extend_from_slice(&trace.summary_dropped.to_le_bytes());
    out.extend_from_slice(&len_u32(SUMMARY_ENTRY_SIZE).to_le_bytes());
    out.extend_from_slice(&trace.summary_k_tiles.to_le_bytes());
    for word in trace.summary_grid {
        out.extend_from_slice(&word.to_le_bytes());
    }
    out.extend_from_slice(&0_u32.to_le_bytes());
    for e in &trace.summary {
        for word in [e.site, e.kind, e.tag] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&e.k_tile.to_le_bytes());
        out.extend_from_slice(&e.k_end.to_le_bytes());
        out.extend_from_slice(&e.reserved.to_le_bytes());
        for word in [e.probes, e.count, e.seen, e.nan_count, e.inf_count] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&e.absmax.to_le_bytes());
        for c in [
            e.peak_cta_x,
            e.peak_cta_y,
            e.peak_cta_z,
            e.bad_cta_x,
            e.bad_cta_y,
            e.bad_cta_z,
        ] {
            out.extend_from_slice(&c.to_le_bytes());
        }
        out.extend_from_slice(&e.reserved2.to_le_bytes());
    }
    out
}

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).expect("trace parts are far below 4 GiB")
}

fn file_header(bytes: &[u8]) -> FileHeader {
    let mut le = Le::new(bytes);
    FileHeader {
        magic: le.array(),
        version: le.u32(),
        record_size: le.u32(),
        record_count: le.u64(),
        dropped: le.u64(),
        capacity: le.u64(),
        site_count: le.u32(),
        site_table_bytes: le.u32(),
    }
}

fn site_table(table: &[u8], count: u32) -> Result<Vec<SiteInfo>, TraceError> {
    let corrupt = |reason: String| TraceError::BadSiteTable { reason };
    let mut sites = Vec::new();
    let mut offset = 0;
    for index in 0..count {
        let fixed = table
            .get(offset..offset + SITE_ENTRY_SIZE)
            .ok_or_else(|| corrupt(format!("entry {index} starts past the table's end")))?;
        let mut le = Le::new(fixed);
        let entry = SiteEntry {
            id: le.u32(),
            line: le.u32(),
            file_len: le.u32(),
            text_len: le.u32(),
        };
        let file_at = offset + SITE_ENTRY_SIZE;
        let text_at = file_at + entry.file_len as usize;
        let end = text_at + entry.text_len as usize;
        let strings = table
            .get(file_at..end)
            .ok_or_else(|| corrupt(format!("entry {index} runs past the table's end")))?;
        let (file, text) = strings.split_at(entry.file_len as usize);
        sites.push(SiteInfo {
            id: entry.id,
            file: String::from_utf8_lossy(file).into_owned(),
            line: entry.line,
            text: String::from_utf8_lossy(text).into_owned(),
        });
        offset = end.next_multiple_of(8);
    }
    if offset != table.len() {
        return Err(corrupt(format!(
            "{count} entries take {offset} bytes, the header says {}",
            table.len()
        )));
    }
    Ok(sites)
}

#[cfg(test)]
mod tests;
