//! The PostgreSQL change feed: a commit announces the keys it wrote with
//! `pg_notify('strata_{prefix}', …)` inside its transaction, so the announcement is
//! delivered if and only if the commit is, in commit order. Each client listens on one
//! connection of its own to that channel and to its beat channel `sb_{origin}`; a beat is
//! a notification too, so it arrives after every change committed before it was sent.
//! Payloads are text (at most 8,000 bytes): the announcement in hex.

use async_trait::async_trait;
use futures::StreamExt;
use strata_meta::kv::{Change, ChangeFeed, KvError, decode_change, within};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, NoTls, Notification};

use crate::{CONNECT_TIMEOUT, PostgresEngine, pg_error, timed};

/// Largest announcement sent as keys (hex doubles it; the limit is 8,000 bytes).
pub(crate) const MAX_NOTICE: usize = 3_900;

/// One listening connection and the notifications it received.
pub(crate) struct PostgresFeed {
    /// Keeps the connection open (dropping the client closes it).
    _client: Client,
    received: mpsc::UnboundedReceiver<Notification>,
    changes: String,
    origin: u64,
}

impl PostgresEngine {
    /// The channel commits are announced on: the volume's table name.
    pub(crate) fn changes_channel(&self) -> String {
        self.pool.table().to_string()
    }

    /// The channel this client's beats come back on.
    pub(crate) fn beat_channel(&self) -> String {
        format!("sb_{:016x}", self.origin)
    }

    pub(crate) async fn open_feed(&self) -> Result<PostgresFeed, KvError> {
        let connecting = async { self.pool.config().connect(NoTls).await.map_err(pg_error) };
        let (client, mut connection) = within(CONNECT_TIMEOUT, "PostgreSQL", connecting).await?;
        let (tx, received) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(n)) => {
                        if tx.send(n).is_err() {
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!("PostgreSQL change feed connection ended: {e}");
                        break;
                    }
                }
            }
        });
        let listen = format!(
            "LISTEN \"{}\"; LISTEN \"{}\"",
            self.changes_channel(),
            self.beat_channel()
        );
        timed(client.batch_execute(&listen)).await?;
        Ok(PostgresFeed {
            _client: client,
            received,
            changes: self.changes_channel(),
            origin: self.origin,
        })
    }

    pub(crate) async fn notify_beat(&self, seq: u64) -> Result<(), KvError> {
        let mut conn = self.pool.get().await?;
        let sent = timed(conn.execute(
            crate::stmt::Sql::Notify,
            &[&self.beat_channel(), &seq.to_string()],
        ))
        .await;
        if matches!(sent, Err(KvError::Unavailable(_))) {
            conn.broken = true;
        }
        sent.map(|_| ())
    }
}

/// The payload of a commit's announcement.
pub(crate) fn notice_text(payload: &[u8]) -> String {
    strata_types::hex::encode(payload)
}

#[async_trait]
impl ChangeFeed for PostgresFeed {
    async fn next(&mut self) -> Result<Change, KvError> {
        let Some(n) = self.received.recv().await else {
            return Err(KvError::Unavailable(
                "PostgreSQL: change feed disconnected".into(),
            ));
        };
        if n.channel() == self.changes {
            let payload = strata_types::hex::decode(n.payload())
                .ok_or_else(|| KvError::Engine("PostgreSQL: malformed announcement".into()))?;
            return decode_change(&payload);
        }
        let seq = n
            .payload()
            .parse()
            .map_err(|_| KvError::Engine("PostgreSQL: malformed beat".into()))?;
        Ok(Change::Beat {
            origin: self.origin,
            seq,
            barrier: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_are_hex_both_ways() {
        let text = notice_text(&[0, 1, 0xab, 0xff]);
        assert_eq!(text, "0001abff");
        assert_eq!(
            strata_types::hex::decode(&text),
            Some(vec![0, 1, 0xab, 0xff])
        );
        assert_eq!(strata_types::hex::decode("abc"), None);
        assert_eq!(strata_types::hex::decode("zz"), None);
    }
}
