//! Logical coordinates of CuTe fragments, from the partition calls that made them.
//!
//! CuTe code partitions a tile among threads (`thr_mma.partition_C(gC)`) and makes
//! register fragments of the same shape (`thr_mma.make_fragment_C(tCgC)`,
//! `thr_mma.partition_fragment_A(sA(_, _, 0))`). Partitioning an identity tensor of the
//! same tile the same way gives each value's coordinates: the CuTe idiom for
//! predication. For a fragment kwb probes, this module follows its declaration back to
//! the partitioned tile and writes that expression for the probe:
//!
//! - `make_fragment_C(T)` with `T = thr.partition_C(G)`, `partition_fragment_C(G)`
//!   and `partition_C(G)` itself → `thr.partition_C(ID(G))`, axes (m, n);
//! - the same for A → axes (m, k), and B → (n, k);
//! - `ID(G)`: when `G = local_tile(MX, args…)`, the same `local_tile` of an identity
//!   tensor of MX's shape (global coordinates); otherwise an identity tensor of G's
//!   shape (coordinates within the tile). Shapes are flattened to their first two
//!   modes, so coordinates are plain integers.
//!
//! Only declarations of the probed function before the probe are followed; anything
//! else (a fragment passed in as a parameter, an unknown initializer) gives none, and
//! the probe records raw order.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::nodes::innermost_declarator;

/// The coordinate argument for a probe of `name` at byte `at` of `function`. `role`
/// is what the probe reads (`C` the accumulator or output, `A` or `B` an operand): a
/// `thr.partition_X` names its own role; a `local_partition` names none, and is read
/// as `role`.
pub(crate) fn coords(
    parsed: &Parsed,
    function: Node<'_>,
    name: &str,
    at: usize,
    role: char,
) -> Option<String> {
    let decls = declarations(parsed, function, at);
    let partition = partitioned(&decls, name, 0)?;
    let role = partition.role.unwrap_or(role);
    let axes = match role {
        'C' => "kwb::Axis::M, kwb::Axis::N",
        'A' => "kwb::Axis::M, kwb::Axis::K",
        _ => "kwb::Axis::N, kwb::Axis::K",
    };
    let id = identity(&decls, &partition.tile);
    let partitioned = match &partition.how {
        How::Thread(thr) => format!("{thr}.partition_{role}({id})"),
        How::Local(rest) => format!("cute::local_partition({id},{rest})"),
    };
    Some(format!("kwb::tensor_coords<{axes}>({partitioned})"))
}

/// The shared tensor behind the partition `name` (`tCsA = thr.partition_A(sA)` →
/// `sA`) declared in `function` before byte `at`, when its role is `letter` (A or B).
pub(crate) fn shared_source(
    parsed: &Parsed,
    function: Node<'_>,
    name: &str,
    letter: char,
    at: usize,
) -> Option<String> {
    let decls = declarations(parsed, function, at);
    let Partition { role, how, tile } = partitioned(&decls, name, 0)?;
    let plain = tile.chars().all(|c| c.is_alphanumeric() || c == '_');
    (role == Some(letter) && matches!(how, How::Thread(_)) && plain).then_some(tile)
}

/// `name = initializer` pairs declared in `function` before `at`, last first.
fn declarations(parsed: &Parsed, function: Node<'_>, at: usize) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut stack = vec![function];
    while let Some(n) = stack.pop() {
        if n.kind() == "init_declarator" && n.end_byte() <= at {
            let name = innermost_declarator(n);
            if let Some(value) = n.child_by_field_name("value")
                && name.kind() == "identifier"
            {
                found.push((
                    parsed.source[name.byte_range()].to_owned(),
                    parsed.source[value.byte_range()].to_owned(),
                ));
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    found
}

fn initializer<'d>(decls: &'d [(String, String)], name: &str) -> Option<&'d str> {
    let mut matching = decls.iter().filter(|(n, _)| n == name);
    let (_, value) = matching.next()?;
    // A name declared twice (shadowed in another block) is ambiguous.
    matching.next().is_none().then_some(value.as_str())
}

/// `thr.method(arg)` → (thr, method, arg), for a single-argument member call.
fn member_call(text: &str) -> Option<(&str, &str, &str)> {
    let text = text.trim();
    let open = text.find('(')?;
    let inner = text.strip_suffix(')')?.get(open + 1..)?;
    let callee = text[..open].trim();
    let (thr, method) = callee.rsplit_once('.')?;
    let thr = thr.trim();
    if thr.is_empty() || !thr.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    // One argument: no top-level comma.
    let mut depth = 0;
    for c in inner.chars() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => return None,
            _ => {}
        }
    }
    Some((thr, method.trim(), inner.trim()))
}

