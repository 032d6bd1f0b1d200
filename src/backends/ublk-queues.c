/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "ublk": the queues of a ublk device (see backend-ublk.c), as
 * ublksrv serves them: each hardware queue has one thread and one ring
 * that carries both the ublk commands on /dev/ublkcN and the component
 * I/O of the engine requests they bring. A tag's request completes, and
 * COMMIT_AND_FETCH_REQ goes into the same ring, from the completion of its
 * last piece: nothing crosses to another thread on the way.
 *
 * Where the data is: with zero copy (UBLK_F_AUTO_BUF_REG, Linux 6.16 on)
 * the driver registers each request's pages in the ring's buffer table at
 * the tag's index before the fetch completes, and unregisters them at the
 * commit; the components are read and written from them directly.
 * Otherwise the driver copies between the request and the tag's buffer,
 * all of which is registered with the ring once (no page pinning per
 * I/O). User copy (6.5 on) is not used: it is the same one copy, made by
 * a request of ours instead of the driver's; nor zero copy by explicit
 * REGISTER_IO_BUF commands (6.15 only, before automatic registration):
 * two more commands per request. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "ublk-queues.h"

#include "ublk-control.h"
#include "vb-error.h"
#include "vb-report.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/ublk_cmd.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define RING_ENTRIES (4 * QUEUE_DEPTH)

/* the I/O commands' ioctl-encoded numbers (Linux 6.3 on; 6.1's header has
 * only the legacy ones) */
#ifndef UBLK_U_IO_FETCH_REQ
#define UBLK_U_IO_FETCH_REQ _IOWR ('u', UBLK_IO_FETCH_REQ, struct ublksrv_io_cmd)
#define UBLK_U_IO_COMMIT_AND_FETCH_REQ                                                             \
  _IOWR ('u', UBLK_IO_COMMIT_AND_FETCH_REQ, struct ublksrv_io_cmd)
#endif

typedef struct _UblkQueue UblkQueue;

/* One tag: its command in the ring, and the engine request it brings. */
typedef struct {
  VbRingOp cmd; /* FETCH_REQ or COMMIT_AND_FETCH_REQ completed */
  VbEngineIo io;
  UblkQueue *q;
  guint tag;
  guint32 op;
} UblkTag;

struct _UblkQueue {
  VbUblkDevice *dev;
  guint q_id;
  VbRing *ring;
  struct ublksrv_io_desc *iods; /* the driver's descriptors, mapped read-only */
  gsize iods_len;
  guint8 *bufs; /* IO_BUF_BYTES per tag */
  UblkTag tags[QUEUE_DEPTH];
  VbRingOp quit_op;
  GThread *thread;
  int ring_error; /* the first submission failed: -errno */
  GMutex ready_lock;
  GCond ready_cond;
  gboolean ready; /* every tag fetched (or ring_error) */
  gboolean quit;  /* leave without the driver's aborts (a failed takeover); the ring's thread */
  gboolean bufs_registered; /* tried: at the first request with data */
  guint aborted, in_engine;
};

struct _VbUblkDevice {
  guint dev_id;
  guint n_queues;
  gboolean zero_copy;
  gboolean encoded; /* ioctl-encoded command numbers */
  int char_fd;
  UblkQueue queues[MAX_QUEUES];
  VbEngineSwitch *sw;
};

static void
queue_io_cmd (UblkQueue *q, guint32 op, guint tag, int result)
{
  struct io_uring_sqe *sqe = vb_ring_sqe (q->ring, &q->tags[tag].cmd);
  struct ublksrv_io_cmd *cmd;

  /* /dev/ublkcN is the ring's registered file 0: no fd lookup per command */
  io_uring_prep_rw (IORING_OP_URING_CMD, sqe, 0, NULL, 0, 0);
  sqe->flags |= IOSQE_FIXED_FILE;
  if (q->dev->encoded)
    op = op == UBLK_IO_FETCH_REQ ? UBLK_U_IO_FETCH_REQ : UBLK_U_IO_COMMIT_AND_FETCH_REQ;
  sqe->cmd_op = op;
  cmd = (struct ublksrv_io_cmd *) sqe->cmd;
  memset (cmd, 0, sizeof *cmd);
  cmd->q_id = (guint16) q->q_id;
  cmd->tag = (guint16) tag;
  cmd->result = result;
  /* zero copy: no buffer of ours, and the SQE's own address says where
   * the driver puts the request's (struct ublk_auto_buf_reg: the index in
   * the ring's table in bits 0-15, no flags) */
  if (q->dev->zero_copy)
    sqe->addr = tag;
  else
    cmd->addr = (guint64) (guintptr) (q->bufs + (gsize) tag * IO_BUF_BYTES);
}

