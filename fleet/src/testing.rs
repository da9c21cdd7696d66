//! A real `redis-server` for tests and benches: started on a unix socket in a fresh temporary
//! directory or on a free 127.0.0.1 port, with persistence off (`--save '' --appendonly no`),
//! stopped and restarted on the same address on demand, killed and its directory removed on drop.
//!
//! It never touches the system's Redis service: the binary is run as a child process of the test.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a fresh server may take to answer `PING` before [`RedisServer::start`] gives up.
const READY_WITHIN: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
enum Address {
    Unix(PathBuf),
    Tcp(u16),
}

/// One `redis-server` child process. Not `Clone`: one owner stops it.
#[derive(Debug)]
pub struct RedisServer {
    dir: PathBuf,
    address: Address,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server listening only on `<tempdir>/redis.sock`.
    ///
    /// # Errors
    /// `redis-server` missing from PATH, or not answering `PING` within 10 s.
    pub fn unix() -> io::Result<RedisServer> {
        let dir = fresh_dir()?;
        let address = Address::Unix(dir.join("redis.sock"));
        Self::launch(dir, address)
    }

    /// Starts a server listening only on 127.0.0.1 at a port that was free a moment before.
    ///
    /// # Errors
    /// As [`RedisServer::unix`]; a port taken in between is retried with another one.
    pub fn tcp() -> io::Result<RedisServer> {
        let dir = fresh_dir()?;
        let mut last = None;
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            match Self::launch(dir.clone(), Address::Tcp(port)) {
                Ok(server) => return Ok(server),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free port")))
    }

    fn launch(dir: PathBuf, address: Address) -> io::Result<RedisServer> {
        let mut server = RedisServer {
            dir,
            address,
            child: None,
        };
        server.start()?;
        Ok(server)
    }

    /// The url a fleet config names to reach this server: `unix:///…/redis.sock` or
    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        match &self.address {
            Address::Unix(path) => format!("unix://{}", path.display()),
            Address::Tcp(port) => format!("redis://127.0.0.1:{port}/"),
        }
    }

    /// The server process's id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts the server again on the same address (no-op when running), empty: nothing is
    /// persisted. Returns once it answers `PING`.
    ///
    /// # Errors
    /// As [`RedisServer::unix`].
    pub fn start(&mut self) -> io::Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        let mut cmd = server_command(&self.dir);
        match &self.address {
            Address::Unix(path) => {
                cmd.args(["--port", "0", "--unixsocket"])
                    .arg(path)
                    .args(["--unixsocketperm", "700"]);
            }
            Address::Tcp(port) => {
                cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()]);
            }
        }
        let mut child = cmd.spawn()?;
        let started = Instant::now();
        while started.elapsed() < READY_WITHIN {
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!(
                    "redis-server exited at start: {status}"
                )));
            }
            if self.ping().is_ok() {
                self.child = Some(child);
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "redis-server did not answer PING within 10 s",
        ))
    }

    /// Kills the server (SIGKILL: no goodbye to its clients) and waits for it to exit; every
    /// record is gone. No-op when stopped.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            if let Address::Unix(path) = &self.address {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open and nothing answers, as a hung or
    /// overloaded server. [`RedisServer::resume`] thaws it; [`RedisServer::stop`] still kills it.
    ///
    /// # Errors
    /// The server not running, or `kill` failing.
    pub fn pause(&self) -> io::Result<()> {
        self.signal("-STOP")
    }

    /// Thaws a paused server (SIGCONT).
    ///
    /// # Errors
    /// As [`RedisServer::pause`].
    pub fn resume(&self) -> io::Result<()> {
        self.signal("-CONT")
    }

    fn signal(&self, sig: &str) -> io::Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| io::Error::other("redis-server is not running"))?;
        let status = Command::new("kill").arg(sig).arg(pid.to_string()).status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("kill {sig} {pid}: {status}")))
        }
    }

    /// Runs one command given as whitespace-free words and returns the raw RESP reply, e.g.
    /// `server.command(&["FLUSHALL"])` -> `"+OK\r\n"`. For tests that poke the store directly.
    ///
    /// # Errors
    /// The server unreachable, or no reply within 2 s.
    pub fn command(&self, words: &[&str]) -> io::Result<String> {
        let mut request = format!("*{}\r\n", words.len());
        for w in words {
            request.push_str(&format!("${}\r\n{}\r\n", w.len(), w));
        }
        let mut conn = self.connect()?;
        conn.write_all(request.as_bytes())?;
        let mut buf = vec![0u8; 64 * 1024];
        let n = conn.read(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    fn ping(&self) -> io::Result<()> {
        let reply = self.command(&["PING"])?;
        if reply.starts_with("+PONG") {
            Ok(())
        } else {
            Err(io::Error::other(reply))
        }
    }

    fn connect(&self) -> io::Result<Box<dyn ReadWrite>> {
        let timeout = Some(Duration::from_secs(2));
        Ok(match &self.address {
            Address::Unix(path) => {
                let s = UnixStream::connect(path)?;
                s.set_read_timeout(timeout)?;
                Box::new(s)
            }
            Address::Tcp(port) => {
                let s = TcpStream::connect(("127.0.0.1", *port))?;
                s.set_read_timeout(timeout)?;
                Box::new(s)
            }
        })
    }

    /// The directory holding the socket (removed on drop).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// A `redis-server` command in the foreground with persistence off, no log, `dir` as its working
/// directory and no stdio; the caller adds where it listens (`--port`, `--unixsocket`,
/// `--tls-port` ...) and spawns it.
pub fn server_command(dir: &Path) -> Command {
    let mut cmd = Command::new("redis-server");
    cmd.args([
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--logfile",
        "",
    ])
    .arg("--dir")
    .arg(dir)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    cmd
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn fresh_dir() -> io::Result<PathBuf> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // Short: a unix socket path is limited to 107 bytes.
    let dir = std::env::temp_dir().join(format!("holdoff-redis-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
