//! Register fragment layouts kwb knows the coordinates of, and the probe arguments
//! that give each value its logical (m, n, k) and keep padding rows out.
//!
//! Within one MMA tile the layout gives the coordinates. Across the tiles a lane holds
//! (`float acc[MMA_M][MMA_N][4]`), the MMA calls say which array index picks the tile:
//! in `mma(acc[i][j], a[i], b[j][0], b[j][1])` the index `i` of `acc` is also `a`'s,
//! so it walks m tiles; `j` is also `b`'s, so it walks n tiles. An index shared with
//! neither operand (a split-K accumulator set) or a literal adds no offset.

use std::collections::BTreeMap;

use kwb_sites::{Kernel, KernelMap, SiteKind};

/// A fragment layout with known coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `mma.sync.aligned.m16n8k16` with 16-bit inputs and f32 accumulators.
    MmaSyncM16n8k16,
    /// `mma.sync.aligned.m16n8k32` with 8-bit inputs (e4m3, e5m2, s8, u8): four
    /// values a register; the accumulator's layout is m16n8k16's.
    MmaSyncM16n8k32,
    /// `mma.sync.aligned.m16n8k8` with 16-bit inputs (f16, bf16): two values a
    /// register; the accumulator's layout is m16n8k16's.
    MmaSyncM16n8k8,
    /// `mma.sync.aligned.m16n8k8` with tf32 inputs: one value a 32-bit register; the
    /// accumulator's layout is m16n8k16's.
    MmaSyncM16n8k8Tf32,
}

/// What a fragment holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    A,
    B,
    Accumulator,
}

/// The layout one `mma.sync.aligned.…` instruction's fragments have, where kwb knows
/// it: by shape and input type (m16n8k32 also takes 4-bit integers and, on sm_120,
/// fp4/fp6, and m16n8k8 also f64, laid out otherwise).
fn layout_of(ptx: &str) -> Option<Layout> {
    let parts: Vec<&str> = ptx.split('.').collect();
    let has = |types: &[&str]| parts.iter().any(|p| types.contains(p));
    match parts.get(3).copied()? {
        "m16n8k16" => Some(Layout::MmaSyncM16n8k16),
        "m16n8k32" if has(&["e4m3", "e5m2", "s8", "u8"]) => Some(Layout::MmaSyncM16n8k32),
        "m16n8k8" if has(&["tf32"]) => Some(Layout::MmaSyncM16n8k8Tf32),
        "m16n8k8" if has(&["f16", "bf16"]) && !has(&["f64"]) => Some(Layout::MmaSyncM16n8k8),
        _ => None,
    }
}

/// The layout of the file's MMAs, from the PTX it issues; none where its
/// `mma.sync` instructions do not all share one (which fragment feeds which is not
/// known here), or one is of a layout kwb does not know.
pub(crate) fn layout(source: &str) -> Option<Layout> {
    let mut found: Option<Layout> = None;
    for (at, _) in source.match_indices("mma.sync.aligned.") {
        let rest = &source[at..];
        let ptx = &rest[..rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
            .unwrap_or(rest.len())];
        // A comment's bare `mma.sync.aligned.` with no shape says nothing.
        if !ptx
            .split('.')
            .nth(3)
            .is_some_and(|p| p.starts_with("m16n8k"))
        {
            if ptx.split('.').nth(3).is_some_and(|p| p.starts_with('m')) {
                return None;
            }
            continue;
        }
        let this = layout_of(ptx)?;
        match found {
            Some(have) if have != this => return None,
            _ => found = Some(this),
        }
    }
    found
}

/// The fragment layout of each function of a kernel map, from the PTX its own MMA
/// sites issue and the helpers they call (`calls `mma_16816` (line 40), which issues
/// the MMA`); a function whose MMAs name no PTX takes the file's [`layout`]. So a
/// file with a legacy m16n8k8 kernel beside an m16n8k16 one still gives each its own.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layouts {
    by_function: BTreeMap<String, Option<Layout>>,
    /// The PTX instructions each function's MMAs issue (none: not known).
    ptx: BTreeMap<String, String>,
    /// The PTX the MMA site at a line of a function issues (itself or through the
    /// helper it calls).
    at: BTreeMap<(String, usize), String>,
    file: Option<Layout>,
}

