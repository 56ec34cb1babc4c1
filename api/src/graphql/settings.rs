//! GraphQL for system settings.
use async_graphql::{Context, Object, SimpleObject};

use crate::graphql::{context::authed, scalars::JsonString};

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct SystemSetting {
    pub key: String,
    pub value: JsonString,
    pub description: String,
    pub editable: bool,
}

impl From<crate::settings::Setting> for SystemSetting {
    fn from(s: crate::settings::Setting) -> Self {
        Self {
            key: s.key,
            value: JsonString(s.value),
            description: s.description,
            editable: s.editable,
        }
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifySystemSetting {
    pub ok: bool,
    pub msg: String,
    pub setting: Option<SystemSetting>,
}

#[derive(Default)]
pub struct SettingQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl SettingQuery {
    /// The server's settings (administrators).
    async fn system_settings(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<SystemSetting>> {
        let (state, caller) = authed(ctx)?;
        caller.require_admin()?;
        Ok(crate::settings::list(state)
            .await?
            .into_iter()
            .map(SystemSetting::from)
            .collect())
    }
}

#[derive(Default)]
pub struct SettingMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl SettingMutation {
    /// Changes an editable setting (superadmin).
    async fn modify_system_setting(
        &self,
        ctx: &Context<'_>,
        key: String,
        value: JsonString,
    ) -> crate::graphql::context::Result<ModifySystemSetting> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let setting = crate::settings::modify(state, &scope, &key, value.0).await?;
        Ok(ModifySystemSetting {
            ok: true,
            msg: "success".into(),
            setting: Some(SystemSetting::from(setting)),
        })
    }
}
