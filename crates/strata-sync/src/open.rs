//! Opening SRC and DST from their addresses, as `juicefs sync` writes them: a local
//! directory (`/path`, `file:///path`), an S3 bucket (`s3://[AK:SK[:TOKEN]@]BUCKET[.ENDPOINT]
//! [/PREFIX]`, `minio://[AK:SK@]HOST:PORT/BUCKET[/PREFIX]`), an Azure container
//! (`wasb://`/`azure://[ACCOUNT:KEY@]CONTAINER[.ENDPOINT][/PREFIX]`) or a Strata volume
//! opened without a mount (`strata://NAME/PATH`, NAME an environment variable holding its
//! META-URL). Object stores are wrapped in retries and request limits sized for the run.

use std::path::PathBuf;
use std::sync::Arc;

use strata_client::{Client, ClientOptions};
use strata_object::ObjectStore;
use strata_object::backend::{AzureConfig, Backend, S3Config};
use strata_object::limit::{Limited, Limits};
use strata_object::metered::{Metered, ObjectStats};
use strata_object::retry::{RetryPolicy, Retrying};
use strata_types::{MetaUrl, Secret, redact_url};
use strata_vfs::VfsOptions;

use crate::Endpoint;
use crate::fs::FsEndpoint;
use crate::objects::ObjectEndpoint;
use crate::volume::VolumeEndpoint;
use crate::{Result, SyncError};

/// The volumes a run opened, by the name their address gave (closed by [`close_all`]).
pub type OpenVolumes = Vec<(String, Client)>;

/// How endpoints are opened: symlinks kept (`--links`), access control lists read
/// (`--perms`), and requests sized for `threads`.
#[derive(Clone, Copy, Debug)]
pub struct OpenHow {
    pub links: bool,
    /// Entries carry their access control lists where the place has them (`--perms`).
    pub acls: bool,
    pub threads: usize,
    /// Directories read at once while listing (`--list-threads`).
    pub list_threads: usize,
    /// `s3://` endpoints over http (`--no-https`).
    pub no_https: bool,
    /// The secret of an address (what follows `AK:`) as given: a front end that hides
    /// secrets from the process list puts them back here.
    pub reveal: fn(&str) -> String,
}

/// Why SRC or DST cannot be opened.
fn failed(side: &str, shown: &str, reason: impl std::fmt::Display) -> SyncError {
    SyncError::Usage(format!("{side} {shown}: {reason}"))
}

/// Close the volumes a run opened; a failure to close one is logged.
pub async fn close_all(volumes: OpenVolumes) {
    for (_, client) in volumes {
        if let Err(e) = client.close().await {
            tracing::error!("closing the volume: {e}");
        }
    }
}

/// The endpoint at `addr`, SRC's or DST's (`is_dst`: made when missing); a volume opened
/// for it joins `clients`.
pub async fn open(
    addr: &str,
    a: OpenHow,
    is_dst: bool,
    clients: &mut OpenVolumes,
) -> Result<Arc<dyn Endpoint>> {
    let side = if is_dst { "DST" } else { "SRC" };
    let shown = redact_url(addr);
    if let Some(rest) = addr.strip_prefix("strata://") {
        let (name, path) = rest.split_once('/').unwrap_or((rest, ""));
        if let Some((_, client)) = clients.iter().find(|(n, _)| n == name) {
            let ep = VolumeEndpoint::open(client.vfs.clone(), name, path, a.links, is_dst)
                .await
                .map(|ep| ep.with_list_threads(a.list_threads).with_acls(a.acls));
            return Ok(Arc::new(ep.map_err(|e| failed(side, addr, e))?));
        }
        let url = std::env::var(name).map_err(|_| {
            failed(
                side,
                addr,
                format_args!("set the environment variable {name} to the volume's META-URL"),
            )
        })?;
        let url = MetaUrl::new(url);
        let opts = ClientOptions {
            cache_size: 0,
            no_bgjob: true,
            ..ClientOptions::default()
        };
        let client = Client::open(&url, &opts, VfsOptions::default(), "sync")
            .await
            .map_err(|e| failed(side, addr, e))?;
        let ep = VolumeEndpoint::open(client.vfs.clone(), name, path, a.links, is_dst)
            .await
            .map(|ep| ep.with_list_threads(a.list_threads).with_acls(a.acls));
        clients.push((name.to_string(), client));
        return Ok(Arc::new(ep.map_err(|e| failed(side, addr, e))?));
    }
    if addr.starts_with("s3://") || addr.starts_with("minio://") {
        let (cfg, prefix) =
            s3_address(addr, a.no_https, a.reveal).map_err(|e| failed(side, &shown, e))?;
        let store = object_store(&cfg, a)
            .await
            .map_err(|e| failed(side, &shown, e))?;
        return Ok(Arc::new(ObjectEndpoint::new(store, &prefix)));
    }
    if addr.starts_with("wasb://") || addr.starts_with("azure://") {
        let (cfg, prefix) = azure_address(addr, a.reveal).map_err(|e| failed(side, &shown, e))?;
        let backend = Backend::azure(&cfg).map_err(|e| failed(side, &shown, e))?;
        let store = wrapped(backend, a)
            .await
            .map_err(|e| failed(side, &shown, e))?;
        return Ok(Arc::new(ObjectEndpoint::new(store, &prefix)));
    }
    if let Some((scheme, _)) = addr.split_once("://")
        && scheme != "file"
    {
        return Err(failed(
            side,
            &shown,
            format_args!("unknown address kind {scheme}:// (file, s3, minio, wasb or strata)"),
        ));
    }
    let path = PathBuf::from(addr.strip_prefix("file://").unwrap_or(addr));
    Ok(Arc::new(
        FsEndpoint::open(&path, a.links, is_dst)
            .map_err(|e| failed(side, addr, e))?
            .with_list_threads(a.list_threads)
            .with_acls(a.acls),
    ))
}

