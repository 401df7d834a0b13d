//! The operators: where each stage's defect is planted, found through the kernel map
//! and the syntax tree, as byte-range edits on the original text. They find their
//! sites by the shape of the code (a loop around the MMA, a slice of a staged shared
//! tensor, a store of an accumulator-derived value, the arguments of a TMA encode),
//! so they work on kernels kwb did not write; names are only a tie-breaker.
//!
//! - mma, `k-tile-dropped`: the consumer mainloop's condition one step short
//!   (`k < N` becomes `k < (N) - 1`; a count-down `k > N` becomes `k > (N) + 1`). A
//!   producer loop is left alone: a load never issued leaves its consumer waiting.
//! - mma, `mma-twice`: an MMA issue statement issued twice, so its product is
//!   accumulated twice.
//! - mma, `accumulator-not-zeroed`: the statement that zeroes the accumulator
//!   (`clear(acc)`, `fill(acc, 0)`, `wmma::fill_fragment(acc, 0)`, `acc[i][j] = 0.f`,
//!   `memset(acc, 0, ..)`) removed, or `accumulate_ = GMMA::ScaleOut::Zero` made
//!   `ScaleOut::One`, only in a persistent kernel: the zeroing sits in a loop that
//!   encloses the mainloop, and the accumulator is declared before that loop and zeroed
//!   before it too, so the next tile accumulates onto the previous one. Anywhere else
//!   the mutant would read uninitialized registers (undefined, not a stage defect), and
//!   `ScaleOut::Zero` over a cleared accumulator made `One` would change nothing.
//! - epilogue, `alpha-twice`: `alpha` in an epilogue statement becomes
//!   `(alpha * alpha)` (a field `p.alpha` the same).
//! - epilogue, `beta-dropped`: `beta` in an epilogue statement becomes `(beta * 0)`:
//!   beta·C is dropped, its type kept.
//! - epilogue, `store-scaled`: in an epilogue store (`D[i] = v;`, `*p = cvt(v0, v1);`)
//!   of a value derived from the accumulator, each derived local of a plain arithmetic
//!   type (`float v`) read there becomes `(v + v)` and each read of an accumulator of a
//!   plain element type (`float acc[..]`) becomes `(acc[i] * 2)`: the stored value is
//!   doubled through any conversion, without arithmetic on half or bf16 types (which
//!   `__CUDA_NO_HALF_OPERATORS__` may forbid). CuTe tensors and `auto` locals are left
//!   alone: their element type is not visible.
//! - epilogue, `bias-axis`: after the mainloop (or in a function with epilogue sites
//!   and no mainloop, an epilogue functor), a vector the kernel is given (a pointer
//!   parameter or member) read at one integer name (`bias[col]`) is read at the other
//!   name that, with it, indexes a matrix in the same function (`D[row * ldd + col]`
//!   makes `bias[row]`): a per-column bias or scale applied per row.
//! - epilogue, `store-transposed`: in an epilogue store of an accumulator-derived
//!   value, the destination's index `row * ld + col` (in a longer sum, through casts,
//!   or in an index local declared after the mainloop) becomes `col * ld + row`: the
//!   tile is stored transposed, or (where the problem is not square, or a vector store
//!   lands on an odd row) out of bounds or misaligned, which faults at the store.
//! - operand-load, `load-k-offset`: in a load inside the mainloop, an index derived
//!   from the loop's K step (the induction variable, or a local computed from it)
//!   becomes `(x + 1)`: another K tile is fetched, or another stage filled.
//! - operand-load, `stage-index-off`: in an MMA's operands, a load into shared memory
//!   inside the mainloop, or a slice of a staged shared tensor inside it, a pipeline
//!   stage index `x` becomes `((x + 1) % COUNT)`: the neighbouring stage is read or
//!   filled. A stage index is an integer local computed as `y % COUNT`, an integer
//!   local or parameter named like one (`read_stage`, `smem_pipe_read`, `pipe`), or a
//!   stage-named state's `.index()`; COUNT is, first, the `% COUNT` it was computed
//!   with, then `cute::size<I>(T)` for the I-th coordinate of a CuTe slice `T(_, .., x)`,
//!   then a stage-count constant in scope (`K_PIPE_MAX`, `kStages`, `STAGES`, a
//!   non-type template parameter). Without a COUNT there is no mutant: the index stays
//!   in range. Barrier arrays (`mbar[x]`) and calls on objects (`tma.with(..)`,
//!   `pipeline.consumer_wait(..)`) are left alone: a defect there hangs the kernel.
//! - operand-load, `operand-stride`: in a load of an operand (an operand-load site in
//!   the mainloop or in a load helper), a leading dimension or stride (`lda`, `ld_b`,
//!   `stride_a`, an integer parameter `K` or `N`) that multiplies a row becomes
//!   `(ld - 1)`: rows are read skewed. Only multiplicative uses (`row * lda`), and
//!   `- 1` rather than `+ 1`: with rows and columns in range, `row * (ld - 1) + col`
//!   stays below `rows * ld`, inside the allocation (a vector access may become
//!   misaligned, which faults loudly). Constants (`LDS`, a shared tile's pitch) are
//!   left alone.
//! - operand-load, `ab-swapped`: at an MMA call that passes one A and one B argument
//!   (as the kernel map reads the call's roles), the two arguments swapped. Only
//!   where their shapes allow: a mutant whose fragments differ in type does not
//!   compile and is dropped.
//! - descriptor, `tma-swizzle`: a `CU_TENSOR_MAP_SWIZZLE_*` in a function that makes
//!   or receives a TMA map becomes another swizzle, so the tile is written one way
//!   and read another.
//! - descriptor, `tma-dims`, `tma-stride`, `tma-box`: at a TMA encode (a call whose
//!   second argument is a `CU_TENSOR_MAP_DATA_TYPE_*`, whatever the function pointer is
//!   called), the array given as globalDim (argument 4, from 0), globalStrides (5) or
//!   boxDim (6), followed to its initializer in the same function (or, where the encode's
//!   function receives it as a parameter, in each caller in the file): globalDim's
//!   first two elements swapped when they differ; globalStrides' first element
//!   `* 2` (a 16-byte multiple stays one); boxDim's first two elements swapped when
//!   they differ, else its first halved.
//!
//! Invariant: every edit lies inside the site it mutates (for a loop, its condition;
//! for a TMA encode, the arrays it is given, in the function that gives them), in the
//! original text's byte offsets.