impl Layouts {
    pub fn from_map(map: &KernelMap, source: &str) -> Layouts {
        let ptx_of = |name: &str| -> Vec<String> {
            let mut seen = vec![name.to_owned()];
            let mut out = Vec::new();
            let mut i = 0;
            while i < seen.len() {
                let current = seen[i].clone();
                i += 1;
                for kernel in map.kernels.iter().filter(|k| k.name == current) {
                    for site in kernel.sites.iter().filter(|s| s.kind == SiteKind::Mma) {
                        match issued_by(map, site) {
                            Some(Issued::Ptx(ptx)) => out.push(ptx.to_owned()),
                            Some(Issued::Call(callee)) if !seen.iter().any(|s| s == callee) => {
                                seen.push(callee.to_owned())
                            }
                            _ => {}
                        }
                    }
                }
            }
            out
        };
        let file = layout(source);
        let mut by_function = BTreeMap::new();
        let mut ptx = BTreeMap::new();
        let mut at = BTreeMap::new();
        for k in &map.kernels {
            for site in k.sites.iter().filter(|s| s.kind == SiteKind::Mma) {
                let issued = match issued_by(map, site) {
                    Some(Issued::Ptx(own)) => own.to_owned(),
                    Some(Issued::Call(callee)) => ptx_of(callee).join("\n"),
                    None => continue,
                };
                if !issued.is_empty() {
                    at.insert((k.name.clone(), site.line), issued);
                }
            }
            let issued = ptx_of(&k.name);
            if issued.is_empty() {
                by_function.insert(k.name.clone(), file);
            } else {
                let text = issued.join("\n");
                by_function.insert(k.name.clone(), layout(&text));
                ptx.insert(k.name.clone(), text);
            }
        }
        Layouts {
            by_function,
            ptx,
            at,
            file,
        }
    }

    /// The PTX the MMA at `line` of `function` issues, where the map shows it.
    fn ptx_at(&self, function: &str, line: usize) -> Option<&str> {
        self.at
            .get(&(function.to_owned(), line))
            .map(String::as_str)
    }

    /// The layout of the fragments the MMA at `line` of `function` reads: its own
    /// PTX's, else the function's.
    pub fn at(&self, function: &str, line: usize) -> Option<Layout> {
        match self.ptx_at(function, line) {
            Some(ptx) => layout(ptx),
            None => self.of(function),
        }
    }

    /// The PTX to read the input type of the MMA at `line` of `function` from: its
    /// own, else the function's, else none known.
    pub fn ptx_for(&self, function: &str, line: usize) -> Option<&str> {
        self.ptx_at(function, line).or_else(|| self.ptx(function))
    }

    /// The accumulator's layout in `function`: every mma.sync layout kwb knows lays the
    /// accumulator out alike (m16n8k16's C), so any mix of them gives one; else the
    /// function's.
    pub fn accumulator(&self, function: &str) -> Option<Layout> {
        let Some(ptx) = self.ptx(function) else {
            return self.of(function);
        };
        let mut known = None;
        for line in ptx.lines().filter(|l| l.starts_with("mma.sync.")) {
            known = Some(layout(line)?);
        }
        known.or_else(|| self.of(function))
    }

    /// The layout of `function`'s fragments.
    pub fn of(&self, function: &str) -> Option<Layout> {
        self.by_function.get(function).copied().unwrap_or(self.file)
    }

    /// The PTX `function`'s MMAs issue, one instruction a line, where the map shows it.
    pub fn ptx(&self, function: &str) -> Option<&str> {
        self.ptx.get(function).map(String::as_str)
    }
}

/// What an MMA site issues: PTX of its own, or a call of a function of the map.
enum Issued<'m> {
    Ptx(&'m str),
    Call(&'m str),
}

/// What the MMA `site` issues, from its note (`PTX `…``, `calls `f` …`), else from its
/// text where that calls a function the map holds (`HMMA_16816(acc, a, b, acc)`).
fn issued_by<'m>(map: &'m KernelMap, site: &'m kwb_sites::Site) -> Option<Issued<'m>> {
    if let Some(note) = site.note.as_deref() {
        if let Some(ptx) = between(note, "PTX `", "`") {
            return Some(Issued::Ptx(ptx));
        }
        if let Some(call) = called(note) {
            let callee = map.kernels.iter().find(|k| is_called(k, &call))?;
            return Some(Issued::Call(callee.name.as_str()));
        }
    }
    let open = site.text.find('(')?;
    let callee = site.text[..open].trim();
    let callee = callee.rsplit("::").next().unwrap_or(callee).trim();
    map.kernels
        .iter()
        .find(|k| k.name == callee)
        .map(|k| Issued::Call(k.name.as_str()))
}

/// Whether `function` is the one a `calls` note names: (its last name component, the
/// line of its definition).
pub(crate) fn is_called(function: &Kernel, (name, line): &(String, usize)) -> bool {
    function.line == *line && function.name.rsplit("::").next() == Some(name.as_str())
}

/// `calls \`mma_k_tile\` (line 101), which issues the MMA` → ("mma_k_tile", 101).
pub(crate) fn called(note: &str) -> Option<(String, usize)> {
    let rest = note.strip_prefix("calls `")?;
    let (name, rest) = rest.split_once('`')?;
    let line = rest
        .strip_prefix(" (line ")?
        .split(')')
        .next()?
        .parse()
        .ok()?;
    Some((name.to_owned(), line))
}

/// The text between the first `open` and the next `close` after it.
fn between<'t>(text: &'t str, open: &str, close: &str) -> Option<&'t str> {
    let start = text.find(open)? + open.len();
    let len = text[start..].find(close)?;
    Some(&text[start..start + len])
}

