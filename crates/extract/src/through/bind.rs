//! Binding the launcher's parameters to the runner's problem: each parameter's role
//! (an operand, a problem size, a leading dimension, alpha/beta, a stream, a BLAS
//! transpose character, or a choice the caller passes), the C++ argument the entry
//! point passes for it, and the operands' layouts the launcher's contract states.
//!
//! Invariant: a role is a guess from the parameter's name and type unless a
//! `--bind` gave it; every guess is recorded in the manifest as one, and a
//! parameter kwb cannot bind is an error that names it with the `--bind` to give.

use crate::kernel::Param;
use crate::scan::split_top;

/// One parameter of the launcher kwb calls, bound.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    pub param: String,
    /// `A`, `B`, `C`, `D`, `bias`, `m`, `n`, `k`, `leading-dimension`, `alpha`,
    /// `beta`, `stream`, `trans-a`, `trans-b` or `as-called`.
    pub role: String,
    /// The C++ argument the entry passes.
    pub value: String,
    /// `--bind`, `name and type` (a guess), `the call at line N` or `default`.
    pub from: String,
}

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
    if found.is_empty() {
        return None;
    }
    let mut layout = Layout {
        from: "the launcher's CuTe strides (make_stride with a unit stride)".to_owned(),
        ..Layout::default()
    };
    let mut c_set = false;
    for (field, first) in &found {
        if found.iter().any(|(g, h)| g == field && h != first) {
            return None;
        }
        let (slot, spelled) = match *field {
            "lda" => (&mut layout.a, if *first { "km" } else { "mk" }),
            "ldb" => (&mut layout.b, if *first { "kn" } else { "nk" }),
            "ldc" => {
                c_set = true;
                (&mut layout.c, if *first { "nm" } else { "mn" })
            }
            _ => (&mut layout.d, if *first { "nm" } else { "mn" }),
        };
        *slot = spelled.to_owned();
    }
    if c_set && !found.iter().any(|(f, _)| *f == "ldd") {
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
    if found.is_empty() {
        return None;
    }
    let mut layout = Layout {
        from: "the launcher's checks of its leading dimensions against its sizes".to_owned(),
        ..Layout::default()
    };
    let mut c_set = false;
    for (field, dim) in &found {
        if found.iter().any(|(g, e)| g == field && e != dim) {
            return None;
        }
        let spelled = match (*field, *dim) {
            ("lda", "m") => "km",
            ("lda", "k") => "mk",
            ("ldb", "n") => "kn",
            ("ldb", "k") => "nk",
            ("ldc" | "ldd", "m") => "nm",
            ("ldc" | "ldd", "n") => "mn",
            _ => return None,
        };
        match *field {
            "lda" => layout.a = spelled.to_owned(),
            "ldb" => layout.b = spelled.to_owned(),
            "ldc" => {
                c_set = true;
                layout.c = spelled.to_owned();
            }
            _ => layout.d = spelled.to_owned(),
        }
    }
    if c_set && !found.iter().any(|(f, _)| *f == "ldd") {
        layout.d = layout.c.clone();
    }
    Some(layout)
}

/// A parameter's declaration without its default argument, and the default.
pub(crate) fn split_default(declaration: &str) -> (&str, Option<&str>) {
    let mut depth = 0i32;
    for (i, c) in declaration.char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => depth -= 1,
            '=' if depth == 0 => {
                return (declaration[..i].trim(), Some(declaration[i + 1..].trim()));
            }
            _ => {}
        }
    }
    (declaration.trim(), None)
}

/// The name tables of `grammars/launcher_roles.toml`.
#[derive(serde::Deserialize)]
struct Roles {
    sizes: std::collections::BTreeMap<String, Vec<String>>,
    operands: std::collections::BTreeMap<String, Vec<String>>,
    activation: Activation,
    layout_template: Vec<LayoutTemplate>,
}

#[derive(serde::Deserialize)]
struct LayoutTemplate {
    name: String,
    positions: [usize; 3],
}

#[derive(serde::Deserialize)]
struct Activation {
    names: Vec<String>,
}

fn roles() -> &'static Roles {
    static ROLES: std::sync::OnceLock<Roles> = std::sync::OnceLock::new();
    ROLES.get_or_init(|| {
        // The table is part of the binary; `the_role_table_parses` holds it well formed.
        toml::from_str(include_str!("../../../../grammars/launcher_roles.toml")).unwrap_or(Roles {
            sizes: Default::default(),
            operands: Default::default(),
            activation: Activation { names: Vec::new() },
            layout_template: Vec::new(),
        })
    })
}