mod descriptor;
mod epilogue;
mod load;
mod mma;

use std::ops::Range;

use kwb_edit::Indel;
use kwb_sites::{Kernel, KernelMap, Site, SiteKind};
use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::Stage;

/// Every operator's name with its stage, in the order of the module doc.
pub const OPERATORS: [(&str, Stage); 16] = [
    ("k-tile-dropped", Stage::Mma),
    ("mma-twice", Stage::Mma),
    ("accumulator-not-zeroed", Stage::Mma),
    ("alpha-twice", Stage::Epilogue),
    ("beta-dropped", Stage::Epilogue),
    ("store-scaled", Stage::Epilogue),
    ("bias-axis", Stage::Epilogue),
    ("store-transposed", Stage::Epilogue),
    ("load-k-offset", Stage::OperandLoad),
    ("stage-index-off", Stage::OperandLoad),
    ("operand-stride", Stage::OperandLoad),
    ("ab-swapped", Stage::OperandLoad),
    ("tma-swizzle", Stage::Descriptor),
    ("tma-dims", Stage::Descriptor),
    ("tma-stride", Stage::Descriptor),
    ("tma-box", Stage::Descriptor),
];

/// One defect at one place, before it is checked and numbered.
#[derive(Clone, Debug)]
pub struct Planted {
    pub stage: Stage,
    pub operator: &'static str,
    pub function: String,
    /// Where the edit starts (orders mutants in the file).
    pub at: usize,
    pub indels: Vec<Indel>,
}

