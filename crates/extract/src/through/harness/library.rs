//! The library GEMMs of `grammars/library_gemms.toml`: the C++ that writes a problem
//! into a copy of a launcher's Arguments, and where a library's templates name each
//! operand's element type and layout.
//!
//! Invariant: operand types are read only from the positions the table gives, through
//! the file's aliases; an operand no carrier names stays unknown (the reproducer says
//! so and the runner asks for `--dtype`), never guessed from an alias's name.

use std::sync::OnceLock;

use crate::scan::split_top;

/// One library class template a launcher runs (`[[gemm]]`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Gemm {
    pub template: String,
    /// Helper definitions the rebind uses, emitted once at namespace scope.
    #[serde(default)]
    pub prelude: String,
    /// Statements writing the problem into `{args}`.
    pub rebind: String,
    /// The part of `{args}` holding alpha and beta.
    pub scalars: String,
    /// Whether its epilogue's conversion to the output type saturates.
    #[serde(default)]
    pub saturates: bool,
    /// Names that, anywhere in the type's expansion, make it no one GEMM: what each is.
    #[serde(default)]
    pub refuse: std::collections::BTreeMap<String, String>,
}

impl Gemm {
    /// Why `written` (followed through `resolve`) is no GEMM the runner's one problem
    /// describes: (the name found, what it is).
    pub fn refusal(
        &self,
        written: &str,
        resolve: &dyn Fn(&str) -> String,
    ) -> Option<(String, String)> {
        let names = expansion_names(written, resolve);
        self.refuse
            .iter()
            .find(|(name, _)| names.contains(*name))
            .map(|(n, w)| (n.clone(), w.clone()))
    }
}

/// Every name in `written`'s [`expansion`].
fn expansion_names(written: &str, resolve: &dyn Fn(&str) -> String) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for text in expansion(written, resolve).1 {
        for w in kwb_syntax::identifiers(&text) {
            if !names.iter().any(|n| n == w) {
                names.push(w.to_owned());
            }
        }
    }
    names
}

/// The elementwise function the epilogue under `written` applies: `Ok(None)` for none,
/// `Ok(Some(model))` for one kwb's answer applies too, `Err(name)` for one it does not
/// model.
pub(crate) fn activation(
    written: &str,
    resolve: &dyn Fn(&str) -> String,
) -> Result<Option<String>, String> {
    let names = expansion_names(written, resolve);
    for a in &table().activation {
        if let Some(found) = a.names.iter().find(|n| names.contains(n)) {
            return if a.reads.is_empty() {
                Err(found.clone())
            } else {
                Ok(Some(a.reads.clone()))
            };
        }
    }
    Ok(None)
}

/// What the MMA under `written` reads A and B as, where fewer bits than `types` (A's
/// and B's) hold: `tf32` for a tensor-op GEMM on `float`s.
pub(crate) fn mma_input(
    written: &str,
    types: &[OperandTypes; 4],
    resolve: &dyn Fn(&str) -> String,
) -> Option<String> {
    let names = expansion_names(written, resolve);
    table()
        .mma_input
        .iter()
        .find(|m| {
            types[..2]
                .iter()
                .all(|t| t.element.as_deref() == Some(m.elements.as_str()))
                && names.contains(&m.mentions)
                && !m.unless.iter().any(|u| names.contains(u))
        })
        .map(|m| m.reads.clone())
}

/// A template whose arguments name operands' element types and layouts (`[[carrier]]`):
/// (element position, layout position) per operand.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Carrier {
    template: String,
    accumulator: Option<usize>,
    #[serde(rename = "A")]
    a: Option<[usize; 2]>,
    #[serde(rename = "B")]
    b: Option<[usize; 2]>,
    #[serde(rename = "C")]
    c: Option<[usize; 2]>,
    #[serde(rename = "D")]
    d: Option<[usize; 2]>,
}

/// An MMA that reads A and B at fewer bits than their type holds (`[[mma_input]]`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MmaInput {
    elements: String,
    mentions: String,
    #[serde(default)]
    unless: Vec<String>,
    reads: String,
}

/// An elementwise function an epilogue applies (`[[activation]]`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Activation {
    names: Vec<String>,
    reads: String,
}

