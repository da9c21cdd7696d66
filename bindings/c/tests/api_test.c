/*
 * holdoff C API tests: the bad-input contract (NULL, freed handles, invalid enums, NaN, zero
 * and refused configurations, wrong-size execution options, double records, foreign permits,
 * leases given back twice or to another quota, integers that are not HTTP statuses, caught
 * panics), thread safety of a shared breaker, bounded groups, the constructors' NULL
 * configuration and the neutral JSON written back (`holdoff_config_to_json`), and the execution
 * API (misuse, options, a deadline storm of 20 callers), fleets on the in-process store (sync,
 * detach and re-attach, refused fleet configurations). Time moves only through a manual clock.
 * Prints `N passed, N failed`.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "holdoff.h"

#define MS 1000000ULL
#define SEC (1000 * MS)

#define CHECK_STATUS(expr, want) CHECK((expr) == (want))

static holdoff_clock *manual(void) {
    holdoff_clock *c = NULL;
    CHECK_STATUS(holdoff_clock_new_manual(0, &c), HOLDOFF_STATUS_OK);
    return c;
}

/* A configuration in the neutral JSON format, from a printf format: the one way to configure
 * an object. NULL (and a failed check) if the library refuses it. */
static holdoff_config *config(const char *fmt, ...) {
    char json[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(json, sizeof json, fmt, ap);
    va_end(ap);
    holdoff_config *c = NULL;
    CHECK_STATUS(holdoff_config_parse(json, strlen(json), &c), HOLDOFF_STATUS_OK);
    return c;
}

static holdoff_breaker *breaker(holdoff_clock *clock) {
    holdoff_config *c = config("{\"breaker\": {\"open_interval\": {\"initial_ms\": 60000, \"multiplier\": 1}}}");
    holdoff_breaker *b = NULL;
    CHECK_STATUS(holdoff_breaker_new(c, clock, &b), HOLDOFF_STATUS_OK);
    holdoff_config_free(c); /* the breaker does not need it */
    return b;
}

static void test_versions(void) {
    CHECK(holdoff_abi_version() == HOLDOFF_ABI_VERSION);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", HOLDOFF_VERSION_MAJOR, HOLDOFF_VERSION_MINOR, HOLDOFF_VERSION_PATCH);
    CHECK(strcmp(holdoff_version(), want) == 0);
    CHECK(strcmp(holdoff_status_name(HOLDOFF_STATUS_INVALID_CONFIG), "invalid_config") == 0);
    CHECK(strcmp(holdoff_status_message(12345), "unknown status") == 0);
    CHECK(holdoff_status_name(12345) == NULL);
    CHECK(holdoff_state_name(99) == NULL);
    /* Appended codes: the older ones keep their numbers, the names are the core's. */
    CHECK(HOLDOFF_GIVE_UP_REASON_CANCELLED == 7 && HOLDOFF_GIVE_UP_REASON_RETRY_AFTER_ABOVE_CAP == 8);
    CHECK(strcmp(holdoff_give_up_reason_name(HOLDOFF_GIVE_UP_REASON_RETRY_AFTER_ABOVE_CAP),
                 "retry_after_above_cap") == 0);
    CHECK(strcmp(holdoff_give_up_reason_name(HOLDOFF_GIVE_UP_REASON_BUDGET_SPENT), "budget_spent") == 0);
    CHECK(HOLDOFF_HINT_SOURCE_NONE == 3 && HOLDOFF_HINT_SOURCE_RETRY_AFTER_MS == 4 &&
          HOLDOFF_HINT_SOURCE_X_MS_RETRY_AFTER_MS == 5 && HOLDOFF_HINT_SOURCE_RATELIMIT == 6);
    CHECK(strcmp(holdoff_hint_source_name(HOLDOFF_HINT_SOURCE_RETRY_AFTER_MS), "retry_after_ms") == 0);
    CHECK(strcmp(holdoff_hint_source_name(HOLDOFF_HINT_SOURCE_X_MS_RETRY_AFTER_MS), "x_ms_retry_after_ms") == 0);
    CHECK(strcmp(holdoff_hint_source_name(HOLDOFF_HINT_SOURCE_RATELIMIT), "ratelimit") == 0);
    CHECK(strcmp(holdoff_hint_source_name(HOLDOFF_HINT_SOURCE_NONE), "none") == 0);
    CHECK(holdoff_hint_source_name(HOLDOFF_HINT_SOURCE_RATELIMIT + 1) == NULL);
    CHECK(strcmp(holdoff_unusable_name(HOLDOFF_UNUSABLE_NONE), "none") == 0);
    CHECK(strcmp(holdoff_state_name(HOLDOFF_STATE_HALF_OPEN), "half_open") == 0);
}

static void test_null_parameters(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker *b = breaker(clock);
    holdoff_permit p;
    holdoff_breaker *out = (holdoff_breaker *)0x1; /* must stay untouched on error */
    CHECK_STATUS(holdoff_breaker_new(NULL, NULL, &out), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "clock") == 0);
    CHECK_STATUS(holdoff_breaker_new(NULL, clock, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "out") == 0);
    CHECK(out == (holdoff_breaker *)0x1);
    CHECK_STATUS(holdoff_breaker_allow(NULL, &p, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_breaker_allow(b, NULL, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_breaker_record(b, NULL, HOLDOFF_OUTCOME_SUCCESS, 0, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_breaker_snapshot(b, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_breaker_drain_events(b, NULL, 4, &(size_t){0}), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_clock_set(NULL, 1), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_config_parse(NULL, 0, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_parse_retry_after(NULL, 3, 0, &(holdoff_retry_after){0, 0, 0}),
                 HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_policy_new(b, NULL, NULL, NULL, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    holdoff_breaker_group *g = (holdoff_breaker_group *)0x1;
    CHECK_STATUS(holdoff_breaker_group_new(NULL, NULL, &g), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "clock") == 0);
    CHECK_STATUS(holdoff_breaker_group_new(NULL, clock, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(g == (holdoff_breaker_group *)0x1);
    CHECK_STATUS(holdoff_retry_budget_new(NULL, NULL, &(holdoff_retry_budget *){NULL}), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "clock") == 0);
    CHECK_STATUS(holdoff_retry_quota_new(NULL, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_classifier_new(NULL, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "out") == 0);
    CHECK_STATUS(holdoff_config_to_json(NULL, NULL, 0, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "out_len") == 0);
    CHECK_STATUS(holdoff_config_to_json(NULL, NULL, 8, &(size_t){0}), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "buf") == 0);
    CHECK_STATUS(holdoff_breaker_group_snapshot(NULL, &(holdoff_group_snapshot){0, 0, 0, 0}), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_breaker_group_keys(NULL, &(holdoff_key_list *){NULL}), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_key_list_len(NULL, &(size_t){0}), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_key_list_free(NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_on_success(NULL, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "quota") == 0);
    /* _free(NULL) is a no-op. */
    CHECK_STATUS(holdoff_breaker_free(NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_policy_free(NULL), HOLDOFF_STATUS_OK);
    holdoff_breaker_free(b);
    holdoff_clock_free(clock);
}

/* Every refusal names its field as the conformance suite does, at parse time: a configuration
 * that parses builds every object. */
static void test_bad_config(void) {
    static const struct {
        const char *json, *field;
    } refused[] = {
        {"{\"breaker\": {\"open_interval\": {\"multiplier\": \"NaN\"}}}", "breaker.open_interval.multiplier"},
        {"{\"breaker\": {\"open_interval\": {\"initial_ms\": 0}}}", "breaker.open_interval.initial"},
        {"{\"breaker\": {\"open_interval\": {\"initial_ms\": \"NaN\"}}}", "breaker.open_interval.initial"},
        {"{\"breaker\": {\"open_interval\": {\"jitter\": \"Infinity\"}}}", "breaker.open_interval.jitter"},
        {"{\"breaker\": {\"trip\": {\"policy\": \"rate\", \"threshold\": 1.5, \"min_calls\": 10, \"window_ms\": 10000}}}",
         "breaker.trip.threshold"},
        /* incident 3: an episode budget with no room for two capped waits */
        {"{\"budget\": {\"max_rate_limit_duration_ms\": 300000, \"retry_after_cap_ms\": 300000}}",
         "budget.max_rate_limit_duration"},
        {"{\"quota\": {\"capacity\": 500, \"retry_cost\": 501}}", "quota.retry_cost"},
        {"{\"classifier\": {\"failure_statuses\": [403, 99]}}", "classifier.failure_statuses"},
        /* A group bound of 0 is refused, not taken as the default. */
        {"{\"breaker\": {}, \"group\": {\"max_keys\": 0}}", "group.max_keys"},
        {"{\"group\": {\"max_keys\": 100000001}}", "group.max_keys"},
        /* A group's template is checked too, naming its own field. */
        {"{\"breaker\": {\"open_interval\": {\"multiplier\": \"NaN\"}}, \"group\": {\"max_keys\": 10}}",
         "breaker.open_interval.multiplier"},
        /* Not the format at all: an unknown key, a policy or a boolean that is not one. */
        {"{\"breaker\": {\"recoverys\": 3}}", "config"},
        {"{\"breaker\": {\"trip\": {\"policy\": \"sometimes\"}}}", "config"},
        {"{\"budget\": {\"give_up_above_cap\": 2}}", "config"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        holdoff_config *cfg = (holdoff_config *)0x1; /* must stay untouched */
        CHECK_STATUS(holdoff_config_parse(refused[i].json, strlen(refused[i].json), &cfg), HOLDOFF_STATUS_INVALID_CONFIG);
        if (strcmp(holdoff_last_error_field(), refused[i].field) != 0)
            printf("  %s: field %s, want %s\n", refused[i].json, holdoff_last_error_field(), refused[i].field);
        CHECK(strcmp(holdoff_last_error_field(), refused[i].field) == 0);
        CHECK(cfg == (holdoff_config *)0x1);
    }
}

/* NULL is the core's defaults for every constructor; the neutral JSON written back holds every
 * part and field, parses to the same configuration, and is written only into a buffer that holds
 * it and its NUL. */
static void test_defaults_and_json(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker *b = NULL;
    holdoff_breaker_group *g = NULL;
    holdoff_retry_budget *budget = NULL;
    holdoff_retry_quota *q = NULL;
    holdoff_classifier *cls = NULL;
    CHECK_STATUS(holdoff_breaker_new(NULL, clock, &b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_group_new(NULL, clock, &g), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_budget_new(NULL, clock, &budget), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_new(NULL, &q), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_classifier_new(NULL, &cls), HOLDOFF_STATUS_OK);
    /* The default breaker trips on the fifth consecutive failure and opens for 30 s. */
    holdoff_permit p;
    holdoff_snapshot snap;
    for (int i = 0; i < 5; i++) {
        CHECK_STATUS(holdoff_breaker_allow(b, &p, NULL), HOLDOFF_STATUS_OK);
        CHECK_STATUS(holdoff_breaker_record(b, &p, HOLDOFF_OUTCOME_FAILURE, 0, NULL), HOLDOFF_STATUS_OK);
    }
    CHECK_STATUS(holdoff_breaker_snapshot(b, &snap), HOLDOFF_STATUS_OK);
    CHECK(snap.state == HOLDOFF_STATE_OPEN && snap.has_retry_after && snap.retry_after_ns == 30 * SEC);
    holdoff_group_snapshot gs;
    CHECK_STATUS(holdoff_breaker_group_snapshot(g, &gs), HOLDOFF_STATUS_OK);
    CHECK(gs.max_keys == HOLDOFF_GROUP_DEFAULT_MAX_KEYS);
    uint64_t tokens = 0;
    CHECK_STATUS(holdoff_retry_quota_available(q, &tokens), HOLDOFF_STATUS_OK);
    CHECK(tokens == 500);
    holdoff_classification cl;
    const char *ra = "Retry-After", *v = "7";
    holdoff_header h = {ra, strlen(ra), v, strlen(v)};
    CHECK_STATUS(holdoff_classifier_classify(cls, 503, &h, 1, 0, &cl), HOLDOFF_STATUS_OK);
    CHECK(cl.outcome == HOLDOFF_OUTCOME_RETRY_LATER && cl.retry_later_ns == 7 * SEC);

    /* The defaults as JSON: sized first, refused into a buffer one byte short. */
    size_t len = 0, got = 12345;
    CHECK_STATUS(holdoff_config_to_json(NULL, NULL, 0, &len), HOLDOFF_STATUS_OK);
    char *buf = malloc(len + 1);
    memset(buf, 'x', len + 1);
    CHECK_STATUS(holdoff_config_to_json(NULL, buf, len, &got), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "capacity") == 0);
    CHECK(got == 12345 && buf[0] == 'x');
    CHECK_STATUS(holdoff_config_to_json(NULL, buf, len + 1, &got), HOLDOFF_STATUS_OK);
    CHECK(got == len && buf[len] == '\0' && strlen(buf) == len);
    cJSON *doc = cJSON_Parse(buf);
    CHECK(doc != NULL);
    const cJSON *br = cJSON_GetObjectItemCaseSensitive(doc, "breaker");
    const cJSON *open = cJSON_GetObjectItemCaseSensitive(br, "open_interval");
    CHECK(cJSON_GetObjectItemCaseSensitive(open, "initial_ms")->valuedouble == 30000);
    CHECK(cJSON_GetObjectItemCaseSensitive(open, "max_ms")->valuedouble == 300000);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(br, "probe_timeout_ms")));
    CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(br, "trip"), "policy")->valuestring,
                 "consecutive") == 0);
    const cJSON *bud = cJSON_GetObjectItemCaseSensitive(doc, "budget");
    CHECK(cJSON_GetObjectItemCaseSensitive(bud, "max_rate_limit_duration_ms")->valuedouble == 1800000);
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(bud, "give_up_above_cap")));
    CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "quota"), "retry_cost")->valuedouble == 5);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "classifier"),
                                                              "retry_after_statuses")) == 2);
    CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "group"), "max_keys")->valuedouble ==
          HOLDOFF_GROUP_DEFAULT_MAX_KEYS);
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(doc, "execute");
    CHECK(cJSON_GetObjectItemCaseSensitive(ex, "total_timeout_ms")->valuedouble ==
          HOLDOFF_EXECUTION_DEFAULT_TOTAL_TIMEOUT_NS / 1e6);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(ex, "attempt_timeout_ms")));
    cJSON_Delete(doc);

    /* Written back, a parsed configuration has every part; parsed again, it writes the same. */
    holdoff_config *c = config("{\"budget\": {\"max_retries\": 2}, \"execute\": {\"total_timeout_ms\": null}}");
    uint32_t parts = 0;
    char again[2048], twice[2048];
    CHECK_STATUS(holdoff_config_to_json(c, again, sizeof again, &len), HOLDOFF_STATUS_OK);
    holdoff_config *c2 = NULL;
    CHECK_STATUS(holdoff_config_parse(again, len, &c2), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_config_parts(c2, &parts), HOLDOFF_STATUS_OK);
    CHECK(parts == (HOLDOFF_CONFIG_BREAKER | HOLDOFF_CONFIG_BUDGET | HOLDOFF_CONFIG_QUOTA | HOLDOFF_CONFIG_CLASSIFIER |
                    HOLDOFF_CONFIG_GROUP | HOLDOFF_CONFIG_EXECUTE));
    CHECK_STATUS(holdoff_config_to_json(c2, twice, sizeof twice, &got), HOLDOFF_STATUS_OK);
    CHECK(got == len && strcmp(again, twice) == 0);
    CHECK(strstr(again, "\"max_retries\":2") != NULL && strstr(again, "\"total_timeout_ms\":null") != NULL);
    holdoff_execution_options eo;
    CHECK_STATUS(holdoff_config_execution_options(c2, &eo), HOLDOFF_STATUS_OK);
    CHECK(eo.total_timeout == HOLDOFF_LIMIT_NONE);

    free(buf);
    holdoff_config_free(c);
    holdoff_config_free(c2);
    holdoff_breaker_free(b);
    holdoff_breaker_group_free(g);
    holdoff_retry_budget_free(budget);
    holdoff_retry_quota_free(q);
    holdoff_classifier_free(cls);
    holdoff_clock_free(clock);
}

