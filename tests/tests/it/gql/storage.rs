//! Operations of the `storage` tests (documents in tests/graphql/storage/); the `sandbox`
//! tests use the folder ones too.
#[allow(unused_imports)]
use super::*;

operation!(VfolderHosts, "graphql/storage/vfolder_hosts.graphql");
operation!(VfolderUsage, "graphql/storage/vfolder_usage.graphql");
operation!(VfolderList, "graphql/storage/vfolder_list.graphql");
operation!(
    VfolderFileNames,
    "graphql/storage/vfolder_file_names.graphql"
);
operation!(
    VfolderFileTypes,
    "graphql/storage/vfolder_file_types.graphql"
);
operation!(
    VfolderFileDetails,
    "graphql/storage/vfolder_file_details.graphql"
);
operation!(VfolderChanges, "graphql/storage/vfolder_changes.graphql");
