//! Layer 2 of bai: the parts that decide without doing — no database connection, no engine,
//! no clock of their own. The error type every surface maps to its wire form (`error`), the
//! checks of names and emails (`validate`), the one path rule for storage folders (`path`),
//! the session-list filter language (`filter`) and the scheduler's planner (`plan`: a snapshot
//! in, placements and the predicates that failed out).
pub mod clock;
pub mod error;
pub mod filter;
pub mod image_ref;
pub mod path;
pub mod plan;
pub mod validate;