/// The array dimensions of a fragment that pick its MMA tile along m and n.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Dims {
    pub m: Option<usize>,
    pub n: Option<usize>,
}

/// Per fragment name, its tile dimensions, from every MMA call of the file; a name
/// the calls disagree about has none.
#[derive(Clone, Debug, Default)]
pub(crate) struct TileDims {
    by_name: BTreeMap<String, Option<Dims>>,
}

impl TileDims {
    /// Reads the MMA call sites of `map` (text from `source`).
    pub fn from_map(map: &KernelMap, source: &str) -> TileDims {
        let mut dims = TileDims::default();
        for kernel in &map.kernels {
            for site in kernel.sites.iter().filter(|s| s.kind == SiteKind::Mma) {
                let Some(text) = source.get(site.range.clone()) else {
                    continue;
                };
                if let Some(found) = from_call(text) {
                    for (name, d) in found {
                        dims.add(name, d);
                    }
                }
            }
        }
        dims
    }

    fn add(&mut self, name: String, dims: Dims) {
        self.by_name
            .entry(name)
            .and_modify(|have| {
                if *have != Some(dims) {
                    *have = None;
                }
            })
            .or_insert(Some(dims));
    }

    /// The tile dimensions of `name`, when every MMA call agrees on them.
    pub fn of(&self, name: &str) -> Dims {
        self.by_name
            .get(name)
            .copied()
            .flatten()
            .unwrap_or_default()
    }
}

/// `name[i0][i1]…` as the name and its index texts; `None` for anything else.
fn subscripts(arg: &str) -> Option<(String, Vec<String>)> {
    let arg = arg.trim();
    let open = arg.find('[').unwrap_or(arg.len());
    let name = arg[..open].trim();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let mut indices = Vec::new();
    let mut rest = &arg[open..];
    while let Some(body) = rest.strip_prefix('[') {
        let mut depth = 1;
        let close = body.char_indices().find_map(|(i, c)| {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        })?;
        indices.push(body[..close].trim().to_owned());
        rest = body[close + 1..].trim_start();
    }
    rest.is_empty().then(|| (name.to_owned(), indices))
}

/// The top-level arguments of the first call in `text`.
fn call_arguments(text: &str) -> Option<Vec<&str>> {
    let open = text.find('(')?;
    let callee = text[..open].trim();
    if callee.is_empty() || callee.starts_with("asm") {
        return None;
    }
    let mut depth = 0;
    let mut args = Vec::new();
    let mut start = open + 1;
    for (i, c) in text.char_indices().skip(open) {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    args.push(&text[start..i]);
                    return Some(args);
                }
            }
            ',' if depth == 1 => {
                args.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    None
}

