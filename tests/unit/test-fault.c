/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The "faulty" driver and fault injection: its attributes and refusals, its
 * identity placement, and which requests vb_fault_check() fails — counts,
 * kinds, range edges, resets, delays, and exact counts under threads. */
#include "config.h"

#include "driver.h"
#include "fault.h"
#include "vb-error.h"

#include <errno.h>
#include <string.h>

#define SECTOR 512
#define MiB (1ULL << 20)

#define ATTRS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define NO_ATTRS ((const char *const[]){ NULL })

static GHashTable *
attrs_from (const char *const *kv)
{
  GHashTable *h = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  for (guint i = 0; kv[i]; i += 2)
    g_hash_table_insert (h, g_strdup (kv[i]), g_strdup (kv[i + 1]));
  return h;
}

static const VbDriver *
faulty (void)
{
  const VbDriver *d = vb_driver_lookup ("faulty");

  g_assert_nonnull (d);
  return d;
}

/* Resolved attributes; asserts that @kv is accepted. */
static GHashTable *
resolve (const char *const *kv)
{
  g_autoptr (GHashTable) given = attrs_from (kv);
  g_autoptr (GError) error = NULL;
  GHashTable *r = vb_driver_resolve_attributes (faulty (), NULL, given, &error);

  g_assert_no_error (error);
  g_assert_nonnull (r);
  return r;
}

static VbFault *
fault_with (VbFaultSpec spec)
{
  VbFault *f = vb_fault_new ();

  vb_fault_set (f, &spec);
  return f;
}

static void
test_registered (void)
{
  const VbDriver *d = faulty ();
  const VbDriver *const *all = vb_drivers ();
  g_autoptr (GHashTable) defaults = resolve (NO_ATTRS);
  g_autofree char *names = vb_driver_attr_names (d);
  VbFaultSpec spec;
  guint n = 0;

  g_assert_cmpstr (d->name, ==, "faulty");
  g_assert_nonnull (strstr (d->description, "redundancy"));
  /* the list keeps its order; the new driver comes last */
  while (all[n])
    n++;
  g_assert_true (all[n - 1] == d);

  /* always the engine, one component of any kind */
  g_assert_null (d->extent);
  g_assert_nonnull (d->layout);
  g_assert_nonnull (d->map);
  g_assert_cmpuint (d->min_components, ==, 1);
  g_assert_cmpuint (d->max_components, ==, 1);
  g_assert_cmpuint (d->component_kinds, ==,
                    VB_COMPONENT_KIND_FILE | VB_COMPONENT_KIND_BLOCK | VB_COMPONENT_KIND_DEVICE);

  g_assert_cmpstr (names, ==,
                   "fail_reads, fail_writes, fail_after, fail_offset, fail_length, delay_us");
  for (const VbAttrSpec *a = d->attributes; a->name; a++)
    g_assert_true (a->online);
  g_assert_cmpuint (g_hash_table_size (defaults), ==, 6);
  g_assert_cmpstr (g_hash_table_lookup (defaults, "fail_reads"), ==, "false");
  g_assert_cmpstr (g_hash_table_lookup (defaults, "fail_writes"), ==, "false");
  g_assert_cmpstr (g_hash_table_lookup (defaults, "fail_after"), ==, "0");
  g_assert_cmpstr (g_hash_table_lookup (defaults, "fail_offset"), ==, "0");
  g_assert_cmpstr (g_hash_table_lookup (defaults, "fail_length"), ==, "0");
  g_assert_cmpstr (g_hash_table_lookup (defaults, "delay_us"), ==, "0");

  /* the defaults inject nothing */
  g_assert_false (vb_fault_spec_from_attributes (defaults, &spec));
  g_assert_false (spec.reads || spec.writes);
  g_assert_cmpuint (spec.after + spec.offset + spec.length + spec.delay_us, ==, 0);
}

static void
assert_attr_refused (const char *const *kv, const char *message)
{
  g_autoptr (GHashTable) given = attrs_from (kv);
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) r = vb_driver_resolve_attributes (faulty (), NULL, given, &error);

  g_assert_null (r);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, message);
}

