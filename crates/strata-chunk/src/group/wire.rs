//! The cache group's wire protocol (FORMAT.md, "cache group protocol v1"): one request at
//! a time on a TCP connection, each signed with the volume's group secret
//! (HMAC-SHA256 over every field), answered first by a one-byte acknowledgement (sent
//! before any object-store fetch, so a requester learns at once whether the peer is
//! alive and accepts it), then by a reply whose payload travels with its CRC-32C and whose
//! header is signed too (binding it to the request's nonce).

use bytes::{Bytes, BytesMut};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use strata_types::Secret;

/// First bytes of every request.
pub const MAGIC: [u8; 4] = *b"SGC1";
/// Longest key accepted.
pub const MAX_KEY: usize = 1024;
/// Largest payload accepted (a block is at most 16 MiB).
pub const MAX_PAYLOAD: usize = 16 << 20;
/// How far a request's clock may be from the server's, in seconds.
pub const CLOCK_SKEW: u64 = 300;
const MAC_LEN: usize = 32;

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// Bytes `[from, to)` of a block, from the owner's cache or fetched once by it.
    Get = 1,
    /// Fetch the range into the owner's cache; no payload back.
    Warm = 2,
    /// How many bytes of the block the owner's cache holds (payload: 8 bytes, BE).
    Cached = 3,
    /// Drop the block from the owner's cache.
    Evict = 4,
    /// Bytes `[from, to)` of a block the member staged (`--writeback`) and has not
    /// uploaded yet; `REPLY_FAILED` at once when it holds no staged copy. Asked of the
    /// writer, whoever owns the block.
    Staged = 5,
}

impl Op {
    fn from_u8(b: u8) -> Option<Op> {
        Some(match b {
            1 => Op::Get,
            2 => Op::Warm,
            3 => Op::Cached,
            4 => Op::Evict,
            5 => Op::Staged,
            _ => return None,
        })
    }
}

/// Acknowledgement byte: accepted, or why not.
pub const ACK_OK: u8 = 0;
pub const ACK_DENIED: u8 = 1;
pub const ACK_BAD: u8 = 2;

/// Reply status.
pub const REPLY_OK: u8 = 0;
pub const REPLY_FAILED: u8 = 1;

/// A request for part of one block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub op: Op,
    pub key: String,
    pub block_len: u32,
    pub from: u32,
    pub to: u32,
    /// Unix seconds when sent.
    pub time: u64,
    pub nonce: [u8; 16],
}

/// A reply: a status and a payload (checked against its CRC-32C on arrival).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: u8,
    pub payload: Bytes,
}

/// What can go wrong on the wire.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("the peer refused the request (group secret differs)")]
    Denied,
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("signature does not match")]
    BadSignature,
    #[error("payload damaged in transit (CRC-32C mismatch)")]
    BadChecksum,
}

fn mac(secret: &Secret) -> Result<Hmac<Sha256>, WireError> {
    Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes())
        .map_err(|e| WireError::Malformed(format!("group secret: {e}")))
}

