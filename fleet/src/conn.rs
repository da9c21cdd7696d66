//! The fleet url and one bounded Redis connection.
//!
//! Accepted urls (the redis crate's own syntax, plus one parameter of ours):
//! `redis://[user:password@]127.0.0.1:6379[/db]`, `rediss://…` (TLS; refused without the
//! default `tls` feature), `unix:///path/redis.sock[?db=N&user=U&pass=P]`; any of them may end
//! with `?clock=caller` (or `&clock=caller`): the test hook that makes the store use the caller's
//! milliseconds instead of Redis `TIME`.
//!
//! TLS (`rediss://`) is rustls with the ring provider. The server's chain must lead to one of the
//! system's root certificates, read by rustls-native-certs on every connect: the platform's store
//! (`/etc/ssl/certs` on Debian), or only `SSL_CERT_FILE` / `SSL_CERT_DIR` when either is set.
//! The certificate must be valid now and name the url's host (a DNS name, or an IP address in its
//! subjectAltName). There is no way to turn the check off: the redis crate's `#insecure` is
//! refused.

use std::time::Duration;

use holdoff::ConfigError;
use redis::IntoConnectionInfo;

use crate::FleetError;

/// Where the store lives and how it reads its clock.
#[derive(Clone)]
pub(crate) struct Target {
    pub info: redis::ConnectionInfo,
    /// `?clock=caller`: the script's "now" is the caller's ms (manual-clock tests).
    pub caller_clock: bool,
    /// The url with its password replaced by `***`, for messages.
    pub shown: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

fn url_error(rule: impl Into<String>) -> FleetError {
    FleetError::Config(ConfigError {
        field: "fleet.url".into(),
        rule: rule.into(),
    })
}

/// Parses a `redis://`, `rediss://` or `unix://` url.
///
/// # Errors
/// [`FleetError::Config`] naming `fleet.url` for a malformed url or an unknown `clock` value;
/// [`FleetError::TlsNotBuilt`] for `rediss://` without the `tls` feature.
pub(crate) fn parse(url: &str) -> Result<Target, FleetError> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut caller_clock = false;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("clock", "caller")) => caller_clock = true,
            Some(("clock", "store")) => caller_clock = false,
            Some(("clock", other)) => {
                return Err(url_error(format!("clock must be caller or store, got {other:?}")))
            }
            _ => kept.push(pair),
        }
    }
    if base.starts_with("rediss://") && !cfg!(feature = "tls") {
        return Err(FleetError::TlsNotBuilt);
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let info = rest
        .as_str()
        .into_connection_info()
        .map_err(|e| url_error(e.to_string()))?;
    if let redis::ConnectionAddr::TcpTls { insecure: true, .. } = info.addr {
        return Err(url_error(
            "#insecure (TLS without checking the certificate) is not supported",
        ));
    }
    let shown = match &info.redis.password {
        Some(p) if !p.is_empty() => url.replace(p.as_str(), "***"),
        _ => url.to_string(),
    };
    Ok(Target {
        info,
        caller_clock,
        shown,
    })
}

/// Opens one connection: connect, authentication and database selection bounded by `timeout`,
/// and every later read and write bounded by `timeout` too.
///
/// For `rediss://` that budget includes reading the system's root certificates and the TLS
/// handshake.
pub(crate) fn connect(target: &Target, timeout: Duration) -> redis::RedisResult<redis::Connection> {
    #[cfg(feature = "tls")]
    if let redis::ConnectionAddr::TcpTls { .. } = target.info.addr {
        ensure_crypto_provider();
    }
    let client = redis::Client::open(target.info.clone())?;
    let conn = client.get_connection_with_timeout(timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    Ok(conn)
}

/// rustls builds each connection's config with the process's default crypto provider. When the
/// application chose none, install ring, as rustls itself does when ring is the only provider
/// compiled in; this also covers a build where another crate compiled in aws-lc-rs as well, in
/// which rustls would panic on the sync thread rather than pick one. An application that installs
/// its own provider first keeps it.
#[cfg(feature = "tls")]
fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err: another thread installed one in between; that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_parameter_is_ours_and_the_rest_goes_to_redis() {
        let t = parse("unix:///tmp/r.sock?db=3&clock=caller&pass=s3cret").unwrap();
        assert!(t.caller_clock);
        assert_eq!(t.info.redis.db, 3);
        assert_eq!(t.info.redis.password.as_deref(), Some("s3cret"));
        assert!(!t.shown.contains("s3cret"), "{}", t.shown);
        let t = parse("redis://u:pw@127.0.0.1:7000/2").unwrap();
        assert!(!t.caller_clock);
        assert_eq!(t.info.redis.db, 2);
        assert_eq!(t.info.redis.username.as_deref(), Some("u"));
        match parse("redis://127.0.0.1/?clock=sundial") {
            Err(FleetError::Config(e)) => assert_eq!(e.field, "fleet.url"),
            other => panic!("{other:?}"),
        }
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn rediss_without_the_tls_feature_is_a_typed_error() {
        assert!(matches!(
            parse("rediss://127.0.0.1:6380/"),
            Err(FleetError::TlsNotBuilt)
        ));
    }

    #[cfg(feature = "tls")]
    #[test]
    fn rediss_with_the_tls_feature_is_accepted_and_always_verified() {
        let t = parse("rediss://:pw@127.0.0.1:6380/1").unwrap();
        assert_eq!(t.info.redis.db, 1);
        assert_eq!(t.info.redis.password.as_deref(), Some("pw"));
        assert!(!t.shown.contains("pw"), "{}", t.shown);
        assert!(matches!(
            t.info.addr,
            redis::ConnectionAddr::TcpTls { insecure: false, ref host, port: 6380, .. } if host == "127.0.0.1"
        ));
        match parse("rediss://127.0.0.1:6380/#insecure") {
            Err(FleetError::Config(e)) => {
                assert_eq!(e.field, "fleet.url");
                assert!(e.rule.contains("#insecure"), "{}", e.rule);
            }
            other => panic!("{other:?}"),
        }
    }
}
