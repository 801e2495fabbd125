//! META-URL → metadata engine, format record → object store: the one place, with the
//! binary's argument parsing aside, that names concrete backends.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use strata_meta::kv::sqlite::SqliteEngine;
use strata_meta::kv::{KvEngine, KvError};
use strata_meta::{Format, Meta, MetaError, MetaOptions};
use strata_meta_etcd::{EtcdEngine, EtcdUrl};
use strata_meta_mysql::{MysqlEngine, MysqlUrl};
use strata_meta_postgres::{PostgresEngine, PostgresUrl};
use strata_meta_redis::{RedisEngine, RedisUrl};
use strata_object::ObjectStore;
use strata_object::backend::{AzureConfig, Backend, S3Config};
use strata_object::routed::Routed;
use strata_types::{MetaUrl, Secret};
use strata_vfs::placement::Placements;

use crate::error::{OpenError, Result};

/// How long opening a network engine may take before the caller is told it failed.
const ENGINE_OPEN_TIMEOUT: Duration = Duration::from_secs(20);

/// Open the metadata engine named by a META-URL (a password may come from `META_PASSWORD`
/// instead of the URL). Network engines are connected and checked here, in bounded time.
/// Messages show the URL with its password hidden.
pub async fn open_engine(url: &MetaUrl) -> Result<Arc<dyn KvEngine>> {
    let Some((scheme, rest)) = url.expose().split_once("://") else {
        return Err(OpenError::BadUrl(format!(
            "malformed META-URL {url}: expected e.g. sqlite3://strata.db"
        )));
    };
    let full = match std::env::var("META_PASSWORD") {
        Ok(p) if !p.is_empty() => url.with_password(&p),
        _ => url.clone(),
    };
    let bad = |e: &dyn std::fmt::Display| OpenError::BadUrl(e.to_string());
    let opened: Result<Arc<dyn KvEngine>, KvError> = match scheme {
        "sqlite" | "sqlite3" => {
            let path = rest.split('?').next().unwrap_or(rest);
            if path.is_empty() {
                return Err(OpenError::BadUrl(format!(
                    "malformed META-URL {url}: no database path"
                )));
            }
            SqliteEngine::open(Path::new(path)).map(|e| Arc::new(e) as Arc<dyn KvEngine>)
        }
        "redis" | "rediss" => {
            let parsed = RedisUrl::parse(full.expose()).map_err(|e| bad(&e))?;
            timed_open(RedisEngine::connect(&parsed)).await
        }
        "postgres" | "postgresql" => {
            let parsed = PostgresUrl::parse(full.expose()).map_err(|e| bad(&e))?;
            timed_open(PostgresEngine::connect(&parsed)).await
        }
        "etcd" => {
            let parsed = EtcdUrl::parse(full.expose()).map_err(|e| bad(&e))?;
            timed_open(EtcdEngine::connect(&parsed)).await
        }
        "mysql" => {
            let parsed = MysqlUrl::parse(full.expose()).map_err(|e| bad(&e))?;
            timed_open(MysqlEngine::connect(&parsed)).await
        }
        other => return Err(OpenError::UnknownEngine(other.to_owned())),
    };
    opened.map_err(|source| OpenError::Engine {
        url: url.to_string(),
        source,
    })
}

async fn timed_open<E: KvEngine + 'static>(
    connecting: impl Future<Output = Result<E, KvError>>,
) -> Result<Arc<dyn KvEngine>, KvError> {
    strata_meta::kv::within(ENGINE_OPEN_TIMEOUT, "the engine", connecting)
        .await
        .map(|e| Arc::new(e) as Arc<dyn KvEngine>)
}

/// A metadata client of the volume at `url`, its format loaded.
pub async fn load_meta(url: &MetaUrl) -> Result<(Arc<Meta>, Arc<Format>)> {
    load_meta_with(url, MetaOptions::default()).await
}

