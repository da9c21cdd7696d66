//! RedisStore against a real redis-server: the script agrees with `apply` op for op, refuses
//! corrupt records, renews the ttl and publishes on every change, and reads Redis TIME.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::fleet::{apply, FleetOp, FleetRecord, FleetStore, Reply, StoreError};
use holdoff_fleet::testing::RedisServer;
use holdoff_fleet::RedisStore;

const LIMIT: u64 = holdoff::fleet::MAX_STORE_VALUE;

const T: Duration = Duration::from_secs(2);
const TTL: Duration = Duration::from_secs(3600);

fn store(server: &RedisServer, query: &str) -> RedisStore {
    RedisStore::new(&format!("{}{query}", server.url()), T, TTL).unwrap()
}

/// xorshift: the same op sequences on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn random_op(rng: &mut Rng) -> FleetOp {
    let worker = ["a", "b", "worker:c with spaces", "d"][rng.next(4) as usize].to_string();
    let episode = rng.next(4);
    match rng.next(6) {
        0 => FleetOp::Open {
            seen_episode: rng.next(5),
            delay_ms: rng.next(12) * 250,
            retry_later: rng.next(3) == 0,
        },
        1 => FleetOp::Claim {
            worker,
            episode,
            max_probes: 1 + rng.next(3) as u32,
            interval_ms: rng.next(8) * 250,
            probe_timeout_ms: rng.next(6) * 250,
            // Often below the record's deadlines: the implausible-deadline rule is exercised.
            max_wait_ms: rng.next(16) * 250,
        },
        2 => FleetOp::Admit {
            worker,
            episode,
            probe_timeout_ms: rng.next(8) * 250,
        },
        3 => FleetOp::Answer {
            worker,
            episode,
            ok: rng.next(3) != 0,
            recoveries_needed: 1 + rng.next(3) as u32,
            reopen_ms: rng.next(16) * 250,
        },
        // Rare: a reset closes the record, and the sequences must still reach grants.
        4 if rng.next(4) == 0 => FleetOp::Reset {
            seen_episode: rng.next(5),
        },
        _ => FleetOp::Read,
    }
}

/// Ops of two workers in the first episodes, retry-laters and failed probes often: a known
/// Retry-After (`hold_until`) outlives re-armed windows and failed probes.
fn retry_later_op(rng: &mut Rng) -> FleetOp {
    let worker = ["a", "b"][rng.next(2) as usize].to_string();
    let episode = 1 + rng.next(2);
    match rng.next(5) {
        0 => FleetOp::Open {
            seen_episode: 1 + rng.next(2),
            delay_ms: rng.next(24) * 250,
            retry_later: rng.next(3) != 0,
        },
        1 => FleetOp::Claim {
            worker,
            episode,
            max_probes: 1 + rng.next(2) as u32,
            interval_ms: rng.next(16) * 250,
            probe_timeout_ms: 1000 + rng.next(8) * 250,
            max_wait_ms: rng.next(24) * 250,
        },
        2 => FleetOp::Answer {
            worker,
            episode,
            ok: rng.next(3) == 0,
            recoveries_needed: 1 + rng.next(2) as u32,
            reopen_ms: rng.next(4) * 250,
        },
        3 => FleetOp::Admit {
            worker,
            episode,
            probe_timeout_ms: 250 + rng.next(8) * 250,
        },
        4 if rng.next(4) == 0 => FleetOp::Reset {
            seen_episode: 1 + rng.next(2),
        },
        _ => FleetOp::Read,
    }
}

/// Values where u64 and the script's doubles part: around 2^53 and u64::MAX.
const EDGES: [u64; 9] = [
    0,
    1,
    LIMIT - 250,
    LIMIT - 1,
    LIMIT,
    LIMIT + 1,
    LIMIT + 2,
    u64::MAX - 1,
    u64::MAX,
];

/// Worker ids of odd bytes: separators, digits, NUL, multi-byte, the longest and one too long,
/// and empty.
fn odd_worker(rng: &mut Rng) -> String {
    match rng.next(9) {
        0 => ":".into(),
        1 => "12:3:".into(),
        2 => "a\0b".into(),
        3 => "\u{e9}\u{10FFFF}".into(),
        4 => "w".repeat(128),
        5 => "w".repeat(129),
        6 => String::new(),
        7 => "\u{e9}".repeat(64),
        _ => "a".into(),
    }
}

