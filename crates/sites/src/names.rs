//! Naming conventions the heuristics read: CuTe's memory-space prefixes, K-loop
//! headers, accumulator names, and base identifiers of expressions.

use std::sync::OnceLock;

use regex::Regex;
use tree_sitter::Node;

use crate::fields::Field;

/// Where a CuTe-named tensor lives (`tAgA` → global, `tCsA` → shared, `tCrA` →
/// registers), and which operand letter it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Global,
    Shared,
    Register,
}

/// The space and operand letter a CuTe name encodes, e.g. `tAgA` → (Global, 'A'),
/// `tTR_rAcc` → (Register, 'C').
pub fn memory_space(name: &str) -> Option<(Space, char)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"^(?:t[A-Z][A-Za-z0-9]*_|t[A-Z]+|b[A-Z]+_|[a-z]{1,3}[A-Z]+_)?([gsrm])([A-Z][A-Za-z0-9]*)")
            .expect("valid regex")
    });
    let caps = re.captures(name)?;
    let space = match &caps[1] {
        "g" | "m" => Space::Global,
        "s" => Space::Shared,
        _ => Space::Register,
    };
    let rest = &caps[2];
    let letter = if rest.starts_with("Acc") {
        'C'
    } else {
        rest.chars().next()?
    };
    Some((space, letter))
}

/// How a loop header reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LoopHeader {
    /// A persistent tile-scheduler, task or layer loop: never a mainloop.
    Excluded,
    /// Names nothing about K.
    Other,
    /// Over k blocks inside a tile (`k_block`, `warp_mma_k`, `kk`).
    KBlock,
    /// Over K tiles (`k_tile_count`, `gemm_k_iterations`, `kt < K / BK`).
    KTile,
}

/// Classifies a loop header by the identifiers in it.
pub fn loop_header(header: &str) -> LoopHeader {
    static EXCLUDED: OnceLock<Regex> = OnceLock::new();
    let excluded = EXCLUDED.get_or_init(|| {
        Regex::new(r"(?i)^(work_tile.*|.*is_valid.*|.*scheduler.*|tasks?|task_.*|.*_tasks?|num_tasks|tile_id.*|tile_idx.*|blockidx|griddim|.*persistent.*|layers?|layer_.*|.*_layers?)$")
            .expect("valid regex")
    });
    // Steps of the MMA's K within one tile (`k < BLOCK_K / WGMMA::K`): a k-block loop.
    static WITHIN_TILE: OnceLock<Regex> = OnceLock::new();
    let within_tile = WITHIN_TILE.get_or_init(|| {
        Regex::new(r"\b(BLOCK_K|TILE_K|BLK_K|BLOCK_SIZE_K|TILE_SIZE_K|kBlockK|kTileK|kBK|kBlockSizeK|kTileSizeK|BlockK|TileK|BK)\s*/\s*[A-Za-z_0-9]")
            .expect("valid regex")
    });
    if within_tile.is_match(header) && !identifiers(header).any(|i| excluded.is_match(i)) {
        return LoopHeader::KBlock;
    }
    let mut best = LoopHeader::Other;
    let mut over_stages = false;
    for ident in identifiers(header) {
        if excluded.is_match(ident) {
            return LoopHeader::Excluded;
        }
        best = best.max(identifier_k_level(ident));
        // A lower-case stage or pipe variable (`stage`, `k_pipe`; not the constant
        // `Stages`): the loop fills the pipeline — a prologue, not the mainloop.
        over_stages |= ident.starts_with(|c: char| c.is_ascii_lowercase())
            && segments(ident)
                .iter()
                .any(|s| matches!(s.as_str(), "stage" | "pipe" | "pipes"));
    }
    if over_stages && best == LoopHeader::KTile {
        return LoopHeader::Other;
    }
    best
}

