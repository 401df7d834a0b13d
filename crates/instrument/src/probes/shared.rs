//! Shared-memory operand probes: the tile an SS-mode MMA (wgmma, or a helper that
//! builds its descriptors) reads, probed right before the MMA statement — after the
//! stage's full barrier wait that precedes it, before the stage is released.
//!
//! A shared array (`__shared__ float As[16][16]`) is read whole by warp 0. A raw
//! shared pointer carries no extent. The extent is taken from the pointer's
//! last assignment before the MMA, `tile = ARRAY + STAGE * STRIDE + offset`: a
//! stage holds STRIDE elements, and the probe reads from the MMA's pointer to the end
//! of the current stage (at most STRIDE elements). So it never reads past the stage
//! the pointer is in, and the records say what the CTA's MMAs read in that K tile:
//! for a CTA of several consumer warpgroups, the rows of the later ones too. The probe
//! is `kwb::probe_shared_stage` (or `kwb::probe_stage`, which asks the address space,
//! where the stage array is not shared memory by declaration), handed the pointer, the
//! stage and STRIDE: the runtime clamps the extent and shares the read out among the
//! warpgroup (an SS-mode MMA is warpgroup-wide), a quarter a warp with a record each,
//! or in a screen a few 16-byte chunks a thread, all in flight together. Values are in
//! the stage's memory order (swizzled for TMA tiles): their coordinates are unknown.
//! The probes are planned first and emitted after: operands A and B of one MMA read
//! from their stages the same way become one `kwb::probe_stage_pair` call ([`emit`]).
//!
//! A CuTe descriptor view (`tCrA = thr.make_fragment_A(tCsA)`, `tCsA =
//! thr.partition_A(sA)`, the MMA reading `tCrA(_, _, k_block, read_stage)`, as in
//! CUTLASS's SM90 collectives) is read through the shared tensor itself: stage
//! `read_stage` of `sA`, indexed by CuTe, so the values come in logical order (the
//! layout's swizzle undone) with (row, k) coordinates from an identity tensor of the
//! stage's shape. Warp 0 of each warpgroup reads the whole stage, before the loop over
//! k blocks but never outside the loop that declares the stage index. That is what a
//! full-tile build (`--full-tile`) reads; every other build keeps no coordinates of a
//! shared tile's values, so there the warpgroup reads the stage's memory together
//! (`kwb::probe_tensor_stage`), as a raw stage is read: in memory order, fast.

use crate::tile::TILE;
use kwb_sites::{Kernel, SiteKind};
use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::cute;
use crate::emit::Emitter;
use crate::nodes::{
    block_statement, contains, declaration_point, identifiers, innermost_declarator, local_arrays,
    names, slot_of,
};
use crate::plan::ProbeInfo;
use crate::probes::accumulator::Counter;
use crate::probes::warpgroups::{self, Offset};

