//! Scalar multiply-accumulates: the MMA of a SIMT GEMM, a GEMV or a dot-product loop.
//!
//! `grammars/queries/mma.scm` marks every candidate `@accumulate`: `acc += a * b`,
//! `acc = acc + a * b`, `acc = fma(a, b, acc)` (and `fmaf`, `__fmaf_rn`, `__hfma2`, …,
//! the names `grammars/fma.txt` lists). Most such statements in a kernel are index
//! arithmetic (`offset += stride * i`), so the syntax alone does not decide: a
//! candidate is an MMA only when its target is carried across the iterations of a
//! loop around it (declared outside the innermost loop, or a parameter of the helper
//! that holds it) and is not an integer, a pointer or a thread index.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fields::Field;

use crate::decls::Scope;
use crate::names::base_identifier;

/// The parts of one multiply-accumulate statement.
#[derive(Clone, Copy, Debug)]
pub struct Accumulation<'t> {
    /// What accumulates (`acc[i][j]`).
    pub target: Node<'t>,
    /// The two factors, in the order written.
    pub factors: [Node<'t>; 2],
}

/// The fused multiply-add functions whose third argument is the accumulator.
pub fn fma_functions() -> impl Iterator<Item = &'static str> {
    include_str!("../../../grammars/fma.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// `node` read as a multiply-accumulate: `T += A * B`, `T = T + A * B` (either
/// order), `T = fma(A, B, T)`. `None` for any other shape.
pub fn accumulation<'t>(node: Node<'t>, text: &str) -> Option<Accumulation<'t>> {
    if node.kind() == "init_declarator" {
        return declared_fma(node, text);
    }
    if node.kind() != "assignment_expression" {
        return None;
    }
    let target = node.field("left")?;
    let right = strip(node.field("right")?);
    let operator = node.field("operator")?;
    let same = |n: Node<'t>| squeeze(&text[n.byte_range()]) == squeeze(&text[target.byte_range()]);
    let product = |n: Node<'t>| -> Option<[Node<'t>; 2]> {
        let n = strip(n);
        (n.kind() == "binary_expression" && field_text(n, "operator", text) == Some("*"))
            .then(|| Some([n.field("left")?, n.field("right")?]))
            .flatten()
    };
    let factors = match &text[operator.byte_range()] {
        "+=" => product(right)?,
        "=" if right.kind() == "binary_expression"
            && field_text(right, "operator", text) == Some("+") =>
        {
            let (l, r) = (right.field("left")?, right.field("right")?);
            match (same(strip(l)), same(strip(r))) {
                (true, _) => product(r)?,
                (_, true) => product(l)?,
                _ => return None,
            }
        }
        "=" if right.kind() == "call_expression" => match fma_arguments(right, text)? {
            [a, b, c] if same(strip(c)) => [a, b],
            _ => return None,
        },
        _ => return None,
    };
    Some(Accumulation { target, factors })
}

/// `float t = fma(A, B, acc[m]);` (generated code that stores `t` back into `acc[m]`
/// next): the accumulate of `acc[m]`.
fn declared_fma<'t>(node: Node<'t>, text: &str) -> Option<Accumulation<'t>> {
    let [a, b, c] = fma_arguments(strip(node.field("value")?), text)?;
    matches!(strip(c).kind(), "identifier" | "subscript_expression").then(|| Accumulation {
        target: strip(c),
        factors: [a, b],
    })
}

/// The three arguments of a call of a fused multiply-add (grammars/fma.txt); `None`
/// for any other call or expression.
fn fma_arguments<'t>(call: Node<'t>, text: &str) -> Option<[Node<'t>; 3]> {
    if call.kind() != "call_expression" {
        return None;
    }
    let function = call.field("function")?;
    let name = text[function.byte_range()].trim();
    let name = name.rsplit("::").next().unwrap_or(name);
    if !fma_functions().any(|f| f == name) {
        return None;
    }
    let arguments = call.field("arguments")?;
    let mut cursor = arguments.walk();
    let args: Vec<Node<'t>> = arguments
        .named_children(&mut cursor)
        .filter(|n| n.kind() != "comment")
        .collect();
    args.try_into().ok()
}

