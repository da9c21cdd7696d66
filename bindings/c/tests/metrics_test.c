/*
 * holdoff C metrics test: the metric table through holdoff_metric_describe, and the readings of
 * a breaker, a policy, a retry quota and a breaker group after a scripted scenario on the
 * manual clock, asserted exactly (every non-zero series, and the zeros being there too).
 * Prints `N passed, N failed`.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "holdoff.h"
#include "metrics_series.h"

#define SEC 1000000000ULL

#define CHECK_STATUS(expr, want) CHECK((expr) == (want))

typedef struct {
    const char *series;
    double value;
} reading;

/* Reads `list` and checks that its non-zero readings are exactly `want` (ended by a NULL
 * series), that `total` readings came in all (zeros included), and that the list is freed. */
static void expect_readings(holdoff_metric_list *list, size_t total, const reading *want) {
    size_t n = holdoff_metric_list_len(list), nonzero = 0, wanted = 0;
    CHECK(n == total);
    for (const reading *w = want; w->series; w++) wanted++;
    for (size_t i = 0; i < n; i++) {
        holdoff_metric_sample s;
        char name[256];
        CHECK_STATUS(holdoff_metric_list_get(list, i, &s), HOLDOFF_STATUS_OK);
        CHECK(series_name(&s, name, sizeof name) == 0);
        if (s.value == 0) continue;
        nonzero++;
        const reading *w = want;
        while (w->series && strcmp(w->series, name) != 0) w++;
        if (!w->series || w->value != s.value) {
            failed++;
            printf("FAIL unexpected reading %s = %.9g\n", name, s.value);
        } else {
            passed++;
        }
    }
    CHECK(nonzero == wanted);
    CHECK_STATUS(holdoff_metric_list_free(list), HOLDOFF_STATUS_OK);
}

static holdoff_config *config(const char *json) {
    holdoff_config *c = NULL;
    CHECK_STATUS(holdoff_config_parse(json, strlen(json), &c), HOLDOFF_STATUS_OK);
    return c;
}

static void call(holdoff_breaker *b, uint32_t outcome, int want_admitted) {
    holdoff_permit p;
    holdoff_refusal r;
    holdoff_status st = holdoff_breaker_allow(b, &p, &r);
    CHECK(st == (want_admitted ? HOLDOFF_STATUS_OK : HOLDOFF_STATUS_BREAKER_OPEN));
    if (st == HOLDOFF_STATUS_OK) CHECK_STATUS(holdoff_breaker_record(b, &p, outcome, 0, NULL), HOLDOFF_STATUS_OK);
}

/* The table is the core's: 17 rows, each described, with its attribute values in code order. */
static void test_table(void) {
    uint32_t n = holdoff_metric_count();
    CHECK(n == 17);
    holdoff_metric_info info;
    CHECK_STATUS(holdoff_metric_describe(3, &info), HOLDOFF_STATUS_OK);
    CHECK(strcmp(info.name, "holdoff.breaker.outcomes") == 0 && strcmp(info.unit, "{call}") == 0);
    CHECK(strcmp(info.attribute, "outcome") == 0 && info.value_count == 6);
    CHECK(info.kind == HOLDOFF_METRIC_KIND_COUNTER);
    CHECK(strcmp(holdoff_metric_attribute_value(3, 2), "failure") == 0);
    CHECK(holdoff_metric_attribute_value(3, 6) == NULL);
    CHECK_STATUS(holdoff_metric_describe(0, &info), HOLDOFF_STATUS_OK);
    CHECK(strcmp(info.name, "holdoff.breaker.state") == 0 && info.kind == HOLDOFF_METRIC_KIND_GAUGE);
    CHECK_STATUS(holdoff_metric_describe(10, &info), HOLDOFF_STATUS_OK);
    CHECK(strcmp(info.name, "holdoff.retry.wait.duration") == 0 && strcmp(info.unit, "s") == 0);
    CHECK_STATUS(holdoff_metric_describe(1, &info), HOLDOFF_STATUS_OK);
    CHECK(info.attribute == NULL && info.value_count == 0);
    CHECK(holdoff_metric_attribute_value(1, 0) == NULL);
    /* Out of range: refused naming the parameter, nothing written. */
    info.name = NULL;
    CHECK_STATUS(holdoff_metric_describe(n, &info), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "metric") == 0 && info.name == NULL);
    CHECK(holdoff_metric_attribute_value(n, 0) == NULL);
    CHECK_STATUS(holdoff_metric_describe(0, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "out") == 0);
}

