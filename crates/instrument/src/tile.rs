//! Each record's CTA tile origin (`tile_m`, `tile_n`): the kernel's own locals that
//! hold the first output row and column of its tile, named as in
//! `grammars/tile_origins.txt` and computed from `blockIdx`
//! (`const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;`).
//!
//! A megakernel task's origin is a field of the task struct it takes by value or
//! reference (`const Task& task` with `out_col`: `task.out_col`), when one parameter
//! gives it. A CuTe kernel's origin comes from its CTA coordinate and tiler instead
//! (`auto cta_coord = make_coord(blockIdx.y, blockIdx.x, _);` cut by
//! `local_tile(mC, cta_tiler, cta_coord, …)`): `get<0>(cta_coord) *
//! size<0>(cta_tiler)` and the same on mode 1.
//!
//! Invariant: a probe names a local only where it is in scope (declared before the
//! probe, in a block that holds it), so the probe compiles wherever the kernel does;
//! everywhere else the record says -1.

use std::ops::Range;
use std::sync::OnceLock;

use kwb_syntax::Parsed;

use crate::nodes::enclosing;

/// What the probe texts write for the tile origin; [`Origins::text`] replaces it.
pub(crate) const TILE: &str = "/*kwb:tile*/-1, -1";

const TABLE: &str = include_str!("../../../grammars/tile_origins.txt");

/// The table: origin local names per axis, CuTe's coordinate and tiling functions, and
/// the calls that get a tile context.
#[derive(Default)]
pub(crate) struct Table {
    m: Vec<String>,
    n: Vec<String>,
    coord: Vec<String>,
    tile: Vec<String>,
    /// `context` lines: a call that is handed a work tile's coordinate.
    pub contexts: Vec<ContextCall>,
}

/// A call (`collective_mainloop.mma`) that is handed the work tile's coordinate
/// (`blk_coord`) and shape (`blk_shape`): before it, a tile context records the origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContextCall {
    /// The callee as written, without spaces.
    pub callee: String,
    /// The local holding the tile's coordinate (m, n, …).
    pub coord: String,
    /// The local holding the tile's shape (BLK_M, BLK_N, …).
    pub shape: String,
}

pub(crate) fn table() -> &'static Table {
    static TABLE_WORDS: OnceLock<Table> = OnceLock::new();
    TABLE_WORDS.get_or_init(|| {
        let mut t = Table::default();
        for line in TABLE.lines().map(str::trim) {
            let mut words = line.split_whitespace();
            let list = match words.next() {
                Some("m") => &mut t.m,
                Some("n") => &mut t.n,
                Some("coord") => &mut t.coord,
                Some("tile") => &mut t.tile,
                Some("context") => {
                    if let [callee, coord, shape] = words.collect::<Vec<_>>()[..] {
                        t.contexts.push(ContextCall {
                            callee: callee.to_owned(),
                            coord: coord.to_owned(),
                            shape: shape.to_owned(),
                        });
                    }
                    continue;
                }
                _ => continue,
            };
            list.extend(words.map(str::to_owned));
        }
        t
    })
}

/// One origin a probe can name.
#[derive(Debug, Clone)]
struct Origin {
    /// 0 for m, 1 for n.
    axis: usize,
    /// The int expression of it: `static_cast<int>(m0)`, or CuTe's product.
    expr: String,
    /// The block it is declared in, and where its declaration ends.
    scope: Range<usize>,
    after: usize,
}

/// The origin locals of the functions instrumented.
#[derive(Debug, Clone, Default)]
pub(crate) struct Origins(Vec<Origin>);

