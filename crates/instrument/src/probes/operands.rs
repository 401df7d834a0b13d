//! Register operand probes: each fragment right before the MMA statement that
//! consumes it — the values exactly as the MMA reads them. Fragments that live in a
//! device helper the kernel calls (`mma_k_tile(acc, sA, sB, …)` holding the
//! `ldmatrix` results) are probed inside that helper. Where packed A and B fragments
//! are probed at the same point, one `kwb::probe_as_pair` call probes both, with one
//! record claim for the two.

use crate::tile::TILE;
use kwb_sites::{Kernel, KernelMap, SiteKind};

use crate::cute;
use crate::emit::Emitter;
use crate::fragments::{self, Role, called, is_called};
use crate::nodes::{
    block_statement, contains, declaration_point, enclosing_function, is_integer_scalar, names,
    slot_of,
};
use crate::plan::{ProbeInfo, gate_reaches};
use crate::probes::accumulator::Counter;

/// Scalar multiply-accumulates (SIMT MMA sites) whose operands one function probes.
const SCALAR_PROBES: usize = 16;

/// Whether an MMA site is a scalar multiply-accumulate (`acc += a * b`).
fn is_scalar(mma: &kwb_sites::Site) -> bool {
    mma.note.as_deref() == Some("scalar multiply-accumulate")
}

/// Probes the register operands of `kernel` and of the helpers it calls to issue
/// its MMAs (each helper once per plan, tracked in `done`).
pub(crate) fn probe(
    em: &mut Emitter<'_>,
    map: &KernelMap,
    kernel: &Kernel,
    gate: Option<&str>,
    rows: Option<&str>,
    counters: &[Counter],
    done: &mut Vec<usize>,
) {
    in_function(em, kernel, gate.unwrap_or("true"), rows, counters);
    let mut pending: Vec<&Kernel> = helpers(map, kernel);
    let direct: Vec<usize> = pending.iter().map(|h| h.range.start).collect();
    while let Some(helper) = pending.pop() {
        if done.contains(&helper.range.start) {
            continue;
        }
        done.push(helper.range.start);
        let helper_gate = match gate {
            None => "true",
            Some(g) if gate_reaches(g, helper) => g,
            Some(g) => {
                if has_register_operands(helper) {
                    em.note(format!(
                        "{}: operand fragments live in the helper `{}`, where the gate `{g}` cannot be evaluated (it names none of its template parameters); not probed there",
                        kernel.name, helper.name
                    ));
                }
                continue;
            }
        };
        in_function(em, helper, helper_gate, rows, &[]);
        if direct.contains(&helper.range.start) {
            // The kernel's statements that call this helper for their MMA.
            let calls: Vec<std::ops::Range<usize>> = kernel
                .sites
                .iter()
                .filter(|s| s.kind == SiteKind::Mma)
                .filter(|s| {
                    s.note
                        .as_deref()
                        .and_then(called)
                        .is_some_and(|call| is_called(helper, &call))
                })
                .map(|s| s.range.clone())
                .collect();
            em.thread_folds(
                kernel.range.clone(),
                helper.range.clone(),
                &calls,
                &helper.name,
            );
        }
        pending.extend(helpers(map, helper));
    }
}

/// The functions of the map that `function`'s MMA sites call to issue the MMA.
fn helpers<'m>(map: &'m KernelMap, function: &Kernel) -> Vec<&'m Kernel> {
    function
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Mma)
        .filter_map(|s| called(s.note.as_deref()?))
        .filter_map(|call| map.kernels.iter().find(|k| is_called(k, &call)))
        .collect()
}

fn has_register_operands(function: &Kernel) -> bool {
    function.sites.iter().any(|s| {
        s.kind == SiteKind::Operand
            && s.note
                .as_deref()
                .is_some_and(|n| n.contains("values in registers"))
    })
}