/// Probes each shared-memory operand pointer of `kernel` before the MMA statements
/// that pass it on.
pub(crate) fn probe(em: &mut Emitter<'_>, kernel: &Kernel, gate: &str, counters: &[Counter]) {
    let parsed = em.parsed;
    let root = parsed.tree.root_node();
    let mut planned: Vec<Planned> = Vec::new();
    let Some(function) = root.descendant_for_byte_range(kernel.range.start, kernel.range.end)
    else {
        return;
    };
    for site in kernel.sites.iter().filter(|s| s.kind == SiteKind::Operand) {
        let Some(note) = site.note.as_deref() else {
            continue;
        };
        if !note.ends_with("in shared memory") {
            continue;
        }
        // A CuTe descriptor view (`tCrA` of `tCsA = thr.partition_A(sA)`): the MMA
        // names the view; the values are the stage of the partitioned tensor.
        let view = note.contains("consumed through the descriptor/fragment view");
        let (Some(letter), Some(name)) = (
            note.strip_prefix("operand ").and_then(|r| r.chars().next()),
            note.split('`').nth(1),
        ) else {
            continue;
        };
        let partitioned = note.split('`').nth(3);
        // A shared array (`__shared__ float As[16][16]`) carries its extent. A local
        // array the map read as shared because its values come from shared memory
        // (`const float a_frag[4] = {a4.x, …}`) lives in registers: each lane's own.
        let declaration = root.descendant_for_byte_range(site.range.start, site.range.end);
        let array = declaration.is_some_and(|decl| declares_array(parsed, decl, name));
        let registers =
            array && declaration.is_some_and(|decl| !is_shared_declaration(parsed, decl));
        let mut done: Vec<usize> = Vec::new();
        for mma in kernel
            .sites
            .iter()
            .filter(|s| s.kind == SiteKind::Mma && names(&s.text, name))
        {
            // The operand itself, and the stage index a view is read with, must stay
            // in scope (`const float a_frag[4] = …;` declared inside the loop over k).
            let mut keep: Vec<String> = if view {
                stage_argument(&mma.text, name)
                    .map(|stage| identifiers(&stage).map(str::to_owned).collect())
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            keep.push(name.to_owned());
            let Some(mma_node) = root.descendant_for_byte_range(mma.range.start, mma.range.end)
            else {
                continue;
            };
            let Some(statement) =
                block_statement(mma_node).map(|s| outside_inner_loops(parsed, s, kernel, &keep))
            else {
                continue;
            };
            // The slot this MMA passes the operand in: what it consumes as A or B,
            // whichever tile the operand was made from (`letter`).
            let slot = slot_of(kernel, &parsed.source, mma, name).unwrap_or(letter);
            // Another MMA of the statement passes it in the other slot (`if constexpr
            // (SwapAB) gemm(mma, b, a, acc); else gemm(mma, a, b, acc);`): one probe
            // before the statement cannot say which slot runs, so each branch gets its
            // own.
            let disagrees = kernel.sites.iter().any(|other| {
                other.kind == SiteKind::Mma
                    && other.range != mma.range
                    && contains(&statement.byte_range(), &other.range)
                    && names(&other.text, name)
                    && slot_of(kernel, &parsed.source, other, name).is_some_and(|o| o != slot)
            });
            let branch = disagrees.then(|| branch_of(mma_node, statement)).flatten();
            let placed = branch.unwrap_or(statement);
            if done.contains(&placed.id()) {
                continue;
            }
            done.push(placed.id());
            // Where the probe goes, and the end of an unbraced branch it braces.
            let (at, close) = match branch {
                Some(b) if b.kind() == "compound_statement" => (b.start_byte() + 1, None),
                Some(b) => (b.start_byte(), Some(b.end_byte())),
                None => (declaration_point(parsed, statement), None),
            };
            let k_tile = counters
                .iter()
                .find(|(range, _)| contains(range, &statement.byte_range()))
                .map_or("-1".to_owned(), |(_, c)| c.clone());
            let site = SITE;
            let kind = if slot == 'A' { "OperandA" } else { "OperandB" };
            if slot != letter {
                let first = note
                    .split_once("of the MMA at line ")
                    .and_then(|(_, rest)| rest.split(':').next())
                    .map_or(String::new(), |line| format!(" of the MMA at line {line}"));
                em.note(format!(
                    "{}: `{name}` is operand {letter}{first} and operand {slot} of the MMA at line {}: each probe records it as the operand its MMA consumes",
                    kernel.name, mma.line
                ));
            }
            let (body, what) = if view {
                let Some((tile, stage)) = partitioned
                    .and_then(|p| {
                        cute::shared_source(parsed, function, p, letter, statement.start_byte())
                    })
                    .zip(stage_argument(&mma.text, name))
                else {
                    em.note(format!(
                        "{}: operand {letter} `{name}` is a CuTe view whose shared tensor or pipeline stage the code does not show (`{} = thr.partition_{letter}(sX)`, `{name}(…, stage)`); not probed before line {}",
                        kernel.name,
                        partitioned.unwrap_or("?"),
                        mma.line
                    ));
                    continue;
                };
                let axis = if slot == 'A' { "M" } else { "N" };
                if !em.full_tile {
                    // Only a full-tile build keeps every value's coordinates: any other
                    // reads the stage's memory with the warpgroup together, as a raw
                    // stage is read (warp 0 through the layout, element by element,
                    // took a one-CTA trace of CUTLASS example 48 to 42x the kernel).
                    (
                        Body::Text(format!(
                            "if (kwb::admits({k_tile})) {{ auto kwb_s = {tile}(cute::_, cute::_, {stage}); kwb::probe_tensor_stage({site}, kwb::Kind::{kind}, kwb_tag, {k_tile}, {TILE}, kwb_s); }}"
                        )),
                        format!(
                            "operand {slot}: stage `{stage}` of the shared tensor `{tile}` the MMA at line {} reads through `{name}` (memory order, the warpgroup together)",
                            mma.line
                        ),
                    )
                } else {
                    (
                        Body::Text(format!(
                            "if (kwb::admits({k_tile}) && kwb::warp_id() % 4 == 0) {{ auto kwb_s = {tile}(cute::_, cute::_, {stage}); kwb::probe_tile_fn({site}, kwb::Kind::{kind}, kwb_tag, {k_tile}, {TILE}, static_cast<int>(cute::size(kwb_s)), [&](int kwb_i) {{ return kwb_s(kwb_i); }}, kwb::all_rows, kwb::Axis::{axis}, kwb::tensor_coords<kwb::Axis::{axis}, kwb::Axis::K>(cute::make_identity_tensor(cute::make_shape(cute::size<0>(kwb_s), cute::size<1>(kwb_s))))); }}"
                        )),
                        format!(
                            "operand {slot}: stage `{stage}` of the shared tensor `{tile}` the MMA at line {} reads through `{name}` (logical order with (row, k) coordinates, warp 0 of each warpgroup)",
                            mma.line
                        ),
                    )
                }
            } else if registers {
                (
                    Body::Text(format!(
                        "kwb::probe({site}, kwb::Kind::{kind}, kwb_tag, {k_tile}, {TILE}, {name});"
                    )),
                    format!(
                        "operand {slot}: the register array `{name}` (loaded from shared memory) the MMA at line {} reads, each lane's",
                        mma.line
                    ),
                )
            } else if array {
                let element = format!("std::remove_all_extents_t<decltype({name})>");
                (
                    Body::Text(format!(
                        "if (kwb::admits({k_tile}) && kwb::warp_id() == 0) {{ kwb::probe_tile({site}, kwb::Kind::{kind}, kwb_tag, {k_tile}, {TILE}, reinterpret_cast<const {element}*>(&{name}), static_cast<int>(sizeof({name}) / sizeof({element}))); }}"
                    )),
                    format!(
                        "operand {slot}: the shared array `{name}` the MMA at line {} reads (whole array, memory order, warp 0)",
                        mma.line
                    ),
                )
            } else if let Some(coords) = cute_partition(
                parsed,
                function,
                declaration,
                name,
                letter,
                statement.start_byte(),
            ) {
                // Each thread's partition of the shared tile (`tCsA =
                // local_partition(sA, tC, threadIdx.x, …)`, `thr_mma.partition_A(sA)`):
                // the values the thread's MMA reads, through the tensor, with their
                // (row, k) coordinates where the partition shows them.
                (
                    Body::Text(format!(
                        "kwb::probe({site}, kwb::Kind::{kind}, kwb_tag, {k_tile}, {TILE}, {name}{coords});"
                    )),
                    format!(
                        "operand {slot}: `{name}`, each thread's partition of a shared tile, as the MMA at line {} reads it{}",
                        mma.line,
                        if coords.is_empty() {
                            ""
                        } else {
                            " (with coordinates)"
                        }
                    ),
                )
            } else {
                let Some(stage) = last_assignment(parsed, function, name, statement.start_byte())
                    .and_then(|value| stage_of(parsed, value))
                else {
                    em.note(format!(
                        "{}: operand {letter} `{name}` is a shared pointer whose stage extent the code does not show (`{name} = ARRAY + STAGE * STRIDE`); not probed before line {}",
                        kernel.name, mma.line
                    ));
                    continue;
                };
                let Stage {
                    ref array,
                    ref index,
                    ref stride,
                    ..
                } = stage;
                // The tile lies in the stage (the extent is clamped to it), so it is in
                // shared memory when the stage array is by declaration; otherwise the
                // probe asks the address space at run time (probe_stage).
                let read = if declared_shared(parsed, root, function, array, 8) {
                    "probe_shared_stage"
                } else {
                    "probe_stage"
                };
                let at = statement.start_byte();
                let own = warpgroups::offset_of(parsed, function, &stage.offset, at);
                let partner = partner_stage(parsed, function, kernel, letter, mma, at);
                let (part, share) = match (&own, &partner) {
                    (Offset::PerThread(expr), _) => (
                        Some(format!("kwb::own_part({})", warpgroups::lambda(expr))),
                        format!(
                            ", the warpgroup's own rows: its offset `{}` is set per warpgroup",
                            offset_text(parsed, &stage)
                        ),
                    ),
                    (Offset::Uniform, Some((other, Offset::PerThread(expr), other_stride))) => {
                        em.note(format!(
                            "{}: operand {letter} `{name}` is the same for every warpgroup while `{other}`'s offset in its stage is set per warpgroup: each consumer warpgroup (by `{other}`'s offsets) reads one part of it before each MMA, so a consumer that skips an MMA while the others run it leaves its part unread",
                            kernel.name
                        ));
                        (
                            Some(format!(
                                "kwb::split_part({}, ({other_stride}))",
                                warpgroups::lambda(expr)
                            )),
                            format!(
                                ", one part a consumer warpgroup, the consumers as `{other}`'s offsets say"
                            ),
                        )
                    }
                    _ => (None, String::new()),
                };
                (
                    Body::Stage(StageRead {
                        read,
                        k_tile: k_tile.clone(),
                        tile: name.to_owned(),
                        stage: format!("({array}) + ({index}) * ({stride})"),
                        stride: format!("({stride})"),
                        part,
                    }),
                    format!(
                        "operand {slot}: the shared tile `{name}` the MMA at line {} reads (stage of {stride} elements, memory order{share})",
                        mma.line
                    ),
                )
            };
            planned.push(Planned {
                at,
                close,
                letter: slot,
                kind,
                body,
                what,
                line: placed.start_position().row + 1,
                text: mma.text.clone(),
            });
        }
    }
    emit(em, kernel, gate, planned);
}

/// Opens the braces around an unbraced branch a probe is placed in.
fn open_branch(em: &mut Emitter<'_>, p: &Planned) {
    if p.close.is_some() {
        em.insert(p.at, "{ ");
    }
}

/// Closes the braces [`open_branch`] opened, after the branch's statement.
fn close_branch(em: &mut Emitter<'_>, p: &Planned) {
    if let Some(end) = p.close {
        em.insert(end, " }");
    }
}

/// The branch of an `if` inside `statement` that holds `mma`, where a probe for this
/// MMA alone goes: the innermost branch outside every loop that `statement` holds
/// around the MMA (a probe inside the loop over k blocks would read the stage at
/// each block). `None` when no branch lies between them.
fn branch_of<'t>(mma: Node<'t>, statement: Node<'t>) -> Option<Node<'t>> {
    let mut ancestors = Vec::new();
    let mut node = mma;
    while node.id() != statement.id() {
        ancestors.push(node);
        node = node.parent()?;
    }
    let outermost_loop = ancestors.iter().rposition(|n| {
        matches!(
            n.kind(),
            "for_statement" | "while_statement" | "do_statement" | "for_range_loop"
        )
    });
    let above = outermost_loop.map_or(0, |i| i + 1);
    ancestors[above..].iter().copied().find(|n| {
        n.parent().is_some_and(|p| {
            (p.kind() == "if_statement"
                && ["consequence", "alternative"]
                    .iter()
                    .any(|f| p.child_by_field_name(f).is_some_and(|c| c.id() == n.id())))
                || (p.kind() == "else_clause" && n.kind() != "else")
        })
    })
}

/// Stands for a probe's site argument in a planned body until its id is known.
const SITE: &str = "\u{1}site\u{1}";

/// A probe planned before the MMA statement at `at`, its id given when it is emitted.
struct Planned {
    at: usize,
    /// The end of the unbraced branch the probe is placed in, which the probe braces
    /// together with it; `None` where it goes before a statement of a block.
    close: Option<usize>,
    letter: char,
    kind: &'static str,
    body: Body,
    what: String,
    line: usize,
    text: String,
}

/// What a planned probe does: a body of its own ([`SITE`] where its site goes), or a
/// stage tile's read, which two operands of one MMA share one call for.
/// The trailing arguments of a probe of `name` read as a CuTe tensor (its coordinates,
/// or none), when it is one: declared as a `Tensor`, or initialized by a partition
/// `cute::coords` follows. `None` for a pointer or anything else.
fn cute_partition(
    parsed: &Parsed,
    function: Node<'_>,
    declaration: Option<Node<'_>>,
    name: &str,
    letter: char,
    at: usize,
) -> Option<String> {
    if let Some(c) = cute::coords(parsed, function, name, at, letter) {
        return Some(format!(", kwb::all_rows, kwb::Axis::M, {c}"));
    }
    let decl = declaration?;
    let declaration = std::iter::successors(Some(decl), |n| n.parent())
        .take(4)
        .find(|n| n.kind() == "declaration")?;
    let ty = declaration.child_by_field_name("type")?;
    let ty = parsed.masked[ty.byte_range()].trim();
    matches!(ty, "Tensor" | "cute::Tensor").then(String::new)
}

enum Body {
    Text(String),
    Stage(StageRead),
}

impl Planned {
    /// The stage tile it reads, if it is a stage read.
    fn stage(&self) -> Option<&StageRead> {
        match &self.body {
            Body::Stage(read) => Some(read),
            Body::Text(_) => None,
        }
    }
}

/// `kwb::probe_stage` / `kwb::probe_shared_stage` of `tile` in its stage.
struct StageRead {
    /// `probe_stage` or `probe_shared_stage`.
    read: &'static str,
    k_tile: String,
    tile: String,
    stage: String,
    stride: String,
    /// `kwb::own_part(…)`, `kwb::split_part(…)`, or none (the whole stage).
    part: Option<String>,
}

impl StageRead {
    /// Whether one call can read both: the same way (both known to be shared memory,
    /// or both asking) and under the same K-tile filter.
    fn pairs_with(&self, other: &StageRead) -> bool {
        self.read == other.read && self.k_tile == other.k_tile
    }
}

/// Emits `planned` in order. Operands A and B read from their stages before the same
/// statement, the same way and under the same K-tile filter, become one
/// `kwb::probe_stage_pair` call (ids consecutive, A's first): in a screen the filter,
/// the thread's index and both parts are worked out once, which a screen of every CTA
/// pays for at every K tile of every consumer; any other build's runtime reads the two
/// as two calls.
fn emit(em: &mut Emitter<'_>, kernel: &Kernel, gate: &str, planned: Vec<Planned>) {
    let info = |id: u32, p: &Planned| ProbeInfo {
        id,
        kernel: kernel.name.clone(),
        what: p.what.clone(),
        line: p.line,
        text: p.text.clone(),
    };
    let mut done = vec![false; planned.len()];
    for i in 0..planned.len() {
        if done[i] {
            continue;
        }
        done[i] = true;
        let p = &planned[i];
        let partner = p.stage().and_then(|read| {
            (i + 1..planned.len()).find(|&j| {
                let q = &planned[j];
                !done[j]
                    && q.at == p.at
                    && q.letter != p.letter
                    && q.stage().is_some_and(|other| read.pairs_with(other))
            })
        });
        let pair = partner.map(|j| {
            if p.letter == 'A' {
                (p, &planned[j], j)
            } else {
                (&planned[j], p, j)
            }
        });
        if let Some((a, b, j)) = pair
            && let (Some(ra), Some(rb)) = (a.stage(), b.stage())
        {
            done[j] = true;
            let id = em.next_id();
            let site_a = em.site(id, a.kind);
            let site_b = em.site(id + 1, b.kind);
            let whole = || "kwb::WholeStage{}".to_owned();
            let body = format!(
                "if (kwb::admits({k_tile})) {{ kwb::{read}_pair({site_a}, {site_b}, kwb_tag, {k_tile}, {TILE}, {}, {}, {}, {}, {}, {}, {}, {}); }}",
                ra.tile,
                ra.stage,
                ra.stride,
                ra.part.clone().unwrap_or_else(whole),
                rb.tile,
                rb.stage,
                rb.stride,
                rb.part.clone().unwrap_or_else(whole),
                k_tile = ra.k_tile,
                read = ra.read,
            );
            open_branch(em, a);
            em.probe_pair(a.at, gate, &body, [info(id, a), info(id + 1, b)]);
            close_branch(em, a);
            continue;
        }
        let id = em.next_id();
        let site = em.site(id, p.kind);
        let body = match &p.body {
            Body::Text(text) => text.replace(SITE, &site),
            Body::Stage(r) => format!(
                "if (kwb::admits({k_tile})) {{ kwb::{read}({site}, kwb::Kind::{kind}, kwb_tag, {k_tile}, {TILE}, {}, {}, {}{}); }}",
                r.tile,
                r.stage,
                r.stride,
                r.part
                    .as_ref()
                    .map(|part| format!(", {part}"))
                    .unwrap_or_default(),
                k_tile = r.k_tile,
                read = r.read,
                kind = p.kind,
            ),
        };
        open_branch(em, p);
        em.probe(p.at, gate, &body, info(id, p));
        close_branch(em, p);
    }
}

/// The last argument of the call `name(…)` in `text` (`tCrA(_,_,k_block,read_stage)`
/// → `read_stage`): the pipeline stage a CuTe view is indexed with. None when it is
/// `_` or the call has fewer than four arguments.
fn stage_argument(text: &str, name: &str) -> Option<String> {
    let mut from = 0;
    while let Some(at) = text[from..].find(name).map(|i| i + from) {
        from = at + name.len();
        let before_ok = text[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let rest = &text[from..];
        if !before_ok || !rest.starts_with('(') {
            continue;
        }
        let mut depth = 0;
        let mut args = vec![String::new()];
        for c in rest[1..].chars() {
            match c {
                '(' | '[' | '{' | '<' => depth += 1,
                ')' if depth == 0 => {
                    let last = args.last()?.trim().to_owned();
                    return (args.len() >= 4 && last != "_" && !last.is_empty()).then_some(last);
                }
                ')' | ']' | '}' | '>' => depth -= 1,
                ',' if depth == 0 => {
                    args.push(String::new());
                    continue;
                }
                _ => {}
            }
            args.last_mut()?.push(c);
        }
        return None;
    }
    None
}

/// Whether a declaration directly in `block` (a block, or a loop's head) declares one
/// of `names`.
fn declares_any(parsed: &Parsed, block: Node<'_>, names: &[String]) -> bool {
    let mut cursor = block.walk();
    block
        .named_children(&mut cursor)
        .filter(|c| c.kind() == "declaration")
        .any(|decl| {
            let mut inner = decl.walk();
            decl.children_by_field_name("declarator", &mut inner)
                .any(|d| {
                    let name = &parsed.masked[innermost_declarator(d).byte_range()];
                    names.iter().any(|n| n == name)
                })
        })
}

/// Whether `decl` declares `name` as an array.
fn declares_array(parsed: &Parsed, decl: Node<'_>, name: &str) -> bool {
    local_arrays(parsed, decl).iter().any(|a| a == name)
}

/// The statement to probe before: `statement`, or the loop around it that steps
/// through the stage (`for (kk …) wgmma(…)`), climbing out of loops up to the K-tile
/// mainloop's body or the function's: the whole stage is read once per K tile. It
/// never climbs out of a loop whose body declares one of `keep` (the stage index the
/// probe reads with).
fn outside_inner_loops<'t>(
    parsed: &Parsed,
    statement: Node<'t>,
    kernel: &Kernel,
    keep: &[String],
) -> Node<'t> {
    let mainloops: Vec<&std::ops::Range<usize>> = kernel
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Mainloop)
        .map(|s| &s.range)
        .collect();
    let mut current = statement;
    while let Some(block) = current
        .parent()
        .filter(|p| p.kind() == "compound_statement")
    {
        let Some(owner) = block.parent() else {
            break;
        };
        let is_loop = matches!(
            owner.kind(),
            "for_statement" | "while_statement" | "do_statement" | "for_range_loop"
        );
        let is_mainloop = mainloops.iter().any(|r| {
            r.start <= owner.start_byte()
                && owner.end_byte() <= r.end
                && r.start == owner.start_byte()
        });
        // Not out of a loop that declares the stage index, in its body or its head
        // (`for (int stage = …)`, `for (auto stage : …)`).
        let head_declares = declares_any(parsed, owner, keep)
            || owner.kind() == "for_range_loop"
                && owner.child_by_field_name("declarator").is_some_and(|d| {
                    keep.iter()
                        .any(|n| n == &parsed.masked[innermost_declarator(d).byte_range()])
                });
        if !is_loop || is_mainloop || declares_any(parsed, block, keep) || head_declares {
            break;
        }
        match block_statement(owner) {
            Some(s) => current = s,
            None => break,
        }
    }
    current
}

