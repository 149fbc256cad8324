/*
 * How many locks one connection may hold in the server's shared lock table,
 * and the words that refuse one more (include/advlock.h, "The server's lock
 * table"; why: docs/design.md). The estimate is the nominal size, which the
 * server's real limit exceeds by a slack that differs between versions: a
 * share of it leaves room for every other session whatever the version.
 */
#include "core.h"

static int setting_ok(int64_t v, int64_t least)
{
    return v >= least && v <= INT32_MAX;
}

int advlock_capacity_init(advlock_capacity *c, int64_t max_locks_per_transaction,
                          int64_t max_connections, int64_t max_prepared_transactions,
                          int share_percent)
{
    if (share_percent == 0)
        share_percent = ADVLOCK_CAPACITY_SHARE_DEFAULT;
    if (c == NULL || !setting_ok(max_locks_per_transaction, 1) || !setting_ok(max_connections, 0)
        || !setting_ok(max_prepared_transactions, 0)
        || max_connections + max_prepared_transactions < 1 || share_percent < 1
        || share_percent > 100)
        return ADVLOCK_EINVAL;
    c->max_locks_per_transaction = max_locks_per_transaction;
    c->max_connections = max_connections;
    c->max_prepared_transactions = max_prepared_transactions;
    c->share_percent = share_percent;
    return 0;
}

int64_t advlock_capacity_nominal(const advlock_capacity *c)
{
    /* Each factor is at most INT32_MAX (init): the product fits. */
    return c == NULL
               ? 0
               : c->max_locks_per_transaction * (c->max_connections + c->max_prepared_transactions);
}

int64_t advlock_capacity_limit(const advlock_capacity *c)
{
    if (c == NULL)
        return 0;
    int64_t nominal = advlock_capacity_nominal(c);
    /* The nominal size can come near 2^63: x 100 first would overflow. */
    int64_t limit = nominal / 100 * c->share_percent + nominal % 100 * c->share_percent / 100;
    return limit > 0 ? limit : 1;
}

int advlock_capacity_refuse(const advlock_capacity *c, int64_t held, char *buf, size_t size)
{
    if (c == NULL || (buf == NULL && size > 0))
        return ADVLOCK_EINVAL;
    if (held < advlock_capacity_limit(c))
        return 0;
    advlock_text t;
    advlock_text_init(&t, buf, size);
    /* Short enough for a driver's 256-byte message field. */
    advlock_text_put_int(&t, advlock_add_saturating(held, 1));
    advlock_text_put(&t, " advisory locks pass this connection's share (");
    advlock_text_put_int(&t, c->share_percent);
    advlock_text_put(&t, "%: ");
    advlock_text_put_int(&t, advlock_capacity_limit(c));
    advlock_text_put(&t, ") of the server's lock table (about ");
    advlock_text_put_int(&t, advlock_capacity_nominal(c));
    advlock_text_put(&t, ": max_locks_per_transaction ");
    advlock_text_put_int(&t, c->max_locks_per_transaction);
    advlock_text_put(&t, " x (max_connections ");
    advlock_text_put_int(&t, c->max_connections);
    advlock_text_put(&t, " + max_prepared_transactions ");
    advlock_text_put_int(&t, c->max_prepared_transactions);
    advlock_text_put(&t, ")); raise max_locks_per_transaction or the share");
    return 1;
}
