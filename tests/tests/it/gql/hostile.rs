//! Operations of the `hostile` tests (documents in tests/graphql/hostile/). The requests that
//! are wrong on purpose stay inline in the tests.
#[allow(unused_imports)]
use super::*;

operation!(Typename, "graphql/hostile/typename.graphql");
operation!(SessionList, "graphql/hostile/session_list.graphql");
operation!(MeIds, "graphql/hostile/me_ids.graphql");
operation!(Groups, "graphql/hostile/groups.graphql");
operation!(AdminContext, "graphql/hostile/admin_context.graphql");
operation!(
    UsersAndKeypairs,
    "graphql/hostile/users_and_keypairs.graphql"
);
operation!(SessionId, "graphql/hostile/session_id.graphql");
operation!(SessionLogs, "graphql/hostile/session_logs.graphql");
operation!(
    SessionSshPrivateKey,
    "graphql/hostile/session_ssh_private_key.graphql"
);
operation!(
    ExecuteInSession,
    "graphql/hostile/execute_in_session.graphql"
);
operation!(StartService, "graphql/hostile/start_service.graphql");
operation!(ModifyPolicy, "graphql/hostile/modify_policy.graphql");
operation!(ModifyDomain, "graphql/hostile/modify_domain.graphql");
operation!(CreateVfolder, "graphql/hostile/create_vfolder.graphql");
operation!(SessionMounts, "graphql/hostile/session_mounts.graphql");
operation!(Execution, "graphql/hostile/execution.graphql");
operation!(ExecutionOutput, "graphql/hostile/execution_output.graphql");
operation!(
    SessionStatusChanges,
    "graphql/hostile/session_status_changes.graphql"
);
operation!(UserChanges, "graphql/hostile/user_changes.graphql");
operation!(ResourceUsage, "graphql/hostile/resource_usage.graphql");
