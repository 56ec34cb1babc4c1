//! Layer 3 of bai, a port: access to the content of storage folders. [`FolderStore`] is what
//! the services and the file-transfer surface may ask of a storage host — what a path is, list,
//! make directories, rename, remove, measure, read a file, write one (all or nothing), archive
//! a directory — for a folder given by its root on that host. [`LocalStore`] does it on this
//! machine through directory handles (`fsat`): every step is `openat(O_NOFOLLOW)`, so content a
//! session wrote (links, FIFOs, swapped directories) can never send it outside the folder. A
//! storage host reached over the network (several hosts) implements the same trait.
pub mod fsat;

use std::path::{Path, PathBuf};
use std::pin::Pin;

use bai_core::error::{ApiError, ApiResult};
pub use fsat::{Entry, Kind};
use futures_util::StreamExt;

/// Storage host name → the path where a host (an agent's, or the manager's) sees it.
pub type StoragePaths = std::collections::BTreeMap<String, PathBuf>;

/// Bytes read from a folder.
pub type ByteReader = Pin<Box<dyn tokio::io::AsyncRead + Send>>;
/// Bytes streamed out of a folder; an error item means the stream broke off (the client must
/// not take what it got for the whole).
pub type ByteStream =
    Pin<Box<dyn futures_util::Stream<Item = std::io::Result<bytes::Bytes>> + Send>>;

/// A file being written into a folder: nothing is there under its name until `commit`.
#[async_trait::async_trait]
pub trait Upload: Send {
    /// Where the bytes go.
    fn writer(&mut self) -> &mut (dyn tokio::io::AsyncWrite + Send + Unpin);
    /// Puts the finished file in place (replacing a link there, never writing through it).
    async fn commit(self: Box<Self>) -> ApiResult<()>;
}

/// Access to folder content on a storage host.
#[async_trait::async_trait]
pub trait FolderStore: Send + Sync {
    /// What `path` is (None: nothing there); a link is reported, never followed.
    async fn kind(&self, root: &Path, path: &str) -> ApiResult<Option<Kind>>;
    /// The entries of directory `path`.
    async fn list(&self, root: &Path, path: &str) -> ApiResult<Vec<Entry>>;
    /// Makes directory `path` (and its parents with `parents`).
    async fn mkdir(&self, root: &Path, path: &str, parents: bool) -> ApiResult<()>;
    /// Renames `path` to `new_name` in the same directory.
    async fn rename(&self, root: &Path, path: &str, new_name: &str) -> ApiResult<()>;
    /// Removes `path` (a directory only with `recursive`, unless empty).
    async fn remove(&self, root: &Path, path: &str, recursive: bool) -> ApiResult<()>;
    /// Size in bytes and number of files of the folder (0, 0 when it cannot be read).
    async fn usage(&self, root: &Path) -> (u64, u64);
    /// Regular file `path` (never a FIFO, socket or device) and its size when opened.
    async fn read(&self, root: &Path, path: &str) -> ApiResult<(ByteReader, u64)>;
    /// Regular file `path` from byte `offset` on (ranged downloads): the reader, the file's
    /// whole size when opened, and when it was last modified.
    async fn read_from(
        &self,
        root: &Path,
        path: &str,
        offset: u64,
    ) -> ApiResult<(ByteReader, u64, Option<std::time::SystemTime>)>;
    /// A new file at `path`, written beside it and moved into place on commit.
    async fn write(&self, root: &Path, path: &str) -> ApiResult<Box<dyn Upload>>;
    /// Directory `path` as a tar archive whose top directory is named `top`.
    fn archive(&self, root: &Path, path: &str, top: &str) -> ByteStream;
    /// Makes a new folder's root, owned by the sessions' user (`work`).
    async fn create_folder(&self, root: &Path) -> ApiResult<()>;
    /// Removes a folder's root and everything in it (links are removed, never followed);
    /// a folder already gone is fine.
    async fn remove_folder(&self, root: &Path) -> std::io::Result<()>;
    /// Moves `src` to `dst` (into it when it is a directory); never replaces.
    async fn move_to(&self, root: &Path, src: &str, dst: &str) -> ApiResult<()>;
    /// Copies every directory and regular file of folder `from` into the empty folder `to`
    /// (never a link, FIFO or hard link), stopping with an error past `limit` bytes; `copied`
    /// hears the bytes so far. (bytes, files).
    async fn copy(
        &self,
        from: &Path,
        to: &Path,
        limit: u64,
        copied: Box<dyn FnMut(u64) + Send>,
    ) -> ApiResult<(u64, u64)>;
    /// The size of upload `name` staged in the server's own directory `staging` (beside the
    /// folders of a storage host, never inside one); None when there is none.
    async fn staged_len(&self, staging: &Path, name: &str) -> ApiResult<Option<u64>>;
    /// Upload `name` in `staging` opened to append at `offset`, which must be its size (a
    /// new upload at 0); CONFLICT otherwise.
    async fn stage(
        &self,
        staging: &Path,
        name: &str,
        offset: u64,
    ) -> ApiResult<Box<dyn tokio::io::AsyncWrite + Send + Unpin>>;
    /// Moves staged upload `name` to `path` of the folder at `root` (a file there is
    /// replaced, a link at the name too, never written through).
    async fn adopt(&self, root: &Path, staging: &Path, name: &str, path: &str) -> ApiResult<()>;
    /// Forgets staged upload `name` (gone already is fine).
    async fn unstage(&self, staging: &Path, name: &str);
}

