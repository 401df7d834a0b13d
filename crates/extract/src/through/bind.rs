//! Binding the launcher's parameters to the runner's problem: each parameter's role
//! (an operand, a problem size, a leading dimension, alpha/beta, a stream, a BLAS
//! transpose character, or a choice the caller passes), the C++ argument the entry
//! point passes for it (the operands' layouts are `layout.rs`'s).
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
pub(super) struct Roles {
    sizes: std::collections::BTreeMap<String, Vec<String>>,
    operands: std::collections::BTreeMap<String, Vec<String>>,
    activation: Activation,
    pub(super) layout_template: Vec<LayoutTemplate>,
}

#[derive(serde::Deserialize)]
pub(super) struct LayoutTemplate {
    pub(super) name: String,
    pub(super) positions: [usize; 3],
}

#[derive(serde::Deserialize)]
struct Activation {
    names: Vec<String>,
}

pub(super) fn roles() -> &'static Roles {
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
pub(super) mod tests {
    use super::*;

    /// A parameter as `kernel::params_of` reads one from its declaration.
    pub(in crate::through) fn param(declaration: &str) -> Param {
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
    fn the_role_table_parses() {
        let parsed: Result<Roles, _> =
            toml::from_str(include_str!("../../../../grammars/launcher_roles.toml"));
        let roles = parsed.unwrap();
        assert!(roles.sizes.contains_key("k") && roles.operands.contains_key("C"));
        assert!(!roles.layout_template.is_empty() && !roles.activation.names.is_empty());
    }

    #[test]
    fn a_transpose_character_is_read_where_the_caller_declares_it() {
        assert_eq!(character("transA", Some("char transA = 'N';")), Some('N'));
        assert_eq!(
            character("transb", Some("char transa = 'N', transb = 'T';")),
            Some('T')
        );
        assert_eq!(character("'T'", None), Some('T'));
    }
}