/// An S3 store with retries and request limits, counted (not shown: the summary counts
/// files, not requests), once it answered (without retries: a wrong address or key is
/// reported at once).
async fn object_store(cfg: &S3Config, a: OpenHow) -> strata_object::Result<Arc<dyn ObjectStore>> {
    wrapped(Backend::s3(cfg)?, a).await
}

/// `backend` with retries and request limits, counted, once it answered.
async fn wrapped(backend: Backend, a: OpenHow) -> strata_object::Result<Arc<dyn ObjectStore>> {
    backend.check().await?;
    let limits = Limits {
        max_uploads: a.threads.max(1) * 4,
        max_downloads: a.threads.max(1) * 4,
        ..Limits::default()
    };
    let metered = Metered::new(
        Limited::new(backend, limits),
        Arc::new(ObjectStats::default()),
    );
    Ok(Arc::new(Retrying::new(metered, RetryPolicy::default())))
}

/// `s3://[AK:SK[:TOKEN]@]BUCKET[.ENDPOINT][/PREFIX]` or
/// `minio://[AK:SK@]HOST:PORT/BUCKET[/PREFIX]`, as a store and a key prefix.
fn s3_address(
    addr: &str,
    no_https: bool,
    reveal: fn(&str) -> String,
) -> std::result::Result<(S3Config, String), String> {
    let scheme = addr.split_once("://").map_or("s3", |(s, _)| s);
    let (userinfo, rest) = split_userinfo(addr);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if host.is_empty() {
        return Err("no bucket".into());
    }
    let mut cfg = S3Config::default();
    if let Some(u) = userinfo {
        let (access_key, secret) = u.split_once(':').unwrap_or((u, ""));
        let secret = reveal(secret);
        let (secret_key, token) = match secret.split_once(':') {
            Some((key, token)) => (key, Some(token)),
            None => (secret.as_str(), None),
        };
        cfg.access_key = unescape(access_key);
        cfg.secret_key = Secret::new(unescape(secret_key));
        cfg.session_token = token.map(|t| Secret::new(unescape(t)));
    }
    let prefix = if scheme == "minio" {
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        if bucket.is_empty() {
            return Err("expected minio://HOST:PORT/BUCKET[/PREFIX]".into());
        }
        cfg.endpoint = format!("http://{host}");
        cfg.bucket = bucket.to_string();
        cfg.path_style = true;
        prefix.to_string()
    } else {
        match host.split_once('.') {
            Some((bucket, endpoint)) => {
                cfg.bucket = bucket.to_string();
                let scheme = if no_https { "http" } else { "https" };
                cfg.endpoint = format!("{scheme}://{host}");
                cfg.region = strata_object::backend::aws_region(endpoint).unwrap_or_default();
            }
            None => cfg.bucket = host.to_string(),
        }
        path.to_string()
    };
    Ok((cfg, prefix))
}

