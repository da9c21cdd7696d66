//! [`RedisStore`]: the fleet store on Redis. One `EVALSHA` of `fleet.lua` per exchange (an
//! `EVAL` once after a `NOSCRIPT`, when the server lost its script cache), over one connection
//! kept between exchanges, bounded by the fleet's `timeout`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use holdoff::fleet::{Exchanged, FleetOp, FleetRecord, FleetState, FleetStore, Lease, Reply, StoreError};
use holdoff::fleet::{MAX_LEASES, MAX_WORKER_LEN};
use redis::Value;

use crate::conn::{self, Target};
use crate::FleetError;

/// The script: a transcription of `holdoff::fleet::apply`.
pub const SCRIPT: &str = include_str!("fleet.lua");

/// Largest time or count the store keeps: Lua's numbers are doubles, exact below 2^53.
pub const LIMIT: u64 = holdoff::fleet::MAX_STORE_VALUE;

/// Arguments per op in the script's ARGV (the kind and six values, unused ones empty).
const SLOTS: usize = 7;

/// First wait before reconnecting after a failure; doubles per failure up to [`BACKOFF_CAP`].
const BACKOFF_BASE: Duration = Duration::from_millis(25);
/// Longest wait between two connection attempts.
pub const BACKOFF_CAP: Duration = Duration::from_secs(1);

/// The Redis key of a fleet key's record, and the channel its changes are published on.
pub fn record_key(key: &str) -> String {
    format!("holdoff:fleet:{key}")
}

struct Link {
    conn: Option<redis::Connection>,
    /// While reconnecting: no attempt before this instant (exchanges fail at once).
    retry_at: Option<Instant>,
    failures: u32,
    /// Per-store jitter state (xorshift), so that a fleet does not reconnect in lockstep.
    seed: u64,
}

/// A [`FleetStore`] on one Redis server (`redis://`, `rediss://`, `unix://`). Every exchange is
/// one round trip bounded by `timeout`; after a failure the connection is dropped and re-opened
/// no sooner than a capped, jittered backoff (25 ms doubling to 1 s), and exchanges in between
/// fail at once with [`StoreError::Unavailable`] (a refused TLS certificate is one such failure,
/// its message naming the reason, e.g. `UnknownIssuer`).
pub struct RedisStore {
    target: Target,
    timeout: Duration,
    ttl_ms: u64,
    hash: String,
    link: Mutex<Link>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.target)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A store for `url` (see the crate docs for the accepted urls); connects lazily, on the
    /// first exchange. `timeout` bounds connect, every read and every write; `ttl` is the
    /// record's expiry, renewed on every write.
    ///
    /// # Errors
    /// [`FleetError::Config`] naming `fleet.url` or `fleet.timeout_ms`;
    /// [`FleetError::TlsNotBuilt`] for `rediss://` without the `tls` feature.
    pub fn new(url: &str, timeout: Duration, ttl: Duration) -> Result<RedisStore, FleetError> {
        let target = conn::parse(url)?;
        if timeout.is_zero() {
            return Err(FleetError::Config(holdoff::ConfigError {
                field: "fleet.timeout_ms".into(),
                rule: "must be > 0".into(),
            }));
        }
        // Jitter seed: differs between processes and between stores of one process.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        let seed = (u64::from(std::process::id()) << 32 | u64::from(nanos))
            ^ NEXT
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Ok(RedisStore {
            target,
            timeout,
            ttl_ms: (ttl.as_millis() as u64).clamp(1, LIMIT),
            hash: redis::Script::new(SCRIPT).get_hash().to_string(),
            link: Mutex::new(Link {
                conn: None,
                retry_at: None,
                failures: 0,
                seed: seed | 1,
            }),
        })
    }

    pub(crate) fn target(&self) -> &Target {
        &self.target
    }

    /// Closes the connection (the next exchange opens a new one).
    pub fn disconnect(&self) {
        self.link.lock().unwrap_or_else(|e| e.into_inner()).conn = None;
    }

    /// Publishes `message` on `channel` over this store's connection (bounded by `timeout`);
    /// errors are ignored: used to wake this process's own subscriber when closing.
    pub(crate) fn publish(&self, channel: &str, message: &str) {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(conn) = link.conn.as_mut() {
            let _: redis::RedisResult<Value> = redis::cmd("PUBLISH").arg(channel).arg(message).query(conn);
        }
    }

    fn args(&self, key: &str, ops: &[FleetOp], caller_now_ms: u64) -> Vec<Vec<u8>> {
        let n = |v: u64| v.min(LIMIT).to_string().into_bytes();
        let flag = |b: bool| if b { b"1".to_vec() } else { b"0".to_vec() };
        let mut args = vec![
            if self.target.caller_clock {
                n(caller_now_ms)
            } else {
                Vec::new()
            },
            n(self.ttl_ms),
            record_key(key).into_bytes(),
            ops.len().to_string().into_bytes(),
        ];
        for op in ops {
            let slots: [Vec<u8>; SLOTS] = match op {
                FleetOp::Open {
                    seen_episode,
                    delay_ms,
                    retry_later,
                } => [
                    b"open".to_vec(),
                    n(*seen_episode),
                    n(*delay_ms),
                    flag(*retry_later),
                    vec![],
                    vec![],
                    vec![],
                ],
                FleetOp::Claim {
                    worker,
                    episode,
                    max_probes,
                    interval_ms,
                    probe_timeout_ms,
                    max_wait_ms,
                } => [
                    b"claim".to_vec(),
                    worker.clone().into_bytes(),
                    n(*episode),
                    n(u64::from(*max_probes)),
                    n(*interval_ms),
                    n(*probe_timeout_ms),
                    n(*max_wait_ms),
                ],
                FleetOp::Admit {
                    worker,
                    episode,
                    probe_timeout_ms,
                } => [
                    b"admit".to_vec(),
                    worker.clone().into_bytes(),
                    n(*episode),
                    n(*probe_timeout_ms),
                    vec![],
                    vec![],
                    vec![],
                ],
                FleetOp::Answer {
                    worker,
                    episode,
                    ok,
                    recoveries_needed,
                    reopen_ms,
                } => [
                    b"answer".to_vec(),
                    worker.clone().into_bytes(),
                    n(*episode),
                    flag(*ok),
                    n(u64::from(*recoveries_needed)),
                    n(*reopen_ms),
                    vec![],
                ],
                FleetOp::Reset { seen_episode } => [
                    b"reset".to_vec(),
                    n(*seen_episode),
                    vec![],
                    vec![],
                    vec![],
                    vec![],
                    vec![],
                ],
                FleetOp::Read => [b"read".to_vec(), vec![], vec![], vec![], vec![], vec![], vec![]],
            };
            args.extend(slots);
        }
        args
    }

    fn run(&self, conn: &mut redis::Connection, key: &str, args: &[Vec<u8>]) -> redis::RedisResult<Value> {
        let rkey = record_key(key);
        let first = redis::cmd("EVALSHA")
            .arg(&self.hash)
            .arg(1)
            .arg(&rkey)
            .arg(args)
            .query(conn);
        match first {
            Err(e) if e.kind() == redis::ErrorKind::NoScriptError => redis::cmd("EVAL")
                .arg(SCRIPT)
                .arg(1)
                .arg(&rkey)
                .arg(args)
                .query(conn),
            other => other,
        }
    }
}

