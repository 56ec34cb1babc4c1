//! Operations of the `matrix` tests (documents in tests/graphql/matrix/).
#[allow(unused_imports)]
use super::*;