/// Probes each register operand of `function` before the first MMA statement of each
/// block that consumes it. Packed integer fragments (`uint32_t a[4]` feeding a bf16
/// `mma.sync`) are read as the MMA's input type.
fn in_function(
    em: &mut Emitter<'_>,
    function: &Kernel,
    gate: &str,
    rows: Option<&str>,
    counters: &[Counter],
) {
    let parsed = em.parsed;
    let root = parsed.tree.root_node();
    let mut operands = Vec::new();
    let (mut scalar_probes, mut skipped) = (0, 0);
    // The statements already probed for a slot an MMA takes register by register
    // (`mma(acc, af, b0, b1)`): one probe reads all of them.
    let mut gathered: Vec<(usize, Vec<String>)> = Vec::new();
    for site in function
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Operand)
    {
        let Some(note) = site.note.as_deref() else {
            continue;
        };
        if let Some((letter, mma_line, name)) = parse_member_note(note) {
            member_operands(
                em,
                function,
                (letter, mma_line, &name),
                counters,
                &mut operands,
            );
            continue;
        }
        if !note.contains("values in registers") {
            continue;
        }
        let Some((letter, mma_line, name)) = parse_operand_note(note) else {
            continue;
        };
        let Some(decl) = root.descendant_for_byte_range(site.range.start, site.range.end) else {
            continue;
        };
        // A 32-bit word an MMA takes as one register of a slot (`uint32_t b0` of
        // `mma16816(acc, af, b0, b1)`) is read with the slot's other registers.
        let register_word = is_register_word(parsed, decl, &name);
        if is_integer_scalar(parsed, decl) && !register_word {
            em.note(format!(
                "{}: `{name}` is an integer scalar, not an MMA operand; not probed",
                function.name
            ));
            continue;
        }
        let packed = decl.child_by_field_name("type").is_some_and(|t| {
            let ty = &parsed.masked[t.byte_range()];
            ["uint32_t", "unsigned", "uint", "int"]
                .iter()
                .any(|w| ty.split_whitespace().any(|x| x == *w))
        });
        // The fragments' layout and input type: the PTX this operand's MMA issues (a
        // function may issue more than one shape), else the function's, else the file's.
        let layout = em.layouts.at(&function.name, mma_line);
        let input = mma_input_type(
            em.layouts
                .ptx_for(&function.name, mma_line)
                .unwrap_or(&parsed.source),
        );
        // Coordinates only where the values are the MMA's inputs packed in 32-bit words.
        let parts = if packed {
            fragments::probe_parts(
                layout,
                if letter == 'A' { Role::A } else { Role::B },
                rows,
                em.tile_dims.of(&name),
            )
        } else {
            None
        };
        // Before the first MMA statement of each block that names the operand: every
        // path that issues an MMA on it (a defect switch may hold one of them).
        let mut blocks_done: Vec<usize> = Vec::new();
        for mma in function
            .sites
            .iter()
            .filter(|s| s.kind == SiteKind::Mma && (s.line == mma_line || names(&s.text, &name)))
        {
            let Some(mma_node) = root.descendant_for_byte_range(mma.range.start, mma.range.end)
            else {
                continue;
            };
            let Some(statement) = block_statement(mma_node) else {
                continue;
            };
            let block = statement.parent().map_or(0, |b| b.id());
            if blocks_done.contains(&block) {
                continue;
            }
            // The slot's registers, where the MMA takes this word as one of them.
            let registers = if register_word {
                let slot = slot_of(function, &parsed.source, mma, &name).unwrap_or(letter);
                match slot_registers(function, &parsed.source, mma, slot) {
                    Some(regs) if regs.contains(&name) => {
                        let key = (statement.id(), regs.clone());
                        if gathered.contains(&key) {
                            // Read already, with the slot's other registers.
                            blocks_done.push(block);
                            continue;
                        }
                        gathered.push(key);
                        Some(regs)
                    }
                    _ => {
                        em.note(format!(
                            "{}: `{name}` is an integer scalar the MMA at line {} does not take as a register of its fragments; not probed there",
                            function.name, mma.line
                        ));
                        continue;
                    }
                }
            } else {
                None
            };
            // The fragment must be in scope where the probe goes.
            let in_scope = decl.end_byte() <= statement.start_byte()
                && decl
                    .parent()
                    .is_some_and(|b| contains(&b.byte_range(), &statement.byte_range()));
            if !in_scope {
                em.note(format!(
                    "{}: operand `{name}` is not in scope before the MMA at line {}; not probed there",
                    function.name, mma.line
                ));
                continue;
            }
            // A hand-unrolled SIMT loop holds hundreds of multiply-accumulates: the
            // first few of a function are read (each one's operands are values of the
            // same tiles), not every one, whose probes would multiply the compile.
            if is_scalar(mma) {
                if scalar_probes == SCALAR_PROBES {
                    skipped += 1;
                    continue;
                }
                scalar_probes += 1;
            }
            blocks_done.push(block);
            // What this MMA consumes the fragment as (its slot), whichever operand the
            // map first found it as: the record's kind and a packed fragment's layout.
            let slot = slot_of(function, &parsed.source, mma, &name).unwrap_or(letter);
            // Gathered registers are one MMA tile's fragment: its layout places them
            // at that tile's local (row, k), so the full trace cuts them into runs
            // along K (which rows they hold, the values say; the model counts each
            // row against the records that hold it, as `j` and `j + 1`'s do apart).
            let parts = if registers.is_some() {
                fragments::probe_parts(
                    layout,
                    if slot == 'A' { Role::A } else { Role::B },
                    rows,
                    fragments::Dims::default(),
                )
            } else if slot == letter || !packed {
                parts.clone()
            } else {
                fragments::probe_parts(
                    layout,
                    if slot == 'A' { Role::A } else { Role::B },
                    rows,
                    em.tile_dims.of(&name),
                )
            };
            let k_tile = counters
                .iter()
                .find(|(range, _)| contains(range, &statement.byte_range()))
                .map_or("-1".to_owned(), |(_, c)| c.clone());
            // A CuTe fragment the MMA reads a slice of (`tCrA(_, _, k_block)`): that
            // slice, not the whole fragment at every k block.
            // An array of fragments the MMA reads one of (`warp_frag_A[warp_mma_k % 2]`,
            // a double buffer): that element, not the buffer being refilled beside it.
            let call = &parsed.source[statement.byte_range()];
            let cute_index = (!packed).then(|| cute_slice(call, &name)).flatten();
            let element = (!packed && cute_index.is_none() && !is_scalar(mma))
                .then(|| element_read(call, &name))
                .flatten();
            let slice = cute_index.clone().or(element.clone());
            let form = if packed {
                Form::Packed(parts.clone())
            } else {
                // A CuTe fragment: its coordinates from the partition that made it,
                // sliced as the fragment is.
                Form::Cute(
                    enclosing_function(statement)
                        .filter(|_| element.is_none())
                        .and_then(|f| {
                            cute::coords(parsed, f, &name, statement.start_byte(), letter)
                        })
                        .map(|c| match &cute_index {
                            Some(index) => sliced_coords(&c, index),
                            None => c,
                        })
                        .map_or(String::new(), |c| {
                            let bound =
                                rows.map_or("kwb::all_rows".to_owned(), |r| format!("({r})"));
                            format!(", {bound}, kwb::Axis::M, {c}")
                        }),
                )
            };
            let order = if k_tile == "-1" {
                " (no K-tile counter here: records are numbered by call)"
            } else {
                ""
            };
            let (read, what) = match &registers {
                Some(regs) => (
                    format!("kwb::regs({})", regs.join(", ")),
                    format!(
                        "operand {slot} {} as the MMA at line {} reads them{order}",
                        regs.iter()
                            .map(|r| format!("`{r}`"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        mma.line
                    ),
                ),
                None => (
                    slice
                        .as_ref()
                        .map_or(name.clone(), |index| format!("{name}{index}")),
                    format!(
                        "operand {slot} `{name}` as the MMA at line {} reads it{order}",
                        mma.line
                    ),
                ),
            };
            operands.push(Operand {
                at: declaration_point(parsed, statement),
                letter: slot,
                input,
                // A packed fragment is read by its name: here, the gathered registers.
                name: if registers.is_some() {
                    read.clone()
                } else {
                    name.clone()
                },
                read,
                k_tile,
                form,
                what,
                line: statement.start_position().row + 1,
                text: mma.text.clone(),
            });
        }
    }
    if skipped > 0 {
        em.note(format!(
            "{}: the operands of the first {SCALAR_PROBES} scalar multiply-accumulates are probed, not those of the {skipped} after them",
            function.name
        ));
    }
    emit(em, function, gate, operands);
}

/// Whether `name` is declared by `decl` as one 32-bit unsigned word (`uint32_t b0`,
/// `unsigned r`; not `uint32_t af[4]` beside it): a register an MMA may take its packed
/// inputs in.
fn is_register_word(parsed: &kwb_syntax::Parsed, decl: tree_sitter::Node<'_>, name: &str) -> bool {
    let Some(n) = crate::nodes::declaration_around(decl) else {
        return false;
    };
    let word = n.child_by_field_name("type").is_some_and(|ty| {
        let words: Vec<&str> = parsed.masked[ty.byte_range()]
            .split_whitespace()
            .filter(|w| *w != "const")
            .collect();
        matches!(
            words.as_slice(),
            ["uint32_t"] | ["std::uint32_t"] | ["unsigned"] | ["unsigned", "int"] | ["uint"]
        )
    });
    let mut cursor = n.walk();
    let scalar = n
        .children_by_field_name("declarator", &mut cursor)
        .any(|d| {
            let text = &parsed.masked[d.byte_range()];
            let declared = text.split('=').next().unwrap_or(text).trim();
            declared == name
        });
    word && scalar
}

/// The registers `mma` takes `slot` in, one plain name each, in its order
/// (`mma16816(acc, af, b0, b1)`: B is `b0`, `b1`); None where the slot is passed
/// otherwise (an array, an expression).
fn slot_registers(
    kernel: &Kernel,
    source: &str,
    mma: &kwb_sites::Site,
    slot: char,
) -> Option<Vec<String>> {
    let call = kernel.mma_arguments.iter().find(|c| c.call == mma.range)?;
    let ranges = if slot == 'A' { &call.a } else { &call.b };
    let ident = |t: &str| {
        !t.is_empty()
            && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !t.starts_with(|c: char| c.is_ascii_digit())
    };
    let regs: Vec<String> = ranges
        .iter()
        .map(|r| source.get(r.clone()).map(|t| t.trim().to_owned()))
        .collect::<Option<_>>()?;
    (regs.len() > 1 && regs.iter().all(|r| ident(r))).then_some(regs)
}

/// How an operand fragment is read.
#[derive(Clone, PartialEq)]
enum Form {
    /// Packed 16-bit values in 32-bit registers (`kwb::probe_as`), with the row bound
    /// and coordinate function when the layout is known.
    Packed(Option<(String, String)>),
    /// A CuTe fragment (`kwb::probe`), with its trailing arguments.
    Cute(String),
}

/// One operand probe, before it is emitted.
struct Operand {
    at: usize,
    letter: char,
    /// The C++ type of one value of the MMA's inputs (what a packed word holds).
    input: &'static str,
    name: String,
    /// What the probe reads: the operand, or the slice of it the MMA reads
    /// (`tCrA(_, _, k_block)`).
    read: String,
    k_tile: String,
    form: Form,
    what: String,
    line: usize,
    text: String,
}

/// Emits the operand probes in the order found, an A fragment and a packed B fragment
/// probed at the same point, with the same K tile and row bound, as one pair.
fn emit(em: &mut Emitter<'_>, function: &Kernel, gate: &str, operands: Vec<Operand>) {
    let mut used = vec![false; operands.len()];
    for i in 0..operands.len() {
        if used[i] {
            continue;
        }
        used[i] = true;
        let a = &operands[i];
        let info = |id: u32, o: &Operand| ProbeInfo {
            id,
            kernel: function.name.clone(),
            what: o.what.clone(),
            line: o.line,
            text: o.text.clone(),
        };
        let partner = match &a.form {
            Form::Packed(parts) if a.letter == 'A' => (0..operands.len()).find(|&j| {
                let b = &operands[j];
                !used[j]
                    && b.letter == 'B'
                    && b.at == a.at
                    && b.k_tile == a.k_tile
                    && match (&b.form, parts) {
                        (Form::Packed(None), None) => true,
                        (Form::Packed(Some((bound_b, _))), Some((bound_a, _))) => {
                            bound_a == bound_b
                        }
                        _ => false,
                    }
            }),
            _ => None,
        };
        let id = em.next_id();
        let k_tile = &a.k_tile;
        if let Some(j) = partner {
            used[j] = true;
            let b = &operands[j];
            let args = match (&a.form, &b.form) {
                (Form::Packed(Some((bound, coord_a))), Form::Packed(Some((_, coord_b)))) => {
                    format!(", {bound}, kwb::Axis::M, {coord_a}, {coord_b}")
                }
                _ => String::new(),
            };
            let site_a = em.site(id, "OperandA");
            let site_b = em.site(id + 1, "OperandB");
            let call = format!(
                "kwb::probe_as_pair<{}>({site_a}, {site_b}, kwb_tag, {k_tile}, {TILE}, {}, {}{args});",
                a.input, a.name, b.name
            );
            em.probe_pair(a.at, gate, &call, [info(id, a), info(id + 1, b)]);
            continue;
        }
        let kind = if a.letter == 'A' {
            "OperandA"
        } else {
            "OperandB"
        };
        let name = &a.name;
        let site = em.site(id, kind);
        let call = match &a.form {
            Form::Packed(parts) => {
                let args = parts.as_ref().map_or(String::new(), |(bound, coord)| {
                    format!(", {bound}, kwb::Axis::M, {coord}")
                });
                format!(
                    "kwb::probe_as<{}>({site}, kwb::Kind::{kind}, kwb_tag, {k_tile}, {TILE}, {name}{args});",
                    a.input
                )
            }
            Form::Cute(args) => format!(
                "kwb::probe({site}, kwb::Kind::{kind}, kwb_tag, {k_tile}, {TILE}, {}{args});",
                a.read
            ),
        };
        em.probe(a.at, gate, &call, info(id, a));
    }
}

/// The CuTe slice an MMA statement reads of `name`: the parenthesized indices after it
/// (`(_,_,k_block)` of `gemm(mma, tCrA(_,_,k_block), …)`) when they hold a `_`, CuTe's
/// "all of this mode".
fn cute_slice(statement: &str, name: &str) -> Option<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let (at, _) = statement.match_indices(name).find(|(at, _)| {
        !statement[..*at].chars().next_back().is_some_and(ident)
            && statement[at + name.len()..].trim_start().starts_with('(')
    })?;
    let rest = statement[at + name.len()..].trim_start();
    let mut depth = 0;
    let end = rest.char_indices().find_map(|(i, c)| {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        (depth == 0).then_some(i + 1)
    })?;
    let index = &rest[..end];
    index[1..end - 1]
        .split(',')
        .any(|part| part.trim() == "_" || part.trim() == "cute::_")
        .then(|| index.to_owned())
}