/// How a tile was partitioned among threads.
#[derive(Debug, PartialEq)]
enum How {
    /// `thr.partition_X(tile)`: a thread slice of a TiledMMA.
    Thread(String),
    /// `local_partition(tile, REST)`: REST, the thread layout, index and projection.
    Local(String),
}

/// The partition behind a fragment or view: its role where the call names one, how
/// the tile was partitioned, and the tile.
#[derive(Debug, PartialEq)]
struct Partition {
    role: Option<char>,
    how: How,
    tile: String,
}

/// The partition behind fragment `name`: `thr.partition_X(T)`,
/// `thr.partition_fragment_X(T)`, `thr.make_fragment_X(P)` of one of those,
/// `local_partition(T, layout, index[, projection])`, or `make_tensor_like(P)` /
/// `make_fragment_like(P)` of any of these (registers shaped as the partition).
fn partitioned(decls: &[(String, String)], name: &str, depth: usize) -> Option<Partition> {
    if depth > 4 {
        return None;
    }
    let value = initializer(decls, name)?.trim();
    for like in ["make_tensor_like", "make_fragment_like"] {
        if let Some(inner) = free_call(value, like) {
            let inner = inner.trim();
            return inner
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_')
                .then(|| partitioned(decls, inner, depth + 1))
                .flatten();
        }
    }
    if let Some(args) = free_call(value, "local_partition") {
        let comma = top_level_comma(args)?;
        return Some(Partition {
            role: None,
            how: How::Local(args[comma + 1..].to_owned()),
            tile: args[..comma].trim().to_owned(),
        });
    }
    let (thr, method, arg) = member_call(value)?;
    for role in ['C', 'A', 'B'] {
        if method == format!("partition_{role}") || method == format!("partition_fragment_{role}") {
            return Some(Partition {
                role: Some(role),
                how: How::Thread(thr.to_owned()),
                tile: arg.to_owned(),
            });
        }
        if method == format!("make_fragment_{role}") {
            let inner = partitioned(decls, arg, depth + 1)?;
            return (inner.role == Some(role)).then_some(inner);
        }
    }
    None
}

/// The argument text of `NAME(…)` or `cute::NAME(…)` (a template argument list
/// allowed), when `value` is that one call.
fn free_call<'v>(value: &'v str, name: &str) -> Option<&'v str> {
    let rest = value.strip_prefix("cute::").unwrap_or(value);
    let rest = rest.strip_prefix(name)?;
    let rest = match rest.strip_prefix('<') {
        Some(args) => &args[args.find('>')? + 1..],
        None => rest,
    };
    let inner = rest.trim_start().strip_prefix('(')?.strip_suffix(')')?;
    // The whole value is the one call: its parentheses balance inside.
    let mut depth = 0_i32;
    for c in inner.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return None;
        }
    }
    Some(inner)
}

/// The identity tensor laid out like tile `tile`: global coordinates through the
/// `local_tile` that made it, when it is one.
fn identity(decls: &[(String, String)], tile: &str) -> String {
    let is_name = tile.chars().all(|c| c.is_alphanumeric() || c == '_');
    if is_name
        && let Some(value) = initializer(decls, tile)
        && let Some(args) = local_tile_args(value)
        && let Some(comma) = top_level_comma(args)
    {
        let (first, rest) = (&args[..comma], &args[comma + 1..]);
        return format!("cute::local_tile({},{rest})", flat_identity(first.trim()));
    }
    flat_identity(tile)
}

