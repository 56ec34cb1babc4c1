//! The data model of bai, shaped after Backend.AI's tables: one module per table, plus the
//! shared enums (Backend.AI's string values) and the resource-slot types.
pub use bai_types::{columns, enums, slots};

pub mod agents;
pub mod association_groups_users;
pub mod audit_logs;
pub mod container_registries;
pub mod domains;
pub mod email_tokens;
pub mod endpoint_tokens;
pub mod endpoints;
pub mod groups;
pub mod image_aliases;
pub mod images;
pub mod kernels;
pub mod keypair_resource_policies;
pub mod keypairs;
pub mod login_sessions;
pub mod resource_presets;
pub mod routings;
pub mod scaling_groups;
pub mod session_dependencies;
pub mod session_templates;
pub mod sessions;
pub mod sgroups_for_domains;
pub mod sgroups_for_groups;
pub mod sgroups_for_keypairs;
pub mod system_settings;
pub mod usage_series;
pub mod users;
pub mod vfolder_invitations;
pub mod vfolder_permissions;
pub mod vfolder_transfers;
pub mod vfolders;
