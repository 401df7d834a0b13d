//! The operands' layouts a launcher's contract states: which dimension of each
//! operand is contiguous, from `--layout`, BLAS transpose characters, CuTe strides with a
//! unit stride, BLAS-style argument checks (`ldb < N`), or a library template's
//! `RowMajor`/`ColumnMajor` arguments (the templates of `grammars/launcher_roles.toml`).
//!
//! Invariant: a reading that finds two answers for one operand gives none, so the
//! next reading (or the default, recorded as the default) decides.

use crate::kernel::Param;
use crate::scan::split_top;

use super::bind::{problem_field, roles};

/// Operand layouts: which dimension is contiguous, as `ROWSCOLS` with the
/// contiguous dimension last (`mk`: A is M x K with K contiguous; `km`: M
/// contiguous).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    pub a: String,
    pub b: String,
    pub c: String,
    pub d: String,
    /// Where it comes from.
    pub from: String,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            a: "mk".to_owned(),
            b: "nk".to_owned(),
            c: "mn".to_owned(),
            d: "mn".to_owned(),
            from: "the default (A and B K-contiguous, C and D row-major): the launcher states none; --layout sets it".to_owned(),
        }
    }
}

impl Layout {
    /// `--layout A=km,B=kn,D=nm` on top of the default (C follows D unless given).
    pub fn parse(text: &str) -> Result<Layout, String> {
        let mut out = Layout {
            from: format!("--layout {text}"),
            ..Layout::default()
        };
        let mut c_given = false;
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((role, value)) = part.split_once('=') else {
                return Err(format!("`{part}`: write OPERAND=DIMS, e.g. A=km"));
            };
            let value = value.trim().to_ascii_lowercase();
            let (slot, allowed) = match role.trim() {
                "A" | "a" => (&mut out.a, ["mk", "km"]),
                "B" | "b" => (&mut out.b, ["nk", "kn"]),
                "C" | "c" => {
                    c_given = true;
                    (&mut out.c, ["mn", "nm"])
                }
                "D" | "d" => (&mut out.d, ["mn", "nm"]),
                other => return Err(format!("`{other}`: the operands are A, B, C and D")),
            };
            if !allowed.contains(&value.as_str()) {
                return Err(format!(
                    "`{part}`: {} is {} (the contiguous dimension last)",
                    role.trim(),
                    allowed.join(" or ")
                ));
            }
            *slot = value;
        }
        if !c_given {
            out.c = out.d.clone();
        }
        Ok(out)
    }

    /// The BLAS contract of transpose characters (column-major storage): `N` keeps
    /// an operand, `T` (or `C`) transposes it; C and D are M-contiguous.
    pub fn blas(trans_a: char, trans_b: char) -> Layout {
        let t = |c: char| matches!(c.to_ascii_uppercase(), 'T' | 'C');
        Layout {
            a: if t(trans_a) { "mk" } else { "km" }.to_owned(),
            b: if t(trans_b) { "kn" } else { "nk" }.to_owned(),
            c: "nm".to_owned(),
            d: "nm".to_owned(),
            from: format!(
                "the BLAS contract of the launcher's transpose characters ('{trans_a}', '{trans_b}'): column-major storage"
            ),
        }
    }
}