fn edge_op(rng: &mut Rng) -> FleetOp {
    let edge = |rng: &mut Rng| {
        if rng.next(2) == 0 {
            EDGES[rng.next(EDGES.len() as u64) as usize]
        } else {
            rng.next(4) * 250
        }
    };
    let worker = odd_worker(rng);
    match rng.next(6) {
        0 => FleetOp::Open {
            seen_episode: edge(rng),
            delay_ms: edge(rng),
            retry_later: rng.next(2) == 0,
        },
        1 => FleetOp::Claim {
            worker,
            episode: edge(rng),
            max_probes: [0, 1, 2, 1000, 1001, u32::MAX][rng.next(6) as usize],
            interval_ms: edge(rng),
            probe_timeout_ms: edge(rng),
            max_wait_ms: edge(rng),
        },
        2 => FleetOp::Admit {
            worker,
            episode: edge(rng),
            probe_timeout_ms: edge(rng),
        },
        3 => FleetOp::Answer {
            worker,
            episode: edge(rng),
            ok: rng.next(2) == 0,
            recoveries_needed: [0, 1, 2, 1000, 1001, u32::MAX][rng.next(6) as usize],
            reopen_ms: edge(rng),
        },
        4 => FleetOp::Reset {
            seen_episode: edge(rng),
        },
        _ => FleetOp::Read,
    }
}

/// What the sequences of [`differential`] exercised.
#[derive(Default)]
struct Seen {
    /// Claims granted.
    granted: usize,
    /// Failed probes re-opened at a known Retry-After (`hold_until`) past their backoff step.
    held: usize,
}

/// Makes one random op.
type OpGen = fn(&mut Rng) -> FleetOp;

/// Runs `seqs` sequences of op batches through `apply` and the script and compares the record
/// and the replies after each batch.
fn differential(
    redis: &RedisStore,
    rng: &mut Rng,
    seqs: usize,
    start: fn(&mut Rng) -> u64,
    op: OpGen,
) -> Seen {
    let mut seen = Seen::default();
    for seq in 0..seqs {
        let key = format!("diff-{seq}");
        let mut record = FleetRecord::default();
        let mut now = start(rng);
        for _ in 0..40 {
            // Coarse steps: deadlines are often hit exactly, where `<` and `<=` differ.
            now = now.saturating_add(rng.next(4) * 250);
            let ops: Vec<FleetOp> = (0..1 + rng.next(3)).map(|_| op(rng)).collect();
            let before = record.clone();
            let mut held = 0;
            let replies: Vec<Reply> = ops
                .iter()
                .map(|op| {
                    let step_before = record.step;
                    let reply = apply(&mut record, op, now);
                    if let FleetOp::Answer {
                        ok: false, reopen_ms, ..
                    } = op
                    {
                        // A current failure (the step moved) re-opened past its backoff step.
                        let step = now.saturating_add(*reopen_ms).min(LIMIT);
                        if record.step != step_before {
                            eprintln!("DBG fail hold={} step={} now={}", record.hold_until, step, now);
                        }
                        if record.step != step_before && record.hold_until > step {
                            assert_eq!(record.next_probe_at, record.hold_until);
                            held += 1;
                        }
                    }
                    reply
                })
                .collect();
            let x = redis.exchange(&key, &ops, now).unwrap();
            assert_eq!(x.store_now_ms, now.min(LIMIT));
            assert_eq!(x.replies, replies, "seq {seq} at {now}: {ops:?}");
            assert_eq!(x.record, record, "seq {seq} at {now}: {ops:?}");
            assert_eq!(record.validate(), Ok(()), "seq {seq} at {now}: {ops:?}");
            if !replies
                .iter()
                .any(|r| matches!(r, Reply::Applied | Reply::Granted { .. }))
            {
                // Not stored: the store keeps the record as it was (expired leases included).
                record = before;
                continue;
            }
            seen.held += held;
            seen.granted += replies
                .iter()
                .filter(|r| matches!(r, Reply::Granted { .. }))
                .count();
        }
    }
    seen
}

#[test]
fn the_script_agrees_with_apply_on_random_op_sequences() {
    // (ops, seed, grants and failed probes held by a Retry-After the sequences must reach)
    let runs: [(OpGen, u64, usize, usize); 2] = [
        (random_op, 0x2545_F491_4F6C_DD1D, 50, 0),
        (retry_later_op, 0x6A09_E667_F3BC_C908, 50, 8),
    ];
    for (op, seed, granted, held) in runs {
        let server = RedisServer::unix().unwrap();
        let redis = store(&server, "?clock=caller");
        let mut rng = Rng(seed);
        let seen = differential(&redis, &mut rng, 60, |rng| rng.next(4000) * 250, op);
        assert!(seen.granted > granted, "{seed:x}: grants {}", seen.granted);
        assert!(seen.held >= held, "{seed:x}: held by a Retry-After {}", seen.held);
    }
}

