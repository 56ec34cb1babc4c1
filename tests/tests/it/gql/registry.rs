//! Operations of the `registry` tests (documents in tests/graphql/registry/).
#[allow(unused_imports)]
use super::*;