/* Accepted by resolve, refused by validate with @message. */
static void
assert_refused (const char *const *kv, guint n, guint64 size, const char *message)
{
  g_autoptr (GHashTable) r = resolve (kv);
  VbComponentInfo c[2]
      = { { "/img", VB_COMPONENT_KIND_FILE, size }, { "/other", VB_COMPONENT_KIND_FILE, size } };
  g_autoptr (GError) error = NULL;

  g_assert_false (vb_driver_validate (faulty (), r, c, n, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, message);
}

static void
assert_valid (const char *const *kv, guint64 size)
{
  g_autoptr (GHashTable) r = resolve (kv);
  VbComponentInfo c = { "/img", VB_COMPONENT_KIND_FILE, size };
  g_autoptr (GError) error = NULL;

  g_assert_true (vb_driver_validate (faulty (), r, &c, 1, &error));
  g_assert_no_error (error);
}

static void
test_refusals (void)
{
  assert_attr_refused (ATTRS ("bogus", "1"),
                       "attribute 'bogus': not an attribute of driver 'faulty' (allowed: "
                       "fail_reads, fail_writes, fail_after, fail_offset, fail_length, delay_us)");
  assert_attr_refused (ATTRS ("fail_reads", "maybe"),
                       "attribute 'fail_reads': 'maybe' is not a boolean (true or false)");
  assert_attr_refused (ATTRS ("fail_writes", "2"),
                       "attribute 'fail_writes': '2' is not a boolean (true or false)");
  assert_attr_refused (ATTRS ("fail_after", "-1"),
                       "attribute 'fail_after': '-1' is not a whole number");
  assert_attr_refused (ATTRS ("fail_offset", "1000"),
                       "attribute 'fail_offset': 1000 is not a multiple of 512");
  assert_attr_refused (ATTRS ("fail_length", "100"),
                       "attribute 'fail_length': 100 is not a multiple of 512");
  assert_attr_refused (ATTRS ("delay_us", "1ms"),
                       "attribute 'delay_us': '1ms' is not a whole number");

  assert_refused (ATTRS ("delay_us", "10000001"), 1, MiB,
                  "attribute 'delay_us': 10000001 is more than 10000000 (ten seconds)");
  assert_refused (ATTRS ("fail_offset", "1M"), 1, MiB,
                  "attribute 'fail_offset': 1048576 is beyond the end of the device (1048576 "
                  "bytes)");
  assert_refused (NO_ATTRS, 1, 511, "component '/img': 511 bytes, smaller than one sector (512)");
  assert_refused (NO_ATTRS, 2, MiB, "components: driver 'faulty' takes exactly 1, 2 given");

  /* the bounds themselves are accepted */
  assert_valid (ATTRS ("delay_us", "10000000"), MiB);
  assert_valid (ATTRS ("fail_offset", "1047552", "fail_length", "1G"), MiB);
  assert_valid (
      ATTRS ("fail_reads", "yes", "fail_writes", "on", "fail_after", "18446744073709551615"), 512);
  {
    g_autoptr (GHashTable) r = resolve (ATTRS ("delay_us", "5000"));
    VbComponentInfo dev = { "vblk:lower", VB_COMPONENT_KIND_DEVICE, MiB };
    VbComponentInfo blk = { "/dev/sdz", VB_COMPONENT_KIND_BLOCK, MiB };

    g_assert_true (vb_driver_validate (faulty (), r, &dev, 1, NULL));
    g_assert_true (vb_driver_validate (faulty (), r, &blk, 1, NULL));
  }
}

static void
test_spec_from_attributes (void)
{
  g_autoptr (GHashTable) all
      = resolve (ATTRS ("fail_reads", "1", "fail_writes", "yes", "fail_after", "7", "fail_offset",
                        "4K", "fail_length", "1M", "delay_us", "250"));
  g_autoptr (GHashTable) delay_only = resolve (ATTRS ("delay_us", "1"));
  g_autoptr (GHashTable) range_only
      = resolve (ATTRS ("fail_after", "3", "fail_offset", "8192", "fail_length", "512"));
  g_autoptr (GHashTable) writes_only = resolve (ATTRS ("fail_writes", "true"));
  g_autoptr (GHashTable) partial = attrs_from (ATTRS ("fail_reads", "true"));
  VbFaultSpec s;

  g_assert_true (vb_fault_spec_from_attributes (all, &s));
  g_assert_true (s.reads);
  g_assert_true (s.writes);
  g_assert_cmpuint (s.after, ==, 7);
  g_assert_cmpuint (s.offset, ==, 4096);
  g_assert_cmpuint (s.length, ==, MiB);
  g_assert_cmpuint (s.delay_us, ==, 250);

  g_assert_true (vb_fault_spec_from_attributes (delay_only, &s));
  g_assert_false (s.reads || s.writes);
  g_assert_cmpuint (s.delay_us, ==, 1);

  /* a range with no kind to fail injects nothing */
  g_assert_false (vb_fault_spec_from_attributes (range_only, &s));
  g_assert_cmpuint (s.after, ==, 3);
  g_assert_cmpuint (s.offset, ==, 8192);
  g_assert_cmpuint (s.length, ==, 512);

  g_assert_true (vb_fault_spec_from_attributes (writes_only, &s));
  g_assert_false (s.reads);
  g_assert_true (s.writes);

  /* missing attributes read as their defaults */
  g_assert_true (vb_fault_spec_from_attributes (partial, &s));
  g_assert_true (s.reads);
  g_assert_false (s.writes);
  g_assert_cmpuint (s.after + s.offset + s.length + s.delay_us, ==, 0);
}

static void
test_layout (void)
{
  const guint64 sizes[] = { MiB, 10000, 512, (64 * MiB) + 4095 };

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_autoptr (GHashTable) r = resolve (NO_ATTRS);
      g_autoptr (GRand) rand = g_rand_new_with_seed (0xfa17 + i);
      VbComponentInfo c = { "/img", VB_COMPONENT_KIND_FILE, sizes[i] };
      guint64 expected = sizes[i] / SECTOR * SECTOR;
      guint64 blocks = expected / SECTOR;
      VbLayout l;

      g_assert_true (vb_driver_validate (faulty (), r, &c, 1, NULL));
      g_assert_cmpuint (faulty ()->size (r, &c, 1), ==, expected);
      faulty ()->layout (r, &c, 1, &l);
      g_assert_cmpuint (l.size, ==, expected);
      g_assert_cmpuint (l.n_components, ==, 1);
      g_assert_cmpuint (l.copies, ==, 1);
      g_assert_cmpuint (l.component_size, ==, expected);
      g_assert_cmpuint (l.component_sizes[0], ==, expected);
      g_assert_cmpuint (l.chunk_size, ==, 0);
      g_assert_cmpuint (l.start, ==, 0);

      for (guint k = 0; k < 1000; k++)
        {
          guint64 first = (guint64) g_rand_int_range (rand, 0, (gint32) blocks);
          guint64 n = (guint64) g_rand_int_range (rand, 1, (gint32) (blocks - first) + 1);
          guint64 offset = first * SECTOR, length = n * SECTOR;
          VbMapping m = { 0 };

          /* the whole request, one copy, at the same offset */
          faulty ()->map (&l, offset, length, &m);
          g_assert_cmpuint (m.offset, ==, offset);
          g_assert_cmpuint (m.length, ==, length);
          g_assert_cmpuint (m.n_copies, ==, 1);
          g_assert_cmpuint (m.copies[0].component, ==, 0);
          g_assert_cmpuint (m.copies[0].offset, ==, offset);
          g_assert_cmpuint (m.copies[0].offset + m.length, <=, l.component_sizes[0]);
        }
    }
}

