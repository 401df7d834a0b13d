//! Which tile of the host product each warp's final accumulator holds.

use std::collections::BTreeMap;

use kwb_runtime::{Kind, Trace};

use crate::matrix::Product;
use crate::ranges::Ranges;

/// Where a warp's accumulator (after the mainloop) lies in `A·Bᵀ`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Every value equals the product at its recorded (m, n).
    AtCoordinates,
    /// Every value equals the product at its recorded (m, n) moved by (dm, dn):
    /// coordinates local to a warp or a CTA, or a tile taken from elsewhere.
    Shifted { dm: i64, dn: i64 },
    /// No coordinates: the values are, as a multiset, the product's tile at (m0, n0)
    /// of `rows × cols`.
    Tile {
        m0: i64,
        n0: i64,
        rows: i64,
        cols: i64,
    },
    /// The values are no tile of the product.
    Nowhere,
}

/// One warp's accumulator at one probe site.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AccumulatorGroup {
    pub site: u32,
    pub warp: u32,
    pub values: usize,
    /// The recorded coordinates' bounds, half-open: `[m0, m1, n0, n1]` (None: the
    /// values have no coordinates).
    pub bounds: Option<[i64; 4]>,
    /// Where each layer lies. Usually one layer; where several values share a
    /// coordinate (the probe could not tell MMA tiles or accumulator sets apart), the
    /// n-th value at each coordinate joins layer n, and each layer is placed alone.
    pub layers: Vec<Placement>,
    /// Per layer, for one that is no tile of the product: the whole factor `c` ≥ 2
    /// and the shift `(dm, dn)` at which every value is `c` times the product, where
    /// there is one — a fragment accumulated `c` times.
    pub multiples: Vec<Option<(f64, i64, i64)>>,
}

impl AccumulatorGroup {
    fn placed(p: Placement, global: bool) -> bool {
        match p {
            Placement::AtCoordinates | Placement::Tile { .. } => true,
            Placement::Shifted { .. } => !global,
            Placement::Nowhere => false,
        }
    }
}

/// The accumulators after the mainloop of the traced CTA, located in the product.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct AccumulatorReport {
    pub groups: Vec<AccumulatorGroup>,
    /// The coordinates are the problem's, not local: some group's smallest m or n is
    /// past 0, which a frame local to a warp or a CTA never gives over a whole CTA.
    pub global_frame: bool,
    /// Whether the product compares exactly (integer inputs, every partial sum
    /// exact in fp32) or within the fp32 accumulation bound.
    pub exact: bool,
    /// Values of layers placed with coordinates (at them, or shifted) that land on an
    /// output cell another placed value of the same site also lands on: two
    /// accumulator fragments holding one tile of A·Bᵀ, which a CTA that computes each
    /// output once never has (one fragment got another's product).
    pub duplicated: usize,
    /// The rows (m) and columns (n) of the product that some placed value holds the
    /// product at, inside the problem: with the operands' rows, which loaded rows no
    /// accumulator value has a product of.
    pub held_m: Ranges,
    pub held_n: Ranges,
}

impl AccumulatorReport {
    /// Every layer of every group is a tile of the product, and in a global frame at
    /// its own coordinates.
    pub fn right(&self) -> bool {
        !self.groups.is_empty()
            && self.groups.iter().all(|g| {
                g.layers
                    .iter()
                    .all(|p| AccumulatorGroup::placed(*p, self.global_frame))
            })
    }

    /// Not [`right`](Self::right), but every group has a layer that is a tile of the
    /// product: the other layers (another accumulator set of a split K loop, say)
    /// hold something this model does not predict.
    pub fn partly(&self) -> bool {
        !self.right()
            && self.misplaced().is_none()
            && !self.groups.is_empty()
            && self.groups.iter().all(|g| {
                g.layers
                    .iter()
                    .any(|p| AccumulatorGroup::placed(*p, self.global_frame))
            })
    }

