//! `strata.Client(...)` keyword options → [`ClientOptions`]. The Python layer turns
//! sizes ("100G") and durations ("60s") into bytes and seconds first; here each value
//! is checked for its type and range, and an unknown name is refused.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use strata_client::{ClientOptions, GroupOptions, KekSource};
use strata_vfs::{Identity, IdentityOptions};

use crate::error::SdkError;

fn bad(name: &str, what: &str) -> PyErr {
    SdkError::BadArgument(format!("option {name}: {what}")).into()
}

fn seconds(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let secs: f64 = v.extract().map_err(|_| bad(name, "expected seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| bad(name, "expected a non-negative duration"))
}

/// Apply one option to `o`.
fn apply(o: &mut ClientOptions, name: &str, v: &Bound<'_, PyAny>) -> PyResult<()> {
    let int = |what: &str| -> PyResult<u64> { v.extract().map_err(|_| bad(name, what)) };
    let count = || -> PyResult<usize> { v.extract().map_err(|_| bad(name, "expected a count")) };
    let flag =
        || -> PyResult<bool> { v.extract().map_err(|_| bad(name, "expected True or False")) };
    match name {
        "cache_dir" => o.cache_dir = v.extract().map_err(|_| bad(name, "expected a path"))?,
        "cache_size" => o.cache_size = int("expected bytes")?,
        "free_space_ratio" => {
            o.free_space_ratio = v.extract().map_err(|_| bad(name, "expected a fraction"))?
        }
        "buffer_size" => o.buffer_size = int("expected bytes")?,
        "cache_partial_only" => o.cache_partial_only = flag()?,
        "max_readahead" => o.max_readahead = int("expected bytes")?,
        "prefetch" => o.prefetch = count()?,
        "max_uploads" => o.max_uploads = count()?,
        "max_downloads" => o.max_downloads = count()?,
        "upload_limit" => o.upload_limit = int("expected Mbps")?,
        "download_limit" => o.download_limit = int("expected Mbps")?,
        "io_retries" => o.io_retries = v.extract().map_err(|_| bad(name, "expected a count"))?,
        "get_timeout" => o.get_timeout = seconds(name, v)?,
        "put_timeout" => o.put_timeout = seconds(name, v)?,
        "subdir" => o.subdir = v.extract().map_err(|_| bad(name, "expected a path"))?,
        "no_bgjob" => o.no_bgjob = flag()?,
        "backup_meta" => o.backup_meta = seconds(name, v)?,
        "heartbeat" => o.heartbeat = seconds(name, v)?,
        "meta_cache" => o.meta_cache = flag()?,
        "open_cache" => o.open_cache = seconds(name, v)?,
        "meta_cache_size" => o.meta_cache_size = int("expected bytes")?,
        // An encrypted volume's key-encryption key (the RSA passphrase comes from
        // JFS_RSA_PASSPHRASE, as for the CLI).
        "encrypt_key_file" => {
            let path: String = v.extract().map_err(|_| bad(name, "expected a path"))?;
            o.keys.kek = Some(KekSource::File(path.into()));
        }
        "encrypt_key_env" => {
            let var: String = v.extract().map_err(|_| bad(name, "expected a name"))?;
            o.keys.kek = Some(KekSource::Env(var));
        }
        "encrypt_key_cmd" => {
            let cmd: String = v.extract().map_err(|_| bad(name, "expected a command"))?;
            o.keys.kek = Some(KekSource::Command(cmd));
        }
        other => return Err(bad(other, "unknown option")),
    }
    Ok(())
}

/// The cache group options (`cache_group`, `group_listen`, `no_sharing`,
/// `group_timeout`), whatever order they come in.
#[derive(Default)]
struct GroupFlags {
    name: Option<String>,
    listen: Option<std::net::SocketAddr>,
    no_sharing: bool,
    timeout: Option<Duration>,
}

impl GroupFlags {
    /// Take `name` if it is a group option.
    fn take(&mut self, name: &str, v: &Bound<'_, PyAny>) -> PyResult<bool> {
        match name {
            "cache_group" => {
                self.name = Some(v.extract().map_err(|_| bad(name, "expected a name"))?)
            }
            "group_listen" => {
                let text: String = v
                    .extract()
                    .map_err(|_| bad(name, "expected \"ADDR:PORT\""))?;
                self.listen = Some(
                    text.parse()
                        .map_err(|_| bad(name, "expected \"ADDR:PORT\""))?,
                );
            }
            "no_sharing" => {
                self.no_sharing = v
                    .extract()
                    .map_err(|_| bad(name, "expected True or False"))?
            }
            "group_timeout" => self.timeout = Some(seconds(name, v)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn options(self) -> PyResult<Option<GroupOptions>> {
        let Some(name) = self.name else {
            if self.listen.is_some() || self.no_sharing || self.timeout.is_some() {
                return Err(bad("cache_group", "group options need cache_group=NAME"));
            }
            return Ok(None);
        };
        Ok(Some(GroupOptions {
            name,
            listen: self
                .listen
                .unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
            no_sharing: self.no_sharing,
            ack_timeout: self.timeout.unwrap_or(Duration::from_millis(500)),
        }))
    }
}

/// The client options in `dict` over the mount's defaults, and how the caller maps to
/// the volume's users (`root_squash`, `all_squash`, `uid_map`, `gid_map`, `umask`: the
/// mount's options, as strings).
pub fn client_options(dict: &Bound<'_, PyDict>) -> PyResult<(ClientOptions, Identity)> {
    let mut o = ClientOptions::default();
    let mut group = GroupFlags::default();
    let mut identity: [Option<String>; 5] = Default::default();
    for (k, v) in dict.iter() {
        let name: String = k.extract()?;
        if let Some(at) = IDENTITY_KEYS.iter().position(|key| *key == name) {
            identity[at] = Some(v.extract().map_err(|_| bad(&name, "expected a string"))?);
        } else if !group.take(&name, &v)? {
            apply(&mut o, &name, &v)?;
        }
    }
    o.cache_group = group.options()?;
    if !(0.0..1.0).contains(&o.free_space_ratio) {
        return Err(bad("free_space_ratio", "expected a fraction in [0, 1)"));
    }
    let [root_squash, all_squash, uid_map, gid_map, umask] = &identity;
    let identity = Identity::parse(&IdentityOptions {
        root_squash: root_squash.as_deref(),
        all_squash: all_squash.as_deref(),
        uid_map: uid_map.as_deref(),
        gid_map: gid_map.as_deref(),
        umask: umask.as_deref(),
    })
    .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    Ok((o, identity))
}

/// The options that map the caller's identity, in [`client_options`]'s order.
const IDENTITY_KEYS: [&str; 5] = ["root_squash", "all_squash", "uid_map", "gid_map", "umask"];