static void
test_after (void)
{
  for (guint64 after = 0; after < 5; after++)
    {
      g_autoptr (VbFault) f = fault_with ((VbFaultSpec){ .reads = TRUE, .after = after });

      for (guint64 i = 0; i < after; i++)
        g_assert_cmpint (vb_fault_check (f, FALSE, i * SECTOR, SECTOR), ==, 0);
      /* once failing, it keeps failing */
      for (guint i = 0; i < 3; i++)
        g_assert_cmpint (vb_fault_check (f, FALSE, 0, SECTOR), ==, -EIO);
    }

  {
    /* requests that do not match do not count */
    g_autoptr (VbFault) f
        = fault_with ((VbFaultSpec){ .writes = TRUE, .after = 2, .offset = MiB, .length = MiB });

    for (guint i = 0; i < 10; i++)
      {
        g_assert_cmpint (vb_fault_check (f, FALSE, MiB, SECTOR), ==, 0);
        g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, 0);
        g_assert_cmpint (vb_fault_check (f, TRUE, 2 * MiB, SECTOR), ==, 0);
      }
    g_assert_cmpint (vb_fault_check (f, TRUE, MiB, SECTOR), ==, 0);
    g_assert_cmpint (vb_fault_check (f, TRUE, MiB + 4096, 4096), ==, 0);
    g_assert_cmpint (vb_fault_check (f, TRUE, MiB, SECTOR), ==, -EIO);
  }
}

