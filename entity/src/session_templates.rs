//! Session templates: a task template (Backend.AI's `task_template_v1`, normalized) with its
//! owner, project and scope. Deleted ones stay with `is_active = false`.
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "session_templates")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub created_at: DateTimeUtc,
    pub modified_at: DateTimeUtc,
    pub is_active: bool,
    pub domain_name: String,
    pub group_id: Option<Uuid>,
    pub user_uuid: Uuid,
    /// `task` (cluster templates are not kept).
    #[sea_orm(column_name = "type")]
    pub template_type: String,
    /// Who may see and use it: `user` (the owner), `group` (the project's members),
    /// `domain` (everyone in the domain).
    pub scope: String,
    pub name: String,
    pub template: Json,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
