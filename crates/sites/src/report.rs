//! Assembles the kernel map: hits to functions, wrappers, mainloops, operands,
//! accumulators and epilogues, then plain `Site`s.

use std::cell::OnceCell;
use std::collections::BTreeSet;

use kwb_syntax::{BlankKind, Parsed};
use tree_sitter::Node;

use crate::fields::Field;

use crate::copies;
use crate::decls::{Decl, Scope, address_of, viewed_tensor};
use crate::fma;
use crate::functions::{self, Function};
use crate::index::Index;
use crate::mainloop::{self, Seeds};
use crate::mma;
use crate::patterns::{self, Mark, Pattern};
use crate::{Confidence, Kernel, KernelMap, MmaArguments, Site, SiteKind};

mod passed;
mod returned;

/// A site before it becomes plain data.
struct Found<'t> {
    kind: SiteKind,
    node: Node<'t>,
    confidence: Confidence,
    note: Option<String>,
}

pub fn build(parsed: &Parsed, user: &[Pattern]) -> KernelMap {
    let index = Index::build(
        &parsed.tree,
        patterns::builtin().root_kinds().unwrap_or_default(),
    );
    let functions = functions::collect(&index, parsed);
    // Scopes are built on first use: most functions of a header hold no site.
    let scopes: Vec<OnceCell<Scope<'_>>> = functions.iter().map(|_| OnceCell::new()).collect();
    let scope = |i: usize| scopes[i].get_or_init(|| Scope::of(&index.held[i].declarations, parsed));
    let mut found: Vec<Vec<Found<'_>>> = functions.iter().map(|_| Vec::new()).collect();
    // The lambdas each function declares, likewise on first use (only functions that
    // hold a site ask).
    let lambda_cells: Vec<OnceCell<Lambdas<'_>>> =
        functions.iter().map(|_| OnceCell::new()).collect();
    let lambdas = |i: usize| -> &[(String, Node<'_>)] {
        lambda_cells[i].get_or_init(|| lambdas_of(&index.held[i].declarations, parsed))
    };

    let hits = patterns::run(parsed, &index.roots, user);
    // Names of descriptor types, with the line of their alias.
    let descriptor_aliases: Vec<(&str, usize)> = hits
        .iter()
        .filter(|h| h.mark == Mark::DescriptorAlias)
        .map(|h| {
            (
                &parsed.masked[h.node.byte_range()],
                h.node.start_position().row + 1,
            )
        })
        .collect();
    for hit in hits {
        if hit.mark == Mark::DescriptorAlias {
            continue;
        }
        let Some(owner) = index.owner(hit.node) else {
            continue;
        };
        let scope = scope(owner);
        match hit.mark {
            Mark::Site(kind) => found[owner].push(Found {
                kind,
                node: hit.node,
                confidence: match (hit.user, hit.node.kind(), kind) {
                    (true, _, _) => Confidence::Medium,
                    (_, "gnu_asm_expression", _) => Confidence::High,
                    (_, "assignment_expression" | "init_declarator", _) => Confidence::Low,
                    (_, _, SiteKind::Sync | SiteKind::Epilogue) => Confidence::Medium,
                    _ => Confidence::High,
                },
                note: match (hit.user, hit.node.kind()) {
                    (true, _) => Some("matched a user pattern".to_owned()),
                    (_, "assignment_expression" | "init_declarator") => {
                        Some("scalar multiply-accumulate".to_owned())
                    }
                    (_, "gnu_asm_expression") if kind == SiteKind::Mma => {
                        mma::ptx_instruction(parsed.text(hit.node)).map(|i| format!("PTX `{i}`"))
                    }
                    _ => None,
                },
            }),
            Mark::DescriptorAlias => {}
            Mark::Accumulate => {
                // Host code (a reference GEMM, a norm in `main`) accumulates too: only
                // code that runs on the device counts.
                if !matches!(functions[owner].role, "global" | "device") {
                    continue;
                }
                let Some(acc) = fma::accumulation(hit.node, &parsed.masked) else {
                    continue;
                };
                if fma::carried(hit.node, &acc, parsed, scope) {
                    found[owner].push(Found {
                        kind: SiteKind::Mma,
                        node: hit.node,
                        confidence: Confidence::Low,
                        note: Some("scalar multiply-accumulate".to_owned()),
                    });
                }
            }
            Mark::Copy => {
                if let Some(c) = copies::classify(hit.node, parsed, scope) {
                    found[owner].push(Found {
                        kind: c.kind,
                        node: hit.node,
                        confidence: c.confidence,
                        note: Some(c.note),
                    });
                }
            }
        }
    }

    // An encode through a function pointer (`encode_func(&map,
    // get_CUtensorMapDataType<T>(), rank, …)`, the driver entry point fetched at run
    // time): a call whose second argument is a tensor-map data type. Only files that
    // name one are searched.
    if parsed.masked.contains("CU_TENSOR_MAP_DATA_TYPE_")
        || parsed.masked.contains("CUtensorMapDataType")
    {
        for (i, held) in index.held.iter().enumerate() {
            for &call in &held.calls {
                let second = call
                    .field("arguments")
                    .and_then(|a| a.named_child(1))
                    .map_or("", |n| &parsed.masked[n.byte_range()]);
                let encodes = second.trim_start().starts_with("CU_TENSOR_MAP_DATA_TYPE_")
                    || second.contains("CUtensorMapDataType");
                if encodes && !found[i].iter().any(|f| f.node.id() == call.id()) {
                    found[i].push(Found {
                        kind: SiteKind::TmaDescriptor,
                        node: call,
                        confidence: Confidence::High,
                        note: None,
                    });
                }
            }
        }
    }
    let has_shared = parsed
        .blanks
        .iter()
        .any(|b| matches!(&b.kind, BlankKind::Macro(n) if n == "__shared__"));
    let has_grid_constant = parsed.blanks.iter().any(
        |b| matches!(&b.kind, BlankKind::Macro(n) if n.ends_with("GRID_CONSTANT") || n == "__grid_constant__"),
    );
    for (i, function) in functions.iter().enumerate() {
        let held = &index.held[i];
        let wanted = (!descriptor_aliases.is_empty() && !held.declarations.is_empty())
            || has_grid_constant
            || (has_shared && !held.assignments.is_empty());
        if !wanted {
            continue;
        }
        let scope = scope(i);
        for decl in scope
            .decls()
            .iter()
            .filter(|_| !descriptor_aliases.is_empty())
        {
            let Some(ty) = decl.node.field("type") else {
                continue;
            };
            let ty = parsed.masked[ty.byte_range()]
                .split('<')
                .next()
                .unwrap_or("");
            let last = ty.rsplit("::").next().unwrap_or(ty).trim();
            let alias = descriptor_aliases.iter().find(|(name, _)| *name == last);
            if let Some((name, line)) = alias
                && !found[i].iter().any(|f| f.node.id() == decl.node.id())
            {
                found[i].push(Found {
                    kind: SiteKind::TmaDescriptor,
                    node: decl.node,
                    confidence: Confidence::Medium,
                    note: Some(format!(
                        "`{}` has type `{name}`, a TMA descriptor type (alias at line {line})",
                        decl.name
                    )),
                });
            }
        }
        for decl in scope
            .decls()
            .iter()
            .filter(|d| d.parameter && has_grid_constant)
        {
            let grid_constant = crate::blanks_around(parsed, decl.node).iter().any(|b| {
                matches!(&b.kind, BlankKind::Macro(n) if n.ends_with("GRID_CONSTANT") || n == "__grid_constant__")
            });
            if grid_constant && !found[i].iter().any(|f| f.node.id() == decl.node.id()) {
                found[i].push(Found {
                    kind: SiteKind::TmaDescriptor,
                    node: decl.node,
                    confidence: Confidence::Medium,
                    note: Some("__grid_constant__ kernel parameter".to_owned()),
                });
            }
        }
        if function.body.is_some() && has_shared {
            for store in copies::plain_shared_stores(&held.assignments, parsed, scope) {
                found[i].push(Found {
                    kind: SiteKind::OperandLoad,
                    node: store,
                    confidence: Confidence::Medium,
                    note: Some(PLAIN_SHARED_STORE.to_owned()),
                });
            }
        }
    }

    let calls: Vec<Vec<(Node<'_>, String)>> = index
        .held
        .iter()
        .map(|held| calls_in(&held.calls, parsed))
        .collect();
    add_wrapper_calls(parsed, &functions, &calls, &mut found, SiteKind::Mma);
    add_wrapper_calls(
        parsed,
        &functions,
        &calls,
        &mut found,
        SiteKind::OperandLoad,
    );
    add_wrapper_calls(parsed, &functions, &calls, &mut found, SiteKind::Sync);
    for kind in [SiteKind::Mma, SiteKind::Sync, SiteKind::OperandLoad] {
        add_lambda_calls(&lambdas, &calls, &mut found, kind);
    }
    // Scale factors and biases move through the same copies and TMA loads as the
    // operands (`tma_copy(&tensor_map_scales_a, …)`, `sh_bias[i] = bias[…]`), but
    // the MMA does not read them.
    for sites in &mut found {
        sites.retain(|s| {
            s.kind != SiteKind::OperandLoad || !moves_side_data(&parsed.masked[s.node.byte_range()])
        });
    }

    // How each MMA-issuing function's parameters reach its MMAs, so callers passing
    // `acc` into a helper see it as their accumulator (nested helpers need rounds).
    let mut param_roles = mma::ParamRoles::new();
    let roles_memo = mma::Memo::default();
    for round in 0..3 {
        for (i, function) in functions.iter().enumerate() {
            let mmas: Vec<Node<'_>> = found[i]
                .iter()
                .filter(|s| s.kind == SiteKind::Mma)
                .map(|s| s.node)
                .collect();
            // Only MMAs issued through calls can change after the first round.
            let through_calls = mmas.iter().any(|m| m.kind() == "call_expression");
            if mmas.is_empty() || (round > 0 && !through_calls) {
                continue;
            }
            let roles = mma::parameter_roles(
                function.node,
                &mmas,
                parsed,
                scope(i),
                &param_roles,
                &roles_memo,
            );
            if !roles.is_empty() {
                param_roles.insert(function.simple_name.clone(), roles);
            }
        }
    }

    let runs_mma: BTreeSet<&str> = functions
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.iter().any(|s| s.kind == SiteKind::Mma))
        .map(|(f, _)| f.simple_name.as_str())
        .collect();

    let mut derived = Vec::new();
    for (i, function) in functions.iter().enumerate() {
        let mut sites = std::mem::take(&mut found[i]);
        // Nothing to derive in a function with no site, no call of an MMA-running
        // function and no accumulator-like name.
        let idle = sites.is_empty()
            && !calls[i]
                .iter()
                .any(|(_, name)| runs_mma.contains(name.as_str()))
            && !receives_accumulator(function, parsed)
            && !calls_a_parameter(function, &calls[i], parsed);
        if !idle {
            derive(
                function,
                &calls[i],
                &FileFacts {
                    fields: &index.fields,
                    runs_mma: &runs_mma,
                    param_roles: &param_roles,
                    roles_memo: &roles_memo,
                },
                scope(i),
                parsed,
                &mut sites,
            );
        }
        derived.push(sites);
    }
    add_epilogue_lambda_calls(&lambdas, &calls, &mut derived);
    returned::add_returned_operands(parsed, &functions, &scope, &mut derived);
    passed::add_passed_accumulators(parsed, &functions, &calls, &scope, &mut derived);
    // A k-block loop in a function that another function calls as an MMA step (or from
    // a K-tile loop) is that loop's body, not a mainloop of its own (CUTLASS 2.x
    // `mac_loop_iter`, a `mma_k_tile` helper).
    let called_from_k_loops: BTreeSet<String> = derived
        .iter()
        .flatten()
        .filter(|s| s.kind == SiteKind::Mma && s.node.kind() == "call_expression")
        .filter_map(|s| s.node.field("function"))
        .map(|f| crate::names::callee_name(f, &parsed.masked).to_owned())
        .chain(
            derived
                .iter()
                .flatten()
                .filter(|s| s.kind == SiteKind::Mainloop)
                .filter_map(|s| {
                    let note = s.note.as_deref()?;
                    let callee = note.split("calls `").nth(1)?.split('`').next()?;
                    Some(callee.to_owned())
                }),
        )
        .collect();
    let mut kernels = Vec::new();
    for (i, (function, mut sites)) in functions.iter().zip(derived).enumerate() {
        if called_from_k_loops.contains(&function.simple_name) {
            sites.retain(|s| {
                !(s.kind == SiteKind::Mainloop
                    && s.note
                        .as_deref()
                        .is_some_and(|n| n.starts_with("loop over k blocks")))
            });
        }
        if sites.is_empty() && function.role != "global" {
            continue;
        }
        // Only a function that issues an MMA through a call needs its scope here.
        let calls_mma = sites
            .iter()
            .any(|s| s.kind == SiteKind::Mma && s.node.kind() == "call_expression");
        let arguments = if calls_mma {
            mma_arguments(&sites, parsed, scope(i), &param_roles, &roles_memo)
        } else {
            Vec::new()
        };
        let mut k = kernel(function, sites, parsed);
        k.mma_arguments = arguments;
        kernels.push(k);
    }
    KernelMap { kernels }
}

/// What the whole file says that one function's derivation needs.
struct FileFacts<'a, 't> {
    /// Class members declared outside any function.
    fields: &'a [Node<'t>],
    /// Simple names of the functions that issue MMAs.
    runs_mma: &'a BTreeSet<&'a str>,
    /// How each MMA-issuing function's parameters reach its MMAs.
    param_roles: &'a mma::ParamRoles,
    /// The roles of the file's inline-asm and scalar MMA issues, once read.
    roles_memo: &'a mma::Memo<'t>,
}

