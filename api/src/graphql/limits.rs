//! Limits on what one GraphQL document may ask for. Depth and complexity are built into
//! async-graphql; the alias count is checked here after parsing.
use std::sync::Arc;

use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextParseQuery};
use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use async_graphql::{ServerError, ServerResult, Variables};

pub struct AliasLimit(pub usize);

impl ExtensionFactory for AliasLimit {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(AliasLimitExtension(self.0))
    }
}

struct AliasLimitExtension(usize);

fn count(set: &SelectionSet) -> usize {
    set.items
        .iter()
        .map(|sel| match &sel.node {
            Selection::Field(f) => {
                usize::from(f.node.alias.is_some()) + count(&f.node.selection_set.node)
            }
            Selection::InlineFragment(i) => count(&i.node.selection_set.node),
            Selection::FragmentSpread(_) => 0,
        })
        .sum()
}

pub fn alias_count(doc: &ExecutableDocument) -> usize {
    let ops: usize = doc
        .operations
        .iter()
        .map(|(_, op)| count(&op.node.selection_set.node))
        .sum();
    let frags: usize = doc
        .fragments
        .values()
        .map(|f| count(&f.node.selection_set.node))
        .sum();
    ops + frags
}

#[async_graphql::async_trait::async_trait]
impl Extension for AliasLimitExtension {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let doc = next.run(ctx, query, variables).await?;
        let n = alias_count(&doc);
        if n > self.0 {
            return Err(ServerError::new(
                format!("Too many aliases in the query ({n} > {})", self.0),
                None,
            ));
        }
        Ok(doc)
    }
}
