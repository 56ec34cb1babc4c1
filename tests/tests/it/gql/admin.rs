//! Operations of the `admin` tests (documents in tests/graphql/admin/).
#[allow(unused_imports)]
use super::*;

operation!(
    AssociateScalingGroupWithDomain,
    "graphql/admin/associate_scaling_group_with_domain.graphql"
);
operation!(
    AssociateScalingGroupWithUserGroup,
    "graphql/admin/associate_scaling_group_with_user_group.graphql"
);
operation!(
    CreateContainerRegistry,
    "graphql/admin/create_container_registry.graphql"
);
operation!(
    CreateDomainDetail,
    "graphql/admin/create_domain_detail.graphql"
);
operation!(
    CreatePolicyDetail,
    "graphql/admin/create_policy_detail.graphql"
);
operation!(CreateUserDetail, "graphql/admin/create_user_detail.graphql");
operation!(
    DeleteContainerRegistry,
    "graphql/admin/delete_container_registry.graphql"
);
operation!(DeleteKeypair, "../web/graphql/admin/delete_keypair.graphql");
operation!(DeletePolicy, "../web/graphql/admin/delete_policy.graphql");
operation!(
    DeleteScalingGroup,
    "graphql/admin/delete_scaling_group.graphql"
);
operation!(KeypairIsActive, "graphql/admin/keypair_is_active.graphql");
operation!(
    ModifyContainerRegistry,
    "graphql/admin/modify_container_registry.graphql"
);
operation!(ModifyGroup, "graphql/admin/modify_group.graphql");
operation!(PurgeGroup, "graphql/admin/purge_group.graphql");
operation!(ModifyPreset, "graphql/admin/modify_preset.graphql");
operation!(
    ModifyScalingGroup,
    "graphql/admin/modify_scaling_group.graphql"
);
operation!(
    ModifySystemSetting,
    "graphql/admin/modify_system_setting.graphql"
);
operation!(ResourcePreset, "graphql/admin/resource_preset.graphql");
operation!(UserIds, "graphql/admin/user_ids.graphql");
operation!(
    UserStatusAndKeypairs,
    "graphql/admin/user_status_and_keypairs.graphql"
);
