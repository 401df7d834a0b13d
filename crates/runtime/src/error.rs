//! The errors of kwb-runtime: why a trace file could not be decoded.

/// Everything that can be wrong with a trace file.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum TraceError {
    #[error(
        "trace file is truncated: {what} needs {needed} bytes at offset {offset}, the file has {len}"
    )]
    #[diagnostic(
        code(kwb::runtime::truncated),
        help(
            "the program may have died while flushing; run it again and let kwb_trace_flush finish"
        )
    )]
    Truncated {
        /// The part that is cut short.
        what: &'static str,
        /// Where that part starts.
        offset: usize,
        /// The bytes it needs from there.
        needed: usize,
        /// The file's length.
        len: usize,
    },

    #[error("not a kwb trace file: it starts with \"{found}\", not \"KWBTRACE\"")]
    #[diagnostic(
        code(kwb::runtime::bad_magic),
        help("pass the file that kwb_trace_flush wrote, or that KWB_TRACE_OUT named")
    )]
    BadMagic {
        /// The first bytes of the file, escaped.
        found: String,
    },

    #[error("trace file version {found}, this kwb reads versions 2 to {expected}")]
    #[diagnostic(
        code(kwb::runtime::version),
        help(
            "rebuild the traced program with this kwb's kwb_trace.cuh (kwb-instrument emits it), or read the file with the kwb that wrote it"
        )
    )]
    Version {
        /// The version in the file.
        found: u32,
        /// The version this crate reads.
        expected: u32,
    },

    #[error("trace records are {found} bytes, version {version} records are {expected}")]
    #[diagnostic(
        code(kwb::runtime::record_size),
        help(
            "the traced program used a modified kwb_trace.cuh; rebuild it with this kwb's header"
        )
    )]
    RecordSize {
        /// The record size in the file.
        found: u32,
        /// The record size of this version.
        expected: usize,
        /// The version both claim.
        version: u32,
    },

    #[error("site table is corrupt: {reason}")]
    #[diagnostic(
        code(kwb::runtime::bad_site_table),
        help("the file was damaged after kwb_trace_flush wrote it; trace again")
    )]
    BadSiteTable {
        /// What does not add up.
        reason: String,
    },

    #[error(
        "record {index} is not a version {expected} record (magic {magic:#010x}, version {version})"
    )]
    #[diagnostic(
        code(kwb::runtime::bad_record),
        help(
            "the trace buffer was read while a kernel was still writing it, or the file is damaged; trace again"
        )
    )]
    BadRecord {
        /// The record's position in the file.
        index: usize,
        /// Its magic field.
        magic: u32,
        /// Its version field.
        version: u32,
        /// The version this crate reads.
        expected: u32,
    },

    #[error("tile section is corrupt: {reason}")]
    #[diagnostic(
        code(kwb::runtime::bad_tile_section),
        help("the file was damaged after kwb_trace_flush wrote it; trace again")
    )]
    BadTiles {
        /// What does not add up.
        reason: String,
    },

    #[error("summary section is corrupt: {reason}")]
    #[diagnostic(
        code(kwb::runtime::bad_summary_section),
        help("the file was damaged after kwb_trace_flush wrote it; trace again")
    )]
    BadSummary {
        /// What does not add up.
        reason: String,
    },

    #[error("{extra} bytes after the trace's last section")]
    #[diagnostic(
        code(kwb::runtime::trailing_bytes),
        help(
            "the file holds more than one trace or was appended to; write each trace to its own file"
        )
    )]
    TrailingBytes {
        /// The bytes past the end of the records.
        extra: usize,
    },
}
