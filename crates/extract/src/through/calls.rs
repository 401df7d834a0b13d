//! The file's host call graph, as far as a reproducer through the launcher needs it:
//! every function definition, the calls between them, and the path from `main` (or
//! a function nothing calls) down to a function that names the kernel.
//!
//! Invariant: a path only follows calls of functions this file defines; a function
//! "launches" the kernel when its body names the kernel (`K<<<…>>>`, `&K<…>`,
//! `auto f = K<…>`, `cudaLaunchKernelEx(&c, K<…>, …)`), however it launches it.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::kernel::Param;
use crate::scan::split_top;

/// One function definition of the file.
#[derive(Debug, Clone)]
pub(crate) struct Function {
    /// The last part of its name.
    pub name: String,
    pub range: Range<usize>,
    /// Its template parameters' names, when it is a template.
    pub template_params: Vec<String>,
    pub params: Vec<Param>,
    pub line: usize,
}

/// One call of a function the file defines.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// Index of the calling function in [`Graph::functions`].
    pub caller: usize,
    /// The callee's last name part, template arguments dropped.
    pub callee: String,
    /// The function as written (`gemm`, `ns::gemm<float>`).
    pub function: String,
    /// The arguments as written.
    pub args: Vec<String>,
    pub range: Range<usize>,
    pub line: usize,
}

/// Functions and calls.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    pub functions: Vec<Function>,
    pub calls: Vec<Call>,
}

/// The way from the function kwb calls down to the launch.
#[derive(Debug, Clone)]
pub(crate) struct Path {
    /// Function indices, the one kwb calls first, the one naming the kernel last.
    pub functions: Vec<usize>,
    /// The call of the first function that gives its arguments (in `main`, or in a
    /// test), when there is one.
    pub call: Option<Call>,
}

