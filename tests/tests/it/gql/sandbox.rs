//! Operations of the `sandbox` tests (documents in tests/graphql/sandbox/); its folder
//! operations are the `storage` ones.
#[allow(unused_imports)]
use super::*;

operation!(
    ExecuteInSession,
    "graphql/sandbox/execute_in_session.graphql"
);
operation!(Execution, "graphql/sandbox/execution.graphql");
operation!(StartService, "graphql/sandbox/start_service.graphql");
operation!(SessionLogs, "graphql/sandbox/session_logs.graphql");