/// The layouts a launcher's CuTe strides state: `make_stride(ldA, Int<1>{})` (the
/// unit stride second: K contiguous for A) or `make_stride(Int<1>{}, ldC)` (M
/// contiguous for C), where the other stride names a leading-dimension parameter of
/// the function it is in. `functions` holds (body text, parameters) per function.
/// None when no such stride is found or two disagree.
pub(crate) fn layout_from_strides(functions: &[(&str, &[Param])]) -> Option<Layout> {
    let mut found: Vec<(&'static str, bool)> = Vec::new();
    for (body, params) in functions {
        let mut from = 0;
        while let Some(at) = body[from..].find("make_stride(").map(|i| i + from) {
            from = at + "make_stride(".len();
            let open = from - 1;
            let Some(end) = crate::scan::close(body, open) else {
                continue;
            };
            let args = split_top(&body[open + 1..end - 1]);
            let [first, second] = args.as_slice() else {
                continue;
            };
            let unit = |t: &str| {
                let t: String = t.chars().filter(|c| !c.is_whitespace()).collect();
                matches!(
                    t.trim_start_matches("cute::"),
                    "Int<1>{}" | "Int<1>()" | "_1{}" | "_1()" | "C<1>{}"
                )
            };
            let operand = |t: &str| {
                kwb_syntax::identifiers(t).find_map(|w| {
                    params
                        .iter()
                        .find(|p| p.name == w && p.role == "leading-dimension")
                        .and_then(|p| problem_field("leading-dimension", &p.name))
                })
            };
            let (field, first_contiguous) = match (unit(first), unit(second)) {
                (true, false) => (operand(second), true),
                (false, true) => (operand(first), false),
                _ => continue,
            };
            if let Some(f) = field {
                found.push((f, first_contiguous));
            }
        }
    }
    // The first mode contiguous: M for A and C/D, N for B.
    let spelled = found
        .iter()
        .map(|(field, first)| {
            let s = match (*field, *first) {
                ("lda", true) => "km",
                ("lda", false) => "mk",
                ("ldb", true) => "kn",
                ("ldb", false) => "nk",
                (_, true) => "nm",
                (_, false) => "mn",
            };
            (*field, s)
        })
        .collect::<Vec<_>>();
    fold(
        &spelled,
        "the launcher's CuTe strides (make_stride with a unit stride)",
    )
}

/// A layout from each operand's reading (a leading-dimension field and the layout it
/// spells), the rest the default; C's reading is D's too unless D has its own. None
/// when nothing was read or one field was read two ways.
fn fold(found: &[(&str, &str)], from: &str) -> Option<Layout> {
    if found.is_empty() {
        return None;
    }
    let mut layout = Layout {
        from: from.to_owned(),
        ..Layout::default()
    };
    for (field, spelled) in found {
        if found.iter().any(|(g, t)| g == field && t != spelled) {
            return None;
        }
        let slot = match *field {
            "lda" => &mut layout.a,
            "ldb" => &mut layout.b,
            "ldc" => &mut layout.c,
            _ => &mut layout.d,
        };
        *slot = (*spelled).to_owned();
    }
    if found.iter().any(|(f, _)| *f == "ldc") && !found.iter().any(|(f, _)| *f == "ldd") {
        layout.d = layout.c.clone();
    }
    Some(layout)
}

/// The layouts a library template's arguments state (`cutlass::gemm::device::Gemm<float,
/// ColumnMajor, float, ColumnMajor, float, ColumnMajor>`, the templates of
/// `grammars/launcher_roles.toml`), each argument read through `resolve` (the file's
/// aliases). None when no such template is named in `texts` or two disagree.
pub(crate) fn layout_from_templates(
    texts: &[&str],
    resolve: &dyn Fn(&str) -> String,
) -> Option<Layout> {
    let mut found: Option<[bool; 3]> = None;
    for text in texts {
        for t in &roles().layout_template {
            let mut from = 0;
            while let Some(at) = text[from..].find(&format!("{}<", t.name)).map(|i| i + from) {
                let open = at + t.name.len();
                from = open + 1;
                let Some(end) = crate::scan::close(text, open) else {
                    continue;
                };
                let args = split_top(&text[open + 1..end - 1]);
                let row = |i: usize| -> Option<bool> {
                    let a = resolve(args.get(i)?.trim());
                    if a.ends_with("RowMajor") {
                        Some(true)
                    } else if a.ends_with("ColumnMajor") {
                        Some(false)
                    } else {
                        None
                    }
                };
                let [a, b, c] = t.positions;
                let (Some(a), Some(b), Some(c)) = (row(a), row(b), row(c)) else {
                    continue;
                };
                if found.is_some_and(|f| f != [a, b, c]) {
                    return None;
                }
                found = Some([a, b, c]);
            }
        }
    }
    let [a, b, c] = found?;
    let c = if c { "mn" } else { "nm" };
    Some(Layout {
        a: if a { "mk" } else { "km" }.to_owned(),
        b: if b { "kn" } else { "nk" }.to_owned(),
        c: c.to_owned(),
        d: c.to_owned(),
        from: "the library template's layout arguments (RowMajor/ColumnMajor)".to_owned(),
    })
}

/// The layouts a launcher's argument checks state, BLAS style: `ldb < N` (or `ldb >=
/// N`, `lda < max(1, M)`) says B's rows hold N elements, so N is contiguous. `bound`
/// holds the launcher parameters kwb bound (leading dimensions under their field's
/// name, `lda`…, and the sizes with roles m, n, k); `functions` the bodies to read
/// (the first is the launcher's, whose parameter names the checks use). None when no
/// check compares a leading dimension with a size, or two disagree.
pub(crate) fn layout_from_bounds(
    functions: &[(&str, &[Param])],
    bound: &[Param],
) -> Option<Layout> {
    let (body, params) = functions.first()?;
    // The launcher's own names: its parameters in order, as `bound` lists them.
    let named = |name: &str| -> Option<&Param> {
        let i = params.iter().position(|p| p.name == name)?;
        bound.get(i)
    };
    let mut found: Vec<(&str, &str)> = Vec::new();
    let text: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    for op in ["<=", ">=", "<", ">"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(op).map(|i| i + from) {
            from = at + op.len();
            // `<<`, `>>`, `<<<` and template brackets are not comparisons.
            if text[..at].ends_with(['<', '>', '-']) || text[from..].starts_with(['<', '>', '=']) {
                continue;
            }
            let left = text[..at]
                .rsplit(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
                .next()
                .unwrap_or("");
            let right_text = text[from..]
                .trim_start_matches("std::")
                .trim_start_matches("max(1,");
            let right = right_text
                .split(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
                .next()
                .unwrap_or("");
            for (ld, size) in [(left, right), (right, left)] {
                let (Some(l), Some(s)) = (named(ld), named(size)) else {
                    continue;
                };
                if l.role == "leading-dimension" && matches!(s.role.as_str(), "m" | "n" | "k") {
                    found.push((
                        match l.name.as_str() {
                            f @ ("lda" | "ldb" | "ldc" | "ldd") => f,
                            _ => continue,
                        },
                        match s.role.as_str() {
                            "m" => "m",
                            "n" => "n",
                            _ => "k",
                        },
                    ));
                }
            }
        }
    }
    let mut spelled = Vec::new();
    for (field, dim) in &found {
        spelled.push((
            *field,
            match (*field, *dim) {
                ("lda", "m") => "km",
                ("lda", "k") => "mk",
                ("ldb", "n") => "kn",
                ("ldb", "k") => "nk",
                ("ldc" | "ldd", "m") => "nm",
                ("ldc" | "ldd", "n") => "mn",
                _ => return None,
            },
        ));
    }
    fold(
        &spelled,
        "the launcher's checks of its leading dimensions against its sizes",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::through::bind::tests::param;

    #[test]
    fn cute_strides_state_the_layout() {
        let params = [param("int ldA"), param("int ldB"), param("int ldC")];
        let body = "auto dA = make_stride(bad ? k : ldA, Int<1>{});\n\
                    auto dB = make_stride(ldB, Int<1>{});\n\
                    auto dC = make_stride(Int<1>{}, ldC);\n\
                    auto sA = make_layout(make_shape(bM, bK), make_stride(bK, Int<1>{}));";
        let l = layout_from_strides(&[(body, &params)]).unwrap();
        assert_eq!(
            (l.a.as_str(), l.b.as_str(), l.c.as_str(), l.d.as_str()),
            ("mk", "nk", "nm", "nm")
        );
        // Two launchers that disagree (an NT and a TN one) state nothing.
        let tn = "auto dA = make_stride(ldA, Int<1>{});";
        let nt = "auto dA = make_stride(Int<1>{}, ldA);";
        assert!(layout_from_strides(&[(tn, &params), (nt, &params)]).is_none());
    }

    #[test]
    fn library_templates_state_the_layout() {
        let text = "using G = cutlass::gemm::device::Gemm<float, ColumnMajor, float, LayoutB, float, cutlass::layout::ColumnMajor>;";
        let resolve = |t: &str| match t {
            "LayoutB" => "cutlass::layout::RowMajor".to_owned(),
            other => other.to_owned(),
        };
        let l = layout_from_templates(&[text], &resolve).unwrap();
        assert_eq!(
            (l.a.as_str(), l.b.as_str(), l.c.as_str()),
            ("km", "kn", "nm")
        );
        assert!(layout_from_templates(&["Gemm<float>"], &resolve).is_none());
    }

    #[test]
    fn argument_checks_state_the_layout() {
        let params = [
            param("int M"),
            param("int N"),
            param("int K"),
            param("const float* At"),
            param("int ldat"),
            param("const float* B"),
            param("int ldb"),
            param("float* C"),
            param("int ldc"),
        ];
        let mut bound = params.to_vec();
        bound[4].name = "lda".to_owned();
        let body = "if (M <= 0 || ldat % 4 || ldat < M || ldb < N || std::max(1, N) > ldc) return;";
        let l = layout_from_bounds(&[(body, &params)], &bound).unwrap();
        assert_eq!(
            (l.a.as_str(), l.b.as_str(), l.c.as_str()),
            ("km", "kn", "mn")
        );
        assert!(layout_from_bounds(&[("if (M < N) return;", &params)], &bound).is_none());
    }

    #[test]
    fn layouts_read_blas_characters_and_the_flag() {
        let l = Layout::blas('N', 'T');
        assert_eq!(
            (l.a.as_str(), l.b.as_str(), l.c.as_str()),
            ("km", "kn", "nm")
        );
        let l = Layout::blas('T', 'N');
        assert_eq!((l.a.as_str(), l.b.as_str()), ("mk", "nk"));
        let l = Layout::parse("A=km,D=nm").unwrap();
        assert_eq!(
            (l.a.as_str(), l.b.as_str(), l.c.as_str(), l.d.as_str()),
            ("km", "nk", "nm", "nm")
        );
        assert!(Layout::parse("A=mn").is_err());
    }
}
