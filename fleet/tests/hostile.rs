//! Hostile records on a real redis-server: valid-looking values that would park the fleet, a
//! value too big to load, a key of another type, a corrupt field. Real time (bounds with
//! margins, never exact times).

use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use holdoff::fleet::{FleetConfig, FleetOp, FleetState, FleetStore, Reply, StoreError};
use holdoff::{Backoff, Breaker, BreakerConfig, Outcome, SystemClock, TripPolicy};
use holdoff_fleet::testing::RedisServer;
use holdoff_fleet::RedisStore;

const KEY: &str = "holdoff:fleet:k";
/// The longest wait the workers' configuration produces: the open interval (constant),
/// `max_retry_later` and the probe timeout are all at most this.
const MAX_WAIT: Duration = Duration::from_millis(1000);

fn raw(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn redis_ms(conn: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
    s * 1000 + us / 1000
}

fn store(server: &RedisServer) -> RedisStore {
    RedisStore::new(&server.url(), Duration::from_secs(2), Duration::from_secs(3)).unwrap()
}

fn open_op() -> FleetOp {
    FleetOp::Open {
        seen_episode: 1,
        delay_ms: 200,
        retry_later: false,
    }
}

fn claim_op(worker: &str) -> FleetOp {
    FleetOp::Claim {
        worker: worker.into(),
        episode: 1,
        max_probes: 1,
        interval_ms: 200,
        probe_timeout_ms: 300,
        max_wait_ms: MAX_WAIT.as_millis() as u64,
    }
}

/// The three valid-looking records that parked every worker: a probe time 1e12 ms away, a full
/// window, a lease held until the end of time by a worker that does not exist. Each is written
/// with no TTL (PERSIST): it never goes away by itself.
fn park(conn: &mut redis::Connection, variant: &str) {
    let now = redis_ms(conn);
    let (field, value) = match variant {
        "next_probe_at" => ("next_probe_at", (now + 1_000_000_000_000).to_string()),
        "window" => ("window_granted", "1000".to_string()),
        _ => ("leases", "9007199254740991:5:ghost".to_string()),
    };
    let _: () = redis::cmd("HSET")
        .arg(KEY)
        .arg(&[
            ("episode", "1".to_string()),
            ("state", "open".to_string()),
            ("next_probe_at", now.to_string()),
            ("window_granted", "0".to_string()),
            ("recoveries", "0".to_string()),
            ("step", "0".to_string()),
            ("leases", String::new()),
            ("updated_at", now.to_string()),
        ])
        .query(conn)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(KEY)
        .arg(field)
        .arg(value)
        .query(conn)
        .unwrap();
    let _: () = redis::cmd("PERSIST").arg(KEY).query(conn).unwrap();
}

#[test]
fn a_claim_believes_a_deadline_or_a_lease_only_up_to_the_workers_longest_wait() {
    let server = RedisServer::unix().unwrap();
    let mut conn = raw(&server);
    let redis = store(&server);
    for variant in ["next_probe_at", "window", "lease"] {
        park(&mut conn, variant);
        let x = redis.exchange("k", &[claim_op("w1")], 0).unwrap();
        assert!(
            matches!(x.replies[0], Reply::Granted { expires_at } if expires_at == x.store_now_ms + 300),
            "{variant}: {:?}",
            x
        );
        assert_eq!(x.record.leases.len(), 1, "{variant}: the ghost lease is dropped");
        assert_eq!(
            x.record.next_probe_at,
            x.store_now_ms + 200,
            "{variant}: re-armed"
        );
        let _: () = redis::cmd("DEL").arg(KEY).query(&mut conn).unwrap();
    }
}

fn worker_breaker() -> Arc<Breaker> {
    let config = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 1 },
        open_interval: Backoff::constant(Duration::from_millis(200)),
        recoveries: 1,
        probe_timeout: Some(Duration::from_millis(300)),
        max_retry_later: MAX_WAIT,
        ..BreakerConfig::default()
    };
    Arc::new(Breaker::new(config, SystemClock::shared()).unwrap())
}