/// An address's `AK:SK@` (by the rule that hides it: a key may hold `/`) and what follows
/// it, without the scheme.
fn split_userinfo(addr: &str) -> (Option<&str>, &str) {
    match strata_types::userinfo_bounds(addr) {
        Some((start, at)) => (Some(&addr[start..at]), &addr[at + 1..]),
        None => (None, addr.split_once("://").map_or(addr, |(_, r)| r)),
    }
}

/// `wasb://[ACCOUNT:KEY@]CONTAINER[.ENDPOINT][/PREFIX]` as a container and a key prefix:
/// ENDPOINT defaults to `core.windows.net`; one with a port (`127.0.0.1:10000`) is an
/// Azurite server over http, the account in its path.
fn azure_address(
    addr: &str,
    reveal: fn(&str) -> String,
) -> std::result::Result<(AzureConfig, String), String> {
    let (userinfo, rest) = split_userinfo(addr);
    let (host, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let (account, key) = match userinfo {
        Some(u) => {
            let (account, key) = u.split_once(':').unwrap_or((u, ""));
            let key = reveal(key);
            (unescape(account), Secret::new(unescape(&key)))
        }
        None => (
            std::env::var("AZURE_STORAGE_ACCOUNT_NAME").unwrap_or_default(),
            Secret::new(std::env::var("AZURE_STORAGE_ACCOUNT_KEY").unwrap_or_default()),
        ),
    };
    let (container, endpoint) = host.split_once('.').unwrap_or((host, "core.windows.net"));
    if container.is_empty() {
        return Err("no container".into());
    }
    let url = if endpoint.contains(':') {
        format!("http://{endpoint}/{account}/{container}")
    } else {
        format!("https://{container}.{endpoint}")
    };
    let cfg = strata_client::azure_config(&url, &account, key).map_err(|e| e.to_string())?;
    Ok((cfg, prefix.to_string()))
}

/// `%2F` and friends, as JuiceFS addresses write special characters in keys.
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;

    fn as_given(secret: &str) -> String {
        secret.to_string()
    }

    #[test]
    fn s3_addresses_read_like_juicefs_ones() {
        let (c, p) =
            s3_address("minio://ak:s%2Fk@127.0.0.1:9000/bkt/a/b", false, as_given).unwrap();
        assert_eq!(
            (c.endpoint.as_str(), c.bucket.as_str(), p.as_str()),
            ("http://127.0.0.1:9000", "bkt", "a/b")
        );
        assert_eq!(
            (c.access_key.as_str(), c.secret_key.expose()),
            ("ak", "s/k")
        );
        assert!(c.path_style);
        let (c, p) = s3_address("s3://bkt.s3.us-east-2.amazonaws.com/x", false, as_given).unwrap();
        assert_eq!(
            (c.bucket.as_str(), c.region.as_str(), p.as_str()),
            ("bkt", "us-east-2", "x")
        );
        assert!(!c.path_style);
        let (c, p) = s3_address("s3://bkt", false, as_given).unwrap();
        assert_eq!(
            (c.bucket.as_str(), c.endpoint.as_str(), p.as_str()),
            ("bkt", "", "")
        );
        assert!(s3_address("minio://host:1/", false, as_given).is_err());
        let (c, _) = s3_address("s3://bkt.s3.us-east-2.amazonaws.com/x", false, as_given).unwrap();
        assert_eq!(c.endpoint, "https://bkt.s3.us-east-2.amazonaws.com");
        let (c, _) = s3_address("s3://bkt.127.0.0.1:9000/x", true, as_given).unwrap();
        assert_eq!(c.endpoint, "http://bkt.127.0.0.1:9000");
    }

    #[test]
    fn azure_addresses_name_azure_or_azurite() {
        let (c, p) = azure_address("wasb://acct:a2V5@box/in/here", as_given).unwrap();
        assert_eq!(
            (
                c.account.as_str(),
                c.container.as_str(),
                c.endpoint.as_str()
            ),
            ("acct", "box", "https://acct.blob.core.windows.net")
        );
        assert_eq!((c.key.expose(), p.as_str()), ("a2V5", "in/here"));
        let (c, _) = azure_address("wasb://acct:a/b+c==@box/x", as_given).unwrap();
        assert_eq!(
            c.key.expose(),
            "a/b+c==",
            "a key holding / needs no escaping"
        );
        let (c, p) = azure_address("azure://dev:k@box.127.0.0.1:10000", as_given).unwrap();
        assert_eq!(
            (c.container.as_str(), c.endpoint.as_str(), p.as_str()),
            ("box", "http://127.0.0.1:10000/dev", "")
        );
        assert!(azure_address("wasb://a:k@/x", as_given).is_err());
    }
}