#[derive(serde::Deserialize)]
struct Table {
    gemm: Vec<Gemm>,
    mma_input: Vec<MmaInput>,
    activation: Vec<Activation>,
    carrier: Vec<Carrier>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        // Part of the binary; `the_table_parses` holds it well formed.
        toml::from_str(include_str!("../../../../../grammars/library_gemms.toml")).unwrap_or(
            Table {
                gemm: Vec::new(),
                mma_input: Vec::new(),
                activation: Vec::new(),
                carrier: Vec::new(),
            },
        )
    })
}

/// Whether `written` (a template name, maybe with leading namespaces dropped or a
/// leading `::`) names `template`.
fn names(template: &str, written: &str) -> bool {
    let name = written.trim().trim_start_matches("typename ").trim();
    let name = name.strip_prefix("::").unwrap_or(name);
    !name.is_empty() && (template == name || template.ends_with(&format!("::{name}")))
}

/// The library GEMM `written` (a template-id, resolved) is an instance of.
pub(crate) fn gemm(written: &str) -> Option<&'static Gemm> {
    let (name, _) = template_id(written)?;
    table().gemm.iter().find(|g| names(&g.template, &name))
}

/// `NAME<ARGS…>` (or `typename NAME<ARGS…>::Member`) split into the name and its
/// top-level arguments.
pub(crate) fn template_id(text: &str) -> Option<(String, Vec<String>)> {
    let text = text.trim().trim_start_matches("typename").trim();
    let open = text.find('<')?;
    let end = crate::scan::close(text, open)?;
    Some((
        text[..open].trim().to_owned(),
        split_top(&text[open + 1..end - 1])
            .into_iter()
            .map(|a| a.trim().to_owned())
            .collect(),
    ))
}

/// One operand's types as the library templates name them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct OperandTypes {
    /// The element type, resolved through the aliases (`cutlass::half_t`).
    pub element: Option<String>,
    /// Whether the layout is row-major (`Some(false)`: column-major).
    pub row_major: Option<bool>,
}

/// The template-ids under `written`, breadth first: `written` itself and its template
/// arguments, each followed through `resolve` (the file's aliases) and into their own
/// arguments, four levels deep, as (name, arguments); the whole texts walked too.
fn expansion(
    written: &str,
    resolve: &dyn Fn(&str) -> String,
) -> (Vec<(String, Vec<String>)>, Vec<String>) {
    let mut ids = Vec::new();
    let mut texts = Vec::new();
    let mut queue = vec![(resolve(written), 0_usize)];
    let mut at = 0;
    while at < queue.len() {
        let (text, depth) = queue[at].clone();
        at += 1;
        if let Some((name, args)) = template_id(&text) {
            if depth < 4 {
                for a in &args {
                    queue.push((resolve(a), depth + 1));
                }
            }
            ids.push((name, args));
        }
        texts.push(text);
    }
    (ids, texts)
}

/// The carrier of the table template-id `name` is an instance of.
fn carrier(name: &str) -> Option<&'static Carrier> {
    table().carrier.iter().find(|c| names(&c.template, name))
}

/// The operands' types (A, B, C, D) the templates under `written` name (through
/// [`expansion`]); the first carrier to name an operand wins.
pub(crate) fn operand_types(written: &str, resolve: &dyn Fn(&str) -> String) -> [OperandTypes; 4] {
    let mut out: [OperandTypes; 4] = Default::default();
    let mut found = [false; 4];
    for (name, args) in expansion(written, resolve).0 {
        let Some(c) = carrier(&name) else { continue };
        for (i, slot) in [c.a, c.b, c.c, c.d].into_iter().enumerate() {
            let Some([e, l]) = slot else { continue };
            if found[i] {
                continue;
            }
            let element = args
                .get(e)
                .map(|a| resolve(a))
                .filter(|a| a != "void" && !a.is_empty());
            let row_major = args.get(l).and_then(|a| layout_of(a, resolve));
            if element.is_some() || row_major.is_some() {
                found[i] = true;
                out[i] = OperandTypes { element, row_major };
            }
        }
    }
    out
}

