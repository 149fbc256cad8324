/* Declarations shared by the simulation driver's files; none of this is
 * exported. */
#ifndef ADVLOCK_SIM_INTERNAL_H
#define ADVLOCK_SIM_INTERNAL_H

#include "../adapters/fake/fake.h"

#include <string.h>

/* Events the queue can hold: a few per client, one reap per session. */
#define SIM_MAX_EVENTS (ADVLOCK_SIM_MAX_CLIENTS * 8 + ADVLOCK_FAKE_MAX_SESSIONS)

/* Statements one client's engine may have in flight, as the libpq
 * adapter's (ADVLOCK_PQ_SLOTS_). */
#define SIM_SLOTS 4

/* One client: its plan, session, clock, engine, the query in flight, what
 * the invariants know, and the policy model's state. */
typedef struct sim_client {
    /* plan */
    advlock_sim_plan_fn plan_;
    void *plan_state_;
    const advlock_sim_step *script_;
    size_t script_len_, script_pos_;
    advlock_sim_done *script_done_;
    advlock_sim_cycler cycler_;
    unsigned cycles_done_;
    int cycler_phase_, cycler_key_, release_tries_;
    int started_, stopped_;
    /* session and time */
    int pid_;
    int session_; /* open, killed (the client not told yet), or lost */
    advlock_fake_clock clock_;
    /* The connection engine with one member, as the single-lock libpq
     * adapter has it: the engine owns the session value and the rules. */
    advlock_conn engine_;
    advlock_conn_slot slots_[SIM_SLOTS];
    advlock_peer *bucket_;
    advlock_member member_;
    int64_t timer_at_;        /* the engine's wake-up the armed timer is for */
    int timer_fired_;         /* ... and it fired: armed again if still due */
    int step_owed_;           /* the plan's next step, once nothing is in flight */
    advlock_options options_; /* as the member starts with them (derived jitter seed) */
    /* the step under way */
    int busy_; /* an operation or a transaction statement */
    uint64_t op_serial_;
    advlock_sim_step step_;
    int key_index_;
    int64_t key_;
    int op_kind_; /* the operation's lock kind: mode * 2 + scope */
    int64_t started_ms_;
    int64_t started_reading_;
    int64_t jumped_at_start_;
    int cancel_sent_;
    uint64_t timer_serial_;
    /* When the process that makes its first acquire started (world.c):
     * its launch, moved on by the pauses its plan took before that acquire
     * (think time: a process that thinks first starts when it is done). */
    int64_t launched_ms_;
    int acquire_begun_; /* its first acquire has begun: launched_ms_ stays */
    /* the query in flight */
    int query_; /* none, on its way to the server, waiting there, on its way back */
    const char *query_text_;
    int query_is_lock_;      /* one of the lock statements */
    int64_t query_bound_ms_; /* a bounded wait's $2 (lock_timeout, ms), else 0 */
    int64_t query_params_[3];
    int query_nparams_; /* the engine's statement's bigints; 0 for a command */
    struct {
        int pid, in_recovery, ours;
    } session_row_; /* a session row on its way back */
    int64_t arrive_ms_, deliver_ms_, return_ms_;
    uint64_t wait_serial_;
    advlock_result result_;
    char result_sqlstate_[6];
    char result_message_[ADVLOCK_FAKE_TEXT_MAX];
    /* The words of the operation's last failing result, kept as a driver
     * keeps them for advlock_describe(). */
    char failure_message_[ADVLOCK_FAKE_TEXT_MAX];
    char result_tag_[16];
    const char *result_fault_;
    int transit_delta_;     /* what the answer on its way back changes, of op_kind_ */
    int txn_end_in_flight_; /* the answer tells of a transaction the server ended */
    int outside_block_;     /* the answer grants a transaction lock already gone */
    struct {
        int pid;
        unsigned char granted, mode, state;
        int64_t seconds;
    } rows_[ADVLOCK_SIM_MAX_CLIENTS]; /* a holders answer on its way back */
    size_t nrows_;
    /* what the invariants know, per key and lock kind (mode * 2 + scope);
     * 16 bits, so that the four kinds of a key compare as one word */
    int16_t belief_[ADVLOCK_SIM_MAX_KEYS][4];      /* ACQUIRED minus RELEASED */
    int16_t client_view_[ADVLOCK_SIM_MAX_KEYS][4]; /* holds per results delivered */
    int16_t server_view_[ADVLOCK_SIM_MAX_KEYS][4]; /* holds per queries applied */
    int server_in_block_; /* per the statements applied: inside BEGIN ... */
    int client_in_block_; /* per the answers read (libpq's PQtransactionStatus) */
    int unsure_;          /* may hold what it does not know about, until it reconnects */
    /* the independent policy model (policy.c) */
    int policy_state_, policy_cancel_, policy_deadline_passed_, policy_cancelling_;
    int policy_op_;                       /* the operation: acquire 1, release 2 */
    int policy_checked_, policy_proxied_; /* what the model knows of the session */
    int policy_claimed_, policy_standby_;
    int policy_claim_asked_; /* the row asked for a claim (a session-scoped operation's) */
    int policy_fail_after_undo_, policy_undo_reason_;
    advlock_sql policy_sql_;
    int64_t policy_start_, policy_reading_, policy_wake_, policy_sleep_, policy_deadline_;
    int64_t policy_resend_;   /* when a sent cancel is asked for again */
    int64_t policy_bound_;    /* a server-side wait's lock_timeout ($2, ms) */
    char policy_sqlstate_[6]; /* the last error's SQLSTATE in this operation */
    uint64_t policy_sleeps_, policy_attempts_, policy_jitter_;
    advlock_sim_done last_;
} sim_client;

