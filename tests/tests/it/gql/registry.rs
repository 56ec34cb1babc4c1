//! Operations of the `registry` tests (documents in tests/graphql/registry/).
#[allow(unused_imports)]
use super::*;

operation!(
    BackgroundTaskEvents,
    "graphql/registry/background_task_events.graphql"
);
operation!(BackgroundTask, "graphql/registry/background_task.graphql");
operation!(CreateRegistry, "graphql/registry/create_registry.graphql");
operation!(ModifyRegistry, "graphql/registry/modify_registry.graphql");
operation!(RescanImages, "graphql/registry/rescan_images.graphql");
operation!(Image, "graphql/registry/image.graphql");
operation!(Images, "graphql/registry/images.graphql");
operation!(SessionHistory, "graphql/registry/session_history.graphql");
