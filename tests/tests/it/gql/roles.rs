//! Operations of the `roles` tests (documents in tests/graphql/roles/). Some are used by the
//! `auth` and `hostile` tests too.
#[allow(unused_imports)]
use super::*;

operation!(UserEmail, "graphql/roles/user_email.graphql");
operation!(KeypairByKey, "graphql/roles/keypair_by_key.graphql");
operation!(KeypairUserIds, "graphql/roles/keypair_user_ids.graphql");
operation!(KeypairSecrets, "graphql/roles/keypair_secrets.graphql");
operation!(UsersWithDomain, "graphql/roles/users_with_domain.graphql");
operation!(UsersAndDomains, "graphql/roles/users_and_domains.graphql");
operation!(
    ModifyUserFullName,
    "graphql/roles/modify_user_full_name.graphql"
);
operation!(GroupsAndDomain, "graphql/roles/groups_and_domain.graphql");
operation!(GroupsWithDomain, "graphql/roles/groups_with_domain.graphql");
