//! `rediss://` against a real TLS `redis-server` (started here on a free 127.0.0.1 port, TLS only,
//! with a password), with certificates made by the `openssl` command line in a temporary
//! directory: a private CA the client trusts through `SSL_CERT_FILE`, another it does not know.
//!
//! No libtest harness (`harness = false`): `main` changes `SSL_CERT_FILE` only while no other
//! thread of this process runs (setting the environment beside threads that read it is a data
//! race), so every check runs here, in order.
//!
//! Checks: the system's roots do not trust the private CA (refused); with `SSL_CERT_FILE` two
//! attached breakers share a trip through the TLS server; a server certificate from an unknown CA,
//! one naming another host, and a wrong password are each refused with a typed error in the sync
//! report, the worker detached and nothing written on that server.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use holdoff::fleet::{FleetConfig, StoreError};
use holdoff::{Breaker, BreakerConfig, Outcome, State, SystemClock};
use holdoff_fleet::testing::server_command;

const PASSWORD: &str = "s3cret-pw";

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A certificate and its key, PEM files in the test's directory.
struct Pem {
    cert: PathBuf,
    key: PathBuf,
}

fn openssl_config(dir: &Path, name: &str, extensions: &str) -> PathBuf {
    let path = dir.join(format!("{name}.cnf"));
    let text = format!("[req]\ndistinguished_name = dn\n[dn]\n[ext]\n{extensions}\n");
    std::fs::write(&path, text).unwrap();
    path
}

/// A self-signed CA (P-256, valid 2 days).
fn ca(dir: &Path, name: &str) -> Pem {
    let config = openssl_config(
        dir,
        name,
        "basicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash",
    );
    let pem = Pem {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    };
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ])
        .args(["-days", "2", "-extensions", "ext", "-subj"])
        .arg(format!("/CN=holdoff test {name}"))
        .arg("-config")
        .arg(&config)
        .arg("-keyout")
        .arg(&pem.key)
        .arg("-out")
        .arg(&pem.cert));
    pem
}

/// A server certificate signed by `ca` for `san` (`IP:127.0.0.1`, `DNS:…`).
fn server_cert(dir: &Path, ca: &Pem, name: &str, san: &str) -> Pem {
    let config = openssl_config(
        dir,
        name,
        &format!(
            "basicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\nextendedKeyUsage = serverAuth\nsubjectAltName = {san}"
        ),
    );
    let pem = Pem {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    };
    let csr = dir.join(format!("{name}.csr"));
    run(Command::new("openssl")
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ])
        .args(["-subj", "/CN=holdoff test server", "-config"])
        .arg(&config)
        .arg("-keyout")
        .arg(&pem.key)
        .arg("-out")
        .arg(&csr));
    run(Command::new("openssl")
        .args([
            "x509",
            "-req",
            "-days",
            "2",
            "-set_serial",
            "2",
            "-extensions",
            "ext",
        ])
        .arg("-extfile")
        .arg(&config)
        .arg("-in")
        .arg(&csr)
        .arg("-CA")
        .arg(&ca.cert)
        .arg("-CAkey")
        .arg(&ca.key)
        .arg("-out")
        .arg(&pem.cert));
    pem
}

/// A `redis-server` with TLS on a free 127.0.0.1 port (no plain TCP port), a password, and a
/// unix socket in `dir` for the test's own plain-text look at the data. Killed on drop.
struct TlsRedis {
    child: Child,
    port: u16,
    control: PathBuf,
}