/* The engine is done with a tag's request: the answer goes back with the
 * fetch of the next one. */
static void
on_io_done (VbEngineIo *io, int res)
{
  UblkTag *t = io->user_data;
  gboolean data = t->op == UBLK_IO_OP_READ || t->op == UBLK_IO_OP_WRITE;

  t->q->in_engine--;
  queue_io_cmd (t->q, UBLK_IO_COMMIT_AND_FETCH_REQ, t->tag,
                res < 0 || !data ? res : (int) io->length);
}

/* The tags' buffers registered with the ring (io_uring fixed buffers):
 * the components' I/O then takes their pages without pinning them each
 * time. At the first request with data, not before: registering pins all
 * QUEUE_DEPTH * IO_BUF_BYTES, which a device that is started and never
 * used should not cost. */
static void
register_buffers (UblkQueue *q)
{
  int e = vb_ring_register_buffer (q->ring, q->bufs, (gsize) QUEUE_DEPTH * IO_BUF_BYTES);

  q->bufs_registered = TRUE;
  if (e < 0)
    vb_report ("ublk", VB_REPORT_INFO,
               "device %u queue %u: buffers not registered with io_uring (%s): plain reads and "
               "writes",
               q->dev->dev_id, q->q_id, g_strerror (-e));
}

/* A request the kernel handed over on tag @t. */
static void
start_request (UblkTag *t)
{
  UblkQueue *q = t->q;
  const struct ublksrv_io_desc *iod = &q->iods[t->tag];
  VbEngineIo *io = &t->io;

  t->op = iod->op_flags & 0xff;
  io->offset = iod->start_sector << 9;
  io->length = (guint64) iod->nr_sectors << 9;
  io->fua = (iod->op_flags & UBLK_IO_F_FUA) != 0;
  switch (t->op)
    {
    case UBLK_IO_OP_READ:
      io->kind = VB_ENGINE_IO_READ;
      break;
    case UBLK_IO_OP_WRITE:
      io->kind = VB_ENGINE_IO_WRITE;
      break;
    case UBLK_IO_OP_FLUSH:
      io->kind = VB_ENGINE_IO_FLUSH;
      break;
    case UBLK_IO_OP_DISCARD:
      io->kind = VB_ENGINE_IO_DISCARD;
      break;
    case UBLK_IO_OP_WRITE_ZEROES:
      io->kind = VB_ENGINE_IO_WRITE_ZEROES;
      break;
    default:
      queue_io_cmd (q, UBLK_IO_COMMIT_AND_FETCH_REQ, t->tag, -EOPNOTSUPP);
      return;
    }
  if ((t->op == UBLK_IO_OP_READ || t->op == UBLK_IO_OP_WRITE) && io->length > IO_BUF_BYTES)
    {
      queue_io_cmd (q, UBLK_IO_COMMIT_AND_FETCH_REQ, t->tag, -EINVAL);
      return;
    }
  if (!q->dev->zero_copy && !q->bufs_registered
      && (io->kind == VB_ENGINE_IO_READ || io->kind == VB_ENGINE_IO_WRITE))
    register_buffers (q);
  io->done = on_io_done;
  io->user_data = t;
  q->in_engine++;
  vb_engine_switch_submit (q->dev->sw, q->ring, io);
}

static void
on_cmd (VbRingOp *op, int res)
{
  UblkTag *t = (UblkTag *) op;
  UblkQueue *q = t->q;

  if (res == UBLK_IO_RES_OK)
    {
      start_request (t);
      return;
    }
  /* UBLK_IO_RES_ABORT: the device is going; anything else is a command
   * the driver refused, which ends the tag as well */
  if (res != UBLK_IO_RES_ABORT)
    vb_report ("ublk", VB_REPORT_WARNING, "device %u queue %u tag %u: %s", q->dev->dev_id, q->q_id,
               t->tag, g_strerror (-res));
  q->aborted++;
}

