//! Folder content through directory handles: every operation walks from the folder's root
//! one name at a time with `openat(O_NOFOLLOW)`, then acts on the handle it holds (`fstat`,
//! `fchown`, `unlinkat`, `renameat`, `mkdirat`), so a container that swaps a directory for a
//! symbolic link while the server works can never send it outside the folder: a link met at
//! any step is refused (ELOOP), never followed. Only regular files are opened for reading,
//! without blocking (a FIFO or socket is refused, never waited on). All of it is blocking
//! code: callers run it with `spawn_blocking`.
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{self as rfs, AtFlags, FileType, Gid, Mode, OFlags, RenameFlags, Uid};
use rustix::io::Errno;

use bai_core::error::{ApiError, ApiResult};
use bai_core::path::{components, refuse, shown};

/// The owner of what the server writes into folders: the `work` user of the images.
pub const WORK_ID: u32 = 1000;
/// Deepest directory nesting walked by recursive operations.
const MAX_DEPTH: usize = 256;

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn fail(path: &str, e: Errno, doing: &str) -> ApiError {
    match e {
        Errno::LOOP => refuse(path, "it goes through a symbolic link"),
        Errno::NOTDIR => refuse(path, "a parent is not a directory"),
        Errno::NOENT => ApiError::not_found("file", shown(path)),
        Errno::EXIST => ApiError::conflict(format!("'{}' already exists", shown(path))),
        Errno::NOTEMPTY => ApiError::conflict(format!("'{}' is not empty", shown(path))),
        Errno::NXIO => refuse(path, "it is not a regular file"),
        Errno::NOSPC | Errno::DQUOT => {
            ApiError::bad_request("The storage is full (or the folder's quota is reached)")
        }
        e => ApiError::internal(doing, e),
    }
}

/// What a name is, never following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Directory,
    File,
    Symlink,
    /// FIFO, socket or device: never opened.
    Other,
}

fn kind_of(st: &rfs::Stat) -> Kind {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Kind::Directory,
        FileType::RegularFile => Kind::File,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    }
}

pub struct Entry {
    pub name: String,
    pub kind: Kind,
    pub size: u64,
    pub mode: u32,
    pub modified: Option<chrono::DateTime<chrono::Utc>>,
}

/// A folder's root, held open.
pub struct Folder {
    root: OwnedFd,
}

/// A path split into the handle of its directory and its last name (None: the root).
struct Located {
    dir: OwnedFd,
    name: Option<String>,
}

impl Folder {
    pub fn open(root: &Path) -> ApiResult<Self> {
        let root = rfs::open(root, dir_flags(), Mode::empty())
            .map_err(|e| ApiError::internal("opening a folder", e))?;
        Ok(Self { root })
    }

    fn walk(&self, parts: &[String], path: &str) -> ApiResult<OwnedFd> {
        let mut cur = rfs::openat(&self.root, ".", dir_flags(), Mode::empty())
            .map_err(|e| fail(path, e, "opening a folder"))?;
        for p in parts {
            cur = rfs::openat(&cur, p.as_str(), dir_flags(), Mode::empty())
                .map_err(|e| fail(path, e, "opening a directory"))?;
        }
        Ok(cur)
    }

    fn locate(&self, path: &str) -> ApiResult<Located> {
        let mut parts = components(path)?;
        let name = parts.pop();
        Ok(Located {
            dir: self.walk(&parts, path)?,
            name,
        })
    }

    /// The directory at `path` (the root for an empty path).
    fn directory(&self, path: &str) -> ApiResult<OwnedFd> {
        self.walk(&components(path)?, path)
    }

    /// What is at `path`, if anything (links are reported, not followed).
    pub fn kind(&self, path: &str) -> ApiResult<Option<Kind>> {
        let l = self.locate(path)?;
        let Some(name) = l.name else {
            return Ok(Some(Kind::Directory));
        };
        match rfs::statat(&l.dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(kind_of(&st))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(fail(path, e, "checking a path")),
        }
    }

