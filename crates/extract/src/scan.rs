//! Small text scanners over C++ source: balanced brackets and top-level commas.

/// The index just past the bracket that closes the one at `open` (`(`, `<`, `[`,
/// `{`), skipping nested brackets of every kind; `None` when it never closes.
/// Angle brackets count only as template brackets: `<<`/`>>` shifts inside
/// parentheses are skipped with the parentheses.
pub fn close(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut stack = vec![bytes[open]];
    let mut i = open + 1;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'(' | b'[' | b'{' => stack.push(c),
            b'<' if stack.last() == Some(&b'<') || stack.is_empty() => stack.push(c),
            b'<' => {}
            b')' | b']' | b'}' | b'>' => {
                let want = match c {
                    b')' => b'(',
                    b']' => b'[',
                    b'}' => b'{',
                    _ => b'<',
                };
                if c == b'>' && stack.last() != Some(&b'<') {
                    i += 1;
                    continue;
                }
                if stack.pop() != Some(want) {
                    return None;
                }
                if stack.is_empty() {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `text` split at commas outside any bracket, each part trimmed; empty text gives
/// no parts.
pub fn split_top(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0_i32;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(current.trim().to_owned());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() || !parts.is_empty() {
        parts.push(current.trim().to_owned());
    }
    parts
}

pub use kwb_syntax::identifiers;

/// `NAME<ARGS>` (NAME possibly qualified) → (NAME, the ARGS split at top-level
/// commas); a plain name gives no arguments. `None` when the text is neither.
pub fn template_id(text: &str) -> Option<(String, Vec<String>)> {
    let text = text.trim();
    let (name, args) = match text.find('<') {
        Some(open) => {
            let end = close(text, open)?;
            if end != text.len() {
                return None;
            }
            (&text[..open], split_top(&text[open + 1..end - 1]))
        }
        None => (text, Vec::new()),
    };
    let name = name.trim();
    let valid = !name.is_empty()
        && name
            .split("::")
            .all(|p| !p.is_empty() && p.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()));
    valid.then(|| (name.to_owned(), args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_and_commas() {
        let t = "f<A, B<C, D>>(x, g(y, z))";
        assert_eq!(close(t, 1), Some(13));
        assert_eq!(close(t, 13), Some(t.len()));
        assert_eq!(
            split_top("a, b<c, d>, (e, f)"),
            vec!["a", "b<c, d>", "(e, f)"]
        );
        assert!(split_top("  ").is_empty());
        assert_eq!(
            template_id("gemm<BM, BN, (BK > 8 ? 2 : 1)>"),
            Some((
                "gemm".to_owned(),
                vec!["BM".into(), "BN".into(), "(BK > 8 ? 2 : 1)".into()]
            ))
        );
        assert_eq!(template_id("ns::k"), Some(("ns::k".to_owned(), vec![])));
        assert_eq!(template_id("a + b"), None);
    }
}
