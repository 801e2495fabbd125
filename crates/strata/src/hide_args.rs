//! Keep secrets given on the command line out of `ps`: `/proc/PID/cmdline` is readable by
//! every user. At start, if the arguments hold a metadata engine password
//! (`redis://:PASSWORD@...`), `--secret-key` or `--session-token`, the command runs itself
//! again (same pid, `exec`) with the password taken out of the URL and handed over in
//! `META_PASSWORD`, and the flags' values replaced by `****` and handed over in
//! `STRATA_HIDDEN_*` variables (readable only by the process's owner). For the few
//! milliseconds before that `exec` the secret is visible, as it is for JuiceFS, which
//! overwrites its arguments instead.

use std::ffi::OsString;

use strata_types::MetaUrl;

/// Set in the environment of the command run again, so it does not run itself once more.
const HIDDEN_MARK: &str = "STRATA_ARGS_HIDDEN";
/// What a hidden flag value shows in the arguments.
pub const PLACEHOLDER: &str = "****";
/// Flags whose values are secrets, and the variables that carry them across the `exec`.
const SECRET_FLAGS: [(&str, &str); 2] = [
    ("--secret-key", "STRATA_HIDDEN_SECRET_KEY"),
    ("--session-token", "STRATA_HIDDEN_SESSION_TOKEN"),
];
/// Schemes of metadata engine URLs (bucket URLs are left alone).
const ENGINE_SCHEMES: [&str; 6] = [
    "redis://",
    "rediss://",
    "postgres://",
    "postgresql://",
    "mysql://",
    "etcd://",
];

/// Schemes of `strata sync` addresses whose secrets (`AK:SK[:TOKEN]@`: all after `AK:`)
/// are hidden.
const ADDRESS_SCHEMES: [&str; 4] = ["s3://", "minio://", "wasb://", "azure://"];
/// The variables carrying the credentials of the first, second, ... address.
const ADDRESS_VAR: &str = "STRATA_HIDDEN_ADDRESS_";

/// Environment variables to set: (name, value).
type Carried = Vec<(String, String)>;

/// The arguments with their secrets taken out, and the variables that carry them; `None`
/// when there is nothing to hide.
fn hidden(args: &[OsString]) -> Option<(Vec<OsString>, Carried)> {
    let mut out = Vec::with_capacity(args.len());
    let mut env = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let Some(text) = arg.to_str() else {
            out.push(arg.clone());
            continue;
        };
        if let Some((flag, var)) = SECRET_FLAGS.iter().find(|(f, _)| *f == text) {
            match iter.next().and_then(|v| v.to_str()) {
                Some(value) if value != PLACEHOLDER => {
                    env.push((var.to_string(), value.to_string()));
                    out.extend([OsString::from(*flag), OsString::from(PLACEHOLDER)]);
                }
                other => {
                    out.push(arg.clone());
                    out.extend(other.map(OsString::from));
                }
            }
            continue;
        }
        let assigned = SECRET_FLAGS.iter().find_map(|(flag, var)| {
            let value = text.strip_prefix(flag)?.strip_prefix('=')?;
            (value != PLACEHOLDER).then_some((flag, var, value))
        });
        if let Some((flag, var, value)) = assigned {
            env.push((var.to_string(), value.to_string()));
            out.push(OsString::from(format!("{flag}={PLACEHOLDER}")));
            continue;
        }
        if ADDRESS_SCHEMES.iter().any(|s| text.starts_with(s))
            && let (bare, Some(secret)) = MetaUrl::new(text).without_password()
            && !secret.expose().starts_with(PLACEHOLDER)
        {
            let n = env
                .iter()
                .filter(|(k, _)| k.starts_with(ADDRESS_VAR))
                .count();
            env.push((format!("{ADDRESS_VAR}{n}"), secret.expose().to_string()));
            let marked = bare.with_password(&format!("{PLACEHOLDER}{n}"));
            out.push(OsString::from(marked.expose()));
            continue;
        }
        let url = MetaUrl::new(text);
        let is_engine = ENGINE_SCHEMES.iter().any(|s| text.starts_with(s));
        let has_meta_password = env.iter().any(|(k, _)| k == "META_PASSWORD");
        match url.without_password() {
            (bare, Some(password)) if is_engine && !has_meta_password => {
                env.push(("META_PASSWORD".into(), password.expose().to_string()));
                out.push(OsString::from(bare.expose()));
            }
            _ => out.push(arg.clone()),
        }
    }
    (!env.is_empty()).then_some((out, env))
}

/// The secret of a sync address (what follows `AK:`) as given: the one carried across the
/// `exec` when the address shows the placeholder instead.
pub fn revealed_address_secret(secret: &str) -> String {
    secret
        .strip_prefix(PLACEHOLDER)
        .and_then(|n| std::env::var(format!("{ADDRESS_VAR}{n}")).ok())
        .unwrap_or_else(|| secret.to_string())
}

