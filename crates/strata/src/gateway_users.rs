//! `strata gateway user add|list|remove` (also `strata webdav user ...`): the users of the
//! S3 gateway and the WebDAV server, kept in the volume so every gateway and WebDAV
//! process of it accepts them at once (strata-http's `UserStore`).

use std::io::{BufRead, IsTerminal};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use strata_http::{PosixIds, UserGrants, UserStore, WebDavLimits};
use strata_types::{MetaUrl, Secret};
use strata_vfs::{Ctx, VfsOptions};

use crate::client::{Client, ClientArgs};
use crate::wiring;

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user; prints the generated secret key once (or reads it with --secret-stdin)
    Add(AddArgs),
    /// List the users (access keys and when they were added; never secrets)
    List(ListArgs),
    /// Remove a user; every gateway refuses its key from the next request on
    Remove(RemoveArgs),
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    /// The new user's access key: 3 to 128 letters, digits, '.', '_' or '-'
    access_key: String,
    /// Read the secret key (8 to 128 printable characters) from the first line of stdin
    /// instead of generating one
    #[arg(long)]
    secret_stdin: bool,
    /// Through WebDAV, show the user only this directory of the volume (e.g.
    /// /projects/a) as the root. The S3 gateway has bucket policies instead
    #[arg(long, value_name = "PATH")]
    webdav_subdir: Option<String>,
    /// Through WebDAV, let the user read but change nothing
    #[arg(long)]
    webdav_read_only: bool,
    /// Through the S3 gateway and WebDAV, act as this volume user id in the file system
    /// (permissions and ACLs are checked for it; what it creates is its own). Without
    /// --uid/--gid the user acts as the server does. Needs --gid
    #[arg(long, value_name = "UID", requires = "gid")]
    uid: Option<u32>,
    /// The volume group id the user acts as (with --uid)
    #[arg(long, value_name = "GID", requires = "uid")]
    gid: Option<u32>,
    /// Supplementary volume group ids, comma-separated (with --uid)
    #[arg(long, value_name = "GID,...", value_delimiter = ',', requires = "uid")]
    groups: Vec<u32>,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    /// The access key to remove
    access_key: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// A random secret key: 40 hexadecimal characters from two random UUIDs (154 random
/// bits).
fn generate_secret() -> Secret {
    let random = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    Secret::new(random.get(..40).unwrap_or(&random).to_string())
}

fn read_secret() -> Result<Secret> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("secret key: ");
    }
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .context("reading the secret key from stdin")?;
    let secret = line.trim_end_matches(['\r', '\n']).to_string();
    if secret.is_empty() {
        bail!("no secret key on stdin");
    }
    Ok(Secret::new(secret))
}

/// `uid:gid` and, when there are some, `+g1,g2`.
fn posix_ids_text(ids: &PosixIds) -> String {
    let mut text = format!("{}:{}", ids.uid, ids.gid);
    if !ids.groups.is_empty() {
        let groups: Vec<String> = ids.groups.iter().map(u32::to_string).collect();
        text.push('+');
        text.push_str(&groups.join(","));
    }
    text
}

pub fn run_user(cmd: UserCommand) -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = wiring::runtime()?;
    rt.block_on(run(cmd))
}

async fn open(meta_url: &MetaUrl, client: &ClientArgs) -> Result<(Client, UserStore)> {
    let opts = VfsOptions {
        hide_internal: true,
        ..VfsOptions::default()
    };
    let client = crate::client::open_client(meta_url, client, opts, "gateway-user").await?;
    // As the gateway does: the users' files belong to the OS user running the commands,
    // so run them as the user the gateways run as.
    let ctx = Ctx::user(
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let store = UserStore::new(client.vfs.clone(), ctx);
    Ok((client, store))
}

async fn run(cmd: UserCommand) -> Result<()> {
    match cmd {
        UserCommand::Add(a) => {
            let (secret, generated) = if a.secret_stdin {
                (read_secret()?, false)
            } else {
                (generate_secret(), true)
            };
            let (client, store) = open(&a.meta_url, &a.client).await?;
            let grants = UserGrants {
                webdav: WebDavLimits {
                    subdir: a.webdav_subdir.clone(),
                    read_only: a.webdav_read_only,
                },
                posix: match (a.uid, a.gid) {
                    (Some(uid), Some(gid)) => Some(PosixIds {
                        uid,
                        gid,
                        groups: a.groups.clone(),
                    }),
                    _ => None,
                },
            };
            let added = store.add(&a.access_key, &secret, &grants).await;
            client.close().await.ok();
            added?;
            if generated {
                println!("access key: {}", a.access_key);
                println!("secret key: {}", secret.expose());
                eprintln!("(the secret key is shown only now; keep it)");
            } else {
                println!("added user {}", a.access_key);
            }
        }
        UserCommand::List(a) => {
            let (client, store) = open(&a.meta_url, &a.client).await?;
            let users = store.list().await;
            client.close().await.ok();
            let users = users?;
            println!(
                "{:<40} {:<19} {:<24} WEBDAV",
                "ACCESS KEY", "ADDED (UTC)", "ACTS AS"
            );
            for u in users {
                let added = time::OffsetDateTime::from_unix_timestamp(u.created)
                    .map(|t| {
                        format!(
                            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
                            t.year(),
                            u8::from(t.month()),
                            t.day(),
                            t.hour(),
                            t.minute(),
                            t.second()
                        )
                    })
                    .unwrap_or_else(|_| u.created.to_string());
                let mut webdav = u.webdav.subdir.clone().unwrap_or_else(|| "/".into());
                if u.webdav.read_only {
                    webdav.push_str(" (read-only)");
                }
                let acts_as = match &u.posix {
                    None => "(the server)".to_string(),
                    Some(ids) => posix_ids_text(ids),
                };
                println!("{:<40} {added:<19} {acts_as:<24} {webdav}", u.access_key);
            }
        }
        UserCommand::Remove(a) => {
            let (client, store) = open(&a.meta_url, &a.client).await?;
            let removed = store.remove(&a.access_key).await;
            client.close().await.ok();
            removed?;
            println!("removed user {}", a.access_key);
        }
    }
    Ok(())
}
