//! Operations of the `sessions` tests (documents in tests/graphql/sessions/).
#[allow(unused_imports)]
use super::*;
