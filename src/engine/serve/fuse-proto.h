/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The FUSE server's two halves (fuse-server.c: the mount and the serving
 * threads; fuse-proto.c: the kernel's requests answered). vblk speaks the
 * FUSE protocol itself rather than through libfuse 3.14, whose API can
 * neither open a file for parallel direct writes nor answer on the cloned
 * /dev/fuse fd a request came from once the answer is asynchronous. */
#pragma once

#include "engine-switch.h"

#include <linux/fuse.h>
#include <sys/uio.h>

#define FUSE_MAX_WRITE (1u << 20)
#define FUSE_SLOTS 32      /* requests in flight per serving thread */
#define FUSE_HEAD_BYTES 80 /* fuse_in_header + fuse_write_in: a write's data starts after */
#define FUSE_DATA_BYTES (FUSE_MAX_WRITE + 4096)
#define FUSE_ROOT_ID 1
#define FUSE_FILE_ID 2

typedef struct _FuseThread FuseThread;
typedef struct _VbFuseServer VbFuseServer;

/* One request of a serving thread: read into, served, answered from. */
typedef struct _FuseSlot {
  VbEngineIo io; /* first: the engine's done function gets the slot */
  FuseThread *thread;
  guint64 unique;
  guint32 opcode;
  guint8 head[FUSE_HEAD_BYTES];
  guint8 *data; /* FUSE_DATA_BYTES, aligned, in the thread's block */
  struct _FuseSlot *next_free;
} FuseSlot;

struct _FuseThread {
  VbFuseServer *server;
  int fd; /* the session's /dev/fuse, or a clone of it */
  VbRing *ring;
  GThread *thread;
  VbRingOp poll_op;
  VbRingOp quit_op;
  gboolean polling;
  gboolean starved; /* reading stopped for want of a free slot */
  gboolean stopping;
  guint in_flight;
  FuseSlot slots[FUSE_SLOTS];
  FuseSlot *free;
  guint8 *data;             /* every slot's data in one block: the ring's registered buffer */
  gboolean data_registered; /* tried: at the first read or write */
};

struct _VbFuseServer {
  char *mountpoint;
  char *file_name; /* without the leading '/' */
  char *path;      /* mountpoint/file_name */
  VbEngineSwitch *sw;
  int fd; /* the session's /dev/fuse */
  guint n_threads;
  FuseThread *threads;
  gboolean mounted;
  guint connection; /* the kernel's connection number (fusectl), 0: unknown */
};

/* A request of @n bytes read into @slot: answered now (metadata), or
 * started in the engine (data: answered from its completion). Either way
 * the slot goes back to the thread's free list once answered. */
void vb_fuse_handle (FuseSlot *slot, gsize n);
/* An answer: the header, then @len bytes of @payload. */
void vb_fuse_reply (FuseThread *t, guint64 unique, int error, const void *payload, gsize len);
/* The slots' data registered with the thread's ring (io_uring fixed
 * buffers: the components' I/O takes their pages without pinning them each
 * time), at the first read or write and not before: registering pins all
 * FUSE_SLOTS * FUSE_DATA_BYTES, which an unused device should not cost. */
void vb_fuse_thread_register_buffers (FuseThread *t);
/* The slot is free again (the thread may read the next request into it). */
void vb_fuse_slot_release (FuseSlot *slot);
/* The invalidation of the file's attributes, for a new size. 0 or -errno. */
int vb_fuse_notify_size (VbFuseServer *s);
