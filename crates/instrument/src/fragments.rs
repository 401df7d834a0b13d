//! Register fragment layouts kwb knows the coordinates of, and the probe arguments
//! that give each value its logical (m, n, k) and keep padding rows out.

/// A fragment layout with known coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `mma.sync.aligned.m16n8k16` with 16-bit inputs and f32 accumulators.
    MmaSyncM16n8k16,
}

/// What a fragment holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    A,
    B,
    Accumulator,
}

/// The layout of the file's MMAs, from the PTX it issues.
pub(crate) fn layout(source: &str) -> Option<Layout> {
    source
        .contains("mma.sync.aligned.m16n8k16")
        .then_some(Layout::MmaSyncM16n8k16)
}

/// The trailing arguments of a probe of a `role` fragment: the row bound (the
/// `--rows` expression, or all rows), the row axis and the coordinate function.
/// Empty when the layout is unknown: the probe then records raw order.
pub(crate) fn probe_args(layout: Option<Layout>, role: Role, rows: Option<&str>) -> String {
    let Some(Layout::MmaSyncM16n8k16) = layout else {
        return String::new();
    };
    let coord = match role {
        Role::A => "kwb::MmaM16n8k16A{}",
        Role::B => "kwb::MmaM16n8k16B{}",
        Role::Accumulator => "kwb::MmaM16n8k16C{}",
    };
    let bound = rows.map_or("kwb::all_rows".to_owned(), |r| format!("({r})"));
    format!(", {bound}, kwb::Axis::M, {coord}")
}