typedef struct sim_event {
    int64_t at_ms_;
    uint64_t seq_;
    int kind_;
    int client_;
    uint64_t serial_;
    int64_t arg_;
} sim_event;

/* A session the driver opened on the fake database, and whose it is. */
typedef struct sim_session {
    int pid;
    int owner;       /* the client, or SESSION_ORPHAN: dropped, not yet reaped */
    int64_t reap_ms; /* an orphan: when the server notices the drop */
} sim_session;

/* The simulation behind an advlock_sim's opaque bytes (sim_world_of()). */
typedef struct sim_world {
    advlock_sim_config config_;
    advlock_prng prng_;
    advlock_fake_db db_;
    sim_client clients_[ADVLOCK_SIM_MAX_CLIENTS];
    int nclients_;
    /* the world's model (world.c), cleared by init */
    int modelled_;
    advlock_sim_model model_;
    int64_t server_free_us_[ADVLOCK_SIM_MAX_CLIENTS]; /* when each server slot is next free */
    int64_t keys_[ADVLOCK_SIM_MAX_KEYS];
    int nkeys_;
    sim_event events_[SIM_MAX_EVENTS];
    int nevents_;
    uint64_t next_seq_;
    int64_t now_ms_;
    sim_session sessions_[ADVLOCK_FAKE_MAX_SESSIONS]; /* the driver's, by pid; see sim.c */
    int nsessions_;
    int waiting_; /* clients whose query waits at the server */
    int ran_;
    advlock_sim_stats stats_;
    char violation_[ADVLOCK_SIM_VIOLATION_MAX];
} sim_world;

_Static_assert(sizeof(sim_world) <= ADVLOCK_SIM_SIZE, "advlock_sim's storage is too small");
_Static_assert(_Alignof(sim_world) <= _Alignof(advlock_sim), "advlock_sim is not aligned enough");

/* The simulation a caller's advlock_sim holds. The library reaches those
 * bytes only through this pointer, and callers never touch them. */
static inline sim_world *sim_world_of(advlock_sim *sim)
{
    return (sim_world *)(void *)sim->opaque_.bytes_;
}
static inline const sim_world *sim_world_of_const(const advlock_sim *sim)
{
    return (const sim_world *)(const void *)sim->opaque_.bytes_;
}
/* ... and back: the handle plans are given (the world starts its bytes). */
static inline advlock_sim *sim_handle_of(sim_world *world)
{
    return (advlock_sim *)(void *)world;
}

/* The client's one member's machine, which the engine drives and the
 * policy model judges. */
