//! Syntax-tree questions the probe planners share: where a statement starts and
//! ends, which names a text mentions, which line an offset is on.

use kwb_sites::{Kernel, Site};
use kwb_syntax::{BlankKind, Parsed};
use tree_sitter::Node;

/// Whether `text` names the identifier `name`.
pub(crate) fn names(text: &str, name: &str) -> bool {
    identifiers(text).any(|w| w == name)
}

/// The slot (`'A'` or `'B'`) in which the MMA call `mma` passes `name`, as the kernel
/// map read the call's operands (by position, by a helper's parameters, or by name).
/// This is what the MMA consumes as that operand, whichever tile the value was made
/// from: an MMA handed B's tile as A is probed as A. `None` where the map holds no
/// arguments for the call (inline asm, a scalar multiply-accumulate), or `name` is in
/// neither slot or in both.
pub(crate) fn slot_of(kernel: &Kernel, source: &str, mma: &Site, name: &str) -> Option<char> {
    let call = kernel.mma_arguments.iter().find(|c| c.call == mma.range)?;
    let passes = |args: &[std::ops::Range<usize>]| {
        args.iter()
            .any(|r| source.get(r.clone()).is_some_and(|text| names(text, name)))
    };
    match (passes(&call.a), passes(&call.b)) {
        (true, false) => Some('A'),
        (false, true) => Some('B'),
        _ => None,
    }
}

/// The identifiers of `text`, in order (keywords included).
pub(crate) use kwb_syntax::identifiers;

/// The statement holding `node` that sits directly in a block, so a statement
/// inserted before it stays out of unbraced loop bodies. A branch of a preprocessor
/// conditional inside a function (`#ifdef SM100 … #endif`) counts as a block: code
/// inserted there stays in the branch, and never lands in front of a directive
/// (which must start its line). `None` when `node` is not inside a function body.
pub(crate) fn block_statement(node: Node<'_>) -> Option<Node<'_>> {
    let mut current = node;
    loop {
        let parent = current.parent()?;
        if matches!(
            parent.kind(),
            "compound_statement"
                | "preproc_if"
                | "preproc_ifdef"
                | "preproc_else"
                | "preproc_elif"
                | "preproc_elifdef"
        ) {
            return Some(current);
        }
        if parent.kind() == "function_definition" {
            return None;
        }
        current = parent;
    }
}

/// Where code that must run before statement `node` goes: before the attribute
/// macros and pragmas that stand right before it (`CUTLASS_PRAGMA_NO_UNROLL for …`
/// and `#pragma unroll` stay with their loop). A `#pragma` must start its line, so
/// in front of one the code goes at the end of the previous statement (or after
/// the block's `{`) instead: no line is added or moved.
pub(crate) fn declaration_point(parsed: &Parsed, node: Node<'_>) -> usize {
    let mut start = node.start_byte();
    let mut directive = false;
    let before = parsed.blanks.partition_point(|b| b.range.end <= start);
    for blank in parsed.blanks[..before].iter().rev() {
        let adjacent = parsed.masked[blank.range.end..start].trim().is_empty();
        let attaches = matches!(blank.kind, BlankKind::Macro(_) | BlankKind::Pragma);
        if adjacent && attaches {
            start = blank.range.start;
            directive = blank.kind == BlankKind::Pragma;
        } else {
            break;
        }
    }
    if !directive {
        return start;
    }
    let mut previous = node.prev_sibling();
    while let Some(p) = previous {
        if p.kind() != "comment" && p.end_byte() <= start {
            break;
        }
        previous = p.prev_sibling();
    }
    previous.map_or(start, |p| p.end_byte())
}

/// Whether the declaration at `decl` (a declaration, parameter or field) declares a
/// plain integer or bool scalar (`int block_idx`, `uint32_t k`): an index or a count,
/// never the data an MMA consumes or accumulates. (Packed MMA fragments are arrays,
/// `uint32_t a[4]`; scalar accumulators are floating point.)
pub(crate) fn is_integer_scalar(parsed: &Parsed, decl: Node<'_>) -> bool {
    let Some(n) = declaration_around(decl) else {
        return false;
    };
    let Some(ty) = n.child_by_field_name("type") else {
        return false;
    };
    let integer = parsed.masked[ty.byte_range()].split_whitespace().all(|w| {
        matches!(
            w,
            "int"
                | "unsigned"
                | "signed"
                | "long"
                | "short"
                | "bool"
                | "size_t"
                | "uint32_t"
                | "int32_t"
                | "uint64_t"
                | "int64_t"
                | "const"
                | "auto"
        )
    }) && !parsed.masked[ty.byte_range()].contains("auto");
    let mut cursor = n.walk();
    let array = n
        .children_by_field_name("declarator", &mut cursor)
        .any(|d| parsed.masked[d.byte_range()].contains('['));
    integer && !array
}

/// The declaration (statement, parameter or field) `node` is or lies in.
pub(crate) fn declaration_around(node: Node<'_>) -> Option<Node<'_>> {
    let mut at = Some(node);
    while let Some(n) = at {
        if matches!(
            n.kind(),
            "declaration" | "parameter_declaration" | "field_declaration"
        ) {
            return Some(n);
        }
        at = n.parent();
    }
    None
}

/// The innermost function definition around `node`.
pub(crate) fn enclosing_function(node: Node<'_>) -> Option<Node<'_>> {
    enclosing(node, "function_definition")
}

/// The innermost node of `kind` around `node` (not `node` itself).
pub(crate) fn enclosing<'t>(node: Node<'t>, kind: &str) -> Option<Node<'t>> {
    let mut at = node.parent();
    while let Some(n) = at {
        if n.kind() == kind {
            return Some(n);
        }
        at = n.parent();
    }
    None
}

/// The first line of `node`'s text, trimmed: what the probe table shows of a statement.
pub(crate) fn first_line(parsed: &Parsed, node: Node<'_>) -> String {
    parsed.source[node.byte_range()]
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The 1-based line of byte `offset`.
pub(crate) fn line_of(parsed: &Parsed, offset: usize) -> usize {
    parsed.source[..offset].matches('\n').count() + 1
}

/// Whether `inner` lies within `outer`'s bytes.
pub(crate) fn contains(outer: &std::ops::Range<usize>, inner: &std::ops::Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// The identifier a declarator declares, through pointer, reference, array and
/// initializer layers (`*tile`, `a[4]`, `x = …`): the innermost `declarator`.
pub(crate) fn innermost_declarator(declarator: Node<'_>) -> Node<'_> {
    let mut inner = declarator;
    while let Some(d) = inner.child_by_field_name("declarator") {
        inner = d;
    }
    inner
}

/// The names of C arrays declared inside `body` (`float acc[4][8]`, `uint32_t a[4]`):
/// per-thread registers, not memory a store writes to.
pub(crate) fn local_arrays(parsed: &Parsed, body: Node<'_>) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        if n.kind() == "array_declarator" {
            let inner = innermost_declarator(n);
            if inner.kind() == "identifier" {
                found.push(parsed.masked[inner.byte_range()].to_owned());
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    found
}