static void test_permits(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker *a = breaker(clock), *b = breaker(clock);
    holdoff_permit p;
    uint32_t effect = 99;
    CHECK_STATUS(holdoff_breaker_allow(a, &p, NULL), HOLDOFF_STATUS_OK);
    CHECK(p.episode == 0 && p.probe == 0 && p.recorded == 0);
    /* An unknown outcome is refused and leaves the permit unrecorded. */
    CHECK_STATUS(holdoff_breaker_record(a, &p, 42, 0, &effect), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "outcome") == 0);
    CHECK(p.recorded == 0 && effect == 99);
    /* A foreign breaker refuses it; it stays usable on its own. */
    CHECK_STATUS(holdoff_breaker_record(b, &p, HOLDOFF_OUTCOME_SUCCESS, 0, &effect), HOLDOFF_STATUS_FOREIGN_PERMIT);
    CHECK(p.recorded == 0);
    CHECK_STATUS(holdoff_breaker_record(a, &p, HOLDOFF_OUTCOME_SUCCESS, 0, &effect), HOLDOFF_STATUS_OK);
    CHECK(effect == HOLDOFF_EFFECT_COUNTED && p.recorded == 1);
    CHECK_STATUS(holdoff_breaker_record(a, &p, HOLDOFF_OUTCOME_SUCCESS, 0, &effect),
                 HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED);
    holdoff_breaker_free(a);
    holdoff_breaker_free(b);
    holdoff_clock_free(clock);
}