static void
test_kinds (void)
{
  g_autoptr (VbFault) none = fault_with ((VbFaultSpec){ 0 });
  g_autoptr (VbFault) reads = fault_with ((VbFaultSpec){ .reads = TRUE });
  g_autoptr (VbFault) writes = fault_with ((VbFaultSpec){ .writes = TRUE });
  g_autoptr (VbFault) both
      = fault_with ((VbFaultSpec){ .reads = TRUE, .writes = TRUE, .after = 1 });
  g_autoptr (VbFault) fresh = vb_fault_new ();

  for (guint i = 0; i < 3; i++)
    {
      g_assert_cmpint (vb_fault_check (none, FALSE, 0, SECTOR), ==, 0);
      g_assert_cmpint (vb_fault_check (none, TRUE, 0, SECTOR), ==, 0);
      g_assert_cmpint (vb_fault_check (fresh, FALSE, 0, SECTOR), ==, 0);
      g_assert_cmpint (vb_fault_check (fresh, TRUE, 0, 0), ==, 0);
      g_assert_cmpint (vb_fault_check (reads, FALSE, 0, SECTOR), ==, -EIO);
      g_assert_cmpint (vb_fault_check (reads, TRUE, 0, SECTOR), ==, 0);
      g_assert_cmpint (vb_fault_check (writes, FALSE, 0, SECTOR), ==, 0);
      g_assert_cmpint (vb_fault_check (writes, TRUE, 0, SECTOR), ==, -EIO);
    }

  /* with both kinds, reads and writes count together */
  g_assert_cmpint (vb_fault_check (both, TRUE, 0, SECTOR), ==, 0);
  g_assert_cmpint (vb_fault_check (both, FALSE, 0, SECTOR), ==, -EIO);
  g_assert_cmpint (vb_fault_check (both, TRUE, 0, SECTOR), ==, -EIO);
}