/// The operands of a chain of one binary operator (`a + b * c + d` over `+`: `a`,
/// `b * c`, `d`), left to right; `node` alone when it is not such a chain.
fn operands_of<'t>(node: Node<'t>, operator: &str) -> Option<Vec<Node<'t>>> {
    let mut out = Vec::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        let chained = n.kind() == "binary_expression"
            && n.child_by_field_name("operator")
                .is_some_and(|o| o.kind() == operator);
        if chained {
            stack.push(n.child_by_field_name("right")?);
            stack.push(n.child_by_field_name("left")?);
        } else {
            out.push(n);
        }
    }
    Some(out)
}

/// Whether `name` is shared memory by declaration, as `kwb::probe_shared_stage` needs
/// (it reads without asking the address space): an array declared `__shared__` in
/// `function` or at file scope, or a local (a `__shared__` pointer among them) of `function` whose every value (its initializer and each
/// assignment) is, casts and parentheses taken off, such a name, its address (`&X[i]`),
/// or one of them in an address computation (`X + offset`, `(X + 1023) & ~1023`).
/// Anything else (a parameter, a conditional, a call) is not, nor is a chain deeper
/// than `depth`. The kernel map's own reading of shared memory is looser (a name with
/// `smem` in it): good for a note, not for a read that cannot be checked.
fn declared_shared(
    parsed: &Parsed,
    root: Node<'_>,
    function: Node<'_>,
    name: &str,
    depth: u32,
) -> bool {
    if depth == 0 {
        return false;
    }
    let mut values = Vec::new();
    let mut declared = false;
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        let in_function = contains(&function.byte_range(), &n.byte_range());
        let at_file_scope = n.parent().is_some_and(|p| p.kind() == "translation_unit");
        if n.kind() == "declaration" && (in_function || at_file_scope) {
            let mut cursor = n.walk();
            for d in n.children_by_field_name("declarator", &mut cursor) {
                if &parsed.masked[innermost_declarator(d).byte_range()] != name {
                    continue;
                }
                declared = true;
                // A `__shared__` array is shared memory; a `__shared__` pointer only
                // lives there, and is judged by its values like any other.
                if is_shared_declaration(parsed, n) && declares_array_of(d) {
                    return true;
                }
                if d.kind() == "init_declarator" {
                    values.extend(d.child_by_field_name("value"));
                } else {
                    // Declared with no value, and not `__shared__`.
                    return false;
                }
            }
        }
        if n.kind() == "assignment_expression" && in_function {
            let left = n.child_by_field_name("left");
            if left.is_some_and(|l| &parsed.masked[l.byte_range()] == name) {
                values.extend(n.child_by_field_name("right"));
            }
        }
        // Only the function's own nodes and the declarations at file scope count.
        if in_function || contains(&n.byte_range(), &function.byte_range()) {
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
    }
    declared
        && !values.is_empty()
        && values
            .iter()
            .all(|v| shared_value(parsed, root, function, *v, depth - 1))
}