impl TlsRedis {
    fn start(dir: &Path, name: &str, server: &Pem, ca: &Pem) -> TlsRedis {
        let control = dir.join(format!("{name}.sock"));
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = server_command(dir)
                .args([
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--tls-port",
                    &port.to_string(),
                ])
                .arg("--tls-cert-file")
                .arg(&server.cert)
                .arg("--tls-key-file")
                .arg(&server.key)
                .arg("--tls-ca-cert-file")
                .arg(&ca.cert)
                .args(["--tls-auth-clients", "no", "--requirepass", PASSWORD])
                .arg("--unixsocket")
                .arg(&control)
                .args(["--unixsocketperm", "700"])
                .spawn()
                .expect("redis-server on PATH (scripts/install-deps)");
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(10) {
                if child.try_wait().unwrap().is_some() {
                    break; // the port was taken in between: try another
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                    && command(&control, "PING").is_ok_and(|r| r == "+PONG")
                {
                    return TlsRedis { child, port, control };
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server with TLS did not start");
    }

    fn url(&self, password: &str) -> String {
        format!("rediss://:{password}@127.0.0.1:{}/", self.port)
    }

    fn command(&self, line: &str) -> std::io::Result<String> {
        command(&self.control, line)
    }
}

/// One inline command over a server's plain unix socket after `AUTH`; the reply's lines.
fn command(control: &Path, line: &str) -> std::io::Result<String> {
    let mut s = UnixStream::connect(control)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(format!("AUTH {PASSWORD}\r\n{line}\r\n").as_bytes())?;
    let mut reply = String::new();
    let mut buf = [0u8; 512];
    // "+OK" for AUTH, then the command's reply.
    while reply.lines().count() < 2 || !reply.ends_with("\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        reply.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let mut lines = reply.lines();
    assert_eq!(lines.next(), Some("+OK"), "AUTH: {reply}");
    Ok(lines.collect::<Vec<_>>().join("\n"))
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn breaker() -> Arc<Breaker> {
    Arc::new(Breaker::new(BreakerConfig::default(), SystemClock::shared()).unwrap())
}

/// Generous bounds: a debug build on a shared 2-core machine reads the roots and shakes hands
/// within `timeout`.
fn config(url: &str, key: &str) -> FleetConfig {
    let mut c = FleetConfig::new(url, key);
    c.timeout = Duration::from_secs(2);
    // The smallest the core accepts: refresh (50 ms) + timeout.
    c.fallback_after = Duration::from_millis(2_050);
    c
}

fn wait_for(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Attaches a worker (background threads) to `server` and checks it is refused: it detaches
/// after `fallback_after` and stays detached, each sync report carries
/// `StoreError::Unavailable` naming `reason`, and nothing reached the server's data. Returns how
/// long one refused exchange took.
fn refused(server: &TlsRedis, url: &str, key: &str, reason: &str) -> Duration {
    let b = breaker();
    let fleet = holdoff_fleet::attach(&b, &config(url, key)).unwrap();
    wait_for(Duration::from_secs(10), "detach", || !fleet.is_attached());
    // A trip here stays local: it is never written through the refused connection.
    for _ in 0..5 {
        let p = b.allow().unwrap();
        b.record(p, Outcome::Failure).unwrap();
    }
    // Reports until one that really connected (in between, the background thread's backoff
    // answers "reconnecting in ... ms"); none succeeds.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (message, took) = loop {
        assert!(Instant::now() < deadline, "no connect attempt reported");
        let started = Instant::now();
        let report = fleet.sync_now().unwrap();
        let took = started.elapsed();
        assert!(!report.ok && !report.attached, "{report:?}");
        match report.error {
            Some(StoreError::Unavailable(m)) if m.contains("reconnecting in") => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Some(StoreError::Unavailable(m)) => break (m, took),
            other => panic!("{other:?}"),
        }
    };
    assert!(message.contains(reason), "{reason} not in {message:?}");
    assert!(!message.contains(PASSWORD), "{message}");
    assert!(!fleet.is_attached());
    assert_eq!(b.snapshot().state, State::Open);
    assert_eq!(
        server.command(&format!("EXISTS holdoff:fleet:{key}")).unwrap(),
        ":0"
    );
    fleet.close();
    took
}

fn main() {
    // Single-threaded here: the environment may be changed.
    std::env::remove_var("SSL_CERT_FILE");
    std::env::remove_var("SSL_CERT_DIR");
    let dir = std::env::temp_dir().join(format!("holdoff-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let trusted = ca(&dir, "trusted-ca");
    let unknown = ca(&dir, "unknown-ca");
    let good = server_cert(&dir, &trusted, "good", "IP:127.0.0.1");
    let stranger = server_cert(&dir, &unknown, "stranger", "IP:127.0.0.1");
    let misnamed = server_cert(&dir, &trusted, "misnamed", "DNS:redis.invalid");
    let server = TlsRedis::start(&dir, "good", &good, &trusted);
    let url = server.url(PASSWORD);

    // The system's roots (no SSL_CERT_FILE) do not include the private CA.
    let took = refused(&server, &url, "system-roots", "UnknownIssuer");
    println!("tls: private CA refused with the system's roots; that exchange took {took:.1?}");

    // Every fleet above is closed and its threads joined: this process is single-threaded again.
    std::env::set_var("SSL_CERT_FILE", &trusted.cert);

    // Two attached breakers: a trip at one opens the other, through the TLS server.
    let (a, b) = (breaker(), breaker());
    let fa = holdoff_fleet::attach(&a, &config(&url, "shared")).unwrap();
    let fb = holdoff_fleet::attach(&b, &config(&url, "shared")).unwrap();
    for f in [&fa, &fb] {
        let report = f.sync_now().unwrap();
        assert!(report.ok && report.attached, "{report:?}");
    }
    let started = Instant::now();
    assert!(fa.sync_now().unwrap().ok);
    println!(
        "tls: one exchange on a live TLS connection took {:.1?}",
        started.elapsed()
    );
    for _ in 0..5 {
        let p = a.allow().unwrap();
        a.record(p, Outcome::Failure).unwrap();
    }
    let tripped = Instant::now();
    wait_for(
        Duration::from_secs(5),
        "the trip reaches the other worker",
        || b.snapshot().state == State::Open,
    );
    println!(
        "tls: the other worker opened {:.1?} after the trip",
        tripped.elapsed()
    );
    assert!(b.allow().is_err());
    assert!(fa.is_attached() && fb.is_attached());
    assert_eq!(
        server.command("HGET holdoff:fleet:shared state").unwrap(),
        "$4\nopen"
    );
    fa.close();
    fb.close();

    // Refused: a wrong password; a certificate from a CA not in SSL_CERT_FILE; a certificate
    // from the trusted CA for another host.
    refused(
        &server,
        &server.url("wrong"),
        "wrong-password",
        "AuthenticationFailed",
    );
    let other = TlsRedis::start(&dir, "stranger", &stranger, &unknown);
    refused(&other, &other.url(PASSWORD), "unknown-ca", "UnknownIssuer");
    let other = TlsRedis::start(&dir, "misnamed", &misnamed, &trusted);
    refused(
        &other,
        &other.url(PASSWORD),
        "misnamed",
        "certificate not valid for name",
    );
    drop((server, other));
    let _ = std::fs::remove_dir_all(&dir);
    println!("tls: 5 checks passed");
}
