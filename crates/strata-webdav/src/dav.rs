//! The volume as dav-server sees it: [`VolumeFs`]'s `DavFileSystem`, each call handed to
//! the module that owns it (paths, listings and the namespace in [`crate::fs`], opened
//! files in [`crate::file`], dead properties in [`crate::props`]).

use dav_server::davpath::DavPath;
use dav_server::fs::{
    DavDirEntry, DavFile, DavFileSystem, DavMetaData, DavProp, FsFuture, FsStream, OpenOptions,
    ReadDirMeta,
};
use futures::FutureExt;
use http::StatusCode;

use crate::error::fs_error;
use crate::fs::{DIR_MODE, Listing, Meta, VolumeFs, key_of, segments};

impl DavFileSystem for VolumeFs {
    fn open<'a>(
        &'a self,
        path: &'a DavPath,
        options: OpenOptions,
    ) -> FsFuture<'a, Box<dyn DavFile>> {
        async move { crate::file::open(self, path, options).await }.boxed()
    }

    fn read_dir<'a>(
        &'a self,
        path: &'a DavPath,
        _meta: ReadDirMeta,
    ) -> FsFuture<'a, FsStream<Box<dyn DavDirEntry>>> {
        async move {
            let segs = segments(path).map_err(fs_error)?;
            let dir = self.walk_dir(&segs).await.map_err(fs_error)?;
            // Listing a directory needs read permission on it, as readdir(3) does.
            self.vfs()
                .access(self.ctx(), dir, strata_vfs::MAY_READ)
                .await
                .map_err(fs_error)?;
            let listing = Listing::new(self.clone(), dir, key_of(&segs));
            let stream: FsStream<Box<dyn DavDirEntry>> =
                Box::pin(futures::stream::unfold(listing, Listing::next));
            Ok(stream)
        }
        .boxed()
    }

    fn metadata<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, Box<dyn DavMetaData>> {
        async move {
            let (ino, attr) = self.stat(path).await.map_err(fs_error)?;
            let meta: Box<dyn DavMetaData> = Box::new(Meta { ino, attr });
            Ok(meta)
        }
        .boxed()
    }

    fn create_dir<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            let (parent, name) = self.parent_of(path).await.map_err(fs_error)?;
            self.changed();
            self.vfs()
                .mkdir(self.ctx(), parent, &name, DIR_MODE)
                .await
                .map_err(fs_error)?;
            Ok(())
        }
        .boxed()
    }

    fn remove_dir<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            let (parent, name) = self.parent_of(path).await.map_err(fs_error)?;
            self.changed();
            self.vfs()
                .rmdir(self.ctx(), parent, &name)
                .await
                .map_err(fs_error)
        }
        .boxed()
    }

    fn remove_file<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            let (parent, name) = self.parent_of(path).await.map_err(fs_error)?;
            self.changed();
            self.vfs()
                .unlink(self.ctx(), parent, &name)
                .await
                .map_err(fs_error)
        }
        .boxed()
    }

    fn rename<'a>(&'a self, from: &'a DavPath, to: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            let (from_dir, from_name) = self.parent_of(from).await.map_err(fs_error)?;
            let (to_dir, to_name) = self.parent_of(to).await.map_err(fs_error)?;
            self.changed();
            self.vfs()
                .rename(self.ctx(), from_dir, &from_name, to_dir, &to_name, 0)
                .await
                .map_err(fs_error)
        }
        .boxed()
    }

    /// Files only (dav-server makes the directories of a tree itself): a metadata-only
    /// clone sharing the source's data, dead properties included.
    fn copy<'a>(&'a self, from: &'a DavPath, to: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            let src = self.resolve(from).await.map_err(fs_error)?;
            let (to_dir, to_name) = self.parent_of(to).await.map_err(fs_error)?;
            self.changed();
            self.vfs()
                .clone_file(self.ctx(), src, to_dir, &to_name)
                .await
                .map_err(fs_error)
        }
        .boxed()
    }

    fn have_props<'a>(
        &'a self,
        _path: &'a DavPath,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>> {
        futures::future::ready(true).boxed()
    }

    fn patch_props<'a>(
        &'a self,
        path: &'a DavPath,
        patch: Vec<(bool, DavProp)>,
    ) -> FsFuture<'a, Vec<(StatusCode, DavProp)>> {
        async move { crate::props::patch(self, path, patch).await }.boxed()
    }

    fn get_props<'a>(&'a self, path: &'a DavPath, do_content: bool) -> FsFuture<'a, Vec<DavProp>> {
        async move { crate::props::get_all(self, path, do_content).await }.boxed()
    }

    fn get_prop<'a>(&'a self, path: &'a DavPath, prop: DavProp) -> FsFuture<'a, Vec<u8>> {
        async move { crate::props::get_one(self, path, &prop).await }.boxed()
    }

    fn get_quota(&self) -> FsFuture<'_, (u64, Option<u64>)> {
        async move {
            let st = self.vfs().statfs().await.map_err(fs_error)?;
            let used = st.total_space.saturating_sub(st.avail_space);
            Ok((used, Some(st.total_space)))
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use std::sync::Arc;

    use strata_vfs::Ctx;
    use strata_vfs::testing::{make_path_tree, memory_vfs, path_table};

    use super::*;
    use crate::error::fs_error;

    /// The path table through the WebDAV file system: a GET of each path (URLs cannot
    /// hold `..`: clients and dav-server resolve them) reads what the path holds, with
    /// the errors in dav-server's words.
    #[tokio::test]
    async fn paths_of_the_path_table_read_what_they_hold() {
        let vfs = Arc::new(memory_vfs().await);
        let ctx = Ctx::root();
        make_path_tree(&vfs, &ctx, vfs.options().root).await;
        let fs = VolumeFs::new(vfs, ctx);
        for case in path_table().into_iter().filter(|c| !c.dots) {
            let path = DavPath::new(&format!("/{}", case.path)).unwrap();
            let read = OpenOptions {
                read: true,
                ..OpenOptions::default()
            };
            let got = match fs.open(&path, read).await {
                Ok(mut file) => Ok(file.read_bytes(1 << 20).await.unwrap().to_vec()),
                Err(e) => Err(e),
            };
            assert_eq!(got, case.expect.map_err(fs_error), "{}", case.path);
        }
    }
}