/// `O_NOFOLLOW`: the server's own staging files are never links.
fn libc_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// The storage of this machine.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalStore;

/// Runs a blocking operation on the folder at `root` (through handles) off the runtime.
async fn with_folder<T, F>(root: &Path, op: F) -> ApiResult<T>
where
    T: Send + 'static,
    F: FnOnce(&fsat::Folder) -> ApiResult<T> + Send + 'static,
{
    let root: PathBuf = root.to_path_buf();
    tokio::task::spawn_blocking(move || op(&fsat::Folder::open(&root)?))
        .await
        .map_err(|e| ApiError::internal("working on folder content", e))?
}

struct LocalUpload {
    upload: Option<fsat::Upload>,
    file: tokio::fs::File,
}

#[async_trait::async_trait]
impl Upload for LocalUpload {
    fn writer(&mut self) -> &mut (dyn tokio::io::AsyncWrite + Send + Unpin) {
        &mut self.file
    }

    async fn commit(self: Box<Self>) -> ApiResult<()> {
        let LocalUpload { upload, mut file } = *self;
        tokio::io::AsyncWriteExt::flush(&mut file)
            .await
            .map_err(|e| ApiError::internal("writing an upload", e))?;
        drop(file);
        let upload =
            upload.ok_or_else(|| ApiError::internal("storing an upload", "committed twice"))?;
        tokio::task::spawn_blocking(move || upload.commit())
            .await
            .map_err(|e| ApiError::internal("storing an upload", e))?
    }
}

#[async_trait::async_trait]
impl FolderStore for LocalStore {
    async fn kind(&self, root: &Path, path: &str) -> ApiResult<Option<Kind>> {
        let path = path.to_string();
        with_folder(root, move |f| f.kind(&path)).await
    }

    async fn list(&self, root: &Path, path: &str) -> ApiResult<Vec<Entry>> {
        let path = path.to_string();
        with_folder(root, move |f| f.list(&path)).await
    }

    async fn mkdir(&self, root: &Path, path: &str, parents: bool) -> ApiResult<()> {
        let path = path.to_string();
        with_folder(root, move |f| f.mkdir(&path, parents)).await
    }

    async fn rename(&self, root: &Path, path: &str, new_name: &str) -> ApiResult<()> {
        let (path, new_name) = (path.to_string(), new_name.to_string());
        with_folder(root, move |f| f.rename(&path, &new_name)).await
    }

    async fn remove(&self, root: &Path, path: &str, recursive: bool) -> ApiResult<()> {
        let path = path.to_string();
        with_folder(root, move |f| f.remove(&path, recursive)).await
    }

    async fn usage(&self, root: &Path) -> (u64, u64) {
        with_folder(root, |f| Ok(f.usage())).await.unwrap_or((0, 0))
    }

    async fn read(&self, root: &Path, path: &str) -> ApiResult<(ByteReader, u64)> {
        let path = path.to_string();
        let (file, len) = with_folder(root, move |f| f.open_file(&path)).await?;
        // Exactly the size found at opening, even if the file grows meanwhile.
        let reader = tokio::io::AsyncReadExt::take(tokio::fs::File::from_std(file), len);
        Ok((Box::pin(reader), len))
    }

    async fn read_from(
        &self,
        root: &Path,
        path: &str,
        offset: u64,
    ) -> ApiResult<(ByteReader, u64, Option<std::time::SystemTime>)> {
        use std::io::Seek;
        let path = path.to_string();
        let (file, len, modified) = with_folder(root, move |f| {
            let (mut file, len) = f.open_file(&path)?;
            let modified = file.metadata().ok().and_then(|m| m.modified().ok());
            file.seek(std::io::SeekFrom::Start(offset.min(len)))
                .map_err(|e| ApiError::internal("reading a file", e))?;
            Ok((file, len, modified))
        })
        .await?;
        let reader = tokio::io::AsyncReadExt::take(
            tokio::fs::File::from_std(file),
            len.saturating_sub(offset),
        );
        Ok((Box::pin(reader), len, modified))
    }