    /// The entries of the directory at `path`.
    pub fn list(&self, path: &str) -> ApiResult<Vec<Entry>> {
        let dir = self.directory(path).map_err(|e| {
            if e.message.contains("not a directory") {
                ApiError::bad_request("That path is a file, not a directory")
            } else {
                e
            }
        })?;
        let mut out = Vec::new();
        let entries =
            rfs::Dir::read_from(&dir).map_err(|e| fail(path, e, "listing a directory"))?;
        for entry in entries {
            let entry = entry.map_err(|e| fail(path, e, "listing a directory"))?;
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            let Ok(st) = rfs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            out.push(Entry {
                name: OsStr::from_bytes(name.to_bytes())
                    .to_string_lossy()
                    .into_owned(),
                kind: kind_of(&st),
                size: u64::try_from(st.st_size).unwrap_or(0),
                mode: st.st_mode & 0o7777,
                modified: chrono::DateTime::from_timestamp(st.st_mtime, 0),
            });
            if out.len() >= 100_000 {
                break;
            }
        }
        Ok(out)
    }

    /// A regular file at `path`, opened for reading without blocking, and its size. Links,
    /// FIFOs, sockets, devices and files with other hard links are refused.
    pub fn open_file(&self, path: &str) -> ApiResult<(std::fs::File, u64)> {
        let l = self.locate(path)?;
        let name = l
            .name
            .ok_or_else(|| refuse(path, "it is the folder itself"))?;
        // Looked at first, so that nothing but a regular file is ever opened.
        let before = rfs::statat(&l.dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| fail(path, e, "checking a file"))?;
        match kind_of(&before) {
            Kind::File => {}
            Kind::Directory => return Err(refuse(path, "it is a directory")),
            Kind::Symlink => return Err(refuse(path, "it is a symbolic link")),
            Kind::Other => {
                return Err(refuse(
                    path,
                    "it is not a regular file (a FIFO, socket or device)",
                ));
            }
        }
        let fd = rfs::openat(
            &l.dir,
            name.as_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| fail(path, e, "opening a file"))?;
        let st = rfs::fstat(&fd).map_err(|e| fail(path, e, "checking a file"))?;
        if kind_of(&st) != Kind::File || st.st_ino != before.st_ino || st.st_dev != before.st_dev {
            return Err(refuse(path, "it changed while it was opened"));
        }
        if st.st_nlink > 1 {
            return Err(refuse(path, "the file has other hard links"));
        }
        Ok((
            std::fs::File::from(fd),
            u64::try_from(st.st_size).unwrap_or(0),
        ))
    }

