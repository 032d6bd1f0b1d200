/* Backend "ublk": the queues of a ublk device (see backend-ublk.c). Each
 * hardware queue has a thread that owns an io_uring on /dev/ublkcN: it
 * arms every tag with FETCH_REQ, hands each request the kernel completes
 * to a pool of workers that run it against the engine's switch, and
 * answers with COMMIT_AND_FETCH_REQ. */
#include "config.h"

#include "ublk-queues.h"
#include "vb-error.h"
#include "vb-report.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/ublk_cmd.h>
#include <liburing.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#define WORKERS 16
#define EVENT_DATA G_MAXUINT64 /* user_data of the eventfd read */

typedef struct {
  VbUblkDevice *dev;
  guint q_id;
  guint tag;
} UblkJob;

typedef struct {
  VbUblkDevice *dev;
  guint q_id;
  struct io_uring ring;
  struct ublksrv_io_desc *iods; /* the driver's descriptors, mapped read-only */
  gsize iods_len;
  guint8 *bufs; /* IO_BUF_BYTES per tag */
  UblkJob jobs[QUEUE_DEPTH];
  int event_fd;
  guint64 event_value;
  GMutex lock;
  GArray *done; /* (tag, result) pairs the workers finished */
  GThread *thread;
  gboolean ring_ready;
  int ring_error; /* the ring's setup failed: -errno */
  GMutex ready_lock;
  GCond ready_cond;
  gboolean ready; /* every tag fetched (or ring_error) */
  gint quit;      /* leave without the driver's aborts (a failed takeover) */
} UblkQueue;

struct _VbUblkDevice {
  guint dev_id;
  guint n_queues;
  int char_fd;
  UblkQueue queues[MAX_QUEUES];
  GThreadPool *workers;
  VbEngineSwitch *sw;
};

typedef struct {
  guint tag;
  int result;
} Done;

static struct io_uring_sqe *
next_sqe (UblkQueue *q)
{
  struct io_uring_sqe *sqe = io_uring_get_sqe (&q->ring);

  if (sqe == NULL)
    {
      io_uring_submit (&q->ring);
      sqe = io_uring_get_sqe (&q->ring);
    }
  return sqe;
}

static void
queue_io_cmd (UblkQueue *q, guint32 op, guint tag, int result)
{
  struct io_uring_sqe *sqe = next_sqe (q);
  struct ublksrv_io_cmd *cmd;

  io_uring_prep_rw (IORING_OP_URING_CMD, sqe, q->dev->char_fd, NULL, 0, 0);
  sqe->cmd_op = op;
  cmd = (struct ublksrv_io_cmd *) sqe->cmd;
  memset (cmd, 0, sizeof *cmd);
  cmd->q_id = (guint16) q->q_id;
  cmd->tag = (guint16) tag;
  cmd->result = result;
  cmd->addr = (guint64) (guintptr) (q->bufs + (gsize) tag * IO_BUF_BYTES);
  io_uring_sqe_set_data64 (sqe, tag);
}

static void
arm_event (UblkQueue *q)
{
  struct io_uring_sqe *sqe = next_sqe (q);

  io_uring_prep_read (sqe, q->event_fd, &q->event_value, sizeof q->event_value, 0);
  io_uring_sqe_set_data64 (sqe, EVENT_DATA);
}

