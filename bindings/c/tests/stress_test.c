/*
 * holdoff C stress test: THREADS pthreads share ONE breaker and ONE retry quota for a
 * bounded number of calls against a scripted, deterministic flaky upstream, on a manual clock
 * that only the coordinator (main) advances, between rounds, behind a barrier.
 *
 * The interleaving is up to the scheduler, so the breaker's trajectory differs from run to
 * run; what must hold in every run is the accounting, checked exactly at the end:
 *   attempts = admissions + refusals          (and the breaker counted the same refusals)
 *   admissions = recorded + cancelled         (every permit answered exactly once)
 *   probe permits = the breaker's probe count
 *   opens = closed->open events = episodes, closes = RECOVERED events (events drained
 *           concurrently by every worker while the others call: the polled analogue of
 *           listeners re-entering the breaker, as the C ABI has no callbacks)
 *   quota: available = capacity - spent + refunded, within [0, capacity]
 *   a second record / return of the same permit or lease is refused, never counted; a lease
 *           given to a second quota is refused (foreign) and neither bucket moves
 *   no status outside the documented set, no handle left alive
 * A watchdog (alarm) aborts the process with a message if a round never finishes.
 *
 * Upstream script, by round r (1 s of manual time each) and global upstream call number n:
 *   r % 16 in 0..3   flaky: n % 7 == 0 fails (a timeout if n is odd), n % 499 == 400 asks to
 *                    retry later (1.5 s)
 *   r % 16 in 4..5   outage: every call fails (the breaker must trip)
 *   r % 16 in 6..15  healthy: every call succeeds (probes pass: the breaker must recover)
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "holdoff.h"

#define SEC 1000000000ULL
#define THREADS 8
#define ROUNDS 64 /* four outage cycles; ends healthy */
#define CALLS_PER_ROUND 40
#define CAPACITY 60
#define WATCHDOG_SECONDS 60 /* generous for valgrind; a normal run takes well under 1 s */
#define WATCHDOG_TEXT "60"

#define CHECK_EQ(a, b)                                                                      \
    do {                                                                                    \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);      \
        if (a_ == b_) {                                                                     \
            passed++;                                                                       \
        } else {                                                                            \
            failed++;                                                                       \
            printf("FAIL %s:%d: %s == %s (%llu != %llu)\n", __FILE__, __LINE__, #a, #b, a_, b_); \
        }                                                                                   \
    } while (0)

static holdoff_clock *clock_;
static holdoff_breaker *breaker;
static holdoff_retry_quota *quota;
static holdoff_retry_quota *other_quota; /* built like `quota`: every lease given to it is foreign */
static pthread_barrier_t round_start, round_end;
static volatile int round_no;           /* written by main between the barriers only */
static unsigned long long upstream_calls; /* __atomic */
static holdoff_quota_lease shared_lease;  /* every worker tries to give it back: one wins */

typedef struct {
    unsigned long long attempts, admitted, refused, recorded, cancelled, probes;
    unsigned long long spent, refunded, quota_empty, double_refused, foreign_refused, unexpected;
    unsigned long long ev_opened, ev_recovered, ev_other, shared_returned;
    unsigned long long effects[3];
} counters_t;

static void watchdog(int sig) {
    (void)sig;
    static const char msg[] = "stress_test: watchdog: no progress for " WATCHDOG_TEXT " s (deadlock?); aborting\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) { /* nothing more to do */
    }
    abort();
}

static void unexpected(counters_t *c, const char *what, holdoff_status st) {
    c->unexpected++;
    printf("FAIL unexpected status %u (%s) from %s: %s\n", (unsigned)st, holdoff_status_name(st), what,
           holdoff_last_error_message());
}

