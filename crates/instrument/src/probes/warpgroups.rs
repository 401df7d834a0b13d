//! Which warpgroups read which part of a pipeline stage, as an SS-mode MMA's operand
//! pointer says: `tile_a = sA + stage * STRIDE + row_base * BK`, with `row_base = (wg
//! - 1) * 64` and `wg = threadIdx.x / 128`, sets the offset in the stage from the
//! thread's index, so each consumer warpgroup reads its own rows; `tile_b = sB + stage
//! * STRIDE` is the same for every warpgroup, so the consumers all read it whole.
//!
//! The offset (the terms after the stage's) is rewritten as an expression of
//! `kwb_t`, a thread index standing for `threadIdx.x`: the function's locals it names
//! are written out from their initializers wherever they depend on the thread, so the
//! runtime can work out any warpgroup's offset (offset(128 w)) and with it which
//! warpgroups consume the stage (`kwb::own_part`, `kwb::split_part`). Only what the
//! code shows counts: a local assigned after its initializer, a parameter of a device
//! function, a call, `threadIdx.y`/`.z` or a macro make the offset unknown, and then
//! the probe reads as it always has, from the pointer to the stage's end.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::nodes::{contains, innermost_declarator};

/// What an operand pointer's offset in its stage says about the warpgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Offset {
    /// The same in every thread (or no offset at all).
    Uniform,
    /// Set from the thread's index: the offset as C++ with `kwb_t` for `threadIdx.x`.
    PerThread(String),
    /// The code does not show it.
    Unknown,
}

/// How deep a chain of locals is written out.
const DEPTH: u32 = 8;

