//! Operations of the `sandbox` tests (documents in tests/graphql/sandbox/).
#[allow(unused_imports)]
use super::*;
