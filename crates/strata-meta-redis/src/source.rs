//! Where the engine's connections come from: the one Redis server a URL names, or the
//! current master of a Sentinel-monitored group — `redis://[:PASSWORD@]MASTER,HOST:PORT,
//! HOST:PORT/DB` — which is asked again whenever a connection fails, so a failover is
//! followed.

use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{Client, RedisConnectionInfo};
use strata_meta::kv::KvError;
use strata_types::redact_url;

use crate::redis_error;

/// Port of a Sentinel named without one.
const SENTINEL_PORT: u16 = 26379;

/// The Sentinel form of a URL, taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SentinelSpec {
    pub master: String,
    /// `host:port` of each Sentinel.
    pub nodes: Vec<String>,
    pub db: i64,
    pub user: Option<String>,
    pub password: Option<String>,
}

/// `Some` when `server` (a URL without its query) is the Sentinel form: the host part
/// lists a master name and Sentinel addresses, separated by commas.
pub(crate) fn sentinel_spec(server: &str) -> Result<Option<SentinelSpec>, KvError> {
    let Some(rest) = server.strip_prefix("redis://") else {
        return Ok(None);
    };
    let (authority, db) = rest.split_once('/').unwrap_or((rest, "0"));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if !hosts.contains(',') {
        return Ok(None);
    }
    let mut parts = hosts.split(',').filter(|p| !p.is_empty());
    let master = parts.next().unwrap_or_default().to_string();
    let nodes: Vec<String> = parts
        .map(|n| {
            if n.contains(':') {
                n.to_string()
            } else {
                format!("{n}:{SENTINEL_PORT}")
            }
        })
        .collect();
    if master.is_empty() || nodes.is_empty() {
        return Err(KvError::Engine(format!(
            "bad Sentinel URL {}: expected redis://MASTER,HOST:PORT,.../DB",
            redact_url(server)
        )));
    }
    let db = db.trim_matches('/').parse::<i64>().map_err(|_| {
        KvError::Engine(format!(
            "bad Redis database number in {}",
            redact_url(server)
        ))
    })?;
    let (user, password) = match userinfo.map(|u| u.split_once(':').unwrap_or((u, ""))) {
        Some((user, pass)) => (
            Some(user.to_string()).filter(|u| !u.is_empty()),
            Some(pass.to_string()).filter(|p| !p.is_empty()),
        ),
        None => (None, None),
    };
    Ok(Some(SentinelSpec {
        master,
        nodes,
        db,
        user,
        password,
    }))
}

/// How the engine reaches its Redis server.
pub(crate) enum Source {
    Direct(Client),
    Sentinel {
        sentinel: tokio::sync::Mutex<Sentinel>,
        spec: SentinelSpec,
        node: SentinelNodeConnectionInfo,
    },
}

impl Source {
    pub fn new(server: &str) -> Result<Source, KvError> {
        let Some(spec) = sentinel_spec(server)? else {
            let client =
                Client::open(server).map_err(|e| KvError::Engine(format!("bad Redis URL: {e}")))?;
            return Ok(Source::Direct(client));
        };
        let urls: Vec<String> = spec.nodes.iter().map(|n| format!("redis://{n}")).collect();
        let sentinel = Sentinel::build(urls)
            .map_err(|e| KvError::Engine(format!("bad Sentinel addresses: {e}")))?;
        let mut info = RedisConnectionInfo::default().set_db(spec.db);
        if let Some(user) = &spec.user {
            info = info.set_username(user);
        }
        if let Some(password) = &spec.password {
            info = info.set_password(password);
        }
        let node = SentinelNodeConnectionInfo::default().set_redis_connection_info(info);
        Ok(Source::Sentinel {
            sentinel: tokio::sync::Mutex::new(sentinel),
            spec,
            node,
        })
    }

    /// Whether a failed connection should be dropped and the server looked up again.
    pub fn follows_failover(&self) -> bool {
        matches!(self, Source::Sentinel { .. })
    }

    /// A client of the server to use now.
    pub async fn client(&self) -> Result<Client, KvError> {
        match self {
            Source::Direct(client) => Ok(client.clone()),
            Source::Sentinel {
                sentinel,
                spec,
                node,
            } => sentinel
                .lock()
                .await
                .async_master_for(&spec.master, Some(node))
                .await
                .map_err(redis_error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_urls_name_master_nodes_db_and_password() {
        let s = sentinel_spec("redis://:pw@mymaster,10.0.0.1:26379,10.0.0.2/3")
            .unwrap()
            .unwrap();
        assert_eq!(s.master, "mymaster");
        assert_eq!(s.nodes, vec!["10.0.0.1:26379", "10.0.0.2:26379"]);
        assert_eq!(s.db, 3);
        assert_eq!(s.password.as_deref(), Some("pw"));
        assert_eq!(s.user, None);
        assert_eq!(sentinel_spec("redis://127.0.0.1:6379/0").unwrap(), None);
        assert!(sentinel_spec("redis://m,h:1/x").is_err());
        assert!(sentinel_spec("redis://,h:1/0").is_err());
    }
}
