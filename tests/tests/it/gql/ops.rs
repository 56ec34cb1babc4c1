//! Operations of the `ops` tests (documents in tests/graphql/ops/).
use super::*;

operation!(MyIds, "graphql/ops/my_ids.graphql");
operation!(RestoredView, "graphql/ops/restored_view.graphql");
operation!(WhoAmI, "graphql/ops/who_am_i.graphql");
