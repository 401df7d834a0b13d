//! A screen's folds (`kwb::Fold`): in a `--screen` build each probe's site argument is
//! `kwb::SiteArg{ID, kwb_fold_ID}`, and `kwb_fold_ID` is declared at the top of the
//! body of the function (or lambda) that holds the probe, so a call adds into the
//! lanes' registers and the fold goes into the screen's table once, when that function
//! returns. Every other build passes the bare site id and declares nothing, so its
//! text is what it was before folds existed.
//!
//! A helper the kernel calls for its MMA (`mma_k_tile`) would fold once per call, a
//! reduction over the warp and a few atomics every K tile. So its folds are threaded:
//! the kernel declares them, each call in the kernel passes their addresses through
//! trailing parameters the helper gains (`kwb::Fold* kwb_in_2 = nullptr`), and in the
//! helper `kwb_fold_2` names the kernel's fold, or the helper's own (`kwb_own_2`) where
//! a call passes none (another caller). Only the kernel's folds then reach the table,
//! once per warp.
//!
//! Invariants: a fold is declared once, in the innermost function or lambda body
//! around its probe, before any statement of it (right after the body's `{`), so it is
//! in scope at the probe and lives until the function returns; the declarations are an
//! edit of their own that goes first, so no probe at that byte goes before them. A
//! threaded helper's parameters
//! have defaults, so a call kwb does not edit still compiles.

use kwb_syntax::Parsed;

/// The folds the probes of one file named, and where each is declared.
#[derive(Default)]
pub(crate) struct Folds {
    /// The kind (`kwb::Kind::…` name) of each site that has a fold.
    kinds: Vec<(u32, &'static str)>,
    /// (the byte after the body's `{`, site id) of each declared fold.
    declared: Vec<(usize, u32)>,
    /// Helpers whose folds their caller, a kernel, holds.
    threaded: Vec<Thread>,
}

/// A helper's folds held by the kernel that calls it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Thread {
    /// The byte after the `{` of the helper's body (where its folds are declared).
    pub helper_body: usize,
    /// The byte of the `)` closing the helper's parameter list, and whether it has
    /// parameters before it.
    pub params_end: (usize, bool),
    /// The byte after the `{` of the kernel's body.
    pub kernel_body: usize,
    /// The byte of the `)` closing each of the kernel's calls of the helper, and
    /// whether the call has arguments before it.
    pub calls: Vec<(usize, bool)>,
}

impl Folds {
    /// The site argument of probe `id` reading a value of `kind` (`OperandA`,
    /// `Accumulator`, …): its fold is declared where the probe text is inserted.
    pub fn site(&mut self, id: u32, kind: &'static str) -> String {
        if !self.kinds.iter().any(|(i, _)| *i == id) {
            self.kinds.push((id, kind));
        }
        format!("kwb::SiteArg{{{id}u, {}}}", name(id))
    }

    /// Declares the folds `text` names at the top of the function body around byte
    /// `at` of `parsed` (once each).
    pub fn place(&mut self, parsed: &Parsed, at: usize, text: &str) {
        let ids: Vec<u32> = named(text).collect();
        if ids.is_empty() {
            return;
        }
        let Some(point) = body_start(parsed, at) else {
            return;
        };
        for id in ids {
            if !self.declared.iter().any(|(_, i)| *i == id) {
                self.declared.push((point, id));
            }
        }
    }

    /// Has the kernel hold the folds of a helper it calls (see the module's text).
    pub fn thread(&mut self, thread: Thread) {
        if !self.threaded.contains(&thread) {
            self.threaded.push(thread);
        }
    }

