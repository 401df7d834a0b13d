//! Operands one member function makes and returns and another unpacks from its
//! parameter: CUTLASS 3.x's sm100 collectives build the UMMA fragments in `mma_init`
//! (`Tensor tCrA = TiledMma::make_fragment_A(sA); … return MmaParams{tiled_mma, tCrA,
//! tCrB};`) and the MMA loop reads them back in `mma` (`auto [tiled_mma, tCrA, tCrB] =
//! mma_inputs;` with `MmaParams const& mma_inputs`). The map follows the binding's
//! position into the returned aggregate of the parameter's type, so the fragments and
//! the shared tiles under them are operand sites of the function that declares them.

use std::collections::BTreeSet;

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fields::Field;

use super::{Confidence, Found, Scope, SiteKind, operand_chain, push_chain};
use crate::functions::Function;

/// An operand the MMA reads out of a structured binding of a parameter.
struct Unpacked {
    letter: char,
    mma_line: usize,
    /// The parameter's type, its last name component (`MmaParams`).
    type_name: String,
    /// The operand's position among the binding's names.
    position: usize,
    /// How many names the binding has.
    arity: usize,
    /// The operand's name in the binding (`tCrA`).
    name: String,
    /// Where it was unpacked (`CollectiveMma::mma`).
    unpacked_in: String,
}

