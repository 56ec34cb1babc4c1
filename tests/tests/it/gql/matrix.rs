//! Operations of the `matrix` tests (documents in tests/graphql/matrix/). The mutations the
//! admin tests run too (modify_user, create_keypair, modify_domain, …) are `gql::admin`'s, and
//! destroy_session is the common `DestroySession`: one document per operation.
#[allow(unused_imports)]
use super::*;

operation!(
    AssociateScalingGroupWithKeypair,
    "graphql/matrix/associate_scaling_group_with_keypair.graphql"
);
operation!(BackgroundTask, "graphql/matrix/background_task.graphql");
operation!(
    BackgroundTaskEvents,
    "graphql/matrix/background_task_events.graphql"
);
operation!(ComputeSession, "graphql/matrix/compute_session.graphql");
operation!(
    ComputeSessionList,
    "graphql/matrix/compute_session_list.graphql"
);
operation!(CreateVfolder, "graphql/matrix/create_vfolder.graphql");
operation!(
    CreateVfolderDirectory,
    "graphql/matrix/create_vfolder_directory.graphql"
);
operation!(DeleteVfolder, "graphql/matrix/delete_vfolder.graphql");
operation!(
    DeleteVfolderFiles,
    "graphql/matrix/delete_vfolder_files.graphql"
);
operation!(DestroySessions, "graphql/matrix/destroy_sessions.graphql");
operation!(
    DisassociateScalingGroupWithDomain,
    "graphql/matrix/disassociate_scaling_group_with_domain.graphql"
);
operation!(
    DisassociateScalingGroupWithKeypair,
    "graphql/matrix/disassociate_scaling_group_with_keypair.graphql"
);
operation!(
    DisassociateScalingGroupWithUserGroup,
    "graphql/matrix/disassociate_scaling_group_with_user_group.graphql"
);
operation!(Domain, "graphql/matrix/domain.graphql");
operation!(
    ExecuteInSession,
    "graphql/matrix/execute_in_session.graphql"
);
operation!(Execution, "graphql/matrix/execution.graphql");
operation!(ExecutionOutput, "graphql/matrix/execution_output.graphql");
operation!(Group, "graphql/matrix/group.graphql");
operation!(Groups, "graphql/matrix/groups.graphql");
operation!(Keypair, "graphql/matrix/keypair.graphql");
operation!(KeypairList, "graphql/matrix/keypair_list.graphql");
operation!(Keypairs, "graphql/matrix/keypairs.graphql");
operation!(Me, "graphql/matrix/me.graphql");
operation!(RenameVfolder, "graphql/matrix/rename_vfolder.graphql");
operation!(
    RenameVfolderFile,
    "graphql/matrix/rename_vfolder_file.graphql"
);
operation!(RescanImages, "graphql/matrix/rescan_images.graphql");
operation!(ResourceUsage, "graphql/matrix/resource_usage.graphql");
operation!(
    ScalingGroupsForUserGroup,
    "graphql/matrix/scaling_groups_for_user_group.graphql"
);
operation!(
    SendExecutionInput,
    "graphql/matrix/send_execution_input.graphql"
);
operation!(SessionLogs, "graphql/matrix/session_logs.graphql");
operation!(
    SessionSshPrivateKey,
    "graphql/matrix/session_ssh_private_key.graphql"
);
operation!(SessionStats, "graphql/matrix/session_stats.graphql");
operation!(
    SessionStatusChanges,
    "graphql/matrix/session_status_changes.graphql"
);
operation!(StartService, "graphql/matrix/start_service.graphql");
operation!(User, "graphql/matrix/user.graphql");
operation!(UserList, "graphql/matrix/user_list.graphql");
operation!(Users, "graphql/matrix/users.graphql");
operation!(Vfolder, "graphql/matrix/vfolder.graphql");
operation!(VfolderFiles, "graphql/matrix/vfolder_files.graphql");
operation!(VictimsAfter, "graphql/matrix/victims_after.graphql");