    /// Groups none of whose layers is a tile of the product.
    pub fn nowhere(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| g.layers.iter().all(|p| *p == Placement::Nowhere))
            .count()
    }

    /// Where [`partly`](Self::partly) holds and every layer that is no tile is the
    /// same whole multiple of its own tile (at its coordinates in a global frame): that
    /// factor. Each fragment met the right values, some of them too often.
    pub fn multiple_of_the_rest(&self) -> Option<f64> {
        if !self.partly() {
            return None;
        }
        let mut factor = None;
        for g in &self.groups {
            for (p, m) in g.layers.iter().zip(&g.multiples) {
                if AccumulatorGroup::placed(*p, self.global_frame) {
                    continue;
                }
                let (c, dm, dn) = (*m)?;
                if self.global_frame && (dm, dn) != (0, 0) {
                    return None;
                }
                match factor {
                    None => factor = Some(c),
                    Some(f) if f == c => {}
                    Some(_) => return None,
                }
            }
        }
        factor
    }

    /// Where no layer is a tile of the product and every one is the same whole
    /// multiple `c` ≥ 2 of its own tile (at its coordinates in a global frame): that
    /// factor. Every fragment met the right values, each `c` times over.
    pub fn whole_multiple(&self) -> Option<f64> {
        let mut factor = None;
        for g in &self.groups {
            for (p, m) in g.layers.iter().zip(&g.multiples) {
                if *p != Placement::Nowhere {
                    return None;
                }
                let (c, dm, dn) = (*m)?;
                if self.global_frame && (dm, dn) != (0, 0) {
                    return None;
                }
                match factor {
                    None => factor = Some(c),
                    Some(f) if f == c => {}
                    Some(_) => return None,
                }
            }
        }
        factor
    }

    /// Layers in all, and layers placed.
    pub fn layers(&self) -> (usize, usize) {
        let all = self.groups.iter().map(|g| g.layers.len()).sum();
        let placed = self
            .groups
            .iter()
            .flat_map(|g| &g.layers)
            .filter(|p| AccumulatorGroup::placed(**p, self.global_frame))
            .count();
        (all, placed)
    }

    /// The output region these accumulators are known to hold, half-open `[m0, m1,
    /// n0, n1]`: only in a global frame where every layer lies at its own coordinates
    /// (or is a whole tile of the product), so the region is the product's and not a
    /// guess at where a local frame sits.
    pub fn region(&self) -> Option<[i64; 4]> {
        if !self.global_frame {
            return None;
        }
        self.region_shifted((0, 0))
    }

    /// The output region these accumulators hold when their coordinates are local to
    /// a CTA whose tile starts at `origin` (the origin the kernel's records name):
    /// every layer must lie exactly `origin` away from its coordinates, or the CTA
    /// holds another tile than its own. In a global frame, [`region`](Self::region).
    pub fn region_at(&self, origin: (i64, i64)) -> Option<[i64; 4]> {
        if self.global_frame {
            return self.region();
        }
        let [m0, m1, n0, n1] = self.region_shifted(origin)?;
        Some([m0 + origin.0, m1 + origin.0, n0 + origin.1, n1 + origin.1])
    }

    /// The bounds of every layer, each required to lie at its coordinates moved by
    /// `shift` (a whole tile of the product only where there is no shift to check).
    fn region_shifted(&self, shift: (i64, i64)) -> Option<[i64; 4]> {
        if self.groups.is_empty() {
            return None;
        }
        let mut region: Option<[i64; 4]> = None;
        let mut grow = |r: [i64; 4]| {
            region = Some(match region {
                None => r,
                Some(q) => [
                    q[0].min(r[0]),
                    q[1].max(r[1]),
                    q[2].min(r[2]),
                    q[3].max(r[3]),
                ],
            });
        };
        for g in &self.groups {
            for p in &g.layers {
                match *p {
                    Placement::AtCoordinates if shift == (0, 0) => grow(g.bounds?),
                    Placement::Shifted { dm, dn } if (dm, dn) == shift => grow(g.bounds?),
                    Placement::Tile { m0, n0, rows, cols } if shift == (0, 0) => {
                        grow([m0, m0 + rows, n0, n0 + cols]);
                    }
                    _ => return None,
                }
            }
        }
        region
    }

    /// In a global frame, the shift of the first layer that lies elsewhere.
    pub fn misplaced(&self) -> Option<(i64, i64)> {
        if !self.global_frame {
            return None;
        }
        self.groups
            .iter()
            .flat_map(|g| &g.layers)
            .find_map(|p| match p {
                Placement::Shifted { dm, dn } => Some((*dm, *dn)),
                _ => None,
            })
    }
}

