/*
 * advlock's two sinks for what it says (log.h): text, the sentences people
 * read (the reference's, unchanged), and JSON lines for log pipelines.
 * Every event goes through cli_log(), so the two can never report
 * different things: a sentence text prints is a JSON event's "message".
 */
#define _GNU_SOURCE /* sigabbrev_np */
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static cli_log_format log_format = CLI_LOG_TEXT;
static cli_lock run_locks[CLI_RUN_LOCKS_MAX];
static int run_lock_count;

void cli_log_set_format(cli_log_format format)
{
    log_format = format;
}

void cli_log_set_locks(const cli_lock *locks, int count)
{
    run_lock_count = count < CLI_RUN_LOCKS_MAX ? count : CLI_RUN_LOCKS_MAX;
    memcpy(run_locks, locks, (size_t)run_lock_count * sizeof *locks);
}

int cli_log_parse_format(const char *text, cli_log_format *format)
{
    if (strcmp(text, "text") == 0)
        *format = CLI_LOG_TEXT;
    else if (strcmp(text, "json") == 0)
        *format = CLI_LOG_JSON;
    else
        return -1;
    return 0;
}

int cli_log_structured(void)
{
    return log_format == CLI_LOG_JSON;
}

int cli_log_draws_progress(void)
{
    return log_format == CLI_LOG_TEXT && isatty(STDERR_FILENO);
}

/* ---- text ------------------------------------------------------------------ */

static void text_sink(const cli_event *e)
{
    if (e->said != NULL)
        fprintf(stderr, "advlock: %s\n", e->said);
}

/* ---- JSON ------------------------------------------------------------------ */

/* A JSON string as advlock_json_string() writes it: every line parses,
 * whatever bytes a command's argument or a server's message holds. Lock
 * names are well-formed already (advlock_derive_key). */
static void json_string(FILE *f, const char *text)
{
    char small[256];
    int n = advlock_json_string(text, small, sizeof small);
    if (n >= 0 && (size_t)n < sizeof small) {
        fputs(small, f);
        return;
    }
    char *big = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (big != NULL && advlock_json_string(text, big, (size_t)n + 1) == n)
        fputs(big, f);
    else
        fputs("\"\\ufffd\"", f); /* out of memory: still a line that parses */
    free(big);
}

static void json_field_string(FILE *f, const char *name, const char *value)
{
    fprintf(f, ",\"%s\":", name);
    json_string(f, value);
}

static void json_field_int(FILE *f, const char *name, int64_t value)
{
    fprintf(f, ",\"%s\":%" PRId64, name, value);
}

/* A 64-bit value as a JSON string: beyond 2^53 a number would lose digits
 * in most JSON parsers (JavaScript's, jq's). */
static void json_field_int64_string(FILE *f, const char *name, int64_t value)
{
    fprintf(f, ",\"%s\":\"%" PRId64 "\"", name, value);
}

/* The current time as RFC 3339, UTC, with milliseconds. */
static void json_timestamp(FILE *f)
{
    struct timespec now;
    struct tm utc;
    char when[32];
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &utc);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &utc);
    fprintf(f, "{\"ts\":\"%s.%03ldZ\"", when, now.tv_nsec / 1000000);
}

static const char *signal_name(int sig, char *buf, size_t size)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev != NULL)
        snprintf(buf, size, "SIG%s", abbrev);
    else
        snprintf(buf, size, "%d", sig);
    return buf;
}

static void json_field_signal(FILE *f, int sig)
{
    char name[32];
    json_field_string(f, "signal", signal_name(sig, name, sizeof name));
}

/* Each event's name, level, and whether it is about the whole run (all its
 * locks) rather than one lock. */
