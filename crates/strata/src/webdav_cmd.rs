//! `strata webdav`: the volume as a WebDAV server (JuiceFS's command shape), with locks
//! kept in the volume so several servers of one volume agree.

use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use strata_types::{MetaUrl, Secret};
use strata_vfs::{Ctx, VfsOptions};
use strata_webdav::{Auth, LockOptions, ServeOptions, WebDavOptions, WebDavServer};
use tokio_util::sync::CancellationToken;

use crate::client::{Client, ClientArgs};
use crate::http_front::{Listening, listen, run_until_signal};
use crate::{units, wiring};

#[derive(Debug, Args)]
pub struct WebDavArgs {
    /// Metadata engine URL, e.g. sqlite3://strata.db (a password may come from
    /// META_PASSWORD instead)
    meta_url: MetaUrl,
    /// Address to listen on, e.g. localhost:9007 or 0.0.0.0:9007. Clients log in (HTTP
    /// basic auth) as WEBDAV_USER with WEBDAV_PASSWORD from the environment, or as a user
    /// kept in the volume (`strata gateway user add`: access key and secret key)
    address: String,
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    metrics: crate::metrics_endpoint::MetricsArgs,
    #[command(flatten)]
    identity: crate::identity_args::IdentityArgs,
    /// Serve without asking for credentials (only without WEBDAV_USER)
    #[arg(long)]
    anonymous: bool,
    /// Refuse directory listings (PROPFIND with a depth, GET of a directory)
    #[arg(long = "disallowList", alias = "disallow-list")]
    disallow_list: bool,
    /// Compress GET answers for clients that accept gzip (whole files, not ranges)
    #[arg(long)]
    gzip: bool,
    /// Accepted for JuiceFS compatibility: dead properties (PROPPATCH) are always kept,
    /// in xattrs
    #[arg(long)]
    enable_proppatch: bool,
    /// Refuse every change (403)
    #[arg(long)]
    read_only: bool,
    /// Longest lock timeout granted (an infinite request gets this): the locks of a
    /// client that went away lapse within it
    #[arg(long, default_value = "1h", value_parser = units::parse_duration)]
    max_lock_timeout: Duration,
    /// Connections served at once (more wait to be accepted)
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Serve HTTPS with this certificate chain (PEM; needs --key-file)
    #[arg(long, requires = "key_file")]
    cert_file: Option<std::path::PathBuf>,
    /// The private key of --cert-file (PEM)
    #[arg(long, requires = "cert_file")]
    key_file: Option<std::path::PathBuf>,
}

/// Who may log in, from the environment and `--anonymous`.
fn auth(anonymous: bool) -> Result<Auth> {
    let user = std::env::var("WEBDAV_USER").unwrap_or_default();
    let password = std::env::var("WEBDAV_PASSWORD").unwrap_or_default();
    match (user.is_empty(), anonymous) {
        (true, true) => Ok(Auth::Anonymous),
        (true, false) => Ok(Auth::Users { own: None }),
        (false, true) => bail!("--anonymous and WEBDAV_USER exclude each other"),
        (false, false) if password.is_empty() => bail!("WEBDAV_USER needs WEBDAV_PASSWORD"),
        (false, false) => Ok(Auth::Users {
            own: Some((user, Secret::new(password))),
        }),
    }
}

/// Refuse to serve nobody: without WEBDAV_USER and --anonymous, the volume must have
/// users.
async fn check_someone_can_log_in(auth: &Auth, client: &Client, ctx: &Ctx) -> Result<()> {
    if !matches!(auth, Auth::Users { own: None }) {
        return Ok(());
    }
    let users = strata_http::UserStore::new(client.vfs.clone(), ctx.clone());
    if users.list().await?.is_empty() {
        bail!(
            "nobody could log in: set WEBDAV_USER and WEBDAV_PASSWORD, add users with `strata gateway user add`, or pass --anonymous"
        );
    }
    Ok(())
}

pub fn run_webdav(a: WebDavArgs) -> Result<()> {
    wiring::init_logging("info");
    let auth = auth(a.anonymous)?;
    let rt = wiring::runtime()?;
    rt.block_on(serve(a, auth))
}

async fn serve(a: WebDavArgs, auth: Auth) -> Result<()> {
    let Listening {
        listener,
        tls,
        scheme,
        local,
        taken,
    } = listen(&a.address, a.cert_file.as_deref(), a.key_file.as_deref()).await?;
    let identity = a.identity.identity(Some("022"))?;
    let vfs_opts = VfsOptions {
        read_only: a.read_only,
        hide_internal: true,
        identity: identity.clone(),
        ..VfsOptions::default()
    };
    let client = crate::client::open_client(
        &a.meta_url,
        &a.client,
        vfs_opts,
        &format!("webdav://{local}"),
    )
    .await?;
    // Requests act as the server's user, mapped by the identity options.
    let ctx = identity.caller(Ctx::user(
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    ));
    if let Err(e) = check_someone_can_log_in(&auth, &client, &ctx).await {
        client.close().await.ok();
        return Err(e);
    }
    let opts = WebDavOptions {
        auth,
        read_only: a.read_only,
        subdir: a.client.subdir.clone(),
        disallow_list: a.disallow_list,
        gzip: a.gzip,
        locks: LockOptions {
            max_timeout: a.max_lock_timeout,
            ..LockOptions::for_subdir(a.client.subdir.as_deref())
        },
    };
    let _metrics = match crate::metrics_endpoint::start(&a.metrics, &client.vfs).await {
        Ok(endpoint) => endpoint,
        Err(e) => {
            client.close().await.ok();
            return Err(e);
        }
    };
    let server = WebDavServer::new(client.vfs.clone(), ctx, opts);
    let stop = CancellationToken::new();
    let serve_opts = ServeOptions {
        max_connections: a.max_connections,
        ..ServeOptions::default()
    };
    let offer = crate::http_front::offer(&listener, local);
    let task = tokio::spawn(strata_webdav::serve(
        listener,
        server,
        serve_opts,
        tls,
        stop.clone(),
    ));
    tracing::info!(
        "WebDAV server for volume {} listening on {scheme}://{local}/",
        client.format.name
    );
    crate::http_front::serving(taken).await;
    run_until_signal("the WebDAV server", task, stop, client, offer).await;
    Ok(())
}