/// The role kwb guesses for launcher parameter `p` from its name and type:
/// kernel.rs's rules, then the tables of `grammars/launcher_roles.toml`.
pub(crate) fn guess(p: &Param) -> &'static str {
    let (declaration, _) = split_default(&p.declaration);
    let ty = declaration[..declaration.len().saturating_sub(p.name.len())].trim();
    if ty.contains("cudaStream_t") || ty.contains("CUstream") {
        return "stream";
    }
    let lower = p.name.to_ascii_lowercase();
    let words: Vec<&str> = kwb_syntax::identifiers(ty).collect();
    if words.contains(&"char") && !ty.contains('*') {
        if lower.contains("trans") || lower.starts_with("op") || lower.starts_with("layout") {
            if lower.ends_with('a') {
                return "trans-a";
            }
            if lower.ends_with('b') {
                return "trans-b";
            }
        }
        return "as-called";
    }
    if words.contains(&"bool") && !ty.contains('*') {
        return if roles().activation.names.contains(&lower) {
            "activation"
        } else {
            "as-called"
        };
    }
    const KNOWN: [&str; 11] = [
        "A",
        "B",
        "C",
        "D",
        "bias",
        "m",
        "n",
        "k",
        "leading-dimension",
        "alpha",
        "beta",
    ];
    if let Some(known) = KNOWN.iter().find(|k| p.role == **k) {
        return known;
    }
    if lower == "alpha" {
        return "alpha";
    }
    if lower == "beta" {
        return "beta";
    }
    let stripped = lower
        .trim_start_matches("ptr_")
        .trim_start_matches("d_")
        .trim_end_matches("_ptr");
    let table = |t: &std::collections::BTreeMap<String, Vec<String>>| {
        t.iter()
            .find(|(_, names)| names.iter().any(|n| *n == lower || *n == stripped))
            .and_then(|(role, _)| KNOWN.iter().find(|k| **k == role.as_str()).copied())
    };
    if ty.contains('*') {
        return table(&roles().operands).unwrap_or("as-called");
    }
    let integer = crate::kernel::integer_type(&words);
    if integer && let Some(role) = table(&roles().sizes) {
        return role;
    }
    "as-called"
}

/// The C++ value of a `--bind` for a parameter of role `role`: an operand or problem
/// field by name, else the text as a C++ expression.
pub(crate) fn bound_role(value: &str) -> Option<&'static str> {
    Some(match value.trim() {
        "A" => "A",
        "B" => "B",
        "C" => "C",
        "D" => "D",
        "bias" => "bias",
        "M" | "m" => "m",
        "N" | "n" => "n",
        "K" | "k" => "k",
        "lda" => "lda",
        "ldb" => "ldb",
        "ldc" => "ldc",
        "ldd" => "ldd",
        "alpha" => "alpha",
        "beta" => "beta",
        _ => return None,
    })
}

/// The `kwb_problem` field of a role (a leading dimension's by its parameter name,
/// as the kernel's own are read: `crate::host::field`), or of a field named by a
/// binding (`lda`).
pub(crate) fn problem_field(role: &str, name: &str) -> Option<&'static str> {
    if let Some(field) = ["lda", "ldb", "ldc", "ldd"]
        .into_iter()
        .find(|f| *f == role)
    {
        return Some(field);
    }
    crate::host::field(&Param {
        name: name.to_owned(),
        declaration: String::new(),
        role: role.to_owned(),
        element: None,
    })
    .ok()
}

/// The element type a pointer argument `arg` carries, as written: a cast's target,
/// else the declared type of its first name (`T*` gives `T`, a container
/// `X<T, …>` gives `T`). `declared` gives a name's declared type.
pub(crate) fn element_of_argument(
    arg: &str,
    declared: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let arg = arg.trim();
    // `(T*)x`, `reinterpret_cast<T*>(x)`, `static_cast<T*>(x)`.
    for cast in ["reinterpret_cast<", "static_cast<", "const_cast<"] {
        if let Some(rest) = arg.strip_prefix(cast) {
            let end = crate::scan::close(arg, cast.len() - 1)?;
            let _ = rest;
            return pointee(&arg[cast.len()..end - 1]);
        }
    }
    if arg.starts_with('(')
        && let Some(end) = crate::scan::close(arg, 0)
        && end < arg.len()
        && arg[1..end - 1].contains('*')
    {
        return pointee(&arg[1..end - 1]);
    }
    let name = kwb_syntax::identifiers(arg.trim_start_matches(['&', '*'])).next()?;
    let ty = declared(name)?;
    if ty.contains('*') {
        return pointee(&ty);
    }
    let open = ty.find('<')?;
    let end = crate::scan::close(&ty, open)?;
    split_top(&ty[open + 1..end - 1])
        .into_iter()
        .next()
        .map(|e| squeeze_const(&e))
}