    async fn write(&self, root: &Path, path: &str) -> ApiResult<Box<dyn Upload>> {
        let path = path.to_string();
        let mut upload = with_folder(root, move |f| f.create_upload(&path)).await?;
        let file = upload
            .take_file()
            .ok_or_else(|| ApiError::internal("writing an upload", "no file"))?;
        Ok(Box::new(LocalUpload {
            upload: Some(upload),
            file: tokio::fs::File::from_std(file),
        }))
    }

    async fn create_folder(&self, root: &Path) -> ApiResult<()> {
        tokio::fs::create_dir_all(root)
            .await
            .map_err(|e| ApiError::internal("creating a folder directory", e))?;
        // Sessions run as uid 1000 (`work`): the folder must be theirs to write.
        let _ = std::os::unix::fs::chown(root, Some(fsat::WORK_ID), Some(fsat::WORK_ID));
        Ok(())
    }

    async fn remove_folder(&self, root: &Path) -> std::io::Result<()> {
        match tokio::fs::remove_dir_all(root).await {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    async fn move_to(&self, root: &Path, src: &str, dst: &str) -> ApiResult<()> {
        let (src, dst) = (src.to_string(), dst.to_string());
        with_folder(root, move |f| f.move_to(&src, &dst)).await
    }

    async fn copy(
        &self,
        from: &Path,
        to: &Path,
        limit: u64,
        mut copied: Box<dyn FnMut(u64) + Send>,
    ) -> ApiResult<(u64, u64)> {
        let to = to.to_path_buf();
        with_folder(from, move |f| {
            let dst = fsat::Folder::open(&to)?;
            f.copy_into(&dst, limit, &mut *copied)
        })
        .await
    }

    async fn staged_len(&self, staging: &Path, name: &str) -> ApiResult<Option<u64>> {
        match tokio::fs::symlink_metadata(staging.join(name)).await {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Err(ApiError::internal("reading an upload", "not a file")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ApiError::internal("reading an upload", e)),
        }
    }

    async fn stage(
        &self,
        staging: &Path,
        name: &str,
        offset: u64,
    ) -> ApiResult<Box<dyn tokio::io::AsyncWrite + Send + Unpin>> {
        tokio::fs::create_dir_all(staging)
            .await
            .map_err(|e| ApiError::internal("making the uploads' directory", e))?;
        let file = tokio::fs::OpenOptions::new()
            .append(true)
            .create(offset == 0)
            .custom_flags(libc_nofollow())
            .open(staging.join(name))
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => ApiError::not_found("upload", name),
                _ => ApiError::internal("writing an upload", e),
            })?;
        // One writer at a time, whichever manager it reached: the others are told so.
        if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
            return Err(ApiError::conflict(
                "Another request is writing this upload; retry after it ends",
            ));
        }
        let len = file
            .metadata()
            .await
            .map_err(|e| ApiError::internal("writing an upload", e))?
            .len();
        if len != offset {
            return Err(ApiError::conflict(format!(
                "The upload is at offset {len}, not {offset}"
            )));
        }
        Ok(Box::new(file))
    }

    async fn adopt(&self, root: &Path, staging: &Path, name: &str, path: &str) -> ApiResult<()> {
        let (staging, name, path) = (staging.to_path_buf(), name.to_string(), path.to_string());
        with_folder(root, move |f| f.adopt(&staging, &name, &path)).await
    }

    async fn unstage(&self, staging: &Path, name: &str) {
        let _ = tokio::fs::remove_file(staging.join(name)).await;
    }

    fn archive(&self, root: &Path, path: &str, top: &str) -> ByteStream {
        let (w, r) = tokio::io::duplex(256 * 1024);
        let bridge = tokio_util::io::SyncIoBridge::new(w);
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<Result<(), String>>();
        let (root, path, top) = (root.to_path_buf(), path.to_string(), top.to_string());
        tokio::task::spawn_blocking(move || {
            let result = fsat::Folder::open(&root).and_then(|f| f.archive(&path, &top, bridge));
            // The archive's reader may have hung up (download cancelled); nobody waits for the result.
            let _ = done_tx.send(result.map_err(|e| e.message));
        });
        let data = tokio_util::io::ReaderStream::new(r);
        let end = futures_util::stream::once(async move {
            match done_rx.await {
                Ok(Ok(())) => None,
                Ok(Err(m)) => Some(Err(std::io::Error::other(m))),
                Err(_) => Some(Err(std::io::Error::other("the archive stopped"))),
            }
        })
        .filter_map(std::future::ready);
        Box::pin(data.chain(end))
    }
}