static void
test_range (void)
{
  /* [8K, 16K) */
  g_autoptr (VbFault) f
      = fault_with ((VbFaultSpec){ .reads = TRUE, .writes = TRUE, .offset = 8192, .length = 8192 });
  g_autoptr (VbFault) to_end = fault_with ((VbFaultSpec){ .writes = TRUE, .offset = 8192 });
  g_autoptr (VbFault) whole = fault_with ((VbFaultSpec){ .writes = TRUE });
  g_autoptr (VbFault) head = fault_with ((VbFaultSpec){ .writes = TRUE, .length = 4096 });
  g_autoptr (VbFault) reads_whole = fault_with ((VbFaultSpec){ .reads = TRUE });

  for (int write = 0; write <= 1; write++)
    {
      /* ending exactly at the start, starting exactly at the end: outside */
      g_assert_cmpint (vb_fault_check (f, write, 0, 8192), ==, 0);
      g_assert_cmpint (vb_fault_check (f, write, 8192 - SECTOR, SECTOR), ==, 0);
      g_assert_cmpint (vb_fault_check (f, write, 16384, SECTOR), ==, 0);
      g_assert_cmpint (vb_fault_check (f, write, 16384, MiB), ==, 0);
      /* one sector in, at either edge, inside, or across all of it */
      g_assert_cmpint (vb_fault_check (f, write, 8192 - SECTOR, 2 * SECTOR), ==, -EIO);
      g_assert_cmpint (vb_fault_check (f, write, 0, 8192 + SECTOR), ==, -EIO);
      g_assert_cmpint (vb_fault_check (f, write, 16384 - SECTOR, SECTOR), ==, -EIO);
      g_assert_cmpint (vb_fault_check (f, write, 16384 - SECTOR, MiB), ==, -EIO);
      g_assert_cmpint (vb_fault_check (f, write, 12288, 1024), ==, -EIO);
      g_assert_cmpint (vb_fault_check (f, write, 0, MiB), ==, -EIO);
    }

  /* length 0: to the end, wherever that is */
  g_assert_cmpint (vb_fault_check (to_end, TRUE, 0, 8192), ==, 0);
  g_assert_cmpint (vb_fault_check (to_end, TRUE, 8192, SECTOR), ==, -EIO);
  g_assert_cmpint (vb_fault_check (to_end, TRUE, 1ULL << 50, SECTOR), ==, -EIO);
  g_assert_cmpint (vb_fault_check (to_end, TRUE, G_MAXUINT64 - SECTOR, SECTOR), ==, -EIO);

  /* flushes (length 0) reach only a whole-device fault of writes */
  g_assert_cmpint (vb_fault_check (whole, TRUE, 0, 0), ==, -EIO);
  g_assert_cmpint (vb_fault_check (to_end, TRUE, 0, 0), ==, 0);
  g_assert_cmpint (vb_fault_check (head, TRUE, 0, 0), ==, 0);
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, 0), ==, 0);
  g_assert_cmpint (vb_fault_check (reads_whole, TRUE, 0, 0), ==, 0);
  /* ... but trims are writes of their range */
  g_assert_cmpint (vb_fault_check (head, TRUE, 0, MiB), ==, -EIO);
  g_assert_cmpint (vb_fault_check (head, TRUE, 4096, MiB), ==, 0);

  {
    /* a range reaching past 2^64 does not wrap around */
    g_autoptr (VbFault) high = fault_with (
        (VbFaultSpec){ .reads = TRUE, .offset = G_MAXUINT64 - 4095, .length = 1ULL << 40 });

    g_assert_cmpint (vb_fault_check (high, FALSE, 0, SECTOR), ==, 0);
    g_assert_cmpint (vb_fault_check (high, FALSE, G_MAXUINT64 - 4095, SECTOR), ==, -EIO);
  }
}

static void
test_set_resets (void)
{
  VbFaultSpec spec = { .writes = TRUE, .after = 2 };
  g_autoptr (VbFault) f = fault_with (spec);

  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, 0);
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, 0);
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, -EIO);

  /* the same spec again: counting starts over */
  vb_fault_set (f, &spec);
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, 0);
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, 0);
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, -EIO);

  /* cleared: nothing fails */
  vb_fault_set (f, &(VbFaultSpec){ 0 });
  for (guint i = 0; i < 5; i++)
    g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, 0);

  /* set again after requests that did not match: a fresh count still */
  spec.after = 1;
  vb_fault_set (f, &spec);
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, 0);
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, -EIO);

  /* reads now, after writes counted: the count restarts too */
  vb_fault_set (f, &(VbFaultSpec){ .reads = TRUE, .after = 1 });
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, 0);
  g_assert_cmpint (vb_fault_check (f, FALSE, 0, SECTOR), ==, 0);
  g_assert_cmpint (vb_fault_check (f, FALSE, 0, SECTOR), ==, -EIO);
}

/* The delay is the caller's to wait (the engine waits it in its ring:
 * test-engine-async's delay-in-ring): every request has it, failing or
 * not, flush too; it never changes what fails; a set() changes it. */
static void
test_delay (void)
{
  const guint64 delay = 20000; /* 20 ms */
  g_autoptr (VbFault) slow = fault_with ((VbFaultSpec){ .delay_us = delay });
  g_autoptr (VbFault) slow_fail = fault_with ((VbFaultSpec){ .reads = TRUE, .delay_us = delay });
  g_autoptr (VbFault) none = fault_with ((VbFaultSpec){ .reads = TRUE });

  g_assert_cmpuint (vb_fault_delay_us (slow), ==, delay);
  g_assert_cmpuint (vb_fault_delay_us (slow_fail), ==, delay);
  g_assert_cmpuint (vb_fault_delay_us (none), ==, 0);
  g_assert_cmpint (vb_fault_check (slow, FALSE, 0, SECTOR), ==, 0);
  g_assert_cmpint (vb_fault_check (slow, TRUE, 0, 0), ==, 0);
  g_assert_cmpint (vb_fault_check (slow_fail, FALSE, 0, SECTOR), ==, -EIO);
  g_assert_cmpint (vb_fault_check (slow_fail, TRUE, 0, SECTOR), ==, 0);

  vb_fault_set (slow, &(VbFaultSpec){ .delay_us = 5 });
  g_assert_cmpuint (vb_fault_delay_us (slow), ==, 5);
  vb_fault_set (slow, &(VbFaultSpec){ 0 });
  g_assert_cmpuint (vb_fault_delay_us (slow), ==, 0);
}