static void
on_quit (VbRingOp *op, int res)
{
  UblkQueue *q = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (UblkQueue, quit_op));

  q->quit = TRUE;
}

static void
set_ready (UblkQueue *q, int error)
{
  g_mutex_lock (&q->ready_lock);
  q->ring_error = error;
  q->ready = TRUE;
  g_cond_broadcast (&q->ready_cond);
  g_mutex_unlock (&q->ready_lock);
}

/* The queue's thread: fetch, serve, commit, until the driver aborts every
 * tag (the device stopped, or this process ends) or it is told to quit,
 * and no request is left in the engine. */
static gpointer
queue_thread (gpointer data)
{
  UblkQueue *q = data;
  int r;

  for (guint tag = 0; tag < QUEUE_DEPTH; tag++)
    queue_io_cmd (q, UBLK_IO_FETCH_REQ, tag, 0);
  r = vb_ring_run (q->ring, FALSE);
  set_ready (q, r < 0 ? r : 0);
  if (r < 0)
    return NULL;
  /* (requests in the engine hold the ring and the tags: they end first) */
  while (q->in_engine > 0 || !(q->quit || q->aborted == QUEUE_DEPTH))
    {
      r = vb_ring_run (q->ring, TRUE);
      if (r < 0)
        {
          vb_report ("ublk", VB_REPORT_WARNING, "device %u queue %u: io_uring: %s", q->dev->dev_id,
                     q->q_id, g_strerror (-r));
          break;
        }
    }
  return NULL;
}

void
vb_ublk_device_free (VbUblkDevice *dev)
{
  if (dev == NULL)
    return;
  for (guint i = 0; i < dev->n_queues; i++)
    {
      UblkQueue *q = &dev->queues[i];
      if (q->thread == NULL)
        continue;
      /* after STOP_DEV it has ended or ends on its own */
      vb_ring_post (q->ring, &q->quit_op, 0);
      g_clear_pointer (&q->thread, g_thread_join);
    }
  for (guint i = 0; i < dev->n_queues; i++)
    {
      UblkQueue *q = &dev->queues[i];
      g_clear_pointer (&q->ring, vb_ring_free);
      if (q->iods)
        munmap (q->iods, q->iods_len);
      free (q->bufs);
      for (guint t = 0; t < QUEUE_DEPTH; t++)
        vb_engine_io_clear (&q->tags[t].io);
      g_mutex_clear (&q->ready_lock);
      g_cond_clear (&q->ready_cond);
    }
  if (dev->char_fd >= 0)
    close (dev->char_fd);
  g_free (dev);
}

/* Queue @i of @dev (its char device open at @path): the driver's
 * descriptors mapped, a buffer and a request per tag, its ring made and
 * its thread started; returns once the thread has fetched every tag. */
