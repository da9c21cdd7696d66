/*
 * holdoff C fast-path tests: holdoff_breaker_fast_path and the header's static inline
 * holdoff_fast_allow / holdoff_fast_record_success (docs/ffi.md "The fast-path word").
 *
 *   - the description's checks (NULL, freed and foreign handles; out untouched on error);
 *   - the word through a breaker's life, value by value (closed 0, a failure pending, open,
 *     half-open, reset, forced open, disabled, the counting flag after the first metrics read,
 *     the timed flag of a window policy), with what the two functions answer at each step and
 *     that a permit admitted on the word is the one holdoff_breaker_allow would give;
 *   - two pthread stress tests on one breaker, mixing fast admissions and successes with
 *     failures recorded through holdoff_breaker_record, with exact books:
 *       * no trip (a threshold out of reach): every admission on the word, every failure
 *         counted, none stale; after a barrier, failures alone add up in the word exactly;
 *       * trips (threshold 3, the manual clock frozen so an open breaker stays open): one trip
 *         per round, seen once in the events; permits held across the trip (and across the
 *         reset after it) are never taken by the fast path and the library calls them stale;
 *         the snapshot's refusals and stale answers equal the threads' own counts; a permit
 *         recorded on the word and recorded again is PERMIT_ALREADY_RECORDED.
 * Prints `N passed, N failed` last; a watchdog aborts the process if a phase never finishes.
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
#define THREADS 4
#define WATCHDOG_SECONDS 120 /* generous for valgrind, which runs the threads one at a time */
#define WATCHDOG_TEXT "120"

#define CHECK_STATUS(expr, want) CHECK((expr) == (want))
#define CHECK_EQ(a, b)                                                                           \
    do {                                                                                         \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);           \
        if (a_ == b_) {                                                                          \
            passed++;                                                                            \
        } else {                                                                                 \
            failed++;                                                                            \
            printf("FAIL %s:%d: %s == %s (%llu != %llu)\n", __FILE__, __LINE__, #a, #b, a_, b_); \
        }                                                                                        \
    } while (0)

/* Layout version 1, as docs/ffi.md gives it. */
#define STATE_OPEN 1ULL
#define STATE_HALF_OPEN 2ULL
#define STATE_FORCED_OPEN 3ULL
#define STATE_DISABLED 4ULL
#define COUNTING (1ULL << 3)
#define TIMED (1ULL << 4)
#define FAILURES(n) ((uint64_t)(n) << 5)
#define EPISODE(e) ((uint64_t)(e) << 32)

/* Calls per thread; HOLDOFF_TEST_THREAD_CALLS lowers it under valgrind (run.sh). */
static int CALLS = 20000;

static void watchdog(int sig) {
    (void)sig;
    static const char msg[] = "fast_path_test: watchdog: no progress for " WATCHDOG_TEXT " s (deadlock?); aborting\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) { /* nothing more to do */
    }
    abort();
}

static holdoff_clock *manual(void) {
    holdoff_clock *c = NULL;
    CHECK_STATUS(holdoff_clock_new_manual(0, &c), HOLDOFF_STATUS_OK);
    return c;
}

static holdoff_breaker *breaker_of(const char *json, const holdoff_clock *clock) {
    holdoff_config *c = NULL;
    CHECK_STATUS(holdoff_config_parse(json, strlen(json), &c), HOLDOFF_STATUS_OK);
    holdoff_breaker *b = NULL;
    CHECK_STATUS(holdoff_breaker_new(c, clock, &b), HOLDOFF_STATUS_OK);
    holdoff_config_free(c);
    return b;
}

static holdoff_fast_path fast_path_of(const holdoff_breaker *b) {
    holdoff_fast_path fp;
    memset(&fp, 0, sizeof fp);
    CHECK_STATUS(holdoff_breaker_fast_path(b, &fp), HOLDOFF_STATUS_OK);
    return fp;
}