#define THREADS 4
#define PER_THREAD 1000

typedef struct {
  VbFault *fault;
  guint index;
  gint *start;
} Worker;

static gpointer
worker_run (gpointer data)
{
  Worker *w = data;
  guint failed = 0;

  /* start together, so that the checks really overlap */
  while (!g_atomic_int_get (w->start))
    g_thread_yield ();
  for (guint i = 0; i < PER_THREAD; i++)
    {
      /* half reads, half writes, over the range */
      int r = vb_fault_check (w->fault, (i + w->index) % 2, (guint64) (i % 64) * SECTOR, SECTOR);
      g_assert_true (r == 0 || r == -EIO);
      failed += r == -EIO;
    }
  return GUINT_TO_POINTER (failed);
}

static void
test_concurrent (void)
{
  g_autoptr (VbFault) f
      = fault_with ((VbFaultSpec){ .reads = TRUE, .writes = TRUE, .after = 1000 });
  GThread *threads[THREADS];
  Worker workers[THREADS];
  gint start = 0;
  guint failed = 0;

  for (guint i = 0; i < THREADS; i++)
    {
      workers[i] = (Worker){ f, i, &start };
      threads[i] = g_thread_new ("fault-check", worker_run, &workers[i]);
    }
  g_atomic_int_set (&start, 1);
  for (guint i = 0; i < THREADS; i++)
    failed += GPOINTER_TO_UINT (g_thread_join (threads[i]));
  g_assert_cmpuint (failed, ==, THREADS * PER_THREAD - 1000);
}

/* set() while other threads check: no torn spec, every answer valid, and
 * the final spec governs what comes after. */
static gpointer
churn_run (gpointer data)
{
  Worker *w = data;

  while (!g_atomic_int_get (w->start))
    {
      int r = vb_fault_check (w->fault, TRUE, 0, SECTOR);
      g_assert_true (r == 0 || r == -EIO);
    }
  return NULL;
}

static void
test_set_while_checking (void)
{
  g_autoptr (VbFault) f = vb_fault_new ();
  GThread *threads[THREADS];
  Worker workers[THREADS];
  gint stop = 0;

  for (guint i = 0; i < THREADS; i++)
    {
      workers[i] = (Worker){ f, i, &stop };
      threads[i] = g_thread_new ("fault-churn", churn_run, &workers[i]);
    }
  for (guint i = 0; i < 2000; i++)
    vb_fault_set (f, &(VbFaultSpec){ .writes = i % 2, .after = i % 3 });
  g_atomic_int_set (&stop, 1);
  for (guint i = 0; i < THREADS; i++)
    g_thread_join (threads[i]);

  vb_fault_set (f, &(VbFaultSpec){ .writes = TRUE, .after = 1 });
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, 0);
  g_assert_cmpint (vb_fault_check (f, TRUE, 0, SECTOR), ==, -EIO);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/fault/driver/registered", test_registered);
  g_test_add_func ("/fault/driver/refusals", test_refusals);
  g_test_add_func ("/fault/driver/layout", test_layout);
  g_test_add_func ("/fault/spec-from-attributes", test_spec_from_attributes);
  g_test_add_func ("/fault/after", test_after);
  g_test_add_func ("/fault/kinds", test_kinds);
  g_test_add_func ("/fault/range", test_range);
  g_test_add_func ("/fault/set-resets", test_set_resets);
  g_test_add_func ("/fault/delay", test_delay);
  g_test_add_func ("/fault/concurrent", test_concurrent);
  g_test_add_func ("/fault/set-while-checking", test_set_while_checking);
  return g_test_run ();
}
