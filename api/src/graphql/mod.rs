//! GraphQL: the schema (`schema`), what every resolver uses (`context`), the per-domain
//! resolvers, and the HTTP/WebSocket handlers (`http`). Imports point one way: handlers →
//! schema → resolvers → context.
pub use bai_core::filter;
pub mod accounts;
pub mod agents;
pub mod bgtasks;
pub mod context;
pub mod domains;
pub mod filters;
pub mod folder_nodes;
pub mod groups;
pub mod http;
pub mod images;
pub mod keypairs;
pub mod limits;
pub mod order;
pub mod policies;
pub mod presets;
pub mod registries;
pub mod scalars;
pub mod scaling_groups;
pub mod schema;
pub mod serving;
pub mod sessions;
pub mod settings;
pub mod statistics;
pub mod storage;
pub mod templates;
pub mod users;
pub mod users_v2;
pub mod ws_guard;

#[cfg(test)]
mod tests {
    #[test]
    fn committed_schema_matches_live_schema() {
        let live = super::schema::sdl();
        let committed = include_str!("../../schema.graphql");
        assert!(
            live == committed,
            "api/schema.graphql is out of date: regenerate it with `cargo run -p bai -- schema > api/schema.graphql`"
        );
    }
}