/// The tile dimensions an MMA call `f(C, A, B…)` shows for C, A and the Bs.
fn from_call(text: &str) -> Option<Vec<(String, Dims)>> {
    let args = call_arguments(text)?;
    let [c, a, bs @ ..] = args.as_slice() else {
        return None;
    };
    let (c_name, c_idx) = subscripts(c)?;
    // A call that passes the whole array on (a helper's) says nothing about tiles.
    if c_idx.is_empty() {
        return None;
    }
    let a = subscripts(a);
    let bs: Vec<_> = bs.iter().filter_map(|b| subscripts(b)).collect();
    let is_name = |t: &str| {
        t.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && t.chars().all(|c| c.is_alphanumeric() || c == '_')
    };
    let mut out = Vec::new();
    let mut c_dims = Dims::default();
    let mut a_dims = Dims::default();
    let mut b_dims = Dims::default();
    for (d, t) in c_idx.iter().enumerate().filter(|(_, t)| is_name(t)) {
        if let Some(p) = a
            .as_ref()
            .and_then(|(_, idx)| idx.iter().position(|x| x == t))
        {
            c_dims.m = Some(d);
            a_dims.m = Some(p);
        }
        if let Some(p) = bs
            .first()
            .and_then(|(_, idx)| idx.iter().position(|x| x == t))
        {
            c_dims.n = Some(d);
            b_dims.n = Some(p);
        }
    }
    out.push((c_name, c_dims));
    if let Some((name, _)) = a {
        out.push((name, a_dims));
    }
    let mut b_names: Vec<&String> = bs.iter().map(|(name, _)| name).collect();
    b_names.dedup();
    if let [name] = b_names.as_slice() {
        out.push(((*name).clone(), b_dims));
    }
    Some(out)
}

/// The row bound (the `--rows` expression, or all rows) and the coordinate function,
/// with the fragment's tile dimensions, of a probe of a `role` fragment; the row axis
/// is M. None when the layout is unknown: the probe then records raw order.
pub(crate) fn probe_parts(
    layout: Option<Layout>,
    role: Role,
    rows: Option<&str>,
    dims: Dims,
) -> Option<(String, String)> {
    // The operands' coordinate functions; both shapes share the accumulator's.
    let shape = match layout? {
        Layout::MmaSyncM16n8k16 => "MmaM16n8k16",
        Layout::MmaSyncM16n8k32 => "MmaM16n8k32",
        Layout::MmaSyncM16n8k8 => "MmaM16n8k8",
        Layout::MmaSyncM16n8k8Tf32 => "MmaM16n8k8Tf32",
    };
    let dim = |d: Option<usize>| d.map_or("-1".to_owned(), |d| d.to_string());
    let coord = match (role, dims) {
        (Role::A, Dims { m: Some(m), .. }) => format!("kwb::{shape}A{{{m}}}"),
        (Role::A, _) => format!("kwb::{shape}A{{}}"),
        (Role::B, Dims { n: Some(n), .. }) => format!("kwb::{shape}B{{{n}}}"),
        (Role::B, _) => format!("kwb::{shape}B{{}}"),
        (Role::Accumulator, Dims { m: None, n: None }) => "kwb::MmaM16n8k16C{}".to_owned(),
        (Role::Accumulator, Dims { m, n }) => {
            format!("kwb::MmaM16n8k16C{{{}, {}}}", dim(m), dim(n))
        }
    };
    let bound = rows.map_or("kwb::all_rows".to_owned(), |r| format!("({r})"));
    Some((bound, coord))
}