/// Full-tile values of accumulator records after the mainloop (K tile -1), less
/// those of padding rows (m at or past the record's row bound).
pub(crate) fn final_values(trace: &Trace) -> impl Iterator<Item = (u32, &kwb_runtime::TileValue)> {
    trace.tiles.iter().filter_map(|v| {
        let r = trace.records.get(v.record as usize)?;
        (r.kind() == Some(Kind::Accumulator) && r.k_tile < 0 && v.m < r.row_bound)
            .then_some((v.record, v))
    })
}

/// Tile edges tried for values without coordinates, and the step of shifts tried
/// for values with them (every MMA tile edge is a multiple of 8).
const EDGES: [i64; 6] = [8, 16, 32, 64, 128, 256];
const STEP: i64 = 8;

/// Locates each (site, warp) group of final accumulator values in `product`.
pub fn locate_accumulators(trace: &Trace, product: &Product) -> AccumulatorReport {
    let mut groups: BTreeMap<(u32, u32), Vec<&kwb_runtime::TileValue>> = BTreeMap::new();
    for (record, v) in final_values(trace) {
        let r = &trace.records[record as usize];
        groups.entry((r.site, r.warp)).or_default().push(v);
    }
    let mut report = AccumulatorReport {
        exact: product.is_exact(),
        ..AccumulatorReport::default()
    };
    // The output cells placed values land on, per site: a cell twice is a duplicate.
    let mut cells: std::collections::HashMap<(u32, i64, i64), u32> = Default::default();
    // Per site, the values of the groups without coordinates.
    let mut uncoordinated: BTreeMap<u32, Vec<&kwb_runtime::TileValue>> = BTreeMap::new();
    for ((site, warp), mut values) in groups {
        values.sort_by_key(|v| (v.record, v.element));
        let coords = values.iter().all(|v| v.m >= 0 && v.n >= 0);
        let bounds = coords.then(|| {
            let (m0, m1) = bounds(values.iter().map(|v| i64::from(v.m)));
            let (n0, n1) = bounds(values.iter().map(|v| i64::from(v.n)));
            [m0, m1 + 1, n0, n1 + 1]
        });
        let mut multiples: Vec<Option<(f64, i64, i64)>> = Vec::new();
        let (layers, origin) = if coords {
            let origin = (
                values.iter().map(|v| i64::from(v.m)).min().unwrap_or(0),
                values.iter().map(|v| i64::from(v.n)).min().unwrap_or(0),
            );
            let layered = layered(&values);
            let layers: Vec<Placement> = layered
                .iter()
                .map(|layer| {
                    let p = place_with_coordinates(layer, product);
                    let shift = match p {
                        Placement::AtCoordinates => Some((0, 0)),
                        Placement::Shifted { dm, dn } => Some((dm, dn)),
                        _ => None,
                    };
                    if let Some((dm, dn)) = shift {
                        for v in layer {
                            let at = (site, i64::from(v.m) + dm, i64::from(v.n) + dn);
                            *cells.entry(at).or_insert(0) += 1;
                        }
                    }
                    p
                })
                .collect();
            // A layer that is no tile: whether it is a whole multiple of one.
            multiples = layered
                .iter()
                .zip(&layers)
                .map(|(layer, p)| {
                    (*p == Placement::Nowhere)
                        .then(|| place_scaled(layer, product))
                        .flatten()
                })
                .collect();
            (layers, Some(origin))
        } else {
            (vec![place_multiset(&values, product)], None)
        };
        if origin.is_some_and(|(m, n)| m > 0 || n > 0) {
            report.global_frame = true;
        }
        multiples.resize(layers.len(), None);
        report.groups.push(AccumulatorGroup {
            site,
            warp,
            values: values.len(),
            bounds,
            layers,
            multiples,
        });
        if !coords {
            uncoordinated.entry(site).or_default().extend(values);
        }
    }
    place_by_site(&mut report, &uncoordinated, product);
    report.duplicated = cells
        .values()
        .filter(|n| **n > 1)
        .map(|n| *n as usize)
        .sum();
    let inside =
        |m: i64, n: i64| (0..product.m as i64).contains(&m) && (0..product.n as i64).contains(&n);
    for &(_, m, n) in cells.keys().filter(|(_, m, n)| inside(*m, *n)) {
        report.held_m.insert(m);
        report.held_n.insert(n);
    }
    for g in &report.groups {
        for p in &g.layers {
            if let Placement::Tile { m0, n0, rows, cols } = *p {
                report.held_m.extend(m0..(m0 + rows).min(product.m as i64));
                report.held_n.extend(n0..(n0 + cols).min(product.n as i64));
            }
        }
    }
    report
}

