//! Operations of the `live` tests (documents in tests/graphql/live/).
#[allow(unused_imports)]
use super::*;

operation!(DealiasImage, "graphql/live/dealias_image.graphql");
operation!(ForgetImage, "graphql/live/forget_image.graphql");
operation!(KeypairIsAdmin, "graphql/live/keypair_is_admin.graphql");
operation!(PresetChanges, "graphql/live/preset_changes.graphql");