/// Mainloops, operands, accumulators and epilogue statements of one function.
fn derive<'t>(
    function: &Function<'t>,
    calls: &[(Node<'t>, String)],
    facts: &FileFacts<'_, 't>,
    scope: &Scope<'t>,
    parsed: &Parsed,
    sites: &mut Vec<Found<'t>>,
) {
    let FileFacts {
        fields,
        runs_mma,
        param_roles,
        roles_memo,
    } = *facts;
    let of = |kind: SiteKind, sites: &[Found<'t>]| -> Vec<Node<'t>> {
        sites
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.node)
            .collect()
    };
    let mut mma_nodes = of(SiteKind::Mma, sites);
    // A scalar accumulate that reads a tensor-core MMA's accumulator is the
    // promotion of its partial sums (`final_accum[i] += scale * accum[i]`, fp8 block
    // scaling), not an MMA of its own: its target stays an accumulator.
    let promotions = promotions(&mma_nodes, scope, param_roles, roles_memo, parsed);
    if !promotions.is_empty() {
        sites.retain(|s| !(s.kind == SiteKind::Mma && promotions.contains(&s.node.id())));
    }
    let promoted: Vec<Node<'t>> = mma_nodes
        .iter()
        .copied()
        .filter(|m| promotions.contains(&m.id()))
        .collect();
    mma_nodes.retain(|m| !promotions.contains(&m.id()));
    let loads = of(SiteKind::OperandLoad, sites);
    let mma_callers: Vec<(Node<'t>, String)> = calls
        .iter()
        .filter(|(node, name)| {
            runs_mma.contains(name.as_str())
                && *name != function.simple_name
                && !mma_nodes.iter().any(|m| m.id() == node.id())
        })
        .cloned()
        .collect();
    let seeds = Seeds {
        mma: &mma_nodes,
        mma_callers: &mma_callers,
        loads: &loads,
    };
    let mut loops = mainloop::find(function.node, &seeds, parsed);
    let is_parameter = |name: &str| {
        scope
            .lookup(name, function.node.end_byte())
            .is_some_and(|d| d.parameter)
    };
    let calls_a_callable = calls.iter().any(|(call, name)| {
        call.field("function")
            .is_some_and(|f| f.kind() == "identifier")
            && is_parameter(name)
    });
    if function.role != "host" && calls_a_callable {
        // A K loop that runs a step its caller (or its lambda's caller) passes in.
        for l in mainloop::callback_loops(function.node, parsed, &is_parameter) {
            let overlaps = loops
                .iter()
                .any(|o| mainloop::contains(o.node, l.node) || mainloop::contains(l.node, o.node));
            if !overlaps {
                loops.push(l);
            }
        }
    }
    let copied_into = copy_destinations(calls, scope, parsed);
    let mut accumulator_names: Vec<String> = Vec::new();
    // A declaration may hold several fragments (`uint32_t a[4], b[4];`): one site per
    // declared name, keyed by the declaration and the name.
    let mut resolved: BTreeSet<(usize, String)> = BTreeSet::new();
    for &m in mma_nodes.iter().chain(&promoted) {
        let roles = mma::roles_with(m, parsed, scope, param_roles, roles_memo);
        let mma_line = m.start_position().row + 1;
        let promotion = promotions.contains(&m.id());
        for (letter, node) in roles.operands.into_iter().filter(|_| !promotion) {
            let name = &parsed.masked[node.byte_range()];
            let Some(decl) = scope.lookup(name, node.start_byte()) else {
                // A member the MMA reads through an object (`pipe_state.warp_frag_A_[i]`,
                // `this->frag_B_`): its declaration in the class.
                if let Some(field) = field_declaring(fields, name, parsed)
                    && resolved.insert((field.id(), name.to_owned()))
                {
                    sites.push(Found {
                        kind: SiteKind::Operand,
                        node: field,
                        confidence: Confidence::Medium,
                        note: Some(format!(
                            "feeds operand {letter} of the MMA at line {mma_line}: the member `{name}`"
                        )),
                    });
                }
                continue;
            };
            let decl = address_of(scope, decl, parsed).unwrap_or(decl);
            let (holder, note) =
                operand_holder(scope, decl, letter, mma_line, &copied_into, parsed);
            if resolved.insert((holder.node.id(), holder.name.clone())) {
                sites.push(Found {
                    kind: SiteKind::Operand,
                    node: holder.node,
                    confidence: Confidence::High,
                    note: Some(note),
                });
            }
            // The rest of the chain from what the MMA names to where the values are
            // stored: the fragment or descriptor it reads, the shared tile a view
            // partitions, the shared array under that tile. Views are followed, not
            // reported.
            push_chain(
                &operand_chain(scope, decl, parsed),
                (letter, mma_line),
                &mut resolved,
                sites,
            );
        }
        for node in roles.accumulators {
            let name = parsed.masked[node.byte_range()].to_owned();
            if name.is_empty() {
                continue;
            }
            let Some(decl) = scope.lookup(&name, node.start_byte()) else {
                continue;
            };
            // `float* D = reinterpret_cast<float*>(&d[0])`: the accumulator is `d`.
            let decl = address_of(scope, decl, parsed).unwrap_or(decl);
            let name = decl.name.clone();
            if !accumulator_names.contains(&name) {
                accumulator_names.push(name.clone());
            }
            if resolved.insert((decl.node.id(), name.clone())) {
                sites.push(Found {
                    kind: SiteKind::Accumulator,
                    node: decl.node,
                    confidence: Confidence::High,
                    note: Some(format!("C/D of the MMA at line {mma_line}: `{name}`")),
                });
            }
        }
    }
    // The shared tiles the operand loads fill or read (`copy(tma_a, tAgA(…), tAsA(…))`,
    // `ldmatrix_x4(a, &sh_w[…])`): the MMA's operands where they are stored, also in a
    // producer that issues no MMA.
    for &load in &loads {
        let load_line = load.start_position().row + 1;
        let Some(arguments) = load.field("arguments") else {
            continue;
        };
        let is_local = |n: &str| scope.has(n);
        let mut cursor = arguments.walk();
        for arg in arguments.named_children(&mut cursor) {
            let Some(base) = crate::names::base_identifier(arg, &parsed.masked, &is_local) else {
                continue;
            };
            let name = &parsed.masked[base.byte_range()];
            let Some(decl) = scope.lookup(name, base.start_byte()) else {
                continue;
            };
            // Barriers ride along with the tiles (`tma_load(sA, &map, &full_bar[s], …)`).
            let lower = name.to_ascii_lowercase();
            if !decl.shared || moves_side_data(name) || lower.contains("bar") {
                continue;
            }
            for link in operand_chain(scope, decl, parsed) {
                if is_storage(link, scope, parsed)
                    && resolved.insert((link.node.id(), link.name.clone()))
                {
                    sites.push(Found {
                        kind: SiteKind::Operand,
                        node: link.node,
                        confidence: Confidence::Low,
                        note: Some(format!(
                            "feeds the MMA's operands: `{}`, the shared tile the load at line {load_line} moves",
                            link.name
                        )),
                    });
                }
            }
        }
    }
    // The epilogue starts after the last consumer loop and the last MMA (a peeled
    // last K tile issues MMAs after the loop).
    let after = loops
        .iter()
        .filter(|l| l.consumer)
        .map(|l| l.node.end_byte())
        .chain(mma_nodes.iter().map(|m| m.end_byte()))
        .max();
    for l in loops {
        sites.push(Found {
            kind: SiteKind::Mainloop,
            node: l.node,
            confidence: l.confidence,
            note: Some(l.note),
        });
    }
    if let (Some(after), Some(body)) = (after, function.body) {
        epilogue_reads(body, after, &accumulator_names, scope, parsed, sites);
        epilogue_side_inputs(after, scope, parsed, sites);
    } else if let Some(body) = function.body
        && mma_nodes.is_empty()
        && mma_callers.is_empty()
        && function.role != "host"
    {
        // An epilogue functor (`operator()(Fragment const& acc, …)`, CUTLASS's
        // linear combinations, a fusion's compute node) receives the accumulator as a
        // parameter: what it computes from it is epilogue.
        let received: Vec<String> = scope
            .decls()
            .iter()
            .filter(|d| {
                d.parameter && crate::names::is_accumulator_name(&d.name) && d.name.len() > 1
            })
            .map(|d| d.name.clone())
            .collect();
        epilogue_reads(body, body.start_byte(), &received, scope, parsed, sites);
    }
}

/// The note of a plain store into a shared array, read as an operand load.
const PLAIN_SHARED_STORE: &str = "plain store of global data into a shared array";

/// Whether a load names scale factors or a bias (`tensor_map_scales_a`, `smem_sfa`,
/// `g2s_copy_SFB`, `sh_bias`) rather than an operand tile.
fn moves_side_data(text: &str) -> bool {
    crate::names::identifiers(text).any(|i| {
        let lower = i.to_ascii_lowercase();
        lower.split('_').any(|w| {
            matches!(
                w,
                "sf" | "sfa" | "sfb" | "scale" | "scales" | "bias" | "biases"
            ) || w.starts_with("tasf")
                || w.starts_with("tbsf")
        }) || lower.ends_with("sfa")
            || lower.ends_with("sfb")
            || lower.ends_with("bias")
    })
}

/// The scalar accumulates among `mmas` that read the accumulator of a call or PTX MMA
/// of the same function: promotions of its partial sums.
fn promotions<'t>(
    mmas: &[Node<'t>],
    scope: &Scope<'t>,
    param_roles: &mma::ParamRoles,
    memo: &mma::Memo<'t>,
    parsed: &Parsed,
) -> BTreeSet<usize> {
    let scalar = |m: &Node<'_>| matches!(m.kind(), "assignment_expression" | "init_declarator");
    // Without a scalar accumulate there is nothing to promote: the tensor-core MMAs'
    // roles (a wgmma's hundred accumulator registers) are not read.
    if !mmas.iter().any(scalar) {
        return BTreeSet::new();
    }
    let core: BTreeSet<&str> = mmas
        .iter()
        .filter(|m| !scalar(m))
        .flat_map(|&m| mma::roles_with(m, parsed, scope, param_roles, memo).accumulators)
        .map(|n| &parsed.masked[n.byte_range()])
        .collect();
    if core.is_empty() {
        return BTreeSet::new();
    }
    mmas.iter()
        .filter(|m| scalar(m))
        .filter(|m| {
            m.field("right").is_some_and(|right| {
                crate::names::identifiers(&parsed.masked[right.byte_range()])
                    .any(|i| core.contains(i))
            })
        })
        .map(|m| m.id())
        .collect()
}

/// Whether a function calls one of its own parameters (`func(k_iter, …)`): it may
/// run a caller's step in a K loop. A text check on the declarator, so no scope is
/// built for it.
fn calls_a_parameter(
    function: &Function<'_>,
    calls: &[(Node<'_>, String)],
    parsed: &Parsed,
) -> bool {
    let Some(body) = function.body else {
        return false;
    };
    let head = &parsed.masked[function.node.start_byte()..body.start_byte()];
    calls.iter().any(|(call, name)| {
        call.field("function")
            .is_some_and(|f| f.kind() == "identifier")
            && crate::names::identifiers(head).any(|i| i == name)
    })
}

/// Whether a parameter's name reads as an accumulator (`acc`, `accum`, `frag_C`): the
/// function may be an epilogue functor. A text check, so no scope is built for it.
fn receives_accumulator(function: &Function<'_>, parsed: &Parsed) -> bool {
    let Some(body) = function.body else {
        return false;
    };
    let head = &parsed.masked[function.node.start_byte()..body.start_byte()];
    crate::names::identifiers(head).any(|i| i.len() > 1 && crate::names::is_accumulator_name(i))
}

/// The class member declaration named `name`, when exactly one declares it.
fn field_declaring<'t>(fields: &[Node<'t>], name: &str, parsed: &Parsed) -> Option<Node<'t>> {
    let mut found = fields.iter().filter(|f| {
        let mut cursor = f.walk();
        f.children_by_field_name("declarator", &mut cursor)
            .any(|d| {
                let mut d = d;
                while let Some(inner) = d.field("declarator") {
                    d = inner;
                }
                &parsed.masked[d.byte_range()] == name
            })
    });
    let first = found.next()?;
    found.next().is_none().then_some(*first)
}

/// What a declaration's initializer makes of the tensor it names first.
enum Link {
    /// A view (`partition_A(sA)`, `tCsA(_, _, k)`, `reinterpret_cast<T*>(&a[0])`):
    /// followed, not an operand site of its own.
    View,
    /// A fragment, descriptor or tensor over storage (`make_fragment_A(tCsA)`,
    /// `make_smem_desc(sA + k)`, `make_tensor(make_smem_ptr(smemA), layout)`).
    Made,
}

/// The declarations from an MMA's operand argument down to its storage that are not
/// views, in order; at most six steps. A typed pointer carved out of a raw byte buffer
/// (`bf16* sh_w = (bf16*)&smem[0]`) is where the chain ends: the buffer holds every
/// tile.
fn operand_chain<'s, 't>(
    scope: &'s Scope<'t>,
    first: &'s Decl<'t>,
    parsed: &Parsed,
) -> Vec<&'s Decl<'t>> {
    let is_local = |n: &str| scope.has(n);
    let base_decl = |n: Node<'t>, me: &Decl<'t>| {
        crate::names::base_identifier(n, &parsed.masked, &is_local)
            .and_then(|b| scope.lookup(&parsed.masked[b.byte_range()], b.start_byte()))
            .filter(|d| d.node != me.node)
    };
    let mut out = Vec::new();
    let mut decl = first;
    for _ in 0..6 {
        let step = decl.value.and_then(|value| {
            let value = crate::fma::strip(value);
            let (link, from) = match value.kind() {
                // `auto [tAgA, tAsA] = tma_partition(atom, …, group_modes<0, 3>(tCsA),
                // group_modes<0, 3>(tCgA));`: a shared name bound from a partitioning
                // call is a view of the call's shared argument.
                "call_expression"
                    if decl.shared && is_binding(value) && partitions(value, parsed) =>
                {
                    let arguments = value.field("arguments")?;
                    let shared = (0..arguments.named_child_count())
                        .filter_map(|k| arguments.named_child(k))
                        .find(|a| base_decl(*a, decl).is_some_and(|d| d.shared))?;
                    (Link::View, shared)
                }
                "call_expression" => {
                    let function = value.field("function")?;
                    let callee = crate::names::callee_name(function, &parsed.masked);
                    let lower = callee.to_ascii_lowercase();
                    let first_arg = value.field("arguments").and_then(|a| a.named_child(0))?;
                    let link = if callee.ends_with("_cast")
                        || lower.contains("cvta")
                        || lower.contains("smem_u32")
                        || lower.contains("smem_ptr_to_uint")
                    {
                        // Casts and shared-window address conversions
                        // (`__cvta_generic_to_shared(p)`, `smem_u32(p)`).
                        Link::View
                    } else if callee.starts_with("partition_")
                        || callee.starts_with("retile_")
                        || callee.starts_with("as_")
                        || matches!(
                            callee,
                            "local_tile"
                                | "flat_divide"
                                | "zipped_divide"
                                | "tiled_divide"
                                | "group_modes"
                                | "coalesce"
                                | "filter_zeros"
                        )
                        || slices(value, parsed)
                    {
                        Link::View
                    } else if callee.starts_with("make_fragment_")
                        || lower.contains("desc")
                        || callee == "make_tensor"
                    {
                        Link::Made
                    } else {
                        return None;
                    };
                    (link, first_arg)
                }
                // `(T*)&smem[0]`, `sh_w + stage * kTile`, `&sA[0]`: pointer views.
                "cast_expression" => (Link::View, value.field("value")?),
                "binary_expression" => (Link::View, value.field("left")?),
                "pointer_expression" => (Link::View, value.field("argument")?),
                // `float a = a_float[k];`: a register copy of one element of a local
                // array, itself an operand (not a parameter: a global pointer's
                // element is a load, not a fragment).
                "subscript_expression" => (Link::Made, value.field("argument")?),
                _ => return None,
            };
            let next = base_decl(from, decl)
                .filter(|n| value.kind() != "subscript_expression" || !n.parameter);
            // A pointer view of a raw byte buffer is a tile of its own.
            if matches!(link, Link::View) && next.is_some_and(|n| is_byte_buffer(n, parsed)) {
                return None;
            }
            Some((link, next))
        });
        match step {
            Some((Link::View, next)) => match next {
                Some(next) => decl = next,
                None => break,
            },
            Some((Link::Made, next)) => {
                out.push(decl);
                match next {
                    Some(next) => decl = next,
                    None => break,
                }
            }
            None => {
                out.push(decl);
                break;
            }
        }
    }
    out
}

/// Whether a call partitions tensors it is given (`tma_partition`, `partition_S`),
/// as opposed to making them (`gmem_tensor_init(…, smem_base)`).
fn partitions(call: Node<'_>, parsed: &Parsed) -> bool {
    call.field("function")
        .is_some_and(|f| crate::names::callee_name(f, &parsed.masked).contains("partition"))
}

/// Whether `value` initializes a structured binding (`auto [a, b] = value;`).
fn is_binding(value: Node<'_>) -> bool {
    value.parent().is_some_and(|p| {
        p.kind() == "init_declarator"
            && p.field("declarator")
                .is_some_and(|d| d.kind() == "structured_binding_declarator")
    })
}

/// Adds an operand's chain (`operand_chain`) as "feeds operand" sites, each
/// declaration and name once (`seen`).
fn push_chain<'t>(
    chain: &[&Decl<'t>],
    (letter, mma_line): (char, usize),
    seen: &mut BTreeSet<(usize, String)>,
    sites: &mut Vec<Found<'t>>,
) {
    for link in chain {
        if seen.insert((link.node.id(), link.name.clone())) {
            sites.push(Found {
                kind: SiteKind::Operand,
                node: link.node,
                confidence: Confidence::Medium,
                note: Some(format!(
                    "feeds operand {letter} of the MMA at line {mma_line}: `{}`",
                    link.name
                )),
            });
        }
    }
}

/// Whether a declaration is shared storage itself: a `__shared__` array, a tensor
/// over a shared pointer (`make_tensor(make_smem_ptr(…), layout)`), or a typed pointer
/// carved out of a raw byte buffer.
fn is_storage(decl: &Decl<'_>, scope: &Scope<'_>, parsed: &Parsed) -> bool {
    let declared_shared = crate::blanks_around(parsed, decl.node)
        .iter()
        .any(|b| matches!(&b.kind, kwb_syntax::BlankKind::Macro(n) if n == "__shared__"));
    if declared_shared {
        return true;
    }
    let Some(value) = decl.value.map(crate::fma::strip) else {
        return false;
    };
    let text = &parsed.masked[value.byte_range()];
    if text.starts_with("make_tensor") || text.starts_with("cute::make_tensor(") {
        return text.contains("make_smem_ptr");
    }
    // A tile the kernel's shared-storage object hands out (`shared_storage.tensor_sA()`,
    // `storage.smem_A.data()`): an accessor of the shared allocation.
    if value.kind() == "call_expression"
        && value
            .field("function")
            .is_some_and(|f| f.kind() == "field_expression")
    {
        let object = text
            .split(['.', '-'])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if decl.shared && (object.contains("storage") || object.contains("smem")) {
            return true;
        }
    }
    let from = match value.kind() {
        "cast_expression" => value.field("value"),
        "call_expression" if text.contains("_cast") => {
            value.field("arguments").and_then(|a| a.named_child(0))
        }
        _ => None,
    };
    let is_local = |n: &str| scope.has(n);
    from.and_then(|f| crate::names::base_identifier(f, &parsed.masked, &is_local))
        .and_then(|b| scope.lookup(&parsed.masked[b.byte_range()], b.start_byte()))
        .is_some_and(|d| is_byte_buffer(d, parsed))
}

/// Whether a declaration is a raw byte buffer (`extern __shared__ char smem[]`,
/// `uint8_t* smem_raw`) that typed tiles are carved out of.
fn is_byte_buffer(decl: &Decl<'_>, parsed: &Parsed) -> bool {
    let ty = decl
        .node
        .field("type")
        .map_or("", |t| &parsed.masked[t.byte_range()]);
    let ty = ty.trim_start_matches("const ").trim();
    matches!(
        ty,
        "char" | "unsigned char" | "uint8_t" | "int8_t" | "std::byte" | "std::uint8_t" | "void"
    )
}

/// The names a `copy(…, dst)` call of the function writes (its last argument's base:
/// `copy(tCsA(_, _, k_block, pipe), tCrA(_, _, k_block))` writes `tCrA`). A fragment
/// made from a shared tensor (`tCrA = thr_mma.make_fragment_A(tCsA(_, _, _, 0))`) that
/// a copy fills holds its own values in registers (an SM80 MMA's fragment), where one
/// nothing writes is a descriptor view of the shared tensor (an SM90 GMMA's).
fn copy_destinations(
    calls: &[(Node<'_>, String)],
    scope: &Scope<'_>,
    parsed: &Parsed,
) -> BTreeSet<String> {
    let is_local = |n: &str| scope.has(n);
    calls
        .iter()
        .filter(|(_, name)| name == "copy")
        .filter_map(|(call, _)| {
            let arguments = call.field("arguments")?;
            let last = arguments.named_child(arguments.named_child_count().checked_sub(1)?)?;
            let base = crate::names::base_identifier(last, &parsed.masked, &is_local)?;
            Some(parsed.masked[base.byte_range()].to_owned())
        })
        .collect()
}

/// The declaration that holds an operand's values, and the chain that led there: the
/// views it is made from, followed (at most four), up to one a copy fills
/// (`copied_into`), whose values are its own.
fn operand_holder<'s, 't>(
    scope: &'s Scope<'t>,
    decl: &'s Decl<'t>,
    letter: char,
    mma_line: usize,
    copied_into: &BTreeSet<String>,
    parsed: &Parsed,
) -> (&'s Decl<'t>, String) {
    let line = |d: &Decl<'_>| d.node.start_position().row + 1;
    let mut chain = vec![format!("`{}` (line {})", decl.name, line(decl))];
    let mut holder = decl;
    let mut depth = 0;
    while let Some(next) =
        viewed_tensor(scope, holder, parsed).filter(|_| !copied_into.contains(&holder.name))
    {
        chain.push(format!("`{}` (line {})", next.name, line(next)));
        holder = next;
        depth += 1;
        if depth == 4 {
            break;
        }
    }
    // `auto [tiled_mma, tCrA, tCrB] = mma_inputs;`: unpacked from a parameter, whatever
    // the values are (UMMA descriptors, fragments) the caller made them.
    let unpacked_parameter = holder
        .value
        .filter(|v| v.kind() == "identifier")
        .and_then(|v| scope.lookup(&parsed.masked[v.byte_range()], v.start_byte()))
        .is_some_and(|d| d.parameter);
    let place = if holder.shared {
        "shared memory"
    } else if holder.parameter || unpacked_parameter {
        "a parameter"
    } else {
        "registers"
    };
    let note = if depth > 0 {
        format!(
            "operand {letter} of the MMA at line {mma_line}: consumed through the descriptor/fragment view {}; values live in {place}",
            chain.join(" → ")
        )
    } else {
        format!(
            "operand {letter} of the MMA at line {mma_line}: `{}`, values in {place}",
            decl.name
        )
    };
    (holder, note)
}

/// Statements after `after` that read an accumulator — where it is scaled,
/// converted, reduced, staged or stored — followed to a fixpoint through what they
/// write: a value declared from it (`float v0 = alpha * acc[i];`), a variable or
/// array assigned from it (`smem_c[…] = acc[i];`, `sum += __shfl_xor_sync(…, sum, 1)`),
/// and the destinations of a call that reads it (`copy(r2s, tRS_rD, tRS_sD)`,
/// `memcpy(&pk, q, …)`), so a store through shared memory, a shuffle reduction or a
/// TMA store of the staged tile is epilogue too. Copy objects, layouts, descriptors
/// and barriers passed beside the values are not followed.
fn epilogue_reads<'t>(
    body: Node<'t>,
    after: usize,
    accumulators: &[String],
    scope: &Scope<'t>,
    parsed: &Parsed,
    sites: &mut Vec<Found<'t>>,
) {
    let mut names: Vec<(String, Option<String>)> =
        accumulators.iter().map(|a| (a.clone(), None)).collect();
    let mut tainted: BTreeSet<String> = accumulators.iter().cloned().collect();
    let mut seen: BTreeSet<usize> = BTreeSet::new();
    let mut round = 0;
    while round < 8 && !names.is_empty() {
        round += 1;
        let mut derived: Vec<(String, Option<String>)> = Vec::new();
        let mut found = statements_reading(body, after, &names, parsed);
        found.sort_by_key(|(s, _)| s.start_byte());
        for (statement, (name, from)) in found {
            if !seen.insert(statement.id()) {
                continue;
            }
            // A store into a shared array of values made from the accumulator was
            // read as a load (global data, by the look of it, into shared memory): it
            // is the epilogue staging its tile.
            sites.retain(|s| {
                !(s.kind == SiteKind::OperandLoad
                    && s.note.as_deref() == Some(PLAIN_SHARED_STORE)
                    && mainloop::contains(statement, s.node))
            });
            let overlaps = |s: &Found<'_>| {
                mainloop::contains(statement, s.node) || mainloop::contains(s.node, statement)
            };
            let excluded = parsed.masked[statement.byte_range()]
                .trim_start()
                .starts_with("warpgroup_")
                || sites
                    .iter()
                    .any(|s| s.kind != SiteKind::Epilogue && overlaps(s));
            if excluded {
                continue;
            }
            let origin = from.clone().unwrap_or_else(|| name.clone());
            for written in written_by(statement, name, scope, parsed) {
                if tainted.insert(written.clone()) {
                    derived.push((written, Some(origin.clone())));
                }
            }
            // Already an epilogue site (an epilogue callback's call found by its
            // name, `cst_callbacks.visit(…)`): what it writes is followed all the same.
            if sites.iter().any(overlaps) {
                continue;
            }
            // A view or a copy object made from the values (`retile_S(acc)`,
            // `make_fragment_like(acc)`, `make_tmem_copy(atom, tAcc)`) moves no value:
            // followed, not reported.
            if statement.kind() == "declaration" && !declares_values(statement, parsed) {
                continue;
            }
            let note = match &from {
                None if after == body.start_byte() => {
                    format!("computes from the accumulator fragment `{name}` it receives")
                }
                None => format!("reads the accumulator `{name}` after the mainloop"),
                Some(acc) => format!("uses `{name}`, computed from the accumulator `{acc}`"),
            };
            sites.push(Found {
                kind: SiteKind::Epilogue,
                node: statement,
                confidence: Confidence::Medium,
                note: Some(note),
            });
        }
        names = derived;
    }
}

/// The names a statement that reads `read` writes values derived from it into: the
/// names it declares, the base of what it assigns, and the destinations among a
/// call's arguments.
fn written_by(statement: Node<'_>, read: &str, scope: &Scope<'_>, parsed: &Parsed) -> Vec<String> {
    let is_local = |name: &str| scope.has(name);
    let text = |n: Node<'_>| parsed.masked[n.byte_range()].to_owned();
    let mut out = Vec::new();
    if statement.kind() == "declaration" {
        out.extend(
            scope
                .decls()
                .iter()
                .filter(|d| d.node.id() == statement.id() && holds_values(d, parsed))
                .map(|d| d.name.clone()),
        );
        return out;
    }
    let Some(expr) = statement.named_child(0) else {
        return out;
    };
    match expr.kind() {
        "assignment_expression" => {
            // A store through a `const` struct's pointer field (`task.out[i] = v`)
            // writes the pointee, not the struct.
            if let Some(base) = expr
                .field("left")
                .and_then(|l| crate::names::base_identifier(l, &parsed.masked, &is_local))
                .filter(|b| {
                    scope
                        .lookup(&parsed.masked[b.byte_range()], b.start_byte())
                        .is_none_or(|d| !is_const(d.node, parsed))
                })
            {
                let name = text(base);
                // Values stored through a view (`tRS_rD_frg(i) = …` with `tRS_rD_frg =
                // recast<…>(tRS_rD)`) are in the viewed tensor too.
                if let Some(viewed) = view_of(&name, base.start_byte(), scope, parsed) {
                    out.push(viewed);
                }
                out.push(name);
            }
        }
        "call_expression" => {
            let Some(arguments) = expr.field("arguments") else {
                return out;
            };
            let mut cursor = arguments.walk();
            for arg in arguments.named_children(&mut cursor) {
                // A member read off an object (`scheduler.m_boundary`) receives nothing.
                if arg.kind() == "field_expression" {
                    continue;
                }
                let Some(base) = crate::names::base_identifier(arg, &parsed.masked, &is_local)
                else {
                    continue;
                };
                let name = text(base);
                if name != read
                    && !is_constant_name(&name)
                    && !is_index(&name, base.start_byte(), scope, parsed)
                    && !names_an_index(&name)
                    && carries_values(&name, base.start_byte(), scope, parsed)
                {
                    out.push(name);
                }
            }
        }
        _ => {}
    }
    out
}

/// Whether a declaration makes a value (`float v = alpha * acc[i]`, `auto p = smem_c +
/// off`), not a view of one (`retile_S(acc)`, `acc(_, m, n)`, `recast<…>(acc)`) or a
/// copy object.
fn declares_values(statement: Node<'_>, parsed: &Parsed) -> bool {
    const VIEWS: [&str; 14] = [
        "retile_S",
        "retile_D",
        "partition_S",
        "partition_D",
        "partition_C",
        "partition_fragment_C",
        "make_fragment_like",
        "make_tensor_like",
        "make_tensor",
        "recast",
        "local_tile",
        "flat_divide",
        "group_modes",
        "coalesce",
    ];
    let mut cursor = statement.walk();
    let values: Vec<Node<'_>> = statement
        .children_by_field_name("declarator", &mut cursor)
        .filter_map(|d| d.field("value"))
        .collect();
    values.iter().all(|value| {
        if value.kind() != "call_expression" {
            return true;
        }
        let Some(function) = value.field("function") else {
            return true;
        };
        let callee = crate::names::callee_name(function, &parsed.masked);
        let slicing = slices(*value, parsed);
        let lower = callee.to_ascii_lowercase();
        !(VIEWS.contains(&callee) || slicing || NOT_VALUES.iter().any(|w| lower.contains(w)))
    })
}

/// Whether a call passes CuTe's `_` (`tAcc(_, m, n)`): a slice of a tensor.
fn slices(call: Node<'_>, parsed: &Parsed) -> bool {
    let Some(arguments) = call.field("arguments") else {
        return false;
    };
    let mut cursor = arguments.walk();
    let mut args = arguments.named_children(&mut cursor);
    args.any(|n| &parsed.masked[n.byte_range()] == "_")
}

/// The tensor `name` (declared before `at`) is a view of — `recast<…>(X)`,
/// `retile_S(X)`/`retile_D(X)`, `group_modes<…>(X)`, a slice `X(_, _, i)` — by name.
fn view_of(name: &str, at: usize, scope: &Scope<'_>, parsed: &Parsed) -> Option<String> {
    let value = crate::fma::strip(scope.lookup(name, at)?.value?);
    if value.kind() != "call_expression" {
        return None;
    }
    let function = value.field("function")?;
    let callee = crate::names::callee_name(function, &parsed.masked);
    let is_view = callee == "recast"
        || callee.starts_with("retile")
        || matches!(callee, "group_modes" | "coalesce" | "flatten")
        || slices(value, parsed);
    if !is_view {
        return None;
    }
    let first = if slices(value, parsed) && function.kind() == "identifier" {
        function
    } else {
        value.field("arguments")?.named_child(0)?
    };
    let is_local = |n: &str| scope.has(n);
    let base = crate::names::base_identifier(first, &parsed.masked, &is_local)?;
    let viewed = &parsed.masked[base.byte_range()];
    (viewed != name && scope.has(viewed)).then(|| viewed.to_owned())
}

/// `SHAPE_N`, `kNumTokens`, `BLOCK_M`: a compile-time constant, never written.
fn is_constant_name(name: &str) -> bool {
    let mut chars = name.chars();
    let all_caps = name
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    all_caps || (chars.next() == Some('k') && chars.next().is_some_and(|c| c.is_ascii_uppercase()))
}

/// `m_global_idx`, `row_offset`, `lane_id`, `num_tiles`: an index or a count by its
/// name, whatever its declared type (`auto`).
fn names_an_index(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let last = lower.rsplit('_').next().unwrap_or(&lower);
    matches!(
        last,
        "idx" | "index" | "id" | "offset" | "off" | "size" | "stride" | "count" | "row" | "col"
    ) || lower.starts_with("num_")
        || lower.ends_with("idx")
}

/// Whether a name is declared as a plain integer or flag (an index or a count passed
/// beside the values), not a pointer or an array.
fn is_index(name: &str, at: usize, scope: &Scope<'_>, parsed: &Parsed) -> bool {
    let Some(decl) = scope.lookup(name, at) else {
        return false;
    };
    let ty = decl
        .node
        .field("type")
        .map_or("", |t| &parsed.masked[t.byte_range()]);
    let integer = ["int", "bool", "size_t", "unsigned", "long", "short", "char"]
        .iter()
        .any(|w| ty.contains(w));
    let declarator = decl
        .node
        .field("declarator")
        .map_or("", |d| &parsed.masked[d.byte_range()]);
    integer && !declarator.contains('*') && !declarator.contains('[')
}

/// Words in a name, a declared type or a maker that say the thing is no value: a copy
/// object, a layout, a descriptor, a barrier or a pipeline.
const NOT_VALUES: [&str; 9] = [
    "copy",
    "layout",
    "shape",
    "stride",
    "tma",
    "tensormap",
    "barrier",
    "pipeline",
    "desc",
];

/// Whether a name passed beside the accumulator's values may receive them.
fn carries_values(name: &str, at: usize, scope: &Scope<'_>, parsed: &Parsed) -> bool {
    let lower = name.to_ascii_lowercase();
    !NOT_VALUES.iter().any(|w| lower.contains(w))
        && scope
            .lookup(name, at)
            .is_none_or(|decl| declared_as_values(decl, parsed) && !is_const(decl.node, parsed))
}

/// Whether a declaration's type and maker (`auto t = make_tiled_copy_C(…)`) leave it
/// a possible holder of values.
fn declared_as_values(decl: &Decl<'_>, parsed: &Parsed) -> bool {
    let ty = decl
        .node
        .field("type")
        .map_or("", |t| &parsed.masked[t.byte_range()]);
    // The maker's own name: `thr_copy.partition_S(acc)` is a view of values, made by
    // a copy object.
    let maker = decl
        .value
        .filter(|v| v.kind() == "call_expression")
        .and_then(|v| v.field("function"))
        .map_or("", |f| crate::names::callee_name(f, &parsed.masked));
    let described = format!("{} {ty} {maker}", decl.name).to_ascii_lowercase();
    !NOT_VALUES.iter().any(|w| described.contains(w))
}

/// Whether a declaration is of a `const` object or pointee (`const Task& task`,
/// `Params const& p`): it cannot receive values.
fn is_const(decl: Node<'_>, parsed: &Parsed) -> bool {
    let Some(declarator) = decl.field("declarator") else {
        return false;
    };
    let head = &parsed.masked[decl.start_byte()..declarator.start_byte()];
    let pointer_to_mutable = parsed.masked[declarator.byte_range()]
        .trim_start()
        .starts_with('*')
        && !head.contains("const");
    head.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w == "const")
        && !pointer_to_mutable
        && !parsed.masked[declarator.byte_range()].contains("* const")
}