static const struct {
    const char *name;
    cli_log_level level;
    int whole_run;
} kinds[] = {
    [CLI_EVENT_TRYING] = {"trying", CLI_DEBUG, 0},
    [CLI_EVENT_WAITING] = {"waiting", CLI_INFO, 0},
    [CLI_EVENT_ACQUIRED] = {"acquired", CLI_INFO, 0},
    [CLI_EVENT_LEASE_RENEWED] = {"lease_renewed", CLI_DEBUG, 1},
    [CLI_EVENT_LOCK_LOST] = {"lock_lost", CLI_ERROR, 1},
    [CLI_EVENT_COMMAND_STARTED] = {"command_started", CLI_INFO, 1},
    [CLI_EVENT_SIGNAL_SENT] = {"signal_sent", CLI_WARNING, 1},
    [CLI_EVENT_COMMAND_EXITED] = {"command_exited", CLI_INFO, 1},
    [CLI_EVENT_RELEASED] = {"released", CLI_INFO, 0},
    [CLI_EVENT_RELEASE_FAILED] = {"release_failed", CLI_ERROR, 0},
    [CLI_EVENT_TIMED_OUT] = {"timed_out", CLI_WARNING, 0},
    [CLI_EVENT_FAILED] = {"failed", CLI_ERROR, 0},
    [CLI_EVENT_CANCELLED] = {"cancelled", CLI_WARNING, 0},
    [CLI_EVENT_MESSAGE] = {"message", CLI_ERROR, 0},
    [CLI_EVENT_EXIT] = {"exit", CLI_INFO, 1},
};

static const char *const level_names[] = {"debug", "info", "warning", "error"};

static cli_log_level level_of(const cli_event *e)
{
    if (e->kind == CLI_EVENT_MESSAGE)
        return e->level;
    if (e->kind == CLI_EVENT_EXIT || e->kind == CLI_EVENT_COMMAND_EXITED)
        return e->status == 0 ? CLI_INFO : CLI_ERROR;
    return kinds[e->kind].level;
}

/* Who held the lock, as a diagnosed acquire found it: at its timeout, or
 * in its first sleep. */
static void json_holder(FILE *f, const advlock_report *r)
{
    if (r->detail != ADVLOCK_DETAIL_DIAGNOSED || r->holder_pid == 0)
        return;
    fprintf(f, ",\"holder\":{\"pid\":%d", r->holder_pid);
    json_field_string(f, "application", r->holder_application);
    json_field_string(f, "state", advlock_backend_state_name(r->holder_state));
    json_field_int(f, "seconds", r->holder_seconds);
    json_field_int(f, "other_holders", r->other_holders);
    fputc('}', f);
}

/* All the run's locks: their names, and their keys as strings, in the
 * order taken. */
static void json_run_locks(FILE *f)
{
    fputs(",\"locks\":[", f);
    for (int i = 0; i < run_lock_count; i++) {
        if (i > 0)
            fputc(',', f);
        json_string(f, run_locks[i].name);
    }
    fputs("],\"keys\":[", f);
    for (int i = 0; i < run_lock_count; i++)
        fprintf(f, "%s\"%" PRId64 "\"", i > 0 ? "," : "", run_locks[i].key);
    fputc(']', f);
}

/* The fields an event adds to ts, level, event, locks, lock and key, and a
 * sentence for "message" where text says nothing (written to said). */