/// Every defect of `stage` in `functions` (descriptors: in the whole file's `map`).
pub fn plant(
    parsed: &Parsed,
    map: &KernelMap,
    functions: &[&Kernel],
    stage: Stage,
) -> Vec<Planted> {
    let mut out = Vec::new();
    // Device code only: a host function's call that reads as an MMA or a load by name
    // (a launcher's `gemm(...)`) is no stage of the kernel.
    let functions: Vec<&Kernel> = functions
        .iter()
        .copied()
        .filter(|k| k.role != "host")
        .collect();
    match stage {
        Stage::Mma => {
            for k in &functions {
                out.extend(mma::k_tile_dropped(parsed, k));
                out.extend(mma::mma_twice(parsed, k));
                out.extend(mma::accumulator_not_zeroed(parsed, k));
            }
        }
        Stage::Epilogue => {
            for k in &functions {
                out.extend(epilogue::scale_named(
                    parsed,
                    k,
                    "alpha",
                    "alpha-twice",
                    |t| format!("({t} * {t})"),
                ));
                out.extend(epilogue::scale_named(
                    parsed,
                    k,
                    "beta",
                    "beta-dropped",
                    |t| format!("({t} * 0)"),
                ));
                out.extend(epilogue::store_scaled(parsed, k));
                out.extend(epilogue::bias_axis(parsed, k));
                out.extend(epilogue::store_transposed(parsed, k));
            }
        }
        Stage::OperandLoad => {
            for k in &functions {
                out.extend(load::load_k_offset(parsed, k));
                out.extend(load::stage_index_off(parsed, k));
                out.extend(load::operand_stride(parsed, k));
                out.extend(load::ab_swapped(parsed, k));
            }
        }
        Stage::Descriptor => {
            for k in &map.kernels {
                out.extend(descriptor::tma_swizzle(parsed, k));
                out.extend(descriptor::tma_arrays(parsed, map, k));
            }
        }
    }
    out
}

fn sites(k: &Kernel, kind: SiteKind) -> impl Iterator<Item = &Site> {
    k.sites.iter().filter(move |s| s.kind == kind)
}

/// The smallest node at `range`'s start that is of one of `kinds`, walking up.
fn enclosing<'t>(parsed: &'t Parsed, range: &Range<usize>, kinds: &[&str]) -> Option<Node<'t>> {
    let mut node = parsed
        .tree
        .root_node()
        .descendant_for_byte_range(range.start, range.start)?;
    loop {
        if kinds.contains(&node.kind()) {
            return Some(node);
        }
        node = node.parent()?;
    }
}

fn text<'s>(parsed: &'s Parsed, node: Node<'_>) -> &'s str {
    &parsed.source[node.byte_range()]
}

fn planted(stage: Stage, operator: &'static str, k: &Kernel, indels: Vec<Indel>) -> Planted {
    Planted {
        stage,
        operator,
        function: k.name.clone(),
        at: indels.first().map_or(0, |i| i.delete.start),
        indels,
    }
}

/// The loop node of a mainloop site and, where it is a comparison, its condition.
fn loop_condition<'t>(parsed: &'t Parsed, site: &Site) -> Option<(Node<'t>, Node<'t>)> {
    let looped = enclosing(
        parsed,
        &site.range,
        &["for_statement", "while_statement", "do_statement"],
    )?;
    let mut condition = looped.child_by_field_name("condition")?;
    // `while (c)` holds a condition clause around the expression.
    while matches!(
        condition.kind(),
        "condition_clause" | "parenthesized_expression"
    ) {
        condition = condition.named_child(0)?;
    }
    (condition.kind() == "binary_expression").then_some((looped, condition))
}

/// The induction variable of a `for` loop: the name its initializer declares, or the
/// one its update steps.
fn induction<'t>(parsed: &'t Parsed, looped: Node<'t>) -> Option<&'t str> {
    if let Some(init) = looped.child_by_field_name("initializer")
        && init.kind() == "declaration"
    {
        let declarator = init.child_by_field_name("declarator")?;
        let name = declarator
            .child_by_field_name("declarator")
            .unwrap_or(declarator);
        if name.kind() == "identifier" {
            return Some(text(parsed, name));
        }
    }
    let update = looped.child_by_field_name("update")?;
    let argument = update
        .child_by_field_name("argument")
        .or_else(|| update.child_by_field_name("left"))?;
    (argument.kind() == "identifier").then(|| text(parsed, argument))
}

/// The locals of a loop body derived from its induction variable `var` (declared with
/// an initializer that names `var` or another derived local, to a fixed point), `var`
/// first.
fn k_derived<'t>(parsed: &'t Parsed, looped: Node<'t>, var: &'t str) -> Vec<&'t str> {
    let mut declarations = Vec::new();
    if let Some(body) = looped.child_by_field_name("body") {
        collect(body, "init_declarator", &mut declarations);
    }
    let mut derived = vec![var];
    loop {
        let before = derived.len();
        for d in &declarations {
            let (Some(name), Some(value)) = (
                d.child_by_field_name("declarator"),
                d.child_by_field_name("value"),
            ) else {
                continue;
            };
            let name = text(parsed, name);
            if derived.contains(&name) {
                continue;
            }
            let mut uses = Vec::new();
            identifiers(value, &parsed.source, &mut |_, t| uses.push(t.to_owned()));
            if uses.iter().any(|u| derived.contains(&u.as_str())) {
                derived.push(name);
            }
        }
        if derived.len() == before {
            return derived;
        }
    }
}