    /// A new file beside `path`, owned by `work`, to be moved over `path` by `commit`.
    pub fn create_upload(&self, path: &str) -> ApiResult<Upload> {
        let l = self.locate(path)?;
        let name = l.name.ok_or_else(|| {
            ApiError::bad_request("Give the path of the file to write, e.g. ?path=data/input.csv")
        })?;
        if let Ok(st) = rfs::statat(&l.dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            && kind_of(&st) == Kind::Directory
        {
            return Err(ApiError::bad_request(
                "Give the path of the file to write, e.g. ?path=data/input.csv",
            ));
        }
        let tmp = format!(".bai-upload-{}", uuid::Uuid::new_v4().simple());
        let fd = rfs::openat(
            &l.dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map_err(|e| fail(path, e, "creating an upload file"))?;
        // The handle, not the name: whatever the container does to the name meanwhile.
        rfs::fchown(
            &fd,
            Some(Uid::from_raw(WORK_ID)),
            Some(Gid::from_raw(WORK_ID)),
        )
        .map_err(|e| ApiError::internal("handing an upload to the work user", e))?;
        Ok(Upload {
            dir: l.dir,
            tmp,
            name,
            path: path.to_string(),
            file: Some(std::fs::File::from(fd)),
        })
    }

    /// Creates the directory `path` (and its parents with `parents`), owned by `work`.
    pub fn mkdir(&self, path: &str, parents: bool) -> ApiResult<()> {
        let parts = components(path)?;
        if parts.is_empty() {
            return Err(ApiError::bad_request("Give the new directory's path"));
        }
        let mut cur = self.walk(&[], path)?;
        let last = parts.len() - 1;
        for (i, p) in parts.iter().enumerate() {
            // Without `parents`, only the last name is created.
            if i < last && !parents {
                cur = rfs::openat(&cur, p.as_str(), dir_flags(), Mode::empty()).map_err(
                    |e| match e {
                        Errno::NOENT => ApiError::not_found("parent directory of", shown(path)),
                        e => fail(path, e, "creating a directory"),
                    },
                )?;
                continue;
            }
            match rfs::mkdirat(&cur, p.as_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) => {
                    let d = rfs::openat(&cur, p.as_str(), dir_flags(), Mode::empty())
                        .map_err(|e| fail(path, e, "creating a directory"))?;
                    // Best effort: without privileges (tests, rootless) the directory stays the server's.
                    let _ = rfs::fchown(
                        &d,
                        Some(Uid::from_raw(WORK_ID)),
                        Some(Gid::from_raw(WORK_ID)),
                    );
                    cur = d;
                }
                // An existing directory on the way (with `parents`) is entered, never a link.
                Err(Errno::EXIST) if i < last || parents => {
                    cur = rfs::openat(&cur, p.as_str(), dir_flags(), Mode::empty())
                        .map_err(|e| fail(path, e, "creating a directory"))?;
                }
                Err(e) => return Err(fail(path, e, "creating a directory")),
            }
        }
        Ok(())
    }

    /// Renames the file or directory at `path` within its directory; never replaces.
    pub fn rename(&self, path: &str, new_name: &str) -> ApiResult<()> {
        let l = self.locate(path)?;
        let name = l.name.ok_or_else(|| {
            ApiError::bad_request("The folder itself is renamed with rename_vfolder")
        })?;
        let new = components(new_name)?;
        let [new] = new.as_slice() else {
            return Err(ApiError::bad_request(
                "The new name must be a single name, without '/'",
            ));
        };
        match rfs::renameat_with(
            &l.dir,
            name.as_str(),
            &l.dir,
            new.as_str(),
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(ApiError::conflict(format!("'{new}' already exists"))),
            Err(e) => Err(fail(path, e, "renaming a file")),
        }
    }

    /// What `path` is, for deleting: refused for the root.
    pub fn remove(&self, path: &str, recursive: bool) -> ApiResult<()> {
        let l = self.locate(path)?;
        let name = l.name.ok_or_else(|| {
            ApiError::bad_request("The folder itself is deleted with delete_vfolder")
        })?;
        match rfs::unlinkat(&l.dir, name.as_str(), AtFlags::empty()) {
            Ok(()) => Ok(()),
            Err(Errno::ISDIR) | Err(Errno::PERM) if recursive => {
                remove_tree(&l.dir, OsStr::new(name.as_str()), 0)
                    .map_err(|e| fail(path, e, "deleting a directory"))
            }
            Err(Errno::ISDIR) | Err(Errno::PERM) => Err(ApiError::bad_request(format!(
                "'{}' is a directory: delete it with recursive: true",
                shown(path)
            ))),
            Err(e) => Err(fail(path, e, "deleting a file")),
        }
    }

    /// Moves the file or directory at `src` to `dst` (into it, when `dst` is a directory);
    /// never replaces, never moves the root or a directory into itself.
    pub fn move_to(&self, src: &str, dst: &str) -> ApiResult<()> {
        let from = components(src)?;
        let mut to = components(dst)?;
        let Some(last) = from.last().cloned() else {
            return Err(ApiError::bad_request("The folder itself cannot be moved"));
        };
        // An existing directory (the root too): the source goes into it.
        if self.walk(&to, dst).is_ok() {
            to.push(last);
        }
        if to.starts_with(&from) {
            return Err(ApiError::bad_request(format!(
                "'{}' cannot be moved into itself",
                shown(src)
            )));
        }
        let s = self.locate(src)?;
        let new_name = to.pop().unwrap_or_default();
        let d = self.walk(&to, dst)?;
        let name = s.name.unwrap_or_default();
        match rfs::renameat_with(
            &s.dir,
            name.as_str(),
            &d,
            new_name.as_str(),
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(ApiError::conflict(format!(
                "'{}' already exists",
                shown(dst)
            ))),
            Err(e) => Err(fail(src, e, "moving a file")),
        }
    }

    /// Moves the finished file `name` of the server's own directory `staged` (outside every
    /// folder) to `path`, owned by `work`: a file there is replaced, a directory is not; a link
    /// on the way is refused, a link at the name is replaced, never written through.
    pub fn adopt(&self, staged: &Path, name: &str, path: &str) -> ApiResult<()> {
        let l = self.locate(path)?;
        let target = l.name.ok_or_else(|| {
            ApiError::bad_request("Give the path of the file to write, e.g. data/input.csv")
        })?;
        if let Ok(st) = rfs::statat(&l.dir, target.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            && kind_of(&st) == Kind::Directory
        {
            return Err(ApiError::conflict(format!(
                "'{}' is a directory",
                shown(path)
            )));
        }
        let from = rfs::open(staged, dir_flags(), Mode::empty())
            .map_err(|e| ApiError::internal("opening the uploads' directory", e))?;
        if let Ok(fd) = rfs::openat(
            &from,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            // Best effort: without privileges (tests, rootless) the file stays the server's.
            let _ = rfs::fchown(
                &fd,
                Some(Uid::from_raw(WORK_ID)),
                Some(Gid::from_raw(WORK_ID)),
            );
        }
        rfs::renameat(&from, name, &l.dir, target.as_str())
            .map_err(|e| fail(path, e, "storing an upload"))
    }

    /// Copies everything in this folder into `dst` (an empty folder): directories and regular
    /// files, never a link, FIFO, socket or device (left out), through handles at both ends;
    /// stops with an error once more than `limit` bytes were copied. `copied` is told the bytes
    /// so far; returns (bytes, files).
    pub fn copy_into(
        &self,
        dst: &Folder,
        limit: u64,
        copied: &mut dyn FnMut(u64),
    ) -> ApiResult<(u64, u64)> {
        let src = rfs::openat(&self.root, ".", dir_flags(), Mode::empty())
            .map_err(|e| ApiError::internal("opening a folder", e))?;
        let to = rfs::openat(&dst.root, ".", dir_flags(), Mode::empty())
            .map_err(|e| ApiError::internal("opening a folder", e))?;
        let mut total = (0u64, 0u64);
        copy_dir(&src, &to, 0, &mut total, &mut |done| {
            copied(done);
            done <= limit
        })
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::FileTooLarge => ApiError::bad_request(format!(
                "The copy passed the size limit ({limit} bytes) and was stopped"
            )),
            _ => ApiError::internal("copying a folder", e),
        })?;
        Ok(total)
    }