/// [`load_meta`] with non-default metadata client options.
pub async fn load_meta_with(url: &MetaUrl, opts: MetaOptions) -> Result<(Arc<Meta>, Arc<Format>)> {
    let meta = Meta::new(open_engine(url).await?, opts);
    let format = match meta.load().await {
        Ok(f) => f,
        Err(MetaError::NotFormatted) => {
            return Err(OpenError::NotFormatted {
                url: url.to_string(),
            });
        }
        Err(source) => {
            return Err(OpenError::Meta {
                context: format!("cannot read volume at {url}"),
                source,
            });
        }
    };
    Ok((Arc::new(meta), format))
}

/// The data keys of an encrypted volume (`None` for a plain one), unwrapped as `opts`
/// says; a rotation's new key is fetched again from the settings when data needs it.
pub fn volume_keys(
    meta: &Arc<Meta>,
    format: &Format,
    opts: &crate::keys::KeyOptions,
) -> Result<Option<Arc<strata_object::seal::Keys>>> {
    let Some(record) = &format.encryption else {
        return Ok(None);
    };
    let wrapper = crate::keys::open_wrapper(record, opts)?;
    let ring = crate::keys::unwrap_ring(record, &format.uuid, &wrapper)?;
    let source = crate::keys::SettingsKeys {
        meta: meta.clone(),
        wrapper,
    };
    Ok(Some(Arc::new(strata_object::seal::Keys::new(
        ring,
        Some(Arc::new(source)),
    ))))
}

/// The payload bytes per sealed segment of an encrypted volume's objects, as its
/// encryption record says (32 KiB when it names none, or for a plain volume).
pub fn seal_unit(format: &Format) -> Result<strata_object::sealed::Unit> {
    use strata_object::sealed::Unit;
    match format.encryption.as_ref().and_then(|e| e.object_unit_kib) {
        None => Ok(Unit::LARGE),
        Some(kib) => Unit::of_kib(kib).ok_or_else(|| {
            crate::keys::KeyError::Invalid(format!(
                "the volume's objects are sealed in {kib} KiB segments, which this build \
                 does not read"
            ))
            .into()
        }),
    }
}

/// The blocks an imported volume adopted from another file system, as its format
/// record names them (`None` for a volume with only its own). Encrypted ones are opened
/// with the volume's RSA key as `keys` says; without `keys` only their names and layout
/// are known (enough for `fsck` without `--verify`).
pub fn foreign_blocks(
    format: &Format,
    keys: Option<&crate::keys::KeyOptions>,
) -> Result<Option<strata_object::adopted::ForeignBlocks>> {
    use strata_object::adopted::{ForeignBlocks, ForeignCodec};
    let Some(foreign) = &format.foreign else {
        return Ok(None);
    };
    if foreign.kind != "juicefs" {
        return Err(OpenError::Foreign(format!(
            "the volume holds blocks of {:?}, which this build does not read",
            foreign.kind
        )));
    }
    let codec =
        ForeignCodec::parse(&foreign.compression).map_err(|e| OpenError::Foreign(e.to_string()))?;
    let cipher = match (&foreign.encryption, keys, &format.encryption) {
        (Some(cipher), Some(opts), Some(record)) => {
            Some(crate::keys::foreign_cipher(record, cipher, opts)?)
        }
        (Some(_), Some(_), None) => {
            return Err(OpenError::Foreign(
                "the imported blocks are encrypted, and the settings hold no key".into(),
            ));
        }
        _ => None,
    };
    Ok(Some(ForeignBlocks {
        below: foreign.slices_below,
        codec,
        encrypted: foreign.encryption.is_some(),
        cipher,
        checksums: foreign.checksums,
    }))
}

/// The backend a volume's data lives in; for a volume imported from JuiceFS, seen
/// through `ForeignNames` (hashed names shown as Strata's, recorded checksums deleted
/// with their blocks).
pub fn open_backend(format: &Format) -> Result<Arc<dyn ObjectStore>> {
    let backend = open_bare_backend(format)?;
    Ok(match &format.foreign {
        Some(f) => Arc::new(strata_object::adopted::ForeignNames::new(
            backend,
            &format.name,
            f.slices_below,
            f.hash_prefix,
        )),
        None => backend,
    })
}