/// Adds, to the function that returns a parameter's aggregate, the declaration of
/// each operand the MMA unpacks from that parameter, and the chain under it (the
/// fragment, the shared tile it is made from). `derived` holds each function's sites.
pub(super) fn add_returned_operands<'t, 's>(
    parsed: &Parsed,
    functions: &[Function<'t>],
    scope: &dyn Fn(usize) -> &'s Scope<'t>,
    derived: &mut [Vec<Found<'t>>],
) where
    't: 's,
{
    let mut wanted: Vec<Unpacked> = Vec::new();
    for (i, sites) in derived.iter().enumerate() {
        for site in sites.iter().filter(|s| s.kind == SiteKind::Operand) {
            if let Some(u) = unpacked(site, &functions[i], scope(i), parsed) {
                wanted.push(u);
            }
        }
    }
    if wanted.is_empty() {
        return;
    }
    for u in wanted {
        let Some((j, element)) = returned_element(parsed, functions, scope, &u) else {
            continue;
        };
        let name = &parsed.masked[element.byte_range()];
        let Some(decl) = scope(j).lookup(name, element.start_byte()) else {
            continue;
        };
        let mut seen: BTreeSet<(usize, String)> = derived[j]
            .iter()
            .filter(|f| f.kind == SiteKind::Operand)
            .filter_map(|f| {
                let name = f.note.as_deref()?.split('`').nth(1)?;
                Some((f.node.id(), name.to_owned()))
            })
            .collect();
        let (letter, mma_line) = (u.letter, u.mma_line);
        if seen.insert((decl.node.id(), decl.name.clone())) {
            derived[j].push(Found {
                kind: SiteKind::Operand,
                node: decl.node,
                confidence: Confidence::Medium,
                note: Some(format!(
                    "feeds operand {letter} of the MMA at line {mma_line}: `{}`, returned as element {} of `{}` and unpacked in `{}`",
                    decl.name, u.position, u.type_name, u.unpacked_in
                )),
            });
        }
        push_chain(
            &operand_chain(scope(j), decl, parsed),
            (letter, mma_line),
            &mut seen,
            &mut derived[j],
        );
    }
}

/// The operand site `auto [tiled_mma, tCrA, tCrB] = mma_inputs;` of a parameter
/// `MmaParams const& mma_inputs`, read back from its note and its declaration.
fn unpacked(
    site: &Found<'_>,
    function: &Function<'_>,
    scope: &Scope<'_>,
    parsed: &Parsed,
) -> Option<Unpacked> {
    let note = site.note.as_deref()?;
    if !note.ends_with("values in a parameter") {
        return None;
    }
    // "operand A of the MMA at line 699: `tCrA`, values in a parameter"
    let rest = note.strip_prefix("operand ")?;
    let letter = rest.chars().next()?;
    let mma_line = rest
        .split_once("at line ")?
        .1
        .split(':')
        .next()?
        .parse()
        .ok()?;
    let name = note.split('`').nth(1)?;
    // declaration → init_declarator (structured_binding_declarator = identifier)
    let mut cursor = site.node.walk();
    let (binding, value) = site
        .node
        .children_by_field_name("declarator", &mut cursor)
        .filter(|d| d.kind() == "init_declarator")
        .find_map(|d| {
            let target = d.field("declarator")?;
            (target.kind() == "structured_binding_declarator")
                .then_some((target, d.field("value")?))
        })?;
    let names: Vec<&str> = (0..binding.named_child_count())
        .filter_map(|k| binding.named_child(k))
        .filter(|c| c.kind() == "identifier")
        .map(|c| &parsed.masked[c.byte_range()])
        .collect();
    let position = names.iter().position(|n| *n == name)?;
    // `auto [a, b] = {x, y};` is not a parameter's aggregate.
    if value.kind() != "identifier" {
        return None;
    }
    let parameter = scope
        .lookup(&parsed.masked[value.byte_range()], value.start_byte())
        .filter(|d| d.parameter)?;
    let type_name = parameter
        .node
        .field("type")
        .map(|t| last_component(&parsed.masked[t.byte_range()]))?;
    if type_name.is_empty() || type_name == "auto" {
        return None;
    }
    Some(Unpacked {
        letter,
        mma_line,
        type_name,
        position,
        arity: names.len(),
        name: name.to_owned(),
        unpacked_in: function.name.clone(),
    })
}

/// `cutlass::Foo<T>` → `Foo`.
fn last_component(text: &str) -> String {
    let text = text.split('<').next().unwrap_or(text).trim();
    text.rsplit("::").next().unwrap_or(text).trim().to_owned()
}

/// The function that returns `type_name{…}` (or `type_name(…)`), and the element at
/// the binding's position when it is a plain name. The first such function of the
/// file other than the one that unpacks it.
fn returned_element<'t, 's>(
    parsed: &Parsed,
    functions: &[Function<'t>],
    scope: &dyn Fn(usize) -> &'s Scope<'t>,
    u: &Unpacked,
) -> Option<(usize, Node<'t>)>
where
    't: 's,
{
    for (j, function) in functions.iter().enumerate() {
        if function.name == u.unpacked_in {
            continue;
        }
        let Some(body) = function.body else {
            continue;
        };
        let text = &parsed.masked[body.byte_range()];
        if !text.contains("return") || !text.contains(u.type_name.as_str()) {
            continue;
        }
        let mut stack = vec![body];
        while let Some(node) = stack.pop() {
            if node.kind() == "return_statement" {
                if let Some(element) = element_of(node, u, scope(j), parsed) {
                    return Some((j, element));
                }
                continue;
            }
            // Nested functions and lambdas return their own values.
            if matches!(node.kind(), "lambda_expression" | "function_definition") {
                continue;
            }
            for k in 0..node.named_child_count() {
                if let Some(child) = node.named_child(k) {
                    stack.push(child);
                }
            }
        }
    }
    None
}

/// In `return MmaParams{tiled_mma, tCrA, tCrB};` (or `MmaParams(…)`), the element at
/// `u.position` when it is a name. A tuple parameter (`cute::tuple<TiledMma,
/// FragmentA, FragmentB> const&`) names no maker, so `return cute::make_tuple(tiled_mma,
/// tCrA, tCrB);` counts only with as many elements as the binding and the same name at
/// the operand's position. A local aggregate returned by name (`MmaParams<…>
/// mma_params{tiled_mma, tCrA, tCrB}; return mma_params;`) counts as its initializer.
fn element_of<'t>(
    ret: Node<'t>,
    u: &Unpacked,
    scope: &Scope<'t>,
    parsed: &Parsed,
) -> Option<Node<'t>> {
    let value = ret.named_child(0)?;
    let (ty, list) = match value.kind() {
        "identifier" => {
            let local = scope.lookup(&parsed.masked[value.byte_range()], value.start_byte())?;
            let list = local.value.filter(|v| v.kind() == "initializer_list")?;
            (local.node.field("type")?, list)
        }
        "compound_literal_expression" => (value.field("type")?, value.field("value")?),
        "call_expression" => (value.field("function")?, value.field("arguments")?),
        _ => return None,
    };
    let maker = last_component(&parsed.masked[ty.byte_range()]);
    let tuple = matches!(u.type_name.as_str(), "tuple" | "pair")
        && matches!(
            maker.as_str(),
            "make_tuple" | "make_pair" | "tuple" | "pair"
        );
    if maker != u.type_name && !tuple {
        return None;
    }
    let elements: Vec<Node<'t>> = (0..list.named_child_count())
        .filter_map(|k| list.named_child(k))
        .filter(|c| c.kind() != "comment")
        .collect();
    let element = *elements.get(u.position)?;
    if element.kind() != "identifier" {
        return None;
    }
    if tuple && (elements.len() != u.arity || parsed.masked[element.byte_range()] != *u.name) {
        return None;
    }
    Some(element)
}