/// The subscripts of `name` where a call argument is one element of it, `name[i]` or
/// `name[i][j]` standing alone between `(`/`,` and `,`/`)`: `"[warp_mma_k % 2]"`. An
/// index with a side effect (`++`, an assignment) or a call is not copied.
pub(crate) fn element_read(call: &str, name: &str) -> Option<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    call.match_indices(name).find_map(|(at, _)| {
        let before = call[..at].trim_end();
        if call[..at].chars().next_back().is_some_and(ident)
            || !(before.ends_with('(') || before.ends_with(','))
        {
            return None;
        }
        let rest = &call[at + name.len()..];
        let mut end = 0;
        while rest[end..].trim_start().starts_with('[') {
            end += rest[end..].find('[')?;
            let mut depth = 0;
            let close = rest[end..].char_indices().find_map(|(i, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(i + 1)
            })?;
            end += close;
        }
        let index = &rest[..end];
        let after = rest[end..].trim_start();
        (end > 0 && pure(index) && (after.starts_with(',') || after.starts_with(')')))
            .then(|| index.trim().to_owned())
    })
}

/// Whether `expression` can be evaluated again without effect: no call, increment or
/// assignment.
fn pure(expression: &str) -> bool {
    !expression.contains("++")
        && !expression.contains("--")
        && !expression.contains('(')
        && !expression
            .replace("==", "")
            .replace("!=", "")
            .replace("<=", "")
            .replace(">=", "")
            .replace("->", "")
            .contains('=')
}

