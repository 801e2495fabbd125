//! Buckets and keys to inodes: which directory a bucket is, walking and creating the
//! directories of a key, the gateway's hidden directory, and removing the directories
//! that deleting an object left empty.

use s3s::{S3Error, S3ErrorCode, S3Result};
use strata_types::{Errno, Ino};
use strata_vfs::Entry;
use strata_vfs::paths::PathWalk;

use crate::Gateway;
use crate::error::fs_error;
use crate::keys::HIDDEN_DIR;

/// Mode of directories the gateway creates, less its umask (`--umask`, 022 by default).
pub const DIR_MODE: u32 = 0o777;
/// Mode of files the gateway creates, less its umask.
pub const FILE_MODE: u32 = 0o666;

impl Gateway {
    /// The directory the gateway serves (the volume root or `--subdir`).
    pub(crate) fn root(&self) -> Ino {
        self.vfs.options().root
    }

    /// The directory of `bucket`, or NoSuchBucket.
    pub(crate) async fn bucket_dir(&self, bucket: &str) -> S3Result<Ino> {
        if !self.opts.multi_buckets {
            if bucket == self.opts.bucket {
                return Ok(self.root());
            }
            return Err(no_such_bucket(bucket));
        }
        if bucket.starts_with('.') {
            return Err(no_such_bucket(bucket));
        }
        match self
            .vfs
            .lookup(self.ctx(), self.root(), bucket.as_bytes())
            .await
        {
            Ok(entry) if entry.attr.is_dir() => Ok(entry.ino),
            Ok(_) | Err(Errno::ENOENT) | Err(Errno::ENOTDIR) => Err(no_such_bucket(bucket)),
            Err(e) => Err(fs_error(e, bucket)),
        }
    }

    /// Look `name` up in `dir`.
    pub(crate) async fn lookup(&self, dir: Ino, name: &str) -> Result<Entry, Errno> {
        self.vfs.lookup(self.ctx(), dir, name.as_bytes()).await
    }

    /// How the gateway walks a key's directories: from the bucket's directory (no symlink
    /// leads out of it), its own hidden directory left out.
    pub(crate) fn key_walk(from: Ino) -> PathWalk<'static> {
        PathWalk::from(from).reserving(HIDDEN_DIR.as_bytes())
    }

    /// The directory at `dirs` below `from`: ENOENT if a part is missing, ENOTDIR if one
    /// is not a directory. A symlink to a directory is followed.
    pub(crate) async fn walk(&self, from: Ino, dirs: &[&str]) -> Result<Ino, Errno> {
        Ok(self.walk_chain(from, dirs).await?.0)
    }

    /// Like [`Gateway::walk`], with every directory passed (`from` first, then one per
    /// part of `dirs`) when the walk followed no symlink.
    pub(crate) async fn walk_chain(
        &self,
        from: Ino,
        dirs: &[&str],
    ) -> Result<(Ino, Option<Vec<Ino>>), Errno> {
        let path = format!("{}/", dirs.join("/"));
        let found = self
            .vfs
            .resolve(self.ctx(), Self::key_walk(from), path.as_bytes())
            .await?;
        Ok((found.ino, found.chain))
    }

    /// Every entry of `dir`, a page at a time (for the gateway's own small directories:
    /// buckets, an upload's parts, the uploads).
    pub(crate) async fn entries(
        &self,
        dir: Ino,
        what: &str,
    ) -> S3Result<Vec<strata_vfs::DirEntry>> {
        self.vfs.list_all(dir).await.map_err(|e| fs_error(e, what))
    }

    /// Like [`Gateway::walk`], creating missing directories (`mkdir -p`). A directory
    /// another request creates at the same moment is used as found.
    pub(crate) async fn make_dirs(&self, from: Ino, dirs: &[&str]) -> Result<Ino, Errno> {
        self.vfs.make_dirs(self.ctx(), from, dirs, DIR_MODE).await
    }

    /// The gateway's own directory `sub` (`tmp`, `uploads`) under the served root, made
    /// by the gateway itself. Requests of users with their own POSIX ids work there too,
    /// so it is world-writable and sticky (as `/tmp`): each removes only its own entries.
    pub(crate) async fn hidden_dir(&self, sub: &str) -> S3Result<Ino> {
        self.vfs
            .make_shared_dir(&self.server_ctx, self.root(), &[HIDDEN_DIR, sub], DIR_MODE)
            .await
            .map_err(|e| fs_error(e, HIDDEN_DIR))
    }

    /// After deleting an object at `dirs`: remove the directories that became empty,
    /// innermost first, as S3 has no empty prefixes. `chain` is what
    /// [`Gateway::walk_chain`] found for `dirs` (the bucket first; none when the walk
    /// followed a symlink: nothing is removed through one). Stops at the first
    /// directory that still holds something.
    pub(crate) async fn remove_empty_dirs(&self, chain: &[Ino], dirs: &[&str]) {
        for (parent, name) in chain.iter().zip(dirs).rev() {
            if self
                .vfs
                .rmdir(self.ctx(), *parent, name.as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

pub(crate) fn no_such_bucket(bucket: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::NoSuchBucket,
        format!("no such bucket: {bucket}"),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use strata_vfs::testing::{make_path_tree, path_table};

    /// The path table through the gateway: a GET of each key (keys cannot hold `..`)
    /// finds what reading the file at that path finds, in S3's words: a missing file,
    /// a name under a file and a directory are all NoSuchKey.
    #[tokio::test]
    async fn keys_of_the_path_table_find_what_the_paths_hold() {
        let gw = crate::test_gateway(false).await;
        make_path_tree(&gw.vfs, gw.ctx(), gw.root()).await;
        for case in path_table().into_iter().filter(|c| !c.dots) {
            let got = match gw.find("b", &case.path).await {
                Ok(found) => {
                    let (fh, _) = gw.vfs.open(gw.ctx(), found.ino, 0).await.unwrap();
                    let bytes = gw.vfs.read(fh, 0, 1 << 20).await.unwrap();
                    gw.vfs.release(fh).await.unwrap();
                    Ok(bytes.to_vec())
                }
                Err(e) => Err(e.code().clone()),
            };
            let expected = case.expect.map_err(|errno| match errno {
                strata_types::Errno::ENOENT
                | strata_types::Errno::ENOTDIR
                | strata_types::Errno::EISDIR => s3s::S3ErrorCode::NoSuchKey,
                other => crate::error::fs_error(other, &case.path).code().clone(),
            });
            assert_eq!(got, expected, "{}", case.path);
        }
    }
}
