/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Private to the NBD transmission phase: one connection's state, shared by
 * its reading and replying (nbd-conn.c) and its running of requests on
 * the export (nbd-run.c). Everything here belongs to the connection's
 * thread, but the few fields a blocking export's worker touches. */
#pragma once

#include "engine.h"
#include "nbd-handshake.h"
#include "nbd-server.h"

G_BEGIN_DECLS

/* Wire constants, named and valued as in the NBD protocol (doc/proto.md of
 * NetworkBlockDevice/nbd). */
#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_REQUEST_BYTES 28u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu

#define NBD_CMD_READ 0u
#define NBD_CMD_WRITE 1u
#define NBD_CMD_DISC 2u
#define NBD_CMD_FLUSH 3u
#define NBD_CMD_TRIM 4u
#define NBD_CMD_WRITE_ZEROES 6u
#define NBD_CMD_BLOCK_STATUS 7u

#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)

#define NBD_REPLY_FLAG_DONE (1u << 0)
#define NBD_REPLY_TYPE_NONE 0u
#define NBD_REPLY_TYPE_OFFSET_DATA 1u
#define NBD_REPLY_TYPE_BLOCK_STATUS 5u
#define NBD_REPLY_TYPE_ERROR ((1u << 15) + 1)

#define NBD_EPERM 1u
#define NBD_EIO 5u
#define NBD_ENOMEM 12u
#define NBD_EINVAL 22u
#define NBD_ENOSPC 28u
#define NBD_EOVERFLOW 75u
#define NBD_ESHUTDOWN 108u

/* Buffers come in power-of-two sizes from a page to VB_NBD_MAX_REQUEST. */
#define VB_NBD_MIN_BUFFER 4096u
#define VB_NBD_BUFFER_CLASSES 14u

/* A block status reply: the context ID and at most this many descriptors
 * (length, flags), in a buffer of the smallest class. */
#define VB_NBD_MAX_EXTENTS ((VB_NBD_MIN_BUFFER - 4u) / 8u)
#define VB_NBD_STATUS_BYTES (4u + 8u * VB_NBD_MAX_EXTENTS)

/* The most pieces one reply takes (header, then data or an error text). */
#define NBD_JOB_IOV 2u

typedef struct {
  guint16 flags;
  guint16 type;
  guint8 cookie[8]; /* "handle": echoed back untouched */
  guint64 offset;
  guint32 length;
} VbNbdRequest;

typedef struct _NbdConn NbdConn;
typedef struct _NbdJob NbdJob;

/* One request from its header to its reply: a slot of the connection,
 * made once. */
struct _NbdJob {
  NbdConn *conn;
  VbNbdRequest req;
  guint8 *buf; /* READ and WRITE: the data; BLOCK_STATUS: the reply's payload */
  guint buf_class;
  VbEngineIo io; /* what runs on the export */
  /* write-zeroes the export lacks, done by writing zeroes: how far */
  guint64 zeroed;
  gboolean zeroing;
  gboolean started; /* a flush: waits no more for earlier requests */
  guint n_extents;  /* block status: the descriptors in buf */
  GList order_link; /* in conn->order from receipt until done on the device */
  /* a blocking export: the worker's result, posted to the ring */
  VbRingOp posted;
  int posted_res;
  /* the reply: its pieces, and how far they went out */
  guint8 head[28];
  struct iovec iov[NBD_JOB_IOV];
  guint n_iov, iov_at;
  NbdJob *next; /* in the free list, or the send queue */
};

struct _NbdConn {
  const VbNbdExport *export;
  int fd;
  VbNbdTerms terms;
  /* no handshake: the peer (the kernel nbd client) is told of a new size
   * by its owner, so requests are checked against the size of now */
  gboolean live_size;
  VbRing *ring;
  int result; /* what ended the connection: 0 (a DISC) or -errno */

  /* reading: rbuf holds rpos to rlen not yet parsed; a WRITE's payload
   * (or a refused one's, into nothing when rx_job is NULL) still wants
   * rx_need bytes */
  guint8 *rbuf;
  gsize rpos, rlen;
  NbdJob *rx_job;
  guint64 rx_need;
  gboolean rx_stopped; /* a DISC, the end of the stream or a broken protocol */
  gboolean starved;    /* stopped for want of a slot or a buffer */
  VbRingOp in_op;
  gboolean in_polling;

  /* replying: the queue of replies not (all) sent, oldest first */
  NbdJob *send_head, *send_tail;
  VbRingOp out_op;
  gboolean out_polling;
  gboolean broken; /* replies are dropped, nothing more is read */

  /* slots and buffers */
  NbdJob *free_jobs;
  guint n_used;
  guint8 *free_bufs[VB_NBD_BUFFER_CLASSES];
  gsize buf_bytes; /* allocated, in use or free: at most the budget */

  /* requests not done on the device, in the order received: a flush
   * waits for those before it */
  GQueue order;
  /* a blocking export's workers, made on first use */
  GThreadPool *workers;
};

/* nbd-run.c */
guint32 nbd_check_request (NbdConn *c, const VbNbdRequest *req, const char **why);
void nbd_job_init (NbdConn *c, NbdJob *job);
void nbd_job_clear (NbdJob *job);
/* Runs @job (its header checked, a WRITE's payload in) on the export;
 * nbd_job_done follows on the connection's thread. */
void nbd_job_start (NbdConn *c, NbdJob *job);
/* Waits for the blocking export's workers to end (nothing in flight). */
void nbd_run_stop (NbdConn *c);

/* nbd-conn.c: queues @job's reply (0 or -errno). */
void nbd_job_done (NbdJob *job, int res);

G_END_DECLS