/* The scripted upstream: which outcome call number n gets in round r. */
static uint32_t upstream(unsigned long long n, int r, uint64_t *retry_later_ns) {
    int phase = r % 16;
    *retry_later_ns = 0;
    if (phase >= 6) return HOLDOFF_OUTCOME_SUCCESS;
    if (phase >= 4) return HOLDOFF_OUTCOME_FAILURE;
    if (n % 499 == 400) {
        *retry_later_ns = 1500000000ULL;
        return HOLDOFF_OUTCOME_RETRY_LATER;
    }
    if (n % 7 == 0) return n % 2 ? HOLDOFF_OUTCOME_TIMEOUT : HOLDOFF_OUTCOME_FAILURE;
    return HOLDOFF_OUTCOME_SUCCESS;
}

static void drain(counters_t *c, size_t max) {
    holdoff_state_change ev[4];
    size_t n = 0;
    holdoff_status st = holdoff_breaker_drain_events(breaker, ev, max < 4 ? max : 4, &n);
    if (st != HOLDOFF_STATUS_OK) {
        unexpected(c, "drain_events", st);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        /* A trip (or a retry-later) from closed is what the breaker counts as an open. */
        if (ev[i].from == HOLDOFF_STATE_CLOSED && ev[i].to == HOLDOFF_STATE_OPEN)
            c->ev_opened++;
        else if (ev[i].reason == HOLDOFF_REASON_RECOVERED)
            c->ev_recovered++;
        else
            c->ev_other++;
    }
}

/* One attempt through the breaker; returns the outcome recorded, or -1 if refused/failed. */
static int attempt(counters_t *c, int r, int k) {
    holdoff_permit p;
    holdoff_refusal refusal;
    c->attempts++;
    holdoff_status st = holdoff_breaker_allow(breaker, &p, &refusal);
    if (st == HOLDOFF_STATUS_BREAKER_OPEN) {
        c->refused++;
        return -1;
    }
    if (st != HOLDOFF_STATUS_OK) {
        unexpected(c, "allow", st);
        return -1;
    }
    c->admitted++;
    if (p.probe) c->probes++;
    unsigned long long n = __atomic_fetch_add(&upstream_calls, 1, __ATOMIC_RELAXED);
    uint64_t delay = 0;
    uint32_t outcome = upstream(n, r, &delay);
    if (n % 11 == 5) outcome = HOLDOFF_OUTCOME_CANCELLED; /* the caller gave up on it */
    uint32_t effect = 99;
    st = holdoff_breaker_record(breaker, &p, outcome, delay, &effect);
    if (st != HOLDOFF_STATUS_OK) {
        unexpected(c, "record", st);
        return -1;
    }
    if (effect > 2) {
        unexpected(c, "record effect", HOLDOFF_STATUS_OK);
        return -1;
    }
    c->effects[effect]++;
    if (outcome == HOLDOFF_OUTCOME_CANCELLED)
        c->cancelled++;
    else
        c->recorded++;
    if (k % 17 == 0) { /* a second record of the same permit never counts */
        st = holdoff_breaker_record(breaker, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL);
        if (st == HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED)
            c->double_refused++;
        else
            unexpected(c, "second record", st);
    }
    return (int)outcome;
}

static void call(counters_t *c, int r, int k) {
    int outcome = attempt(c, r, k);
    if (outcome != HOLDOFF_OUTCOME_FAILURE && outcome != HOLDOFF_OUTCOME_TIMEOUT) return;
    /* One retry, paid from the shared quota. */
    holdoff_quota_lease lease;
    holdoff_status st = holdoff_retry_quota_acquire(quota, outcome == HOLDOFF_OUTCOME_TIMEOUT, &lease);
    if (st != HOLDOFF_STATUS_OK) {
        unexpected(c, "quota_acquire", st);
        return;
    }
    if (lease.available > CAPACITY) unexpected(c, "lease.available > capacity", st);
    if (!lease.acquired) {
        c->quota_empty++;
        return;
    }
    c->spent += lease.cost;
    if (attempt(c, r, k + 1) != HOLDOFF_OUTCOME_SUCCESS) return; /* tokens stay spent */
    if (k % 11 == 0) { /* given to the wrong quota first: refused, the lease stays usable */
        st = holdoff_retry_quota_on_success(other_quota, &lease);
        if (st == HOLDOFF_STATUS_FOREIGN_PERMIT)
            c->foreign_refused++;
        else
            unexpected(c, "foreign quota_on_success", st);
    }
    st = holdoff_retry_quota_on_success(quota, &lease);
    if (st != HOLDOFF_STATUS_OK) {
        unexpected(c, "quota_on_success", st);
        return;
    }
    c->refunded += lease.cost;
    if (k % 13 == 0) { /* a lease given back twice refunds nothing */
        st = holdoff_retry_quota_on_success(quota, &lease);
        if (st == HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED)
            c->double_refused++;
        else
            unexpected(c, "second quota_on_success", st);
    }
}

