//! Keeps each result object's keys in the order the query selected them. async-graphql
//! resolves sibling fields concurrently and emits them as they finish; Backend.AI's client
//! prints tables column by column in the order of the keys it gets back.
use std::sync::Arc;

use parking_lot::Mutex;

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery,
};
use async_graphql::indexmap::IndexMap;
use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Selection, SelectionSet,
};
use async_graphql::{Name, Response, ServerResult, Value, Variables};

pub struct SelectionOrder;

impl ExtensionFactory for SelectionOrder {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(SelectionOrderExtension::default())
    }
}

#[derive(Default)]
struct SelectionOrderExtension {
    doc: Mutex<Option<ExecutableDocument>>,
}

#[async_graphql::async_trait::async_trait]
impl Extension for SelectionOrderExtension {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let doc = next.run(ctx, query, variables).await?;
        *self.doc.lock() = Some(doc.clone());
        Ok(doc)
    }

    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        let mut resp = next.run(ctx, operation_name).await;
        let doc = self.doc.lock().take();
        if let Some(doc) = doc {
            let op = match &doc.operations {
                DocumentOperations::Single(op) => Some(op),
                DocumentOperations::Multiple(ops) => match operation_name {
                    Some(n) => ops.get(n),
                    None if ops.len() == 1 => ops.values().next(),
                    None => None,
                },
            };
            if let Some(op) = op {
                reorder(&mut resp.data, &op.node.selection_set.node, &doc);
            }
        }
        resp
    }
}

/// Response keys of a selection set in order, with each key's sub-selections (fragments
/// expanded in place).
fn keys<'a>(
    set: &'a SelectionSet,
    doc: &'a ExecutableDocument,
    out: &mut Vec<(Name, Vec<&'a SelectionSet>)>,
    depth: usize,
) {
    if depth > 32 {
        return;
    }
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => {
                let key = f.node.response_key().node.clone();
                match out.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, subs)) => subs.push(&f.node.selection_set.node),
                    None => out.push((key, vec![&f.node.selection_set.node])),
                }
            }
            Selection::FragmentSpread(s) => {
                if let Some(frag) = doc.fragments.get(&s.node.fragment_name.node) {
                    keys(&frag.node.selection_set.node, doc, out, depth + 1);
                }
            }
            Selection::InlineFragment(i) => keys(&i.node.selection_set.node, doc, out, depth + 1),
        }
    }
}

fn reorder(value: &mut Value, set: &SelectionSet, doc: &ExecutableDocument) {
    reorder_sets(value, &[set], doc);
}

fn reorder_sets(value: &mut Value, sets: &[&SelectionSet], doc: &ExecutableDocument) {
    match value {
        Value::List(items) => {
            for v in items {
                reorder_sets(v, sets, doc);
            }
        }
        Value::Object(map) => {
            let mut order = Vec::new();
            for s in sets {
                keys(s, doc, &mut order, 0);
            }
            let mut old = std::mem::take(map);
            let mut fresh = IndexMap::with_capacity(old.len());
            for (key, subs) in order {
                if let Some(mut v) = old.shift_remove(&key) {
                    let subs: Vec<&SelectionSet> =
                        subs.into_iter().filter(|s| !s.items.is_empty()).collect();
                    if !subs.is_empty() {
                        reorder_sets(&mut v, &subs, doc);
                    }
                    fresh.insert(key, v);
                }
            }
            fresh.extend(old);
            *map = fresh;
        }
        _ => {}
    }
}
