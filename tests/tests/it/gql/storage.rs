//! Operations of the `storage` tests (documents in tests/graphql/storage/); the `sandbox`
//! tests use the folder ones too.
#[allow(unused_imports)]
use super::*;

operation!(CreateVfolder, "graphql/storage/create_vfolder.graphql");
operation!(VfolderHosts, "graphql/storage/vfolder_hosts.graphql");
operation!(Vfolder, "graphql/storage/vfolder.graphql");
operation!(VfolderUsage, "graphql/storage/vfolder_usage.graphql");
operation!(VfolderList, "graphql/storage/vfolder_list.graphql");
operation!(RenameVfolder, "graphql/storage/rename_vfolder.graphql");
operation!(DeleteVfolder, "graphql/storage/delete_vfolder.graphql");
operation!(
    CreateVfolderDirectory,
    "graphql/storage/create_vfolder_directory.graphql"
);
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
operation!(
    RenameVfolderFile,
    "graphql/storage/rename_vfolder_file.graphql"
);
operation!(
    DeleteVfolderFiles,
    "graphql/storage/delete_vfolder_files.graphql"
);
operation!(Groups, "graphql/storage/groups.graphql");
operation!(VfolderChanges, "graphql/storage/vfolder_changes.graphql");
