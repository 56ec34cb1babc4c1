//! Operations of the `hostile` tests (documents in tests/graphql/hostile/). The requests that
//! are wrong on purpose stay inline in the tests.
#[allow(unused_imports)]
use super::*;

operation!(Typename, "graphql/hostile/typename.graphql");
operation!(MeIds, "graphql/hostile/me_ids.graphql");
operation!(AdminContext, "graphql/hostile/admin_context.graphql");
operation!(
    UsersAndKeypairs,
    "graphql/hostile/users_and_keypairs.graphql"
);
operation!(SessionMounts, "graphql/hostile/session_mounts.graphql");
