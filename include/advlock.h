/*
 * advlock — PostgreSQL advisory locks by name: the sans-I/O core.
 *
 * A lock name becomes a 64-bit key (SHA-256 of "74726:" + name, first 8
 * bytes big-endian). A lock machine then tells its driver, one step at a
 * time, what to do: run a query, sleep until a deadline, or stop with an
 * outcome. The machine never performs I/O, never reads a clock, never sleeps
 * and never allocates: the caller owns every byte of its state and feeds it
 * the current time (monotonic milliseconds) with every input.
 *
 * Driving loop, in outline:
 *
 *     advlock_machine m;
 *     advlock_machine_init(&m);
 *     advlock_start_acquire(&m, "migrations", 10, 30000, now());
 *     for (;;) {
 *         advlock_action a = advlock_next_action(&m);
 *         if (a.kind == ADVLOCK_ACTION_QUERY)      run a.sql_text with a.param,
 *                                                  then advlock_on_result(...)
 *         else if (a.kind == ADVLOCK_ACTION_SLEEP) wait until a.wake_at_ms,
 *                                                  then advlock_on_timer(...)
 *         else break;                              a.outcome says how it ended
 *     }
 *
 * Thread safety: a machine belongs to one thread at a time; different
 * machines may be driven from different threads without locking.
 * advlock_derive_key() may be called from any thread.
 */
#ifndef ADVLOCK_H
#define ADVLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ADVLOCK_VERSION "0.1.0"

/* Marks the exported API; everything else in the libraries is hidden. */
#if defined(__GNUC__) && !defined(ADVLOCK_STATIC_ONLY)
#define ADVLOCK_API __attribute__((visibility("default")))
#else
#define ADVLOCK_API
#endif

/*
 * Error codes. Every function that can fail returns 0 or one of these
 * negative values; a failed call changes nothing.
 */
typedef enum advlock_error {
    ADVLOCK_OK = 0,
    /* A required pointer is NULL, or a number is out of range. */
    ADVLOCK_EINVAL = -1,
    /* The lock key's bytes are not well-formed UTF-8. */
    ADVLOCK_EUTF8 = -2,
    /* The call is not allowed in the machine's current state. */
    ADVLOCK_EMISUSE = -3,
    /* libcrypto failed to compute SHA-256 (for example, out of memory). */
    ADVLOCK_ECRYPTO = -4,
    /* The server answered SQL NULL where a boolean was required. */
    ADVLOCK_ENULL = -5,
    /* The server reported an error; the SQLSTATE says which. */
    ADVLOCK_ESERVER = -6,
    /* The connection to the server was lost; the session's locks are gone. */
    ADVLOCK_ECONNLOST = -7
} advlock_error;

/*
 * Returns a static, human-readable description of an advlock_error value
 * (or of 0). Unknown values give "unknown advlock error". Never NULL.
 */
ADVLOCK_API const char *advlock_strerror(int error);

/*
 * Derives the 64-bit advisory-lock key for a lock name.
 *
 * lock_key, len: the name's bytes; len is explicit, so an embedded NUL byte
 *     is part of the name. lock_key may be NULL only when len is 0. The bytes
 *     are read during the call only.
 * key_out: receives the key: SHA-256 over "74726:" followed by the name's
 *     bytes, first 8 bytes of the digest read big-endian as a signed integer.
 *     Untouched on error.
 *
 * Returns 0, or:
 *     ADVLOCK_EINVAL  lock_key is NULL with len > 0, or key_out is NULL;
 *     ADVLOCK_EUTF8   the bytes are not well-formed UTF-8 (truncated or
 *                     overlong sequences, surrogates U+D800..U+DFFF, code
 *                     points above U+10FFFF, stray continuation bytes);
 *     ADVLOCK_ECRYPTO libcrypto could not compute the digest.
 *
 * Thread-safe. The first call on each thread sets up a digest context that is
 * reused by later calls on that thread and freed when the thread exits.
 */
ADVLOCK_API int advlock_derive_key(const char *lock_key, size_t len, int64_t *key_out);

/*
 * Checks that len bytes at s form well-formed UTF-8 (Unicode 15, table 3-7).
 * Returns 1 if they do, 0 if not (also for s NULL with len > 0).
 */
ADVLOCK_API int advlock_utf8_valid(const char *s, size_t len);

/*
 * Every SQL statement a machine can emit. Each takes exactly one parameter,
 * $1, of type bigint (int8, type OID 20), and returns one row with one
 * boolean column. Drivers may prepare each statement once per connection,
 * indexed by this identifier.
 */
