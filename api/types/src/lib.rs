//! Layer 1 of bai: the types every other part shares — Backend.AI's string enums, resource
//! slots, error codes and event payloads. It depends on nothing of bai and builds for the
//! console (wasm32) too; database and GraphQL derives are features (`db`, `graphql`).
pub mod columns;
pub mod enums;
pub mod error;
pub mod events;
pub mod password;
pub mod slots;
