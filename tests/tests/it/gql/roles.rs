//! Operations of the `roles` tests (documents in tests/graphql/roles/).
#[allow(unused_imports)]
use super::*;
