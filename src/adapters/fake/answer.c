/* A statement's result in the connection engine's terms: what a pump of
 * advlock_conn hands back for the fake's answer. */
#include "advlock_fake.h"

#include <string.h>

void advlock_fake_answer(const advlock_fake_result *r, const advlock_holder *rows, size_t nrows,
                         advlock_answer *out)
{
    if (r == NULL || out == NULL)
        return;
    switch (r->status) {
    case ADVLOCK_FAKE_ROW_TRUE: advlock_answer_init(out, ADVLOCK_RESULT_TRUE); break;
    case ADVLOCK_FAKE_ROW_FALSE: advlock_answer_init(out, ADVLOCK_RESULT_FALSE); break;
    case ADVLOCK_FAKE_ROW_NULL: advlock_answer_init(out, ADVLOCK_RESULT_NULL); break;
    case ADVLOCK_FAKE_ROWS:
        advlock_answer_init(out, ADVLOCK_RESULT_TRUE);
        out->holders = rows;
        out->nholders = rows != NULL ? nrows : 0;
        break;
    case ADVLOCK_FAKE_ROW_SESSION:
        advlock_answer_init(out, ADVLOCK_RESULT_TRUE);
        out->server_pid = r->session_pid;
        out->in_recovery = r->in_recovery;
        out->ours = r->ours;
        break;
    case ADVLOCK_FAKE_ROW_FENCED:
        advlock_answer_init(out, r->fence_token > 0 ? ADVLOCK_RESULT_TRUE : ADVLOCK_RESULT_FALSE);
        out->fence_token = r->fence_token;
        break;
    case ADVLOCK_FAKE_ROW_SETTINGS:
        advlock_answer_init(out, ADVLOCK_RESULT_TRUE);
        memcpy(out->settings, r->settings, sizeof out->settings);
        break;
    case ADVLOCK_FAKE_CONNECTION_LOST:
        advlock_answer_init(out, ADVLOCK_RESULT_CONNECTION_LOST);
        break;
    default: advlock_answer_init(out, ADVLOCK_RESULT_SERVER_ERROR); break;
    }
    out->sqlstate = r->sqlstate[0] != '\0' ? r->sqlstate : NULL;
    out->message = r->message[0] != '\0' ? r->message : NULL;
}
