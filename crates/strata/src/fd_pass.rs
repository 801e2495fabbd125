//! Messages with a file descriptor over a Unix stream socket (`SCM_RIGHTS`): how a mount
//! passes its `/dev/fuse` connection to the process that takes it over, and to its
//! supervisor. A message is a 4-byte big-endian length, then that many bytes of JSON; a
//! descriptor rides on the length.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};

/// Largest message accepted (a mount with a million open handles is about 100 MiB).
const MAX_MESSAGE: u32 = 256 << 20;

/// Send `body` with `fd` attached (if any).
pub fn send(
    stream: &mut UnixStream,
    body: &[u8],
    fd: Option<BorrowedFd<'_>>,
) -> std::io::Result<()> {
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n <= MAX_MESSAGE)
        .ok_or_else(|| std::io::Error::other("message too large"))?;
    let header = len.to_be_bytes();
    let raw: Vec<RawFd> = fd.iter().map(|f| f.as_raw_fd()).collect();
    let rights = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &rights };
    let iov = [std::io::IoSlice::new(&header)];
    let sent = loop {
        match sendmsg::<()>(stream.as_raw_fd(), &iov, cmsgs, MsgFlags::empty(), None) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other?,
        }
    };
    stream.write_all(&header[sent..])?;
    stream.write_all(body)?;
    stream.flush()
}

/// Receive one message and the descriptor that came with it. `Ok(None)` at end of stream
/// before a message began.
#[allow(unsafe_code)]
pub fn receive(stream: &mut UnixStream) -> std::io::Result<Option<(Vec<u8>, Option<OwnedFd>)>> {
    let mut header = [0u8; 4];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let (got, fd) = loop {
        let mut iov = [std::io::IoSliceMut::new(&mut header)];
        match recvmsg::<()>(
            stream.as_fd().as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(msg) => {
                let mut fd = None;
                for cmsg in msg.cmsgs()? {
                    if let ControlMessageOwned::ScmRights(fds) = cmsg {
                        for raw in fds {
                            // SAFETY: the kernel just installed `raw` in this process for
                            // us; nothing else owns it.
                            let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                            if fd.is_none() {
                                fd = Some(owned);
                            }
                        }
                    }
                }
                break (msg.bytes, fd);
            }
        }
    };
    if got == 0 {
        return Ok(None);
    }
    stream.read_exact(&mut header[got..])?;
    let len = u32::from_be_bytes(header);
    if len > MAX_MESSAGE {
        return Err(std::io::Error::other(format!("message of {len} bytes")));
    }
    let mut body = vec![0u8; usize::try_from(len).map_err(std::io::Error::other)?];
    stream.read_exact(&mut body)?;
    Ok(Some((body, fd)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_and_its_descriptor_arrive_together() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut &file, b"passed").unwrap();
        send(&mut a, b"{\"x\":1}", Some(file.as_fd())).unwrap();
        send(&mut a, b"second", None).unwrap();
        let (body, fd) = receive(&mut b).unwrap().unwrap();
        assert_eq!(body, b"{\"x\":1}");
        let mut passed = std::fs::File::from(fd.unwrap());
        use std::io::Seek;
        passed.seek(std::io::SeekFrom::Start(0)).unwrap();
        let mut text = String::new();
        passed.read_to_string(&mut text).unwrap();
        assert_eq!(text, "passed", "the same open file");
        let (body, fd) = receive(&mut b).unwrap().unwrap();
        assert_eq!((body.as_slice(), fd.is_none()), (&b"second"[..], true));
        drop(a);
        assert!(receive(&mut b).unwrap().is_none(), "end of stream");
    }
}
