//! One walk over the tree that files the nodes every later step needs under the
//! innermost function that holds them, so no step walks the tree again.

use tree_sitter::{Node, Tree};

/// Nodes of one function definition (nested function definitions keep their own).
#[derive(Default)]
pub struct Held<'t> {
    /// `declaration`, `parameter_declaration`, `optional_parameter_declaration`.
    pub declarations: Vec<Node<'t>>,
    /// `call_expression`.
    pub calls: Vec<Node<'t>>,
    /// `assignment_expression`.
    pub assignments: Vec<Node<'t>>,
}

/// Where a function sits, read off the walk's path (tree-sitter's `Node::parent`
/// searches down from the root on each call).
#[derive(Clone, Copy, Default)]
pub struct Context<'t> {
    /// The node holding the function (its `Node::parent`).
    pub parent: Option<Node<'t>>,
    /// The class or struct whose body defines it: the parent of the nearest
    /// `field_declaration_list` above it, unless a `function_definition` or the
    /// `translation_unit` comes first.
    pub class: Option<Node<'t>>,
    /// The node holding that class.
    pub class_parent: Option<Node<'t>>,
}

impl<'t> Context<'t> {
    /// The context of a node whose ancestors, root first, are `path`.
    fn of(path: &[Node<'t>], kinds: &Kinds) -> Context<'t> {
        let mut context = Context {
            parent: path.last().copied(),
            ..Context::default()
        };
        for (i, node) in path.iter().enumerate().rev() {
            let kind = node.kind_id();
            if kind == kinds.field_list {
                context.class = i.checked_sub(1).map(|j| path[j]);
                context.class_parent = i.checked_sub(2).map(|j| path[j]);
                break;
            }
            if kind == kinds.function || kind == kinds.translation_unit {
                break;
            }
        }
        context
    }
}

/// Function definitions in source order, with what each holds and its parent.
/// ERROR nodes holding a function declarator count as functions (see `build`).
pub struct Index<'t> {
    /// `function_definition` nodes in source order.
    pub functions: Vec<Node<'t>>,
    /// The innermost enclosing function of each function, by index.
    pub parents: Vec<Option<usize>>,
    /// What each function holds.
    pub held: Vec<Held<'t>>,
    /// Where each function sits.
    pub contexts: Vec<Context<'t>>,
    /// `field_declaration` nodes outside any function (class and struct members:
    /// CUTLASS 2.x keeps its warp fragments in a `PipeState`), in source order.
    pub fields: Vec<Node<'t>>,
    /// Where the query's patterns can have their root, in walk order: every node whose
    /// kind `build`'s `root_kinds` marks (those inside template parameter lists and
    /// lambda captures too).
    pub roots: Vec<Node<'t>>,
}

impl<'t> Index<'t> {
    /// Walks `tree` once. Template parameter lists and lambda captures hold nothing a
    /// kernel map needs: nothing in them is filed (they are entered only for `roots`,
    /// and not at all when `root_kinds` is empty). String and character literals
    /// without errors are not entered: their children are only their tokens (an asm
    /// template's pieces and escapes).
    /// `root_kinds`, indexed by node kind id, marks the kinds listed in `roots`
    /// (empty: none, and no subtree either).
    pub fn build(tree: &'t Tree, root_kinds: &[bool]) -> Index<'t> {
        let kinds = Kinds::get();
        let mut index = Index {
            functions: Vec::new(),
            parents: Vec::new(),
            held: Vec::new(),
            contexts: Vec::new(),
            fields: Vec::new(),
            roots: Vec::new(),
        };
        let mut cursor = tree.walk();
        // (depth at which the function node sits, its index)
        let mut open: Vec<(usize, usize)> = Vec::new();
        let mut depth = 0usize;
        // The ancestors of the cursor's node, root first (`depth` of them).
        let mut path: Vec<Node<'t>> = Vec::new();
        // The depth of the template parameter list or lambda capture the cursor is
        // in: nothing there is filed, only query roots are listed.
        let mut quiet: Option<usize> = None;
        loop {
            let node = cursor.node();
            let kind = node.kind_id();
            let mut enter = node.child_count() > 0;
            if root_kinds.get(usize::from(kind)).copied().unwrap_or(false) {
                index.roots.push(node);
            }
            if kinds.literals.contains(&kind) && !node.has_error() {
                enter = false;
            } else if quiet.is_some() {
                // Nothing in a template parameter list or a lambda capture is filed.
            } else if kind == kinds.function || (node.is_error() && holds_declarator(node)) {
                // An ERROR node that holds a function declarator is a function whose
                // braces do not balance: keep it, so its sites are reported as
                // partial results.
                index.parents.push(open.last().map(|&(_, i)| i));
                open.push((depth, index.functions.len()));
                index.functions.push(node);
                index.held.push(Held::default());
                index.contexts.push(Context::of(&path, kinds));
            } else if kind == kinds.template_parameters || kind == kinds.lambda_capture {
                if root_kinds.is_empty() {
                    enter = false;
                } else {
                    quiet = Some(depth);
                }
            } else if kind == kinds.field && open.is_empty() {
                index.fields.push(node);
            } else if let Some(&(_, f)) = open.last() {
                let held = &mut index.held[f];
                if kinds.declarations.contains(&kind) {
                    held.declarations.push(node);
                } else if kind == kinds.call {
                    held.calls.push(node);
                } else if kind == kinds.assignment {
                    held.assignments.push(node);
                }
            }
            if enter && cursor.goto_first_child() {
                path.push(node);
                depth += 1;
                continue;
            }
            loop {
                // Leaving this node: close the function or the quiet part it is.
                if open.last().is_some_and(|&(d, _)| d == depth) {
                    open.pop();
                }
                if quiet == Some(depth) {
                    quiet = None;
                }
                if cursor.goto_next_sibling() {
                    break;
                }
                if !cursor.goto_parent() {
                    return index;
                }
                path.pop();
                depth -= 1;
            }
        }
    }

    /// The innermost function containing `node`.
    pub fn owner(&self, node: Node<'_>) -> Option<usize> {
        let start = node.start_byte();
        let last = self
            .functions
            .partition_point(|f| f.start_byte() <= start)
            .checked_sub(1)?;
        let mut candidate = Some(last);
        while let Some(i) = candidate {
            let f = self.functions[i];
            if f.start_byte() <= start && node.end_byte() <= f.end_byte() {
                return Some(i);
            }
            candidate = self.parents[i];
        }
        None
    }
}

/// Node kind ids the walk compares against (cheaper than comparing kind names).
struct Kinds {
    function: u16,
    template_parameters: u16,
    lambda_capture: u16,
    declarations: [u16; 3],
    call: u16,
    assignment: u16,
    field: u16,
    field_list: u16,
    translation_unit: u16,
    /// String, raw string, character and concatenated string literals.
    literals: [u16; 4],
}

impl Kinds {
    fn get() -> &'static Kinds {
        static KINDS: std::sync::OnceLock<Kinds> = std::sync::OnceLock::new();
        KINDS.get_or_init(|| {
            let language = kwb_syntax::language();
            let id = |kind: &str| language.id_for_node_kind(kind, true);
            Kinds {
                function: id("function_definition"),
                template_parameters: id("template_parameter_list"),
                lambda_capture: id("lambda_capture_specifier"),
                declarations: [
                    id("declaration"),
                    id("parameter_declaration"),
                    id("optional_parameter_declaration"),
                ],
                call: id("call_expression"),
                assignment: id("assignment_expression"),
                field: id("field_declaration"),
                field_list: id("field_declaration_list"),
                translation_unit: id("translation_unit"),
                literals: [
                    id("string_literal"),
                    id("raw_string_literal"),
                    id("char_literal"),
                    id("concatenated_string"),
                ],
            }
        })
    }
}

fn holds_declarator(node: Node<'_>) -> bool {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .any(|c| c.kind() == "function_declarator")
}