/// A sync address as given, its secret carried across the `exec` put back in place of
/// the placeholder (a queued job stores the address for workers elsewhere).
pub fn revealed_address(addr: &str) -> String {
    match MetaUrl::new(addr).without_password() {
        (bare, Some(secret)) if secret.expose().starts_with(PLACEHOLDER) => bare
            .with_password(&revealed_address_secret(secret.expose()))
            .expose()
            .to_string(),
        _ => addr.to_string(),
    }
}

/// Run this command again without its secrets in the arguments, if it has any. Returns
/// only when there is nothing to hide, or the `exec` failed (then it goes on as is).
pub fn hide_secrets_from_ps() {
    if std::env::var_os(HIDDEN_MARK).is_some() {
        return;
    }
    let args: Vec<OsString> = std::env::args_os().collect();
    let Some((out, env)) = hidden(&args) else {
        return;
    };
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new("/proc/self/exe");
    if let Some(first) = out.first() {
        cmd.arg0(first);
    }
    cmd.args(out.iter().skip(1)).env(HIDDEN_MARK, "1").envs(env);
    let failed = cmd.exec();
    eprintln!("strata: could not hide secrets from the process list: {failed}");
}

/// The value of a secret flag: as given, or carried across the `exec` when hidden.
pub fn revealed(value: Option<String>, flag: &str) -> Option<String> {
    let var = SECRET_FLAGS.iter().find(|(f, _)| *f == flag)?.1;
    match value {
        Some(v) if v == PLACEHOLDER => std::env::var(var).ok().or(Some(v)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn passwords_and_secret_flags_leave_the_arguments() {
        let (out, env) = hidden(&os(&[
            "strata",
            "format",
            "postgres://u:pw@h:5432/db",
            "vol",
            "--bucket",
            "https://ak:notmine@bucket.example.com",
            "--secret-key",
            "sk",
            "--session-token=tok",
        ]))
        .unwrap();
        assert_eq!(
            out,
            os(&[
                "strata",
                "format",
                "postgres://u@h:5432/db",
                "vol",
                "--bucket",
                "https://ak:notmine@bucket.example.com",
                "--secret-key",
                "****",
                "--session-token=****"
            ]),
            "bucket URLs are not metadata URLs"
        );
        assert_eq!(
            env,
            vec![
                ("META_PASSWORD".to_string(), "pw".to_string()),
                ("STRATA_HIDDEN_SECRET_KEY".to_string(), "sk".to_string()),
                ("STRATA_HIDDEN_SESSION_TOKEN".to_string(), "tok".to_string()),
            ]
        );
        assert!(hidden(&os(&["strata", "mount", "sqlite3:///a.db", "/mnt"])).is_none());
        let (out, env) = hidden(&os(&[
            "strata",
            "sync",
            "s3://ak:sk@bkt.s3.amazonaws.com/p",
            "minio://a:b:tok@h:9000/b",
            "wasb://acct:k/e+y==@box/p",
        ]))
        .unwrap();
        assert_eq!(
            out,
            os(&[
                "strata",
                "sync",
                "s3://ak:****0@bkt.s3.amazonaws.com/p",
                "minio://a:****1@h:9000/b",
                "wasb://acct:****2@box/p"
            ])
        );
        assert_eq!(
            env,
            vec![
                ("STRATA_HIDDEN_ADDRESS_0".to_string(), "sk".to_string()),
                ("STRATA_HIDDEN_ADDRESS_1".to_string(), "b:tok".to_string()),
                ("STRATA_HIDDEN_ADDRESS_2".to_string(), "k/e+y==".to_string()),
            ]
        );
        assert!(hidden(&os(&["strata", "sync", "s3://bkt/p", "/tmp/x"])).is_none());
        assert!(hidden(&os(&["strata", "mount", "redis://h:6379/1", "/mnt"])).is_none());
    }

    #[test]
    fn mysql_passwords_leave_the_arguments_in_juicefs_form_too() {
        for (given, bare) in [
            ("mysql://u:pw@(h:3306)/db", "mysql://u@(h:3306)/db"),
            (
                "mysql://u:pw@unix(/run/m.sock)/db",
                "mysql://u@unix(/run/m.sock)/db",
            ),
        ] {
            let (out, env) = hidden(&os(&["strata", "status", given])).unwrap();
            assert_eq!(out, os(&["strata", "status", bare]));
            assert_eq!(env, vec![("META_PASSWORD".to_string(), "pw".to_string())]);
            assert_eq!(
                MetaUrl::new(bare).with_password("pw").expose(),
                given,
                "the password goes back where it was"
            );
        }
    }
}
