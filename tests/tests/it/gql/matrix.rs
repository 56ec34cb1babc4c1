//! Operations of the `matrix` tests (documents in tests/graphql/matrix/). Those other tests
//! send too are the common ones (`gql::Name`), and the admin tests' mutations the matrix
//! borrows are `gql::admin`'s: one document per operation.
#[allow(unused_imports)]
use super::*;

operation!(
    AssociateScalingGroupWithKeypair,
    "graphql/matrix/associate_scaling_group_with_keypair.graphql"
);
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
operation!(Group, "graphql/matrix/group.graphql");
operation!(ImageById, "graphql/matrix/image_by_id.graphql");
operation!(Keypair, "graphql/matrix/keypair.graphql");
operation!(Me, "graphql/matrix/me.graphql");
operation!(
    ModifySessionTemplate,
    "graphql/matrix/modify_session_template.graphql"
);
operation!(
    ScalingGroupsForUserGroup,
    "graphql/matrix/scaling_groups_for_user_group.graphql"
);
operation!(SessionTemplate, "graphql/matrix/session_template.graphql");
operation!(User, "graphql/matrix/user.graphql");
operation!(VfolderFiles, "graphql/matrix/vfolder_files.graphql");
operation!(VictimsAfter, "graphql/matrix/victims_after.graphql");
operation!(CloneVfolder, "graphql/matrix/clone_vfolder.graphql");
operation!(LeaveVfolder, "graphql/matrix/leave_vfolder.graphql");
operation!(MoveVfolderFile, "graphql/matrix/move_vfolder_file.graphql");
operation!(PurgeVfolder, "graphql/matrix/purge_vfolder.graphql");
operation!(RestoreVfolder, "graphql/matrix/restore_vfolder.graphql");
operation!(SetVfolderShare, "graphql/matrix/set_vfolder_share.graphql");
operation!(
    ShareVfolderWithMembers,
    "graphql/matrix/share_vfolder_with_members.graphql"
);
operation!(
    UpdateVfolderOptions,
    "graphql/matrix/update_vfolder_options.graphql"
);
operation!(InviteToVfolder, "graphql/matrix/invite_to_vfolder.graphql");
operation!(VfolderShares, "graphql/matrix/vfolder_shares.graphql");
operation!(
    AcceptVfolderInvitation,
    "graphql/matrix/accept_vfolder_invitation.graphql"
);
operation!(
    DeclineVfolderInvitation,
    "graphql/matrix/decline_vfolder_invitation.graphql"
);
operation!(
    UpdateVfolderInvitation,
    "graphql/matrix/update_vfolder_invitation.graphql"
);
operation!(
    VfolderInvitations,
    "graphql/matrix/vfolder_invitations.graphql"
);
operation!(
    VfolderListOfGroup,
    "graphql/matrix/vfolder_list_of_group.graphql"
);
operation!(PurgeDomain, "graphql/matrix/purge_domain.graphql");
operation!(PurgeUser, "graphql/matrix/purge_user.graphql");
operation!(DeleteUser, "graphql/matrix/delete_user.graphql");
operation!(
    AccessibleScalingGroups,
    "graphql/matrix/accessible_scaling_groups.graphql"
);
operation!(VfolderNodes, "graphql/matrix/vfolder_nodes.graphql");
operation!(VfolderNode, "graphql/matrix/vfolder_node.graphql");
operation!(VfolderV2, "graphql/matrix/vfolder_v2.graphql");
operation!(
    UsageSeriesOfSession,
    "graphql/matrix/usage_series_of_session.graphql"
);
operation!(Endpoint, "graphql/matrix/endpoint.graphql");
operation!(Routing, "graphql/matrix/routing.graphql");
operation!(RoutingList, "graphql/matrix/routing_list.graphql");
operation!(EndpointToken, "graphql/matrix/endpoint_token.graphql");
operation!(
    EndpointTokenList,
    "graphql/matrix/endpoint_token_list.graphql"
);
operation!(ModifyEndpoint, "graphql/matrix/modify_endpoint.graphql");
operation!(DeleteEndpoint, "graphql/matrix/delete_endpoint.graphql");
operation!(
    CreateEndpointToken,
    "graphql/matrix/create_endpoint_token.graphql"
);
operation!(
    RevokeEndpointToken,
    "graphql/matrix/revoke_endpoint_token.graphql"
);
