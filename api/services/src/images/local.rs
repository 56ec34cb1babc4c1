//! The images an engine holds: its environment images scanned into the catalog, and which
//! agents have each image.
use std::collections::HashMap;

use bai_core::image_ref::ImageRef;
use entity::enums::ImageType;
use entity::images;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, Set};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::agents::registry::Agent;
use crate::error::ApiResult;
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Engines;

/// `{slot: {"min", "max"}}` from the image's `ai.backend.resource.min.*` labels (defaults: cpu
/// 1, mem 1g as Backend.AI).
pub fn resources_from_labels(labels: &HashMap<String, String>) -> Value {
    let mut out = serde_json::Map::new();
    let min = |slot: &str, default: &str| {
        let raw = labels
            .get(&format!("ai.backend.resource.min.{slot}"))
            .map(String::as_str)
            .unwrap_or(default);
        entity::slots::parse_amount(slot, raw)
            .unwrap_or_default()
            .to_string()
    };
    out.insert("cpu".into(), json!({"min": min("cpu", "1"), "max": null}));
    out.insert("mem".into(), json!({"min": min("mem", "1g"), "max": null}));
    for (k, v) in labels {
        if let Some(slot) = k.strip_prefix("ai.backend.resource.min.")
            && slot != "cpu"
            && slot != "mem"
            && let Ok(amount) = entity::slots::parse_amount(slot, v)
        {
            out.insert(
                slot.to_string(),
                json!({"min": amount.to_string(), "max": null}),
            );
        }
    }
    Value::Object(out)
}

/// Adds the engine's environment images (those with `ai.backend.kernelspec`) to the catalog
/// and records which agent has them. Edited minimum resources are kept on rescan.
pub async fn scan(state: &impl Engines, agent: &Agent) -> ApiResult<usize> {
    let found = agent.environment_images().await?;
    let agent = agent.info();
    let mut count = 0;
    for img in found {
        for reference in &img.repo_tags {
            if reference.ends_with("<none>") {
                continue;
            }
            let ImageRef {
                registry,
                path: image,
                tag,
            } = ImageRef::parse(reference, &state.config().local_registry_name);
            let name = format!("{registry}/{image}:{tag}");
            let labels: Value = json!(img.labels);
            let existing = images::Entity::find()
                .filter(images::Column::Name.eq(&name))
                .filter(images::Column::Architecture.eq(&agent.architecture))
                .one(state.db())
                .await?;
            let (installed, action) = match existing {
                Some(row) => {
                    let mut agents = row.installed_agents.clone();
                    if !agents.contains(&agent.id) {
                        agents.0.push(agent.id.clone());
                    }
                    let mut m = row.into_active_model();
                    m.config_digest = Set(img.id.clone());
                    m.size_bytes = Set(img.size);
                    m.labels = Set(labels);
                    m.is_local = Set(true);
                    m.installed_agents = Set(agents);
                    (m.update(state.db()).await?, ChangeAction::Modified)
                }
                None => (
                    images::ActiveModel {
                        id: Set(Uuid::new_v4()),
                        name: Set(name.clone()),
                        image: Set(image),
                        tag: Set(tag),
                        registry: Set(registry),
                        architecture: Set(agent.architecture.clone()),
                        config_digest: Set(img.id.clone()),
                        size_bytes: Set(img.size),
                        is_local: Set(true),
                        image_type: Set(ImageType::Compute),
                        accelerators: Set(img.labels.get("ai.backend.accelerators").cloned()),
                        resources: Set(resources_from_labels(&img.labels)),
                        labels: Set(labels),
                        created_at: Set(state.clock().now()),
                        installed_agents: Set(vec![agent.id.clone()].into()),
                        owner_id: Set(super::owner_of(&img.labels)),
                    }
                    .insert(state.db())
                    .await?,
                    ChangeAction::Created,
                ),
            };
            if action == ChangeAction::Created {
                super::seed_aliases(state.db(), &installed).await?;
            }
            state
                .events()
                .changed(ObjectKind::Image, action, &installed.name, None);
            count += 1;
        }
    }
    Ok(count)
}

/// Records that `agent_id` now has `image` locally.
pub async fn mark_installed(
    state: &impl Engines,
    image: &images::Model,
    agent_id: &str,
) -> ApiResult<()> {
    // Read again under the image's turn: two agents marked at once must not undo each other.
    let _turn = state.agents().turn(format!("image-row:{}", image.id)).await;
    let image = crate::lookup::get::<images::Entity>(state.db(), "image", image.id).await?;
    let mut agents = image.installed_agents.clone();
    if agents.contains(agent_id) {
        return Ok(());
    }
    agents.0.push(agent_id.to_string());
    let mut m = image.clone().into_active_model();
    m.installed_agents = Set(agents);
    m.update(state.db()).await?;
    state
        .events()
        .changed(ObjectKind::Image, ChangeAction::Modified, &image.name, None);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimum_resources_from_labels() {
        let labels: HashMap<String, String> = [(
            "ai.backend.resource.min.mem".to_string(),
            "256m".to_string(),
        )]
        .into_iter()
        .collect();
        let r = resources_from_labels(&labels);
        assert_eq!(r["mem"]["min"], "268435456");
        assert_eq!(r["cpu"]["min"], "1");
    }
}
