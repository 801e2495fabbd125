//! The identity options the mount, the gateway and WebDAV share (`--root-squash`,
//! `--all-squash`, `--uid-map`, `--gid-map`, `--umask`; docs/SEMANTICS.md "Identity
//! mapping").

use anyhow::Result;
use clap::Args;
use strata_vfs::{Identity, IdentityOptions};

#[derive(Clone, Debug, Default, Args)]
pub struct IdentityArgs {
    /// Callers with uid 0 act as UID:GID in the volume (as NFS's root_squash)
    #[arg(long, value_name = "UID:GID")]
    root_squash: Option<String>,
    /// Every caller acts as UID:GID in the volume (as NFS's all_squash); wins over the
    /// other options
    #[arg(long, value_name = "UID:GID")]
    all_squash: Option<String>,
    /// Users this host numbers differently from the volume: HOST:VOLUME pairs,
    /// comma-separated. Callers act as the volume's uid; owners show as the host's
    #[arg(long, value_name = "HOST:VOLUME,...")]
    uid_map: Option<String>,
    /// Groups this host numbers differently from the volume, as --uid-map
    #[arg(long, value_name = "HOST:VOLUME,...")]
    gid_map: Option<String>,
    /// Permission bits (octal) new files and directories never get, beside the
    /// caller's own umask. On the gateway and WebDAV, which have no caller's umask,
    /// default 022
    #[arg(long, value_name = "OCTAL")]
    umask: Option<String>,
}

impl IdentityArgs {
    /// The identity mapping these options ask for; `default_umask` when none is given.
    pub fn identity(&self, default_umask: Option<&str>) -> Result<Identity> {
        Ok(Identity::parse(&IdentityOptions {
            root_squash: self.root_squash.as_deref(),
            all_squash: self.all_squash.as_deref(),
            uid_map: self.uid_map.as_deref(),
            gid_map: self.gid_map.as_deref(),
            umask: self.umask.as_deref().or(default_umask),
        })?)
    }
}
