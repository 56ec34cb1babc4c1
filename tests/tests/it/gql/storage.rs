//! Operations of the `storage` tests (documents in tests/graphql/storage/).
#[allow(unused_imports)]
use super::*;