/* Five failures trip the breaker, two calls are refused, the probe at 10 s recovers it. Calls
 * before the first read are not counted: counting starts there. */
static void test_breaker(holdoff_clock *clock) {
    holdoff_config *c = config("{\"breaker\": {\"trip\": {\"policy\": \"consecutive\", \"threshold\": 5},"
                               " \"open_interval\": {\"initial_ms\": 10000, \"multiplier\": 1}, \"recoveries\": 1}}");
    holdoff_breaker *b = NULL;
    CHECK_STATUS(holdoff_breaker_new(c, clock, &b), HOLDOFF_STATUS_OK);
    holdoff_config_free(c);
    call(b, HOLDOFF_OUTCOME_SUCCESS, 1); /* not counted */
    holdoff_metric_list *list = NULL;
    CHECK_STATUS(holdoff_breaker_metrics(b, &list), HOLDOFF_STATUS_OK);
    expect_readings(list, 24, (const reading[]){{"holdoff.breaker.state{state=closed}", 1}, {NULL, 0}});

    for (int i = 0; i < 5; i++) call(b, HOLDOFF_OUTCOME_FAILURE, 1);
    CHECK_STATUS(holdoff_clock_set(clock, 1 * SEC), HOLDOFF_STATUS_OK);
    call(b, HOLDOFF_OUTCOME_SUCCESS, 0);
    CHECK_STATUS(holdoff_clock_set(clock, 2 * SEC), HOLDOFF_STATUS_OK);
    call(b, HOLDOFF_OUTCOME_SUCCESS, 0);
    CHECK_STATUS(holdoff_breaker_metrics(b, &list), HOLDOFF_STATUS_OK);
    expect_readings(list, 24,
                    (const reading[]){{"holdoff.breaker.state{state=open}", 1},
                                      {"holdoff.breaker.admitted", 5},
                                      {"holdoff.breaker.refused", 2},
                                      {"holdoff.breaker.outcomes{outcome=failure}", 5},
                                      {"holdoff.breaker.transitions{reason=tripped}", 1},
                                      {NULL, 0}});

    CHECK_STATUS(holdoff_clock_set(clock, 10 * SEC), HOLDOFF_STATUS_OK);
    call(b, HOLDOFF_OUTCOME_SUCCESS, 1);
    CHECK_STATUS(holdoff_breaker_metrics(b, &list), HOLDOFF_STATUS_OK);
    expect_readings(list, 24,
                    (const reading[]){{"holdoff.breaker.state{state=closed}", 1},
                                      {"holdoff.breaker.admitted", 6},
                                      {"holdoff.breaker.refused", 2},
                                      {"holdoff.breaker.outcomes{outcome=failure}", 5},
                                      {"holdoff.breaker.outcomes{outcome=success}", 1},
                                      {"holdoff.breaker.probes", 1},
                                      {"holdoff.breaker.transitions{reason=tripped}", 1},
                                      {"holdoff.breaker.transitions{reason=probe_admitted}", 1},
                                      {"holdoff.breaker.transitions{reason=recovered}", 1},
                                      {NULL, 0}});
    /* The list's own error paths. */
    CHECK_STATUS(holdoff_breaker_metrics(b, &list), HOLDOFF_STATUS_OK);
    holdoff_metric_sample s = {.metric = 99};
    CHECK_STATUS(holdoff_metric_list_get(list, 24, &s), HOLDOFF_STATUS_INVALID_INPUT);
    CHECK(strcmp(holdoff_last_error_field(), "index") == 0 && s.metric == 99);
    CHECK_STATUS(holdoff_metric_list_get(list, 0, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK_STATUS(holdoff_metric_list_get(NULL, 0, &s), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "list") == 0);
    CHECK(holdoff_metric_list_len(NULL) == 0);
    CHECK_STATUS(holdoff_metric_list_free(list), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_metric_list_free(NULL), HOLDOFF_STATUS_OK);
    if (holdoff_debug_checks_handles()) { /* debug library: a freed list is caught, not read */
        CHECK(holdoff_metric_list_len(list) == 0);
        CHECK_STATUS(holdoff_metric_list_get(list, 0, &s), HOLDOFF_STATUS_INVALID_HANDLE);
        CHECK(strcmp(holdoff_last_error_field(), "list") == 0);
        CHECK_STATUS(holdoff_metric_list_free(list), HOLDOFF_STATUS_INVALID_HANDLE);
        CHECK_STATUS(holdoff_metric_list_get((holdoff_metric_list *)b, 0, &s), HOLDOFF_STATUS_INVALID_HANDLE);
    }
    CHECK_STATUS(holdoff_breaker_metrics(NULL, &list), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "breaker") == 0);
    CHECK_STATUS(holdoff_breaker_metrics(b, NULL), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "out") == 0);
    holdoff_breaker_free(b);
}

