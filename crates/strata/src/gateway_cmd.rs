//! `strata gateway`: the volume as an S3 service (JuiceFS's command shape).

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use strata_s3::{Credentials, Gateway, GatewayOptions, ServeOptions};
use strata_types::MetaUrl;
use strata_vfs::{Ctx, VfsOptions};
use tokio_util::sync::CancellationToken;

use crate::client::ClientArgs;
use crate::gateway_users::{UserCommand, run_user};
use crate::http_front::{Listening, listen, run_until_signal};
use crate::wiring;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct GatewayArgs {
    #[command(subcommand)]
    command: Option<GatewayCommand>,
    /// Metadata engine URL, e.g. sqlite3://strata.db (a password may come from
    /// META_PASSWORD instead)
    #[arg(required = true)]
    meta_url: Option<MetaUrl>,
    /// Address to listen on, e.g. localhost:9000 or 0.0.0.0:9000. The root user's access
    /// key and secret come from STRATA_ACCESS_KEY and STRATA_SECRET_KEY (or
    /// MINIO_ROOT_USER and MINIO_ROOT_PASSWORD, as for JuiceFS); more users with
    /// `strata gateway user add`
    #[arg(required = true)]
    address: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    metrics: crate::metrics_endpoint::MetricsArgs,
    #[command(flatten)]
    identity: crate::identity_args::IdentityArgs,
    /// Serve each top-level directory as a bucket (CreateBucket makes one); without it
    /// the whole volume (or --subdir) is one bucket named after the volume
    #[arg(long)]
    multi_buckets: bool,
    /// Refuse every change with AccessDenied
    #[arg(long)]
    read_only: bool,
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

#[derive(Debug, Subcommand)]
enum GatewayCommand {
    /// Manage the gateway's users, kept in the volume and shared by all its gateways
    #[command(subcommand)]
    User(UserCommand),
}

/// The gateway's key pair from the environment.
fn credentials() -> Result<Credentials> {
    let pair = |user: &str, secret: &str| match (std::env::var(user), std::env::var(secret)) {
        (Ok(u), Ok(s)) if !u.is_empty() && !s.is_empty() => Some((u, s)),
        _ => None,
    };
    let Some((user, secret)) = pair("STRATA_ACCESS_KEY", "STRATA_SECRET_KEY")
        .or_else(|| pair("MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"))
    else {
        bail!(
            "set STRATA_ACCESS_KEY and STRATA_SECRET_KEY (or MINIO_ROOT_USER and MINIO_ROOT_PASSWORD) to the key pair clients will sign with"
        );
    };
    if user.len() < 3 || secret.len() < 8 {
        bail!("the access key needs at least 3 characters and the secret key at least 8");
    }
    Ok(Credentials::new(user, secret))
}

pub fn run_gateway(a: GatewayArgs) -> Result<()> {
    if let Some(GatewayCommand::User(cmd)) = a.command {
        return run_user(cmd);
    }
    // s3s logs every error answer (NoSuchKey included) at ERROR; the gateway logs the
    // failures that are its own.
    wiring::init_logging("info,s3s::ops=off");
    let root = credentials()?;
    let rt = wiring::runtime()?;
    rt.block_on(serve(a, root))
}

async fn serve(a: GatewayArgs, root: Credentials) -> Result<()> {
    let (Some(meta_url), Some(address)) = (&a.meta_url, &a.address) else {
        bail!("give the metadata URL and the address to listen on");
    };
    let Listening {
        listener,
        tls,
        scheme,
        local,
        taken,
    } = listen(address, a.cert_file.as_deref(), a.key_file.as_deref()).await?;
    let identity = a.identity.identity(Some("022"))?;
    let vfs_opts = VfsOptions {
        read_only: a.read_only,
        hide_internal: true,
        identity: identity.clone(),
        ..VfsOptions::default()
    };
    let client =
        crate::client::open_client(meta_url, &a.client, vfs_opts, &format!("s3://{local}")).await?;
    // Requests act as the server's user, mapped by the identity options.
    let ctx = identity.caller(Ctx::user(
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    ));
    let opts = GatewayOptions {
        multi_buckets: a.multi_buckets,
        bucket: client.format.name.clone(),
        owner_id: client.format.uuid.clone(),
        root_access_key: root.access_key.clone(),
    };
    let _metrics = match crate::metrics_endpoint::start(&a.metrics, &client.vfs).await {
        Ok(endpoint) => endpoint,
        Err(e) => {
            client.close().await.ok();
            return Err(e);
        }
    };
    let gateway = Gateway::new(client.vfs.clone(), opts, ctx);
    let service = strata_s3::build_service(gateway, root);
    let stop = CancellationToken::new();
    let serve_opts = ServeOptions {
        max_connections: a.max_connections,
        ..ServeOptions::default()
    };
    let offer = crate::http_front::offer(&listener, local);
    let server = tokio::spawn(strata_s3::serve(
        listener,
        service,
        serve_opts,
        tls,
        stop.clone(),
    ));
    tracing::info!(
        "S3 gateway for volume {} listening on {scheme}://{local}{}",
        client.format.name,
        if a.multi_buckets {
            " (a bucket per top-level directory)"
        } else {
            ""
        }
    );
    crate::http_front::serving(taken).await;
    run_until_signal("the gateway", server, stop, client, offer).await;
    Ok(())
}