fn collect<'t>(node: Node<'t>, kind: &str, out: &mut Vec<Node<'t>>) {
    if node.kind() == kind {
        out.push(node);
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        collect(child, kind, out);
    }
}

fn identifiers<'t>(node: Node<'t>, source: &str, f: &mut impl FnMut(Node<'t>, &str)) {
    if node.kind() == "identifier" {
        f(node, &source[node.byte_range()]);
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        identifiers(child, source, f);
    }
}

/// The function definition of a kernel-like function.
fn function_node<'t>(parsed: &'t Parsed, k: &Kernel) -> Option<Node<'t>> {
    parsed
        .tree
        .root_node()
        .descendant_for_byte_range(k.range.start, k.range.end)
}

/// The loops of a kernel's mainloop sites.
fn mainloops<'t>(parsed: &'t Parsed, k: &Kernel) -> Vec<Node<'t>> {
    let mut out: Vec<Node<'t>> = Vec::new();
    for s in sites(k, SiteKind::Mainloop) {
        if let Some(looped) = enclosing(
            parsed,
            &s.range,
            &["for_statement", "while_statement", "do_statement"],
        ) && !out.iter().any(|l| l.byte_range() == looped.byte_range())
        {
            out.push(looped);
        }
    }
    out
}

/// The statement (or declaration) a site's first byte is in, inside the function.
fn site_statement<'t>(parsed: &'t Parsed, k: &Kernel, site: &Site) -> Option<Node<'t>> {
    let statement = enclosing(
        parsed,
        &site.range,
        &["expression_statement", "declaration"],
    )?;
    k.range
        .contains(&statement.start_byte())
        .then_some(statement)
}

/// A name as declared: its declaration's type, the declarator's initializer and how
/// many array dimensions it has.
#[derive(Clone)]
struct Declared<'t> {
    ty: Option<Node<'t>>,
    value: Option<Node<'t>>,
    dimensions: usize,
    /// The declarator itself (`box[2] = {..}`).
    declarator: Node<'t>,
    /// Bytes of a braced initializer (`{a, b}`), also where the grammar leaves an
    /// array's `= {..}` out of the tree (`const T box[2] = {a, b}, elem[2] = {1, 1};`).
    braces: Option<Range<usize>>,
}

const DECLARATIONS: [&str; 4] = [
    "declaration",
    "parameter_declaration",
    "optional_parameter_declaration",
    "field_declaration",
];

/// The last declaration of `name` under `scope` that starts before `before` and is
/// visible there (its block holds `before`; parameters and class fields always).
fn declared<'t>(
    parsed: &Parsed,
    scope: Node<'t>,
    name: &str,
    before: usize,
) -> Option<Declared<'t>> {
    let mut found = None;
    let mut nodes = Vec::new();
    for kind in DECLARATIONS {
        collect(scope, kind, &mut nodes);
    }
    nodes.sort_by_key(|n| n.start_byte());
    for declaration in nodes {
        if declaration.start_byte() >= before {
            continue;
        }
        let block = {
            let mut up = declaration.parent();
            while let Some(p) = up
                && !matches!(
                    p.kind(),
                    "compound_statement"
                        | "for_statement"
                        | "field_declaration_list"
                        | "parameter_list"
                        | "translation_unit"
                )
            {
                up = p.parent();
            }
            up
        };
        if let Some(b) = block
            && b.kind() == "compound_statement"
            && !b.byte_range().contains(&before)
        {
            continue;
        }
        if let Some(b) = block
            && b.kind() == "for_statement"
            && !b.byte_range().contains(&before)
        {
            continue;
        }
        let mut cursor = declaration.walk();
        for d in declaration.children_by_field_name("declarator", &mut cursor) {
            if let Some(found_here) = declarator_named(parsed, declaration, d, name) {
                found = Some(found_here);
            }
        }
    }
    found
}

