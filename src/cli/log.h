/*
 * What advlock says on stderr, in one place (log.c): every event of a run
 * and every error message goes through cli_log(), which writes it in the
 * format --log-format chose. Text (the default) prints the sentences the
 * command always printed, and nothing for the events it never reported;
 * JSON prints one object per event, one per line. The fields of each event
 * are listed in advlock(1), "LOG FORMAT".
 */
#ifndef ADVLOCK_CLI_LOG_H
#define ADVLOCK_CLI_LOG_H

#include <stdarg.h>
#include <stdint.h>

#include "advlock.h"

typedef enum cli_log_format {
    CLI_LOG_TEXT = 0, /* "advlock: " and a sentence, for people */
    CLI_LOG_JSON = 1  /* one JSON object per line, for log pipelines */
} cli_log_format;

/* The events of advlock run, in the order a run meets them. */
typedef enum cli_event_kind {
    CLI_EVENT_TRYING,          /* a lock statement goes out: report (attempts) */
    CLI_EVENT_WAITING,         /* busy: a sleep of sleep_ms starts before the next try */
    CLI_EVENT_ACQUIRED,        /* report (attempts, elapsed, fence); lease_ms */
    CLI_EVENT_LEASE_RENEWED,   /* a heartbeat answered: stop deadline in deadline_ms */
    CLI_EVENT_LOCK_LOST,       /* said; reason; the command stopped unless kept */
    CLI_EVENT_COMMAND_STARTED, /* pid, command */
    CLI_EVENT_SIGNAL_SENT,     /* signal sent to the command's process group */
    CLI_EVENT_COMMAND_EXITED,  /* pid; exit_code or signal; status */
    CLI_EVENT_RELEASED,        /* ended: the unlock, or with --xact COMMIT or ROLLBACK */
    CLI_EVENT_RELEASE_FAILED,  /* said */
    CLI_EVENT_TIMED_OUT,       /* said; report (attempts, elapsed, timeout, holder) */
    CLI_EVENT_FAILED,          /* said; report where the acquire ran (NULL: before) */
    CLI_EVENT_CANCELLED,       /* the acquire ended by a stop signal: signal */
    CLI_EVENT_MESSAGE,         /* said: any other message (cli_error, cli_warning) */
    CLI_EVENT_EXIT             /* advlock's exit status: status */
} cli_event_kind;

typedef enum cli_log_level { CLI_DEBUG, CLI_INFO, CLI_WARNING, CLI_ERROR } cli_log_level;

/* The most names one run holds (see KEY... in advlock(1)). */
enum { CLI_RUN_LOCKS_MAX = 64 };

/* A name a run holds, as given, and its key. */
typedef struct cli_lock {
    const char *name;
    int64_t key;
} cli_lock;

/* One event. Only the fields its kind names (above) are read; strings are
 * borrowed for the call. The events about the whole run (lease_renewed,
 * lock_lost, command_started, signal_sent, command_exited, exit) name every
 * lock the run holds (cli_log_set_locks) by themselves; lock names the one
 * an event is about. */
typedef struct cli_event {
    cli_event_kind kind;
    cli_log_level level;          /* MESSAGE only: other kinds have their own */
    const char *lock;             /* the one lock's name as given, or NULL: none */
    int64_t key;                  /* its key (with lock) */
    const advlock_report *report; /* the operation's facts, or NULL */
    const advlock_report *holder; /* WAITING: who held the lock (--diagnose), or NULL */
    const char *said;             /* the sentence text prints (no "advlock: "), or NULL */
    const char *reason;           /* LOCK_LOST: "connection", "lease", "unverified";
                                     RELEASED: "unlock", "commit", "rollback" */
    int64_t sleep_ms;
    int64_t lease_ms;    /* ACQUIRED: the lease, 0: none */
    int64_t deadline_ms; /* LEASE_RENEWED: from now to the stop deadline */
    int kept;            /* LOCK_LOST: --keep-running left the command running */
    int pid;
    char *const *command; /* COMMAND_STARTED: argv, NULL-terminated */
    int wait_status;      /* COMMAND_EXITED: waitpid's status */
    int signal;           /* SIGNAL_SENT, CANCELLED */
    int status;           /* COMMAND_EXITED: what it makes advlock exit with; EXIT */
} cli_event;

/* Chooses the format of everything said from now on (default text). */
void cli_log_set_format(cli_log_format format);

/* Names the locks of the run, in the order they are taken, for the events
 * about the whole run from now on (at most CLI_RUN_LOCKS_MAX; the array is
 * copied, the names borrowed: they must live until the exit is said, as
 * argv's words do). */
void cli_log_set_locks(const cli_lock *locks, int count);

/* Parses --log-format's argument ("text", "json"); returns 0, or -1 for
 * anything else. */
int cli_log_parse_format(const char *text, cli_log_format *format);

/* Whether the format is JSON: worth asking the server for facts that only
 * its events carry. */
int cli_log_structured(void);

/* Whether a progress line may be drawn on stderr: text, on a terminal. */
int cli_log_draws_progress(void);

/* Says one event, in one write(2) for JSON (a line never interleaves with
 * the command's own output on the same stderr). Failures to write are
 * ignored: there is nowhere left to say them. */
void cli_log(const cli_event *e);

/* cli_log of a MESSAGE at level, the sentence formatted as by printf. */
void cli_log_vmessage(cli_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Says advlock's exit status (the EXIT event, JSON only: text has no line
 * for it) and returns it, for main to return. */
int cli_log_exit(int status);

#endif