/* A worker: one request against the engine. */
static void
run_job (gpointer data, gpointer user_data)
{
  UblkJob *job = data;
  VbUblkDevice *dev = job->dev;
  UblkQueue *q = &dev->queues[job->q_id];
  const struct ublksrv_io_desc *iod = &q->iods[job->tag];
  guint8 *buf = q->bufs + (gsize) job->tag * IO_BUF_BYTES;
  guint32 op = iod->op_flags & 0xff;
  gboolean fua = (iod->op_flags & UBLK_IO_F_FUA) != 0;
  guint64 offset = iod->start_sector << 9, length = (guint64) iod->nr_sectors << 9;
  const VbBlockOps *ops = &vb_engine_switch_ops;
  Done done = { .tag = job->tag };
  int r;
  guint64 one = 1;

  switch (op)
    {
    case UBLK_IO_OP_READ:
      r = length > IO_BUF_BYTES ? -EINVAL : ops->pread (dev->sw, buf, length, offset);
      done.result = r < 0 ? r : (int) length;
      break;
    case UBLK_IO_OP_WRITE:
      r = length > IO_BUF_BYTES ? -EINVAL : ops->pwrite (dev->sw, buf, length, offset, fua);
      done.result = r < 0 ? r : (int) length;
      break;
    case UBLK_IO_OP_FLUSH:
      done.result = ops->flush ? ops->flush (dev->sw) : 0;
      break;
    case UBLK_IO_OP_DISCARD:
      done.result = ops->discard ? ops->discard (dev->sw, length, offset) : -EOPNOTSUPP;
      break;
    case UBLK_IO_OP_WRITE_ZEROES:
      done.result
          = ops->write_zeroes ? ops->write_zeroes (dev->sw, length, offset, fua) : -EOPNOTSUPP;
      break;
    default:
      done.result = -EOPNOTSUPP;
    }
  g_mutex_lock (&q->lock);
  g_array_append_val (q->done, done);
  g_mutex_unlock (&q->lock);
  if (write (q->event_fd, &one, sizeof one) < 0)
    vb_report ("ublk", VB_REPORT_WARNING, "waking queue %u: %s", q->q_id, g_strerror (errno));
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

/* The queue's thread: fetch, dispatch, commit, until the driver aborts
 * every tag (the device stopped, or this process ends). */
static gpointer
queue_thread (gpointer data)
{
  UblkQueue *q = data;
  guint aborted = 0, in_worker = 0;
  int r;

  r = io_uring_queue_init (2 * QUEUE_DEPTH + 4, &q->ring, 0);
  if (r < 0)
    {
      set_ready (q, r);
      return NULL;
    }
  q->ring_ready = TRUE;
  for (guint tag = 0; tag < QUEUE_DEPTH; tag++)
    queue_io_cmd (q, UBLK_IO_FETCH_REQ, tag, 0);
  arm_event (q);
  r = io_uring_submit (&q->ring);
  set_ready (q, r < 0 ? r : 0);
  if (r < 0)
    return NULL;
  for (;;)
    {
      struct io_uring_cqe *cqe;
      unsigned head, seen = 0;

      r = io_uring_submit_and_wait (&q->ring, 1);
      if (r < 0 && r != -EINTR)
        {
          vb_report ("ublk", VB_REPORT_WARNING, "device %u queue %u: io_uring: %s", q->dev->dev_id,
                     q->q_id, g_strerror (-r));
          break;
        }
      io_uring_for_each_cqe (&q->ring, head, cqe)
      {
        guint64 what = io_uring_cqe_get_data64 (cqe);
        seen++;
        if (what == EVENT_DATA)
          {
            g_autoptr (GArray) done = NULL;
            g_mutex_lock (&q->lock);
            done = g_steal_pointer (&q->done);
            q->done = g_array_new (FALSE, FALSE, sizeof (Done));
            g_mutex_unlock (&q->lock);
            for (guint i = 0; i < done->len; i++)
              {
                Done *d = &g_array_index (done, Done, i);
                queue_io_cmd (q, UBLK_IO_COMMIT_AND_FETCH_REQ, d->tag, d->result);
                in_worker--;
              }
            arm_event (q);
          }
        else if (cqe->res == UBLK_IO_RES_OK)
          {
            in_worker++;
            g_thread_pool_push (q->dev->workers, &q->jobs[what], NULL);
          }
        else
          {
            /* UBLK_IO_RES_ABORT: the device is going; anything else is a
             * command the driver refused, which ends the tag as well */
            if (cqe->res != UBLK_IO_RES_ABORT)
              vb_report ("ublk", VB_REPORT_WARNING,
                         "device %u queue %u tag %" G_GUINT64_FORMAT ": %s", q->dev->dev_id,
                         q->q_id, what, g_strerror (-cqe->res));
            aborted++;
          }
      }
      io_uring_cq_advance (&q->ring, seen);
      if ((aborted == QUEUE_DEPTH && in_worker == 0) || g_atomic_int_get (&q->quit))
        break;
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
      guint64 one = 1;
      if (q->thread == NULL)
        continue;
      /* after STOP_DEV it has ended or ends on its own */
      g_atomic_int_set (&q->quit, 1);
      if (write (q->event_fd, &one, sizeof one) < 0)
        g_debug ("ublk: waking queue %u: %s", q->q_id, g_strerror (errno));
      g_clear_pointer (&q->thread, g_thread_join);
    }
  /* the workers may still write to a queue's buffers and eventfd */
  if (dev->workers)
    g_thread_pool_free (dev->workers, FALSE, TRUE);
  for (guint i = 0; i < dev->n_queues; i++)
    {
      UblkQueue *q = &dev->queues[i];
      if (q->ring_ready)
        io_uring_queue_exit (&q->ring);
      if (q->iods)
        munmap (q->iods, q->iods_len);
      free (q->bufs);
      if (q->event_fd >= 0)
        close (q->event_fd);
      g_clear_pointer (&q->done, g_array_unref);
      g_mutex_clear (&q->lock);
      g_mutex_clear (&q->ready_lock);
      g_cond_clear (&q->ready_cond);
    }
  if (dev->char_fd >= 0)
    close (dev->char_fd);
  g_free (dev);
}

/* Queue @i of @dev (its char device open at @path): the driver's
 * descriptors mapped, a buffer per tag, its thread started; returns once
 * the thread has fetched every tag. */
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
  g_mutex_init (&q->lock);
  g_mutex_init (&q->ready_lock);
  g_cond_init (&q->ready_cond);
  q->done = g_array_new (FALSE, FALSE, sizeof (Done));
  for (guint t = 0; t < QUEUE_DEPTH; t++)
    q->jobs[t] = (UblkJob){ .dev = dev, .q_id = i, .tag = t };
  q->iods_len = stride;
  q->iods = mmap (NULL, stride, PROT_READ, MAP_SHARED | MAP_POPULATE, dev->char_fd,
                  UBLKSRV_CMD_BUF_OFFSET + (off_t) (i * max_stride));
  if (q->iods == MAP_FAILED)
    {
      e = errno;
      q->iods = NULL;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: mmap of queue %u: %s", path, i,
                   g_strerror (e));
      return FALSE;
    }
  if (posix_memalign ((void **) &q->bufs, 4096, (gsize) QUEUE_DEPTH * IO_BUF_BYTES) != 0)
    {
      q->bufs = NULL;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: no memory for queue %u", path, i);
      return FALSE;
    }
  q->event_fd = eventfd (0, EFD_CLOEXEC);
  if (q->event_fd < 0)
    {
      e = errno;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "eventfd: %s", g_strerror (e));
      return FALSE;
    }
  q->thread = g_thread_new ("ublk-queue", queue_thread, q);
  g_mutex_lock (&q->ready_lock);
  while (!q->ready)
    g_cond_wait (&q->ready_cond, &q->ready_lock);
  g_mutex_unlock (&q->ready_lock);
  if (q->ring_error < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: queue %u: io_uring: %s", path, i,
                   g_strerror (-q->ring_error));
      return FALSE;
    }
  return TRUE;
}

VbUblkDevice *
vb_ublk_device_open (guint dev_id, guint n_queues, VbEngineSwitch *sw, GError **error)
{
  g_autofree char *path = g_strdup_printf ("/dev/ublkc%u", dev_id);
  VbUblkDevice *dev = g_new0 (VbUblkDevice, 1);
  int e;

  dev->dev_id = dev_id;
  dev->sw = sw;
  dev->char_fd = -1;
  for (guint i = 0; i < MAX_QUEUES; i++)
    dev->queues[i].event_fd = -1;
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
  dev->workers = g_thread_pool_new (run_job, NULL, WORKERS, FALSE, NULL);
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