impl Request {
    fn fields(&self) -> BytesMut {
        let mut b = BytesMut::with_capacity(48 + self.key.len());
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&[self.op as u8]);
        let key_len = u16::try_from(self.key.len()).unwrap_or(u16::MAX);
        b.extend_from_slice(&key_len.to_be_bytes());
        b.extend_from_slice(&self.block_len.to_be_bytes());
        b.extend_from_slice(&self.from.to_be_bytes());
        b.extend_from_slice(&self.to.to_be_bytes());
        b.extend_from_slice(&self.time.to_be_bytes());
        b.extend_from_slice(&self.nonce);
        b.extend_from_slice(self.key.as_bytes());
        b
    }

    /// Write the request, signed.
    pub async fn send<W: AsyncWrite + Unpin>(
        &self,
        w: &mut W,
        secret: &Secret,
    ) -> Result<(), WireError> {
        if self.key.len() > MAX_KEY {
            return Err(WireError::Malformed("key too long".into()));
        }
        let mut b = self.fields();
        let mut m = mac(secret)?;
        m.update(&b);
        b.extend_from_slice(&m.finalize().into_bytes());
        w.write_all(&b).await?;
        w.flush().await?;
        Ok(())
    }

    /// Read a request and check its signature and clock (`now`, Unix seconds). `Ok(None)`
    /// when the connection closed cleanly before a request.
    pub async fn receive<R: AsyncRead + Unpin>(
        r: &mut R,
        secret: &Secret,
        now: u64,
    ) -> Result<Option<Request>, WireError> {
        let mut head = [0u8; 43];
        match r.read_exact(&mut head[..1]).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        r.read_exact(&mut head[1..]).await?;
        if head[..4] != MAGIC {
            return Err(WireError::Malformed("not a cache group request".into()));
        }
        let op = Op::from_u8(head[4]).ok_or_else(|| WireError::Malformed("unknown op".into()))?;
        let be32 =
            |at: usize| u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        let key_len = usize::from(u16::from_be_bytes([head[5], head[6]]));
        if key_len > MAX_KEY {
            return Err(WireError::Malformed("key too long".into()));
        }
        let mut time = [0u8; 8];
        time.copy_from_slice(&head[19..27]);
        let mut nonce = [0u8; 16];
        nonce.copy_from_slice(&head[27..43]);
        let mut rest = vec![0u8; key_len + MAC_LEN];
        r.read_exact(&mut rest).await?;
        let key = String::from_utf8(rest[..key_len].to_vec())
            .map_err(|_| WireError::Malformed("key is not UTF-8".into()))?;
        let req = Request {
            op,
            key,
            block_len: be32(7),
            from: be32(11),
            to: be32(15),
            time: u64::from_be_bytes(time),
            nonce,
        };
        let mut m = mac(secret)?;
        m.update(&req.fields());
        m.verify_slice(&rest[key_len..])
            .map_err(|_| WireError::BadSignature)?;
        if req.time.abs_diff(now) > CLOCK_SKEW {
            return Err(WireError::BadSignature);
        }
        if req.from > req.to || req.to > req.block_len {
            return Err(WireError::Malformed("range outside the block".into()));
        }
        Ok(Some(req))
    }
}

fn reply_mac(
    secret: &Secret,
    nonce: &[u8; 16],
    status: u8,
    len: u32,
    crc: u32,
) -> Result<Hmac<Sha256>, WireError> {
    let mut m = mac(secret)?;
    m.update(b"reply");
    m.update(nonce);
    m.update(&[status]);
    m.update(&len.to_be_bytes());
    m.update(&crc.to_be_bytes());
    Ok(m)
}

impl Reply {
    /// Write the reply to the request with `nonce`.
    pub async fn send<W: AsyncWrite + Unpin>(
        &self,
        w: &mut W,
        secret: &Secret,
        nonce: &[u8; 16],
    ) -> Result<(), WireError> {
        let len = u32::try_from(self.payload.len())
            .map_err(|_| WireError::Malformed("payload too large".into()))?;
        let crc = crc32c::crc32c(&self.payload);
        let sig = reply_mac(secret, nonce, self.status, len, crc)?
            .finalize()
            .into_bytes();
        let mut head = Vec::with_capacity(9 + MAC_LEN);
        head.push(self.status);
        head.extend_from_slice(&len.to_be_bytes());
        head.extend_from_slice(&crc.to_be_bytes());
        head.extend_from_slice(&sig);
        w.write_all(&head).await?;
        w.write_all(&self.payload).await?;
        w.flush().await?;
        Ok(())
    }