fn open_bare_backend(format: &Format) -> Result<Arc<dyn ObjectStore>> {
    open_store_backend(
        &format.storage,
        &format.bucket,
        format.access_key.as_deref(),
        format.secret_key.clone(),
        format.session_token.clone(),
        None,
    )
}

/// The backend of one store: a kind (`file`, `mem`, `s3`, `azure`), its bucket, the
/// credentials to it and the storage class its objects get (S3 and Azure; ignored by
/// the others, which have none).
pub fn open_store_backend(
    storage: &str,
    bucket: &str,
    access_key: Option<&str>,
    secret_key: Option<Secret>,
    session_token: Option<Secret>,
    class: Option<String>,
) -> Result<Arc<dyn ObjectStore>> {
    let bucket_error = |source| OpenError::Bucket {
        bucket: bucket.to_string(),
        source,
    };
    match storage {
        "file" => {
            let dir = PathBuf::from(bucket);
            Ok(Arc::new(Backend::local(&dir).map_err(bucket_error)?))
        }
        "mem" => Ok(Arc::new(Backend::memory())),
        "s3" => Ok(Arc::new(
            Backend::s3(&s3_config(bucket, access_key, secret_key, session_token)?)
                .map_err(bucket_error)?
                .with_storage_class(class),
        )),
        "wasb" | "azure" => {
            let cfg = azure_config(
                bucket,
                access_key.unwrap_or_default(),
                secret_key.unwrap_or_default(),
            )?;
            Ok(Arc::new(
                Backend::azure(&cfg)
                    .map_err(bucket_error)?
                    .with_storage_class(class),
            ))
        }
        other => Err(OpenError::UnknownStorage(other.to_owned())),
    }
}

/// A volume's stores as one (docs/PLACEMENT.md): `home` (its own store, id 0) and each
/// store its settings add, every block routed by `lookup`. A store that fails is skipped
/// for `down_for`.
pub fn open_routed(
    format: &Format,
    home: Arc<dyn ObjectStore>,
    lookup: Arc<dyn strata_object::routed::PlacementLookup>,
    down_for: std::time::Duration,
) -> Result<strata_object::routed::Routed> {
    use strata_object::routed::{Member, Routed};
    let mut members = vec![Member::new(0, strata_meta::DEFAULT_STORE, home)];
    for spec in &format.stores {
        let backend = open_store_backend(
            &spec.storage,
            &spec.bucket,
            spec.access_key.as_deref(),
            spec.secret_key.clone(),
            None,
            spec.storage_class.clone(),
        )?;
        members.push(Member::new(spec.id, &spec.name, backend));
    }
    Routed::new(members, lookup, down_for).map_err(|source| OpenError::Bucket {
        bucket: format.bucket.clone(),
        source,
    })
}

/// A volume's stores one by one, and the placements that route blocks among them.
pub type RoutedStores = (Arc<Placements>, Arc<Routed>);

/// How long a store that failed is passed over before it is asked again.
const STORE_DOWN_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// A volume's stores and where its slices are: on a volume with several stores, `home`
/// (its own backend) and the others as one routed store, with the placements that route
/// it (to give the VFS too); `home` as it is otherwise.
pub fn route_stores(
    meta: &Arc<Meta>,
    format: &Format,
    home: Arc<dyn ObjectStore>,
) -> Result<(Arc<dyn ObjectStore>, Option<RoutedStores>)> {
    if format.stores.is_empty() {
        return Ok((home, None));
    }
    let placements = Arc::new(Placements::new(meta.clone()));
    let routed = Arc::new(open_routed(
        format,
        home,
        placements.clone(),
        STORE_DOWN_FOR,
    )?);
    Ok((routed.clone(), Some((placements, routed))))
}

/// Check that a volume's bucket answers.
pub async fn check_backend(format: &Format, backend: &Arc<dyn ObjectStore>) -> Result<()> {
    backend.check().await.map_err(|source| OpenError::Bucket {
        bucket: format.bucket.clone(),
        source,
    })
}