fn declarator_named<'t>(
    parsed: &Parsed,
    declaration: Node<'t>,
    declarator: Node<'t>,
    name: &str,
) -> Option<Declared<'t>> {
    let value = (declarator.kind() == "init_declarator")
        .then(|| declarator.child_by_field_name("value"))
        .flatten()
        .or_else(|| declaration.child_by_field_name("default_value"));
    let mut node = declarator;
    let mut dimensions = 0;
    loop {
        match node.kind() {
            "identifier" | "field_identifier" => break,
            "array_declarator" => dimensions += 1,
            _ => {}
        }
        node = node
            .child_by_field_name("declarator")
            .or_else(|| node.named_child(0))?;
    }
    let braces = match value {
        Some(v) if v.kind() == "initializer_list" => Some(v.byte_range()),
        Some(_) => None,
        None => braced_after(&parsed.source, declarator.end_byte()),
    };
    (text(parsed, node) == name).then_some(Declared {
        ty: declaration.child_by_field_name("type"),
        value,
        dimensions,
        declarator,
        braces,
    })
}

/// The `{..}` of an `= {..}` that starts at `at`, by its text.
fn braced_after(source: &str, at: usize) -> Option<Range<usize>> {
    let rest = source.get(at..)?;
    let after_eq = rest.trim_start().strip_prefix('=')?;
    let open = at + rest.len() - after_eq.trim_start().len();
    if !source[open..].starts_with('{') {
        return None;
    }
    let mut depth = 0usize;
    for (i, c) in source[open..].char_indices() {
        match c {
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open..open + i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The elements of a braced initializer: top-level comma-separated, trimmed.
fn brace_elements(source: &str, braces: &Range<usize>) -> Vec<Range<usize>> {
    let inner = braces.start + 1..braces.end - 1;
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = inner.start;
    let push = |from: usize, to: usize, out: &mut Vec<Range<usize>>| {
        let piece = &source[from..to];
        let lead = piece.len() - piece.trim_start().len();
        let trimmed = piece.trim();
        if !trimmed.is_empty() {
            out.push(from + lead..from + lead + trimmed.len());
        }
    };
    for (i, c) in source[inner.clone()].char_indices() {
        match c {
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                push(start, inner.start + i, &mut out);
                start = inner.start + i + 1;
            }
            _ => {}
        }
    }
    push(start, inner.end, &mut out);
    out
}

/// Whether a declared type is a plain integer (`int`, `const uint32_t`).
fn integral(parsed: &Parsed, ty: Option<Node<'_>>) -> bool {
    let Some(ty) = ty else { return false };
    matches!(
        text(parsed, ty),
        "int"
            | "unsigned"
            | "unsigned int"
            | "long"
            | "long long"
            | "short"
            | "uint32_t"
            | "int32_t"
            | "int64_t"
            | "uint64_t"
            | "size_t"
            | "uint"
            | "index_t"
            | "cuuint32_t"
            | "cuuint64_t"
    )
}

/// Whether a declared type is a plain arithmetic scalar (`float`, `double`, an integer).
fn arithmetic(parsed: &Parsed, ty: Option<Node<'_>>) -> bool {
    integral(parsed, ty) || ty.is_some_and(|t| matches!(text(parsed, t), "float" | "double"))
}

/// The identifier an lvalue or a read is rooted at (`acc` of `acc[i][j]`, `accum(i)`,
/// `*p`, `&D[o]`).
fn root<'t>(node: Node<'t>) -> Option<Node<'t>> {
    match node.kind() {
        "identifier" => Some(node),
        "subscript_expression"
        | "field_expression"
        | "pointer_expression"
        | "parenthesized_expression"
        | "cast_expression" => root(
            node.child_by_field_name("argument")
                .or_else(|| node.child_by_field_name("value"))
                .or_else(|| node.named_child(node.named_child_count().saturating_sub(1)))?,
        ),
        "call_expression" => {
            let function = node.child_by_field_name("function")?;
            match function.kind() {
                "identifier" => Some(function),
                // `reinterpret_cast<T*>(&D[o])`: the argument.
                _ => root(node.child_by_field_name("arguments")?.named_child(0)?),
            }
        }
        _ => None,
    }
}

/// The names of a kernel's accumulators: what its accumulator sites declare and its
/// epilogue sites read (`C/D of the MMA at line 9: `acc``, `reads the accumulator `acc``).
fn accumulators(k: &Kernel) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in &k.sites {
        let Some(note) = s.note.as_deref() else {
            continue;
        };
        let named = match s.kind {
            SiteKind::Accumulator => note.rsplit('`').nth(1),
            SiteKind::Epilogue => note
                .split_once("accumulator `")
                .or_else(|| note.split_once("accumulator fragment `"))
                .and_then(|(_, rest)| rest.split('`').next()),
            _ => None,
        };
        if let Some(name) = named
            && !name.is_empty()
            && !out.iter().any(|o| o == name)
        {
            out.push(name.to_owned());
        }
    }
    out
}