    /// The insertions: each function body's fold declarations, and for each threaded
    /// helper its parameters and the arguments of the kernel's calls. (point, text).
    pub fn declarations(&self, tag: u32) -> Vec<(usize, String)> {
        let decl = |local: &str, id: u32| {
            let kind = self
                .kinds
                .iter()
                .find(|(i, _)| *i == id)
                .map_or("Accumulator", |(_, k)| k);
            format!(
                "[[maybe_unused]] kwb::Fold {local}{{{id}u, kwb::Kind::{kind}, 0x{tag:08x}u}}; "
            )
        };
        let ids_at = |point: usize| -> Vec<u32> {
            self.declared
                .iter()
                .filter(|(p, _)| *p == point)
                .map(|(_, id)| *id)
                .collect()
        };
        // What each body declares: its own folds, or for a threaded helper a reference
        // to the caller's (or its own); and a kernel also the folds of its helpers.
        let mut bodies: Vec<(usize, String)> = Vec::new();
        let add = |point: usize, text: String, bodies: &mut Vec<(usize, String)>| match bodies
            .iter_mut()
            .find(|(p, _)| *p == point)
        {
            Some((_, t)) => t.push_str(&text),
            None => bodies.push((point, text)),
        };
        let mut points: Vec<usize> = self.declared.iter().map(|(p, _)| *p).collect();
        points.sort_unstable();
        points.dedup();
        for point in points {
            let threaded = self.threaded.iter().any(|t| t.helper_body == point);
            for id in ids_at(point) {
                let text = if threaded {
                    let own = format!("kwb_own_{id}");
                    format!(
                        "{}[[maybe_unused]] kwb::Fold& {} = {} != nullptr ? *{} : {own}; ",
                        decl(&own, id),
                        name(id),
                        input(id),
                        input(id)
                    )
                } else {
                    decl(&name(id), id)
                };
                add(point, text, &mut bodies);
            }
        }
        let mut out = Vec::new();
        let mut helpers_done: Vec<usize> = Vec::new();
        for t in &self.threaded {
            let ids = ids_at(t.helper_body);
            if ids.is_empty() {
                continue;
            }
            // The helper's sites are declared nowhere else: a site's fold is declared
            // once, in the function that holds its probe.
            for &id in &ids {
                add(t.kernel_body, decl(&name(id), id), &mut bodies);
            }
            if !helpers_done.contains(&t.helper_body) {
                helpers_done.push(t.helper_body);
                let (at, has) = t.params_end;
                let params: Vec<String> = ids
                    .iter()
                    .map(|id| format!("kwb::Fold* {} = nullptr", input(*id)))
                    .collect();
                out.push((
                    at,
                    format!("{}{}", if has { ", " } else { "" }, params.join(", ")),
                ));
            }
            for &(at, has) in &t.calls {
                let args: Vec<String> = ids.iter().map(|id| format!("&{}", name(*id))).collect();
                out.push((
                    at,
                    format!("{}{}", if has { ", " } else { "" }, args.join(", ")),
                ));
            }
        }
        bodies.extend(out);
        bodies
    }
}

/// The parameter a threaded helper takes site `id`'s fold through.
fn input(id: u32) -> String {
    format!("kwb_in_{id}")
}

/// The local a site's fold is held in.
fn name(id: u32) -> String {
    format!("kwb_fold_{id}")
}

/// The site ids of the folds `text` names.
fn named(text: &str) -> impl Iterator<Item = u32> + '_ {
    text.match_indices("kwb_fold_").filter_map(|(at, prefix)| {
        let digits: String = text[at + prefix.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// The threading of `helper`'s folds through the calls of it in `kernel` (byte ranges
/// of the two definitions and of the kernel's statements that call the helper, named
/// `helper_name`); `None` where the syntax does not show a parameter list, a body or a
/// call's argument list.
pub(crate) fn thread_of(
    parsed: &Parsed,
    kernel: std::ops::Range<usize>,
    helper: std::ops::Range<usize>,
    calls: &[std::ops::Range<usize>],
    helper_name: &str,
) -> Option<Thread> {
    let helper_fn = definition(parsed, &helper)?;
    let kernel_fn = definition(parsed, &kernel)?;
    let params = first_of(
        helper_fn.child_by_field_name("declarator")?,
        "function_declarator",
    )?
    .child_by_field_name("parameters")?;
    let has_params = params.named_child_count() > 0
        && parsed.masked[params.byte_range()].trim_matches(['(', ')', ' ']) != "void";
    let short = helper_name.rsplit("::").next().unwrap_or(helper_name);
    let mut found = Vec::new();
    for range in calls {
        let node = parsed
            .tree
            .root_node()
            .descendant_for_byte_range(range.start, range.end)?;
        let Some(call) = call_of(parsed, node, short) else {
            continue;
        };
        let args = call.child_by_field_name("arguments")?;
        found.push((args.end_byte() - 1, args.named_child_count() > 0));
    }
    if found.is_empty() {
        return None;
    }
    Some(Thread {
        helper_body: helper_fn.child_by_field_name("body")?.start_byte() + 1,
        params_end: (params.end_byte() - 1, has_params),
        kernel_body: kernel_fn.child_by_field_name("body")?.start_byte() + 1,
        calls: found,
    })
}

/// The function definition that spans `range`.
fn definition<'t>(
    parsed: &'t Parsed,
    range: &std::ops::Range<usize>,
) -> Option<tree_sitter::Node<'t>> {
    innermost(parsed, range.start, range.end, &["function_definition"])
}

/// The innermost node of one of `kinds` around bytes `start..end` (or that node itself).
fn innermost<'t>(
    parsed: &'t Parsed,
    start: usize,
    end: usize,
    kinds: &[&str],
) -> Option<tree_sitter::Node<'t>> {
    let mut node = parsed
        .tree
        .root_node()
        .descendant_for_byte_range(start, end)?;
    loop {
        if kinds.contains(&node.kind()) {
            return Some(node);
        }
        node = node.parent()?;
    }
}

