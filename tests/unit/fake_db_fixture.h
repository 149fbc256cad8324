/*
 * The fixture the fake database's tests share: a database with four open
 * sessions in *state, checked for consistency when each test ends. Include
 * after cmocka.h.
 */
#ifndef FAKE_DB_FIXTURE_H
#define FAKE_DB_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "advlock_fake.h"

typedef struct fixture {
    advlock_fake_db db;
    int a, b, c, d;
} fixture;

static int setup(void **state)
{
    fixture *f = malloc(sizeof *f);
    if (f == NULL)
        return -1;
    advlock_fake_db_init(&f->db);
    if (advlock_fake_db_connect(&f->db, &f->a) || advlock_fake_db_connect(&f->db, &f->b)
        || advlock_fake_db_connect(&f->db, &f->c) || advlock_fake_db_connect(&f->db, &f->d))
        return -1;
    *state = f;
    return 0;
}

/* Every test ends with a consistent lock manager. */
static int teardown(void **state)
{
    fixture *f = *state;
    char why[256];
    int rc = advlock_fake_db_check(&f->db, why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "%s\n", why);
    free(f);
    return rc == 0 ? 0 : -1;
}

#endif
