//! Operations of the `admin` tests (documents in tests/graphql/admin/).
#[allow(unused_imports)]
use super::*;

operation!(AliasImage, "graphql/admin/alias_image.graphql");
operation!(
    AssociateScalingGroupWithDomain,
    "graphql/admin/associate_scaling_group_with_domain.graphql"
);
operation!(
    AssociateScalingGroupWithUserGroup,
    "graphql/admin/associate_scaling_group_with_user_group.graphql"
);
operation!(
    ContainerRegistries,
    "graphql/admin/container_registries.graphql"
);
operation!(
    CreateContainerRegistry,
    "graphql/admin/create_container_registry.graphql"
);
operation!(
    CreateDomainDetail,
    "graphql/admin/create_domain_detail.graphql"
);
operation!(CreateGroup, "graphql/admin/create_group.graphql");
operation!(CreateKeypair, "graphql/admin/create_keypair.graphql");
operation!(
    CreatePolicyDetail,
    "graphql/admin/create_policy_detail.graphql"
);
operation!(CreatePreset, "graphql/admin/create_preset.graphql");
operation!(
    CreateScalingGroup,
    "graphql/admin/create_scaling_group.graphql"
);
operation!(CreateUserDetail, "graphql/admin/create_user_detail.graphql");
operation!(
    DeleteContainerRegistry,
    "graphql/admin/delete_container_registry.graphql"
);
operation!(DeleteKeypair, "graphql/admin/delete_keypair.graphql");
operation!(DeletePolicy, "graphql/admin/delete_policy.graphql");
operation!(DeletePreset, "graphql/admin/delete_preset.graphql");
operation!(
    DeleteScalingGroup,
    "graphql/admin/delete_scaling_group.graphql"
);
operation!(Images, "graphql/admin/images.graphql");
operation!(KeypairIsActive, "graphql/admin/keypair_is_active.graphql");
operation!(KeypairList, "graphql/admin/keypair_list.graphql");
operation!(Keypairs, "graphql/admin/keypairs.graphql");
operation!(
    ModifyContainerRegistry,
    "graphql/admin/modify_container_registry.graphql"
);
operation!(ModifyDomain, "graphql/admin/modify_domain.graphql");
operation!(ModifyGroup, "graphql/admin/modify_group.graphql");
operation!(ModifyImage, "graphql/admin/modify_image.graphql");
operation!(ModifyKeypair, "graphql/admin/modify_keypair.graphql");
operation!(ModifyPolicy, "graphql/admin/modify_policy.graphql");
operation!(ModifyPreset, "graphql/admin/modify_preset.graphql");
operation!(
    ModifyScalingGroup,
    "graphql/admin/modify_scaling_group.graphql"
);
operation!(
    ModifySystemSetting,
    "graphql/admin/modify_system_setting.graphql"
);
operation!(ModifyUser, "graphql/admin/modify_user.graphql");
operation!(ResourcePreset, "graphql/admin/resource_preset.graphql");
operation!(ResourcePresets, "graphql/admin/resource_presets.graphql");
operation!(ScalingGroups, "graphql/admin/scaling_groups.graphql");
operation!(SystemSettings, "graphql/admin/system_settings.graphql");
operation!(UserIds, "graphql/admin/user_ids.graphql");
operation!(
    UserStatusAndKeypairs,
    "graphql/admin/user_status_and_keypairs.graphql"
);
operation!(Users, "graphql/admin/users.graphql");
