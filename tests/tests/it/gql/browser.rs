//! Operations of the `browser` tests (documents in tests/graphql/browser/).
#[allow(unused_imports)]
use super::*;
