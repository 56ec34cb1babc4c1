//! Limits on what one GraphQL document may ask for, checked right after parsing and before
//! validation or execution. Depth and complexity are built into async-graphql, but its
//! visitors walk every fragment spread anew, so a chain of fragments that each spread the next
//! one twice costs 2^n; here fragments are expanded once each (memoised), the total number of
//! selected fields is capped, and so are aliases and fragment nesting.
use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextPrepareRequest,
};
use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use async_graphql::{Name, Request, ServerResult};

/// Fragments spreading fragments deeper than this are refused (and never recursed into).
pub const MAX_FRAGMENT_NESTING: usize = 16;

#[derive(Debug, Clone, Copy)]
pub struct DocumentLimits {
    pub max_aliases: usize,
    pub max_fields: usize,
}

/// What a document selects once every fragment spread is expanded where it stands.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub fields: usize,
    pub aliases: usize,
}

impl Cost {
    fn add(self, o: Cost) -> Cost {
        Cost {
            fields: self.fields.saturating_add(o.fields),
            aliases: self.aliases.saturating_add(o.aliases),
        }
    }
}

struct Costing<'a> {
    doc: &'a ExecutableDocument,
    memo: HashMap<&'a Name, Cost>,
    /// Fragments being expanded right now: a spread of one of them is a cycle.
    stack: Vec<&'a Name>,
}

impl<'a> Costing<'a> {
    fn set(&mut self, set: &'a SelectionSet) -> Result<Cost, String> {
        let mut total = Cost::default();
        for sel in &set.items {
            let c = match &sel.node {
                Selection::Field(f) => Cost {
                    fields: 1,
                    aliases: usize::from(f.node.alias.is_some()),
                }
                .add(self.set(&f.node.selection_set.node)?),
                Selection::InlineFragment(i) => self.set(&i.node.selection_set.node)?,
                Selection::FragmentSpread(s) => self.fragment(&s.node.fragment_name.node)?,
            };
            total = total.add(c);
        }
        Ok(total)
    }

    fn fragment(&mut self, name: &'a Name) -> Result<Cost, String> {
        if let Some(c) = self.memo.get(name) {
            return Ok(*c);
        }
        if self.stack.contains(&name) {
            return Err(format!("fragment '{name}' spreads itself"));
        }
        if self.stack.len() >= MAX_FRAGMENT_NESTING {
            return Err(format!(
                "fragments are nested more than {MAX_FRAGMENT_NESTING} deep"
            ));
        }
        // An unknown fragment is for validation to report; it costs nothing here.
        let Some(frag) = self.doc.fragments.get(name) else {
            return Ok(Cost::default());
        };
        self.stack.push(name);
        let c = self.set(&frag.node.selection_set.node);
        self.stack.pop();
        let c = c?;
        self.memo.insert(name, c);
        Ok(c)
    }
}

/// The expanded cost of every operation of the document together (fragments never spread
/// still count once, so unused definitions are not free either).
pub fn cost(doc: &ExecutableDocument) -> Result<Cost, String> {
    let mut c = Costing {
        doc,
        memo: HashMap::new(),
        stack: Vec::new(),
    };
    let mut total = Cost::default();
    for (_, op) in doc.operations.iter() {
        total = total.add(c.set(&op.node.selection_set.node)?);
    }
    for name in doc.fragments.keys() {
        if !c.memo.contains_key(name) {
            c.fragment(name)?;
        }
    }
    Ok(total)
}

impl DocumentLimits {
    pub fn check(&self, doc: &ExecutableDocument) -> Result<(), String> {
        let c = cost(doc)?;
        if c.fields > self.max_fields {
            return Err(format!(
                "The query selects too many fields once fragments are expanded ({} > {})",
                c.fields, self.max_fields
            ));
        }
        if c.aliases > self.max_aliases {
            return Err(format!(
                "Too many aliases in the query ({} > {})",
                c.aliases, self.max_aliases
            ));
        }
        Ok(())
    }
}

impl ExtensionFactory for DocumentLimits {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(*self)
    }
}