impl Link {
    fn fail(&mut self, now: Instant) {
        self.conn = None;
        self.back_off(now);
    }

    /// No exchange before a capped, jittered delay that doubles per consecutive failure.
    fn back_off(&mut self, now: Instant) {
        self.failures = self.failures.saturating_add(1);
        let exp = BACKOFF_BASE
            .saturating_mul(1 << self.failures.min(16).saturating_sub(1))
            .min(BACKOFF_CAP);
        // Jitter in [exp/2, exp]: workers that lost the same server spread their reconnects.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let half = exp / 2;
        let jitter = Duration::from_nanos(self.seed % (half.as_nanos() as u64).max(1));
        self.retry_at = Some(now + half + jitter);
    }
}

impl FleetStore for RedisStore {
    fn exchange(&self, key: &str, ops: &[FleetOp], caller_now_ms: u64) -> Result<Exchanged, StoreError> {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if let Some(at) = link.retry_at {
            if now < at {
                let why = if link.conn.is_none() {
                    "reconnecting"
                } else {
                    "after a corrupt record, next attempt"
                };
                return Err(StoreError::Unavailable(format!(
                    "{:?}: {why} in {} ms",
                    self.target,
                    (at - now).as_millis()
                )));
            }
        }
        if link.conn.is_none() {
            match conn::connect(&self.target, self.timeout) {
                Ok(c) => link.conn = Some(c),
                Err(e) => {
                    link.fail(now);
                    return Err(StoreError::Unavailable(format!("{:?}: {e}", self.target)));
                }
            }
        }
        let args = self.args(key, ops, caller_now_ms);
        let conn = link.conn.as_mut().expect("connected above");
        // A corrupt record is refused, and the next attempt waits as after a lost connection:
        // a fleet of workers must not hammer a server holding a hostile value.
        let result =
            match self.run(conn, key, &args) {
                Ok(value) => decode(value, ops.len()),
                // The script refused the record, or the key holds another type: a hostile value.
                Err(e) if matches!(e.code(), Some("CORRUPT" | "WRONGTYPE")) => Err(StoreError::Corrupt(
                    format!("{}: {}", record_key(key), e.detail().unwrap_or("record")),
                )),
                Err(e)
                    if !(e.is_io_error()
                        || e.is_timeout()
                        || e.is_connection_dropped()
                        || e.is_unrecoverable_error()) =>
                {
                    // The server answered (LOADING after a restart, OOM, a script error): the
                    // connection is in step and stays.
                    Err(StoreError::Unavailable(format!("{:?}: {e}", self.target)))
                }
                Err(e) => {
                    // A timeout may leave a reply in flight: the connection is not reused.
                    link.fail(Instant::now());
                    return Err(StoreError::Unavailable(format!("{:?}: {e}", self.target)));
                }
            };
        match &result {
            Ok(_) => {
                link.failures = 0;
                link.retry_at = None;
            }
            Err(StoreError::Corrupt(_)) => link.back_off(Instant::now()),
            Err(StoreError::Unavailable(_)) => {}
        }
        result
    }
}