    /// Size in bytes and number of files (nothing is followed; bounded depth).
    pub fn usage(&self) -> (u64, u64) {
        let mut total = (0u64, 0u64);
        if let Ok(root) = rfs::openat(&self.root, ".", dir_flags(), Mode::empty()) {
            usage_of(&root, 0, &mut total);
        }
        total
    }

    /// A tar archive of the directory at `path` (named `top` inside), written to `out`:
    /// directories, regular files (exactly the size they had when listed) and links as links;
    /// FIFOs, sockets and devices are left out. An error stops the archive (the caller then
    /// breaks the response off, never sends a silently short one).
    pub fn archive<W: Write>(&self, path: &str, top: &str, out: W) -> ApiResult<()> {
        let dir = self.directory(path)?;
        let mut b = tar::Builder::new(out);
        b.mode(tar::HeaderMode::Deterministic);
        archive_dir(&mut b, &dir, Path::new(top), 0)
            .map_err(|e| ApiError::internal("archiving a directory", e))?;
        b.into_inner()
            .and_then(|mut w| w.flush())
            .map_err(|e| ApiError::internal("archiving a directory", e))
    }
}

/// An upload being written; dropped without `commit`, it leaves nothing behind.
pub struct Upload {
    dir: OwnedFd,
    tmp: String,
    name: String,
    path: String,
    file: Option<std::fs::File>,
}

impl Upload {
    pub fn file(&mut self) -> Option<&mut std::fs::File> {
        self.file.as_mut()
    }

    pub fn take_file(&mut self) -> Option<std::fs::File> {
        self.file.take()
    }

    /// Moves the finished file over its name (a link there is replaced, never written through).
    pub fn commit(mut self) -> ApiResult<()> {
        self.file = None;
        rfs::renameat(&self.dir, self.tmp.as_str(), &self.dir, self.name.as_str()).map_err(
            |e| {
                // Removing the temporary file of a failed upload: gone already is fine.
                let _ = rfs::unlinkat(&self.dir, self.tmp.as_str(), AtFlags::empty());
                fail(&self.path, e, "storing an upload")
            },
        )?;
        self.tmp.clear();
        Ok(())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if !self.tmp.is_empty() {
            // Removing the temporary file of a failed upload: gone already is fine.
            let _ = rfs::unlinkat(&self.dir, self.tmp.as_str(), AtFlags::empty());
        }
    }
}

fn names(dir: &OwnedFd) -> rustix::io::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for e in rfs::Dir::read_from(dir)? {
        let e = e?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            out.push(n.to_vec());
        }
    }
    Ok(out)
}