static void test_open_refusal_and_events(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker *b = breaker(clock);
    holdoff_permit p;
    holdoff_refusal r;
    for (int i = 0; i < 5; i++) {
        CHECK_STATUS(holdoff_breaker_allow(b, &p, NULL), HOLDOFF_STATUS_OK);
        CHECK_STATUS(holdoff_breaker_record(b, &p, HOLDOFF_OUTCOME_FAILURE, 0, NULL), HOLDOFF_STATUS_OK);
    }
    CHECK_STATUS(holdoff_clock_set(clock, 10 * SEC), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_allow(b, &p, &r), HOLDOFF_STATUS_BREAKER_OPEN);
    CHECK(r.state == HOLDOFF_STATE_OPEN && r.has_retry_after && r.retry_after_ns == 50 * SEC && r.episode == 1);
    CHECK_STATUS(holdoff_clock_set(clock, 5 * SEC), HOLDOFF_STATUS_CLOCK_BACKWARDS);
    CHECK_STATUS(holdoff_clock_set(clock, 60 * SEC), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_allow(b, &p, &r), HOLDOFF_STATUS_OK);
    CHECK(p.probe == 1 && p.episode == 1);
    CHECK_STATUS(holdoff_breaker_record(b, &p, HOLDOFF_OUTCOME_RETRY_LATER, 90 * SEC, NULL), HOLDOFF_STATUS_OK);
    holdoff_state_change ev[1];
    size_t n = 0, total = 0;
    uint32_t reasons[4];
    /* Drained one at a time: the rest stays queued, in order. */
    do {
        CHECK_STATUS(holdoff_breaker_drain_events(b, ev, 1, &n), HOLDOFF_STATUS_OK);
        if (n == 1 && total < 4) reasons[total] = ev[0].reason;
        total += n;
    } while (n == 1);
    CHECK(total == 3);
    CHECK(reasons[0] == HOLDOFF_REASON_TRIPPED && reasons[1] == HOLDOFF_REASON_PROBE_ADMITTED &&
          reasons[2] == HOLDOFF_REASON_RETRY_LATER);
    CHECK(ev[0].has_requested_delay == 0 || ev[0].requested_delay_ns == 90 * SEC);
    holdoff_snapshot s;
    CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
    CHECK(s.state == HOLDOFF_STATE_OPEN && s.has_retry_after && s.retry_after_ns == 90 * SEC && s.opens == 1);
    CHECK_STATUS(holdoff_breaker_force_open(b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_allow(b, &p, &r), HOLDOFF_STATUS_BREAKER_OPEN);
    CHECK(r.state == HOLDOFF_STATE_FORCED_OPEN && r.has_retry_after == 0);
    CHECK_STATUS(holdoff_breaker_reset(b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_allow(b, &p, &r), HOLDOFF_STATUS_OK);
    holdoff_breaker_free(b);
    holdoff_clock_free(clock);
}

static void test_clocks(void) {
    holdoff_clock *sys = NULL, *m = NULL;
    uint64_t t = 0;
    CHECK_STATUS(holdoff_clock_new_system(&sys), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_clock_set(sys, 5), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK_STATUS(holdoff_clock_advance(sys, 5), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK_STATUS(holdoff_clock_new_manual(1000 * SEC, &m), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_clock_advance(m, 1500 * MS), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_clock_now(m, &t), HOLDOFF_STATUS_OK);
    CHECK(t == 1500 * MS);
    CHECK_STATUS(holdoff_clock_wall_now(m, &t), HOLDOFF_STATUS_OK);
    CHECK(t == 1000 * SEC + 1500 * MS);
    CHECK_STATUS(holdoff_clock_advance(m, UINT64_MAX), HOLDOFF_STATUS_OK); /* saturates */
    CHECK_STATUS(holdoff_clock_now(m, &t), HOLDOFF_STATUS_OK);
    CHECK(t == UINT64_MAX);
    holdoff_clock_free(sys);
    holdoff_clock_free(m);
}

static void test_policy_and_http(void) {
    holdoff_clock *clock = manual(), *other = manual();
    holdoff_breaker *b = breaker(clock);
    holdoff_retry_budget *budget = NULL, *foreign_budget = NULL;
    CHECK_STATUS(holdoff_retry_budget_new(NULL, clock, &budget), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_budget_new(NULL, other, &foreign_budget), HOLDOFF_STATUS_OK);
    holdoff_policy *policy = NULL;
    CHECK_STATUS(holdoff_policy_new(b, foreign_budget, NULL, NULL, &policy), HOLDOFF_STATUS_INVALID_CONFIG);
    CHECK(strcmp(holdoff_last_error_field(), "policy.clock") == 0);
    CHECK_STATUS(holdoff_policy_new(b, budget, NULL, NULL, &policy), HOLDOFF_STATUS_OK);
    /* The policy keeps its parts alive. */
    holdoff_breaker_free(b);
    holdoff_retry_budget_free(budget);
    holdoff_policy_call *call = NULL;
    CHECK_STATUS(holdoff_policy_call_new(&call), HOLDOFF_STATUS_OK);
    holdoff_before before;
    holdoff_permit p;
    holdoff_decision d;
    holdoff_classification cl;
    CHECK_STATUS(holdoff_policy_before_attempt(policy, call, &before, &p), HOLDOFF_STATUS_OK);
    CHECK(before.action == HOLDOFF_BEFORE_ACTION_GO);
    const char *ra = "Retry-After", *v = "120";
    holdoff_header h = {ra, strlen(ra), v, strlen(v)};
    CHECK_STATUS(holdoff_policy_after_response(policy, call, &p, 429, &h, 1, &d, &cl), HOLDOFF_STATUS_OK);
    CHECK(cl.outcome == HOLDOFF_OUTCOME_RETRY_LATER && cl.retry_later_ns == 120 * SEC);
    CHECK(d.kind == HOLDOFF_DECISION_KIND_RETRY && d.delay_ns == 120 * SEC);
    CHECK(d.source == HOLDOFF_WAIT_SOURCE_RETRY_AFTER && d.has_server_delay && d.capped == 0);
    CHECK_STATUS(holdoff_policy_after_attempt(policy, call, &p, HOLDOFF_OUTCOME_SUCCESS, 0, &d),
                 HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED);
    /* Integers that are not statuses at all reach the core's check whole, even one that would
     * wrap to a valid 16-bit status; the out-parameter stays untouched. */
    holdoff_classifier *cls = NULL;
    CHECK_STATUS(holdoff_classifier_new(NULL, &cls), HOLDOFF_STATUS_OK);
    const int64_t not_statuses[] = {-1, 1000, 70000, 65536 + 200, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof not_statuses / sizeof *not_statuses; i++) {
        cl.outcome = 99;
        CHECK_STATUS(holdoff_classifier_classify(cls, not_statuses[i], NULL, 0, 0, &cl), HOLDOFF_STATUS_INVALID_INPUT);
        CHECK(strcmp(holdoff_last_error_field(), "status") == 0);
        CHECK(cl.outcome == 99);
    }
    /* A status outside 100..599 is a broken upstream: a failure, whatever its headers say. */
    const int64_t broken[] = {0, 99, 600, 999};
    for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) {
        CHECK_STATUS(holdoff_classifier_classify(cls, broken[i], &h, 1, 0, &cl), HOLDOFF_STATUS_OK);
        CHECK(cl.outcome == HOLDOFF_OUTCOME_FAILURE);
    }
    CHECK_STATUS(holdoff_classifier_classify(cls, 404, NULL, 0, 0, &cl), HOLDOFF_STATUS_OK);
    CHECK(cl.outcome == HOLDOFF_OUTCOME_ANSWER && cl.has_should_retry == 0);
    /* x-should-retry: false makes a 500 an answer; true makes a 404 a failure. */
    const char *xsr = "x-should-retry";
    holdoff_header no = {xsr, strlen(xsr), "false", 5}, yes = {xsr, strlen(xsr), "true", 4};
    CHECK_STATUS(holdoff_classifier_classify(cls, 500, &no, 1, 0, &cl), HOLDOFF_STATUS_OK);
    CHECK(cl.outcome == HOLDOFF_OUTCOME_ANSWER && cl.has_should_retry == 1 && cl.should_retry == 0);
    CHECK_STATUS(holdoff_classifier_classify(cls, 404, &yes, 1, 0, &cl), HOLDOFF_STATUS_OK);
    CHECK(cl.outcome == HOLDOFF_OUTCOME_FAILURE && cl.has_should_retry == 1 && cl.should_retry == 1);
    CHECK_STATUS(holdoff_classifier_classify(cls, 200, &no, 1, 0, &cl), HOLDOFF_STATUS_OK);
    CHECK(cl.outcome == HOLDOFF_OUTCOME_SUCCESS);
    /* The new delay headers, each with its source. */
    struct {
        const char *name, *value;
        uint64_t delay_ns;
        uint32_t source;
    } hints[] = {
        {"retry-after-ms", "1500.2", 1501 * MS, HOLDOFF_HINT_SOURCE_RETRY_AFTER_MS},
        {"x-ms-retry-after-ms", "250", 250 * MS, HOLDOFF_HINT_SOURCE_X_MS_RETRY_AFTER_MS},
        {"RateLimit", "\"default\";r=0;t=30", 30 * SEC, HOLDOFF_HINT_SOURCE_RATELIMIT},
        {"RateLimit-Reset", "7", 7 * SEC, HOLDOFF_HINT_SOURCE_RATELIMIT_RESET},
    };
    holdoff_retry_after hint;
    for (size_t i = 0; i < sizeof hints / sizeof *hints; i++) {
        holdoff_header hh = {hints[i].name, strlen(hints[i].name), hints[i].value, strlen(hints[i].value)};
        CHECK_STATUS(holdoff_hint_from_headers(&hh, 1, 0, &hint), HOLDOFF_STATUS_OK);
        CHECK(hint.unusable == HOLDOFF_UNUSABLE_NONE && hint.delay_ns == hints[i].delay_ns &&
              hint.source == hints[i].source);
    }
    CHECK_STATUS(holdoff_hint_from_headers(NULL, 0, 0, &hint), HOLDOFF_STATUS_OK);
    CHECK(hint.unusable == HOLDOFF_UNUSABLE_MISSING && hint.source == HOLDOFF_HINT_SOURCE_NONE);
    /* Retry-After: RFC 9110 §10.2.3 forms; non-UTF-8 bytes are malformed, not an error. */
    holdoff_retry_after r;
    const char *date = "Sun, 06 Nov 1994 08:49:37 GMT";
    CHECK_STATUS(holdoff_parse_retry_after(date, strlen(date), 784111717ULL * SEC, &r), HOLDOFF_STATUS_OK);
    CHECK(r.unusable == HOLDOFF_UNUSABLE_NONE && r.delay_ns == 60 * SEC);
    CHECK_STATUS(holdoff_parse_retry_after("\xff\xfe", 2, 0, &r), HOLDOFF_STATUS_OK);
    CHECK(r.unusable == HOLDOFF_UNUSABLE_MALFORMED);
    CHECK_STATUS(holdoff_parse_retry_after("1.5", 3, 0, &r), HOLDOFF_STATUS_OK);
    CHECK(r.delay_ns == 1500 * MS);
    holdoff_classifier_free(cls);
    holdoff_policy_call_free(call);
    holdoff_policy_free(policy);
    holdoff_retry_budget_free(foreign_budget);
    holdoff_clock_free(clock);
    holdoff_clock_free(other);
}

/* A value that is not a status, reported to the policy: refused naming `status`, and the permit
 * is recorded as cancelled (a probe frees its slot at once; the permit cannot be reported again). */
static void test_policy_not_a_status(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker *b = breaker(clock);
    holdoff_retry_budget *budget = NULL;
    CHECK_STATUS(holdoff_retry_budget_new(NULL, clock, &budget), HOLDOFF_STATUS_OK);
    holdoff_policy *policy = NULL;
    CHECK_STATUS(holdoff_policy_new(b, budget, NULL, NULL, &policy), HOLDOFF_STATUS_OK);
    holdoff_permit p;
    for (int i = 0; i < 5; i++) {
        CHECK_STATUS(holdoff_breaker_allow(b, &p, NULL), HOLDOFF_STATUS_OK);
        CHECK_STATUS(holdoff_breaker_record(b, &p, HOLDOFF_OUTCOME_FAILURE, 0, NULL), HOLDOFF_STATUS_OK);
    }
    CHECK_STATUS(holdoff_clock_set(clock, 60 * SEC), HOLDOFF_STATUS_OK);
    const int64_t not_statuses[] = {-1, 70000};
    for (size_t i = 0; i < 2; i++) {
        holdoff_policy_call *call = NULL;
        holdoff_before before;
        holdoff_decision d = {0, 0, 99, 0, 0, 0, 0};
        holdoff_snapshot s;
        CHECK_STATUS(holdoff_policy_call_new(&call), HOLDOFF_STATUS_OK);
        CHECK_STATUS(holdoff_policy_before_attempt(policy, call, &before, &p), HOLDOFF_STATUS_OK);
        CHECK(before.action == HOLDOFF_BEFORE_ACTION_GO && p.probe == 1);
        CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
        CHECK(s.probes_in_flight == 1 && s.state == HOLDOFF_STATE_HALF_OPEN);
        CHECK_STATUS(holdoff_policy_after_response(policy, call, &p, not_statuses[i], NULL, 0, &d, NULL),
                     HOLDOFF_STATUS_INVALID_INPUT);
        CHECK(strcmp(holdoff_last_error_field(), "status") == 0);
        CHECK(d.kind == 99 && p.recorded == 1);
        CHECK_STATUS(holdoff_breaker_snapshot(b, &s), HOLDOFF_STATUS_OK);
        /* Slot free, nothing counted: still half-open, no recovery, no re-open. */
        CHECK(s.probes_in_flight == 0 && s.state == HOLDOFF_STATE_HALF_OPEN && s.recoveries == 0 && s.opens == 1);
        CHECK_STATUS(holdoff_policy_after_response(policy, call, &p, 200, NULL, 0, &d, NULL),
                     HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED);
        holdoff_policy_call_free(call);
        /* The cancelled probe spent its window: the next one waits the open interval. */
        CHECK_STATUS(holdoff_clock_advance(clock, 60 * SEC), HOLDOFF_STATUS_OK);
    }
    holdoff_policy_free(policy);
    holdoff_retry_budget_free(budget);
    holdoff_breaker_free(b);
    holdoff_clock_free(clock);
}

static void test_give_up_above_cap(void) {
    holdoff_clock *clock = manual();
    holdoff_config *c = config("{\"budget\": {\"give_up_above_cap\": true}}");
    holdoff_retry_budget *wait = NULL, *give_up = NULL;
    CHECK_STATUS(holdoff_retry_budget_new(NULL, clock, &wait), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_budget_new(c, clock, &give_up), HOLDOFF_STATUS_OK);
    holdoff_config_free(c);
    holdoff_retry_state *s1 = NULL, *s2 = NULL;
    CHECK_STATUS(holdoff_retry_state_new(&s1), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_state_new(&s2), HOLDOFF_STATUS_OK);
    holdoff_decision d;
    /* 600 s asked, cap 300 s: the default waits the cap and says so ... */
    CHECK_STATUS(holdoff_retry_budget_decide(wait, s1, HOLDOFF_OUTCOME_RETRY_LATER, 600 * SEC, &d), HOLDOFF_STATUS_OK);
    CHECK(d.kind == HOLDOFF_DECISION_KIND_RETRY && d.delay_ns == 300 * SEC && d.capped == 1);
    CHECK(d.has_server_delay && d.server_delay_ns == 600 * SEC);
    /* ... give_up_above_cap gives up at once with the server's delay. */
    CHECK_STATUS(holdoff_retry_budget_decide(give_up, s2, HOLDOFF_OUTCOME_RETRY_LATER, 600 * SEC, &d), HOLDOFF_STATUS_OK);
    CHECK(d.kind == HOLDOFF_DECISION_KIND_GIVE_UP && d.reason == HOLDOFF_GIVE_UP_REASON_RETRY_AFTER_ABOVE_CAP);
    CHECK(d.has_server_delay && d.server_delay_ns == 600 * SEC);
    /* At the cap is not above it. */
    CHECK_STATUS(holdoff_retry_budget_decide(give_up, s2, HOLDOFF_OUTCOME_RETRY_LATER, 300 * SEC, &d), HOLDOFF_STATUS_OK);
    CHECK(d.kind == HOLDOFF_DECISION_KIND_RETRY && d.delay_ns == 300 * SEC && d.capped == 0);
    holdoff_retry_state_free(s1);
    holdoff_retry_state_free(s2);
    holdoff_retry_budget_free(wait);
    holdoff_retry_budget_free(give_up);
    holdoff_clock_free(clock);
}

static void test_quota(void) {
    holdoff_config *c = config("{\"quota\": {\"capacity\": 12}}");
    holdoff_retry_quota *q = NULL, *other = NULL;
    CHECK_STATUS(holdoff_retry_quota_new(c, &q), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_new(c, &other), HOLDOFF_STATUS_OK);
    holdoff_config_free(c);
    holdoff_quota_lease a, b, o;
    CHECK_STATUS(holdoff_retry_quota_acquire(q, 0, &a), HOLDOFF_STATUS_OK);
    CHECK(a.acquired == 1 && a.cost == 5 && a.available == 7 && a.returned == 0 && a.raw_quota != 0);
    CHECK_STATUS(holdoff_retry_quota_acquire(q, 1, &b), HOLDOFF_STATUS_OK);
    CHECK(b.acquired == 0 && b.cost == 10 && b.available == 7 && b.raw_quota == 0);
    CHECK_STATUS(holdoff_retry_quota_on_success(q, &b), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "lease") == 0);
    CHECK_STATUS(holdoff_retry_quota_acquire(other, 0, &o), HOLDOFF_STATUS_OK);
    CHECK(o.acquired == 1 && o.raw_quota != a.raw_quota);
    uint64_t avail = 0, other_avail = 0;
    /* Given to another quota: refused, nothing moves, the lease stays usable on its own. */
    CHECK_STATUS(holdoff_retry_quota_on_success(other, &a), HOLDOFF_STATUS_FOREIGN_PERMIT);
    CHECK(strcmp(holdoff_last_error_field(), "lease") == 0);
    CHECK(a.returned == 0);
    CHECK_STATUS(holdoff_retry_quota_available(q, &avail), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_available(other, &other_avail), HOLDOFF_STATUS_OK);
    CHECK(avail == 7 && other_avail == 7);
    CHECK_STATUS(holdoff_retry_quota_on_success(q, &a), HOLDOFF_STATUS_OK);
    CHECK(a.returned == 1);
    CHECK_STATUS(holdoff_retry_quota_available(q, &avail), HOLDOFF_STATUS_OK);
    CHECK(avail == 12);
    /* Given back twice (after the bucket moved on): refused, the bucket unchanged. */
    CHECK_STATUS(holdoff_retry_quota_acquire(q, 0, &b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_on_success(q, &b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_acquire(q, 0, &b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_on_success(q, &a), HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED);
    CHECK(strcmp(holdoff_last_error_field(), "lease") == 0);
    CHECK_STATUS(holdoff_retry_quota_available(q, &avail), HOLDOFF_STATUS_OK);
    CHECK(avail == 7);
    /* A foreign give-back after the lease went home is still foreign, not "already". */
    CHECK_STATUS(holdoff_retry_quota_on_success(other, &a), HOLDOFF_STATUS_FOREIGN_PERMIT);
    CHECK_STATUS(holdoff_retry_quota_on_success(other, &o), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_available(other, &other_avail), HOLDOFF_STATUS_OK);
    CHECK(other_avail == 12);
    /* A success without a lease adds the refill, never past capacity. */
    CHECK_STATUS(holdoff_retry_quota_on_success(q, NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_available(q, &avail), HOLDOFF_STATUS_OK);
    CHECK(avail == 8);
    holdoff_retry_quota_free(q);
    holdoff_retry_quota_free(other);
}

/* The key list of a group, as one array of strings (keys here hold no NUL). */
static int group_keys_are(holdoff_breaker_group *g, const char *const *want, size_t n) {
    holdoff_key_list *list = NULL;
    size_t len = 0;
    int same = holdoff_breaker_group_keys(g, &list) == HOLDOFF_STATUS_OK &&
               holdoff_key_list_len(list, &len) == HOLDOFF_STATUS_OK && len == n;
    for (size_t i = 0; same && i < n; i++) {
        const char *k = NULL;
        size_t klen = 0;
        same = holdoff_key_list_get(list, i, &k, &klen) == HOLDOFF_STATUS_OK && klen == strlen(want[i]) &&
               strcmp(k, want[i]) == 0;
    }
    holdoff_key_list_free(list);
    return same;
}

static void test_group(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker_group *g = NULL;
    CHECK_STATUS(holdoff_breaker_group_new(NULL, clock, &g), HOLDOFF_STATUS_OK);
    holdoff_breaker *a1 = NULL, *a2 = NULL, *bb = NULL;
    CHECK_STATUS(holdoff_breaker_group_get(g, "a", 1, &a1), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_group_get(g, "a", 1, &a2), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_group_get(g, "b", 1, &bb), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_group_get(g, "\xff", 1, &bb), HOLDOFF_STATUS_INVALID_INPUT);
    size_t n = 0;
    CHECK_STATUS(holdoff_breaker_group_len(g, &n), HOLDOFF_STATUS_OK);
    CHECK(n == 2);
    holdoff_group_snapshot gs;
    CHECK_STATUS(holdoff_breaker_group_snapshot(g, &gs), HOLDOFF_STATUS_OK);
    CHECK(gs.keys == 2 && gs.max_keys == HOLDOFF_GROUP_DEFAULT_MAX_KEYS && gs.evictions == 0 && gs.overflows == 0);
    CHECK(group_keys_are(g, (const char *const[]){"a", "b"}, 2));
    /* Two handles to one breaker: a permit of one is recorded through the other. */
    holdoff_permit p;
    CHECK_STATUS(holdoff_breaker_allow(a1, &p, NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_record(a2, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL), HOLDOFF_STATUS_OK);
    holdoff_breaker_free(a1);
    CHECK_STATUS(holdoff_breaker_allow(a2, &p, NULL), HOLDOFF_STATUS_OK); /* still alive */
    holdoff_breaker_free(a2);
    holdoff_breaker_free(bb);
    holdoff_breaker_group_free(g);

    /* Bounded at 2: a third key evicts the least recently used idle breaker. */
    holdoff_config *two = config("{\"group\": {\"max_keys\": 2}}");
    CHECK_STATUS(holdoff_breaker_group_new(two, clock, &g), HOLDOFF_STATUS_OK);
    holdoff_config_free(two);
    holdoff_breaker *ka = NULL, *kb = NULL, *kc = NULL, *kx = NULL, *kx2 = NULL;
    CHECK_STATUS(holdoff_breaker_group_get(g, "a", 1, &ka), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_group_get(g, "b", 1, &kb), HOLDOFF_STATUS_OK);
    holdoff_breaker_free(ka);
    CHECK_STATUS(holdoff_breaker_group_get(g, "a", 1, &ka), HOLDOFF_STATUS_OK); /* a is now the most recent */
    CHECK_STATUS(holdoff_breaker_group_get(g, "c", 1, &kc), HOLDOFF_STATUS_OK);
    CHECK(group_keys_are(g, (const char *const[]){"a", "c"}, 2));
    CHECK_STATUS(holdoff_breaker_group_snapshot(g, &gs), HOLDOFF_STATUS_OK);
    CHECK(gs.keys == 2 && gs.max_keys == 2 && gs.evictions == 1 && gs.overflows == 0);
    /* The evicted breaker's handle stays valid; its permit is recorded there. */
    CHECK_STATUS(holdoff_breaker_allow(kb, &p, NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_record(kb, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL), HOLDOFF_STATUS_OK);
    /* Both kept breakers count a failure: none idle, so a new key overflows, each time afresh. */
    CHECK_STATUS(holdoff_breaker_allow(ka, &p, NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_record(ka, &p, HOLDOFF_OUTCOME_FAILURE, 0, NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_allow(kc, &p, NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_record(kc, &p, HOLDOFF_OUTCOME_FAILURE, 0, NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_group_get(g, "x", 1, &kx), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_group_get(g, "x", 1, &kx2), HOLDOFF_STATUS_OK);
    CHECK(kx != kx2);
    CHECK_STATUS(holdoff_breaker_allow(kx, &p, NULL), HOLDOFF_STATUS_OK); /* no call fails */
    CHECK_STATUS(holdoff_breaker_record(kx2, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL), HOLDOFF_STATUS_FOREIGN_PERMIT);
    CHECK_STATUS(holdoff_breaker_record(kx, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL), HOLDOFF_STATUS_OK);
    CHECK(group_keys_are(g, (const char *const[]){"a", "c"}, 2));
    CHECK_STATUS(holdoff_breaker_group_snapshot(g, &gs), HOLDOFF_STATUS_OK);
    CHECK(gs.keys == 2 && gs.evictions == 1 && gs.overflows == 2);
    holdoff_key_list *list = NULL;
    const char *k = "untouched";
    size_t klen = 99;
    CHECK_STATUS(holdoff_breaker_group_keys(g, &list), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_key_list_get(list, 2, &k, &klen), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "index") == 0);
    CHECK_STATUS(holdoff_key_list_get(list, 0, NULL, &klen), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(k, "untouched") == 0 && klen == 99);
    holdoff_key_list_free(list);
    holdoff_breaker *handles[] = {ka, kb, kc, kx, kx2};
    for (size_t i = 0; i < 5; i++) holdoff_breaker_free(handles[i]);
    holdoff_breaker_group_free(g);

    /* The neutral configuration's group.max_keys. */
    const char *json = "{\"breaker\": {}, \"group\": {\"max_keys\": 3}}";
    holdoff_config *cfg = NULL;
    uint32_t parts = 0;
    CHECK_STATUS(holdoff_config_parse(json, strlen(json), &cfg), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_config_parts(cfg, &parts), HOLDOFF_STATUS_OK);
    CHECK(parts == (HOLDOFF_CONFIG_BREAKER | HOLDOFF_CONFIG_GROUP));
    CHECK_STATUS(holdoff_breaker_group_new(cfg, clock, &g), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_group_snapshot(g, &gs), HOLDOFF_STATUS_OK);
    CHECK(gs.max_keys == 3 && gs.keys == 0);
    holdoff_breaker_group_free(g);
    holdoff_config_free(cfg);
    holdoff_clock_free(clock);
}

static void test_panic_and_freed_handles(void) {
    CHECK_STATUS(holdoff_debug_panic(), HOLDOFF_STATUS_PANIC);
    CHECK(strstr(holdoff_last_error_message(), "holdoff_debug_panic") != NULL);
    if (!holdoff_debug_checks_handles()) return; /* release build: use after free is UB */
    holdoff_clock *clock = manual();
    holdoff_breaker *b = breaker(clock);
    holdoff_permit p;
    holdoff_breaker_free(b);
    CHECK_STATUS(holdoff_breaker_allow(b, &p, NULL), HOLDOFF_STATUS_INVALID_HANDLE);
    CHECK_STATUS(holdoff_breaker_free(b), HOLDOFF_STATUS_INVALID_HANDLE); /* double free caught */
    /* A handle of another type. */
    CHECK_STATUS(holdoff_breaker_allow((holdoff_breaker *)(void *)clock, &p, NULL), HOLDOFF_STATUS_INVALID_HANDLE);
    holdoff_clock_free(clock);
}

/* The reported detail of a detected use after free: the status, and a message naming the kind. */
#define CHECK_FREED(expr, kind)                                                    \
    do {                                                                           \
        CHECK_STATUS(expr, HOLDOFF_STATUS_INVALID_HANDLE);                         \
        CHECK(strstr(holdoff_last_error_message(), "this " kind " handle was freed") != NULL); \
    } while (0)

/*
 * Every kind of handle, freed and then used again, and freed twice: debug builds detect both
 * from the registry of live handles, before reading the freed memory (so this also runs under
 * ASan and valgrind, which would report any read of it). Permits and quota leases are caller-owned
 * values, not handles: reusing one is PERMIT_ALREADY_RECORDED (tested above), and a permit
 * recorded through a freed breaker handle is refused by the handle check.
 */
static void test_use_after_free_every_kind(void) {
    if (!holdoff_debug_checks_handles()) return; /* release build: use after free is UB */
    uint64_t t;
    uint32_t u32;
    size_t n;
    holdoff_permit p;
    holdoff_snapshot snap;
    holdoff_decision d;
    holdoff_classification cl;
    holdoff_before before;
    holdoff_quota_lease lease;

    holdoff_clock *clock = manual();
    holdoff_clock *dead_clock = manual();
    holdoff_clock_free(dead_clock);
    CHECK_FREED(holdoff_clock_now(dead_clock, &t), "Clock");
    CHECK_FREED(holdoff_clock_advance(dead_clock, 1), "Clock");
    CHECK_FREED(holdoff_clock_free(dead_clock), "Clock");
    holdoff_breaker *b0 = NULL;
    CHECK_FREED(holdoff_breaker_new(NULL, dead_clock, &b0), "Clock");
    CHECK(b0 == NULL);

    holdoff_breaker *b = breaker(clock);
    CHECK_STATUS(holdoff_breaker_allow(b, &p, NULL), HOLDOFF_STATUS_OK);
    holdoff_breaker_free(b);
    CHECK_FREED(holdoff_breaker_record(b, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL), "Breaker");
    CHECK(p.recorded == 0);
    CHECK_FREED(holdoff_breaker_snapshot(b, &snap), "Breaker");
    CHECK_FREED(holdoff_breaker_reset(b), "Breaker");
    CHECK_FREED(holdoff_breaker_free(b), "Breaker");

    holdoff_breaker_group *g = NULL;
    CHECK_STATUS(holdoff_breaker_group_new(NULL, clock, &g), HOLDOFF_STATUS_OK);
    holdoff_breaker *gb = NULL;
    CHECK_STATUS(holdoff_breaker_group_get(g, "k", 1, &gb), HOLDOFF_STATUS_OK);
    holdoff_breaker_group_free(g);
    CHECK_FREED(holdoff_breaker_group_len(g, &n), "Group");
    CHECK_FREED(holdoff_breaker_group_get(g, "k", 1, &gb), "Group");
    CHECK_FREED(holdoff_breaker_group_free(g), "Group");
    CHECK_STATUS(holdoff_breaker_allow(gb, &p, NULL), HOLDOFF_STATUS_OK); /* keeps its breaker */
    holdoff_breaker_free(gb);
    CHECK_STATUS(holdoff_breaker_group_new(NULL, clock, &g), HOLDOFF_STATUS_OK);
    holdoff_key_list *keys = NULL;
    const char *key = NULL;
    CHECK_STATUS(holdoff_breaker_group_keys(g, &keys), HOLDOFF_STATUS_OK);
    holdoff_breaker_group_free(g);
    CHECK_FREED(holdoff_breaker_group_snapshot(g, &(holdoff_group_snapshot){0, 0, 0, 0}), "Group");
    CHECK_FREED(holdoff_breaker_group_keys(g, &keys), "Group");
    CHECK_STATUS(holdoff_key_list_len(keys, &n), HOLDOFF_STATUS_OK); /* outlives its group */
    CHECK(n == 0);
    holdoff_key_list_free(keys);
    CHECK_FREED(holdoff_key_list_len(keys, &n), "KeyList");
    CHECK_FREED(holdoff_key_list_get(keys, 0, &key, &n), "KeyList");
    CHECK_FREED(holdoff_key_list_free(keys), "KeyList");

    holdoff_retry_budget *budget = NULL;
    holdoff_retry_state *rs = NULL;
    CHECK_STATUS(holdoff_retry_budget_new(NULL, clock, &budget), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_state_new(&rs), HOLDOFF_STATUS_OK);
    holdoff_retry_state_free(rs);
    CHECK_FREED(holdoff_retry_budget_decide(budget, rs, HOLDOFF_OUTCOME_FAILURE, 0, &d), "RetryState");
    CHECK_FREED(holdoff_retry_state_retries(rs, &u32), "RetryState");
    CHECK_FREED(holdoff_retry_state_free(rs), "RetryState");
    holdoff_retry_budget_free(budget);
    CHECK_STATUS(holdoff_retry_state_new(&rs), HOLDOFF_STATUS_OK);
    CHECK_FREED(holdoff_retry_budget_decide(budget, rs, HOLDOFF_OUTCOME_FAILURE, 0, &d), "Budget");
    CHECK_FREED(holdoff_retry_budget_free(budget), "Budget");
    holdoff_retry_state_free(rs);

    holdoff_retry_quota *q = NULL;
    CHECK_STATUS(holdoff_retry_quota_new(NULL, &q), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_acquire(q, 0, &lease), HOLDOFF_STATUS_OK);
    holdoff_retry_quota_free(q);
    CHECK_FREED(holdoff_retry_quota_on_success(q, &lease), "Quota");
    CHECK(lease.returned == 0);
    CHECK_FREED(holdoff_retry_quota_acquire(q, 0, &lease), "Quota");
    CHECK_FREED(holdoff_retry_quota_available(q, &t), "Quota");
    CHECK_FREED(holdoff_retry_quota_free(q), "Quota");

    holdoff_classifier *cls = NULL;
    CHECK_STATUS(holdoff_classifier_new(NULL, &cls), HOLDOFF_STATUS_OK);
    holdoff_classifier_free(cls);
    CHECK_FREED(holdoff_classifier_classify(cls, 200, NULL, 0, 0, &cl), "Classifier");
    CHECK_FREED(holdoff_classifier_free(cls), "Classifier");

    const char *json = "{\"breaker\": {}}";
    holdoff_config *cfg = NULL;
    CHECK_STATUS(holdoff_config_parse(json, strlen(json), &cfg), HOLDOFF_STATUS_OK);
    holdoff_config_free(cfg);
    CHECK_FREED(holdoff_config_parts(cfg, &u32), "Config");
    CHECK_FREED(holdoff_breaker_new(cfg, clock, &b0), "Config");
    CHECK_FREED(holdoff_config_to_json(cfg, NULL, 0, &n), "Config");
    CHECK_FREED(holdoff_config_free(cfg), "Config");

    /* A policy, its call state, and the parts it was built from. */
    b = breaker(clock);
    CHECK_STATUS(holdoff_retry_budget_new(NULL, clock, &budget), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_new(NULL, &q), HOLDOFF_STATUS_OK);
    holdoff_breaker_free(b);
    holdoff_policy *policy = NULL;
    CHECK_FREED(holdoff_policy_new(b, budget, q, NULL, &policy), "Breaker");
    CHECK(policy == NULL);
    b = breaker(clock);
    holdoff_retry_quota_free(q);
    CHECK_FREED(holdoff_policy_new(b, budget, q, NULL, &policy), "Quota");
    CHECK_STATUS(holdoff_policy_new(b, budget, NULL, NULL, &policy), HOLDOFF_STATUS_OK);
    holdoff_breaker_free(b);
    holdoff_retry_budget_free(budget);
    holdoff_policy_call *call = NULL;
    CHECK_STATUS(holdoff_policy_call_new(&call), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_policy_before_attempt(policy, call, &before, &p), HOLDOFF_STATUS_OK);
    holdoff_policy_call_free(call);
    CHECK_FREED(holdoff_policy_after_attempt(policy, call, &p, HOLDOFF_OUTCOME_SUCCESS, 0, &d), "PolicyCall");
    CHECK_FREED(holdoff_policy_call_attempts(call, &u32), "PolicyCall");
    CHECK_FREED(holdoff_policy_call_free(call), "PolicyCall");
    CHECK(p.recorded == 0);
    CHECK_STATUS(holdoff_policy_call_new(&call), HOLDOFF_STATUS_OK);
    holdoff_policy_free(policy);
    CHECK_FREED(holdoff_policy_before_attempt(policy, call, &before, &p), "Policy");
    CHECK_FREED(holdoff_policy_after_attempt(policy, call, &p, HOLDOFF_OUTCOME_SUCCESS, 0, &d), "Policy");
    CHECK_FREED(holdoff_policy_free(policy), "Policy");
    CHECK_FREED(holdoff_execution_new(policy, NULL, &(holdoff_execution *){NULL}), "Policy");
    holdoff_policy_call_free(call);

    /* An execution, freed during its attempt (which gives the attempt back) and then used. */
    b = breaker(clock);
    CHECK_STATUS(holdoff_retry_budget_new(NULL, clock, &budget), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_policy_new(b, budget, NULL, NULL, &policy), HOLDOFF_STATUS_OK);
    holdoff_execution *x = NULL;
    holdoff_step step;
    CHECK_STATUS(holdoff_execution_new(policy, NULL, &x), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_execution_next_step(x, &step), HOLDOFF_STATUS_OK);
    holdoff_execution_free(x);
    CHECK_FREED(holdoff_execution_next_step(x, &step), "Execution");
    CHECK_FREED(holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_RETURNED, HOLDOFF_OUTCOME_SUCCESS, 0, &step),
                "Execution");
    CHECK_FREED(holdoff_execution_complete_response(x, 200, NULL, 0, &step), "Execution");
    CHECK_FREED(holdoff_execution_cancel(x, &step), "Execution");
    CHECK_FREED(holdoff_execution_free(x), "Execution");
    CHECK_STATUS(holdoff_execution_next_step((holdoff_execution *)(void *)policy, &step),
                 HOLDOFF_STATUS_INVALID_HANDLE);
    holdoff_policy_free(policy);
    holdoff_retry_budget_free(budget);
    holdoff_breaker_free(b);

    /* Freed, then a new object of the same type: the stale handle must not reach the new one
     * (debug builds keep freed addresses out of reuse for a while). */
    b = breaker(clock);
    holdoff_breaker_free(b);
    holdoff_breaker *fresh = breaker(clock);
    CHECK(fresh != b);
    CHECK_FREED(holdoff_breaker_force_open(b), "Breaker");
    CHECK_STATUS(holdoff_breaker_snapshot(fresh, &snap), HOLDOFF_STATUS_OK);
    CHECK(snap.state == HOLDOFF_STATE_CLOSED);
    holdoff_breaker_free(fresh);

    /* A live handle passed as another type is refused too, naming both kinds. */
    holdoff_retry_quota *q2 = NULL;
    CHECK_STATUS(holdoff_retry_quota_new(NULL, &q2), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_reset((holdoff_breaker *)(void *)q2), HOLDOFF_STATUS_INVALID_HANDLE);
    CHECK(strstr(holdoff_last_error_message(), "a Quota handle was passed where a Breaker handle is expected") != NULL);
    CHECK_STATUS(holdoff_policy_free((holdoff_policy *)(void *)q2), HOLDOFF_STATUS_INVALID_HANDLE);
    holdoff_retry_quota_free(q2);
    holdoff_clock_free(clock);
}

/* ------------------------------------------------------------------------------------------ */
/* holdoff_execution: the retry loop of one call                                               */

/* A policy on `clock`: trips after `threshold` failures, stays open a constant `open_ns`, and
 * allows `max_retries` counted retries. Its breaker is written to `*out_breaker` unless that is
 * NULL (the caller then frees it too). */
static holdoff_policy *exec_policy(holdoff_clock *clock, uint32_t threshold, uint64_t open_ns, uint32_t max_retries,
                                   holdoff_breaker **out_breaker) {
    holdoff_config *c = config("{\"breaker\": {\"trip\": {\"policy\": \"consecutive\", \"threshold\": %u},"
                               " \"open_interval\": {\"initial_ms\": %.6f, \"multiplier\": 1}},"
                               " \"budget\": {\"max_retries\": %u}}",
                               threshold, open_ns / 1e6, max_retries);
    holdoff_breaker *b = NULL;
    holdoff_retry_budget *budget = NULL;
    holdoff_policy *p = NULL;
    CHECK_STATUS(holdoff_breaker_new(c, clock, &b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_budget_new(c, clock, &budget), HOLDOFF_STATUS_OK);
    holdoff_config_free(c);
    CHECK_STATUS(holdoff_policy_new(b, budget, NULL, NULL, &p), HOLDOFF_STATUS_OK);
    if (out_breaker)
        *out_breaker = b;
    else
        holdoff_breaker_free(b);
    holdoff_retry_budget_free(budget);
    return p;
}

static holdoff_execution *execution(holdoff_policy *p, const holdoff_execution_options *o) {
    holdoff_execution *x = NULL;
    CHECK_STATUS(holdoff_execution_new(p, o, &x), HOLDOFF_STATUS_OK);
    return x;
}

/* A step no call writes: an error must leave it so. */
static holdoff_step untouched_step(void) {
    holdoff_step s;
    memset(&s, 0xAB, sizeof s);
    return s;
}

static int same_step(const holdoff_step *a, const holdoff_step *b) { return memcmp(a, b, sizeof *a) == 0; }

static void test_execution_bad_input(void) {
    holdoff_clock *clock = manual();
    holdoff_policy *p = exec_policy(clock, 5, 60 * SEC, 10, NULL);
    const holdoff_step sentinel = untouched_step();
    holdoff_step s = sentinel;
    holdoff_execution_options o;
    holdoff_execution *x = (holdoff_execution *)0x1;

    /* NULLs: the status names the parameter and writes nothing. */
    CHECK_STATUS(holdoff_execution_options_init(NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_execution_new(NULL, NULL, &x), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "policy") == 0);
    CHECK_STATUS(holdoff_execution_new(p, NULL, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "out") == 0 && x == (holdoff_execution *)0x1);
    CHECK_STATUS(holdoff_execution_next_step(NULL, &s), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "execution") == 0);
    CHECK_STATUS(holdoff_execution_complete(NULL, HOLDOFF_ATTEMPTED_RETURNED, HOLDOFF_OUTCOME_SUCCESS, 0, &s),
                 HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_execution_complete_response(NULL, 200, NULL, 0, &s), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_execution_cancel(NULL, &s), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_execution_free(NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_config_execution_options(NULL, &o), HOLDOFF_STATUS_NULL_PARAMETER);
    x = execution(p, NULL);
    CHECK_STATUS(holdoff_execution_next_step(x, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "out") == 0);
    CHECK_STATUS(holdoff_execution_cancel(x, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(same_step(&s, &sentinel));

    /* Steps out of order: an error naming `execution`, the state unchanged. */
    CHECK_STATUS(holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_RETURNED, HOLDOFF_OUTCOME_SUCCESS, 0, &s),
                 HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "execution") == 0 && same_step(&s, &sentinel));
    CHECK_STATUS(holdoff_execution_complete_response(x, 200, NULL, 0, &s), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "execution") == 0);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_ATTEMPT && s.attempts == 1 && s.probe == 0 && s.has_last_outcome == 0);
    /* The default total timeout bounds the attempt; there is no attempt timeout. */
    CHECK(s.has_time_limit == 1 && s.time_limit_ns == HOLDOFF_EXECUTION_DEFAULT_TOTAL_TIMEOUT_NS);
    holdoff_step before = s;
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "execution") == 0 && same_step(&s, &before));
    /* Unknown codes are refused and the attempt stays in progress. */
    CHECK_STATUS(holdoff_execution_complete(x, 4, HOLDOFF_OUTCOME_SUCCESS, 0, &s), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "attempted") == 0);
    CHECK_STATUS(holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_RAISED, 6, 0, &s), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "outcome") == 0);
    CHECK_STATUS(holdoff_execution_complete_response(x, 200, NULL, 2, &s), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "headers") == 0 && same_step(&s, &before));
    CHECK_STATUS(holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_RETURNED, HOLDOFF_OUTCOME_SUCCESS, 0, &s),
                 HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_FINISH && s.verdict == HOLDOFF_VERDICT_RETURN && s.attempts == 1);
    CHECK(s.has_last_outcome && s.last_outcome == HOLDOFF_OUTCOME_SUCCESS && s.has_reason == 0);
    /* Finished: next_step and cancel give the verdict again, complete is out of order. */
    before = s;
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK(same_step(&s, &before));
    CHECK_STATUS(holdoff_execution_cancel(x, &s), HOLDOFF_STATUS_OK);
    CHECK(same_step(&s, &before));
    CHECK_STATUS(holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_BUG, HOLDOFF_OUTCOME_SUCCESS, 0, &s),
                 HOLDOFF_STATUS_INVALID_INPUT);
    holdoff_execution_free(x);

    /* Options: zero-initialised with its size are the defaults, as is _init. */
    holdoff_execution_options zero;
    memset(&zero, 0, sizeof zero);
    zero.struct_size = sizeof zero;
    CHECK_STATUS(holdoff_execution_options_init(&o), HOLDOFF_STATUS_OK);
    CHECK(memcmp(&o, &zero, sizeof o) == 0 && o.total_timeout == HOLDOFF_LIMIT_DEFAULT);
    /* A zero limit is refused naming the field as the core does; so is a duration given
     * without HOLDOFF_LIMIT_SET (it would be ignored) and an unknown kind. */
    x = NULL;
    o.attempt_timeout = HOLDOFF_LIMIT_SET;
    CHECK_STATUS(holdoff_execution_new(p, &o, &x), HOLDOFF_STATUS_INVALID_CONFIG);
    CHECK(strcmp(holdoff_last_error_field(), "execute.attempt_timeout") == 0 && x == NULL);
    CHECK(strstr(holdoff_last_error_message(), "greater than 0") != NULL);
    holdoff_execution_options_init(&o);
    o.total_timeout = HOLDOFF_LIMIT_SET;
    CHECK_STATUS(holdoff_execution_new(p, &o, &x), HOLDOFF_STATUS_INVALID_CONFIG);
    CHECK(strcmp(holdoff_last_error_field(), "execute.total_timeout") == 0);
    holdoff_execution_options_init(&o);
    o.attempt_timeout_ns = 100 * MS;
    CHECK_STATUS(holdoff_execution_new(p, &o, &x), HOLDOFF_STATUS_INVALID_CONFIG);
    CHECK(strcmp(holdoff_last_error_field(), "execute.attempt_timeout") == 0);
    holdoff_execution_options_init(&o);
    o.total_timeout = HOLDOFF_LIMIT_SET + 1;
    CHECK_STATUS(holdoff_execution_new(p, &o, &x), HOLDOFF_STATUS_INVALID_CONFIG);
    CHECK(strcmp(holdoff_last_error_field(), "execute.total_timeout") == 0);
    holdoff_execution_options_init(&o);
    o.struct_size = sizeof o - 8;
    CHECK_STATUS(holdoff_execution_new(p, &o, &x), HOLDOFF_STATUS_ABI_MISMATCH);
    CHECK(strcmp(holdoff_last_error_field(), "options.struct_size") == 0 && x == NULL);
    /* No total limit: an attempt without a limit; an attempt timeout alone bounds it. */
    holdoff_execution_options_init(&o);
    o.total_timeout = HOLDOFF_LIMIT_NONE;
    x = execution(p, &o);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_ATTEMPT && s.has_time_limit == 0 && s.time_limit_ns == 0);
    holdoff_execution_free(x);
    o.attempt_timeout = HOLDOFF_LIMIT_SET;
    o.attempt_timeout_ns = 250 * MS;
    x = execution(p, &o);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.has_time_limit == 1 && s.time_limit_ns == 250 * MS);
    holdoff_execution_free(x);

    /* The neutral JSON configuration's `execute` part, both limits explicit. */
    const char *json = "{\"execute\": {\"attempt_timeout_ms\": 1500, \"total_timeout_ms\": null}}";
    holdoff_config *cfg = NULL;
    uint32_t parts = 0;
    CHECK_STATUS(holdoff_config_parse(json, strlen(json), &cfg), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_config_parts(cfg, &parts), HOLDOFF_STATUS_OK);
    CHECK(parts == HOLDOFF_CONFIG_EXECUTE);
    CHECK_STATUS(holdoff_config_execution_options(cfg, &o), HOLDOFF_STATUS_OK);
    CHECK(o.attempt_timeout == HOLDOFF_LIMIT_SET && o.attempt_timeout_ns == 1500 * MS);
    CHECK(o.total_timeout == HOLDOFF_LIMIT_NONE && o.total_timeout_ns == 0);
    holdoff_config_free(cfg);
    const char *zero_json = "{\"execute\": {\"total_timeout_ms\": 0}}";
    CHECK_STATUS(holdoff_config_parse(zero_json, strlen(zero_json), &cfg), HOLDOFF_STATUS_INVALID_CONFIG);
    CHECK(strcmp(holdoff_last_error_field(), "execute.total_timeout") == 0);
    holdoff_policy_free(p);
    holdoff_clock_free(clock);
}

