//! attach, sync_now and close: threads joined and sockets closed (counted in /proc/self), typed
//! errors, memory:// without a thread. One test function: the thread and fd counts are
//! per-process, so nothing else may run beside it in this binary.

use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use holdoff::fleet::{memory_store_reset, FleetConfig, FleetState};
use holdoff::{Breaker, BreakerConfig, ManualClock, Outcome, State, SystemClock};
use holdoff_fleet::testing::RedisServer;
use holdoff_fleet::FleetError;

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

fn local_breaker() -> Arc<Breaker> {
    Arc::new(Breaker::new(BreakerConfig::default(), SystemClock::shared()).unwrap())
}

fn wait_for(within: Duration, mut done: impl FnMut() -> bool) {
    let start = StdInstant::now();
    while !done() {
        assert!(start.elapsed() < within, "not within {within:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn attach_sync_and_close_leave_no_thread_or_socket_behind() {
    // memory://: no thread; the fleet moves on sync_now.
    let threads0 = count("/proc/self/task");
    memory_store_reset("attach-test");
    let clock = ManualClock::new();
    let manual =
        |c: &ManualClock| Arc::new(Breaker::new(BreakerConfig::default(), Arc::new(c.clone())).unwrap());
    let (a, b) = (manual(&clock), manual(&clock));
    let config = FleetConfig::new("memory://attach-test", "k");
    let fa = holdoff_fleet::attach(&a, &config).unwrap();
    let fb = holdoff_fleet::attach(&b, &config).unwrap();
    assert!(!fa.is_threaded());
    assert_eq!(count("/proc/self/task"), threads0);
    for _ in 0..5 {
        let p = a.allow().unwrap();
        a.record(p, Outcome::Failure).unwrap();
    }
    assert_eq!(fa.sync_now().unwrap().record.unwrap().state, FleetState::Open);
    assert_eq!(b.snapshot().state, State::Closed);
    assert!(fb.sync_now().unwrap().ok);
    assert_eq!(b.snapshot().state, State::Open);
    // Errors: one fleet per breaker; the field named; rediss without TLS.
    assert_eq!(
        holdoff_fleet::attach(&a, &config).unwrap_err(),
        FleetError::AlreadyAttached
    );
    match holdoff_fleet::attach(&local_breaker(), &FleetConfig::new("http://x", "k")) {
        Err(FleetError::Config(e)) => assert_eq!(e.field, "fleet.url"),
        other => panic!("{other:?}"),
    }
    match holdoff_fleet::attach(
        &local_breaker(),
        &FleetConfig::new("redis://127.0.0.1/?clock=x", "k"),
    ) {
        Err(FleetError::Config(e)) => assert_eq!(e.field, "fleet.url"),
        other => panic!("{other:?}"),
    }
    #[cfg(not(feature = "tls"))]
    assert_eq!(
        holdoff_fleet::attach(&local_breaker(), &FleetConfig::new("rediss://127.0.0.1/", "k")).unwrap_err(),
        FleetError::TlsNotBuilt
    );
    // close: idempotent, unlinks (the breaker can be attached again), sync_now then refuses.
    fa.close();
    fa.close();
    assert_eq!(fa.sync_now().unwrap_err(), FleetError::Closed);
    assert!(!fa.is_attached());
    drop(holdoff_fleet::attach(&a, &config).unwrap());
    drop((fa, fb));

    // Redis: two threads per fleet while attached, none and no socket after close or drop.
    let mut server = RedisServer::unix().unwrap();
    let (threads0, fds0) = (count("/proc/self/task"), count("/proc/self/fd"));
    let breakers: Vec<_> = (0..5).map(|_| local_breaker()).collect();
    let fleets: Vec<_> = breakers
        .iter()
        .map(|b| holdoff_fleet::attach(b, &FleetConfig::new(server.url(), "close")).unwrap())
        .collect();
    wait_for(Duration::from_secs(5), || fleets.iter().all(|f| f.is_attached()));
    assert!(fleets.iter().all(|f| f.is_threaded()));
    assert_eq!(count("/proc/self/task"), threads0 + 10);
    // One command connection and one subscriber connection each (the subscribers connect on
    // their own thread, maybe a moment after the first sync).
    wait_for(Duration::from_secs(5), || count("/proc/self/fd") == fds0 + 10);
    let clients = server.command(&["CLIENT", "LIST"]).unwrap();
    assert_eq!(clients.matches("cmd=").count(), 11, "{clients}"); // + this CLIENT LIST
    let start = StdInstant::now();
    for f in &fleets[..3] {
        f.close();
    }
    drop(fleets);
    println!("closing 5 fleets took {:?}", start.elapsed());
    assert!(start.elapsed() < Duration::from_secs(1), "{:?}", start.elapsed());
    assert_eq!(count("/proc/self/task"), threads0);
    assert_eq!(count("/proc/self/fd"), fds0);

    // Closing while Redis is down is bounded too (reconnect backoff and reads are interrupted).
    let fleets: Vec<_> = breakers
        .iter()
        .map(|b| holdoff_fleet::attach(b, &FleetConfig::new(server.url(), "close")).unwrap())
        .collect();
    wait_for(Duration::from_secs(5), || fleets.iter().all(|f| f.is_attached()));
    server.stop();
    std::thread::sleep(Duration::from_millis(200));
    let start = StdInstant::now();
    drop(fleets);
    println!("closing 5 fleets with redis down took {:?}", start.elapsed());
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    assert_eq!(count("/proc/self/task"), threads0);
    assert_eq!(count("/proc/self/fd"), fds0);
}
