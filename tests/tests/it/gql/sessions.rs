//! Operations of the `sessions` tests (documents in tests/graphql/sessions/).
use super::*;

operation!(Agents, "graphql/sessions/agents.graphql");
operation!(AgentList, "graphql/sessions/agent_list.graphql");
operation!(CreateVfolder, "graphql/sessions/create_vfolder.graphql");
operation!(
    DestroySessionState,
    "graphql/sessions/destroy_session_state.graphql"
);
operation!(DestroySessions, "graphql/sessions/destroy_sessions.graphql");
operation!(
    ExecuteInSession,
    "graphql/sessions/execute_in_session.graphql"
);
operation!(Execution, "graphql/sessions/execution.graphql");
operation!(ExecutionOutput, "graphql/sessions/execution_output.graphql");
operation!(Images, "graphql/sessions/images.graphql");
operation!(RescanImages, "graphql/sessions/rescan_images.graphql");
operation!(ResourceUsage, "graphql/sessions/resource_usage.graphql");
operation!(
    SendExecutionInput,
    "graphql/sessions/send_execution_input.graphql"
);
operation!(SessionDetail, "graphql/sessions/session_detail.graphql");
operation!(SessionList, "graphql/sessions/session_list.graphql");
operation!(SessionLogs, "graphql/sessions/session_logs.graphql");
operation!(SessionStats, "graphql/sessions/session_stats.graphql");
operation!(
    SessionStatusChanges,
    "graphql/sessions/session_status_changes.graphql"
);
operation!(SshPrivateKey, "graphql/sessions/ssh_private_key.graphql");
operation!(StartService, "graphql/sessions/start_service.graphql");