fn pointee(ty: &str) -> Option<String> {
    let t = ty.replace(['*', '&'], " ");
    let e = squeeze_const(&t);
    (!e.is_empty()).then_some(e)
}

fn squeeze_const(ty: &str) -> String {
    ty.split_whitespace()
        .filter(|w| !matches!(*w, "const" | "volatile" | "__restrict__" | "__restrict"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The character a transpose argument holds: a literal, or the initializer of the
/// caller's declaration of it (`char transa = 'N', transb = 'T';` gives `transb` 'T').
pub(crate) fn character(arg: &str, declaration: Option<&str>) -> Option<char> {
    let literal = |t: &str| {
        let t = t.trim();
        let inner = t.strip_prefix('\'')?.strip_suffix('\'')?;
        let mut chars = inner.chars();
        let c = chars.next()?;
        chars.next().is_none().then_some(c)
    };
    if let Some(c) = literal(arg) {
        return Some(c);
    }
    let text = declaration?;
    let name = kwb_syntax::identifiers(arg).next()?;
    let mut from = 0;
    let text = loop {
        let at = text[from..].find(name)? + from;
        let before = text[..at].chars().next_back();
        let rest = &text[at + name.len()..];
        let word = |c: Option<char>| c.is_some_and(|c| c == '_' || c.is_ascii_alphanumeric());
        if !word(before) && !word(rest.chars().next()) && rest.trim_start().starts_with('=') {
            break rest.trim_start()[1..].trim_start();
        }
        from = at + name.len();
    };
    let at = text.find('\'')?;
    let end = text[at + 1..].find('\'')? + at + 1;
    literal(&text[at..=end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(declaration: &str) -> Param {
        let name = kwb_syntax::identifiers(split_default(declaration).0)
            .last()
            .unwrap()
            .to_owned();
        let (role, element) = crate::kernel::role(&name, split_default(declaration).0);
        Param {
            name,
            declaration: declaration.to_owned(),
            role: role.to_owned(),
            element,
        }
    }

    #[test]
    fn roles_come_from_names_and_types() {
        assert_eq!(guess(&param("char transA")), "trans-a");
        assert_eq!(guess(&param("char transB")), "trans-b");
        assert_eq!(guess(&param("Alpha alpha")), "alpha");
        assert_eq!(guess(&param("TA const* A")), "A");
        assert_eq!(guess(&param("int ldA")), "leading-dimension");
        assert_eq!(guess(&param("cudaStream_t stream = 0")), "stream");
        assert_eq!(guess(&param("int num_tokens")), "m");
        assert_eq!(guess(&param("Epilogue epi")), "as-called");
        assert_eq!(guess(&param("int hidden_in")), "k");
        assert_eq!(guess(&param("int hidden_out")), "n");
        assert_eq!(guess(&param("const __nv_bfloat16* R")), "C");
        assert_eq!(guess(&param("const __nv_bfloat16* weight")), "B");
        assert_eq!(guess(&param("bool relu")), "activation");
        assert_eq!(guess(&param("bool transpose")), "as-called");
    }

    #[test]
    fn elements_come_from_casts_pointers_and_containers() {
        let declared = |n: &str| match n {
            "d_A" => Some("thrust::device_vector<TA>".to_owned()),
            "p" => Some("const __half*".to_owned()),
            _ => None,
        };
        assert_eq!(
            element_of_argument("d_A.data().get()", &declared).as_deref(),
            Some("TA")
        );
        assert_eq!(
            element_of_argument("p", &declared).as_deref(),
            Some("__half")
        );
        assert_eq!(
            element_of_argument("reinterpret_cast<cutlass::half_t const*>(x)", &declared)
                .as_deref(),
            Some("cutlass::half_t")
        );
        assert_eq!(
            element_of_argument("(float*)x", &declared).as_deref(),
            Some("float")
        );
        assert_eq!(element_of_argument("q", &declared), None);
    }

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
    fn the_role_table_parses() {
        let parsed: Result<Roles, _> =
            toml::from_str(include_str!("../../../../grammars/launcher_roles.toml"));
        let roles = parsed.unwrap();
        assert!(roles.sizes.contains_key("k") && roles.operands.contains_key("C"));
        assert!(!roles.layout_template.is_empty() && !roles.activation.names.is_empty());
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
        assert_eq!(character("transA", Some("char transA = 'N';")), Some('N'));
        assert_eq!(
            character("transb", Some("char transa = 'N', transb = 'T';")),
            Some('T')
        );
        assert_eq!(character("'T'", None), Some('T'));
    }
}