/* What a C caller sees through a call: waits with their source and the server's delay, a
 * value that is not a status, a final answer raised, a programming error, a cancellation in a
 * wait and one at the attempt's time limit, and an execution freed while it holds a probe. */
static void test_execution_loop(void) {
    holdoff_clock *clock = manual();
    holdoff_policy *p = exec_policy(clock, 1, 10 * SEC, 10, NULL);
    holdoff_breaker *b = NULL;
    holdoff_snapshot snap;
    holdoff_step s;
    CHECK(strcmp(holdoff_verdict_name(HOLDOFF_VERDICT_BREAKER_OPEN), "breaker_open") == 0);
    CHECK(strcmp(holdoff_verdict_name(HOLDOFF_VERDICT_INVALID_INPUT), "invalid_input") == 0);
    CHECK(holdoff_verdict_name(HOLDOFF_VERDICT_INVALID_INPUT + 1) == NULL);
    CHECK(strcmp(holdoff_step_kind_name(HOLDOFF_STEP_KIND_WAIT), "wait") == 0);
    CHECK(strcmp(holdoff_attempted_name(HOLDOFF_ATTEMPTED_BUG), "bug") == 0);
    CHECK(strcmp(holdoff_limit_name(HOLDOFF_LIMIT_NONE), "none") == 0);
    CHECK(strcmp(holdoff_give_up_reason_name(HOLDOFF_GIVE_UP_REASON_TOTAL_TIMEOUT), "total_timeout") == 0);

    /* A 429 with Retry-After: the breaker opens for its delay; the wait honours it, and the
     * execution keeps its policy alive after the caller freed it. */
    holdoff_execution *x = execution(p, NULL);
    holdoff_policy_free(p);
    const char *ra = "Retry-After", *two = "2";
    holdoff_header h = {ra, strlen(ra), two, strlen(two)};
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_execution_complete_response(x, 429, &h, 1, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_WAIT && s.delay_ns == 2 * SEC && s.source == HOLDOFF_WAIT_SOURCE_RETRY_AFTER);
    CHECK(s.has_server_delay && s.server_delay_ns == 2 * SEC && s.capped == 0 && s.attempts == 1);
    CHECK(s.has_last_outcome && s.last_outcome == HOLDOFF_OUTCOME_RETRY_LATER && s.last_retry_later_ns == 2 * SEC);
    CHECK_STATUS(holdoff_clock_advance(clock, s.delay_ns), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_ATTEMPT && s.attempts == 2 && s.probe == 1);
    /* A value that is not a status: the verdict says so (not an error status), the probe is
     * given back at once. */
    CHECK_STATUS(holdoff_execution_complete_response(x, 70000, NULL, 0, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_FINISH && s.verdict == HOLDOFF_VERDICT_INVALID_INPUT && s.attempts == 2);
    CHECK(s.last_outcome == HOLDOFF_OUTCOME_CANCELLED);
    holdoff_execution_free(x);

    /* A second policy, whose breaker the test watches. */
    p = exec_policy(clock, 1, 10 * SEC, 10, &b);
    x = execution(p, NULL);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_RAISED, HOLDOFF_OUTCOME_ANSWER, 0, &s),
                 HOLDOFF_STATUS_OK);
    CHECK(s.verdict == HOLDOFF_VERDICT_RETHROW && s.has_reason && s.reason == HOLDOFF_GIVE_UP_REASON_NOT_RETRYABLE);
    holdoff_execution_free(x);
    x = execution(p, NULL);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_BUG, HOLDOFF_OUTCOME_SUCCESS, 0, &s),
                 HOLDOFF_STATUS_OK);
    CHECK(s.verdict == HOLDOFF_VERDICT_RETHROW && s.has_reason == 0 && s.last_outcome == HOLDOFF_OUTCOME_CANCELLED);
    holdoff_execution_free(x);
    /* A transport error trips the breaker (threshold 1); the retry waits for it, and the
     * caller cancels during that wait. */
    x = execution(p, NULL);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_RAISED, HOLDOFF_OUTCOME_FAILURE, 0, &s),
                 HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_WAIT && s.source == HOLDOFF_WAIT_SOURCE_BREAKER && s.delay_ns == 10 * SEC);
    CHECK_STATUS(holdoff_execution_cancel(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_FINISH && s.verdict == HOLDOFF_VERDICT_CANCELLED && s.attempts == 1);
    holdoff_execution_free(x);
    /* The same wait, but the caller cannot send the request again: stop gives up as retries
     * exhausted, with the forgone wait as retry_after; stop before any wait is out of order. */
    x = execution(p, NULL);
    CHECK_STATUS(holdoff_execution_stop(x, &s), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "execution") == 0);
    CHECK_STATUS(holdoff_breaker_reset(b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_RAISED, HOLDOFF_OUTCOME_FAILURE, 0, &s),
                 HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_WAIT && s.delay_ns == 10 * SEC);
    CHECK_STATUS(holdoff_execution_stop(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_FINISH && s.verdict == HOLDOFF_VERDICT_GIVE_UP && s.attempts == 1);
    CHECK(s.has_reason && s.reason == HOLDOFF_GIVE_UP_REASON_ATTEMPTS_EXHAUSTED);
    CHECK(s.has_retry_after && s.retry_after_ns == 10 * SEC);
    holdoff_execution_free(x);
    /* A first attempt is refused at once while open. */
    x = execution(p, NULL);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_FINISH && s.verdict == HOLDOFF_VERDICT_BREAKER_OPEN && s.attempts == 0);
    CHECK(s.has_retry_after && s.retry_after_ns == 10 * SEC && s.has_reason == 0);
    holdoff_execution_free(x);
    /* The probe, with an attempt timeout: cancelled exactly at its time limit, it is a timeout
     * (the breaker re-opens); the retry would wait for the breaker, so the call ends cancelled. */
    holdoff_execution_options o;
    holdoff_execution_options_init(&o);
    o.attempt_timeout = HOLDOFF_LIMIT_SET;
    o.attempt_timeout_ns = 100 * MS;
    CHECK_STATUS(holdoff_clock_advance(clock, 10 * SEC), HOLDOFF_STATUS_OK);
    x = execution(p, &o);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_ATTEMPT && s.probe == 1 && s.time_limit_ns == 100 * MS);
    CHECK_STATUS(holdoff_clock_advance(clock, s.time_limit_ns), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_execution_cancel(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_FINISH && s.verdict == HOLDOFF_VERDICT_CANCELLED);
    CHECK(s.has_last_outcome && s.last_outcome == HOLDOFF_OUTCOME_TIMEOUT);
    CHECK_STATUS(holdoff_breaker_snapshot(b, &snap), HOLDOFF_STATUS_OK);
    CHECK(snap.state == HOLDOFF_STATE_OPEN && snap.probes_in_flight == 0 && snap.retry_after_ns == 10 * SEC);
    holdoff_execution_free(x);
    /* Freed while it holds a probe: the slot is free at once; the window stays spent. */
    CHECK_STATUS(holdoff_clock_advance(clock, 10 * SEC), HOLDOFF_STATUS_OK);
    x = execution(p, NULL);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_ATTEMPT && s.probe == 1);
    CHECK_STATUS(holdoff_breaker_snapshot(b, &snap), HOLDOFF_STATUS_OK);
    CHECK(snap.probes_in_flight == 1);
    CHECK_STATUS(holdoff_execution_free(x), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_snapshot(b, &snap), HOLDOFF_STATUS_OK);
    CHECK(snap.probes_in_flight == 0 && snap.state == HOLDOFF_STATE_HALF_OPEN && snap.recoveries == 0);
    x = execution(p, NULL);
    CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
    CHECK(s.kind == HOLDOFF_STEP_KIND_FINISH && s.verdict == HOLDOFF_VERDICT_BREAKER_OPEN);
    CHECK(s.has_retry_after && s.retry_after_ns == 10 * SEC);
    holdoff_execution_free(x);
    holdoff_breaker_free(b);
    holdoff_policy_free(p);
    holdoff_clock_free(clock);
}

