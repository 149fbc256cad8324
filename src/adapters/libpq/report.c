/* The caller's view of an operation: the machine's outcome (with the
 * holder diagnostics found) plus notices. */
#include "pq.h"

#include <string.h>

void advlock_pq_report_begin(advlock_pq_report *r)
{
    memset(r, 0, sizeof *r);
    r->outcome = ADVLOCK_FAILED;
}

void advlock_pq_report_finish(advlock_pq_report *r, const advlock_machine *m)
{
    advlock_action done = advlock_next_action(m);
    r->outcome = done.outcome;
    r->error = done.error;
    advlock_pq_copy_line(r->sqlstate, sizeof r->sqlstate, done.sqlstate);
    advlock_pq_copy_line(r->message, sizeof r->message, done.message);
    r->attempts = advlock_attempts(m);
    r->holder_pid = done.holder_pid;
    r->holder_seconds = done.holder_seconds;
    advlock_pq_copy_line(r->holder_application, sizeof r->holder_application,
                         done.holder_application);
    advlock_pq_copy_line(r->holder_state, sizeof r->holder_state, done.holder_state);
}

void advlock_pq_report_refuse(advlock_pq_report *r, int error)
{
    advlock_pq_report_begin(r);
    r->error = error;
    advlock_pq_copy_line(r->message, sizeof r->message, advlock_strerror(error));
}
