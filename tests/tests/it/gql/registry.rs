//! Operations of the `registry` tests (documents in tests/graphql/registry/).
#[allow(unused_imports)]
use super::*;

operation!(
    CreateRegistry,
    "../web/graphql/admin/create_registry.graphql"
);
operation!(ModifyRegistry, "graphql/registry/modify_registry.graphql");
operation!(SessionHistory, "graphql/registry/session_history.graphql");
