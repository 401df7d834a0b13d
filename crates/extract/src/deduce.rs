//! Template arguments a launch leaves to deduction (`copy<<<g, b>>>(a, b)` for
//! `template <class T> __global__ void copy(T const* in, T* out)`): each type
//! parameter is read off a kernel parameter whose type names it, matched against the
//! declared type of the argument passed there — a launcher parameter, a local
//! declared before the launch, or a `static_cast`/`reinterpret_cast`/C-style cast.
//! Qualifiers (`const`, `volatile`, `__restrict__`) are set aside on both sides, as
//! the deduction of a pointer's pointee does. What cannot be read this way (a value
//! parameter, an argument whose type is not written) is left undeduced, never guessed.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::kernel::Param;

/// The type `param`'s deduction gives, from the kernel parameters and the launch's
/// arguments in the function `launcher` before byte `before`; `None` when no argument
/// shows it.
pub fn deduce(
    parsed: &Parsed,
    launcher: Node<'_>,
    before: usize,
    param: &str,
    kernel_params: &[Param],
    args: &[String],
) -> Option<String> {
    for (p, arg) in kernel_params.iter().zip(args) {
        let pattern = words(type_of(p));
        if !pattern.iter().any(|w| w == param) {
            continue;
        }
        let Some(declared) = argument_type(parsed, launcher, before, arg) else {
            continue;
        };
        if let Some(found) = match_pattern(&pattern, &words(&declared), param) {
            return Some(found);
        }
    }
    None
}

/// The type part of a parameter's declaration.
fn type_of(p: &Param) -> &str {
    p.declaration[..p.declaration.len().saturating_sub(p.name.len())].trim()
}

/// A type as tokens without cv-qualifiers and `__restrict__`: identifiers (with
/// `::` kept inside them) and punctuation, one a token.
fn words(ty: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = ty.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' || (c == ':' && chars.get(i + 1) == Some(&':')) {
            if c == ':' {
                current.push_str("::");
                i += 2;
                continue;
            }
            current.push(c);
        } else {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        }
        i += 1;
    }
    if !current.is_empty() {
        out.push(current);
    }
    out.retain(|w| {
        !matches!(
            w.as_str(),
            "const" | "volatile" | "__restrict__" | "__restrict" | "__grid_constant__"
        )
    });
    out
}

/// `param`'s value when `pattern` (with `param` in it once) matches `ty`: the tokens
/// of `ty` between the pattern's prefix and suffix.
fn match_pattern(pattern: &[String], ty: &[String], param: &str) -> Option<String> {
    let at = pattern.iter().position(|w| w == param)?;
    let (prefix, suffix) = (&pattern[..at], &pattern[at + 1..]);
    if ty.len() <= prefix.len() + suffix.len() || !ty.starts_with(prefix) || !ty.ends_with(suffix) {
        return None;
    }
    let middle = &ty[prefix.len()..ty.len() - suffix.len()];
    let mut text = String::new();
    for w in middle {
        let word = w
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if word
            && text
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            text.push(' ');
        }
        text.push_str(w);
    }
    Some(text)
}

/// The declared type of the launch argument `arg`.
fn argument_type(parsed: &Parsed, launcher: Node<'_>, before: usize, arg: &str) -> Option<String> {
    let arg = arg.trim();
    // A cast says its type.
    for cast in ["reinterpret_cast<", "static_cast<", "const_cast<"] {
        if let Some(rest) = arg.strip_prefix(cast) {
            let end = crate::scan::close(arg, cast.len() - 1)?;
            return Some(arg[cast.len()..end - 1].to_owned()).filter(|_| !rest.is_empty());
        }
    }
    if let Some(rest) = arg.strip_prefix('(') {
        let end = rest.find(')')?;
        if rest[end + 1..]
            .trim()
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            return Some(rest[..end].to_owned());
        }
    }
    if !arg.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    // A launcher parameter.
    if let Some(p) = crate::kernel::params_of(parsed, launcher)
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.name == arg)
    {
        return Some(type_of(&p).to_owned());
    }
    // A local declared before the launch: `TYPE NAME [= …];`.
    crate::tree::nodes_before(launcher, before)
        .into_iter()
        .rev()
        .filter(|n| n.kind() == "declaration")
        .find_map(|n| {
            let ty = n.child_by_field_name("type")?;
            let mut cursor = n.walk();
            let declarator = n
                .children_by_field_name("declarator", &mut cursor)
                .find(|d| {
                    let text = &parsed.source[d.byte_range()];
                    let head = text.split(['=', '(', '{', '[']).next().unwrap_or(text);
                    kwb_syntax::identifiers(head).last() == Some(arg)
                })?;
            // Pointer stars belong to the declarator: `float *a` is `float*`.
            let text = &parsed.source[declarator.byte_range()];
            let head = text.split(['=', '(', '{', '[']).next().unwrap_or(text);
            let stars: String = head.chars().filter(|c| *c == '*' || *c == '&').collect();
            let qualifiers: String = n
                .children(&mut n.walk())
                .filter(|c| c.kind() == "type_qualifier")
                .map(|c| format!("{} ", &parsed.source[c.byte_range()]))
                .collect();
            Some(format!(
                "{qualifiers}{}{stars}",
                &parsed.source[ty.byte_range()]
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_read_the_type_between_their_ends() {
        let m = |p: &str, t: &str| match_pattern(&words(p), &words(t), "T");
        assert_eq!(m("T const*", "const float*"), Some("float".to_owned()));
        assert_eq!(
            m("const T* __restrict__", "__nv_bfloat16*"),
            Some("__nv_bfloat16".to_owned())
        );
        assert_eq!(
            m("T*", "cute::bfloat16_t *"),
            Some("cute::bfloat16_t".to_owned())
        );
        assert_eq!(
            m("Tile<T>*", "Tile<unsigned short>*"),
            Some("unsigned short".to_owned())
        );
        assert_eq!(m("T*", "float"), None, "a value is no pointer");
        assert_eq!(m("T", "int"), Some("int".to_owned()));
    }
}