static void *worker(void *arg) {
    counters_t *c = arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&round_start);
        int rr = round_no;
        for (int k = 0; k < CALLS_PER_ROUND; k++) {
            call(c, rr, k);
            if (k % 8 == 7) drain(c, 1 + (size_t)(k % 3));
        }
        pthread_barrier_wait(&round_end);
    }
    holdoff_status st = holdoff_retry_quota_on_success(other_quota, &shared_lease);
    if (st == HOLDOFF_STATUS_FOREIGN_PERMIT)
        c->foreign_refused++;
    else
        unexpected(c, "shared lease, foreign", st);
    st = holdoff_retry_quota_on_success(quota, &shared_lease);
    if (st == HOLDOFF_STATUS_OK)
        c->shared_returned++;
    else if (st != HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED)
        unexpected(c, "shared lease", st);
    return NULL;
}

int main(void) {
    signal(SIGALRM, watchdog);
    alarm(WATCHDOG_SECONDS);

    CHECK_EQ(holdoff_clock_new_manual(0, &clock_), HOLDOFF_STATUS_OK);
    char json[256];
    snprintf(json, sizeof json,
             "{\"breaker\": {\"trip\": {\"policy\": \"consecutive\", \"threshold\": 5},"
             " \"open_interval\": {\"initial_ms\": %llu, \"multiplier\": 1}, \"recoveries\": 3},"
             " \"quota\": {\"capacity\": %d, \"retry_cost\": 5, \"timeout_cost\": 10}}",
             (unsigned long long)(2 * SEC / 1000000), CAPACITY);
    holdoff_config *config = NULL;
    CHECK_EQ(holdoff_config_parse(json, strlen(json), &config), HOLDOFF_STATUS_OK);
    CHECK_EQ(holdoff_breaker_new(config, clock_, &breaker), HOLDOFF_STATUS_OK);
    CHECK_EQ(holdoff_retry_quota_new(config, &quota), HOLDOFF_STATUS_OK);
    CHECK_EQ(holdoff_retry_quota_new(config, &other_quota), HOLDOFF_STATUS_OK);
    holdoff_config_free(config);
    CHECK_EQ(holdoff_retry_quota_acquire(quota, 0, &shared_lease), HOLDOFF_STATUS_OK);
    CHECK(shared_lease.acquired == 1);
    if (failed) return 1;

    pthread_barrier_init(&round_start, NULL, THREADS + 1);
    pthread_barrier_init(&round_end, NULL, THREADS + 1);
    pthread_t t[THREADS];
    counters_t c[THREADS];
    memset(c, 0, sizeof c);
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, &c[i]);
    for (int r = 0; r < ROUNDS; r++) {
        round_no = r;
        pthread_barrier_wait(&round_start);
        pthread_barrier_wait(&round_end);
        alarm(WATCHDOG_SECONDS); /* progress: re-arm */
        if (holdoff_clock_advance(clock_, SEC) != HOLDOFF_STATUS_OK) CHECK(!"clock_advance");
    }
    counters_t sum;
    memset(&sum, 0, sizeof sum);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        unsigned long long *s = (unsigned long long *)&sum, *w = (unsigned long long *)&c[i];
        for (size_t j = 0; j < sizeof sum / sizeof *s; j++) s[j] += w[j];
    }
    alarm(0);
    for (;;) { /* what the workers left queued */
        unsigned long long before = sum.ev_opened + sum.ev_recovered + sum.ev_other;
        drain(&sum, 4);
        if (sum.ev_opened + sum.ev_recovered + sum.ev_other == before) break;
    }

    holdoff_snapshot s;
    CHECK_EQ(holdoff_breaker_snapshot(breaker, &s), HOLDOFF_STATUS_OK);
    uint64_t available = 0, other_available = 0;
    CHECK_EQ(holdoff_retry_quota_available(quota, &available), HOLDOFF_STATUS_OK);
    CHECK_EQ(holdoff_retry_quota_available(other_quota, &other_available), HOLDOFF_STATUS_OK);

    printf("stress: %d threads x %d rounds x %d calls: attempts %llu (admitted %llu, refused %llu), "
           "recorded %llu, cancelled %llu, probes %llu, opens %llu, closes %llu, quota spent %llu "
           "refunded %llu empty %llu, available %llu\n",
           THREADS, ROUNDS, CALLS_PER_ROUND, sum.attempts, sum.admitted, sum.refused, sum.recorded,
           sum.cancelled, sum.probes, (unsigned long long)s.opens, (unsigned long long)s.closes, sum.spent,
           sum.refunded, sum.quota_empty, (unsigned long long)available);

    CHECK_EQ(sum.unexpected, 0);
    /* Admission accounting. */
    CHECK_EQ(sum.attempts, sum.admitted + sum.refused);
    CHECK_EQ(s.refusals, sum.refused);
    CHECK_EQ(sum.admitted, sum.recorded + sum.cancelled);
    CHECK_EQ(sum.effects[HOLDOFF_EFFECT_IGNORED], sum.cancelled);
    CHECK_EQ(sum.effects[HOLDOFF_EFFECT_COUNTED] + sum.effects[HOLDOFF_EFFECT_STALE], sum.recorded);
    CHECK_EQ(s.probes, sum.probes);
    CHECK_EQ(s.probes_in_flight, 0);
    /* Events: none lost, and they agree with the counters. */
    CHECK_EQ(s.events_dropped, 0);
    CHECK_EQ(s.opens, sum.ev_opened);
    CHECK_EQ(s.episode, s.opens); /* each open from closed starts an episode */
    CHECK_EQ(s.closes, sum.ev_recovered);
    /* The script forces a trip per outage and a recovery per healthy phase. */
    CHECK(s.opens >= ROUNDS / 16);
    CHECK(s.closes >= ROUNDS / 16);
    CHECK_EQ(s.state, HOLDOFF_STATE_CLOSED);
    CHECK(sum.refused > 0);
    /* Quota: every token taken is either still spent or refunded exactly once. */
    CHECK_EQ(sum.shared_returned, 1);
    unsigned long long spent = sum.spent + shared_lease.cost, refunded = sum.refunded + shared_lease.cost;
    CHECK(refunded <= spent);
    CHECK_EQ(available, CAPACITY - spent + refunded);
    CHECK(available <= CAPACITY);
    CHECK(sum.double_refused > 0);
    /* Foreign give-backs: refused every time (the shared lease once per thread), and the
     * second quota never moved. */
    CHECK(sum.foreign_refused > THREADS);
    CHECK_EQ(other_available, CAPACITY);

    holdoff_retry_quota_free(quota);
    holdoff_retry_quota_free(other_quota);
    holdoff_breaker_free(breaker);
    holdoff_clock_free(clock_);
    pthread_barrier_destroy(&round_start);
    pthread_barrier_destroy(&round_end);
    CHECK_EQ(holdoff_debug_live_handles(), 0);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
