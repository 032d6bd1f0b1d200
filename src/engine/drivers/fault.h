/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fault injection for the "faulty" driver, like md's faulty personality and
 * dm-flakey: fail chosen reads or writes with -EIO, or slow every request
 * down, so that the redundancy of the devices stacked on top can be tested. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* What to fail. The zeroed spec fails nothing and delays nothing. */
typedef struct {
  gboolean reads, writes; /* which kinds of request fail */
  guint64 after;          /* matching requests that still succeed first */
  guint64 offset, length; /* device byte range; length 0: to the end */
  guint64 delay_us;       /* added to every request, failing or not */
} VbFaultSpec;

/* A spec and the count of requests that matched it; thread-safe. */
typedef struct _VbFault VbFault;

VbFault *vb_fault_new (void);
void vb_fault_free (VbFault *f);

/* Replaces the spec and restarts the count of matching requests at zero.
 * Safe while other threads are in vb_fault_check(): each request counts
 * against exactly one spec, the old or the new one. */
void vb_fault_set (VbFault *f, const VbFaultSpec *spec);

/* The delay every request of a device waits first (its caller waits it:
 * the engine as a ring timeout, never sleeping a serving thread). */
guint64 vb_fault_delay_us (VbFault *f);

/* Called for every request of a device, after its delay: 0, or -EIO
 * when the request (read or write) is of a failing kind, overlaps
 * [offset, offset+length) (length 0 = to the end) and more than @after such
 * requests have already passed since the last vb_fault_set.
 *
 * A request of @length 0 (a flush; the engine passes it as a write at
 * offset 0) covers no bytes: it overlaps only a spec that covers the whole
 * device (offset 0, length 0), so that "fail every write" also fails
 * flushes while a fault on a range leaves them alone. Trims are writes of
 * their range. */
int vb_fault_check (VbFault *f, gboolean write, guint64 offset, guint64 length);

/* Reads the canonical attribute texts of a "faulty" device (fail_reads,
 * fail_writes, fail_after, fail_offset, fail_length, delay_us; missing ones
 * take their defaults) into @spec. TRUE when any fault or delay is set. */
gboolean vb_fault_spec_from_attributes (GHashTable *attributes, VbFaultSpec *spec);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbFault, vb_fault_free)

G_END_DECLS