impl Origins {
    /// Adds the origin locals of the function definition at `range`.
    pub fn add(&mut self, parsed: &Parsed, range: &Range<usize>) {
        let Some(function) = parsed
            .tree
            .root_node()
            .descendant_for_byte_range(range.start, range.end)
        else {
            return;
        };
        let src = &parsed.source;
        let table = table();
        self.add_task_fields(parsed, function, table);
        // CuTe coordinates from blockIdx: (name, scope, end of declaration).
        let mut coords: Vec<(String, Range<usize>, usize)> = Vec::new();
        // Tiling calls: (tiler, coordinate).
        let mut tilings: Vec<(String, String)> = Vec::new();
        let mut stack = vec![function];
        while let Some(node) = stack.pop() {
            if node.kind() == "init_declarator"
                && let (Some(d), Some(v)) = (
                    node.child_by_field_name("declarator"),
                    node.child_by_field_name("value"),
                )
                && src[v.byte_range()].contains("blockIdx")
                && let Some(scope) = enclosing(node, "compound_statement")
            {
                let name = src[d.byte_range()].trim();
                let after = node.parent().unwrap_or(node).end_byte();
                let axis = if table.m.iter().any(|x| x == name) {
                    Some(0)
                } else if table.n.iter().any(|x| x == name) {
                    Some(1)
                } else {
                    None
                };
                if let Some(axis) = axis {
                    self.0.push(Origin {
                        axis,
                        expr: format!("static_cast<int>({name})"),
                        scope: scope.byte_range(),
                        after,
                    });
                } else if v.kind() == "call_expression"
                    && callee(src, v).is_some_and(|f| table.coord.contains(&f))
                {
                    coords.push((name.to_owned(), scope.byte_range(), after));
                }
            }
            if node.kind() == "call_expression"
                && callee(src, node).is_some_and(|f| table.tile.contains(&f))
                && let Some(args) = node.child_by_field_name("arguments")
            {
                let mut cursor = args.walk();
                let args: Vec<&str> = args
                    .named_children(&mut cursor)
                    .map(|a| src[a.byte_range()].trim())
                    .collect();
                if let [_, tiler, coord, ..] = args[..]
                    && is_identifier(tiler)
                {
                    tilings.push((tiler.to_owned(), coord.to_owned()));
                }
            }
            let mut cursor = node.walk();
            stack.extend(node.named_children(&mut cursor));
        }
        for (coord, scope, after) in coords {
            let Some((tiler, _)) = tilings.iter().find(|(_, c)| *c == coord) else {
                continue;
            };
            for axis in 0..2 {
                self.0.push(Origin {
                    axis,
                    expr: format!(
                        "static_cast<int>(cute::get<{axis}>({coord})) * static_cast<int>(cute::size<{axis}>({tiler}))"
                    ),
                    scope: scope.clone(),
                    after,
                });
            }
        }
    }

    /// The origin fields of the structs `function` takes as parameters (a megakernel
    /// task: `const Task& task` whose `Task` has `out_col`), in scope in its whole body;
    /// a local declared in the body wins over them.
    fn add_task_fields(&mut self, parsed: &Parsed, function: tree_sitter::Node<'_>, table: &Table) {
        let src = &parsed.source;
        // The function's declarator, under any pointer or reference declarators.
        let mut declarator = function.child_by_field_name("declarator");
        while let Some(d) = declarator
            && d.kind() != "function_declarator"
        {
            declarator = d.child_by_field_name("declarator");
        }
        let (Some(declarator), Some(body)) = (declarator, function.child_by_field_name("body"))
        else {
            return;
        };
        let Some(params) = declarator.child_by_field_name("parameters") else {
            return;
        };
        // (axis, expression) of each struct parameter passed by value or reference (a
        // pointer is another task: the next one, a list).
        let mut found: Vec<(usize, String)> = Vec::new();
        let mut cursor = params.walk();
        for param in params.named_children(&mut cursor) {
            let (Some(ty), Some(declarator)) = (
                param.child_by_field_name("type"),
                param.child_by_field_name("declarator"),
            ) else {
                continue;
            };
            if src[declarator.byte_range()].contains('*') {
                continue;
            }
            let Some(ty) = kwb_syntax::identifiers(&src[ty.byte_range()]).last() else {
                continue;
            };
            let Some(name) = kwb_syntax::identifiers(&src[declarator.byte_range()]).last() else {
                continue;
            };
            for (field, _) in kwb_syntax::struct_fields(parsed, ty).unwrap_or_default() {
                let axis = if table.m.contains(&field) {
                    0
                } else if table.n.contains(&field) {
                    1
                } else {
                    continue;
                };
                found.push((axis, format!("static_cast<int>({name}.{field})")));
            }
        }
        // Two parameters that could give one axis: neither is taken.
        for axis in 0..2 {
            if let [(_, expr)] = found.iter().filter(|(a, _)| *a == axis).collect::<Vec<_>>()[..] {
                self.0.push(Origin {
                    axis,
                    expr: expr.clone(),
                    scope: body.byte_range(),
                    after: body.start_byte(),
                });
            }
        }
    }

    /// `text` with [`TILE`] replaced by the origin locals in scope at byte `at`.
    pub fn text(&self, text: &str, at: usize) -> String {
        if !text.contains(TILE) {
            return text.to_owned();
        }
        let axis = |a: usize| {
            self.0
                .iter()
                .filter(|o| o.axis == a && o.after <= at && o.scope.contains(&at))
                .max_by_key(|o| o.after)
                .map_or_else(|| "-1".to_owned(), |o| o.expr.clone())
        };
        text.replace(TILE, &format!("{}, {}", axis(0), axis(1)))
    }
}

/// The name a call calls, without template arguments or namespace (`cute::make_coord`
/// and `make_coord<…>` are `make_coord`).
fn callee(src: &str, call: tree_sitter::Node<'_>) -> Option<String> {
    let function = call.child_by_field_name("function")?;
    let text = &src[function.byte_range()];
    let text = text.split('<').next()?;
    Some(text.rsplit("::").next()?.trim().to_owned())
}

fn is_identifier(text: &str) -> bool {
    !text.is_empty()
        && text.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !text.starts_with(|c: char| c.is_ascii_digit())
}
