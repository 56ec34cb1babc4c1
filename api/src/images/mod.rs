//! The image catalog: metadata of environment images, their minimum resources and aliases.
//! Rescanning engines and registries fills it (sessions issue); here it is read and edited.
pub mod graphql;

use entity::{image_aliases, images};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};

/// Finds an image by UUID, canonical reference or alias (optionally for one architecture).
pub async fn resolve<C: ConnectionTrait>(
    db: &C,
    target: &str,
    architecture: Option<&str>,
) -> ApiResult<images::Model> {
    let not_found = || ApiError::not_found("image", target);
    let mut select = images::Entity::find();
    if let Ok(id) = Uuid::parse_str(target) {
        select = select.filter(images::Column::Id.eq(id));
    } else if let Some(alias) = image_aliases::Entity::find()
        .filter(image_aliases::Column::Alias.eq(target))
        .one(db)
        .await?
    {
        select = select.filter(images::Column::Id.eq(alias.image));
    } else if let Some((name, digest)) = target.split_once('@') {
        // `registry/namespace/name@sha256:…`: the image with that manifest digest.
        let (registry, image, _) = crate::agents::split_reference(name, "");
        select = select
            .filter(images::Column::Registry.eq(registry))
            .filter(images::Column::Image.eq(image))
            .filter(images::Column::ConfigDigest.eq(digest));
    } else {
        select = select.filter(images::Column::Name.eq(target));
    }
    if let Some(a) = architecture {
        select = select.filter(images::Column::Architecture.eq(a));
    }
    select.one(db).await?.ok_or_else(not_found)
}