impl Graph {
    /// The graph of `parsed`; `kernel` (a `__global__` function's bytes) is left out.
    pub fn new(parsed: &Parsed, kernel: &Range<usize>) -> Graph {
        let mut graph = Graph::default();
        let mut stack = vec![parsed.tree.root_node()];
        let mut nodes = Vec::new();
        while let Some(n) = stack.pop() {
            if n.kind() == "function_definition" {
                if n.end_byte() != kernel.end
                    && let Some(name) = crate::tree::function_name(parsed, n)
                {
                    let template_params = n
                        .parent()
                        .filter(|p| p.kind() == "template_declaration")
                        .map(|t| template_names(parsed, t))
                        .unwrap_or_default();
                    graph.functions.push(Function {
                        name: name.to_owned(),
                        range: n.byte_range(),
                        template_params,
                        params: crate::kernel::params_of(parsed, n).unwrap_or_default(),
                        line: crate::tree::line_of(&parsed.source, n.start_byte()),
                    });
                    nodes.push(n);
                }
                continue;
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
        let order: Vec<usize> = {
            let mut o: Vec<usize> = (0..graph.functions.len()).collect();
            o.sort_by_key(|i| graph.functions[*i].range.start);
            o
        };
        graph.functions = order.iter().map(|i| graph.functions[*i].clone()).collect();
        let nodes: Vec<Node<'_>> = order.iter().map(|i| nodes[*i]).collect();
        for (caller, node) in nodes.iter().enumerate() {
            let Some(body) = node.child_by_field_name("body") else {
                continue;
            };
            let mut stack = vec![body];
            while let Some(n) = stack.pop() {
                if n.kind() == "call_expression"
                    && let (Some(f), Some(args)) = (
                        n.child_by_field_name("function"),
                        n.child_by_field_name("arguments"),
                    )
                {
                    let callee = callee_name(&parsed.source[f.byte_range()]);
                    if graph.functions.iter().any(|g| g.name == callee) {
                        let inner = &parsed.source[args.byte_range()];
                        let inner = inner
                            .strip_prefix('(')
                            .and_then(|t| t.strip_suffix(')'))
                            .unwrap_or(inner);
                        graph.calls.push(Call {
                            caller,
                            callee,
                            function: parsed.source[f.byte_range()].trim().to_owned(),
                            args: split_top(inner),
                            range: n.byte_range(),
                            line: crate::tree::line_of(&parsed.source, n.start_byte()),
                        });
                    }
                }
                let mut cursor = n.walk();
                stack.extend(n.named_children(&mut cursor));
            }
        }
        graph.calls.sort_by_key(|c| c.range.start);
        graph
    }

    /// The first call `caller` makes of `callee` (function indices).
    pub fn call_between(&self, caller: usize, callee: usize) -> Option<Call> {
        let name = &self.functions[callee].name;
        self.calls
            .iter()
            .find(|c| c.caller == caller && &c.callee == name)
            .cloned()
    }

    /// The functions whose bodies name `kernel` (an identifier outside comments and
    /// strings); `main` is never one (a reproducer cannot call it with a problem).
    pub fn launching(&self, parsed: &Parsed, kernel: &str) -> Vec<usize> {
        let root = parsed.tree.root_node();
        (0..self.functions.len())
            .filter(|i| {
                let f = &self.functions[*i];
                if f.name == "main" {
                    return false;
                }
                let Some(node) = root.descendant_for_byte_range(f.range.start, f.range.end) else {
                    return false;
                };
                let Some(body) = node.child_by_field_name("body") else {
                    return false;
                };
                names_identifier(parsed, body, kernel)
            })
            .collect()
    }

    /// The path from the outermost caller down to one of `launching`: through the
    /// first call `main` makes that reaches one; else from the first function that
    /// reaches one and that nothing in the file calls.
    pub fn path(&self, launching: &[usize]) -> Option<Path> {
        // Breadth first, up the calls: `next[f]` is the callee of f on f's way down.
        let mut next: BTreeMap<usize, Option<usize>> = BTreeMap::new();
        let mut queue: VecDeque<usize> = VecDeque::new();
        for l in launching {
            next.insert(*l, None);
            queue.push_back(*l);
        }
        while let Some(f) = queue.pop_front() {
            let name = &self.functions[f].name;
            for call in self.calls.iter().filter(|c| &c.callee == name) {
                if let std::collections::btree_map::Entry::Vacant(e) = next.entry(call.caller) {
                    e.insert(Some(f));
                    queue.push_back(call.caller);
                }
            }
        }
        let down = |from: usize| {
            let mut out = vec![from];
            let mut at = from;
            while let Some(Some(n)) = next.get(&at) {
                if out.contains(n) {
                    break;
                }
                out.push(*n);
                at = *n;
            }
            out
        };
        // The first call in main (in source order) of a function on the way.
        if let Some(main) = self.functions.iter().position(|f| f.name == "main")
            && let Some(Some(first)) = next.get(&main)
        {
            let target = &self.functions[*first].name;
            let call = self
                .calls
                .iter()
                .find(|c| c.caller == main && &c.callee == target)
                .cloned();
            return Some(Path {
                functions: down(*first),
                call,
            });
        }
        // No main: the first function (in source order) that reaches a launching one
        // and that nothing in the file calls, the library's entry.
        let uncalled = next.keys().copied().find(|f| {
            !self
                .calls
                .iter()
                .any(|c| c.callee == self.functions[*f].name)
        })?;
        Some(Path {
            functions: down(uncalled),
            call: None,
        })
    }
}

/// The callee name of a call's function text: the last `::` part, template arguments
/// and a leading `&`/`*` dropped (`cute::gemm_nt<T>` is `gemm_nt`).
fn callee_name(text: &str) -> String {
    let text = text.trim().trim_start_matches(['&', '*']);
    let head = match text.find('<') {
        Some(i) => &text[..i],
        None => text,
    };
    head.rsplit("::").next().unwrap_or(head).trim().to_owned()
}

/// The names of a template declaration's parameters.
pub(crate) fn template_names(parsed: &Parsed, template: Node<'_>) -> Vec<String> {
    let Some(list) = template.child_by_field_name("parameters") else {
        return Vec::new();
    };
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .filter_map(|p| {
            let text = &parsed.source[p.byte_range()];
            let head = text.split('=').next().unwrap_or(text);
            kwb_syntax::identifiers(head).last().map(str::to_owned)
        })
        .collect()
}

/// Whether `node` holds an identifier token `name`.
fn names_identifier(parsed: &Parsed, node: Node<'_>, name: &str) -> bool {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if matches!(
            n.kind(),
            "identifier" | "field_identifier" | "type_identifier"
        ) && &parsed.source[n.byte_range()] == name
        {
            return true;
        }
        if matches!(
            n.kind(),
            "comment" | "string_literal" | "raw_string_literal"
        ) {
            continue;
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_runs_from_mains_first_call_to_the_launch() {
        let src = "__global__ void k(float* c) {}\n\
                   template <class T> void nt(int m, T* c) { k<<<1, 1>>>(c); }\n\
                   template <class T> void tn(int m, T* c) { auto f = &k; f<<<1, 1>>>(c); }\n\
                   template <class T> void gemm(char t, int m, T* c) { if (t == 'N') nt(m, c); else tn(m, c); }\n\
                   int main() { float* c = 0; gemm('N', 4, c); gemm('T', 4, c); }\n";
        let parsed = kwb_syntax::parse(src);
        let kernel = src.find("__global__").unwrap()..src.find('\n').unwrap();
        let g = Graph::new(&parsed, &(kernel.start..kernel.end));
        let launching = g.launching(&parsed, "k");
        let names: Vec<&str> = launching
            .iter()
            .map(|i| g.functions[*i].name.as_str())
            .collect();
        assert_eq!(names, ["nt", "tn"]);
        let path = g.path(&launching).unwrap();
        let names: Vec<&str> = path
            .functions
            .iter()
            .map(|i| g.functions[*i].name.as_str())
            .collect();
        assert_eq!(names, ["gemm", "nt"]);
        let call = path.call.unwrap();
        assert_eq!(call.args, ["'N'", "4", "c"]);
        assert_eq!(g.functions[path.functions[0]].template_params, ["T"]);
    }

    #[test]
    fn a_launcher_nothing_calls_is_its_own_path() {
        let src = "__global__ void k(float* c) {}\nvoid run(float* c, int m) { k<<<m, 1>>>(c); }\n";
        let parsed = kwb_syntax::parse(src);
        let g = Graph::new(&parsed, &(0..src.find('\n').unwrap()));
        let path = g.path(&g.launching(&parsed, "k")).unwrap();
        assert_eq!(path.functions.len(), 1);
        assert!(path.call.is_none());
    }
}