fn corrupt(field: &str, rule: &str) -> StoreError {
    StoreError::Corrupt(format!("{field}: {rule}"))
}

fn int(field: &str, raw: &[u8], max: u64) -> Result<u64, StoreError> {
    let text = std::str::from_utf8(raw).map_err(|_| corrupt(field, "not text"))?;
    if text.is_empty() || text.len() > 16 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(corrupt(field, "not a decimal integer"));
    }
    let v: u64 = text
        .parse()
        .map_err(|_| corrupt(field, "not a decimal integer"))?;
    if v > max {
        return Err(corrupt(field, &format!("more than {max}")));
    }
    Ok(v)
}

/// Decodes the leases field: `<expires_at>:<len>:<worker>` repeated.
pub(crate) fn decode_leases(raw: &[u8]) -> Result<Vec<Lease>, StoreError> {
    let mut leases = Vec::new();
    let mut rest = raw;
    while !rest.is_empty() {
        let colon = |s: &[u8]| {
            s.iter()
                .position(|&b| b == b':')
                .ok_or_else(|| corrupt("leases", "malformed"))
        };
        let e = colon(rest)?;
        let expires_at = int("leases", &rest[..e], LIMIT)?;
        rest = &rest[e + 1..];
        let l = colon(rest)?;
        let len = int("leases", &rest[..l], MAX_WORKER_LEN as u64)? as usize;
        rest = &rest[l + 1..];
        if len == 0 || len > rest.len() {
            return Err(corrupt("leases", "a worker id is empty or cut"));
        }
        if leases.len() >= MAX_LEASES {
            return Err(corrupt("leases", "more than 1000"));
        }
        let worker =
            String::from_utf8(rest[..len].to_vec()).map_err(|_| corrupt("leases", "worker not UTF-8"))?;
        leases.push(Lease { worker, expires_at });
        rest = &rest[len..];
    }
    Ok(leases)
}

/// Decodes the script's reply (see `fleet.lua`), refusing any out-of-range value with
/// [`StoreError::Corrupt`] naming the field.
pub(crate) fn decode(value: Value, ops: usize) -> Result<Exchanged, StoreError> {
    let Value::Array(items) = value else {
        return Err(corrupt("reply", "not an array"));
    };
    let parts: Vec<Vec<u8>> = items
        .into_iter()
        .map(|v| match v {
            Value::BulkString(b) => Ok(b),
            Value::SimpleString(s) => Ok(s.into_bytes()),
            _ => Err(corrupt("reply", "an item is not a string")),
        })
        .collect::<Result<_, _>>()?;
    if parts.len() != 10 + ops {
        return Err(corrupt("reply", &format!("{} items for {ops} ops", parts.len())));
    }
    let max_count = MAX_LEASES as u64;
    let record = FleetRecord {
        episode: int("episode", &parts[1], LIMIT)?,
        state: std::str::from_utf8(&parts[2])
            .ok()
            .and_then(FleetState::from_name)
            .ok_or_else(|| corrupt("state", "not closed or open"))?,
        next_probe_at: int("next_probe_at", &parts[3], LIMIT)?,
        hold_until: int("hold_until", &parts[9], LIMIT)?,
        window_granted: int("window_granted", &parts[4], max_count)? as u32,
        recoveries: int("recoveries", &parts[5], max_count)? as u32,
        step: int("step", &parts[6], u64::from(u32::MAX))? as u32,
        leases: decode_leases(&parts[7])?,
        updated_at: int("updated_at", &parts[8], LIMIT)?,
    };
    record.validate().map_err(StoreError::Corrupt)?;
    let replies = parts[10..]
        .iter()
        .map(|p| match p.as_slice() {
            b"applied" => Ok(Reply::Applied),
            b"ignored" => Ok(Reply::Ignored),
            b"refused" => Ok(Reply::Refused),
            other => match other.strip_prefix(b"granted:") {
                Some(at) => Ok(Reply::Granted {
                    expires_at: int("granted", at, LIMIT)?,
                }),
                None => Err(corrupt("reply", "unknown op reply")),
            },
        })
        .collect::<Result<_, _>>()?;
    Ok(Exchanged {
        record,
        store_now_ms: int("store_now", &parts[0], LIMIT)?,
        replies,
    })
}