/// Whether the multiply-accumulate `acc` (the statement `node`) accumulates across a
/// loop: it lies in a loop, its target's variable is declared before the innermost
/// loop around it (or is a parameter), and that variable is not an integer, a
/// pointer, or anything a factor computes from the thread's index.
pub fn carried(node: Node<'_>, acc: &Accumulation<'_>, parsed: &Parsed, scope: &Scope<'_>) -> bool {
    let text = &parsed.masked;
    let Some(innermost) = enclosing_loop(node) else {
        return false;
    };
    let is_local = |name: &str| scope.has(name);
    let Some(base) = base_identifier(acc.target, text, &is_local) else {
        return false;
    };
    let name = &text[base.byte_range()];
    let Some(decl) = scope.lookup(name, node.start_byte()) else {
        return false;
    };
    if !decl.parameter && decl.node.start_byte() >= innermost.start_byte() {
        return false;
    }
    let declared = &text[decl.node.byte_range()];
    let ty = decl
        .node
        .field("type")
        .map_or("", |t| &text[t.byte_range()]);
    if is_integer_type(ty) || declared_pointer(declared, name) {
        return false;
    }
    // A sum of squares (`s += e * e`) is a norm, not a product of two operands.
    if squeeze(&text[acc.factors[0].byte_range()]) == squeeze(&text[acc.factors[1].byte_range()]) {
        return false;
    }
    // A factor computed from the thread's index itself (not a read indexed by it, as
    // `As[threadIdx.y][k]` is) makes this index arithmetic.
    !acc.factors.iter().any(|f| {
        let t = &text[f.byte_range()];
        !t.contains('[')
            && ["threadIdx", "blockIdx", "blockDim", "gridDim"]
                .iter()
                .any(|w| t.contains(w))
    })
}

/// The innermost `for`, `while` or `do` statement around `node`, not crossing a
/// function or lambda.
fn enclosing_loop(node: Node<'_>) -> Option<Node<'_>> {
    let mut at = node.parent();
    while let Some(n) = at {
        match n.kind() {
            "for_statement" | "for_range_loop" | "while_statement" | "do_statement" => {
                return Some(n);
            }
            "function_definition" | "lambda_expression" => return None,
            _ => at = n.parent(),
        }
    }
    None
}

/// Whether a declared type names an integer (or bool) type, which no accumulator of
/// values is.
fn is_integer_type(ty: &str) -> bool {
    const INTEGERS: [&str; 22] = [
        "int",
        "unsigned",
        "signed",
        "long",
        "short",
        "char",
        "bool",
        "size_t",
        "ptrdiff_t",
        "int8_t",
        "int16_t",
        "int32_t",
        "int64_t",
        "uint8_t",
        "uint16_t",
        "uint32_t",
        "uint64_t",
        "uint",
        "index_t",
        "Index",
        "LongIndex",
        "dim3",
    ];
    let last = ty.rsplit("::").next().unwrap_or(ty);
    last.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            !matches!(
                *w,
                "" | "const" | "volatile" | "static" | "constexpr" | "register" | "auto"
            )
        })
        .all(|w| INTEGERS.contains(&w))
        && !last.trim().is_empty()
        && !last.contains("auto")
}

/// Whether the declaration text declares `name` as a pointer (`T* name`).
fn declared_pointer(declared: &str, name: &str) -> bool {
    declared
        .match_indices(name)
        .any(|(at, _)| declared[..at].trim_end().ends_with('*'))
}

fn field_text<'a>(node: Node<'_>, field: &str, text: &'a str) -> Option<&'a str> {
    node.field(field).map(|n| text[n.byte_range()].trim())
}

/// `node` without the parentheses around it.
/// The expression inside any parentheses around `node`.
pub(crate) fn strip(mut node: Node<'_>) -> Node<'_> {
    while node.kind() == "parenthesized_expression" {
        match node.named_child(0) {
            Some(inner) => node = inner,
            None => break,
        }
    }
    node
}

fn squeeze(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_types_are_not_accumulators() {
        for ty in [
            "int",
            "const int",
            "unsigned int",
            "std::size_t",
            "uint32_t",
            "long long",
        ] {
            assert!(is_integer_type(ty), "{ty}");
        }
        for ty in [
            "float",
            "half",
            "__nv_bfloat162",
            "AccT",
            "cutlass::half_t",
            "auto",
            "double",
        ] {
            assert!(!is_integer_type(ty), "{ty}");
        }
        assert!(declared_pointer("float* acc = p", "acc"));
        assert!(!declared_pointer("float acc[4]", "acc"));
    }
}