static inline const advlock_machine *sim_machine(const sim_client *cl)
{
    return &cl->member_.machine_;
}
/* The session value the client's engine keeps for its connection. */
static inline const advlock_session *sim_session_value(const sim_client *cl)
{
    return advlock_conn_session(&cl->engine_);
}

/* ---- events (event_queue.c) ---- */

enum advlock_sim_event_kind {
    EV_STEP,        /* the client's plan takes its next step */
    EV_ARRIVE,      /* the client's query reaches the server */
    EV_DELIVER,     /* its result reaches the client */
    EV_WAKE,        /* the client's timer fires (serial: timer) */
    EV_CANCEL,      /* the plan's cancel of an acquire (serial: operation) */
    EV_KILL,        /* pg_terminate_backend of the client's session */
    EV_REAP,        /* the server notices a dropped connection (arg: pid) */
    EV_STALL,       /* the client's clock stalls (arg: ms) */
    EV_JUMP,        /* the client's clock jumps (arg: ms) */
    EV_CANCEL_LAND, /* a cancel request reaches the server (arg: pid) */
    EV_DEADLOCK,    /* deadlock_timeout after a wait began (serial: wait) */
    EV_RETURN,      /* a granted waiter's statement finishes (serial: wait) */
    EV_LOCK_TIMEOUT /* a bounded wait's lock_timeout is due (serial: wait) */
};

/* Schedules an event at at_ms (never before now); 0, or -1 when full. */
int advlock_sim_schedule(sim_world *sim, int64_t at_ms, enum advlock_sim_event_kind kind,
                         int client, uint64_t serial, int64_t arg);
/* 1 when ev's serial is no longer its client's (a timer, cancel or wait
 * check that was superseded): serials only grow, so it can never act. */
int advlock_sim_event_outdated(const sim_world *sim, const sim_event *ev);
/* Removes the earliest event, by (time, sequence number); 0 when empty. */
int advlock_sim_next_event(sim_world *sim, sim_event *out);

/* ---- client session and query states ---- */

enum { SESSION_OPEN, SESSION_KILLED, SESSION_LOST };
/* A granted wait is QUERY_RETURNING until its statement finishes (later in
 * the same millisecond): a cancel landing first still ends it with 57014. */
enum { QUERY_NONE, QUERY_TO_SERVER, QUERY_WAITING, QUERY_RETURNING, QUERY_TO_CLIENT };
enum { SESSION_ORPHAN = -2 };

/* Lock kinds index the views: mode * 2 + scope. */
enum { KINDS = 4 };
static inline int advlock_sim_kind(advlock_mode mode, advlock_scope scope)
{
    return (int)mode * 2 + (int)scope;
}
static inline int advlock_sim_kind_is_xact(int kind)
{
    return kind % 2 == ADVLOCK_TRANSACTION;
}
/* "exclusive, session", ...: how messages name a kind. */
static inline const char *advlock_sim_kind_name(int kind)
{
    static const char *const names[KINDS] = {"exclusive, session", "exclusive, transaction",
                                             "shared, session", "shared, transaction"};
    return names[kind];
}
/* Do two keys' holds agree in every kind? (One 64-bit compare: the
 * invariants run this after every event.) */
static inline int advlock_sim_same_holds(const int16_t a[KINDS], const int16_t b[KINDS])
{
    uint64_t x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    return x == y;
}
static inline int advlock_sim_no_holds(const int16_t a[KINDS])
{
    uint64_t x;
    memcpy(&x, a, sizeof x);
    return x == 0;
}

/* ---- faults (faults.c) ---- */

enum query_fault { FAULT_NONE, FAULT_NULL, FAULT_ERROR, FAULT_DROP_BEFORE, FAULT_DROP_AFTER };

int64_t advlock_sim_draw_latency(advlock_prng *p, const advlock_fake_latency *lat);
/* The most a round trip can take under this latency. */
int64_t advlock_sim_latency_bound(const advlock_fake_latency *lat);
enum query_fault advlock_sim_draw_query_fault(advlock_prng *p, const advlock_fake_faults *f);
/* A server error's SQLSTATE and message, one of three at random. */
void advlock_sim_draw_server_error(advlock_prng *p, const char **sqlstate, const char **message);
int advlock_sim_faults_on(const advlock_fake_faults *f);
const char *advlock_sim_fault_name(enum query_fault fault);