typedef enum advlock_sql {
    ADVLOCK_SQL_TRY_LOCK = 0, /* SELECT pg_try_advisory_lock($1) */
    ADVLOCK_SQL_UNLOCK = 1,   /* SELECT pg_advisory_unlock($1) */
    ADVLOCK_SQL_COUNT = 2
} advlock_sql;

/*
 * Returns the constant SQL text of a statement, or NULL for an identifier
 * outside [0, ADVLOCK_SQL_COUNT). The text has static storage duration.
 */
ADVLOCK_API const char *advlock_sql_text(advlock_sql sql);

/* What the driver must do next. */
typedef enum advlock_action_kind {
    /* No operation: the machine is new; start one. */
    ADVLOCK_ACTION_NONE = 0,
    /* Run sql with param, then report its result with advlock_on_result(). */
    ADVLOCK_ACTION_QUERY = 1,
    /* Wait until wake_at_ms, then call advlock_on_timer(). */
    ADVLOCK_ACTION_SLEEP = 2,
    /* The operation ended; outcome says how. Start another or stop. */
    ADVLOCK_ACTION_DONE = 3
} advlock_action_kind;

/* How an operation ended. */
typedef enum advlock_outcome {
    ADVLOCK_ACQUIRED = 0,  /* the session now holds the lock */
    ADVLOCK_RELEASED = 1,  /* the session released one hold of the lock */
    ADVLOCK_NOT_HELD = 2,  /* release found no hold to release (not an error) */
    ADVLOCK_TIMED_OUT = 3, /* the lock stayed busy until the timeout */
    ADVLOCK_CANCELLED = 4, /* the caller cancelled; no lock is held */
    ADVLOCK_FAILED = 5     /* error says why; the message has the details */
} advlock_outcome;

/* Returns a static name for an outcome ("acquired", "timed out", ...). */
ADVLOCK_API const char *advlock_outcome_name(advlock_outcome outcome);

/*
 * The next action. Fields are meaningful only for the kind that names them.
 * Pointers point into the machine or to static storage: they stay valid until
 * the machine next changes (any successful input, or init) or is freed.
 */
typedef struct advlock_action {
    advlock_action_kind kind;

    /* QUERY */
    advlock_sql sql;     /* which statement, for drivers that prepare them */
    const char *sql_text; /* its text, as advlock_sql_text(sql) */
    int64_t param;       /* the value of $1 */

    /* SLEEP */
    int64_t wake_at_ms;  /* absolute deadline on the caller's clock */
    int64_t sleep_ms;    /* the length the schedule chose */

    /* DONE */
    advlock_outcome outcome;
    int error;           /* 0, or an advlock_error when outcome is FAILED */
    const char *sqlstate; /* the server's 5-character SQLSTATE, or "" */
    const char *message; /* a sentence naming the lock key, or "" */
} advlock_action;

/*
 * Message buffers. A lock key longer than ADVLOCK_KEY_ECHO_MAX bytes appears
 * in messages cut at the last whole UTF-8 character that fits, followed by
 * "..."; the lock itself always uses the whole key. A message longer than
 * ADVLOCK_MESSAGE_MAX - 1 bytes is cut the same way. An embedded NUL byte
 * of a key appears as the two characters \0 so a message stays one C string.
 */
#define ADVLOCK_KEY_ECHO_MAX 512
#define ADVLOCK_MESSAGE_MAX 1024

/*
 * A lock machine. Allocate it anywhere (stack, static, inside your own
 * struct); it holds no pointers, so it may be copied or moved at any time.
 * Its fields are private: use the functions below.
 */
typedef struct advlock_machine {
    int state_;
    int op_;
    int cancel_;
    int64_t key_;
    int64_t timeout_ms_;
    int64_t start_ms_;
    int64_t now_ms_;
    int64_t next_delay_ms_;
    uint64_t attempts_;
    int64_t wake_at_ms_;
    int64_t sleep_ms_;
    int sql_;
    int outcome_;
    int error_;
    char sqlstate_[6];
    char key_echo_[ADVLOCK_KEY_ECHO_MAX + 4];
    char message_[ADVLOCK_MESSAGE_MAX];
} advlock_machine;

/* Puts a machine into its initial state (action NONE). Cannot fail. */
ADVLOCK_API void advlock_machine_init(advlock_machine *m);