/// The arguments of the first call in `statement`, split at its top-level commas.
fn call_arguments(statement: &str) -> Option<Vec<&str>> {
    let open = statement.find('(')?;
    let mut depth = 0;
    let mut start = open + 1;
    let mut out = Vec::new();
    for (i, c) in statement[open..].char_indices() {
        let at = open + i;
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    out.push(&statement[start..at]);
                    return Some(out);
                }
            }
            ',' if depth == 1 => {
                out.push(&statement[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    None
}

/// Probes of an operand that is a member the MMA reads through an object
/// (`pipe_state.warp_transformed_frag_A_[warp_mma_k % 2]`): the argument expression
/// as written, before each MMA statement that passes it, where it has no effect.
fn member_operands(
    em: &mut Emitter<'_>,
    function: &Kernel,
    (letter, mma_line, name): (char, usize, &str),
    counters: &[Counter],
    operands: &mut Vec<Operand>,
) {
    let parsed = em.parsed;
    let root = parsed.tree.root_node();
    let mut blocks_done: Vec<usize> = Vec::new();
    for mma in function
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Mma && !is_scalar(s))
    {
        let Some(statement) = root
            .descendant_for_byte_range(mma.range.start, mma.range.end)
            .and_then(block_statement)
        else {
            continue;
        };
        let call = &parsed.source[statement.byte_range()];
        if mma.line != mma_line && !names(call, name) {
            continue;
        }
        let Some(argument) = call_arguments(call)
            .into_iter()
            .flatten()
            .map(str::trim)
            .find(|a| names(a, name))
        else {
            continue;
        };
        let block = statement.parent().map_or(0, |b| b.id());
        if !pure(argument) || blocks_done.contains(&block) {
            continue;
        }
        blocks_done.push(block);
        let k_tile = counters
            .iter()
            .find(|(range, _)| contains(range, &statement.byte_range()))
            .map_or("-1".to_owned(), |(_, c)| c.clone());
        let order = if k_tile == "-1" {
            " (no K-tile counter here: records are numbered by call)"
        } else {
            ""
        };
        operands.push(Operand {
            at: declaration_point(parsed, statement),
            letter,
            input: mma_input_type(
                em.layouts
                    .ptx_for(&function.name, mma.line)
                    .unwrap_or(&parsed.source),
            ),
            name: name.to_owned(),
            read: argument.split_whitespace().collect::<Vec<_>>().join(" "),
            k_tile,
            form: Form::Cute(String::new()),
            what: format!(
                "operand {letter} `{argument}` as the MMA at line {} reads it{order}",
                mma.line
            ),
            line: statement.start_position().row + 1,
            text: mma.text.clone(),
        });
    }
}

/// `feeds operand A of the MMA at line 528: the member \`warp_frag_A_\`` →
/// ('A', 528, "warp_frag_A_").
fn parse_member_note(note: &str) -> Option<(char, usize, String)> {
    let rest = note.strip_prefix("feeds operand ")?;
    if !rest.contains(": the member `") {
        return None;
    }
    let letter = rest.chars().next()?;
    let line = rest
        .split("at line ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let name = note.split('`').nth(1)?.to_owned();
    Some((letter, line, name))
}

/// `kwb::tensor_coords<…>(P)` sliced as the fragment is: `kwb::tensor_coords<…>((P)INDEX)`.
fn sliced_coords(coords: &str, index: &str) -> String {
    match coords.split_once(">(") {
        Some((head, partition)) if partition.ends_with(')') => {
            format!("{head}>(({}){index})", &partition[..partition.len() - 1])
        }
        _ => coords.to_owned(),
    }
}

/// `operand A of the MMA at line 228: \`a\`, …` → ('A', 228, "a").
fn parse_operand_note(note: &str) -> Option<(char, usize, String)> {
    let rest = note.strip_prefix("operand ")?;
    let letter = rest.chars().next()?;
    let line: usize = rest
        .split("at line ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let name = note.split('`').nth(1)?.to_owned();
    Some((letter, line, name))
}

/// The element type of the MMA inputs, from the PTX in the file: the A operand's type
/// of its first `mma.sync` or `wgmma.mma_async` (`….m16n8k32.row.col.f32.e4m3.e4m3.f32`:
/// the second type after the shape), as the C++ type a register holding it packs.
pub(crate) fn mma_input_type(source: &str) -> &'static str {
    let mut starts: Vec<usize> = source
        .match_indices("mma.sync")
        .chain(source.match_indices("wgmma.mma_async"))
        .map(|(i, _)| i)
        .collect();
    starts.sort_unstable();
    // The first occurrence that names its types (a comment may name only the shape).
    starts
        .into_iter()
        .find_map(|i| {
            let end = source[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
                .map_or(source.len(), |e| i + e);
            let types: Vec<&str> = source[i..end]
                .split('.')
                .skip_while(|part| !is_shape(part))
                .skip(1)
                .filter(|part| PTX_TYPES.iter().any(|(name, _)| name == part))
                .collect();
            // D's type, then A's (mma.sync: D, A, B, C; wgmma: D, A, B).
            types
                .get(1)
                .and_then(|a| PTX_TYPES.iter().find(|(name, _)| name == a))
                .map(|(_, cpp)| *cpp)
        })
        .unwrap_or("float")
}

/// The PTX types an MMA's operands can have, and the C++ type of one value.
const PTX_TYPES: [(&str, &str); 11] = [
    ("f32", "float"),
    ("f64", "double"),
    ("tf32", "float"),
    ("f16", "kwb::half"),
    ("bf16", "kwb::bfloat16"),
    ("e4m3", "kwb::fp8_e4m3"),
    ("e5m2", "kwb::fp8_e5m2"),
    ("s8", "int8_t"),
    ("u8", "uint8_t"),
    ("s32", "int32_t"),
    ("f16x2", "kwb::half"),
];

/// `m16n8k16`: an MMA's shape.
fn is_shape(part: &str) -> bool {
    part.starts_with('m')
        && part.contains('n')
        && part.contains('k')
        && part[1..].starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cute_operand_is_read_as_the_mma_slices_it() {
        let gemm = "gemm(mma, tCrA(_,_,k_block), tCrB(_, _, k_block), tCrC);";
        assert_eq!(
            super::cute_slice(gemm, "tCrA").as_deref(),
            Some("(_,_,k_block)")
        );
        assert_eq!(
            super::cute_slice(gemm, "tCrB").as_deref(),
            Some("(_, _, k_block)")
        );
        assert_eq!(super::cute_slice(gemm, "tCrC"), None);
        assert_eq!(super::cute_slice("mma(a[i], b[j], acc)", "a"), None);
        assert_eq!(
            super::sliced_coords(
                "kwb::tensor_coords<kwb::Axis::M, kwb::Axis::K>(thr.partition_A(id))",
                "(_,_,k)"
            ),
            "kwb::tensor_coords<kwb::Axis::M, kwb::Axis::K>((thr.partition_A(id))(_,_,k))"
        );
    }

    #[test]
    fn the_mma_type_is_read_near_multi_byte_text() {
        // Multi-byte text right after `mma.sync`; a comment naming only the shape.
        let source = format!("// mma.sync{}──── bf16\n", " ".repeat(68));
        assert_eq!(super::mma_input_type(&source), "float");
        let source = "// mma.sync.aligned.m16n8k16 fed by ldmatrix\nasm(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32\");";
        assert_eq!(super::mma_input_type(source), "kwb::bfloat16");
        for (ptx, want) in [
            (
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                "kwb::bfloat16",
            ),
            (
                "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
                "kwb::fp8_e4m3",
            ),
            (
                "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
                "kwb::half",
            ),
            (
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
                "float",
            ),
            ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "int8_t"),
            (
                "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
                "kwb::bfloat16",
            ),
        ] {
            let source = format!("asm volatile(\"{ptx} {{%0}};\");");
            assert_eq!(super::mma_input_type(&source), want, "{ptx}");
        }
    }
}