fn identifier_k_level(ident: &str) -> LoopHeader {
    let mut segments = segments(ident);
    // CUTLASS's constant prefix: `kWarpGemmIterations`, `kStages` say nothing about K.
    let mut chars = ident.chars();
    if chars.next() == Some('k') && chars.next().is_some_and(|c| c.is_ascii_uppercase()) {
        segments.remove(0);
    }
    let has = |s: &str| segments.iter().any(|x| x == s);
    let k_named = has("k")
        || has("kt")
        || has("ktile")
        || has("ktiles")
        || has("kiter")
        || has("kiters")
        || has("reduction")
        || has("kk")
        || has("kb")
        || has("ki");
    if !k_named {
        return LoopHeader::Other;
    }
    if has("pipe") || has("stage") || has("stages") || has("prologue") {
        return LoopHeader::Other;
    }
    if has("block")
        || has("blk")
        || has("warp")
        || has("mma")
        || has("inner")
        || has("kk")
        || has("kb")
        || has("frag")
    {
        return LoopHeader::KBlock;
    }
    LoopHeader::KTile
}

/// Lower-case segments of an identifier split at `_` and camel-case humps
/// (`gemm_k_iterations` → gemm, k, iterations; `kTileCount` → k, tile, count).
fn segments(ident: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in ident.split('_').filter(|p| !p.is_empty()) {
        let chars: Vec<char> = part.chars().collect();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let hump = c.is_ascii_uppercase()
                && i > 0
                && (chars[i - 1].is_ascii_lowercase()
                    || chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase())
                        && chars[i - 1].is_ascii_uppercase());
            if hump && !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            current.push(c.to_ascii_lowercase());
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}

/// The last name component of a call's `function` node: `cute::gemm` → `gemm`,
/// `Weight(d).load` → `load`, `warpgroup_wait<0>` → `warpgroup_wait`.
pub fn callee_name<'a>(function: Node<'_>, text: &'a str) -> &'a str {
    let named = match function.kind() {
        "field_expression" => function.field("field"),
        "qualified_identifier" | "template_function" | "template_method" => function.field("name"),
        _ => None,
    };
    match named {
        Some(inner) => callee_name(inner, text),
        None => text[function.byte_range()].trim(),
    }
}

pub use kwb_syntax::identifiers;

/// Whether a name reads as an accumulator (`accum`, `acc`, `tCrC`, `frag_c`, `d`).
pub fn is_accumulator_name(name: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"(?i)^(acc|accs|accum|accums|accumulators?|accumulator_.*|acc_.*|.*_acc|.*_accum|frag_?[cd]|[cd]_?frag.*|[cd]_?regs?|tCrC|tCrD|[cd])$")
            .expect("valid regex")
    });
    re.is_match(name) || memory_space(name).is_some_and(|(s, l)| s == Space::Register && l == 'C')
}

/// Which operand a name reads as (`frag_a`, `a_frag`, `tCrB`, `sA`, `a`), if any.
pub fn operand_letter(name: &str) -> Option<char> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r"(?i)^(?:frag_?([ab])|([ab])_?frag.*|([ab])_?regs?|([ab])_?desc|desc_?([ab])|([ab]))$",
        )
        .expect("valid regex")
    });
    if let Some((_, letter)) = memory_space(name) {
        return matches!(letter, 'A' | 'B').then_some(letter);
    }
    let caps = re.captures(name)?;
    let letter = (1..=6).find_map(|i| caps.get(i))?.as_str();
    letter.chars().next().map(|c| c.to_ascii_uppercase())
}

