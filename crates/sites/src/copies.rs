//! Copies whose direction decides their kind: `cute::copy(atom, src, dst)` and plain
//! stores into shared arrays.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fields::Field;

use crate::decls::Scope;
use crate::names::{Space, base_identifier, memory_space};
use crate::{Confidence, SiteKind};

/// A classified copy.
pub struct Classified {
    pub kind: SiteKind,
    pub confidence: Confidence,
    pub note: String,
}

/// Classifies a `copy(…)` call by its copy atom and the CuTe names of its source and
/// destination; `None` for copies that are neither operand loads nor epilogue
/// traffic.
pub fn classify(call: Node<'_>, parsed: &Parsed, scope: &Scope<'_>) -> Option<Classified> {
    let arguments = call.field("arguments")?;
    let mut cursor = arguments.walk();
    let args: Vec<Node<'_>> = arguments
        .named_children(&mut cursor)
        .filter(|n| n.kind() != "comment")
        .collect();
    if args.len() < 2 {
        return None;
    }
    let is_local = |name: &str| scope.has(name);
    let name = |n: Node<'_>| {
        base_identifier(n, &parsed.masked, &is_local)
            .map(|b| parsed.masked[b.byte_range()].to_owned())
    };
    let src = name(args[args.len() - 2]).unwrap_or_default();
    let dst = name(args[args.len() - 1]).unwrap_or_default();
    let src_space = memory_space(&src);
    let dst_space = memory_space(&dst);
    let letter = dst_space.or(src_space).map(|(_, l)| l);
    let output = matches!(letter, Some('C' | 'D'));
    if args.len() >= 3 {
        let atom = parsed.masked[args[0].byte_range()].to_ascii_lowercase();
        if atom.contains("tma") || atom.contains(".with(") {
            let atom = atom.split_whitespace().collect::<String>();
            return Some(if atom.contains("store") {
                Classified {
                    kind: SiteKind::Epilogue,
                    confidence: Confidence::High,
                    note: format!("TMA store {src} → {dst}"),
                }
            } else if atom.contains("load_c") || atom.contains("load_d") || output {
                Classified {
                    kind: SiteKind::Epilogue,
                    confidence: Confidence::High,
                    note: format!("TMA load of the epilogue source {src} → {dst}"),
                }
            } else {
                Classified {
                    kind: SiteKind::OperandLoad,
                    confidence: Confidence::High,
                    note: format!("TMA load {src} → {dst}"),
                }
            });
        }
    }
    // A copy atom named for its direction and operand (`gmem_tiled_copy_A`,
    // `smem_tiled_copy_B`, `g2s_copy_a`) says what it moves when the tensors are
    // named freely (`tInputpInput`, `tfc1gfc1`).
    if args.len() >= 3 && src_space.is_none() && dst_space.is_none() {
        let atom = name(args[0]).unwrap_or_default().to_ascii_lowercase();
        let operand = atom.ends_with("_a") || atom.ends_with("_b");
        let direction = ["gmem", "g2s", "g2r", "smem", "s2r"]
            .iter()
            .find(|d| atom.starts_with(**d));
        if operand && let Some(direction) = direction {
            return Some(Classified {
                kind: SiteKind::OperandLoad,
                confidence: Confidence::Low,
                note: format!(
                    "copy of operand {} through `{atom}` ({direction} side, by its name) {src} → {dst}",
                    atom.chars().last().unwrap_or('a').to_ascii_uppercase()
                ),
            });
        }
    }
    match (src_space.map(|s| s.0), dst_space.map(|s| s.0)) {
        (_, Some(Space::Global)) => Some(Classified {
            kind: SiteKind::Epilogue,
            confidence: Confidence::Medium,
            note: format!("copy toward global memory {src} → {dst}"),
        }),
        (Some(Space::Global), Some(_)) if output => Some(Classified {
            kind: SiteKind::Epilogue,
            confidence: Confidence::Medium,
            note: format!("load of the epilogue source {src} → {dst}"),
        }),
        (Some(Space::Global), Some(space)) => Some(Classified {
            kind: SiteKind::OperandLoad,
            confidence: Confidence::Medium,
            note: format!(
                "copy global → {} {src} → {dst}",
                if space == Space::Shared {
                    "shared"
                } else {
                    "registers"
                }
            ),
        }),
        // Operand fragments filled from shared memory (`copy(s2r_A, tCsA(_,_,k), tCrA(…))`)
        // and register-staged tiles stored into it (`copy(tArA, tAsA)`).
        (Some(Space::Shared), Some(Space::Register))
        | (Some(Space::Register), Some(Space::Shared))
            if matches!(letter, Some('A' | 'B')) =>
        {
            let to_registers = dst_space.is_some_and(|s| s.0 == Space::Register);
            Some(Classified {
                kind: SiteKind::OperandLoad,
                confidence: Confidence::Medium,
                note: format!(
                    "copy {} of operand {} {src} → {dst}",
                    if to_registers {
                        "shared → registers"
                    } else {
                        "registers → shared"
                    },
                    letter.unwrap_or('A')
                ),
            })
        }
        _ => None,
    }
}

/// Plain stores of global data into a shared array (`As[ty][tx] = A[…]`), among a
/// function's assignments.
pub fn plain_shared_stores<'t>(
    assignments: &[Node<'t>],
    parsed: &Parsed,
    scope: &Scope<'t>,
) -> Vec<Node<'t>> {
    let is_local = |name: &str| scope.has(name);
    let mut out = Vec::new();
    for &node in assignments {
        if node.field("operator").is_none_or(|o| o.kind() != "=") {
            continue;
        }
        let (Some(left), Some(right)) = (node.field("left"), node.field("right")) else {
            continue;
        };
        if !matches!(left.kind(), "subscript_expression" | "pointer_expression") {
            continue;
        }
        let target = base_identifier(left, &parsed.masked, &is_local)
            .and_then(|b| scope.lookup(&parsed.masked[b.byte_range()], b.start_byte()));
        if target.is_some_and(|t| t.shared) && reads_global(right, parsed, scope) {
            out.push(node);
        }
    }
    out
}

/// Whether an expression subscripts or dereferences a non-shared pointer.
fn reads_global(expr: Node<'_>, parsed: &Parsed, scope: &Scope<'_>) -> bool {
    let is_local = |name: &str| scope.has(name);
    let mut stack = vec![expr];
    while let Some(node) = stack.pop() {
        if matches!(node.kind(), "subscript_expression" | "pointer_expression")
            && let Some(arg) = node.field("argument")
            && let Some(base) = base_identifier(arg, &parsed.masked, &is_local)
            && scope
                .lookup(&parsed.masked[base.byte_range()], base.start_byte())
                .is_some_and(|d| !d.shared)
        {
            return true;
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    false
}
