/*
 * The in-process exclusion table of a lock set (include/advlock.h "In-process
 * exclusion"): which of this process's callers ask for or hold which key, in
 * which mode, so that the set answers a local conflict itself (why:
 * docs/design.md, "Lock sets").
 *
 * A hash of intrusive, doubly linked chains: the caller owns the buckets
 * and the peers, so ask and leave cost a chain walk and O(1) and allocate
 * nothing. Only peers in the table (asking or holding) are chained.
 */
#include "core.h"

static int is_power_of_two(size_t n)
{
    return n != 0 && (n & (n - 1)) == 0;
}

/* Keys are digests already, but callers may also lock small integers
 * (advlock_start_acquire_key()) whose low bits alone would crowd a few
 * buckets: mix every bit into the low ones (SplitMix64's finaliser). */
static size_t bucket_of(const advlock_peers *t, int64_t key)
{
    uint64_t z = (uint64_t)key;
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return (size_t)z & t->mask_;
}

static int conflicts(advlock_mode wanted, const advlock_peer *other)
{
#ifdef ADVLOCK_PEERS_CANARY
    /* The lock-set campaign's canary (mk/fake.mk) plants a table that lets
     * every peer through: the campaign must catch it. */
    (void)wanted, (void)other;
    return 0;
#else
    return wanted == ADVLOCK_EXCLUSIVE || other->mode_ == ADVLOCK_EXCLUSIVE;
#endif
}

int advlock_peers_init(advlock_peers *t, advlock_peer **buckets, size_t nbuckets)
{
    if (t == NULL || buckets == NULL || !is_power_of_two(nbuckets))
        return ADVLOCK_EINVAL;
    for (size_t i = 0; i < nbuckets; i++)
        buckets[i] = NULL;
    t->buckets_ = buckets;
    t->mask_ = nbuckets - 1;
    t->count_ = 0;
    return 0;
}

void advlock_peer_init(advlock_peer *p)
{
    if (p == NULL)
        return;
    p->key_ = 0;
    p->next_ = NULL;
    p->prev_ = NULL;
    p->mode_ = ADVLOCK_EXCLUSIVE;
    p->state_ = ADVLOCK_PEER_OUT;
}

int advlock_peers_ask(advlock_peers *t, advlock_peer *p, int64_t key, advlock_mode mode)
{
    if (t == NULL || p == NULL || (mode != ADVLOCK_EXCLUSIVE && mode != ADVLOCK_SHARED))
        return ADVLOCK_EINVAL;
    if (p->state_ != ADVLOCK_PEER_OUT)
        return ADVLOCK_EMISUSE;
    advlock_peer **head = &t->buckets_[bucket_of(t, key)];
    for (const advlock_peer *other = *head; other != NULL; other = other->next_)
        if (other->key_ == key && conflicts(mode, other))
            return 0;
    p->key_ = key;
    p->mode_ = (uint8_t)mode;
    p->state_ = ADVLOCK_PEER_ASKING;
    p->prev_ = NULL;
    p->next_ = *head;
    if (*head != NULL)
        (*head)->prev_ = p;
    *head = p;
    t->count_++;
    return 1;
}

int advlock_peers_granted(advlock_peers *t, advlock_peer *p)
{
    if (t == NULL || p == NULL)
        return ADVLOCK_EINVAL;
    if (p->state_ != ADVLOCK_PEER_ASKING)
        return ADVLOCK_EMISUSE;
    p->state_ = ADVLOCK_PEER_HELD;
    return 0;
}

int advlock_peers_leave(advlock_peers *t, advlock_peer *p)
{
    if (t == NULL || p == NULL)
        return ADVLOCK_EINVAL;
    if (p->state_ == ADVLOCK_PEER_OUT)
        return 0;
    if (p->prev_ != NULL)
        p->prev_->next_ = p->next_;
    else
        t->buckets_[bucket_of(t, p->key_)] = p->next_;
    if (p->next_ != NULL)
        p->next_->prev_ = p->prev_;
    p->next_ = NULL;
    p->prev_ = NULL;
    p->state_ = ADVLOCK_PEER_OUT;
    t->count_--;
    return 0;
}

size_t advlock_peers_count(const advlock_peers *t)
{
    return t == NULL ? 0 : t->count_;
}

int advlock_peer_state(const advlock_peer *p)
{
    return p == NULL ? ADVLOCK_PEER_OUT : p->state_;
}
