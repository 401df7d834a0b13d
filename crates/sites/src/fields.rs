//! A node's child by field name, with the name resolved once per process.
//!
//! tree-sitter's `child_by_field_name` compares the name against every field name of
//! the grammar on each call; the map asks for `arguments`, `value` and `declarator`
//! hundreds of thousands of times in a CuTe MMA header. Invariant: `node.field(name)`
//! is `node.child_by_field_name(name)`.

use std::sync::OnceLock;

use tree_sitter::Node;

/// `child_by_field_name` with the field id looked up in a table built once.
pub(crate) trait Field<'t> {
    /// The child in field `name`; None when the node has none or the grammar has no
    /// such field.
    fn field(&self, name: &str) -> Option<Node<'t>>;
}

impl<'t> Field<'t> for Node<'t> {
    fn field(&self, name: &str) -> Option<Node<'t>> {
        let id = id(name)?;
        self.child_by_field_id(id)
    }
}

/// The grammar's field names, sorted, with their ids.
fn id(name: &str) -> Option<u16> {
    static IDS: OnceLock<Vec<(&'static str, u16)>> = OnceLock::new();
    let ids = IDS.get_or_init(|| {
        let language = kwb_syntax::language();
        let mut ids: Vec<(&'static str, u16)> = (1..=language.field_count())
            .filter_map(|i| {
                let id = u16::try_from(i).ok()?;
                Some((language.field_name_for_id(id)?, id))
            })
            .collect();
        ids.sort_unstable();
        ids
    });
    ids.binary_search_by(|(n, _)| (*n).cmp(name))
        .ok()
        .map(|i| ids[i].1)
}

#[cfg(test)]
mod tests {
    use super::Field;

    #[test]
    fn every_field_resolves_to_what_tree_sitter_resolves() {
        let parsed = kwb_syntax::parse("int f(int a) { return g(a, 1); }");
        let language = kwb_syntax::language();
        let mut stack = vec![parsed.tree.root_node()];
        let mut checked = 0;
        while let Some(node) = stack.pop() {
            for i in 1..=language.field_count() {
                let name = language
                    .field_name_for_id(u16::try_from(i).expect("few fields"))
                    .expect("a name");
                assert_eq!(node.field(name), node.child_by_field_name(name), "{name}");
                checked += 1;
            }
            assert_eq!(node.field("no_such_field"), None);
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
        assert!(checked > 100);
    }
}