static uint64_t word(const holdoff_fast_path *fp) { return __atomic_load_n(fp->word, __ATOMIC_ACQUIRE); }

static uint32_t record(const holdoff_breaker *b, holdoff_permit *p, uint32_t outcome) {
    uint32_t effect = 99;
    CHECK_STATUS(holdoff_breaker_record(b, p, outcome, 0, &effect), HOLDOFF_STATUS_OK);
    return effect;
}

static void test_describe(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker *b = breaker_of("{}", clock);
    holdoff_fast_path fp, untouched;
    memset(&fp, 0xAB, sizeof fp);
    memcpy(&untouched, &fp, sizeof fp);

    CHECK_STATUS(holdoff_breaker_fast_path(NULL, &fp), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "breaker") == 0);
    CHECK_STATUS(holdoff_breaker_fast_path(b, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "out") == 0);
    CHECK(memcmp(&fp, &untouched, sizeof fp) == 0); /* out-parameters only on success */
    if (holdoff_debug_checks_handles()) {
        CHECK_STATUS(holdoff_breaker_fast_path((const holdoff_breaker *)clock, &fp), HOLDOFF_STATUS_INVALID_HANDLE);
        CHECK(memcmp(&fp, &untouched, sizeof fp) == 0);
    }

    CHECK_STATUS(holdoff_breaker_fast_path(b, &fp), HOLDOFF_STATUS_OK);
    CHECK(fp.word != NULL);
    CHECK_EQ(fp.version, HOLDOFF_FAST_PATH_VERSION);
    CHECK_EQ(fp.version, 1);
    CHECK_EQ(fp.admit_mask, HOLDOFF_FAST_PATH_ADMIT_MASK);
    CHECK_EQ(fp.admit_mask, 0xF);
    CHECK(((uintptr_t)fp.word & 7) == 0); /* aligned for a 64-bit atomic load */
    holdoff_permit p;
    CHECK_STATUS(holdoff_breaker_allow(b, &p, NULL), HOLDOFF_STATUS_OK);
    CHECK_EQ(fp.breaker, p.raw_breaker);
    holdoff_fast_path again = fast_path_of(b);
    CHECK(memcmp(&again, &fp, sizeof fp) == 0); /* fixed for the breaker's life */

    /* Another breaker: its own word and id; a permit of one is not recorded on the other's word. */
    holdoff_breaker *other = breaker_of("{}", clock);
    holdoff_fast_path ofp = fast_path_of(other);
    CHECK(ofp.word != fp.word);
    CHECK(ofp.breaker != fp.breaker);
    CHECK_EQ(holdoff_fast_record_success(&ofp, &p), 0);
    CHECK_EQ(p.recorded, 0);
    CHECK_STATUS(holdoff_breaker_record(other, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL), HOLDOFF_STATUS_FOREIGN_PERMIT);
    CHECK_EQ(holdoff_fast_record_success(&fp, &p), 1);

    /* A word of another version is never read: both functions send the caller to the library. */
    holdoff_fast_path future = fp;
    future.version = HOLDOFF_FAST_PATH_VERSION + 1;
    holdoff_permit q;
    memset(&q, 0xCD, sizeof q);
    CHECK_EQ(holdoff_fast_allow(&future, &q), 0);
    CHECK_EQ(q.raw_breaker, 0xCDCDCDCDu); /* untouched */
    CHECK_STATUS(holdoff_breaker_allow(b, &q, NULL), HOLDOFF_STATUS_OK);
    CHECK_EQ(holdoff_fast_record_success(&future, &q), 0);
    CHECK_EQ(q.recorded, 0);
    CHECK_EQ(record(b, &q, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_COUNTED);

    holdoff_breaker_free(other);
    holdoff_breaker_free(b);
    if (holdoff_debug_checks_handles()) { /* a freed handle is refused, nothing read */
        CHECK_STATUS(holdoff_breaker_fast_path(b, &fp), HOLDOFF_STATUS_INVALID_HANDLE);
    }
    holdoff_clock_free(clock);
}

