//! Operations of the `hosts` tests (documents in tests/graphql/hosts/).
use super::*;

operation!(SessionProgress, "graphql/hosts/session_progress.graphql");
operation!(ImageAgents, "graphql/hosts/image_agents.graphql");