/* ---- the world's model (world.c) ---- */

/* Schedules each client's first step: at once, or under a model after its
 * launch and startup draws. 0, or a violation. */
int advlock_sim_launch_clients(sim_world *sim);
/* A statement sent now: when it reaches the server and when its answer is
 * back (the configuration's latency, or the model's statement time and
 * server queue). */
void advlock_sim_statement_times(sim_world *sim, int64_t *arrive_ms, int64_t *deliver_ms);
/* A round trip for a cancel request's connection (no server queue). */
int64_t advlock_sim_cancel_rtt(sim_world *sim);
/* The most a statement's round trip can take, queue included. */
int64_t advlock_sim_rtt_bound(const sim_world *sim);
/* How late a timer fires, in ms (0 without a model). */
int64_t advlock_sim_wakeup_ms(sim_world *sim);
/* What running the held command adds to a hold, in ms (0 without a model). */
int64_t advlock_sim_command_ms(sim_world *sim);

/* ---- the policy, as an independent model (policy.c) ---- */

enum policy_input {
    IN_START_ACQUIRE,
    IN_START_RELEASE,
    IN_RESULT,
    IN_TIMER,
    IN_CANCEL,
    IN_CANCEL_SENT,
    IN_HOLDERS,
    IN_SESSION /* the session row: the client's session_row_ */
};

/* Seeds the model's own jitter generator for a client's new options. */
void advlock_sim_policy_seed(sim_client *cl, uint64_t jitter_seed);
/* The client's engine has a fresh session value: nothing checked yet. */
void advlock_sim_policy_new_session(sim_client *cl);

/*
 * Advances the model of what the machine must do after an input, given the
 * client's options, and compares the machine's actual next action and its
 * report (key, timeout, attempts; once DONE every fact) with it. sqlstate
 * is the result's (IN_RESULT). For IN_HOLDERS the rows are the client's
 * rows_. Returns 0, or -1 with a one-line reason in why.
 */
int advlock_sim_policy_check(sim_client *cl, enum policy_input input, advlock_result result,
                             const char *sqlstate, int64_t reading, const advlock_action *actual,
                             char *why, size_t size);
/* The reference's n-th sleep (n from 1): 100, 200, 400, 800, 1000, 1000, ...;
 * also the ceiling of full jitter's n-th sleep. */
int64_t advlock_sim_policy_sleep(uint64_t n);

/* ---- invariants over the whole world (invariants.c) ---- */

/* Checks everything that must hold between events; 0, or -1 with why. */
int advlock_sim_check_world(sim_world *sim, char *why, size_t size);
/* Checks what must hold when the run is over; 0, or -1 with why. */
int advlock_sim_check_end(sim_world *sim, char *why, size_t size);

/* ---- trace (trace.c) ---- */

typedef struct advlock_sim_trace_extra {
    const char *sql;      /* query */
    uint64_t attempt;     /* query of a lock statement, done of an acquire */
    const char *result;   /* result */
    const char *sqlstate; /* result, error */
    const char *fault;    /* result */
    int64_t rows;         /* result "rows" (the holders query's): how many */
    int64_t ms, wake;     /* sleep; wait (wake: the deadline, -1 for none) */
    const char *message;  /* done events */
    const char *error;    /* error */
} advlock_sim_trace_extra;

/* Writes the event's line, with what extra sets (NULL: nothing more). */
void advlock_sim_trace(sim_world *sim, int client, const char *event,
                       const advlock_sim_trace_extra *extra);
const char *advlock_sim_result_name(advlock_result r);
const char *advlock_sim_outcome_event(advlock_outcome o);

/* ---- plans (plans.c) ---- */

void advlock_sim_script_plan(void *state, advlock_sim *sim, int client,
                             const advlock_sim_done *last, advlock_sim_step *next);
void advlock_sim_cycler_plan(void *state, advlock_sim *sim, int client,
                             const advlock_sim_done *last, advlock_sim_step *next);