static void json_fields(FILE *f, const cli_event *e, char *said, size_t size)
{
    const advlock_report *r = e->report;
    char signal[32];
    switch (e->kind) {
    case CLI_EVENT_TRYING:
        json_field_int(f, "attempt", (int64_t)r->attempts);
        snprintf(said, size, "attempt %" PRIu64, r->attempts);
        break;
    case CLI_EVENT_WAITING:
        json_field_int(f, "attempt", (int64_t)r->attempts);
        json_field_int(f, "retry_in_ms", e->sleep_ms);
        if (e->holder != NULL)
            json_holder(f, e->holder);
        snprintf(said, size, "busy; next attempt in %" PRId64 " ms", e->sleep_ms);
        break;
    case CLI_EVENT_ACQUIRED:
        json_field_int(f, "attempts", (int64_t)r->attempts);
        json_field_int(f, "wait_ms", r->elapsed_ms);
        if (r->fence != 0)
            json_field_int64_string(f, "fence", r->fence);
        if (e->lease_ms > 0)
            json_field_int(f, "lease_ms", e->lease_ms);
        snprintf(said, size, "acquired after %" PRIu64 " attempt%s in %" PRId64 " ms", r->attempts,
                 r->attempts == 1 ? "" : "s", r->elapsed_ms);
        break;
    case CLI_EVENT_LEASE_RENEWED:
        json_field_int(f, "deadline_ms", e->deadline_ms);
        snprintf(said, size, "lease renewed: stop deadline in %" PRId64 " ms", e->deadline_ms);
        break;
    case CLI_EVENT_LOCK_LOST:
        json_field_string(f, "reason", e->reason);
        fprintf(f, ",\"command_stopped\":%s", e->kept ? "false" : "true");
        break;
    case CLI_EVENT_COMMAND_STARTED:
        json_field_int(f, "pid", e->pid);
        fputs(",\"command\":[", f);
        for (char *const *arg = e->command; *arg != NULL; arg++) {
            if (arg != e->command)
                fputc(',', f);
            json_string(f, *arg);
        }
        fputc(']', f);
        snprintf(said, size, "command started: pid %d", e->pid);
        break;
    case CLI_EVENT_SIGNAL_SENT:
        json_field_signal(f, e->signal);
        snprintf(said, size, "%s sent to the command's process group",
                 signal_name(e->signal, signal, sizeof signal));
        break;
    case CLI_EVENT_COMMAND_EXITED:
        json_field_int(f, "pid", e->pid);
        if (WIFEXITED(e->wait_status)) {
            json_field_int(f, "exit_code", WEXITSTATUS(e->wait_status));
            snprintf(said, size, "command exited with %d", WEXITSTATUS(e->wait_status));
        } else if (WIFSIGNALED(e->wait_status)) {
            json_field_signal(f, WTERMSIG(e->wait_status));
            snprintf(said, size, "command killed by %s",
                     signal_name(WTERMSIG(e->wait_status), signal, sizeof signal));
        } else {
            snprintf(said, size, "command could not be waited for");
        }
        json_field_int(f, "status", e->status);
        break;
    case CLI_EVENT_RELEASED:
        json_field_string(f, "by", e->reason);
        snprintf(said, size, "released (%s)", e->reason);
        break;
    case CLI_EVENT_TIMED_OUT:
        json_field_int(f, "attempts", (int64_t)r->attempts);
        json_field_int(f, "wait_ms", r->elapsed_ms);
        json_field_int(f, "timeout_ms", r->timeout_ms);
        json_holder(f, r);
        break;
    case CLI_EVENT_FAILED:
        if (r != NULL && r->sqlstate[0] != '\0')
            json_field_string(f, "sqlstate", r->sqlstate);
        if (r != NULL && r->failure != 0)
            json_field_string(f, "error", advlock_strerror(r->failure));
        break;
    case CLI_EVENT_CANCELLED:
        json_field_signal(f, e->signal);
        snprintf(said, size, "cancelled by %s", signal_name(e->signal, signal, sizeof signal));
        break;
    case CLI_EVENT_EXIT:
        json_field_int(f, "status", e->status);
        snprintf(said, size, "exit status %d", e->status);
        break;
    case CLI_EVENT_RELEASE_FAILED:
    case CLI_EVENT_MESSAGE: break;
    }
}

/* Writes all of buf, retrying short writes and interruptions (a signal
 * handler installed without SA_RESTART, or a write that cannot restart),
 * so that a line is never cut; any other error gives up. */
static void write_all(const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

static void json_sink(const cli_event *e)
{
    char *line = NULL, said[160] = "";
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    if (f == NULL)
        return;
    json_timestamp(f);
    json_field_string(f, "level", level_names[level_of(e)]);
    json_field_string(f, "event", kinds[e->kind].name);
    if (kinds[e->kind].whole_run && run_lock_count > 0)
        json_run_locks(f);
    if (e->lock != NULL) {
        json_field_string(f, "lock", e->lock);
        json_field_int64_string(f, "key", e->key);
    }
    json_fields(f, e, said, sizeof said);
    json_field_string(f, "message", e->said != NULL ? e->said : said);
    fputs("}\n", f);
    if (fclose(f) == 0)
        write_all(line, len);
    free(line);
}

/* ---- both ------------------------------------------------------------------ */

void cli_log(const cli_event *e)
{
    if (log_format == CLI_LOG_JSON)
        json_sink(e);
    else
        text_sink(e);
}

void cli_log_vmessage(cli_log_level level, const char *fmt, va_list ap)
{
    char *said = NULL;
    if (vasprintf(&said, fmt, ap) < 0)
        return;
    cli_log(&(cli_event){.kind = CLI_EVENT_MESSAGE, .level = level, .said = said});
    free(said);
}

int cli_log_exit(int status)
{
    if (log_format == CLI_LOG_JSON)
        cli_log(&(cli_event){.kind = CLI_EVENT_EXIT, .status = status});
    return status;
}