/* A policy call answered 503 with Retry-After: 2 waits 2 s (the breaker opens for the server's
 * delay), then its probe succeeds. The policy reports the retry series, its breaker and quota
 * their own. */
static void test_policy(holdoff_clock *clock) {
    CHECK_STATUS(holdoff_clock_set(clock, 100 * SEC), HOLDOFF_STATUS_OK);
    holdoff_config *c = config("{\"breaker\": {\"recoveries\": 1}, \"budget\": {}, \"quota\": {}}");
    holdoff_breaker *b = NULL;
    holdoff_retry_budget *budget = NULL;
    holdoff_retry_quota *quota = NULL;
    holdoff_policy *policy = NULL;
    CHECK_STATUS(holdoff_breaker_new(c, clock, &b), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_budget_new(c, clock, &budget), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_retry_quota_new(c, &quota), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_policy_new(b, budget, quota, NULL, &policy), HOLDOFF_STATUS_OK);
    holdoff_config_free(c);
    holdoff_metric_list *list = NULL;
    /* Attach: one read of each object starts its counting. */
    CHECK_STATUS(holdoff_breaker_metrics(b, &list), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_metric_list_free(list), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_policy_metrics(policy, &list), HOLDOFF_STATUS_OK);
    expect_readings(list, 19, (const reading[]){{NULL, 0}});
    CHECK_STATUS(holdoff_retry_quota_metrics(quota, &list), HOLDOFF_STATUS_OK);
    expect_readings(list, 2, (const reading[]){{"holdoff.quota.tokens", 500}, {NULL, 0}});

    holdoff_policy_call *pc = NULL;
    CHECK_STATUS(holdoff_policy_call_new(&pc), HOLDOFF_STATUS_OK);
    holdoff_before before;
    holdoff_permit p;
    holdoff_decision d;
    CHECK_STATUS(holdoff_policy_before_attempt(policy, pc, &before, &p), HOLDOFF_STATUS_OK);
    CHECK(before.action == HOLDOFF_BEFORE_ACTION_GO);
    holdoff_header h = {"Retry-After", 11, "2", 1};
    CHECK_STATUS(holdoff_policy_after_response(policy, pc, &p, 503, &h, 1, &d, NULL), HOLDOFF_STATUS_OK);
    CHECK(d.kind == HOLDOFF_DECISION_KIND_RETRY && d.delay_ns == 2 * SEC && d.source == HOLDOFF_WAIT_SOURCE_RETRY_AFTER);
    /* The retry took 5 tokens (a gauge, read live). */
    CHECK_STATUS(holdoff_retry_quota_metrics(quota, &list), HOLDOFF_STATUS_OK);
    expect_readings(list, 2, (const reading[]){{"holdoff.quota.tokens", 495}, {NULL, 0}});
    CHECK_STATUS(holdoff_clock_set(clock, 102 * SEC), HOLDOFF_STATUS_OK);
    CHECK_STATUS(holdoff_policy_before_attempt(policy, pc, &before, &p), HOLDOFF_STATUS_OK);
    CHECK(before.action == HOLDOFF_BEFORE_ACTION_GO && p.probe == 1);
    CHECK_STATUS(holdoff_policy_after_attempt(policy, pc, &p, HOLDOFF_OUTCOME_SUCCESS, 0, &d), HOLDOFF_STATUS_OK);
    CHECK(d.kind == HOLDOFF_DECISION_KIND_DONE);

    CHECK_STATUS(holdoff_policy_metrics(policy, &list), HOLDOFF_STATUS_OK);
    expect_readings(list, 19,
                    (const reading[]){{"holdoff.retry.attempts", 2},
                                      {"holdoff.retry.retries", 1},
                                      {"holdoff.retry.waits{source=retry_after}", 1},
                                      {"holdoff.retry.wait.duration{source=retry_after}", 2.0},
                                      {NULL, 0}});
    CHECK_STATUS(holdoff_breaker_metrics(b, &list), HOLDOFF_STATUS_OK);
    expect_readings(list, 24,
                    (const reading[]){{"holdoff.breaker.state{state=closed}", 1},
                                      {"holdoff.breaker.admitted", 2},
                                      {"holdoff.breaker.outcomes{outcome=retry_later}", 1},
                                      {"holdoff.breaker.outcomes{outcome=success}", 1},
                                      {"holdoff.breaker.probes", 1},
                                      {"holdoff.breaker.transitions{reason=retry_later}", 1},
                                      {"holdoff.breaker.transitions{reason=probe_admitted}", 1},
                                      {"holdoff.breaker.transitions{reason=recovered}", 1},
                                      {NULL, 0}});
    /* The retry's tokens came back with the success. */
    CHECK_STATUS(holdoff_retry_quota_metrics(quota, &list), HOLDOFF_STATUS_OK);
    expect_readings(list, 2, (const reading[]){{"holdoff.quota.tokens", 500}, {NULL, 0}});
    CHECK_STATUS(holdoff_policy_metrics(NULL, &list), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "policy") == 0);
    CHECK_STATUS(holdoff_retry_quota_metrics(NULL, &list), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "quota") == 0);
    holdoff_policy_call_free(pc);
    holdoff_policy_free(policy);
    holdoff_retry_quota_free(quota);
    holdoff_retry_budget_free(budget);
    holdoff_breaker_free(b);
}