/*
 * A deadline storm, on the manual clock. The upstream refuses the first connection (it fell
 * over), then accepts every connection and never answers (it hangs). Twenty callers share one
 * policy (trip after 1 failure, a constant 1 s open interval, no retries); caller i starts a
 * call at i * 5 ms and then every 100 ms until 6 s (1201 calls), each attempt bounded by a
 * 100 ms attempt timeout. A C caller's attempt that hangs ends when its
 * time limit passes: half are reported as a timeout, half by cancelling at the limit (which
 * the library records as a timeout too).
 *
 * A deadline is a failure, so the breaker opens and each hanging probe re-opens it for another
 * interval from its deadline: the upstream sees the tripping request at 0 and one probe per
 * interval at 1000, 2100, 3200, 4300 and 5400 ms, 6 requests (at most the 7 a 1 s interval
 * allows in 6 s), and the breaker ends open. Were a deadline recorded as a cancellation, the
 * breaker would stay half-open and probe every second (1000, 2000, ..., 6000).
 */
#define STORM_CALLERS 20
static void test_execution_deadline_storm(void) {
    holdoff_clock *clock = manual();
    holdoff_breaker *b = NULL;
    holdoff_policy *p = exec_policy(clock, 1, 1 * SEC, 0, &b);
    holdoff_execution_options o;
    holdoff_execution_options_init(&o);
    o.attempt_timeout = HOLDOFF_LIMIT_SET;
    o.attempt_timeout_ns = 100 * MS;
    struct {
        holdoff_execution *x;
        uint64_t deadline;
    } callers[STORM_CALLERS] = {{NULL, 0}};
    uint64_t requests[16];
    int n_requests = 0, calls = 0, refused = 0, gave_up = 0, timeouts = 0, other = 0, max_in_flight = 0;
    holdoff_step s;
    for (uint64_t t = 0; t <= 6100 * MS; t += 5 * MS) {
        CHECK_STATUS(holdoff_clock_set(clock, t), HOLDOFF_STATUS_OK);
        /* Attempts whose time limit has passed end first (the callers' timers fire). */
        int in_flight = 0;
        for (int i = 0; i < STORM_CALLERS; i++) {
            if (!callers[i].x || callers[i].deadline > t) {
                in_flight += callers[i].x != NULL;
                continue;
            }
            holdoff_status st = (n_requests % 2 == 0)
                                    ? holdoff_execution_complete(callers[i].x, HOLDOFF_ATTEMPTED_RAISED,
                                                                 HOLDOFF_OUTCOME_TIMEOUT, 0, &s)
                                    : holdoff_execution_cancel(callers[i].x, &s);
            CHECK_STATUS(st, HOLDOFF_STATUS_OK);
            timeouts += s.has_last_outcome && s.last_outcome == HOLDOFF_OUTCOME_TIMEOUT;
            /* Reported as a timeout, the call gives up (no retries); cancelled by its caller at
             * the limit, it ends cancelled, the attempt still recorded as a timeout. */
            if (s.kind == HOLDOFF_STEP_KIND_FINISH &&
                ((s.verdict == HOLDOFF_VERDICT_GIVE_UP && s.reason == HOLDOFF_GIVE_UP_REASON_ATTEMPTS_EXHAUSTED) ||
                 s.verdict == HOLDOFF_VERDICT_CANCELLED))
                gave_up++;
            else
                other++;
            holdoff_execution_free(callers[i].x);
            callers[i].x = NULL;
        }
        if (in_flight > max_in_flight) max_in_flight = in_flight;
        if (t > 6000 * MS) continue;
        /* Then the caller whose turn it is starts a call. */
        int i = (int)((t / (5 * MS)) % STORM_CALLERS);
        CHECK(callers[i].x == NULL);
        holdoff_execution *x = execution(p, &o);
        calls++;
        CHECK_STATUS(holdoff_execution_next_step(x, &s), HOLDOFF_STATUS_OK);
        if (s.kind == HOLDOFF_STEP_KIND_FINISH) {
            if (s.verdict == HOLDOFF_VERDICT_BREAKER_OPEN && s.attempts == 0)
                refused++;
            else
                other++;
            holdoff_execution_free(x);
            continue;
        }
        /* The request reaches the upstream. */
        CHECK(s.kind == HOLDOFF_STEP_KIND_ATTEMPT && s.has_time_limit && s.time_limit_ns == 100 * MS);
        if (n_requests < 16) requests[n_requests] = t / MS;
        n_requests++;
        if (n_requests == 1) {
            CHECK_STATUS(holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_RAISED, HOLDOFF_OUTCOME_FAILURE, 0, &s),
                         HOLDOFF_STATUS_OK);
            CHECK(s.kind == HOLDOFF_STEP_KIND_FINISH && s.verdict == HOLDOFF_VERDICT_GIVE_UP);
            gave_up++;
            holdoff_execution_free(x);
            continue;
        }
        callers[i].x = x;
        callers[i].deadline = t + s.time_limit_ns;
    }
    const uint64_t want[] = {0, 1000, 2100, 3200, 4300, 5400};
    CHECK(n_requests == 6 && n_requests <= 7);
    for (int i = 0; i < 6 && i < n_requests; i++) CHECK(requests[i] == want[i]);
    CHECK(calls == 1201 && refused == calls - n_requests);
    CHECK(gave_up == n_requests && timeouts == n_requests - 1 && other == 0);
    CHECK(max_in_flight == 1); /* every probe hangs alone: the breaker admits one per interval */
    holdoff_snapshot snap;
    CHECK_STATUS(holdoff_breaker_snapshot(b, &snap), HOLDOFF_STATUS_OK);
    CHECK(snap.state == HOLDOFF_STATE_OPEN && snap.opens == 1 && snap.closes == 0);
    CHECK(snap.probes == 5 && snap.probes_in_flight == 0 && snap.refusals == (uint64_t)refused);
    holdoff_breaker_free(b);
    holdoff_policy_free(p);
    holdoff_clock_free(clock);
}