/// Deletes the directory `name` in `parent` and everything below it, through handles: a
/// directory swapped for a link meanwhile is unlinked as a link, never entered.
fn remove_tree(parent: &OwnedFd, name: &OsStr, depth: usize) -> rustix::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(Errno::NAMETOOLONG);
    }
    for _ in 0..3 {
        let dir = match rfs::openat(parent, name, dir_flags(), Mode::empty()) {
            Ok(d) => d,
            Err(Errno::LOOP) | Err(Errno::NOTDIR) => {
                match rfs::unlinkat(parent, name, AtFlags::empty()) {
                    Ok(()) => return Ok(()),
                    Err(Errno::ISDIR) | Err(Errno::PERM) => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        for n in names(&dir)? {
            let n = OsStr::from_bytes(&n);
            match rfs::unlinkat(&dir, n, AtFlags::empty()) {
                Ok(()) => {}
                Err(Errno::ISDIR) | Err(Errno::PERM) => remove_tree(&dir, n, depth + 1)?,
                Err(Errno::NOENT) => {}
                Err(e) => return Err(e),
            }
        }
        return match rfs::unlinkat(parent, name, AtFlags::REMOVEDIR) {
            Err(Errno::NOTEMPTY) => continue,
            r => r,
        };
    }
    Err(Errno::AGAIN)
}

fn copy_dir(
    from: &OwnedFd,
    to: &OwnedFd,
    depth: usize,
    total: &mut (u64, u64),
    copied: &mut dyn FnMut(u64) -> bool,
) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other("directories nested too deep"));
    }
    for n in names(from)? {
        let n = OsStr::from_bytes(&n);
        let Ok(st) = rfs::statat(from, n, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        match kind_of(&st) {
            Kind::Directory => {
                let sub = match rfs::openat(from, n, dir_flags(), Mode::empty()) {
                    Ok(d) => d,
                    // Swapped for a link since it was listed: left out.
                    Err(Errno::LOOP) | Err(Errno::NOTDIR) | Err(Errno::NOENT) => continue,
                    Err(e) => return Err(e.into()),
                };
                rfs::mkdirat(to, n, Mode::from_raw_mode(st.st_mode & 0o777))?;
                let made = rfs::openat(to, n, dir_flags(), Mode::empty())?;
                let _ = rfs::fchown(
                    &made,
                    Some(Uid::from_raw(WORK_ID)),
                    Some(Gid::from_raw(WORK_ID)),
                );
                copy_dir(&sub, &made, depth + 1, total, copied)?;
            }
            Kind::File => {
                let fd = match rfs::openat(
                    from,
                    n,
                    OFlags::RDONLY
                        | OFlags::NOFOLLOW
                        | OFlags::NONBLOCK
                        | OFlags::NOCTTY
                        | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    Ok(fd) => fd,
                    Err(Errno::LOOP) | Err(Errno::NOENT) | Err(Errno::NXIO) => continue,
                    Err(e) => return Err(e.into()),
                };
                let now = rfs::fstat(&fd)?;
                // Other hard links are left out, as reads refuse them.
                if kind_of(&now) != Kind::File || now.st_nlink > 1 {
                    continue;
                }
                let out = rfs::openat(
                    to,
                    n,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(now.st_mode & 0o777),
                )?;
                let _ = rfs::fchown(
                    &out,
                    Some(Uid::from_raw(WORK_ID)),
                    Some(Gid::from_raw(WORK_ID)),
                );
                let size = u64::try_from(now.st_size).unwrap_or(0);
                // Exactly the size it had when opened.
                let mut reader = std::fs::File::from(fd).take(size);
                let mut writer = std::fs::File::from(out);
                let n = std::io::copy(&mut reader, &mut writer)?;
                total.0 += n;
                total.1 += 1;
                if !copied(total.0) {
                    return Err(std::io::ErrorKind::FileTooLarge.into());
                }
            }
            Kind::Symlink | Kind::Other => {}
        }
    }
    Ok(())
}

fn usage_of(dir: &OwnedFd, depth: usize, total: &mut (u64, u64)) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(list) = names(dir) else { return };
    for n in list {
        let n = OsStr::from_bytes(&n);
        let Ok(st) = rfs::statat(dir, n, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        if kind_of(&st) == Kind::Directory {
            if let Ok(sub) = rfs::openat(dir, n, dir_flags(), Mode::empty()) {
                usage_of(&sub, depth + 1, total);
            }
        } else {
            total.0 += u64::try_from(st.st_size).unwrap_or(0);
            total.1 += 1;
        }
    }
}