static void group_call(holdoff_breaker_group *g, const char *key, uint32_t outcome) {
    holdoff_breaker *b = NULL;
    CHECK_STATUS(holdoff_breaker_group_get(g, key, strlen(key), &b), HOLDOFF_STATUS_OK);
    call(b, outcome, 1);
    holdoff_breaker_free(b);
}

/* A group of two keys, read when attached: `pay` succeeds, `auth` fails once, then `search`
 * evicts idle `pay`. Each kept breaker's readings carry its key as `upstream`. */
static void test_group(holdoff_clock *clock) {
    holdoff_config *c = config("{\"group\": {\"max_keys\": 2}}");
    holdoff_breaker_group *g = NULL;
    CHECK_STATUS(holdoff_breaker_group_new(c, clock, &g), HOLDOFF_STATUS_OK);
    holdoff_config_free(c);
    holdoff_metric_list *list = NULL;
    CHECK_STATUS(holdoff_breaker_group_metrics(g, &list), HOLDOFF_STATUS_OK);
    expect_readings(list, 2, (const reading[]){{NULL, 0}});
    group_call(g, "pay", HOLDOFF_OUTCOME_SUCCESS);
    group_call(g, "auth", HOLDOFF_OUTCOME_FAILURE);
    group_call(g, "search", HOLDOFF_OUTCOME_SUCCESS);
    CHECK_STATUS(holdoff_breaker_group_metrics(g, &list), HOLDOFF_STATUS_OK);
    /* The group's own series come first, without upstream; then the keys in sorted order. */
    holdoff_metric_sample s;
    CHECK_STATUS(holdoff_metric_list_get(list, 0, &s), HOLDOFF_STATUS_OK);
    CHECK(s.upstream == NULL && s.attribute == HOLDOFF_METRIC_NO_ATTRIBUTE && s.value == 2);
    CHECK_STATUS(holdoff_metric_list_get(list, 2, &s), HOLDOFF_STATUS_OK);
    CHECK(s.upstream && strcmp(s.upstream, "auth") == 0);
    CHECK_STATUS(holdoff_metric_list_get(list, 2 + 24, &s), HOLDOFF_STATUS_OK);
    CHECK(s.upstream && strcmp(s.upstream, "search") == 0);
    expect_readings(list, 2 + 2 * 24,
                    (const reading[]){{"holdoff.group.keys", 2},
                                      {"holdoff.group.evictions", 1},
                                      {"holdoff.breaker.state{state=closed,upstream=auth}", 1},
                                      {"holdoff.breaker.admitted{upstream=auth}", 1},
                                      {"holdoff.breaker.outcomes{outcome=failure,upstream=auth}", 1},
                                      {"holdoff.breaker.state{state=closed,upstream=search}", 1},
                                      {"holdoff.breaker.admitted{upstream=search}", 1},
                                      {"holdoff.breaker.outcomes{outcome=success,upstream=search}", 1},
                                      {NULL, 0}});
    CHECK_STATUS(holdoff_breaker_group_metrics(NULL, &list), HOLDOFF_STATUS_NULL_PARAMETER);
    CHECK(strcmp(holdoff_last_error_field(), "group") == 0);
    holdoff_breaker_group_free(g);
}

int main(void) {
    holdoff_clock *clock = NULL;
    CHECK_STATUS(holdoff_clock_new_manual(0, &clock), HOLDOFF_STATUS_OK);
    test_table();
    test_breaker(clock);
    test_policy(clock);
    test_group(clock);
    holdoff_clock_free(clock);
    CHECK(holdoff_debug_live_handles() == 0);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