/*
 * Starts acquiring a lock, exactly as the reference does: try at once; on
 * false, if at least timeout_ms has passed since the start, end TIMED_OUT;
 * otherwise sleep 100, 200, 400, 800, 1000, 1000, ... ms and try again.
 * timeout_ms 0 means exactly one attempt.
 *
 * lock_key, len: as for advlock_derive_key(); read during the call only
 *     (the key is derived once here and the name copied for messages).
 * now_ms: the caller's monotonic time in milliseconds.
 *
 * On success the next action is QUERY (try-lock). Returns 0, or:
 *     ADVLOCK_EINVAL   m NULL, lock_key NULL with len > 0, timeout_ms < 0;
 *     ADVLOCK_EUTF8    the name is not well-formed UTF-8;
 *     ADVLOCK_ECRYPTO  the key could not be derived;
 *     ADVLOCK_EMISUSE  an operation is under way (action QUERY or SLEEP).
 */
ADVLOCK_API int advlock_start_acquire(advlock_machine *m, const char *lock_key, size_t len,
                          int64_t timeout_ms, int64_t now_ms);

/*
 * Starts releasing one hold of a lock: QUERY unlock; true ends RELEASED,
 * false or NULL ends NOT_HELD. Arguments and errors as for
 * advlock_start_acquire() (without the timeout).
 */
ADVLOCK_API int advlock_start_release(advlock_machine *m, const char *lock_key, size_t len,
                          int64_t now_ms);

/* The result of the outstanding query, as reported to advlock_on_result(). */
typedef enum advlock_result {
    ADVLOCK_RESULT_TRUE = 0,
    ADVLOCK_RESULT_FALSE = 1,
    ADVLOCK_RESULT_NULL = 2,            /* one row, one SQL NULL value */
    ADVLOCK_RESULT_SERVER_ERROR = 3,    /* the server rejected the query */
    ADVLOCK_RESULT_CONNECTION_LOST = 4  /* no answer will ever come */
} advlock_result;

/*
 * Reports the result of the outstanding query.
 *
 * sqlstate: the server's SQLSTATE for SERVER_ERROR or CONNECTION_LOST, or
 *     NULL; only a 5-character code of digits and capital letters is kept.
 * message: the server's or driver's message, or NULL. Both are copied
 *     during the call (cut to fit the message buffer).
 *
 * Returns 0, or:
 *     ADVLOCK_EINVAL   m NULL or result not an advlock_result value;
 *     ADVLOCK_EMISUSE  no query is outstanding (action is not QUERY).
 */
ADVLOCK_API int advlock_on_result(advlock_machine *m, advlock_result result,
                      const char *sqlstate, const char *message,
                      int64_t now_ms);

/*
 * Tells the machine its timer may have expired. During a SLEEP whose
 * wake_at_ms has come, the next action becomes QUERY; an early call, or a
 * call while a query is outstanding, changes nothing and returns 0.
 *
 * Returns 0, or ADVLOCK_EINVAL (m NULL) or ADVLOCK_EMISUSE (no operation is
 * under way: action NONE or DONE).
 */
ADVLOCK_API int advlock_on_timer(advlock_machine *m, int64_t now_ms);

/*
 * Cancels an acquire. During a SLEEP it ends CANCELLED at once. While the
 * try-lock query is outstanding the machine waits for its result: if the
 * server granted the lock, the next action is an unlock query, and the
 * operation ends CANCELLED once that answers, so a cancelled acquire never
 * leaves the session holding a lock nobody knows about. (The reference
 * implementation, cancelled at that moment, keeps the lock.) A server error
 * or lost connection in the meantime still ends FAILED, with its error.
 * Cancelling twice is harmless.
 *
 * Returns 0, or ADVLOCK_EINVAL (m NULL) or ADVLOCK_EMISUSE (no acquire is
 * under way: action NONE or DONE, or a release, which is a single query that
 * always ends on its own).
 */
ADVLOCK_API int advlock_cancel(advlock_machine *m, int64_t now_ms);

/*
 * Returns the machine's next action, by value. Its strings belong to the
 * machine (or are static) and stay valid until the machine next changes.
 * For m NULL, returns an action of kind NONE.
 */
ADVLOCK_API advlock_action advlock_next_action(const advlock_machine *m);

/*
 * Returns how many try-lock queries the current or last acquire has issued
 * (0 before the first acquire, for m NULL, or after a release).
 */
ADVLOCK_API uint64_t advlock_attempts(const advlock_machine *m);

/*
 * Writes a millisecond duration as seconds the way the reference prints a
 * TimeSpan's TotalSeconds: no trailing zeros, '.' as the decimal separator
 * whatever the locale (30000 -> "30", 500 -> "0.5", 1250 -> "1.25").
 * Writes at most size bytes including the terminating NUL, like snprintf,
 * and returns the length the full text needs, or ADVLOCK_EINVAL for buf
 * NULL with size > 0 or a negative ms.
 */
ADVLOCK_API int advlock_format_seconds(int64_t ms, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* ADVLOCK_H */