/// The trailing arguments of a probe of a `role` fragment ([`probe_parts`]): the row
/// bound, the row axis and the coordinate function. Empty when the layout is unknown.
pub(crate) fn probe_args(
    layout: Option<Layout>,
    role: Role,
    rows: Option<&str>,
    dims: Dims,
) -> String {
    probe_parts(layout, role, rows, dims).map_or(String::new(), |(bound, coord)| {
        format!(", {bound}, kwb::Axis::M, {coord}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(text: &str) -> Vec<(String, Dims)> {
        from_call(text).unwrap()
    }

    #[test]
    fn each_mma_takes_the_layout_of_the_ptx_it_issues() {
        // One kernel issuing an m16n8k16 and an m16n8k8 through two helpers.
        let source = r#"
__device__ void mma_k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ void mma_k8(float (&d)[4], const unsigned (&a)[2], unsigned b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(b));
}
__global__ void k(const unsigned* A, float* C, int K) {
  float acc[4] = {};
  float acc2[4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
    unsigned a[4], b[2], a2[2];
    for (int i = 0; i < 4; ++i) a[i] = A[k0 + i];
    for (int i = 0; i < 2; ++i) b[i] = A[k0 + 4 + i];
    for (int i = 0; i < 2; ++i) a2[i] = A[k0 + 6 + i];
    mma_k16(acc, a, b);
    mma_k8(acc2, a2, b[0]);
  }
  for (int i = 0; i < 4; ++i) C[i] = acc[i] + acc2[i];
}
"#;
        let parsed = kwb_syntax::parse(source);
        let map = kwb_sites::kernel_map(&parsed, &[]);
        let layouts = Layouts::from_map(&map, source);
        let line_of = |text: &str| source.lines().position(|l| l.contains(text)).unwrap() + 1;
        assert_eq!(
            layouts.at("k", line_of("mma_k16(acc")),
            Some(Layout::MmaSyncM16n8k16)
        );
        assert_eq!(
            layouts.at("k", line_of("mma_k8(acc2")),
            Some(Layout::MmaSyncM16n8k8)
        );
        // The kernel as a whole issues two shapes: no one operand layout, but the
        // accumulators of both are laid out alike.
        assert_eq!(layouts.of("k"), None);
        assert!(layouts.accumulator("k").is_some());
        assert_eq!(layouts.of("mma_k8"), Some(Layout::MmaSyncM16n8k8));
    }

    #[test]
    fn the_layout_is_the_shape_and_input_width_the_file_issues() {
        let ptx = |i: &str| format!("asm volatile(\"{i} {{%0}};\");");
        let k16 = ptx("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
        let e4m3 = ptx("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32");
        let s8 = ptx("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32.satfinite");
        let s4 = ptx("mma.sync.aligned.m16n8k32.row.col.s32.s4.s4.s32");
        assert_eq!(layout(&k16), Some(Layout::MmaSyncM16n8k16));
        assert_eq!(layout(&e4m3), Some(Layout::MmaSyncM16n8k32));
        assert_eq!(layout(&s8), Some(Layout::MmaSyncM16n8k32));
        // 4-bit integers on the same shape are laid out otherwise.
        assert_eq!(layout(&s4), None);
        assert_eq!(layout(&format!("{e4m3}\n{s4}")), None);
        // Two shapes in one file: which fragment feeds which is not known.
        assert_eq!(layout(&format!("{k16}\n{e4m3}")), None);
        // m16n8k8: tf32 (one value a register) and 16-bit inputs (two); f64 is not it.
        let tf32 = ptx("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
        let k8 = ptx("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32");
        assert_eq!(layout(&tf32), Some(Layout::MmaSyncM16n8k8Tf32));
        assert_eq!(
            layout(&format!("{tf32}\n{tf32}")),
            Some(Layout::MmaSyncM16n8k8Tf32)
        );
        assert_eq!(layout(&k8), Some(Layout::MmaSyncM16n8k8));
        assert_eq!(
            layout(&ptx("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64")),
            None
        );
        assert_eq!(layout(&format!("{tf32}\n{k16}")), None);
        // A bare mention with no shape does not count.
        assert_eq!(
            layout(&format!("// mma.sync.aligned.\n{tf32}")),
            Some(Layout::MmaSyncM16n8k8Tf32)
        );
    }

    #[test]
    fn indices_shared_with_an_operand_pick_the_tile() {
        let got = dims("mma_16816(acc[i][j], a_frag[i], b_frag[j][0], b_frag[j][1]);");
        assert_eq!(
            got,
            vec![
                (
                    "acc".to_owned(),
                    Dims {
                        m: Some(0),
                        n: Some(1)
                    }
                ),
                (
                    "a_frag".to_owned(),
                    Dims {
                        m: Some(0),
                        n: None
                    }
                ),
                (
                    "b_frag".to_owned(),
                    Dims {
                        m: None,
                        n: Some(0)
                    }
                ),
            ]
        );
    }

    #[test]
    fn a_split_k_set_and_literal_tiles_add_nothing() {
        // The megakernel: `s` picks a partial accumulator set, the n tile is a literal.
        let got = dims("mma_bf16_16816(acc[s][0], a, b[0], b[1]);");
        assert_eq!(got[0], ("acc".to_owned(), Dims::default()));
    }

    #[test]
    fn not_a_call_of_subscripted_fragments() {
        assert!(from_call("asm volatile(\"mma.sync...\" : \"+f\"(d[0]));").is_none());
        assert!(
            from_call("gemm(tiled_mma, accum, tCrA(_, _, k), tCrB(_, _, k), accum);").is_none()
        );
        assert_eq!(subscripts("acc[i][j + 1]").unwrap().1, ["i", "j + 1"]);
        assert!(subscripts("acc[i] + 1").is_none());
    }

    #[test]
    fn names_the_calls_disagree_about_have_no_dims() {
        let mut t = TileDims::default();
        t.add(
            "acc".to_owned(),
            Dims {
                m: Some(0),
                n: Some(1),
            },
        );
        t.add(
            "acc".to_owned(),
            Dims {
                m: Some(1),
                n: Some(0),
            },
        );
        assert_eq!(t.of("acc"), Dims::default());
        assert_eq!(t.of("other"), Dims::default());
    }
}
