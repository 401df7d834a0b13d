//! Descriptor operators: a TMA map's swizzle, global dims, global stride or box changed.

use std::ops::Range;

use kwb_edit::Indel;
use kwb_sites::{Kernel, KernelMap, SiteKind};
use kwb_syntax::Parsed;
use tree_sitter::Node;

use super::{
    Planted, brace_elements, collect, declared, function_node, identifiers, planted, sites, text,
};
use crate::Stage;

/// The swizzle a map is given instead of `from`.
fn other_swizzle(from: &str) -> Option<&'static str> {
    Some(match from {
        "CU_TENSOR_MAP_SWIZZLE_128B" => "CU_TENSOR_MAP_SWIZZLE_64B",
        "CU_TENSOR_MAP_SWIZZLE_64B"
        | "CU_TENSOR_MAP_SWIZZLE_32B"
        | "CU_TENSOR_MAP_SWIZZLE_NONE" => "CU_TENSOR_MAP_SWIZZLE_128B",
        _ => return None,
    })
}

/// Each swizzle enumerator in a function that makes, types or receives a TMA map (the
/// encode, where the map's fields are chosen) changed to another.
pub(super) fn tma_swizzle(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    if sites(k, SiteKind::TmaDescriptor).next().is_none() {
        return Vec::new();
    }
    let Some(function) = parsed
        .tree
        .root_node()
        .descendant_for_byte_range(k.range.start, k.range.end)
    else {
        return Vec::new();
    };
    let mut swizzles = Vec::new();
    identifiers(function, &parsed.source, &mut |n, t| {
        if k.range.contains(&n.start_byte())
            && let Some(to) = other_swizzle(t)
        {
            swizzles.push((n.byte_range(), to));
        }
    });
    swizzles
        .into_iter()
        .map(|(range, to)| {
            planted(
                Stage::Descriptor,
                "tma-swizzle",
                k,
                vec![Indel::replace(range, to)],
            )
        })
        .collect()
}

/// The last name component of a function (`encode` of `tma_2d::encode`).
fn short(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}

/// The initializers of the array named `name` at `at` in `k`: its own declaration's,
/// or, for a parameter, those of the array each caller in the file passes there.
fn arrays<'t>(
    parsed: &'t Parsed,
    map: &'t KernelMap,
    k: &'t Kernel,
    name: &str,
    at: usize,
) -> Vec<(&'t Kernel, Range<usize>)> {
    let Some(function) = function_node(parsed, k) else {
        return Vec::new();
    };
    let Some(d) = declared(parsed, function, name, at) else {
        return Vec::new();
    };
    if let Some(list) = d.braces.filter(|_| d.dimensions >= 1) {
        return vec![(k, list)];
    }
    let Some(parameter) = d
        .declarator
        .parent()
        .filter(|p| p.kind() == "parameter_declaration")
    else {
        return Vec::new();
    };
    let Some(list) = parameter.parent() else {
        return Vec::new();
    };
    let mut cursor = list.walk();
    let parameters: Vec<Node> = list.named_children(&mut cursor).collect();
    let Some(position) = parameters.iter().position(|p| p.id() == parameter.id()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for caller in &map.kernels {
        if std::ptr::eq(caller, k) {
            continue;
        }
        let Some(body) = function_node(parsed, caller) else {
            continue;
        };
        let mut calls = Vec::new();
        collect(body, "call_expression", &mut calls);
        for call in calls {
            let (Some(f), Some(arguments)) = (
                call.child_by_field_name("function"),
                call.child_by_field_name("arguments"),
            ) else {
                continue;
            };
            let mut cursor = arguments.walk();
            let given: Vec<Node> = arguments.named_children(&mut cursor).collect();
            if short(text(parsed, f)) != short(&k.name) || given.len() != parameters.len() {
                continue;
            }
            let Some(arg) = given.get(position).filter(|a| a.kind() == "identifier") else {
                continue;
            };
            let Some(d) = declared(parsed, body, text(parsed, *arg), call.start_byte()) else {
                continue;
            };
            if let Some(list) = d.braces.filter(|_| d.dimensions >= 1) {
                out.push((caller, list));
            }
        }
    }
    out
}

/// The first two elements swapped, when they differ.
fn swapped(parsed: &Parsed, list: &Range<usize>) -> Option<Vec<Indel>> {
    let e = brace_elements(&parsed.source, list);
    let (first, second) = (e.first()?, e.get(1)?);
    let (a, b) = (
        &parsed.source[first.clone()],
        &parsed.source[second.clone()],
    );
    (a != b).then(|| {
        vec![
            Indel::replace(first.clone(), b.to_owned()),
            Indel::replace(second.clone(), a.to_owned()),
        ]
    })
}

/// The first element rewritten by `f`.
fn first_as(
    parsed: &Parsed,
    list: &Range<usize>,
    f: impl Fn(&str) -> String,
) -> Option<Vec<Indel>> {
    let first = brace_elements(&parsed.source, list).into_iter().next()?;
    let written = &parsed.source[first.clone()];
    Some(vec![Indel::replace(first, f(written))])
}

/// At each TMA encode in the function (a call whose second argument is a
/// `CU_TENSOR_MAP_DATA_TYPE_*`), its globalDim, globalStrides and boxDim arrays
/// changed where they are initialized.
pub(super) fn tma_arrays(parsed: &Parsed, map: &KernelMap, k: &Kernel) -> Vec<Planted> {
    let Some(function) = function_node(parsed, k) else {
        return Vec::new();
    };
    let mut calls = Vec::new();
    collect(function, "call_expression", &mut calls);
    let mut out = Vec::new();
    for call in calls {
        let Some(arguments) = call.child_by_field_name("arguments") else {
            continue;
        };
        let mut cursor = arguments.walk();
        let given: Vec<Node> = arguments.named_children(&mut cursor).collect();
        let encodes = given.len() >= 9
            && given[1].kind() == "identifier"
            && text(parsed, given[1]).starts_with("CU_TENSOR_MAP_DATA_TYPE_");
        if !encodes {
            continue;
        }
        for (index, operator) in [(4, "tma-dims"), (5, "tma-stride"), (6, "tma-box")] {
            let arg = given[index];
            if arg.kind() != "identifier" {
                continue;
            }
            for (owner, list) in arrays(parsed, map, k, text(parsed, arg), call.start_byte()) {
                let indels = match operator {
                    "tma-dims" => swapped(parsed, &list),
                    "tma-stride" => first_as(parsed, &list, |s| format!("({s}) * 2")),
                    _ => swapped(parsed, &list)
                        .or_else(|| first_as(parsed, &list, |s| format!("({s}) / 2"))),
                };
                if let Some(indels) = indels {
                    out.push(planted(Stage::Descriptor, operator, owner, indels));
                }
            }
        }
    }
    out
}
