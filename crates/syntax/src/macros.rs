//! The table of macros and CUDA keywords that the pre-pass blanks.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::SyntaxError;

/// How much text a table entry covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacroShape {
    /// The identifier alone.
    Word,
    /// The identifier and the balanced `( … )` that follows it, when one does.
    Call,
    /// The identifier, only when a `::`-qualified name follows it (`typename A::b{}`
    /// in an expression, which tree-sitter-cpp cannot parse, while `A::b{}` parses).
    Qualifier,
    /// Like `Call`, only when a `{` follows the parentheses (`decltype(x){}` in an
    /// expression).
    BraceCall,
    /// Like `Call`, together with a `,` just before it (a macro that expands to a
    /// whole template parameter, such as `__CUTE_REQUIRES(…)`).
    TemplateParam,
    /// The identifier alone, a macro that expands to a `_Pragma` (`CUTLASS_PRAGMA_UNROLL`):
    /// blanked as a pragma, since like `#pragma` it must start what the compiler sees
    /// as its own line and stand right before its loop.
    Pragma,
}

/// Names to blank, by shape.
#[derive(Clone, Debug, Default)]
pub struct MacroTable {
    entries: HashMap<String, MacroShape>,
}

const BUILTIN: &str = include_str!("../../../grammars/macros.txt");

impl MacroTable {
    /// The table shipped in `grammars/macros.txt`.
    pub fn builtin() -> &'static MacroTable {
        static TABLE: OnceLock<MacroTable> = OnceLock::new();
        TABLE.get_or_init(|| {
            MacroTable::parse(BUILTIN).expect("grammars/macros.txt is checked by a unit test")
        })
    }

    /// Parses the `NAME SHAPE` line format of `grammars/macros.txt`.
    pub fn parse(text: &str) -> Result<MacroTable, SyntaxError> {
        let mut entries = HashMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |reason: &str| SyntaxError::BadMacroTable {
                line: index + 1,
                reason: reason.to_owned(),
            };
            let mut fields = line.split_whitespace();
            let (Some(name), Some(shape), None) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(bad("expected two fields"));
            };
            let shape = match shape {
                "word" => MacroShape::Word,
                "call" => MacroShape::Call,
                "qualifier" => MacroShape::Qualifier,
                "brace_call" => MacroShape::BraceCall,
                "template_param" => MacroShape::TemplateParam,
                "pragma" => MacroShape::Pragma,
                _ => {
                    return Err(bad(
                        "shape must be word, call, qualifier, brace_call, template_param or pragma",
                    ));
                }
            };
            if !is_identifier(name) {
                return Err(bad("name is not an identifier"));
            }
            entries.insert(name.to_owned(), shape);
        }
        Ok(MacroTable { entries })
    }

    /// Adds the entries of `other`, which win on conflicts.
    pub fn extend(&mut self, other: &MacroTable) {
        for (name, shape) in &other.entries {
            self.entries.insert(name.clone(), *shape);
        }
    }

    /// The shape of `name`, if the table blanks it.
    pub fn get(&self, name: &str) -> Option<MacroShape> {
        self.entries.get(name).copied()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn is_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}