/// The accumulator's element type the templates under `written` name (resolved).
pub(crate) fn accumulator(written: &str, resolve: &dyn Fn(&str) -> String) -> Option<String> {
    expansion(written, resolve)
        .0
        .into_iter()
        .find_map(|(name, args)| {
            let i = carrier(&name)?.accumulator?;
            args.get(i).map(|a| resolve(a))
        })
}

/// Whether layout `text` is row-major: `RowMajor`/`ColumnMajor` through the aliases,
/// or a stride tag of one (`TagToStrideA_t<LayoutA>`).
fn layout_of(text: &str, resolve: &dyn Fn(&str) -> String) -> Option<bool> {
    let mut t = resolve(text);
    for _ in 0..4 {
        let last = t.rsplit("::").next().unwrap_or(&t).trim();
        if last == "RowMajor" {
            return Some(true);
        }
        if last == "ColumnMajor" {
            return Some(false);
        }
        let (name, args) = template_id(&t)?;
        if !name.contains("TagToStride") {
            return None;
        }
        t = resolve(args.first()?);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses() {
        let t: Table = toml::from_str(include_str!("../../../../../grammars/library_gemms.toml"))
            .expect("grammars/library_gemms.toml");
        assert!(t.gemm.len() >= 3 && t.carrier.len() >= 5);
        for g in &t.gemm {
            assert!(g.rebind.contains("{args}"), "{}", g.template);
        }
    }

    #[test]
    fn operand_types_follow_aliases_into_a_3x_kernel() {
        let aliases = [
            (
                "Gemm",
                "cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>",
            ),
            (
                "GemmKernel",
                "cutlass::gemm::kernel::GemmUniversal<Shape<int,int,int,int>, CollectiveMainloop, CollectiveEpilogue>",
            ),
            (
                "CollectiveMainloop",
                "typename cutlass::gemm::collective::CollectiveBuilder<Arch, Op, ElementA, LayoutA, 8, ElementB, LayoutB, 8, float, Tile, Cluster, Stages, Sched>::CollectiveOp",
            ),
            (
                "CollectiveEpilogue",
                "typename cutlass::epilogue::collective::CollectiveBuilder<Arch, Op, Tile, Cluster, Auto, float, float, ElementC, LayoutC, 8, ElementC, LayoutC, 8, Sched>::CollectiveOp",
            ),
            ("ElementA", "cutlass::half_t"),
            ("ElementB", "cutlass::half_t"),
            ("ElementC", "float"),
            ("LayoutA", "cutlass::layout::RowMajor"),
            ("LayoutB", "cutlass::layout::ColumnMajor"),
            ("LayoutC", "cutlass::layout::ColumnMajor"),
        ];
        let resolve = |t: &str| -> String {
            let mut t = t.trim().to_owned();
            while let Some((_, v)) = aliases.iter().find(|(n, _)| *n == t) {
                t = (*v).to_owned();
            }
            t
        };
        let [a, b, c, d] = operand_types("Gemm", &resolve);
        assert_eq!(a.element.as_deref(), Some("cutlass::half_t"));
        assert_eq!(a.row_major, Some(true));
        assert_eq!(b.row_major, Some(false));
        assert_eq!(c.element.as_deref(), Some("float"));
        assert_eq!(d.row_major, Some(false));
        assert!(gemm(&resolve("Gemm")).is_some_and(|g| g.scalars.ends_with(".thread")));
    }

    #[test]
    fn a_2x_device_gemm_names_its_operands_and_a_stride_tag_its_layout() {
        let resolve = |t: &str| t.trim().to_owned();
        let [a, b, c, d] = operand_types(
            "cutlass::gemm::device::Gemm<float, cutlass::layout::RowMajor, float, cutlass::layout::ColumnMajor, float, cutlass::layout::RowMajor, float>",
            &resolve,
        );
        assert_eq!(a.element.as_deref(), Some("float"));
        assert_eq!(
            (a.row_major, b.row_major, c.row_major),
            (Some(true), Some(false), Some(true))
        );
        assert_eq!(c, d);
        assert_eq!(
            layout_of(
                "cutlass::gemm::TagToStrideA_t<cutlass::layout::ColumnMajor>",
                &resolve
            ),
            Some(false)
        );
        assert!(gemm("cutlass::gemm::device::GemmSplitKParallel<float>").is_none());
    }
}
