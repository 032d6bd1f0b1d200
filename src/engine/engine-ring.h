/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A serving thread's io_uring: every completion goes to the operation that
 * asked for it (a component I/O of an engine request, a ublk command, a
 * socket read of an NBD connection), and other threads can hand a thread
 * work back through it (a barrier opening, a superblock written). One
 * thread owns a ring and is the only one to call it, but for
 * vb_ring_post. */
#pragma once

#include <glib.h>
#include <liburing.h>

G_BEGIN_DECLS

typedef struct _VbRing VbRing;
typedef struct _VbRingOp VbRingOp;

/* Runs on the ring's thread with the operation's result (a CQE's res, or
 * what vb_ring_post was given). */
typedef void (*VbRingFunc) (VbRingOp *op, int res);

/* Embedded in whatever waits on the ring: no allocation per operation. */
struct _VbRingOp {
  VbRingFunc func;
  /* private: a posted operation's place in the list and result */
  VbRingOp *next;
  int posted_res;
};

VbRing *vb_ring_new (guint entries, GError **error);
void vb_ring_free (VbRing *ring);
/* A free submission entry whose completion goes to @op (the ring submits
 * what it holds when it is full, so this never fails). */
struct io_uring_sqe *vb_ring_sqe (VbRing *ring, VbRingOp *op);
/* From any thread: @op's function runs on the ring's thread with @res. */
void vb_ring_post (VbRing *ring, VbRingOp *op, int res);
/* Submits what is queued and runs the completions there are; with @wait,
 * blocks until there is at least one. How many ran, or -errno. */
int vb_ring_run (VbRing *ring, gboolean wait);
/* The ring's own io_uring, for the few who set up more than one SQE's
 * worth (registered files). */
struct io_uring *vb_ring_uring (VbRing *ring);
/* Registers [@base, @base + @len) with the kernel as the ring's buffer
 * (io_uring's fixed buffer 0: its pages pinned once, not at each I/O):
 * 0, or -errno (the memlock limit, a kernel without them) and the ring
 * goes on without. The memory must outlive the ring. At most one. */
int vb_ring_register_buffer (VbRing *ring, void *base, gsize len);
/* The fixed buffer index that holds all of [@data, @data + @len) for an
 * I/O in this ring, or -1 (not registered memory: a plain read or write).
 * Each >= 0 answer counts in vb_ring_fixed_count. */
int vb_ring_buffer_index (VbRing *ring, const void *data, gsize len);
/* How many I/Os went through a registered buffer (tests, benchmarks). */
guint64 vb_ring_fixed_count (VbRing *ring);

G_END_DECLS
