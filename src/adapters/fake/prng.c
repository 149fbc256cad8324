/*
 * The project's own seeded generator: xoshiro256** (Blackman and Vigna),
 * its state filled by splitmix64 so that any 64-bit seed, 0 included, gives
 * a good stream. Fixed-width integer arithmetic only: the same seed yields
 * the same numbers on every platform and compiler, which is what makes a
 * simulation seed a complete replay.
 */
#include "fake.h"

uint64_t advlock_fake_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t advlock_fake_splitmix64(uint64_t *state)
{
    return advlock_fake_mix64(*state += UINT64_C(0x9E3779B97F4A7C15));
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void advlock_prng_seed(advlock_prng *p, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        p->s_[i] = advlock_fake_splitmix64(&seed);
}

uint64_t advlock_prng_next(advlock_prng *p)
{
    uint64_t *s = p->s_;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Rejects the lowest (2^64 mod bound) values, so that every residue is
 * equally likely. */
uint64_t advlock_prng_below(advlock_prng *p, uint64_t bound)
{
    if (bound == 0)
        return 0;
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t r = advlock_prng_next(p);
        if (r >= threshold)
            return r % bound;
    }
}

int64_t advlock_prng_between(advlock_prng *p, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    uint64_t span = (uint64_t)hi - (uint64_t)lo; /* exact even for the full range */
    uint64_t offset = span == UINT64_MAX ? advlock_prng_next(p) : advlock_prng_below(p, span + 1);
    return (int64_t)((uint64_t)lo + offset);
}

int advlock_prng_chance(advlock_prng *p, uint32_t ppm)
{
    return advlock_prng_below(p, 1000000) < ppm;
}