/// The offset the `terms` (summed) make, for a probe at byte `before` of `function`.
pub(crate) fn offset_of(
    parsed: &Parsed,
    function: Node<'_>,
    terms: &[Node<'_>],
    before: usize,
) -> Offset {
    if terms.is_empty() {
        return Offset::Uniform;
    }
    let writer = Writer {
        parsed,
        function,
        before,
    };
    let mut parts = Vec::new();
    let mut varies = false;
    for term in terms {
        match writer.write(*term, DEPTH) {
            Some(Written { text, per_thread }) => {
                varies |= per_thread;
                parts.push(format!("({text})"));
            }
            None => return Offset::Unknown,
        }
    }
    if varies {
        Offset::PerThread(parts.join(" + "))
    } else {
        Offset::Uniform
    }
}

/// The C++ lambda the runtime evaluates a per-thread offset with.
pub(crate) fn lambda(expr: &str) -> String {
    format!("[&](unsigned kwb_t) {{ return static_cast<long long>({expr}); }}")
}

/// An expression rewritten: its text, and whether it depends on the thread.
struct Written {
    text: String,
    per_thread: bool,
}

struct Writer<'a, 't> {
    parsed: &'a Parsed,
    function: Node<'t>,
    before: usize,
}

impl Writer<'_, '_> {
    fn text(&self, node: Node<'_>) -> &str {
        &self.parsed.masked[node.byte_range()]
    }

    /// `node` rewritten, or None when the code does not show what it is.
    fn write(&self, node: Node<'_>, depth: u32) -> Option<Written> {
        // A blanked macro inside: what it expands to is not known.
        if self.parsed.source[node.byte_range()] != self.parsed.masked[node.byte_range()] {
            return None;
        }
        let same = |n: Node<'_>| Written {
            text: self.text(n).to_owned(),
            per_thread: false,
        };
        match node.kind() {
            "number_literal"
            | "true"
            | "false"
            | "char_literal"
            | "sizeof_expression"
            | "qualified_identifier"
            | "template_function" => Some(same(node)),
            "identifier" => self.name(node, depth),
            "field_expression" => {
                let argument = node.child_by_field_name("argument")?;
                let field = node.child_by_field_name("field")?;
                let (object, member) = (self.text(argument), self.text(field));
                match (object, member) {
                    ("threadIdx", "x") => Some(Written {
                        text: "kwb_t".to_owned(),
                        per_thread: true,
                    }),
                    ("threadIdx", _) => None,
                    ("blockIdx" | "blockDim" | "gridDim", _) => Some(same(node)),
                    _ => None,
                }
            }
            "binary_expression"
            | "unary_expression"
            | "parenthesized_expression"
            | "conditional_expression"
            | "cast_expression" => self.splice(node, depth),
            // `static_cast<int>(x)`: a cast, its one argument rewritten.
            "call_expression" => {
                let function = node.child_by_field_name("function")?;
                let cast = function.kind() == "template_function"
                    && function.child_by_field_name("name").is_some_and(|n| {
                        matches!(self.text(n), "static_cast" | "reinterpret_cast")
                    });
                if !cast {
                    return None;
                }
                let arguments = node.child_by_field_name("arguments")?;
                if arguments.named_child_count() != 1 {
                    return None;
                }
                let inner = self.write(arguments.named_child(0)?, depth)?;
                Some(Written {
                    text: format!("{}({})", self.text(function), inner.text),
                    per_thread: inner.per_thread,
                })
            }
            _ => None,
        }
    }

    /// `node`'s text with each named child rewritten (a type in a cast kept as it is).
    fn splice(&self, node: Node<'_>, depth: u32) -> Option<Written> {
        let mut text = String::new();
        let mut at = node.start_byte();
        let mut per_thread = false;
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            if matches!(child.kind(), "type_descriptor" | "comment") {
                continue;
            }
            let inner = self.write(child, depth)?;
            text.push_str(&self.parsed.masked[at..child.start_byte()]);
            text.push_str(&inner.text);
            per_thread |= inner.per_thread;
            at = child.end_byte();
        }
        text.push_str(&self.parsed.masked[at..node.end_byte()]);
        Some(Written { text, per_thread })
    }

    /// A name: a local of the function written out from its initializer when that
    /// depends on the thread; a name declared nowhere in the function (a constant, a
    /// template parameter) as it is; a kernel's parameter as it is (the same in every
    /// thread); anything else unknown.
    fn name(&self, node: Node<'_>, depth: u32) -> Option<Written> {
        let name = self.text(node);
        let same = Written {
            text: name.to_owned(),
            per_thread: false,
        };
        let Some(declared) = self.declaration(name)? else {
            return Some(same);
        };
        match declared {
            Declared::Parameter { kernel: true } => Some(same),
            Declared::Parameter { kernel: false } => None,
            Declared::Local(value) => {
                if depth == 0 {
                    return None;
                }
                let inner = self.write(value, depth - 1)?;
                Some(if inner.per_thread {
                    Written {
                        text: format!("static_cast<decltype({name})>({})", inner.text),
                        per_thread: true,
                    }
                } else {
                    same
                })
            }
        }
    }

    /// How `name` is declared in the function: None (outer None) when the code makes
    /// it unknown (declared twice, without a value, assigned or changed after it, its
    /// address taken, or declared after the probe); Some(None) when the function does
    /// not declare it.
    #[allow(clippy::option_option)]
    fn declaration(&self, name: &str) -> Option<Option<Declared<'_>>> {
        let mut found: Option<Declared<'_>> = None;
        let mut count = 0;
        let mut stack = vec![self.function];
        while let Some(n) = stack.pop() {
            match n.kind() {
                "parameter_declaration" | "optional_parameter_declaration" => {
                    let declares = n
                        .child_by_field_name("declarator")
                        .is_some_and(|d| self.text(innermost_declarator(d)) == name);
                    if declares {
                        count += 1;
                        found = Some(Declared::Parameter {
                            kernel: self.is_kernel(),
                        });
                    }
                }
                "init_declarator" => {
                    let declares = n
                        .child_by_field_name("declarator")
                        .is_some_and(|d| self.text(innermost_declarator(d)) == name);
                    if declares {
                        count += 1;
                        // Declared before the probe, in a scope the probe is in: the
                        // lambda names it (`decltype(wg)`, or the local itself).
                        if n.start_byte() >= self.before || !self.in_scope(n) {
                            return None;
                        }
                        found = Some(Declared::Local(n.child_by_field_name("value")?));
                    }
                }
                "declaration" => {
                    // A declarator with no value (`int wg;`) of this name.
                    let mut cursor = n.walk();
                    let bare = n
                        .children_by_field_name("declarator", &mut cursor)
                        .any(|d| {
                            d.kind() != "init_declarator"
                                && self.text(innermost_declarator(d)) == name
                        });
                    if bare {
                        return None;
                    }
                }
                "assignment_expression" => {
                    let left = n.child_by_field_name("left");
                    if left.is_some_and(|l| self.text(l) == name) {
                        return None;
                    }
                }
                "update_expression" => {
                    let argument = n.child_by_field_name("argument");
                    if argument.is_some_and(|a| self.text(a) == name) {
                        return None;
                    }
                }
                "pointer_expression" => {
                    let address = n
                        .child_by_field_name("operator")
                        .is_some_and(|o| o.kind() == "&");
                    let argument = n.child_by_field_name("argument");
                    if address && argument.is_some_and(|a| self.text(a) == name) {
                        return None;
                    }
                }
                _ => {}
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
        match count {
            0 => Some(None),
            1 => Some(found),
            _ => None,
        }
    }

    /// Whether the probe (at byte `before`) is inside the scope of the declarator
    /// `declarator`: the block, or the loop or branch head, that declares it.
    fn in_scope(&self, declarator: Node<'_>) -> bool {
        let scope = std::iter::successors(declarator.parent(), |n| n.parent()).find(|n| {
            matches!(
                n.kind(),
                "compound_statement"
                    | "for_statement"
                    | "for_range_loop"
                    | "if_statement"
                    | "while_statement"
                    | "switch_statement"
            )
        });
        scope.is_some_and(|s| s.start_byte() <= self.before && self.before < s.end_byte())
    }

    /// Whether the function is a kernel (`__global__`), whose parameters every thread
    /// holds alike.
    fn is_kernel(&self) -> bool {
        let head = self
            .function
            .child_by_field_name("body")
            .map_or(self.function.end_byte(), |b| b.start_byte());
        let start = self.function.start_byte();
        self.parsed
            .leading_blanks(start)
            .iter()
            .chain(
                self.parsed
                    .blanks
                    .iter()
                    .filter(|b| contains(&(start..head), &b.range)),
            )
            .any(|b| matches!(&b.kind, kwb_syntax::BlankKind::Macro(m) if m == "__global__"))
    }
}