fn archive_dir<W: Write>(
    b: &mut tar::Builder<W>,
    dir: &OwnedFd,
    at: &Path,
    depth: usize,
) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other("directories nested too deep"));
    }
    let st = rfs::fstat(dir)?;
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_mode(st.st_mode & 0o7777);
    h.set_mtime(u64::try_from(st.st_mtime).unwrap_or(0));
    h.set_size(0);
    b.append_data(&mut h, at, std::io::empty())?;
    let mut list = names(dir)?;
    list.sort();
    for n in list {
        let n = OsStr::from_bytes(&n);
        let Ok(st) = rfs::statat(dir, n, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let path = at.join(n);
        match kind_of(&st) {
            Kind::Directory => {
                match rfs::openat(dir, n, dir_flags(), Mode::empty()) {
                    Ok(sub) => archive_dir(b, &sub, &path, depth + 1)?,
                    // Swapped for a link since it was listed: left out.
                    Err(Errno::LOOP) | Err(Errno::NOTDIR) | Err(Errno::NOENT) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Kind::File => {
                let fd = match rfs::openat(
                    dir,
                    n,
                    OFlags::RDONLY
                        | OFlags::NOFOLLOW
                        | OFlags::NONBLOCK
                        | OFlags::NOCTTY
                        | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    Ok(fd) => fd,
                    Err(Errno::LOOP) | Err(Errno::NOENT) | Err(Errno::NXIO) => continue,
                    Err(e) => return Err(e.into()),
                };
                let now = rfs::fstat(&fd)?;
                if kind_of(&now) != Kind::File {
                    continue;
                }
                let size = u64::try_from(now.st_size).unwrap_or(0);
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(now.st_mode & 0o7777);
                h.set_mtime(u64::try_from(now.st_mtime).unwrap_or(0));
                h.set_size(size);
                // Exactly `size` bytes, even if the file grows or shrinks meanwhile.
                let body = std::fs::File::from(fd)
                    .take(size)
                    .chain(std::io::repeat(0))
                    .take(size);
                b.append_data(&mut h, &path, body)?;
            }
            Kind::Symlink => {
                let Ok(target) = rfs::readlinkat(dir, n, Vec::new()) else {
                    continue;
                };
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_mtime(u64::try_from(st.st_mtime).unwrap_or(0));
                h.set_size(0);
                b.append_link(&mut h, &path, OsStr::from_bytes(target.as_bytes()))?;
            }
            Kind::Other => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A folder with a subdirectory, a file, links out and in, a hard link to a file outside,
    /// and a FIFO; the "outside" directory holds the canary.
    fn tree() -> (PathBuf, PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!("bai-fsat-{}", uuid::Uuid::new_v4().simple()));
        let root = base.join("folder");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("sub/file.txt"), "in").unwrap();
        std::fs::write(outside.join("secret"), "out").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("inner-link")).unwrap();
        std::fs::hard_link(outside.join("secret"), root.join("hard")).unwrap();
        rfs::mknodat(
            rfs::CWD,
            root.join("pipe").as_path(),
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        (root, outside, base)
    }

    fn read(f: &Folder, p: &str) -> ApiResult<String> {
        let (mut file, _) = f.open_file(p)?;
        let mut s = String::new();
        file.read_to_string(&mut s).unwrap();
        Ok(s)
    }

    #[test]
    fn plain_paths_work_links_and_specials_are_refused() {
        let (root, outside, base) = tree();
        let f = Folder::open(&root).unwrap();
        assert_eq!(read(&f, "sub/file.txt").unwrap(), "in");
        assert_eq!(read(&f, "./sub//file.txt").unwrap(), "in");
        assert_eq!(f.kind("").unwrap(), Some(Kind::Directory));
        assert_eq!(f.kind("escape").unwrap(), Some(Kind::Symlink));
        assert_eq!(f.kind("pipe").unwrap(), Some(Kind::Other));
        assert_eq!(f.kind("nothing").unwrap(), None);
        for bad in [
            "escape/secret",
            "escape",
            "inner-link/file.txt",
            "hard",
            "pipe",
            "sub",
            "sub/file.txt/x",
            "../outside/secret",
            "/etc/passwd",
        ] {
            assert!(read(&f, bad).is_err(), "{bad:?} must be refused");
        }
        assert!(f.list("escape").is_err());
        assert!(f.list("inner-link").is_err());
        let names: Vec<String> = f.list("").unwrap().into_iter().map(|e| e.name).collect();
        assert!(names.contains(&"pipe".to_string()) && names.contains(&"escape".to_string()));
        // Writes never pass through a link either.
        assert!(f.mkdir("escape/new", false).is_err());
        assert!(f.create_upload("escape/x").is_err());
        assert!(f.remove("escape/secret", false).is_err());
        // Removing a link removes the link only.
        f.remove("escape", false).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.join("secret")).unwrap(),
            "out"
        );
        // An upload replaces a link at its name instead of writing through it.
        std::os::unix::fs::symlink(outside.join("secret"), root.join("target")).unwrap();
        let mut up = f.create_upload("target").unwrap();
        up.file().unwrap().write_all(b"new").unwrap();
        up.commit().unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.join("secret")).unwrap(),
            "out"
        );
        assert_eq!(read(&f, "target").unwrap(), "new");
        // mkdir, rename (never replacing), recursive remove.
        f.mkdir("a/b/c", true).unwrap();
        assert!(f.mkdir("a/b/c", false).is_err());
        assert!(f.mkdir("x/y", false).is_err(), "parents are needed");
        f.rename("a", "z").unwrap();
        assert_eq!(
            f.rename("z", "sub").unwrap_err().code,
            bai_core::error::ErrorCode::Conflict
        );
        assert!(f.remove("z", false).is_err());
        f.remove("z", true).unwrap();
        assert_eq!(f.kind("z").unwrap(), None);
        assert!(f.usage().1 >= 2);
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn archives_hold_files_and_links_as_links() {
        let (root, _outside, base) = tree();
        let f = Folder::open(&root).unwrap();
        let long = "l".repeat(120);
        f.mkdir(&format!("sub/{long}"), false).unwrap();
        std::fs::write(root.join("sub").join(&long).join("deep.txt"), "deep").unwrap();
        let mut out = Vec::new();
        f.archive("", "folder", &mut out).unwrap();
        let mut ar = tar::Archive::new(out.as_slice());
        let mut seen = Vec::new();
        for e in ar.entries().unwrap() {
            let mut e = e.unwrap();
            let path = e.path().unwrap().display().to_string();
            if path.ends_with("deep.txt") {
                let mut s = String::new();
                e.read_to_string(&mut s).unwrap();
                assert_eq!(s, "deep");
            }
            if path.ends_with("escape") {
                assert_eq!(e.header().entry_type(), tar::EntryType::Symlink);
            }
            assert!(!path.ends_with("pipe"), "FIFOs are left out");
            seen.push(path);
        }
        assert!(seen.iter().any(|p| p.contains(&long)), "{seen:?}");
        assert!(!seen.iter().any(|p| p.ends_with("secret")), "{seen:?}");
        std::fs::remove_dir_all(base).unwrap();
    }

    proptest::proptest! {
        /// Any path text at all: whatever is opened or listed lies inside the folder (the
        /// outside holds `secret` = "out"; inside, files hold "in").
        #[test]
        fn any_path_stays_inside(p in "([a-z./\\\\%~ -]|\\.\\.|escape|inner-link|sub|secret|hard|pipe|file\\.txt){0,12}") {
            static TREE: std::sync::OnceLock<(PathBuf, PathBuf, PathBuf)> = std::sync::OnceLock::new();
            let f = Folder::open(&TREE.get_or_init(tree).0).unwrap();
            if let Ok(s) = read(&f, &p) {
                proptest::prop_assert_eq!(s, "in");
            }
            if let Ok(list) = f.list(&p) {
                proptest::prop_assert!(!list.iter().any(|e| e.name == "secret"));
            }
        }
    }

    /// The race of the issue: a thread swaps a directory with a link to the outside
    /// (renameat2 RENAME_EXCHANGE) as fast as it can while every operation runs on paths
    /// through it. Nothing outside is ever read, written, re-owned or removed.
    #[test]
    fn swapping_a_directory_for_a_link_never_escapes() {
        let (root, outside, base) = tree();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/secret"), "in").unwrap();
        std::fs::create_dir(root.join("d/sub")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("l")).unwrap();
        std::fs::create_dir(outside.join("sub")).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (root, stop) = (root.clone(), stop.clone());
            std::thread::spawn(move || {
                let dir = rfs::open(&root, dir_flags(), Mode::empty()).unwrap();
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // The attacker swaps as fast as it can; a swap that fails is just a miss.
                    let _ = rfs::renameat_with(&dir, "d", &dir, "l", RenameFlags::EXCHANGE);
                    n += 1;
                }
                n
            })
        };
        let f = Folder::open(&root).unwrap();
        for i in 0..800 {
            if let Ok(s) = read(&f, "d/secret") {
                assert_eq!(s, "in", "read outside the folder");
            }
            if let Ok(list) = f.list("d") {
                assert!(
                    !list.iter().any(|e| e.name == "secret" && e.size == 3),
                    "listed outside the folder"
                );
            }
            // Each step may fail while the link is swapped in; what matters is what it
            // touched (checked below), not whether it succeeded.
            let _ = f.mkdir(&format!("d/sub/m{i}"), false);
            if let Ok(mut up) = f.create_upload(&format!("d/u{i}")) {
                let _ = up.file().unwrap().write_all(b"x");
                let _ = up.commit();
            }
            let _ = f.rename(&format!("d/u{i}"), &format!("r{i}"));
            let _ = f.remove(&format!("d/r{i}"), false);
            let _ = f.remove("d/sub", true);
            let mut sink = Vec::new();
            if f.archive("d", "d", &mut sink).is_ok() {
                assert!(!String::from_utf8_lossy(&sink).contains("out"));
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(swapper.join().unwrap() > 100, "the swapper ran");
        // The outside: the canary intact, nothing added, the directory still there.
        assert_eq!(
            std::fs::read_to_string(outside.join("secret")).unwrap(),
            "out"
        );
        let outside_names: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert!(
            outside_names.iter().all(|n| n == "secret" || n == "sub"),
            "written outside: {outside_names:?}"
        );
        assert!(outside.join("sub").is_dir(), "removed outside");
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_copy_takes_files_and_directories_never_links_fifos_or_hard_links() {
        let (root, outside, base) = tree();
        let copy = base.join("copy");
        std::fs::create_dir_all(&copy).unwrap();
        let (src, dst) = (Folder::open(&root).unwrap(), Folder::open(&copy).unwrap());
        let mut seen = 0;
        let (bytes, files) = src.copy_into(&dst, u64::MAX, &mut |b| seen = b).unwrap();
        assert_eq!((bytes, files, seen), (2, 1, 2));
        // Past a limit, the copy stops with a clear error.
        let small = base.join("small");
        std::fs::create_dir_all(&small).unwrap();
        let err = src
            .copy_into(&Folder::open(&small).unwrap(), 1, &mut |_| {})
            .unwrap_err();
        assert!(err.message.contains("size limit"), "{}", err.message);
        assert_eq!(
            std::fs::read_to_string(copy.join("sub/file.txt")).unwrap(),
            "in"
        );
        assert!(copy.join("sub/deeper").is_dir());
        for gone in ["escape", "inner-link", "hard", "pipe"] {
            assert!(
                std::fs::symlink_metadata(copy.join(gone)).is_err(),
                "{gone} copied"
            );
        }
        assert_eq!(
            std::fs::read_to_string(outside.join("secret")).unwrap(),
            "out"
        );
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_move_never_replaces_never_goes_through_links_nor_into_itself() {
        let (root, outside, base) = tree();
        let f = Folder::open(&root).unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        // Into an existing directory, then to a new name.
        f.move_to("a.txt", "sub").unwrap();
        assert!(root.join("sub/a.txt").is_file());
        f.move_to("sub/a.txt", "b.txt").unwrap();
        assert_eq!(std::fs::read_to_string(root.join("b.txt")).unwrap(), "a");
        // Never over an existing file.
        std::fs::write(root.join("c.txt"), "c").unwrap();
        assert_eq!(
            f.move_to("b.txt", "c.txt").unwrap_err().code.as_str(),
            "CONFLICT"
        );
        // Never through a link (out of the folder), never into itself, never `..`.
        assert!(f.move_to("b.txt", "escape/x").is_err());
        assert!(
            f.move_to("escape", "sub").is_ok(),
            "a link itself moves as a link"
        );
        assert!(f.move_to("sub", "sub/deeper").is_err());
        assert!(f.move_to("b.txt", "../b.txt").is_err());
        assert!(f.move_to("", "sub").is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn an_adopted_upload_replaces_a_link_at_its_name_never_writes_through_it() {
        let (root, outside, base) = tree();
        let staged = base.join("staged");
        std::fs::create_dir_all(&staged).unwrap();
        std::fs::write(staged.join("up"), "new").unwrap();
        let f = Folder::open(&root).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), root.join("target")).unwrap();
        f.adopt(&staged, "up", "target").unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.join("secret")).unwrap(),
            "out"
        );
        assert!(
            std::fs::symlink_metadata(root.join("target"))
                .unwrap()
                .is_file()
        );
        // A link on the way is refused; a directory at the name is kept.
        std::fs::write(staged.join("up2"), "x").unwrap();
        assert!(f.adopt(&staged, "up2", "escape/planted").is_err());
        assert!(f.adopt(&staged, "up2", "sub").is_err());
        assert!(!outside.join("planted").exists());
        std::fs::remove_dir_all(base).unwrap();
    }
}