#[test]
fn the_script_agrees_with_apply_at_the_edges_of_its_numbers_and_on_odd_worker_ids() {
    let server = RedisServer::unix().unwrap();
    let redis = store(&server, "?clock=caller");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // Store clocks from 0, near 2^53 (saturating on the way) and beyond it.
    let seen = differential(
        &redis,
        &mut rng,
        60,
        |rng| EDGES[rng.next(EDGES.len() as u64) as usize],
        edge_op,
    );
    assert!(
        seen.granted > 20,
        "the sequences exercise grants: {}",
        seen.granted
    );
}

fn corrupt_field(server: &RedisServer, field: &str, value: &str) -> String {
    // A store per check: each refusal makes that store wait before its next attempt.
    let redis = store(server, "?clock=caller");
    let open = FleetOp::Open {
        seen_episode: 1,
        delay_ms: 1000,
        retry_later: false,
    };
    redis.exchange("k", &[open], 10).unwrap();
    assert_eq!(
        server
            .command(&["HSET", "holdoff:fleet:k", field, value])
            .unwrap(),
        ":0\r\n"
    );
    match store(server, "?clock=caller").exchange("k", &[FleetOp::Read], 20) {
        Err(StoreError::Corrupt(msg)) => msg,
        other => panic!("{field}={value}: {other:?}"),
    }
}

fn refused(server: &RedisServer, ops: &[FleetOp], named: &str) {
    match store(server, "?clock=caller").exchange("k", ops, 20) {
        Err(StoreError::Corrupt(msg)) => assert!(msg.contains(named), "{named}: {msg}"),
        other => panic!("{named}: {other:?}"),
    }
}

#[test]
fn corrupt_or_hostile_records_are_refused_naming_the_field() {
    let server = RedisServer::unix().unwrap();
    for (field, value, named) in [
        ("episode", "garbage", "episode"),
        ("episode", "99999999999999999999", "episode"),
        ("next_probe_at", "9007199254740993", "next_probe_at"),
        ("next_probe_at", "-5", "next_probe_at"),
        ("state", "half", "state"),
        ("window_granted", "1001", "window_granted"),
        ("recoveries", "4294967296", "recoveries"),
        ("step", "1e3", "step"),
        ("leases", "5:3:ab", "leases"),
        ("leases", "5:0:", "leases"),
        ("leases", &format!("5:129:{}", "w".repeat(129)), "leases"),
        ("leases", &"9:1:w".repeat(1001), "leases"),
        ("hold_until", "9007199254740992", "hold_until"),
        ("hold_until", "", "hold_until"),
        ("updated_at", "", "updated_at"),
    ] {
        let msg = corrupt_field(&server, field, value);
        assert!(msg.contains(named), "{field}={value:.20}: {msg}");
    }
    // A lease worker id that is not UTF-8 (a lone continuation byte).
    let mut raw = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: i64 = redis::cmd("HSET")
        .arg("holdoff:fleet:k")
        .arg("leases")
        .arg(&b"9:1:\x80"[..])
        .query(&mut raw)
        .unwrap();
    refused(&server, &[], "leases");
    server
        .command(&["HSET", "holdoff:fleet:k", "leases", ""])
        .unwrap();
    // Episode 0 while open, a missing field, a field too many.
    server
        .command(&["HSET", "holdoff:fleet:k", "updated_at", "7", "episode", "0"])
        .unwrap();
    refused(&server, &[], "episode");
    server.command(&["HDEL", "holdoff:fleet:k", "episode"]).unwrap();
    refused(&server, &[], "episode");
    server
        .command(&["HSET", "holdoff:fleet:k", "episode", "1", "extra", "x"])
        .unwrap();
    refused(&server, &[], "record");
    // Another type under the key.
    server.command(&["DEL", "holdoff:fleet:k"]).unwrap();
    server.command(&["SET", "holdoff:fleet:k", "x"]).unwrap();
    refused(&server, &[], "key");
    // A claim does not touch a corrupt record; an open (a trip's evidence) starts it again.
    server.command(&["DEL", "holdoff:fleet:k"]).unwrap();
    server
        .command(&["HSET", "holdoff:fleet:k", "state", "melted"])
        .unwrap();
    let claim = FleetOp::Claim {
        worker: "a".into(),
        episode: 1,
        max_probes: 1,
        interval_ms: 1,
        probe_timeout_ms: 1,
        max_wait_ms: 1,
    };
    let redis = store(&server, "?clock=caller");
    assert!(matches!(
        redis.exchange("k", &[claim], 30),
        Err(StoreError::Corrupt(_))
    ));
    // The refusal makes this store wait before its next attempt, as a lost connection does.
    assert!(matches!(
        redis.exchange("k", &[], 30),
        Err(StoreError::Unavailable(m)) if m.contains("after a corrupt record")
    ));
    std::thread::sleep(Duration::from_millis(60));
    let open = FleetOp::Open {
        seen_episode: 4,
        delay_ms: 100,
        retry_later: false,
    };
    let x = redis.exchange("k", &[open], 30).unwrap();
    assert_eq!(
        (x.record.episode, x.record.next_probe_at, x.replies[0]),
        (4, 130, Reply::Applied)
    );
    // The connection survives refusals: the next exchange works at once.
    assert_eq!(redis.exchange("k", &[], 40).unwrap().record.episode, 4);
}