enum Declared<'t> {
    Parameter { kernel: bool },
    Local(Node<'t>),
}

#[cfg(test)]
mod tests {
    use super::{Offset, offset_of};

    /// The offset of `tile`'s last assignment `tile = sA + stage * S + OFFSET` in the
    /// kernel `body`, for a probe at the end of the body.
    fn offset(body: &str) -> Offset {
        let source = format!(
            "constexpr int BK = 64;\n__global__ void k(int M, const int* p) {{\n{body}\n  tile = sA + stage * S + OFFSET;\n}}\n"
        );
        let offset_text = body
            .lines()
            .find_map(|l| l.trim().strip_prefix("// offset: "))
            .expect("the body names its offset");
        let source = source.replace("OFFSET", offset_text);
        let parsed = kwb_syntax::parse(&source);
        let root = parsed.tree.root_node();
        let function = root
            .named_child(1)
            .filter(|f| f.kind() == "function_definition")
            .expect("the kernel");
        let at = source.rfind("tile =").expect("the assignment");
        let value = root
            .descendant_for_byte_range(at + "tile = ".len(), source.len() - 4)
            .expect("the value");
        let value = std::iter::successors(Some(value), |n| n.parent())
            .find(|n| n.kind() == "assignment_expression")
            .and_then(|a| a.child_by_field_name("right"))
            .expect("the right side");
        let terms = super::super::shared::offset_terms(&parsed, value);
        offset_of(&parsed, function, &terms, at)
    }

    #[test]
    fn a_per_warpgroup_offset_is_written_out_from_thread_index() {
        let got = offset(
            "  const int wg = threadIdx.x / 128;\n  const int row_base = (wg - 1) * 64;\n  // offset: row_base * BK",
        );
        assert_eq!(
            got,
            Offset::PerThread(
                "(static_cast<decltype(row_base)>((static_cast<decltype(wg)>(kwb_t / 128) - 1) * 64) * BK)"
                    .to_owned()
            )
        );
    }

    #[test]
    fn block_indices_kernel_parameters_and_constants_are_the_same_in_every_thread() {
        let got = offset("  const int base = blockIdx.x * M;\n  // offset: base + BK * M");
        assert_eq!(got, Offset::Uniform);
    }

    #[test]
    fn what_the_code_does_not_show_is_unknown() {
        // Assigned after its initializer.
        let got = offset("  int wg = threadIdx.x / 128;\n  wg += 1;\n  // offset: wg * BK");
        assert_eq!(got, Offset::Unknown);
        // A call, threadIdx.y, a value read through a pointer.
        assert_eq!(offset("  // offset: f(threadIdx.x)"), Offset::Unknown);
        assert_eq!(offset("  // offset: threadIdx.y * BK"), Offset::Unknown);
        assert_eq!(offset("  // offset: p[threadIdx.x]"), Offset::Unknown);
        // Declared in a block the probe is not in.
        let got = offset(
            "  const __nv_bfloat16* t;\n  { const int wg = threadIdx.x / 128; t = 0; }\n  // offset: wg * BK",
        );
        assert_eq!(got, Offset::Unknown);
        // Declared twice.
        let got = offset(
            "  { const int wg = 1; }\n  const int wg = threadIdx.x / 128;\n  // offset: wg * BK",
        );
        assert_eq!(got, Offset::Unknown);
    }
}