/// Whether the declarator `d` (`smem_raw[]`, `As[16][16] = …`) declares an array, not a
/// pointer (`*p`) or a scalar.
fn declares_array_of(d: Node<'_>) -> bool {
    let mut d = d;
    loop {
        match d.kind() {
            "array_declarator" => return true,
            "init_declarator" | "parenthesized_declarator" | "attributed_declarator" => {
                match d
                    .child_by_field_name("declarator")
                    .or_else(|| d.named_child(0))
                {
                    Some(inner) => d = inner,
                    None => return false,
                }
            }
            _ => return false,
        }
    }
}

/// Whether a `__shared__` blank (the pre-pass masks the keyword) leads `declaration`
/// or sits inside it (`extern __shared__ unsigned char smem[]`).
fn is_shared_declaration(parsed: &Parsed, declaration: Node<'_>) -> bool {
    let inside = parsed
        .blanks
        .iter()
        .filter(|b| contains(&declaration.byte_range(), &b.range));
    parsed
        .leading_blanks(declaration.start_byte())
        .iter()
        .chain(inside)
        .any(|b| matches!(&b.kind, kwb_syntax::BlankKind::Macro(m) if m == "__shared__"))
}

/// Whether the expression `value` is an address in shared memory by
/// [`declared_shared`]'s rules.
fn shared_value(
    parsed: &Parsed,
    root: Node<'_>,
    function: Node<'_>,
    value: Node<'_>,
    depth: u32,
) -> bool {
    let recurse = |n: Node<'_>| shared_value(parsed, root, function, n, depth);
    match value.kind() {
        "identifier" => declared_shared(
            parsed,
            root,
            function,
            &parsed.masked[value.byte_range()],
            depth,
        ),
        "parenthesized_expression" => value.named_child(0).is_some_and(recurse),
        // `(T*)x`
        "cast_expression" => value.child_by_field_name("value").is_some_and(recurse),
        // `reinterpret_cast<T*>(x)`, `static_cast<…>(x)`
        "call_expression" => {
            let cast = value.child_by_field_name("function").is_some_and(|f| {
                f.kind() == "template_function"
                    && f.child_by_field_name("name").is_some_and(|n| {
                        matches!(
                            &parsed.masked[n.byte_range()],
                            "reinterpret_cast" | "static_cast" | "const_cast"
                        )
                    })
            });
            let arguments = value.child_by_field_name("arguments");
            cast && arguments.is_some_and(|a| {
                a.named_child_count() == 1 && a.named_child(0).is_some_and(recurse)
            })
        }
        // `&x[i]`
        "pointer_expression" => {
            value
                .child_by_field_name("operator")
                .is_some_and(|o| o.kind() == "&")
                && value.child_by_field_name("argument").is_some_and(|a| {
                    a.kind() == "subscript_expression"
                        && a.child_by_field_name("argument").is_some_and(recurse)
                })
        }
        // `x + offset`, `offset + x`, `x - offset`, `(x + 1023) & ~1023`
        "binary_expression" => {
            let operator = value
                .child_by_field_name("operator")
                .map(|o| o.kind())
                .unwrap_or_default();
            let left = value.child_by_field_name("left");
            let right = value.child_by_field_name("right");
            match operator {
                "+" => left.is_some_and(recurse) || right.is_some_and(recurse),
                "-" | "&" => left.is_some_and(recurse),
                _ => false,
            }
        }
        _ => false,
    }
}