#[test]
fn a_record_without_hold_until_reads_it_as_0() {
    let server = RedisServer::unix().unwrap();
    let redis = store(&server, "?clock=caller");
    let later = FleetOp::Open {
        seen_episode: 1,
        delay_ms: 1000,
        retry_later: true,
    };
    let x = redis.exchange("k", &[later], 10).unwrap();
    assert_eq!(x.record.hold_until, 1010);
    server
        .command(&["HDEL", "holdoff:fleet:k", "hold_until"])
        .unwrap();
    let x = redis.exchange("k", &[FleetOp::Read], 20).unwrap();
    assert_eq!(
        (x.record.episode, x.record.next_probe_at, x.record.hold_until),
        (1, 1010, 0)
    );
}

#[test]
fn writes_renew_the_ttl_and_publish_reads_do_neither() {
    let server = RedisServer::tcp().unwrap();
    let redis = RedisStore::new(
        &format!("{}?clock=caller", server.url()),
        T,
        Duration::from_millis(5000),
    )
    .unwrap();
    let open = FleetOp::Open {
        seen_episode: 1,
        delay_ms: 1000,
        retry_later: false,
    };
    redis.exchange("ttl", std::slice::from_ref(&open), 1).unwrap();
    let pttl: i64 = server.command(&["PTTL", "holdoff:fleet:ttl"]).unwrap()[1..]
        .trim()
        .parse()
        .unwrap();
    assert!((4000..=5000).contains(&pttl), "{pttl}");
    server
        .command(&["PEXPIRE", "holdoff:fleet:ttl", "100000"])
        .unwrap();
    redis.exchange("ttl", &[FleetOp::Read, open], 2).unwrap(); // both ignored: no write
    let pttl: i64 = server.command(&["PTTL", "holdoff:fleet:ttl"]).unwrap()[1..]
        .trim()
        .parse()
        .unwrap();
    assert!(pttl > 90_000, "{pttl}");
    // Expired: the key is gone and reads as a fresh record.
    server.command(&["PEXPIRE", "holdoff:fleet:ttl", "1"]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        redis.exchange("ttl", &[], 3).unwrap().record,
        FleetRecord::default()
    );
    // One PUBLISH per changing exchange, none for the others.
    let publishes = || -> u64 {
        let info = server.command(&["INFO", "commandstats"]).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_publish:calls="))
            .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
    };
    let before = publishes();
    redis.exchange("ttl", &[FleetOp::Read], 4).unwrap();
    assert_eq!(publishes(), before);
    redis
        .exchange(
            "ttl",
            &[FleetOp::Open {
                seen_episode: 1,
                delay_ms: 1,
                retry_later: false,
            }],
            4,
        )
        .unwrap();
    assert_eq!(publishes(), before + 1);
}

#[test]
fn without_the_hook_the_store_clock_is_redis_time() {
    let server = RedisServer::unix().unwrap();
    let redis = store(&server, "");
    let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    // The caller's clock (5) is ignored.
    let x = redis
        .exchange(
            "clock",
            &[FleetOp::Open {
                seen_episode: 1,
                delay_ms: 500,
                retry_later: false,
            }],
            5,
        )
        .unwrap();
    assert!(
        x.store_now_ms.abs_diff(wall) < 2000,
        "{} vs {wall}",
        x.store_now_ms
    );
    assert_eq!(x.record.next_probe_at, x.store_now_ms + 500);
}