/// An S3 bucket URL: path style (`http://host:port/bucket`) or virtual-hosted
/// (`https://BUCKET.s3.REGION.amazonaws.com`, `https://BUCKET.host`: no path).
fn s3_config(
    url: &str,
    access_key: Option<&str>,
    secret_key: Option<Secret>,
    session_token: Option<Secret>,
) -> Result<S3Config> {
    let bad = || {
        OpenError::BadUrl(format!(
            "s3 bucket {url:?}: expected http(s)://host[:port]/bucket or https://bucket.host"
        ))
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_matches('/');
    let env_region = std::env::var("AWS_REGION").unwrap_or_default();
    let (endpoint, bucket, region, path_style) = if !path.is_empty() {
        (
            format!("{scheme}://{host}"),
            path.to_string(),
            env_region,
            true,
        )
    } else {
        let (bucket, domain) = host.split_once('.').ok_or_else(bad)?;
        let region = strata_object::backend::aws_region(domain).unwrap_or(env_region);
        (
            url.trim_end_matches('/').to_string(),
            bucket.to_string(),
            region,
            false,
        )
    };
    if bucket.is_empty() || host.is_empty() {
        return Err(bad());
    }
    let session_token =
        session_token.or_else(|| std::env::var("AWS_SESSION_TOKEN").ok().map(Secret::new));
    Ok(S3Config {
        endpoint,
        region,
        bucket,
        access_key: access_key.unwrap_or_default().to_string(),
        secret_key: secret_key.unwrap_or_default(),
        session_token,
        path_style,
    })
}

/// An Azure Blob Storage container URL, as `--bucket` gives it:
/// `https://CONTAINER.ENDPOINT` (JuiceFS's form; the account's blob service is
/// `https://ACCOUNT.blob.ENDPOINT`, e.g. ENDPOINT `core.windows.net`) or
/// `http(s)://HOST[:PORT]/ACCOUNT/CONTAINER` (Azurite, the account in the path). The account
/// is the access key, its key the secret key (both also from `AZURE_STORAGE_ACCOUNT_NAME`
/// / `AZURE_STORAGE_ACCOUNT_KEY`).
pub fn azure_config(url: &str, account: &str, key: Secret) -> Result<AzureConfig> {
    let bad = || {
        OpenError::BadUrl(format!(
            "azure container {url:?}: expected https://CONTAINER.core.windows.net or \
             http://HOST:PORT/ACCOUNT/CONTAINER"
        ))
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_matches('/');
    let env_account = || std::env::var("AZURE_STORAGE_ACCOUNT_NAME").unwrap_or_default();
    let account = if account.is_empty() {
        env_account()
    } else {
        account.to_string()
    };
    let (account, container, endpoint) = match path.split_once('/') {
        Some((in_path, container)) if !in_path.is_empty() => (
            in_path.to_string(),
            container.to_string(),
            format!("{scheme}://{host}/{in_path}"),
        ),
        _ if !path.is_empty() => return Err(bad()),
        _ => {
            let (container, domain) = host.split_once('.').ok_or_else(bad)?;
            if account.is_empty() {
                return Err(OpenError::BadUrl(format!(
                    "azure container {url:?}: give the storage account as the access key \
                     (or AZURE_STORAGE_ACCOUNT_NAME)"
                )));
            }
            let endpoint = format!("{scheme}://{account}.blob.{domain}");
            (account, container.to_string(), endpoint)
        }
    };
    if container.is_empty() || host.is_empty() || container.contains('/') {
        return Err(bad());
    }
    Ok(AzureConfig {
        account,
        key,
        container,
        endpoint,
    })
}

/// `~/.strata/...`
pub fn home_path(rest: &str) -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    PathBuf::from(home).join(".strata").join(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_container_urls_name_the_account_container_and_endpoint() {
        let c = azure_config("https://data.core.windows.net", "acct", "k".into()).unwrap();
        assert_eq!(
            (
                c.account.as_str(),
                c.container.as_str(),
                c.endpoint.as_str()
            ),
            ("acct", "data", "https://acct.blob.core.windows.net")
        );
        let c = azure_config(
            "http://127.0.0.1:10000/devstoreaccount1/box/",
            "",
            "k".into(),
        )
        .unwrap();
        assert_eq!(
            (
                c.account.as_str(),
                c.container.as_str(),
                c.endpoint.as_str()
            ),
            (
                "devstoreaccount1",
                "box",
                "http://127.0.0.1:10000/devstoreaccount1"
            )
        );
        assert!(azure_config("http://127.0.0.1:10000/onlyone", "a", "k".into()).is_err());
        assert!(azure_config("nonsense", "a", "k".into()).is_err());
    }

    fn s3_format(bucket: &str) -> Format {
        Format {
            name: "v".into(),
            uuid: "u".into(),
            storage: "s3".into(),
            bucket: bucket.into(),
            access_key: Some("ak".into()),
            secret_key: Some(Secret::new("sk")),
            session_token: Some(Secret::new("token")),
            block_size_kib: 4096,
            compression: "none".into(),
            trash_days: 0,
            capacity: 0,
            inodes: 0,
            created_at: 0,
            meta_version: 2,
            enable_acl: false,
            encryption: None,
            foreign: None,
            stores: Vec::new(),
        }
    }

    #[test]
    fn the_seal_unit_comes_from_the_encryption_record() {
        use strata_object::sealed::Unit;
        let with_unit = |kib: Option<u32>| Format {
            encryption: Some(strata_meta::Encryption {
                wrapping: "kek".into(),
                kek_source: None,
                rsa_private_key: None,
                current_key: 1,
                keys: Vec::new(),
                object_unit_kib: kib,
            }),
            ..s3_format("b")
        };
        assert_eq!(seal_unit(&s3_format("b")).unwrap(), Unit::LARGE);
        assert_eq!(seal_unit(&with_unit(None)).unwrap(), Unit::LARGE);
        assert_eq!(seal_unit(&with_unit(Some(16))).unwrap(), Unit::SMALL);
        let e = seal_unit(&with_unit(Some(64))).unwrap_err().to_string();
        assert!(e.contains("64 KiB"), "{e}");
    }

    fn s3_of(f: &Format) -> Result<S3Config> {
        s3_config(
            &f.bucket,
            f.access_key.as_deref(),
            f.secret_key.clone(),
            f.session_token.clone(),
        )
    }

    #[test]
    fn s3_buckets_in_path_and_virtual_hosted_style() {
        let path = s3_of(&s3_format("http://127.0.0.1:9000/data")).unwrap();
        assert_eq!(
            (
                path.endpoint.as_str(),
                path.bucket.as_str(),
                path.path_style
            ),
            ("http://127.0.0.1:9000", "data", true)
        );
        assert_eq!(path.session_token, Some(Secret::new("token")));
        let aws = s3_of(&s3_format("https://my-data.s3.eu-west-2.amazonaws.com")).unwrap();
        assert_eq!(
            (
                aws.endpoint.as_str(),
                aws.bucket.as_str(),
                aws.region.as_str(),
                aws.path_style
            ),
            (
                "https://my-data.s3.eu-west-2.amazonaws.com",
                "my-data",
                "eu-west-2",
                false
            )
        );
        let dashed = s3_of(&s3_format("https://b.s3-us-west-1.amazonaws.com/")).unwrap();
        assert_eq!(
            (dashed.bucket.as_str(), dashed.region.as_str()),
            ("b", "us-west-1")
        );
        let other = s3_of(&s3_format("https://photos.minio.example.com")).unwrap();
        assert_eq!(other.bucket, "photos");
        assert!(!other.path_style);
        assert!(s3_of(&s3_format("https://nodots")).is_err());
        assert!(s3_of(&s3_format("no-scheme/bucket")).is_err());
    }

    #[tokio::test]
    async fn bad_meta_urls_are_named_in_one_line() {
        let malformed = open_engine(&MetaUrl::new("no-scheme")).await;
        let malformed = malformed.err().map(|e| e.to_string());
        assert!(malformed.is_some_and(|m| m.starts_with("malformed META-URL")));
        let unknown = open_engine(&MetaUrl::new("ftp://x")).await;
        let unknown = unknown.err().map(|e| e.to_string());
        assert!(unknown.is_some_and(|m| m.starts_with("unknown metadata engine \"ftp\"")));
    }
}