/// The byte of the first comma outside any bracket (`mC(_, _, l), tiler` → 11).
fn top_level_comma(text: &str) -> Option<usize> {
    let mut depth = 0_i32;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

/// An identity tensor of `tensor`'s first two modes, flattened: coordinates are plain
/// (row, column) integers even where the tile's shape is hierarchical (a swizzled
/// shared-memory layout), as CuTe's predication idiom builds it.
fn flat_identity(tensor: &str) -> String {
    format!(
        "cute::make_identity_tensor(cute::make_shape(cute::size<0>({tensor}), cute::size<1>({tensor})))"
    )
}

/// The argument text of `local_tile(…)` / `cute::local_tile(…)`.
fn local_tile_args(value: &str) -> Option<&str> {
    let value = value.trim();
    let rest = value
        .strip_prefix("cute::local_tile(")
        .or_else(|| value.strip_prefix("local_tile("))?;
    rest.strip_suffix(')')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decls(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn an_accumulator_traces_back_to_the_global_tile() {
        let d = decls(&[
            (
                "gC",
                "local_tile(mC, cta_tiler, cta_coord, Step<_1, _1, X>{})",
            ),
            ("tCgC", "thr_mma.partition_C(gC)"),
            ("accum", "thr_mma.make_fragment_C(tCgC)"),
        ]);
        let p = partitioned(&d, "accum", 0).unwrap();
        assert_eq!(
            p,
            Partition {
                role: Some('C'),
                how: How::Thread("thr_mma".to_owned()),
                tile: "gC".to_owned()
            }
        );
        let tile = p.tile;
        assert_eq!(
            identity(&d, &tile),
            "cute::local_tile(cute::make_identity_tensor(cute::make_shape(cute::size<0>(mC), cute::size<1>(mC))), cta_tiler, cta_coord, Step<_1, _1, X>{})"
        );
        // A batched tensor's slice as local_tile's first argument keeps its commas.
        let batched = decls(&[("gC", "local_tile(mC(_, _, l), tiler, coord)")]);
        assert_eq!(
            identity(&batched, "gC"),
            "cute::local_tile(cute::make_identity_tensor(cute::make_shape(cute::size<0>(mC(_, _, l)), cute::size<1>(mC(_, _, l)))), tiler, coord)"
        );
        // The epilogue's destination is the same partition.
        assert_eq!(partitioned(&d, "tCgC", 0).unwrap().tile, "gC");
    }

    #[test]
    fn an_operand_fragment_of_a_shared_tile_is_within_the_tile() {
        let d = decls(&[("tCrA", "thr_mma.partition_fragment_A(sA(_, _, 0))")]);
        let Partition { role, how, tile } = partitioned(&d, "tCrA", 0).unwrap();
        assert_eq!((role, how), (Some('A'), How::Thread("thr_mma".to_owned())));
        assert_eq!(
            identity(&d, &tile),
            "cute::make_identity_tensor(cute::make_shape(cute::size<0>(sA(_, _, 0)), cute::size<1>(sA(_, _, 0))))"
        );
    }

    /// sgemm_1's idiom: `local_partition` of a tile by a thread layout and a projection,
    /// the accumulator `make_tensor_like` the output's partition. The identity tensor
    /// is partitioned the same way, its role the probe's.
    #[test]
    fn a_local_partition_is_repeated_on_the_identity_tensor() {
        let d = decls(&[
            (
                "gC",
                "local_tile(mC, cta_tiler, cta_coord, Step<_1,_1, X>{})",
            ),
            (
                "tCsA",
                "local_partition(sA, tC, threadIdx.x, Step<_1, X>{})",
            ),
            (
                "tCgC",
                "local_partition(gC, tC, threadIdx.x, Step<_1,_1>{})",
            ),
            ("tCrC", "make_tensor_like(tCgC)"),
        ]);
        let c = partitioned(&d, "tCrC", 0).unwrap();
        assert_eq!(
            c,
            Partition {
                role: None,
                how: How::Local(" tC, threadIdx.x, Step<_1,_1>{}".to_owned()),
                tile: "gC".to_owned()
            }
        );
        let a = partitioned(&d, "tCsA", 0).unwrap();
        assert_eq!(a.tile, "sA");
        assert_eq!(
            identity(&d, &a.tile),
            "cute::make_identity_tensor(cute::make_shape(cute::size<0>(sA), cute::size<1>(sA)))"
        );
        assert!(free_call("local_partition(a, b)(0)", "local_partition").is_none());
        assert_eq!(
            free_call("cute::make_fragment_like<float>(x)", "make_fragment_like"),
            Some("x")
        );
    }

    #[test]
    fn unknown_or_mismatched_initializers_give_nothing() {
        let d = decls(&[
            ("x", "make_tensor(ptr, layout)"),
            ("tCsA", "thr.partition_A(sA)"),
            ("frag", "thr.make_fragment_B(tCsA)"),
            ("two", "thr.partition_C(a, b)"),
        ]);
        assert!(partitioned(&d, "x", 0).is_none());
        assert!(
            partitioned(&d, "frag", 0).is_none(),
            "a B fragment of an A partition"
        );
        assert!(partitioned(&d, "two", 0).is_none());
        assert!(partitioned(&d, "missing", 0).is_none());
    }
}