/// Groups without coordinates that are no tile alone, placed by their site's whole
/// CTA: a thread layout that strides each thread over the CTA's tile (CuTe's
/// `local_partition(gC, Layout<Shape<_16,_16>>{}, threadIdx.x)`: a warp holds rows
/// 0..128 of two columns in every 16) gives a warp a set of cells that is no tile,
/// while the warps of the CTA together hold its tile, each value once. When the
/// union of a site's coordinate-less values is, as a multiset, one tile of the
/// product, every such group of the site lies in it (a value wrong in any warp
/// would break the multiset).
fn place_by_site(
    report: &mut AccumulatorReport,
    uncoordinated: &BTreeMap<u32, Vec<&kwb_runtime::TileValue>>,
    product: &Product,
) {
    for (site, values) in uncoordinated {
        let nowhere = |g: &AccumulatorGroup| {
            g.site == *site && g.bounds.is_none() && g.layers == [Placement::Nowhere]
        };
        if !report.groups.iter().any(nowhere) {
            continue;
        }
        let tile = place_multiset(values, product);
        if tile == Placement::Nowhere {
            continue;
        }
        for g in report.groups.iter_mut().filter(|g| nowhere(g)) {
            g.layers = vec![tile];
        }
    }
}

/// Splits values (in record, then element order) into layers: the n-th value at a
/// coordinate goes to layer n.
fn layered<'t>(values: &[&'t kwb_runtime::TileValue]) -> Vec<Vec<&'t kwb_runtime::TileValue>> {
    let mut seen: std::collections::HashMap<(i32, i32), usize> = Default::default();
    let mut layers: Vec<Vec<&kwb_runtime::TileValue>> = Vec::new();
    for v in values {
        let n = seen.entry((v.m, v.n)).or_insert(0);
        if layers.len() <= *n {
            layers.push(Vec::new());
        }
        layers[*n].push(v);
        *n += 1;
    }
    layers
}

/// Whether `values`, moved by `(dm, dn)`, are `product`'s cells. Cells at or past the
/// problem's edge are a tile's padding rows (a tile larger than the problem, BATCH <
/// MMA_N): any value may lie there, so long as at least half the values lie inside.
fn fits(values: &[&kwb_runtime::TileValue], product: &Product, dm: i64, dn: i64) -> bool {
    let mut inside = 0;
    for v in values {
        let (m, n) = (i64::from(v.m) + dm, i64::from(v.n) + dn);
        if m >= product.m as i64 || n >= product.n as i64 {
            continue;
        }
        if !product.matches(m, n, v.value) {
            return false;
        }
        inside += 1;
    }
    inside > 0 && inside * 2 >= values.len()
}

