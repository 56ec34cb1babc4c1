//! Operations of the `sessions` tests (documents in tests/graphql/sessions/).
use super::*;

operation!(Agents, "graphql/sessions/agents.graphql");
operation!(AgentList, "graphql/sessions/agent_list.graphql");
operation!(
    DestroySessionState,
    "graphql/sessions/destroy_session_state.graphql"
);
operation!(SessionDetail, "graphql/sessions/session_detail.graphql");
