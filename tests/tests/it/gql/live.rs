//! Operations of the `live` tests (documents in tests/graphql/live/).
use super::*;

operation!(AliasImage, "graphql/live/alias_image.graphql");
operation!(CreatePreset, "graphql/live/create_preset.graphql");
operation!(DealiasImage, "graphql/live/dealias_image.graphql");
operation!(DeletePreset, "graphql/live/delete_preset.graphql");
operation!(ForgetImage, "graphql/live/forget_image.graphql");
operation!(Image, "graphql/live/image.graphql");
operation!(KeypairIsAdmin, "graphql/live/keypair_is_admin.graphql");
operation!(ModifyImage, "graphql/live/modify_image.graphql");
operation!(PresetChanges, "graphql/live/preset_changes.graphql");
operation!(UserChanges, "graphql/live/user_changes.graphql");