/// The offset terms of a stage pointer's value (`sA + stage * S + row_base * BK` →
/// `row_base * BK`): every term but the array and the stage's.
#[cfg(test)]
pub(crate) fn offset_terms<'t>(parsed: &Parsed, value: Node<'t>) -> Vec<Node<'t>> {
    stage_of(parsed, value)
        .map(|s| s.offset)
        .unwrap_or_default()
}

/// `ARRAY + INDEX * STRIDE + OFFSET…`: where a stage starts, how many elements it
/// holds, and the terms that place the pointer in it.
struct Stage<'t> {
    array: String,
    index: String,
    stride: String,
    offset: Vec<Node<'t>>,
}

/// The offset terms of `stage` as written (`row_base * BK`), for the probe's note.
fn offset_text(parsed: &Parsed, stage: &Stage<'_>) -> String {
    stage
        .offset
        .iter()
        .map(|t| parsed.masked[t.byte_range()].trim())
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The other operand the MMA statement `mma` passes from a stage (operand B's for
/// `letter` A): its pointer's name, its offset in the stage ([`warpgroups::offset_of`])
/// and the stage's STRIDE. None when the MMA names no such pointer.
fn partner_stage(
    parsed: &Parsed,
    function: Node<'_>,
    kernel: &Kernel,
    letter: char,
    mma: &kwb_sites::Site,
    before: usize,
) -> Option<(String, Offset, String)> {
    kernel
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Operand)
        .filter_map(|s| s.note.as_deref())
        .filter(|note| {
            note.ends_with("in shared memory") && !note.contains("descriptor/fragment view")
        })
        .filter(|note| {
            note.strip_prefix("operand ")
                .and_then(|r| r.chars().next())
                .is_some_and(|other| other != letter)
        })
        .filter_map(|note| note.split('`').nth(1))
        .filter(|other| names(&mma.text, other))
        .find_map(|other| {
            let stage = last_assignment(parsed, function, other, before)
                .and_then(|value| stage_of(parsed, value))?;
            let offset = warpgroups::offset_of(parsed, function, &stage.offset, before);
            Some((other.to_owned(), offset, stage.stride))
        })
}

/// The value last assigned to `name` before byte `before` in `function` (its
/// initializer or an assignment), by position.
fn last_assignment<'t>(
    parsed: &Parsed,
    function: Node<'t>,
    name: &str,
    before: usize,
) -> Option<Node<'t>> {
    let mut best: Option<Node<'t>> = None;
    let mut stack = vec![function];
    while let Some(n) = stack.pop() {
        if n.start_byte() >= before {
            continue;
        }
        let value = match n.kind() {
            "assignment_expression" => n
                .child_by_field_name("left")
                .filter(|l| l.kind() == "identifier" && &parsed.masked[l.byte_range()] == name)
                .and_then(|_| n.child_by_field_name("right")),
            "init_declarator" => n
                .child_by_field_name("declarator")
                .filter(|d| &parsed.masked[innermost_declarator(*d).byte_range()] == name)
                .and_then(|_| n.child_by_field_name("value")),
            _ => None,
        };
        if let Some(v) = value
            && v.end_byte() <= before
            && best.is_none_or(|b| b.start_byte() < v.start_byte())
        {
            best = Some(v);
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    best
}

/// Reads `ARRAY + INDEX * STRIDE (+ …)`, INDEX a stage-like name (`stage`, `pipe`,
/// `slot`, `read_stage`, …).
fn stage_of<'t>(parsed: &Parsed, value: Node<'t>) -> Option<Stage<'t>> {
    let terms = operands_of(value, "+")?;
    let array = terms.first().filter(|t| t.kind() == "identifier")?;
    for (at, term) in terms.iter().enumerate().skip(1) {
        let text = &parsed.masked[term.byte_range()];
        let mut factors: Vec<String> = operands_of(*term, "*")?
            .iter()
            .map(|n| parsed.masked[n.byte_range()].trim().to_owned())
            .collect();
        let index = factors.iter().position(|f| {
            identifiers(f).count() == 1
                && ["stage", "pipe", "slot"]
                    .iter()
                    .any(|w| f.to_ascii_lowercase().contains(w))
        });
        if let Some(i) = index
            && factors.len() > 1
            && text.contains('*')
        {
            let index = factors.remove(i);
            let offset = terms[1..]
                .iter()
                .enumerate()
                .filter(|(j, _)| j + 1 != at)
                .map(|(_, t)| *t)
                .collect();
            return Some(Stage {
                array: parsed.masked[array.byte_range()].to_owned(),
                index,
                stride: factors.join(" * "),
                offset,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::stage_argument;

    #[test]
    fn the_stage_is_the_last_argument_of_the_view_call() {
        let text = "cute::gemm(tiled_mma, tCrA(_,_,k_block,read_stage), tCrB(_,_,k_block,read_stage), accum);";
        assert_eq!(stage_argument(text, "tCrA").as_deref(), Some("read_stage"));
        assert_eq!(
            stage_argument(
                "gemm(mma, xtCrA(_,_,_,s), tCrA(_, _, _, pipe.index()), acc)",
                "tCrA"
            )
            .as_deref(),
            Some("pipe.index()")
        );
        // No stage mode, or a stage left open: nothing to index with.
        assert_eq!(
            stage_argument("gemm(mma, tCrA(_,_,k), tCrB, acc)", "tCrA"),
            None
        );
        assert_eq!(
            stage_argument("gemm(mma, tCrA(_,_,_,_), tCrB, acc)", "tCrA"),
            None
        );
        assert_eq!(stage_argument("gemm(mma, tCrA, tCrB, acc)", "tCrA"), None);
    }
}