/// The variable an expression reads: `tCrA(_, _, k)` → `tCrA`, `acc[i][j]` → `acc`,
/// `frag.x[0]` → `frag`, `&sA[s][0]` → `sA`. Calls of something that is not a local
/// tensor (`make_smem_desc(&sA[0])`) are looked through to their first argument.
pub fn base_identifier<'t>(
    node: Node<'t>,
    text: &str,
    is_local: &dyn Fn(&str) -> bool,
) -> Option<Node<'t>> {
    match node.kind() {
        "identifier" | "field_identifier" => Some(node),
        "call_expression" => {
            let function = node.field("function")?;
            let name = &text[function.byte_range()];
            if function.kind() == "identifier" && (is_local(name) || memory_space(name).is_some()) {
                return Some(function);
            }
            let arguments = node.field("arguments")?;
            let first = arguments.named_child(0)?;
            base_identifier(first, text, is_local)
        }
        "field_expression" => {
            // `pipe_state.warp_loaded_frag_A_[i]`: the field says what the value is.
            let field = node.field("field")?;
            let name = &text[field.byte_range()];
            if operand_letter(name.trim_end_matches('_')).is_some()
                || name.to_ascii_lowercase().contains("frag")
                || is_accumulator_name(name.trim_end_matches('_'))
            {
                return Some(field);
            }
            base_identifier(node.field("argument")?, text, is_local)
        }
        "subscript_expression" => base_identifier(node.field("argument")?, text, is_local),
        "pointer_expression" | "unary_expression" => {
            base_identifier(node.field("argument")?, text, is_local)
        }
        "binary_expression" => base_identifier(node.field("left")?, text, is_local),
        "cast_expression" => base_identifier(node.field("value")?, text, is_local),
        "parenthesized_expression" | "argument_list" => {
            base_identifier(node.named_child(0)?, text, is_local)
        }
        "qualified_identifier" => None,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cute_names_encode_spaces() {
        assert_eq!(memory_space("tAgA"), Some((Space::Global, 'A')));
        assert_eq!(memory_space("tCsB"), Some((Space::Shared, 'B')));
        assert_eq!(memory_space("tCrA_copy_view"), Some((Space::Register, 'A')));
        assert_eq!(memory_space("tTR_rAcc"), Some((Space::Register, 'C')));
        assert_eq!(memory_space("bSG_gD"), Some((Space::Global, 'D')));
        assert_eq!(memory_space("sA"), Some((Space::Shared, 'A')));
        assert_eq!(memory_space("accum"), None);
        assert_eq!(memory_space("tiled_copy"), None);
    }

    #[test]
    fn loop_headers() {
        assert_eq!(
            loop_header("; k_tile_count > 0; --k_tile_count"),
            LoopHeader::KTile
        );
        assert_eq!(
            loop_header("; gemm_k_iterations > (-Base::kStages + 1);"),
            LoopHeader::KTile
        );
        assert_eq!(
            loop_header("int kt = 0; kt < num_k_tiles; ++kt"),
            LoopHeader::KTile
        );
        assert_eq!(
            loop_header("int k_block = 0; k_block < K_BLOCK_MAX; ++k_block"),
            LoopHeader::KBlock
        );
        // The k16 steps of one tile, by a literal MMA depth too.
        assert_eq!(
            loop_header("int k = 0; k < kBK / 16; ++k"),
            LoopHeader::KBlock
        );
        assert_eq!(
            loop_header("int k = 0; k < BK / 16; ++k"),
            LoopHeader::KBlock
        );
        assert_eq!(
            loop_header("int warp_mma_k = 0; warp_mma_k < N; ++warp_mma_k"),
            LoopHeader::KBlock
        );
        assert_eq!(
            loop_header("work_tile_info.is_valid()"),
            LoopHeader::Excluded
        );
        assert_eq!(
            loop_header("int t = blockIdx.x; t < num_tasks; t += gridDim.x"),
            LoopHeader::Excluded
        );
        assert_eq!(
            loop_header("int k_pipe = 0; k_pipe < Stages - 1; ++k_pipe"),
            LoopHeader::Other
        );
        assert_eq!(loop_header("int i = 0; i < 4; ++i"), LoopHeader::Other);
        assert_eq!(
            loop_header("int stage = 0; stage < Base::kStages - 1; ++stage, --gemm_k_iterations"),
            LoopHeader::Other
        );
        assert_eq!(
            loop_header("k_tile_count > -(DispatchPolicy::Stages-1)"),
            LoopHeader::KTile
        );
        assert_eq!(
            loop_header("int i = 0; i < kThreadCount; ++i"),
            LoopHeader::Other
        );
        assert_eq!(loop_header("int k = 0; k < K; k += BK"), LoopHeader::KTile);
    }

    #[test]
    fn accumulator_and_operand_names() {
        assert!(is_accumulator_name("accum"));
        assert!(is_accumulator_name("accumulators"));
        assert!(is_accumulator_name("tCrC"));
        assert!(!is_accumulator_name("tCrA"));
        assert_eq!(operand_letter("tCrA"), Some('A'));
        assert_eq!(operand_letter("frag_b"), Some('B'));
        assert_eq!(operand_letter("a_frag"), Some('A'));
        assert_eq!(operand_letter("pipeline"), None);
    }
}