#[test]
fn parked_records_let_every_worker_call_again_within_its_longest_wait() {
    let server = RedisServer::unix().unwrap();
    let mut conn = raw(&server);
    let mut config = FleetConfig::new(server.url(), "k");
    config.refresh = Duration::from_millis(20);
    config.fallback_after = Duration::from_millis(300);
    config.ttl = Duration::from_secs(3);
    for variant in ["next_probe_at", "window", "lease"] {
        let _: () = redis::cmd("DEL").arg(KEY).query(&mut conn).unwrap();
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let b = worker_breaker();
                let f = holdoff_fleet::attach(&b, &config).unwrap();
                (b, f)
            })
            .collect();
        park(&mut conn, variant);
        // Every worker sees the hostile open record and follows it.
        for (_, f) in &workers {
            let r = f.sync_now().unwrap();
            assert_eq!(r.record.map(|r| r.state), Some(FleetState::Open), "{variant}");
        }
        // A healthy upstream: every call admitted succeeds. Each worker must get a call
        // through within its longest wait plus the sync and claim round trips (margin: 3 s on
        // a loaded 2-core machine).
        let start = StdInstant::now();
        let mut through = [None; 3];
        while through.iter().any(Option::is_none) {
            assert!(
                start.elapsed() < MAX_WAIT + Duration::from_secs(3),
                "{variant}: parked: {through:?}"
            );
            for (i, (b, _)) in workers.iter().enumerate() {
                if let Ok(p) = b.allow() {
                    b.record(p, Outcome::Success).unwrap();
                    through[i].get_or_insert(start.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for (_, f) in &workers {
            f.close();
        }
    }
}

#[test]
fn a_huge_field_is_refused_in_bounded_time_without_loading_it() {
    let server = RedisServer::unix().unwrap();
    let mut conn = raw(&server);
    let redis = store(&server);
    redis.exchange("k", &[open_op()], 0).unwrap();
    // 1e6 leases, about 24 MB.
    let huge = "9007199254740991:5:ghost".repeat(1_000_000);
    let _: () = redis::cmd("HSET")
        .arg(KEY)
        .arg("leases")
        .arg(&huge)
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut conn).unwrap();
    let start = StdInstant::now();
    match store(&server).exchange("k", &[FleetOp::Read], 0) {
        Err(StoreError::Corrupt(m)) => assert!(m.contains("leases"), "{m}"),
        other => panic!("{other:?}"),
    }
    let took = start.elapsed();
    // Loading and scanning 24 MB takes about 130 ms; the size checks a few microseconds.
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut conn).unwrap();
    let script_us: f64 = info
        .lines()
        .find_map(|l| {
            l.strip_prefix("cmdstat_evalsha:")
                .or_else(|| l.strip_prefix("cmdstat_eval:"))
        })
        .and_then(|rest| rest.split(',').find_map(|kv| kv.strip_prefix("usec_per_call=")))
        .expect("the script ran")
        .parse()
        .unwrap();
    assert!(script_us < 20_000.0, "script took {script_us} us");
    assert!(took < Duration::from_millis(500), "exchange took {took:?}");
    assert!(!info.contains("cmdstat_hgetall"), "the record was loaded: {info}");
    // The same store waits before its next attempt instead of hammering the server.
    let again = store(&server);
    assert!(again.exchange("k", &[FleetOp::Read], 0).is_err());
    assert!(matches!(
        again.exchange("k", &[FleetOp::Read], 0),
        Err(StoreError::Unavailable(m)) if m.contains("after a corrupt record")
    ));
}

#[test]
fn a_wrong_type_key_and_a_corrupt_field_are_replaced_by_the_next_open() {
    let server = RedisServer::unix().unwrap();
    let mut conn = raw(&server);
    for poison in ["list", "field"] {
        let _: () = redis::cmd("DEL").arg(KEY).query(&mut conn).unwrap();
        match poison {
            "list" => {
                let _: () = redis::cmd("RPUSH").arg(KEY).arg("x").query(&mut conn).unwrap();
            }
            _ => {
                store(&server).exchange("k", &[open_op()], 0).unwrap();
                let _: () = redis::cmd("HSET")
                    .arg(KEY)
                    .arg("step")
                    .arg("melted")
                    .query(&mut conn)
                    .unwrap();
            }
        }
        // Reads and claims are refused and leave it alone.
        for op in [FleetOp::Read, claim_op("w1")] {
            match store(&server).exchange("k", &[op], 0) {
                Err(StoreError::Corrupt(_)) => {}
                other => panic!("{poison}: {other:?}"),
            }
        }
        // An open replaces it with a fresh record.
        let x = store(&server).exchange("k", &[open_op()], 0).unwrap();
        assert_eq!(
            (x.record.state, x.replies[0]),
            (FleetState::Open, Reply::Applied),
            "{poison}"
        );
        let kind: String = redis::cmd("TYPE").arg(KEY).query(&mut conn).unwrap();
        assert_eq!(kind, "hash", "{poison}");
        assert!(
            store(&server).exchange("k", &[FleetOp::Read], 0).is_ok(),
            "{poison}"
        );
    }
}
