//! A screen's folds (`kwb::Fold`): in a `--screen` build each probe's site argument is
//! `kwb::SiteArg{ID, kwb_fold_ID}`, and `kwb_fold_ID` is declared at the top of the
//! body of the function (or lambda) that holds the probe, so a call adds into the
//! lanes' registers and the fold goes into the screen's table once, when that function
//! returns. Every other build passes the bare site id and declares nothing, so its
//! text is what it was before folds existed.
//!
//! Invariants: a fold is declared once, in the innermost function or lambda body
//! around its probe, before any statement of it (right after the body's `{`), so it is
//! in scope at the probe and lives until the function returns; the declaration is the
//! kwb text at that point, so no probe goes before it.

use kwb_syntax::Parsed;

/// The folds the probes of one file named, and where each is declared.
#[derive(Default)]
pub(crate) struct Folds {
    /// The kind (`kwb::Kind::…` name) of each site that has a fold.
    kinds: Vec<(u32, &'static str)>,
    /// (the byte after the body's `{`, site id) of each declared fold.
    declared: Vec<(usize, u32)>,
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

    /// The declarations, one text per function body: (insertion point, text).
    pub fn declarations(&self, tag: u32) -> Vec<(usize, String)> {
        let mut points: Vec<usize> = self.declared.iter().map(|(p, _)| *p).collect();
        points.sort_unstable();
        points.dedup();
        points
            .into_iter()
            .map(|point| {
                let text: String = self
                    .declared
                    .iter()
                    .filter(|(p, _)| *p == point)
                    .map(|(_, id)| {
                        let kind = self
                            .kinds
                            .iter()
                            .find(|(i, _)| i == id)
                            .map_or("Accumulator", |(_, k)| k);
                        format!(
                            "[[maybe_unused]] kwb::Fold {}{{{id}u, kwb::Kind::{kind}, 0x{tag:08x}u}}; ",
                            name(*id)
                        )
                    })
                    .collect();
                (point, text)
            })
            .collect()
    }
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

/// The byte after the `{` of the innermost function or lambda body around byte `at`.
fn body_start(parsed: &Parsed, at: usize) -> Option<usize> {
    let mut node = parsed.tree.root_node().descendant_for_byte_range(at, at)?;
    loop {
        if matches!(node.kind(), "function_definition" | "lambda_expression") {
            let body = node.child_by_field_name("body")?;
            return (body.kind() == "compound_statement").then(|| body.start_byte() + 1);
        }
        node = node.parent()?;
    }
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