/// `node` or its first descendant (pre-order) of `kind`.
fn first_of<'t>(node: tree_sitter::Node<'t>, kind: &str) -> Option<tree_sitter::Node<'t>> {
    if node.kind() == kind {
        return Some(node);
    }
    let mut cursor = node.walk();
    let children: Vec<_> = node.named_children(&mut cursor).collect();
    children.into_iter().find_map(|c| first_of(c, kind))
}

/// The call of `name` (with or without template arguments) at or inside `node`.
fn call_of<'t>(
    parsed: &Parsed,
    node: tree_sitter::Node<'t>,
    name: &str,
) -> Option<tree_sitter::Node<'t>> {
    if node.kind() == "call_expression" {
        let callee = node.child_by_field_name("function")?;
        let text = &parsed.masked[callee.byte_range()];
        let base = text.split('<').next().unwrap_or(text).trim();
        if base.rsplit("::").next() == Some(name) {
            return Some(node);
        }
    }
    let mut cursor = node.walk();
    let children: Vec<_> = node.named_children(&mut cursor).collect();
    children.into_iter().find_map(|c| call_of(parsed, c, name))
}

/// The byte after the `{` of the innermost function or lambda body around byte `at`.
fn body_start(parsed: &Parsed, at: usize) -> Option<usize> {
    let function = innermost(
        parsed,
        at,
        at,
        &["function_definition", "lambda_expression"],
    )?;
    let body = function.child_by_field_name("body")?;
    (body.kind() == "compound_statement").then(|| body.start_byte() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_back_from_probe_text() {
        let text = "kwb::probe_as_pair<bf16>(kwb::SiteArg{2u, kwb_fold_2}, kwb::SiteArg{3u, kwb_fold_3}, ...)";
        assert_eq!(named(text).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(named("kwb::probe(4, ...)").count(), 0);
    }

    #[test]
    fn a_fold_is_declared_once_at_the_top_of_its_function() {
        let source = "__global__ void k(float* out) {\n  float acc = 0;\n  for (int i = 0; i < 4; ++i) acc += 1;\n  out[0] = acc;\n}\n";
        let parsed = kwb_syntax::parse(source);
        let mut folds = Folds::default();
        let site = folds.site(0, "Accumulator");
        assert_eq!(site, "kwb::SiteArg{0u, kwb_fold_0}");
        let at = source.find("out[0]").unwrap();
        folds.place(&parsed, at, &format!("kwb::probe({site}, ...);"));
        folds.place(&parsed, at, &format!("kwb::probe({site}, ...);"));
        let decls = folds.declarations(0x4db2_11e5);
        assert_eq!(decls.len(), 1);
        assert_eq!(decls[0].0, source.find('{').unwrap() + 1);
        assert_eq!(
            decls[0].1,
            "[[maybe_unused]] kwb::Fold kwb_fold_0{0u, kwb::Kind::Accumulator, 0x4db211e5u}; "
        );
    }

    #[test]
    fn a_probe_in_a_lambda_folds_in_the_lambda() {
        let source = "__global__ void k(float* out) {\n  auto f = [&](int i) {\n    out[i] = 1;\n  };\n  f(0);\n}\n";
        let parsed = kwb_syntax::parse(source);
        let mut folds = Folds::default();
        let site = folds.site(1, "Epilogue");
        folds.place(&parsed, source.find("out[i]").unwrap(), &site);
        let decls = folds.declarations(1);
        assert_eq!(
            decls[0].0,
            source.find("(int i) {").unwrap() + "(int i) {".len()
        );
    }
}