static gboolean
queue_open (VbUblkDevice *dev, guint i, const char *path, GError **error)
{
  UblkQueue *q = &dev->queues[i];
  gsize stride = (gsize) ((QUEUE_DEPTH * sizeof (struct ublksrv_io_desc) + 4095) & ~4095u);
  gsize max_stride
      = (gsize) ((UBLK_MAX_QUEUE_DEPTH * sizeof (struct ublksrv_io_desc) + 4095) & ~4095u);
  int e;

  q->dev = dev;
  q->q_id = i;
  g_mutex_init (&q->ready_lock);
  g_cond_init (&q->ready_cond);
  q->quit_op.func = on_quit;
  q->iods_len = stride;
  q->iods = mmap (NULL, stride, PROT_READ, MAP_SHARED | MAP_POPULATE, dev->char_fd,
                  UBLKSRV_CMD_BUF_OFFSET + (off_t) (i * max_stride));
  if (q->iods == MAP_FAILED)
    {
      e = errno;
      q->iods = NULL;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s: mmap of queue %u: %s"), path, i,
                   g_strerror (e));
      return FALSE;
    }
  if (!dev->zero_copy
      && posix_memalign ((void **) &q->bufs, 4096, (gsize) QUEUE_DEPTH * IO_BUF_BYTES) != 0)
    {
      q->bufs = NULL;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s: no memory for queue %u"), path, i);
      return FALSE;
    }
  for (guint t = 0; t < QUEUE_DEPTH; t++)
    {
      UblkTag *tag = &q->tags[t];
      tag->cmd.func = on_cmd;
      tag->q = q;
      tag->tag = t;
      vb_engine_io_init (&tag->io);
      if (dev->zero_copy)
        {
          tag->io.kernel_buf = TRUE;
          tag->io.kernel_buf_index = t;
        }
      else
        tag->io.buf = q->bufs + (gsize) t * IO_BUF_BYTES;
    }
  q->ring = vb_ring_new (RING_ENTRIES, error);
  if (q->ring == NULL)
    {
      g_prefix_error (error, _ ("%s: queue %u: "), path, i);
      return FALSE;
    }
  if ((e = io_uring_register_files (vb_ring_uring (q->ring), &dev->char_fd, 1)) < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s: queue %u: registering the fd: %s"),
                   path, i, g_strerror (-e));
      return FALSE;
    }
  if (dev->zero_copy)
    {
      /* the table the driver registers each request's pages in */
      if ((e = io_uring_register_buffers_sparse (vb_ring_uring (q->ring), QUEUE_DEPTH)) < 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("%s: queue %u: a buffer table for zero copy: %s"), path, i,
                       g_strerror (-e));
          return FALSE;
        }
    }
  q->thread = g_thread_new ("ublk-queue", queue_thread, q);
  g_mutex_lock (&q->ready_lock);
  while (!q->ready)
    g_cond_wait (&q->ready_cond, &q->ready_lock);
  g_mutex_unlock (&q->ready_lock);
  if (q->ring_error < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s: queue %u: io_uring: %s"), path, i,
                   g_strerror (-q->ring_error));
      return FALSE;
    }
  return TRUE;
}

VbUblkDevice *
vb_ublk_device_open (guint dev_id, guint n_queues, guint64 flags, VbEngineSwitch *sw,
                     GError **error)
{
  g_autofree char *path = g_strdup_printf ("/dev/ublkc%u", dev_id);
  VbUblkDevice *dev = g_new0 (VbUblkDevice, 1);
  int e;

  dev->dev_id = dev_id;
  dev->zero_copy = (flags & UBLK_F_AUTO_BUF_REG) != 0;
  dev->encoded = (flags & UBLK_F_CMD_IOCTL_ENCODE) != 0;
  dev->sw = sw;
  dev->char_fd = -1;
  if (n_queues == 0 || n_queues > MAX_QUEUES)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED, _ ("%s: %u queues (at most %u)"), path,
                   n_queues, MAX_QUEUES);
      return dev;
    }
  /* udev makes the node; wait for it a little */
  for (guint i = 0; i < 500 && (dev->char_fd = open (path, O_RDWR | O_CLOEXEC)) < 0; i++)
    {
      if (errno != ENOENT)
        break;
      g_usleep (10000);
    }
  if (dev->char_fd < 0)
    {
      e = errno;
      g_set_error (error, VB_ERROR, e == EBUSY ? VB_ERROR_BUSY : VB_ERROR_FAILED, "%s: %s", path,
                   g_strerror (e));
      goto fail;
    }
  dev->n_queues = n_queues;
  for (guint i = 0; i < n_queues; i++)
    if (!queue_open (dev, i, path, error))
      goto fail;
  return dev;

fail:
  /* a thread that fetched waits for aborts the caller's STOP_DEV or
   * DEL_DEV brings; one that failed has ended */
  for (guint i = 0; i < dev->n_queues; i++)
    if (dev->queues[i].ring_error < 0 || !dev->queues[i].ready)
      g_clear_pointer (&dev->queues[i].thread, g_thread_join);
  return dev;
}

gboolean
vb_ublk_device_opened (VbUblkDevice *dev)
{
  for (guint i = 0; i < dev->n_queues; i++)
    if (dev->queues[i].thread == NULL)
      return FALSE;
  return dev->n_queues > 0;
}