/// The check runs when the request is prepared, before async-graphql's own parse-time checks
/// (its recursion-depth walk follows every fragment spread anew, exponential in a chain of
/// doubling fragments); the parsed document is handed on so it is not parsed twice.
#[async_graphql::async_trait::async_trait]
impl Extension for DocumentLimits {
    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        mut request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        let doc = request.parsed_query()?;
        self.check(doc).map_err(|m| {
            crate::graphql::context::server_error(crate::error::ApiError::bad_request(m))
        })?;
        next.run(ctx, request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(q: &str) -> ExecutableDocument {
        async_graphql::parser::parse_query(q).unwrap()
    }

    /// `query{...F0} fragment F0 on Query{...F1 ...F1} … fragment Fn on Query{__typename}`.
    fn doubling(n: usize) -> String {
        let mut q = String::from("query{...F0}");
        for i in 0..n {
            q.push_str(&format!(
                " fragment F{i} on Query{{...F{} ...F{}}}",
                i + 1,
                i + 1
            ));
        }
        q.push_str(&format!(" fragment F{n} on Query{{__typename}}"));
        q
    }

    #[test]
    fn fragments_are_expanded_once_each() {
        assert_eq!(cost(&doc(&doubling(3))).unwrap().fields, 8);
        let started = std::time::Instant::now();
        assert_eq!(cost(&doc(&doubling(15))).unwrap().fields, 1 << 15);
        assert!(started.elapsed() < std::time::Duration::from_millis(50));
        let limits = DocumentLimits {
            max_aliases: 30,
            max_fields: 1000,
        };
        assert!(limits.check(&doc(&doubling(20))).is_err());
        assert!(
            limits
                .check(&doc("{ a: __typename b: __typename }"))
                .is_ok()
        );
    }

    #[test]
    fn cycles_and_deep_nesting_are_refused() {
        assert!(
            cost(&doc(
                "query{...A} fragment A on Query{...B} fragment B on Query{...A}"
            ))
            .is_err()
        );
        let mut q = String::from("query{...F0}");
        for i in 0..40 {
            q.push_str(&format!(" fragment F{i} on Query{{...F{}}}", i + 1));
        }
        q.push_str(" fragment F40 on Query{__typename}");
        assert!(cost(&doc(&q)).unwrap_err().contains("nested"));
    }

    /// Expands every spread where it stands, the way a naive walker would (small inputs only).
    fn naive(doc: &ExecutableDocument, set: &SelectionSet, depth: usize) -> usize {
        assert!(depth < 64);
        set.items
            .iter()
            .map(|s| match &s.node {
                Selection::Field(f) => 1 + naive(doc, &f.node.selection_set.node, depth + 1),
                Selection::InlineFragment(i) => naive(doc, &i.node.selection_set.node, depth + 1),
                Selection::FragmentSpread(sp) => doc
                    .fragments
                    .get(&sp.node.fragment_name.node)
                    .map_or(0, |f| naive(doc, &f.node.selection_set.node, depth + 1)),
            })
            .sum()
    }

    proptest::proptest! {
        /// Random acyclic fragment graphs (each fragment spreads later ones only): the memoised
        /// cost equals the naive expansion, and is computed without expanding anything.
        #[test]
        fn memoised_cost_equals_naive_expansion(
            spreads in proptest::collection::vec(proptest::collection::vec(0usize..6, 0..4), 1..7),
            leaves in proptest::collection::vec(1usize..4, 7),
        ) {
            let n = spreads.len();
            let mut q = String::from("query{...F0 a: __typename}");
            for (i, targets) in spreads.iter().enumerate() {
                let mut body = "__typename ".repeat(leaves[i]);
                for t in targets {
                    let j = i + 1 + t % (n - i).max(1);
                    if j < n {
                        body.push_str(&format!("...F{j} "));
                    }
                }
                q.push_str(&format!(" fragment F{i} on Query{{{body}}}"));
            }
            let d = doc(&q);
            let op_set = match &d.operations {
                async_graphql::parser::types::DocumentOperations::Single(op) => op.node.selection_set.node.clone(),
                async_graphql::parser::types::DocumentOperations::Multiple(_) => unreachable!(),
            };
            let c = cost(&d).unwrap();
            proptest::prop_assert_eq!(c.fields, naive(&d, &op_set, 0));
            proptest::prop_assert_eq!(c.aliases, 1);
        }

        /// Any parseable document gets an answer from the cost check (never a panic).
        #[test]
        fn any_document_gets_an_answer(q in "(query)?\\{[a-z_ .{}:]{0,60}\\}( fragment F on Query\\{[a-z_ .{}]{1,30}\\})?") {
            if let Ok(d) = async_graphql::parser::parse_query(&q) {
                // Any document at all: an answer, never a panic (the value is not the point).
                let _ = cost(&d);
            }
        }
    }

    #[test]
    fn aliases_inside_fragments_count_per_use() {
        let q = "query{...A ...A} fragment A on Query{x: __typename y: __typename}";
        assert_eq!(cost(&doc(q)).unwrap().aliases, 4);
    }
}