/* Threads share one breaker: each thread records its own permits; a permit shared by all
 * threads is recorded exactly once. */
#define THREADS 8
/* Calls per thread; HOLDOFF_TEST_THREAD_CALLS lowers it where every access is emulated
 * (run.sh sets it for valgrind, which also runs the threads one at a time). */
static int CALLS = 20000;

typedef struct {
    holdoff_breaker *b;
    holdoff_permit *shared;
    int ok_records;
    int already;
} worker_t;

static void *worker(void *arg) {
    worker_t *w = arg;
    for (int i = 0; i < CALLS; i++) {
        holdoff_permit p;
        if (holdoff_breaker_allow(w->b, &p, NULL) != HOLDOFF_STATUS_OK) continue;
        if (holdoff_breaker_record(w->b, &p, i % 7 == 0 ? HOLDOFF_OUTCOME_FAILURE : HOLDOFF_OUTCOME_SUCCESS, 0,
                                   NULL) == HOLDOFF_STATUS_OK)
            w->ok_records++;
    }
    holdoff_status st = holdoff_breaker_record(w->b, w->shared, HOLDOFF_OUTCOME_SUCCESS, 0, NULL);
    if (st == HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED) w->already++;
    return NULL;
}

static void test_threads(void) {
    const char *env = getenv("HOLDOFF_TEST_THREAD_CALLS");
    if (env && atoi(env) > 0) CALLS = atoi(env);
    holdoff_clock *clock = manual();
    /* interleaved failures must never trip it */
    holdoff_config *c = config("{\"breaker\": {\"trip\": {\"policy\": \"consecutive\", \"threshold\": 1000000}}}");
    holdoff_breaker *b = NULL;
    CHECK_STATUS(holdoff_breaker_new(c, clock, &b), HOLDOFF_STATUS_OK);
    holdoff_config_free(c);
    holdoff_permit shared;
    CHECK_STATUS(holdoff_breaker_allow(b, &shared, NULL), HOLDOFF_STATUS_OK);
    pthread_t t[THREADS];
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_t){b, &shared, 0, 0};
        pthread_create(&t[i], NULL, worker, &w[i]);
    }
    int records = 0, already = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        records += w[i].ok_records;
        already += w[i].already;
    }
    CHECK(records == THREADS * CALLS);
    CHECK(already == THREADS - 1);
    holdoff_breaker_free(b);
    holdoff_clock_free(clock);
}