static void test_lifecycle(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker *b = breaker_of(
        "{\"breaker\": {\"trip\": {\"policy\": \"consecutive\", \"threshold\": 3},"
        " \"open_interval\": {\"initial_ms\": 10000, \"multiplier\": 1}, \"recoveries\": 1}}",
        clock);
    holdoff_fast_path fp = fast_path_of(b);
    holdoff_permit p, lib;

    /* Closed, episode 0, nothing pending: the word is 0. */
    CHECK_EQ(word(&fp), 0);
    memset(&p, 0xEE, sizeof p);
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 1);
    CHECK_STATUS(holdoff_breaker_allow(b, &lib, NULL), HOLDOFF_STATUS_OK);
    CHECK(memcmp(&p, &lib, sizeof p) == 0); /* the permit the library gives, byte for byte */
    CHECK_EQ(holdoff_fast_record_success(&fp, &lib), 1);
    CHECK_EQ(lib.recorded, 1);
    CHECK_EQ(holdoff_fast_record_success(&fp, &p), 1);
    /* Recorded on the word: a second record is refused by either path. */
    CHECK_EQ(holdoff_fast_record_success(&fp, &p), 0);
    CHECK_STATUS(holdoff_breaker_record(b, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL),
                 HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED);
    CHECK_STATUS(holdoff_breaker_record(b, &p, HOLDOFF_OUTCOME_FAILURE, 0, NULL),
                 HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED);
    CHECK_EQ(word(&fp), 0);

    /* A failure pending: still admitted on the word, but a success must reach the library,
     * which forgets the failure. */
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 1);
    CHECK_EQ(record(b, &p, HOLDOFF_OUTCOME_FAILURE), HOLDOFF_EFFECT_COUNTED);
    CHECK_EQ(word(&fp), FAILURES(1));
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 1);
    CHECK_EQ(p.raw_episode, 0);
    CHECK_EQ(holdoff_fast_record_success(&fp, &p), 0);
    CHECK_EQ(p.recorded, 0); /* untouched: the library still takes it */
    CHECK_EQ(record(b, &p, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_COUNTED);
    CHECK_EQ(word(&fp), 0);

    /* Three failures in a row trip it: open in episode 1. A permit admitted before the trip is
     * stale after it, on the word and in the library. */
    holdoff_permit held;
    CHECK_EQ(holdoff_fast_allow(&fp, &held), 1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(holdoff_fast_allow(&fp, &p), 1);
        CHECK_EQ(record(b, &p, HOLDOFF_OUTCOME_FAILURE), HOLDOFF_EFFECT_COUNTED);
        CHECK_EQ(word(&fp), i < 2 ? FAILURES(i + 1) : EPISODE(1) | STATE_OPEN);
    }
    holdoff_snapshot s;
    CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
    CHECK_EQ(s.state, HOLDOFF_STATE_OPEN);
    CHECK_EQ(s.episode, 1);
    memset(&p, 0xEE, sizeof p);
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 0);
    CHECK_EQ(p.raw_breaker, 0xEEEEEEEEu); /* untouched */
    holdoff_refusal refusal;
    CHECK_STATUS(holdoff_breaker_allow(b, &p, &refusal), HOLDOFF_STATUS_BREAKER_OPEN);
    CHECK_EQ(holdoff_fast_record_success(&fp, &held), 0);
    CHECK_EQ(record(b, &held, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_STALE);

    /* Half-open: the probe comes from the library only, and its success goes back to it. */
    CHECK_STATUS(holdoff_clock_advance(clock, 10 * SEC), HOLDOFF_STATUS_OK);
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 0);
    holdoff_permit probe;
    CHECK_STATUS(holdoff_breaker_allow(b, &probe, NULL), HOLDOFF_STATUS_OK);
    CHECK_EQ(probe.probe, 1);
    CHECK_EQ(word(&fp), EPISODE(1) | STATE_HALF_OPEN);
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 0);
    CHECK_EQ(holdoff_fast_record_success(&fp, &probe), 0);
    CHECK_EQ(probe.recorded, 0);
    CHECK_EQ(record(b, &probe, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_COUNTED);
    /* Recovered: closed again in the same episode, and the fast path is back. */
    CHECK_EQ(word(&fp), EPISODE(1));
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 1);
    CHECK_EQ(p.raw_episode, 1);
    CHECK_EQ(holdoff_fast_record_success(&fp, &p), 1);

    /* Forced open, then reset: a new episode; a permit of the old one is stale on both paths. */
    CHECK_EQ(holdoff_fast_allow(&fp, &held), 1);
    CHECK_STATUS(holdoff_breaker_force_open(b), HOLDOFF_STATUS_OK);
    CHECK_EQ(word(&fp) & 7, STATE_FORCED_OPEN);
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 0);
    CHECK_STATUS(holdoff_breaker_reset(b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
    CHECK(s.episode > 1);
    CHECK_EQ(word(&fp), EPISODE(s.episode));
    CHECK_EQ(holdoff_fast_record_success(&fp, &held), 0); /* closed and clean, but not its episode */
    CHECK_EQ(record(b, &held, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_STALE);
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 1);
    CHECK_EQ(p.raw_episode, s.episode);
    CHECK_EQ(holdoff_fast_record_success(&fp, &p), 1);

    /* Disabled: admits everything, but through the library (which counts what it sees). */
    CHECK_STATUS(holdoff_breaker_disable(b), HOLDOFF_STATUS_OK);
    CHECK_EQ(word(&fp) & 7, STATE_DISABLED);
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 0);
    CHECK_STATUS(holdoff_breaker_allow(b, &p, NULL), HOLDOFF_STATUS_OK);
    CHECK_EQ(holdoff_fast_record_success(&fp, &p), 0);
    CHECK_EQ(record(b, &p, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_COUNTED);
    CHECK_STATUS(holdoff_breaker_reset(b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
    CHECK_EQ(word(&fp), EPISODE(s.episode));

    /* The first metrics read sets the counting flag for good: from then on every admission
     * and every outcome goes through the library, which counts it. */
    CHECK_EQ(holdoff_fast_allow(&fp, &held), 1);
    holdoff_metric_list *list = NULL;
    CHECK_STATUS(holdoff_breaker_metrics(b, &list), HOLDOFF_STATUS_OK);
    holdoff_metric_list_free(list);
    CHECK_EQ(word(&fp), EPISODE(s.episode) | COUNTING);
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 0);
    CHECK_STATUS(holdoff_breaker_allow(b, &p, NULL), HOLDOFF_STATUS_OK);
    CHECK_EQ(holdoff_fast_record_success(&fp, &p), 0);
    CHECK_EQ(record(b, &p, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_COUNTED);
    /* A permit admitted on the word before the flag was set still belongs to the library. */
    CHECK_EQ(holdoff_fast_record_success(&fp, &held), 0);
    CHECK_EQ(record(b, &held, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_COUNTED);
    CHECK_STATUS(holdoff_breaker_reset(b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
    CHECK_EQ(word(&fp), EPISODE(s.episode) | COUNTING); /* a reset keeps the flag */
    holdoff_breaker_free(b);

    /* A window policy: admission on the word, every outcome through the library (it reads the
     * clock). */
    b = breaker_of("{\"breaker\": {\"trip\": {\"policy\": \"window\", \"threshold\": 2, \"window_ms\": 10000}}}",
                   clock);
    fp = fast_path_of(b);
    CHECK_EQ(word(&fp), TIMED);
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 1);
    CHECK_EQ(p.raw_episode, 0);
    CHECK_EQ(holdoff_fast_record_success(&fp, &p), 0);
    CHECK_EQ(record(b, &p, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_COUNTED);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(holdoff_fast_allow(&fp, &p), 1);
        CHECK_EQ(record(b, &p, HOLDOFF_OUTCOME_FAILURE), HOLDOFF_EFFECT_COUNTED);
    }
    CHECK_EQ(word(&fp), EPISODE(1) | TIMED | STATE_OPEN);
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 0);
    holdoff_breaker_free(b);
    holdoff_clock_free(clock);
}

/* ---- stress: threads on one breaker, fast and slow paths mixed ---- */

typedef struct {
    unsigned long long fast_admits, lib_admits, refusals, failures, fast_successes, lib_successes;
    unsigned long long stale, double_refused, held, held_checked, unexpected;
} books_t;

typedef struct {
    holdoff_breaker *b;
    const holdoff_fast_path *fp;
    pthread_barrier_t *sync;
    int id, rounds, calls;
    books_t k;
} worker_t;

static void unexpected(books_t *k, const char *what, holdoff_status st) {
    k->unexpected++;
    printf("FAIL unexpected status %u (%s) from %s: %s\n", (unsigned)st, holdoff_status_name(st), what,
           holdoff_last_error_message());
}

/* Admits a call as a C user would: on the word, else through the library. 1 admitted. */
static int admit(worker_t *w, holdoff_permit *p) {
    if (holdoff_fast_allow(w->fp, p)) {
        w->k.fast_admits++;
        return 1;
    }
    holdoff_refusal r;
    holdoff_status st = holdoff_breaker_allow(w->b, p, &r);
    if (st == HOLDOFF_STATUS_OK) {
        w->k.lib_admits++;
        return 1;
    }
    if (st == HOLDOFF_STATUS_BREAKER_OPEN)
        w->k.refusals++;
    else
        unexpected(&w->k, "allow", st);
    return 0;
}

/* Records through the library; returns the effect (99 on an error). */
static uint32_t lib_record(worker_t *w, holdoff_permit *p, uint32_t outcome) {
    uint32_t effect = 99;
    holdoff_status st = holdoff_breaker_record(w->b, p, outcome, 0, &effect);
    if (st != HOLDOFF_STATUS_OK) {
        unexpected(&w->k, "record", st);
        return 99;
    }
    if (effect == HOLDOFF_EFFECT_STALE) w->k.stale++;
    return effect;
}

/* Records a success as a C user would; returns 1 if the word sufficed. Every 50th permit taken
 * on the word is recorded again: always refused. */
static int succeed(worker_t *w, holdoff_permit *p, int i) {
    if (holdoff_fast_record_success(w->fp, p)) {
        w->k.fast_successes++;
        if (i % 50 == 0) {
            holdoff_status st = holdoff_breaker_record(w->b, p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL);
            if (st == HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED && !holdoff_fast_record_success(w->fp, p))
                w->k.double_refused++;
            else
                unexpected(&w->k, "second record of a fast-recorded permit", st);
        }
        return 1;
    }
    w->k.lib_successes++;
    lib_record(w, p, HOLDOFF_OUTCOME_SUCCESS);
    return 0;
}

/* Threshold out of reach: a mix, then (after a barrier and a reset of the count by main)
 * failures alone. */
#define TAIL_FAILURES 50
static void *no_trip_worker(void *arg) {
    worker_t *w = arg;
    pthread_barrier_wait(w->sync);
    for (int i = 0; i < w->calls; i++) {
        holdoff_permit p;
        if (!admit(w, &p)) continue;
        if ((i * 7 + w->id) % 5 == 0) {
            w->k.failures++;
            if (lib_record(w, &p, HOLDOFF_OUTCOME_FAILURE) != HOLDOFF_EFFECT_COUNTED)
                unexpected(&w->k, "failure not counted", HOLDOFF_STATUS_OK);
        } else {
            succeed(w, &p, i);
        }
    }
    pthread_barrier_wait(w->sync); /* main records one success: no failure pending */
    pthread_barrier_wait(w->sync);
    for (int i = 0; i < TAIL_FAILURES; i++) {
        holdoff_permit p;
        if (!admit(w, &p)) continue;
        w->k.failures++;
        if (lib_record(w, &p, HOLDOFF_OUTCOME_FAILURE) != HOLDOFF_EFFECT_COUNTED)
            unexpected(&w->k, "failure not counted", HOLDOFF_STATUS_OK);
    }
    return NULL;
}

static void sum_books(worker_t *w, int n, books_t *sum) {
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < n; i++) {
        unsigned long long *s = (unsigned long long *)sum, *k = (unsigned long long *)&w[i].k;
        for (size_t j = 0; j < sizeof *sum / sizeof *s; j++) s[j] += k[j];
    }
}

static void test_stress_no_trip(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker *b =
        breaker_of("{\"breaker\": {\"trip\": {\"policy\": \"consecutive\", \"threshold\": 1000000}}}", clock);
    holdoff_fast_path fp = fast_path_of(b);
    pthread_barrier_t sync;
    pthread_barrier_init(&sync, NULL, THREADS + 1);
    pthread_t t[THREADS];
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].b = b;
        w[i].fp = &fp;
        w[i].sync = &sync;
        w[i].id = i;
        w[i].calls = CALLS;
        pthread_create(&t[i], NULL, no_trip_worker, &w[i]);
    }
    pthread_barrier_wait(&sync);
    pthread_barrier_wait(&sync); /* the mix is over */
    holdoff_permit p;
    CHECK_STATUS(holdoff_breaker_allow(b, &p, NULL), HOLDOFF_STATUS_OK);
    CHECK_EQ(record(b, &p, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_COUNTED);
    CHECK_EQ(word(&fp), 0);
    pthread_barrier_wait(&sync);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&sync);
    alarm(WATCHDOG_SECONDS);

    books_t k;
    sum_books(w, THREADS, &k);
    holdoff_snapshot s;
    CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
    printf("no trip: %d threads x %d calls: %llu admitted on the word, %llu failures, %llu successes on the word, "
           "%llu through the library\n",
           THREADS, CALLS, k.fast_admits, k.failures, k.fast_successes, k.lib_successes);
    CHECK_EQ(k.unexpected, 0);
    /* Closed, no flag: every admission on the word, every call answered once. */
    CHECK_EQ(k.lib_admits, 0);
    CHECK_EQ(k.refusals, 0);
    CHECK_EQ(k.fast_admits, (unsigned long long)THREADS * (CALLS + TAIL_FAILURES));
    CHECK_EQ(k.fast_successes + k.lib_successes + k.failures, k.fast_admits);
    CHECK(k.fast_successes > 0);
    CHECK(k.lib_successes > 0); /* a success after a pending failure took the library */
    CHECK(k.double_refused > 0);
    /* No failure lost: the ones after the barrier add up exactly, in the word and the snapshot. */
    CHECK_EQ(s.failures, THREADS * TAIL_FAILURES);
    CHECK_EQ(word(&fp), FAILURES(THREADS * TAIL_FAILURES));
    CHECK_EQ(s.state, HOLDOFF_STATE_CLOSED);
    CHECK_EQ(s.opens, 0);
    CHECK_EQ(s.stale_answers, 0);
    CHECK_EQ(k.stale, 0);
    /* And a success now must go through the library, which forgets them. */
    CHECK_EQ(holdoff_fast_allow(&fp, &p), 1);
    CHECK_EQ(holdoff_fast_record_success(&fp, &p), 0);
    CHECK_EQ(record(b, &p, HOLDOFF_OUTCOME_SUCCESS), HOLDOFF_EFFECT_COUNTED);
    CHECK_EQ(word(&fp), 0);
    holdoff_breaker_free(b);
    holdoff_clock_free(clock);
}

/* Threshold 3 with the clock frozen: each round every thread first takes two permits on the
 * word and holds them; then the threads mix calls (every 4th a failure) and each ends with 3
 * failures in a row, so the last 3 records of the round are failures and the breaker is open
 * when the round ends, for good (no probe before the clock moves). One held permit is answered
 * while open, the other after main's reset. */
#define TRIP_THRESHOLD 3
static void *trip_worker(void *arg) {
    worker_t *w = arg;
    for (int r = 0; r < w->rounds; r++) {
        holdoff_permit held[2];
        int nheld = 0;
        pthread_barrier_wait(w->sync);
        /* Closed and clean at the start of a round: two permits on the word, held to the end. */
        for (int i = 0; i < 2; i++) {
            if (holdoff_fast_allow(w->fp, &held[nheld])) {
                w->k.fast_admits++;
                w->k.held++;
                nheld++;
            } else {
                unexpected(&w->k, "a round's first admissions on the word", HOLDOFF_STATUS_OK);
            }
        }
        pthread_barrier_wait(w->sync); /* every thread holds its two before anyone records */
        for (int i = 0; i < w->calls + TRIP_THRESHOLD; i++) {
            holdoff_permit p;
            if (!admit(w, &p)) continue;
            if (i >= w->calls || (i + w->id) % 4 == 0) {
                w->k.failures++;
                lib_record(w, &p, HOLDOFF_OUTCOME_FAILURE);
            } else {
                succeed(w, &p, i);
            }
        }
        pthread_barrier_wait(w->sync); /* main: open, one trip */
        pthread_barrier_wait(w->sync);
        /* Admitted before the trip, answered while open: never on the word, stale. */
        if (nheld > 0) {
            if (holdoff_fast_record_success(w->fp, &held[0]) || held[0].recorded)
                unexpected(&w->k, "a held permit was taken on the word while open", HOLDOFF_STATUS_OK);
            else if (lib_record(w, &held[0], HOLDOFF_OUTCOME_SUCCESS) == HOLDOFF_EFFECT_STALE)
                w->k.held_checked++;
        }
        pthread_barrier_wait(w->sync); /* main: reset, closed and clean in a new episode */
        pthread_barrier_wait(w->sync);
        if (nheld > 1) {
            if (holdoff_fast_record_success(w->fp, &held[1]) || held[1].recorded)
                unexpected(&w->k, "a held permit was taken on the word after the reset", HOLDOFF_STATUS_OK);
            else if (lib_record(w, &held[1], HOLDOFF_OUTCOME_SUCCESS) == HOLDOFF_EFFECT_STALE)
                w->k.held_checked++;
        }
    }
    return NULL;
}

static void test_stress_trips(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker *b = breaker_of("{\"breaker\": {\"trip\": {\"policy\": \"consecutive\", \"threshold\": 3},"
                                    " \"open_interval\": {\"initial_ms\": 60000, \"multiplier\": 1}}}",
                                    clock);
    holdoff_fast_path fp = fast_path_of(b);
    const int rounds = 16, calls = CALLS / 10 > 10 ? CALLS / 10 : 10;
    pthread_barrier_t sync;
    pthread_barrier_init(&sync, NULL, THREADS + 1);
    pthread_t t[THREADS];
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].b = b;
        w[i].fp = &fp;
        w[i].sync = &sync;
        w[i].id = i;
        w[i].rounds = rounds;
        w[i].calls = calls;
        pthread_create(&t[i], NULL, trip_worker, &w[i]);
    }
    unsigned long long trips = 0, resets = 0, other_events = 0, rounds_open = 0, words_open = 0, words_reset = 0;
    for (int r = 0; r < rounds; r++) {
        pthread_barrier_wait(&sync);
        pthread_barrier_wait(&sync); /* the held permits are taken */
        pthread_barrier_wait(&sync); /* the round is over */
        holdoff_snapshot s;
        CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
        if (s.state == HOLDOFF_STATE_OPEN) rounds_open++;
        if (word(&fp) == (EPISODE(s.episode) | STATE_OPEN)) words_open++;
        holdoff_state_change ev[8];
        size_t n = 0;
        CHECK_STATUS(holdoff_breaker_drain_events(b, ev, 8, &n), HOLDOFF_STATUS_OK);
        for (size_t i = 0; i < n; i++) {
            if (ev[i].from == HOLDOFF_STATE_CLOSED && ev[i].to == HOLDOFF_STATE_OPEN)
                trips++;
            else
                other_events++;
        }
        pthread_barrier_wait(&sync);
        pthread_barrier_wait(&sync); /* the threads answered held[0] */
        CHECK_STATUS(holdoff_breaker_reset(b), HOLDOFF_STATUS_OK);
        CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
        if (word(&fp) == EPISODE(s.episode)) words_reset++;
        CHECK_STATUS(holdoff_breaker_drain_events(b, ev, 8, &n), HOLDOFF_STATUS_OK);
        for (size_t i = 0; i < n; i++) {
            if (ev[i].from == HOLDOFF_STATE_OPEN && ev[i].to == HOLDOFF_STATE_CLOSED)
                resets++;
            else
                other_events++;
        }
        pthread_barrier_wait(&sync);
        alarm(WATCHDOG_SECONDS);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&sync);

    books_t k;
    sum_books(w, THREADS, &k);
    holdoff_snapshot s;
    CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
    printf("trips: %d threads x %d rounds x %d calls: %llu admitted on the word, %llu by the library, %llu refused, "
           "%llu failures, %llu successes on the word, %llu through the library, %llu stale\n",
           THREADS, rounds, calls + TRIP_THRESHOLD, k.fast_admits, k.lib_admits, k.refusals, k.failures,
           k.fast_successes, k.lib_successes, k.stale);
    CHECK_EQ(k.unexpected, 0);
    /* One trip per round, seen once in the events; each reset seen once too. */
    CHECK_EQ(rounds_open, rounds);
    CHECK_EQ(words_open, rounds);
    CHECK_EQ(words_reset, rounds);
    CHECK_EQ(trips, rounds);
    CHECK_EQ(resets, rounds);
    CHECK_EQ(other_events, 0);
    CHECK_EQ(s.opens, rounds);
    CHECK_EQ(s.events_dropped, 0);
    /* No probe (the clock never moved), so the library admitted nothing the word would not
     * have: every admission was on the word; every refusal is the library's, counted once. */
    CHECK_EQ(s.probes, 0);
    CHECK_EQ(k.lib_admits, 0);
    CHECK_EQ(s.refusals, k.refusals);
    CHECK(k.refusals > 0);
    /* Every permit answered exactly once: on the word, or by the library. */
    CHECK_EQ(k.fast_admits, k.failures + k.fast_successes + k.lib_successes + k.held);
    /* Held across a trip or a reset: never taken on the word, always stale. */
    CHECK_EQ(k.held, (unsigned long long)THREADS * rounds * 2);
    CHECK_EQ(k.held_checked, k.held);
    CHECK_EQ(s.stale_answers, k.stale);
    CHECK(k.stale >= k.held_checked);
    CHECK(k.double_refused > 0);
    CHECK(k.fast_successes > 0);
    holdoff_breaker_free(b);
    holdoff_clock_free(clock);
}

int main(void) {
    signal(SIGALRM, watchdog);
    alarm(WATCHDOG_SECONDS);
    const char *env = getenv("HOLDOFF_TEST_THREAD_CALLS");
    if (env && atoi(env) > 0) CALLS = atoi(env);
    test_describe();
    test_lifecycle();
    test_stress_no_trip();
    test_stress_trips();
    alarm(0);
    CHECK_EQ(holdoff_debug_live_handles(), 0);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
