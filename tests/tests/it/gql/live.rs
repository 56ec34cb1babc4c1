//! Operations of the `live` tests (documents in tests/graphql/live/).
#[allow(unused_imports)]
use super::*;
