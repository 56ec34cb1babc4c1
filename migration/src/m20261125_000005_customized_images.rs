//! Sessions committed to images (Backend.AI's "convert session to image"): an image may
//! belong to one user (`images.owner_id`; NULL: the global catalog), and the keypair policy
//! says how many such images a user may keep (`max_customized_image_count`, 0 = none).
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{integer, uuid_null};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000005_customized_images"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new("images"))
                    .add_column(uuid_null(Alias::new("owner_id")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_images_owner_id")
                    .table(Alias::new("images"))
                    .col(Alias::new("owner_id"))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new("keypair_resource_policies"))
                    .add_column(integer(Alias::new("max_customized_image_count")).default(3))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new("keypair_resource_policies"))
                    .drop_column(Alias::new("max_customized_image_count"))
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("ix_images_owner_id")
                    .table(Alias::new("images"))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new("images"))
                    .drop_column(Alias::new("owner_id"))
                    .to_owned(),
            )
            .await
    }
}