/// Whether a declaration made from the accumulator holds its values (a scalar, a
/// pointer into a staged tile, a tensor view such as `partition_S(tCtAcc)`), not a
/// copy object, a layout or a descriptor (by its declared type and its maker).
fn holds_values(decl: &Decl<'_>, parsed: &Parsed) -> bool {
    let ty = decl
        .node
        .field("type")
        .map_or("", |t| &parsed.masked[t.byte_range()]);
    let lower = ty.to_ascii_lowercase();
    let scalar = FLOATING
        .iter()
        .chain(&["int", "uint"])
        .any(|s| lower.contains(s));
    scalar || declared_as_values(decl, parsed)
}

/// Words in a declared type that make it a floating-point scalar or vector.
const FLOATING: [&str; 8] = [
    "float", "half", "bf16", "bfloat", "double", "tfloat", "e4m3", "e5m2",
];

/// The values the epilogue brings in beside the accumulator: a local declared after
/// the mainloop (`float bias_lo = __bfloat162float(sh_bias[tm - mib]);`, `float scale =
/// *scale_ptr;`) that an epilogue statement adds to, subtracts from, multiplies or
/// divides with the accumulator's values. Its declaration is an epilogue site. Indices,
/// counts, constants and objects that hold no values are not.
fn epilogue_side_inputs<'t>(
    after: usize,
    scope: &Scope<'t>,
    parsed: &Parsed,
    sites: &mut Vec<Found<'t>>,
) {
    let readers: Vec<Node<'t>> = sites
        .iter()
        .filter(|f| {
            f.kind == SiteKind::Epilogue
                && f.note
                    .as_deref()
                    .is_some_and(|n| n.starts_with("reads the accumulator"))
        })
        .map(|f| f.node)
        .collect();
    let mut added: BTreeSet<usize> = sites
        .iter()
        .filter(|f| f.kind == SiteKind::Epilogue)
        .map(|f| f.node.id())
        .collect();
    for reader in readers {
        let line = reader.start_position().row + 1;
        let mut stack = vec![reader];
        while let Some(node) = stack.pop() {
            for k in 0..node.named_child_count() {
                if let Some(child) = node.named_child(k) {
                    stack.push(child);
                }
            }
            if node.kind() != "binary_expression"
                || !matches!(
                    node.field("operator").map(|o| o.kind()),
                    Some("+" | "-" | "*" | "/")
                )
            {
                continue;
            }
            for side in ["left", "right"] {
                let Some(operand) = node.field(side).map(crate::fma::strip) else {
                    continue;
                };
                if operand.kind() != "identifier" {
                    continue;
                }
                let name = &parsed.masked[operand.byte_range()];
                if is_constant_name(name)
                    || names_an_index(name)
                    || is_index(name, operand.start_byte(), scope, parsed)
                {
                    continue;
                }
                let Some(decl) = scope.lookup(name, operand.start_byte()) else {
                    continue;
                };
                // A loop's own counter (`for (auto i = 0; …)`) is an index.
                let counter = decl
                    .node
                    .parent()
                    .is_some_and(|p| matches!(p.kind(), "for_statement" | "for_range_loop"))
                    || decl.value.is_some_and(|v| v.kind() == "number_literal");
                if decl.parameter
                    || counter
                    || decl.node.start_byte() < after
                    || decl.value.is_none()
                    || !declared_as_values(decl, parsed)
                    || !is_floating(decl, parsed)
                    || !added.insert(decl.node.id())
                {
                    continue;
                }
                sites.push(Found {
                    kind: SiteKind::Epilogue,
                    node: decl.node,
                    confidence: Confidence::Medium,
                    note: Some(format!(
                        "reads `{name}`, which the epilogue combines with the accumulator's values at line {line}"
                    )),
                });
            }
        }
    }
}