/*
 * A caller built against an older, smaller execution options struct: struct_size = 16 with
 * nothing readable after those 16 bytes (a PROT_NONE page follows). The library must refuse it
 * from the size field alone instead of copying the whole (larger) struct and faulting.
 */
static void test_short_options(void) {
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *mem = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    if (mem == MAP_FAILED) return;
    CHECK(mprotect(mem + page, (size_t)page, PROT_NONE) == 0);
    unsigned char *small = mem + page - 16;
    size_t size = 16;
    memset(small, 0, 16);
    memcpy(small, &size, sizeof size);

    holdoff_clock *clock = manual();
    holdoff_execution *x = NULL;
    holdoff_breaker *pb = breaker(clock);
    holdoff_retry_budget *pg = NULL;
    holdoff_policy *policy = NULL;
    CHECK_STATUS(holdoff_retry_budget_new(NULL, clock, &pg), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_policy_new(pb, pg, NULL, NULL, &policy), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_execution_new(policy, (const holdoff_execution_options *)small, &x),
                 HOLDOFF_STATUS_ABI_MISMATCH);
    CHECK(strcmp(holdoff_last_error_field(), "options.struct_size") == 0);
    CHECK(x == NULL);
    holdoff_policy_free(policy);
    holdoff_retry_budget_free(pg);
    holdoff_breaker_free(pb);
    holdoff_clock_free(clock);
    munmap(mem, (size_t)page * 2);
}