    /// Read the reply to the request with `nonce`, checking its signature and checksum.
    pub async fn receive<R: AsyncRead + Unpin>(
        r: &mut R,
        secret: &Secret,
        nonce: &[u8; 16],
    ) -> Result<Reply, WireError> {
        let mut head = [0u8; 9 + MAC_LEN];
        r.read_exact(&mut head).await?;
        let status = head[0];
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        let crc = u32::from_be_bytes([head[5], head[6], head[7], head[8]]);
        reply_mac(secret, nonce, status, len, crc)?
            .verify_slice(&head[9..])
            .map_err(|_| WireError::BadSignature)?;
        let len = usize::try_from(len).map_err(|_| WireError::Malformed("length".into()))?;
        if len > MAX_PAYLOAD {
            return Err(WireError::Malformed("payload too large".into()));
        }
        let mut payload = BytesMut::zeroed(len);
        r.read_exact(&mut payload).await?;
        if crc32c::crc32c(&payload) != crc {
            return Err(WireError::BadChecksum);
        }
        Ok(Reply {
            status,
            payload: payload.freeze(),
        })
    }
}

/// Write an acknowledgement byte.
pub async fn send_ack<W: AsyncWrite + Unpin>(w: &mut W, ack: u8) -> Result<(), WireError> {
    w.write_all(&[ack]).await?;
    w.flush().await?;
    Ok(())
}

/// Read an acknowledgement: `Ok(())` if accepted.
pub async fn receive_ack<R: AsyncRead + Unpin>(r: &mut R) -> Result<(), WireError> {
    match r.read_u8().await? {
        ACK_OK => Ok(()),
        ACK_DENIED => Err(WireError::Denied),
        _ => Err(WireError::Malformed("request rejected as malformed".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            op: Op::Get,
            key: "chunks/0/0/7_0_100".into(),
            block_len: 100,
            from: 10,
            to: 60,
            time: 1_000_000,
            nonce: [7; 16],
        }
    }

    #[tokio::test]
    async fn a_signed_request_and_reply_round_trip() {
        let secret = Secret::new("s3cret");
        let mut buf = Vec::new();
        request().send(&mut buf, &secret).await.unwrap();
        let got = Request::receive(&mut buf.as_slice(), &secret, 1_000_100)
            .await
            .unwrap();
        assert_eq!(got, Some(request()));
        assert!(
            Request::receive(&mut &b""[..], &secret, 0)
                .await
                .unwrap()
                .is_none()
        );

        let reply = Reply {
            status: REPLY_OK,
            payload: Bytes::from_static(b"block bytes"),
        };
        let mut out = Vec::new();
        reply.send(&mut out, &secret, &[7; 16]).await.unwrap();
        assert_eq!(
            Reply::receive(&mut out.as_slice(), &secret, &[7; 16])
                .await
                .unwrap(),
            reply
        );
    }

    #[tokio::test]
    async fn wrong_secrets_old_clocks_and_damage_are_refused() {
        let secret = Secret::new("s3cret");
        let mut buf = Vec::new();
        request().send(&mut buf, &secret).await.unwrap();
        let other = Secret::new("other");
        assert!(matches!(
            Request::receive(&mut buf.as_slice(), &other, 1_000_000).await,
            Err(WireError::BadSignature)
        ));
        assert!(matches!(
            Request::receive(&mut buf.as_slice(), &secret, 1_000_000 + CLOCK_SKEW + 1).await,
            Err(WireError::BadSignature)
        ));
        let mut tampered = buf.clone();
        tampered[12] ^= 1; // the range
        assert!(
            Request::receive(&mut tampered.as_slice(), &secret, 1_000_000)
                .await
                .is_err()
        );

        let reply = Reply {
            status: REPLY_OK,
            payload: Bytes::from_static(b"block bytes"),
        };
        let mut out = Vec::new();
        reply.send(&mut out, &secret, &[7; 16]).await.unwrap();
        let last = out.len() - 1;
        out[last] ^= 0x10;
        assert!(matches!(
            Reply::receive(&mut out.as_slice(), &secret, &[7; 16]).await,
            Err(WireError::BadChecksum)
        ));
        let mut out = Vec::new();
        reply.send(&mut out, &secret, &[7; 16]).await.unwrap();
        assert!(matches!(
            Reply::receive(&mut out.as_slice(), &secret, &[8; 16]).await,
            Err(WireError::BadSignature)
        ));
    }
}