/// Whether a declaration's type is a floating-point scalar or vector (`float`,
/// `__half2`, `bf16`, `double`), or `auto`.
fn is_floating(decl: &Decl<'_>, parsed: &Parsed) -> bool {
    let ty = decl
        .node
        .field("type")
        .map_or("", |t| &parsed.masked[t.byte_range()])
        .to_ascii_lowercase();
    ty == "auto" || FLOATING.iter().any(|w| ty.contains(w))
}

/// Statements after `after` that mention one of `names`, each with the first name
/// it mentions, in no set order.
fn statements_reading<'t, 'n>(
    body: Node<'t>,
    after: usize,
    names: &'n [(String, Option<String>)],
    parsed: &Parsed,
) -> Vec<(Node<'t>, &'n (String, Option<String>))> {
    let mut out: Vec<(Node<'t>, &(String, Option<String>))> = Vec::new();
    let mut stack = vec![body];
    while let Some(node) = stack.pop() {
        if node.end_byte() <= after {
            continue;
        }
        if node.kind() == "identifier"
            && node.start_byte() >= after
            && let Some(name) = names
                .iter()
                .find(|(n, _)| n == &parsed.masked[node.byte_range()])
            && !is_metadata_use(node, parsed)
            && !is_declared_name(node)
            && let Some(statement) = enclosing_statement(node, body)
            && !out.iter().any(|(s, _)| s.id() == statement.id())
        {
            out.push((statement, name));
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    out
}

/// Whether an identifier is the name a declaration introduces (`float4 accum4;`),
/// which reads nothing.
fn is_declared_name(node: Node<'_>) -> bool {
    let mut child = node;
    while let Some(parent) = child.parent() {
        match parent.kind() {
            "array_declarator"
            | "pointer_declarator"
            | "reference_declarator"
            | "init_declarator"
            | "declaration"
            | "parameter_declaration" => {
                if parent.field("declarator") != Some(child) {
                    return false;
                }
                if matches!(parent.kind(), "declaration" | "parameter_declaration") {
                    return true;
                }
                child = parent;
            }
            _ => return false,
        }
    }
    false
}

/// Whether `node` is only asked for its shape (`size<0>(tRS_rAcc)`, `layout(acc)`),
/// which reads no value.
fn is_metadata_use(node: Node<'_>, parsed: &Parsed) -> bool {
    let Some(call) = node
        .parent()
        .filter(|p| p.kind() == "argument_list")
        .and_then(|p| p.parent())
        .filter(|c| c.kind() == "call_expression")
    else {
        return false;
    };
    let Some(function) = call.field("function") else {
        return false;
    };
    matches!(
        crate::names::callee_name(function, &parsed.masked),
        "size"
            | "shape"
            | "layout"
            | "rank"
            | "stride"
            | "cosize"
            | "depth"
            | "get"
            | "CUTE_STATIC_ASSERT"
            | "static_assert"
            | "decltype"
            | "sizeof"
    )
}

fn enclosing_statement<'t>(node: Node<'t>, body: Node<'t>) -> Option<Node<'t>> {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.id() == body.id() {
            return None;
        }
        if matches!(
            n.kind(),
            "expression_statement" | "declaration" | "return_statement"
        ) {
            return Some(n);
        }
        current = n.parent();
    }
    None
}

/// Adds calls of same-file functions that wrap a site of `kind` as sites of `kind`.
/// An MMA wrapper issues its MMAs outside any K-tile loop (one MMA step, not a GEMM
/// with its own mainloop); a load wrapper issues no MMA; a sync wrapper is a
/// small helper holding nothing but syncs.
fn add_wrapper_calls<'t>(
    parsed: &Parsed,
    functions: &[Function<'t>],
    calls: &[Vec<(Node<'t>, String)>],
    found: &mut [Vec<Found<'t>>],
    kind: SiteKind,
) {
    for _round in 0..2 {
        let wrappers: Vec<(String, usize)> = functions
            .iter()
            .zip(found.iter())
            .filter(|(f, sites)| {
                let direct: Vec<_> = sites.iter().filter(|s| s.kind == kind).collect();
                !direct.is_empty()
                    && !matches!(f.role, "global" | "host")
                    && match kind {
                        SiteKind::Mma => direct
                            .iter()
                            .all(|s| mainloop::no_k_tile_loop(s.node, f.node, parsed)),
                        // A small helper around a wait or barrier, not a function that
                        // merely contains one.
                        SiteKind::Sync => {
                            sites.iter().all(|s| s.kind == SiteKind::Sync)
                                && f.node.end_position().row - f.node.start_position().row <= 20
                        }
                        _ => !sites.iter().any(|s| s.kind == SiteKind::Mma),
                    }
            })
            .map(|(f, _)| (f.simple_name.clone(), f.node.start_position().row + 1))
            .collect();
        let mut added = false;
        for (i, function) in functions.iter().enumerate() {
            for (call, name) in &calls[i] {
                let Some((_, line)) = wrappers.iter().find(|(w, _)| w == name) else {
                    continue;
                };
                if *name == function.simple_name
                    || found[i].iter().any(|s| s.node.id() == call.id())
                {
                    continue;
                }
                let what = match kind {
                    SiteKind::Mma => "issues the MMA",
                    SiteKind::Sync => "waits or synchronizes",
                    _ => "loads operand tiles",
                };
                found[i].push(Found {
                    kind,
                    node: *call,
                    confidence: Confidence::Medium,
                    note: Some(format!("calls `{name}` (line {line}), which {what}")),
                });
                added = true;
            }
        }
        if !added {
            break;
        }
    }
}

/// Adds calls of lambdas a function declares (`auto empty_barrier_arrive = [&](int s)
/// { … arrive() … };`, `auto copy_ab_s2r = [&](auto k) { copy(…); };`, `auto
/// gemm_kblock = [&](auto k) { cute::gemm(…); };`) whose bodies hold sites of `kind`
/// and nothing else, as sites of `kind`.
fn add_lambda_calls<'t, 'l>(
    lambdas: &dyn Fn(usize) -> &'l [(String, Node<'t>)],
    calls: &[Vec<(Node<'t>, String)>],
    found: &mut [Vec<Found<'t>>],
    kind: SiteKind,
) where
    't: 'l,
{
    for i in 0..found.len() {
        if found[i].is_empty() {
            continue;
        }
        for (name, lambda) in lambdas(i) {
            let (name, lambda) = (name.as_str(), *lambda);
            let inside: Vec<&Found<'t>> = found[i]
                .iter()
                .filter(|f| mainloop::contains(lambda, f.node))
                .collect();
            // An MMA lambda issues tensor-core MMAs; one of scalar accumulates is more
            // likely a promotion of partial sums (`rescale()`), which derive sorts out.
            let wraps = !inside.is_empty()
                && inside.iter().all(|f| {
                    f.kind == kind
                        && (kind != SiteKind::Mma
                            || !matches!(
                                f.node.kind(),
                                "assignment_expression" | "init_declarator"
                            ))
                });
            if !wraps {
                continue;
            }
            let line = lambda.start_position().row + 1;
            let what = match kind {
                SiteKind::Mma => "issues the MMA",
                SiteKind::Sync => "waits or synchronizes",
                _ => "loads operand tiles",
            };
            for (call, callee) in &calls[i] {
                if *callee != name
                    || mainloop::contains(lambda, *call)
                    || found[i].iter().any(|f| f.node.id() == call.id())
                {
                    continue;
                }
                found[i].push(Found {
                    kind,
                    node: *call,
                    confidence: Confidence::Medium,
                    note: Some(format!(
                        "calls the lambda `{name}` (line {line}), which {what}"
                    )),
                });
            }
        }
    }
}

/// A function's lambdas by name, in declaration order.
type Lambdas<'t> = Vec<(String, Node<'t>)>;

/// The lambdas a function declares by name (`auto tma_store_fn = [&](…) { … };`).
fn lambdas_of<'t>(declarations: &[Node<'t>], parsed: &Parsed) -> Lambdas<'t> {
    let mut lambdas = Vec::new();
    for &decl in declarations {
        // A lambda's introducer is a `[`: a declaration without one declares none.
        if decl.kind() != "declaration" || !parsed.masked[decl.byte_range()].contains('[') {
            continue;
        }
        let mut cursor = decl.walk();
        for declarator in decl.children_by_field_name("declarator", &mut cursor) {
            let (Some(name), Some(value)) =
                (declarator.field("declarator"), declarator.field("value"))
            else {
                continue;
            };
            if value.kind() == "lambda_expression" && name.kind() == "identifier" {
                lambdas.push((parsed.masked[name.byte_range()].to_owned(), value));
            }
        }
    }
    lambdas
}

/// Adds calls of lambdas whose bodies store the epilogue's values (epilogue sites,
/// with the waits and fences around them and nothing of another stage), as CUTLASS's
/// `tma_store_fn(epi_m, epi_n)`, as epilogue sites: where the tile is written.
fn add_epilogue_lambda_calls<'t, 'l>(
    lambdas: &dyn Fn(usize) -> &'l [(String, Node<'t>)],
    calls: &[Vec<(Node<'t>, String)>],
    derived: &mut [Vec<Found<'t>>],
) where
    't: 'l,
{
    for i in 0..derived.len() {
        if !derived[i].iter().any(|f| f.kind == SiteKind::Epilogue) {
            continue;
        }
        for (name, lambda) in lambdas(i) {
            let (name, lambda) = (name.as_str(), *lambda);
            let inside: Vec<SiteKind> = derived[i]
                .iter()
                .filter(|f| mainloop::contains(lambda, f.node))
                .map(|f| f.kind)
                .collect();
            let stores = inside.contains(&SiteKind::Epilogue)
                && inside
                    .iter()
                    .all(|k| matches!(k, SiteKind::Epilogue | SiteKind::Sync));
            if !stores {
                continue;
            }
            let line = lambda.start_position().row + 1;
            for (call, callee) in &calls[i] {
                if *callee != name
                    || mainloop::contains(lambda, *call)
                    || derived[i].iter().any(|f| f.node.id() == call.id())
                {
                    continue;
                }
                derived[i].push(Found {
                    kind: SiteKind::Epilogue,
                    node: *call,
                    confidence: Confidence::Medium,
                    note: Some(format!(
                        "calls the lambda `{name}` (line {line}), which stores the epilogue's values"
                    )),
                });
            }
        }
    }
}

/// A function's calls with the callee's last name component, in source order.
fn calls_in<'t>(calls: &[Node<'t>], parsed: &Parsed) -> Vec<(Node<'t>, String)> {
    let mut out: Vec<(Node<'t>, String)> = calls
        .iter()
        .filter_map(|&node| {
            let function = node.field("function")?;
            let name = crate::names::callee_name(function, &parsed.masked);
            Some((node, name.to_owned()))
        })
        .collect();
    out.sort_by_key(|(n, _)| n.start_byte());
    out
}

/// The A and B arguments of each MMA call among `sites`, read as the map reads its
/// roles; a call with neither is left out.
fn mma_arguments<'t>(
    sites: &[Found<'t>],
    parsed: &Parsed,
    scope: &Scope<'t>,
    param_roles: &mma::ParamRoles,
    memo: &mma::Memo<'t>,
) -> Vec<MmaArguments> {
    let mut out: Vec<MmaArguments> = Vec::new();
    for s in sites
        .iter()
        .filter(|s| s.kind == SiteKind::Mma && s.node.kind() == "call_expression")
    {
        let roles = mma::roles_with(s.node, parsed, scope, param_roles, memo);
        let Some(arguments) = s.node.field("arguments") else {
            continue;
        };
        let mut found = MmaArguments {
            call: s.node.byte_range(),
            ..MmaArguments::default()
        };
        for (letter, base) in roles.operands {
            // The whole argument the operand's name sits in.
            let mut node = base;
            while let Some(parent) = node.parent()
                && parent.id() != arguments.id()
            {
                node = parent;
            }
            if node.parent().map(|p| p.id()) != Some(arguments.id()) {
                continue;
            }
            let list = if letter == 'A' {
                &mut found.a
            } else {
                &mut found.b
            };
            if !list.contains(&node.byte_range()) {
                list.push(node.byte_range());
            }
        }
        if (!found.a.is_empty() || !found.b.is_empty()) && !out.iter().any(|o| o.call == found.call)
        {
            out.push(found);
        }
    }
    out
}

fn kernel(function: &Function<'_>, found: Vec<Found<'_>>, parsed: &Parsed) -> Kernel {
    let mut sites: Vec<Site> = found.into_iter().map(|f| site(f, parsed)).collect();
    sites.sort_by(|a, b| {
        (a.range.start, a.kind, a.range.end).cmp(&(b.range.start, b.kind, b.range.end))
    });
    // Same kind and range is one site, except operands: one declaration can hold the
    // fragments of both A and B, each with its own note.
    sites.dedup_by(|a, b| {
        a.kind == b.kind && a.range == b.range && (a.kind != SiteKind::Operand || a.note == b.note)
    });
    let range = function.node.byte_range();
    let has_device_sites = sites.iter().any(|s| {
        matches!(
            s.kind,
            SiteKind::Mma | SiteKind::OperandLoad | SiteKind::Mainloop
        )
    });
    Kernel {
        name: function.name.clone(),
        line: function.node.start_position().row + 1,
        end_line: function.node.end_position().row + 1,
        role: match function.role {
            // The program's entry runs on the host whatever it calls (a `gemm(...)`
            // launcher call reads as an MMA by name).
            "unknown" if function.name == "main" => "host",
            "unknown" if has_device_sites => "device",
            "unknown" => "host",
            role => role,
        },
        template_params: function.template_params.clone(),
        sites,
        syntax_errors: parsed.diagnostics_in(range.clone()).len(),
        range,
        mma_arguments: Vec::new(),
    }
}

fn site(found: Found<'_>, parsed: &Parsed) -> Site {
    let start = found.node.start_position();
    let line_start = parsed.source[..found.node.start_byte()]
        .rfind('\n')
        .map_or(0, |p| p + 1);
    let line_end = parsed.source[line_start..]
        .find('\n')
        .map_or(parsed.source.len(), |p| line_start + p);
    Site {
        kind: found.kind,
        line: start.row + 1,
        end_line: found.node.end_position().row + 1,
        column: start.column + 1,
        text: parsed.source[line_start..line_end].trim().to_owned(),
        confidence: found.confidence,
        note: found.note,
        range: found.node.byte_range(),
    }
}