fn place_with_coordinates(values: &[&kwb_runtime::TileValue], product: &Product) -> Placement {
    if fits(values, product, 0, 0) {
        return Placement::AtCoordinates;
    }
    shifts(values, product)
        .find(|&(dm, dn)| fits(values, product, dm, dn))
        .map_or(Placement::Nowhere, |(dm, dn)| Placement::Shifted { dm, dn })
}

/// The shifts other than (0, 0), in steps of [`STEP`], that keep the layer's first
/// cell inside the problem (its last may lie in padding past the edge).
fn shifts(
    values: &[&kwb_runtime::TileValue],
    product: &Product,
) -> impl Iterator<Item = (i64, i64)> {
    let lo_m = values.iter().map(|v| i64::from(v.m)).min().unwrap_or(0);
    let lo_n = values.iter().map(|v| i64::from(v.n)).min().unwrap_or(0);
    let span = |lo: i64, size: usize| {
        let first = (-lo).div_euclid(STEP) * STEP;
        (first..=size as i64 - 1 - lo).step_by(STEP as usize)
    };
    let (rows, cols) = (product.m, product.n);
    span(lo_m, rows)
        .flat_map(move |dm| span(lo_n, cols).map(move |dn| (dm, dn)))
        .filter(|&s| s != (0, 0))
}

/// Whether `values` are, at some shift, `c` times the product's cells for one whole
/// factor `c` ≥ 2 (a fragment accumulated twice, or over every K step again): the
/// factor and the shift, trying the values' own coordinates first. Only where the
/// product is exact, and on at least 8 cells whose product is not zero; cells past the
/// problem's edge are padding, as in [`fits`].
fn place_scaled(values: &[&kwb_runtime::TileValue], product: &Product) -> Option<(f64, i64, i64)> {
    if !product.is_exact() {
        return None;
    }
    let scaled = |dm: i64, dn: i64| -> Option<f64> {
        let mut factor: Option<f64> = None;
        let (mut inside, mut nonzero) = (0usize, 0usize);
        for v in values {
            let (m, n) = (i64::from(v.m) + dm, i64::from(v.n) + dn);
            if m >= product.m as i64 || n >= product.n as i64 {
                continue;
            }
            let want = product.get(m, n)?;
            let got = f64::from(v.value);
            inside += 1;
            if want == 0.0 {
                if got != 0.0 {
                    return None;
                }
                continue;
            }
            nonzero += 1;
            let c = *factor.get_or_insert(got / want);
            if got != c * want {
                return None;
            }
        }
        let c = factor?;
        (c >= 2.0 && c.fract() == 0.0 && nonzero >= 8 && inside * 2 >= values.len()).then_some(c)
    };
    if let Some(c) = scaled(0, 0) {
        return Some((c, 0, 0));
    }
    shifts(values, product).find_map(|(dm, dn)| scaled(dm, dn).map(|c| (c, dm, dn)))
}

fn bounds(it: impl Iterator<Item = i64>) -> (i64, i64) {
    it.fold((i64::MAX, i64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

fn place_multiset(values: &[&kwb_runtime::TileValue], product: &Product) -> Placement {
    let mut got: Vec<f32> = values.iter().map(|v| v.value).collect();
    got.sort_by(f32::total_cmp);
    let count = got.len() as i64;
    for rows in EDGES {
        let cols = count / rows;
        if rows * cols != count || !EDGES.contains(&cols) {
            continue;
        }
        for m0 in (0..=product.m as i64 - rows).step_by(rows as usize) {
            for n0 in (0..=product.n as i64 - cols).step_by(cols as usize) {
                let mut want: Vec<(f64, i64, i64)> = Vec::with_capacity(got.len());
                for m in m0..m0 + rows {
                    for n in n0..n0 + cols {
                        want.push((product.get(m, n).unwrap_or(f64::NAN), m, n));
                    }
                }
                want.sort_by(|a, b| a.0.total_cmp(&b.0));
                if want
                    .iter()
                    .zip(&got)
                    .all(|((_, m, n), v)| product.matches(*m, *n, *v))
                {
                    return Placement::Tile { m0, n0, rows, cols };
                }
            }
        }
    }
    Placement::Nowhere
}
