//! The flags that say where an encrypted volume's key-encryption key is, shared by every
//! command that reads or writes data (mount, gateway, webdav, sync, gc, fsck, config).
//! An RSA-wrapped volume needs only its passphrase, from `JFS_RSA_PASSPHRASE` (or
//! `STRATA_RSA_PASSPHRASE`), as JuiceFS takes it.

use std::path::PathBuf;

use clap::Args;
use strata_client::{KekSource, KeyOptions};

#[derive(Debug, Clone, Default, Args)]
pub struct KeyArgs {
    /// Encrypted volumes: a file holding the key-encryption key (32 bytes, 64 hex digits
    /// or base64) [default: the file given at format time]
    #[arg(
        long,
        env = "STRATA_ENCRYPT_KEY_FILE",
        value_name = "FILE",
        help_heading = "Encryption"
    )]
    pub encrypt_key_file: Option<PathBuf>,
    /// Encrypted volumes: an environment variable holding the key-encryption key
    #[arg(long, value_name = "VAR", help_heading = "Encryption")]
    pub encrypt_key_env: Option<String>,
    /// Encrypted volumes: a command printing the key-encryption key (a KMS's CLI, run
    /// with `sh -c`)
    #[arg(
        long,
        env = "STRATA_ENCRYPT_KEY_CMD",
        value_name = "COMMAND",
        help_heading = "Encryption"
    )]
    pub encrypt_key_cmd: Option<String>,
}

impl KeyArgs {
    /// The source given, if any (a file before a variable before a command).
    pub fn source(&self) -> Option<KekSource> {
        if let Some(f) = &self.encrypt_key_file {
            return Some(KekSource::File(f.clone()));
        }
        if let Some(v) = &self.encrypt_key_env {
            return Some(KekSource::Env(v.clone()));
        }
        self.encrypt_key_cmd.clone().map(KekSource::Command)
    }

    pub fn options(&self) -> KeyOptions {
        KeyOptions {
            kek: self.source(),
            rsa_passphrase: None,
        }
    }
}
