//! Operations of the `admin` tests (documents in tests/graphql/admin/).
#[allow(unused_imports)]
use super::*;
