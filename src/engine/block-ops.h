/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a server (NBD, FUSE) needs from a block device it serves: the one
 * interface between the engine and whatever exposes it. Every call but
 * submit is blocking, may come from any thread at once, and returns 0 or
 * -errno. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Extent flags, valued as NBD's base:allocation. */
#define VB_EXTENT_HOLE (1u << 0) /* not allocated */
#define VB_EXTENT_ZERO (1u << 1) /* reads as zeroes */

struct _VbRing;
struct _VbEngineIo;

typedef struct {
  guint64 (*size) (void *handle);
  guint32 (*block_size) (void *handle); /* logical block size; offsets and lengths are multiples */
  gboolean (*read_only) (void *handle);
  gboolean (*can_multi_conn) (
      void *handle); /* a flush covers writes done through every connection */
  int (*pread) (void *handle, void *buf, guint64 length, guint64 offset);
  int (*pwrite) (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua);
  int (*flush) (void *handle);
  int (*discard) (void *handle, guint64 length, guint64 offset);
  int (*write_zeroes) (void *handle, guint64 length, guint64 offset, gboolean fua);
  /* What the bytes from @offset (up to @length) are: @flags
   * (VB_EXTENT_*; 0 is data, the answer that is never wrong) for the
   * first *@run of them (0 < *@run <= @length). NULL: all data. */
  int (*extents) (void *handle, guint64 offset, guint64 length, guint64 *run, guint32 *flags);
  /* The asynchronous path (engine.h), NULL where there is none: starts
   * @io, whose I/O goes into @ring; io->done runs on the ring's thread,
   * which must go on running the ring until it has. */
  void (*submit) (void *handle, struct _VbRing *ring, struct _VbEngineIo *io);
} VbBlockOps;

G_END_DECLS
