//! Operations of the `hostile` tests (documents in tests/graphql/hostile/).
#[allow(unused_imports)]
use super::*;
