//! `kwb trace show --npy DIR`: the full tiles of a `--full-tile` trace as `.npy`
//! files for numpy and torch. Per record that kept values (one warp at one probe
//! call): `NAME.values.npy` (`<f4`, in the probe's element order), `NAME.coords.npy`
//! (`<i4`, one (m, n, k) row per value, -1 where unknown) and, when every value has a
//! distinct known coordinate on the kind's two axes (accumulator and epilogue: m, n;
//! operand A: m, k; operand B: n, k), `NAME.grid.npy`: the values placed on those
//! coordinates, NaN where none landed. `index.json` lists every file with its site,
//! kind, K tile or call, CTA, warp, and the grid's axes and origin. Each file is
//! written to a temporary name and the names are renamed into place only when all are
//! written, so none is ever half written and a failure leaves none of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kwb_runtime::{Kind, TileValue, Trace, TraceRecord};
use serde::Serialize;

use crate::npy;

/// One record's files, as index.json lists them.
#[derive(Debug, Serialize)]
pub struct Entry {
    pub values_file: String,
    pub coords_file: String,
    /// The dense grid, when the coordinates allow one.
    pub grid_file: Option<String>,
    /// The grid's (row, column) axes, e.g. ["m", "n"].
    pub grid_axes: Option<[&'static str; 2]>,
    /// The logical coordinates of the grid's [0, 0].
    pub grid_origin: Option<[i32; 2]>,
    /// The grid's (rows, columns).
    pub grid_shape: Option<[usize; 2]>,
    pub site: u32,
    pub kind: String,
    pub k_tile: i32,
    /// The per-warp call number of a probe outside a counted K loop.
    pub call: Option<u32>,
    pub cta: [u32; 3],
    pub warp: u32,
    pub values: usize,
}

/// The two axes a kind's tile spans, by index into (m, n, k).
fn grid_axes(kind: Option<Kind>) -> Option<[usize; 2]> {
    match kind? {
        Kind::Accumulator | Kind::Epilogue => Some([0, 1]),
        Kind::OperandA => Some([0, 2]),
        Kind::OperandB => Some([1, 2]),
        Kind::Load | Kind::TileContext | Kind::NotProbed => None,
    }
}

const AXIS_NAMES: [&str; 3] = ["m", "n", "k"];

/// The dense grid of `values` on `axes`: shape, origin and data, or `None` when a
/// coordinate is unknown or two values share a cell.
fn grid(values: &[&TileValue], axes: [usize; 2]) -> Option<([usize; 2], [i32; 2], Vec<f32>)> {
    let coord = |v: &TileValue, a: usize| [v.m, v.n, v.k][a];
    let mut lo = [i32::MAX; 2];
    let mut hi = [i32::MIN; 2];
    for v in values {
        for (d, &a) in axes.iter().enumerate() {
            let c = coord(v, a);
            if c < 0 {
                return None;
            }
            lo[d] = lo[d].min(c);
            hi[d] = hi[d].max(c);
        }
    }
    let rows = usize::try_from(hi[0] - lo[0] + 1).ok()?;
    let cols = usize::try_from(hi[1] - lo[1] + 1).ok()?;
    // A grid far sparser than its values would be mostly NaN: keep the flat files.
    if rows.checked_mul(cols)? > values.len().saturating_mul(16).max(1024) {
        return None;
    }
    let mut data = vec![f32::NAN; rows * cols];
    let mut filled = vec![false; rows * cols];
    for v in values {
        let r = usize::try_from(coord(v, axes[0]) - lo[0]).ok()?;
        let c = usize::try_from(coord(v, axes[1]) - lo[1]).ok()?;
        let at = r * cols + c;
        if std::mem::replace(&mut filled[at], true) {
            return None;
        }
        data[at] = v.value;
    }
    Some(([rows, cols], lo, data))
}

/// The file-name stem of a record's tile.
fn stem(record: &TraceRecord, call: Option<u32>) -> String {
    let kind = record
        .kind()
        .map_or_else(|| format!("kind{}", record.kind), |k| k.name().to_owned());
    let at = match (record.k_tile, call) {
        (k, _) if k >= 0 => format!("k{k}"),
        (_, Some(call)) => format!("call{call}"),
        _ if record.kind() == Some(Kind::Epilogue) => "out".to_owned(),
        _ => "final".to_owned(),
    };
    format!(
        "site{}.{kind}.{at}.cta{}-{}-{}.warp{}",
        record.site, record.cta_x, record.cta_y, record.cta_z, record.warp
    )
}

/// Writes every record's tile under `dir` (created if missing) and `index.json`;
/// returns the entries. `calls` numbers each record's call as `Trace::call_numbers`
/// does, and `numbered` says which records use it.
pub fn export(
    trace: &Trace,
    dir: &Path,
    numbered: impl Fn(&TraceRecord) -> bool,
) -> std::io::Result<Vec<Entry>> {
    std::fs::create_dir_all(dir)?;
    let mut by_record: BTreeMap<u32, Vec<&TileValue>> = BTreeMap::new();
    for v in &trace.tiles {
        by_record.entry(v.record).or_default().push(v);
    }
    let calls = trace.call_numbers();
    let mut entries = Vec::new();
    // Every file is written at the end, all or none.
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let mut stems: BTreeMap<String, u32> = BTreeMap::new();
    for (index, mut values) in by_record {
        let Some(record) = trace.records.get(index as usize) else {
            continue;
        };
        values.sort_by_key(|v| v.element);
        let call = numbered(record).then(|| calls[index as usize]);
        // Two records of one warp at one point (a probe inside an unrolled loop) get
        // their own files.
        let mut name = stem(record, call);
        let seen = stems.entry(name.clone()).or_insert(0);
        if *seen > 0 {
            name = format!("{name}.{seen}");
        }
        *seen += 1;
        let flat: Vec<f32> = values.iter().map(|v| v.value).collect();
        let coords: Vec<i32> = values.iter().flat_map(|v| [v.m, v.n, v.k]).collect();
        let values_file = format!("{name}.values.npy");
        let coords_file = format!("{name}.coords.npy");
        files.push((dir.join(&values_file), npy::f32_array(&[flat.len()], &flat)));
        files.push((
            dir.join(&coords_file),
            npy::i32_array(&[values.len(), 3], &coords),
        ));
        let axes = grid_axes(record.kind());
        let dense = axes.and_then(|a| grid(&values, a));
        let grid_file = match &dense {
            Some((shape, _, data)) => {
                let file = format!("{name}.grid.npy");
                files.push((dir.join(&file), npy::f32_array(shape, data)));
                Some(file)
            }
            None => None,
        };
        entries.push(Entry {
            values_file,
            coords_file,
            grid_axes: dense
                .as_ref()
                .and(axes)
                .map(|[r, c]| [AXIS_NAMES[r], AXIS_NAMES[c]]),
            grid_origin: dense.as_ref().map(|(_, origin, _)| *origin),
            grid_shape: dense.as_ref().map(|(shape, _, _)| *shape),
            grid_file,
            site: record.site,
            kind: record
                .kind()
                .map_or_else(|| format!("kind {}", record.kind), |k| k.name().to_owned()),
            k_tile: record.k_tile,
            call,
            cta: [record.cta_x, record.cta_y, record.cta_z],
            warp: record.warp,
            values: values.len(),
        });
    }
    let index = serde_json::to_vec_pretty(&entries).map_err(std::io::Error::other)?;
    files.push((dir.join("index.json"), index));
    crate::output::write_all_atomically(&files).map_err(|(_, e)| e)?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(record: u32, element: u32, value: f32, m: i32, n: i32) -> TileValue {
        TileValue {
            record,
            element,
            value,
            m,
            n,
            k: -1,
        }
    }

    #[test]
    fn grid_places_values_and_leaves_gaps_nan() {
        let values = [value(0, 0, 1.0, 4, 2), value(0, 1, 2.0, 5, 3)];
        let refs: Vec<&TileValue> = values.iter().collect();
        let (shape, origin, data) = grid(&refs, [0, 1]).unwrap();
        assert_eq!(shape, [2, 2]);
        assert_eq!(origin, [4, 2]);
        assert_eq!(data[0], 1.0);
        assert!(data[1].is_nan() && data[2].is_nan());
        assert_eq!(data[3], 2.0);
    }

    #[test]
    fn no_grid_when_cells_collide_or_coordinates_are_unknown() {
        let same = [value(0, 0, 1.0, 1, 1), value(0, 1, 2.0, 1, 1)];
        assert!(grid(&same.iter().collect::<Vec<_>>(), [0, 1]).is_none());
        let unknown = [value(0, 0, 1.0, -1, 1)];
        assert!(grid(&unknown.iter().collect::<Vec<_>>(), [0, 1]).is_none());
    }
}
