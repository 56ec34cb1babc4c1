//! Operations of the `browser` tests (documents in tests/graphql/browser/).
#[allow(unused_imports)]
use super::*;

operation!(ModifyUser, "graphql/browser/modify_user.graphql");
operation!(
    ComputeSessionList,
    "graphql/browser/compute_session_list.graphql"
);
operation!(UserList, "graphql/browser/user_list.graphql");