/* A fleet on the in-process store: a trip at one worker opens the other at its next sync, a
 * store that fails detaches after fallback_after and a working one attaches again; the bad
 * inputs name their field. */
static void test_fleet(void) {
    const char *store = "api-test-fleet";
    CHECK_STATUS(holdoff_memory_store_control(store, strlen(store), HOLDOFF_MEMORY_STORE_ACTION_RESET),
                 HOLDOFF_STATUS_OK);
    holdoff_clock *clock = manual();
    holdoff_config *c = config("{\"breaker\": {\"trip\": {\"policy\": \"consecutive\", \"threshold\": 1},"
                               " \"open_interval\": {\"initial_ms\": 10000, \"multiplier\": 1}},"
                               " \"fleet\": {\"url\": \"memory://%s\", \"key\": \"payments\", \"refresh_ms\": 50,"
                               " \"fallback_after_ms\": 1000}}",
                               store);
    uint32_t parts = 0;
    CHECK_STATUS(holdoff_config_parts(c, &parts), HOLDOFF_STATUS_OK);
    CHECK(parts == (HOLDOFF_CONFIG_BREAKER | HOLDOFF_CONFIG_FLEET));
    char json[2048];
    size_t len = 0;
    CHECK_STATUS(holdoff_config_to_json(c, json, sizeof json, &len), HOLDOFF_STATUS_OK);
    CHECK(strstr(json, "\"key\":\"payments\"") != NULL && strstr(json, "\"fallback_after_ms\":1000") != NULL);
    holdoff_breaker *w0 = NULL, *w1 = NULL, *local = breaker(clock);
    CHECK_STATUS(holdoff_breaker_new(c, clock, &w0), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_new(c, clock, &w1), HOLDOFF_STATUS_OK);
    holdoff_breaker_group *g = NULL;
    CHECK_STATUS(holdoff_breaker_group_new(c, clock, &g), HOLDOFF_STATUS_INVALID_CONFIG);
    CHECK(g == NULL && strcmp(holdoff_last_error_field(), "fleet") == 0);

    holdoff_permit p;
    holdoff_refusal r;
    holdoff_fleet_sync s;
    CHECK_STATUS(holdoff_breaker_allow(w0, &p, NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_record(w0, &p, HOLDOFF_OUTCOME_FAILURE, 0, NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_clock_set(clock, 100 * MS), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_allow(w1, &p, NULL), HOLDOFF_STATUS_OK); /* w1 has not heard yet */
    CHECK_STATUS(holdoff_breaker_record(w1, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_sync_fleet(w0, &s), HOLDOFF_STATUS_OK);
    CHECK(s.ok && s.attached && s.has_record && s.fleet_state == HOLDOFF_FLEET_STATE_OPEN && s.fleet_episode == 1 &&
          s.error == HOLDOFF_FLEET_ERROR_NONE && s.sent == 1 && s.next_probe_at_ms == 10000);
    CHECK_STATUS(holdoff_breaker_sync_fleet(w1, &s), HOLDOFF_STATUS_OK);
    CHECK(s.ok && s.fleet_state == HOLDOFF_FLEET_STATE_OPEN && s.fleet_episode == 1 && s.sent == 0);
    CHECK_STATUS(holdoff_breaker_allow(w1, &p, &r), HOLDOFF_STATUS_BREAKER_OPEN);
    CHECK(r.state == HOLDOFF_STATE_OPEN && r.has_retry_after && r.retry_after_ns == 9900 * MS);
    holdoff_state_change ev[4];
    size_t n = 0;
    CHECK_STATUS(holdoff_breaker_drain_events(w1, ev, 4, &n), HOLDOFF_STATUS_OK);
    CHECK(n == 1 && ev[0].reason == HOLDOFF_REASON_FLEET_OPENED);
    CHECK(strcmp(holdoff_reason_name(HOLDOFF_REASON_FLEET_OPENED), "fleet_opened") == 0);
    CHECK(strcmp(holdoff_fleet_state_name(HOLDOFF_FLEET_STATE_OPEN), "open") == 0);
    CHECK(holdoff_fleet_state_name(2) == NULL);

    /* The store down: results, not errors; detached after fallback_after, attached again. */
    CHECK_STATUS(holdoff_memory_store_control(store, strlen(store), HOLDOFF_MEMORY_STORE_ACTION_DOWN),
                 HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_sync_fleet(w1, &s), HOLDOFF_STATUS_OK);
    CHECK(!s.ok && s.attached && !s.has_record && s.error == HOLDOFF_FLEET_ERROR_UNAVAILABLE);
    CHECK_STATUS(holdoff_clock_set(clock, 1200 * MS), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_sync_fleet(w1, &s), HOLDOFF_STATUS_OK);
    uint8_t attached = 1;
    CHECK(!s.ok && !s.attached && s.detached);
    CHECK_STATUS(holdoff_breaker_fleet_attached(w1, &attached), HOLDOFF_STATUS_OK);
    CHECK(attached == 0);
    CHECK_STATUS(holdoff_memory_store_control(store, strlen(store), HOLDOFF_MEMORY_STORE_ACTION_UP),
                 HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_sync_fleet(w1, &s), HOLDOFF_STATUS_OK);
    CHECK(s.ok && s.attached && s.reattached && s.fleet_episode == 1);
    CHECK_STATUS(holdoff_breaker_fleet_attached(w1, &attached), HOLDOFF_STATUS_OK);
    CHECK(attached == 1);

    /* A policy composed from a fleet breaker owns the link too: the breaker handle may go first. */
    holdoff_retry_budget *budget = NULL;
    holdoff_policy *policy = NULL;
    CHECK_STATUS(holdoff_retry_budget_new(NULL, clock, &budget), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_policy_new(w0, budget, NULL, NULL, &policy), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_breaker_free(w0), HOLDOFF_STATUS_OK);

    /* Bad input names its field; a breaker without a fleet cannot sync. */
    CHECK_STATUS(holdoff_breaker_sync_fleet(local, &s), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "breaker") == 0);
    CHECK_STATUS(holdoff_breaker_sync_fleet(w1, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_breaker_sync_fleet(NULL, &s), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_breaker_fleet_attached(local, &attached), HOLDOFF_STATUS_OK);
    CHECK(attached == 0);
    CHECK_STATUS(holdoff_memory_store_control(store, strlen(store), 9), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "action") == 0);
    CHECK_STATUS(holdoff_memory_store_control(NULL, 3, HOLDOFF_MEMORY_STORE_ACTION_UP), HOLDOFF_STATUS_NULL_PARAMETER);
    const char *bad[][2] = {
        {"{\"fleet\": {\"url\": \"http://x\", \"key\": \"k\"}}", "fleet.url"},
        {"{\"fleet\": {\"key\": \"k\"}}", "fleet.url"},
        {"{\"fleet\": {\"url\": \"memory://x\", \"key\": \"a b\"}}", "fleet.key"},
        {"{\"fleet\": {\"url\": \"memory://x\", \"key\": \"k\", \"refresh_ms\": 0}}", "fleet.refresh"},
        {"{\"fleet\": {\"url\": \"memory://x\", \"key\": \"k\", \"ttl_ms\": \"NaN\"}}", "fleet.ttl"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        holdoff_config *refused = NULL;
        CHECK_STATUS(holdoff_config_parse(bad[i][0], strlen(bad[i][0]), &refused), HOLDOFF_STATUS_INVALID_CONFIG);
        CHECK(refused == NULL && strcmp(holdoff_last_error_field(), bad[i][1]) == 0);
    }
    holdoff_policy_free(policy);
    holdoff_retry_budget_free(budget);
    holdoff_breaker_free(w1);
    holdoff_breaker_free(local);
    holdoff_config_free(c);
    holdoff_clock_free(clock);
}

int main(void) {
    test_versions();
    test_null_parameters();
    test_bad_config();
    test_defaults_and_json();
    test_short_options();
    test_permits();
    test_open_refusal_and_events();
    test_clocks();
    test_policy_and_http();
    test_policy_not_a_status();
    test_give_up_above_cap();
    test_quota();
    test_group();
    test_fleet();
    test_execution_bad_input();
    test_execution_loop();
    test_execution_deadline_storm();
    test_panic_and_freed_handles();
    test_use_after_free_every_kind();
    test_threads();
    CHECK(holdoff_debug_live_handles() == 0);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
