/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fault injection: the decision whether one request of a "faulty" device
 * fails. The engine calls vb_fault_check() from its I/O threads and
 * vb_fault_set() from the thread that applies an attribute change. */
#include "config.h"

#include "fault.h"
#include "driver.h"

#include <errno.h>

struct _VbFault {
  /* One lock for the spec and the count, rather than an atomic count
   * beside a locked spec: a set() between reading the spec and bumping the
   * count would otherwise charge a request to the wrong spec, and "after N
   * requests" must be exact. The lock is held for a few comparisons only. */
  GMutex lock;
  VbFaultSpec spec;
  guint64 matched; /* requests that matched spec since the last set() */
};

VbFault *
vb_fault_new (void)
{
  VbFault *f = g_new0 (VbFault, 1);

  g_mutex_init (&f->lock);
  return f;
}

void
vb_fault_free (VbFault *f)
{
  if (f == NULL)
    return;
  g_mutex_clear (&f->lock);
  g_free (f);
}

void
vb_fault_set (VbFault *f, const VbFaultSpec *spec)
{
  g_return_if_fail (f != NULL && spec != NULL);

  g_mutex_lock (&f->lock);
  f->spec = *spec;
  f->matched = 0;
  g_mutex_unlock (&f->lock);
}

/* The end of [@start, +@length), G_MAXUINT64 when it would not fit. */
static guint64
range_end (guint64 start, guint64 length)
{
  return length > G_MAXUINT64 - start ? G_MAXUINT64 : start + length;
}

static gboolean
overlaps (const VbFaultSpec *spec, guint64 offset, guint64 length)
{
  guint64 fault_end = spec->length ? range_end (spec->offset, spec->length) : G_MAXUINT64;

  /* a flush has no bytes: only a whole-device fault reaches it */
  if (length == 0)
    return spec->offset == 0 && spec->length == 0;
  return offset < fault_end && range_end (offset, length) > spec->offset;
}

guint64
vb_fault_delay_us (VbFault *f)
{
  guint64 delay;

  g_return_val_if_fail (f != NULL, 0);
  g_mutex_lock (&f->lock);
  delay = f->spec.delay_us;
  g_mutex_unlock (&f->lock);
  return delay;
}

int
vb_fault_check (VbFault *f, gboolean write, guint64 offset, guint64 length)
{
  gboolean fail = FALSE;

  g_return_val_if_fail (f != NULL, 0);

  /* (decided after the delay, so that clearing a fault during a long
   * delay lets the requests already waiting through) */
  g_mutex_lock (&f->lock);
  if ((write ? f->spec.writes : f->spec.reads) && overlaps (&f->spec, offset, length))
    fail = ++f->matched > f->spec.after;
  g_mutex_unlock (&f->lock);
  return fail ? -EIO : 0;
}

static gboolean
get_bool (GHashTable *attributes, const char *name)
{
  return g_hash_table_contains (attributes, name) && vb_attr_get_bool (attributes, name);
}

static guint64
get_u64 (GHashTable *attributes, const char *name)
{
  return g_hash_table_contains (attributes, name) ? vb_attr_get_u64 (attributes, name) : 0;
}

gboolean
vb_fault_spec_from_attributes (GHashTable *attributes, VbFaultSpec *spec)
{
  g_return_val_if_fail (attributes != NULL && spec != NULL, FALSE);

  /* every default is false or 0, so a missing attribute reads as unset */
  *spec = (VbFaultSpec){
    .reads = get_bool (attributes, "fail_reads"),
    .writes = get_bool (attributes, "fail_writes"),
    .after = get_u64 (attributes, "fail_after"),
    .offset = get_u64 (attributes, "fail_offset"),
    .length = get_u64 (attributes, "fail_length"),
    .delay_us = get_u64 (attributes, "delay_us"),
  };
  return spec->reads || spec->writes || spec->delay_us != 0;
}
