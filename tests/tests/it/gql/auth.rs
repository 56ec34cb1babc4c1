//! Operations of the `auth` tests (documents in tests/graphql/auth/).
#[allow(unused_imports)]
use super::*;
