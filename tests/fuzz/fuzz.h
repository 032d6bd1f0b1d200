/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every fuzz target shares: the entry points libFuzzer and the
 * standalone driver (fuzz-main.c) call, and the check that stops a run on
 * a broken invariant, naming the file and line. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
/* The target's seed corpus, written into @dir: 0, or -1. */
int vb_fuzz_write_seeds (const char *dir);

#define FUZZ_CHECK(cond)                                                                           \
  do                                                                                               \
    {                                                                                              \
      if (!(cond))                                                                                 \
        {                                                                                          \
          fprintf (stderr, "%s: check failed: %s (line %d)\n", __FILE__, #cond, __LINE__);         \
          abort ();                                                                                \
        }                                                                                          \
    }                                                                                              \
  while (0)