/* ---- the driver, across files ----
 *
 * The files in layers; each calls only files of the layers below, never up:
 *     sim.c (the public calls and the event loop)
 *       -> sim_steps.c (plans' steps, transaction commands)
 *            -> sim_ops.c (each client's engine, pumped by pump.c, its
 *               member's machine judged by policy.c)
 *       -> sim_server.c (the server's side), invariants.c, plans.c
 *     -> connection.c (statements out, answers in)
 *       -> world.c, trace.c, faults.c, policy.c
 *       -> sim_state.c (the shared bookkeeping) -> event_queue.c
 * An event handler runs only for an event that is not stale (sim.c): a
 * timer, cancel or wait check still meant for the operation or wait under
 * way. */

/* sim_state.c: the run's bookkeeping. */
int advlock_sim_key_index(const sim_world *sim, int64_t key);
/* Records a violation "seed S: t=T ms, client C: what" and returns it. */
int advlock_sim_record_violation(sim_world *sim, int client, const char *what);
/* Schedules an event or records "event queue full". */
int advlock_sim_must_schedule(sim_world *sim, int64_t at_ms, enum advlock_sim_event_kind kind,
                              int client, uint64_t serial, int64_t arg);
/* What the client's clock reads now (it is first brought to virtual time). */
int64_t advlock_sim_reading(sim_world *sim, sim_client *cl);
int advlock_sim_open_session(sim_world *sim, int c);
/* The driver's session with this pid, or NULL (closed, or not the driver's). */
sim_session *advlock_sim_session(sim_world *sim, int pid);
const sim_session *advlock_sim_session_const(const sim_world *sim, int pid);
void advlock_sim_close_session(sim_world *sim, int pid);
/* The session is gone: it holds nothing, and no transaction is open. */
void advlock_sim_forget_holds(sim_client *cl);
/* An operation or a transaction command begins: the client is busy with a
 * new serial, from now on its clock, with nothing heard from the server. */
void advlock_sim_begin_busy(sim_world *sim, sim_client *cl);

/* connection.c: the client's statements and their answers. */
/* Sends a statement (the engine's st, or with a NULL st a transaction
 * command) on the client's session with a fresh round trip. */
int advlock_sim_send(sim_world *sim, int c, const char *sql, const advlock_statement *st);
/* The answer reached the client: what it was told it holds, and the trace. */
void advlock_sim_receive(sim_world *sim, int c);
/* pg_stat_activity states a holders row can show; rows_[].state indexes it. */
extern const char *const advlock_sim_state_names[4];
/* Is the statement in flight this row of the core's table? */
static inline int advlock_sim_asks(const sim_client *cl, advlock_sql sql)
{
    return cl->query_text_ == advlock_sql_text(sql);
}

/* sim_ops.c: the client's engine, its operations and inputs. */
/* Starts the step's ACQUIRE or RELEASE: 0, ADVLOCK_SIM_VIOLATION, or a
 * negative advlock_error when the engine refused to start (the step then
 * ends FAILED with it). */
int advlock_sim_start_operation(sim_world *sim, int c);
/* The engine is given the answer received, and the pump turns. */
int advlock_sim_on_answer(sim_world *sim, int c);
int advlock_sim_on_wake(sim_world *sim, int c);
int advlock_sim_on_cancel(sim_world *sim, int c);

/* sim_server.c: the server's side of queries, waits and cancels. */
int advlock_sim_on_arrive(sim_world *sim, int c);
/* Collects the answers of waits that ended (granted, cancelled, deadlocked). */
int advlock_sim_collect_waits(sim_world *sim);
/* A waiter's statement finishes (granted, or ended by an error): its answer
 * leaves the server. */
int advlock_sim_on_return(sim_world *sim, int c);
int advlock_sim_on_cancel_land(sim_world *sim, int pid);
int advlock_sim_on_deadlock_check(sim_world *sim, int c);
int advlock_sim_on_lock_timeout(sim_world *sim, int c);
int advlock_sim_on_kill(sim_world *sim, int c);

/* sim_steps.c: plans' steps. */
int advlock_sim_on_step(sim_world *sim, int c);
/* A transaction statement's answer reached the client: its step ends. */
int advlock_sim_command_done(sim_world *sim, int c);

#endif
