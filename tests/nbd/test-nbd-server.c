/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The NBD server library without a client program: connections handed over
 * with vb_nbd_server_serve_fd (as the kernel nbd backend will), requests of
 * one connection run at once and answered out of order — on an export with
 * only blocking calls and on one with the asynchronous path, as the
 * engine's — the connection cap, shutdown with connections open,
 * refused arguments, and block status (base:allocation). */
#include "config.h"

#include "engine.h"
#include "nbd-server.h"
#include "vb-error.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DISK_SIZE (1u << 20)

typedef struct {
  GMutex lock;
  guint8 data[DISK_SIZE];
  guint32 block_size;
} MemDisk;

static guint64
mem_size (void *handle)
{
  return DISK_SIZE;
}

static guint32
mem_block_size (void *handle)
{
  return ((MemDisk *) handle)->block_size;
}

static int
mem_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  MemDisk *d = handle;

  g_mutex_lock (&d->lock);
  memcpy (buf, d->data + offset, length);
  g_mutex_unlock (&d->lock);
  return 0;
}

static int
mem_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  MemDisk *d = handle;

  g_mutex_lock (&d->lock);
  memcpy (d->data + offset, buf, length);
  g_mutex_unlock (&d->lock);
  return 0;
}

/* No flush, discard or write_zeroes: the server must cope (write-zeroes
 * emulated with writes, flush and trim not advertised). */
static const VbBlockOps mem_ops = {
  .size = mem_size,
  .block_size = mem_block_size,
  .pread = mem_pread,
  .pwrite = mem_pwrite,
};

static MemDisk *
mem_disk_new (guint32 block_size)
{
  MemDisk *d = g_new0 (MemDisk, 1);

  g_mutex_init (&d->lock);
  d->block_size = block_size;
  for (guint i = 0; i < DISK_SIZE; i++)
    d->data[i] = i * 13;
  return d;
}

static void
mem_disk_free (MemDisk *d)
{
  g_mutex_clear (&d->lock);
  g_free (d);
}

static void
send_request_flags (int fd, guint16 command_flags, guint16 type, guint64 cookie, guint64 offset,
                    guint32 length)
{
  guint8 h[28];
  guint32 magic = GUINT32_TO_BE (0x25609513), len = GUINT32_TO_BE (length);
  guint16 flags = GUINT16_TO_BE (command_flags), t = GUINT16_TO_BE (type);
  guint64 off = GUINT64_TO_BE (offset);

  memcpy (h, &magic, 4);
  memcpy (h + 4, &flags, 2);
  memcpy (h + 6, &t, 2);
  memcpy (h + 8, &cookie, 8);
  memcpy (h + 16, &off, 8);
  memcpy (h + 24, &len, 4);
  g_assert_cmpint (send (fd, h, sizeof h, MSG_NOSIGNAL), ==, sizeof h);
}

static void
send_request (int fd, guint16 type, guint64 cookie, guint64 offset, guint32 length)
{
  send_request_flags (fd, 0, type, cookie, offset, length);
}

static void
recv_exact (int fd, void *buf, gsize len)
{
  g_assert_cmpint (recv (fd, buf, len, MSG_WAITALL), ==, len);
}

/* Returns the NBD error of a simple reply to @cookie. */
static guint32
recv_simple_reply (int fd, guint64 cookie)
{
  guint8 h[16];
  guint32 magic, error;

  recv_exact (fd, h, sizeof h);
  memcpy (&magic, h, 4);
  memcpy (&error, h + 4, 4);
  g_assert_cmphex (GUINT32_FROM_BE (magic), ==, 0x67446698);
  g_assert_cmpmem (h + 8, 8, &cookie, 8);
  return GUINT32_FROM_BE (error);
}

/* The cookie of the next simple reply, whichever request it answers. */
static guint64
recv_any_simple_reply (int fd, guint32 *error)
{
  guint8 h[16];
  guint32 magic;
  guint64 cookie;

  recv_exact (fd, h, sizeof h);
  memcpy (&magic, h, 4);
  memcpy (error, h + 4, 4);
  memcpy (&cookie, h + 8, 8);
  g_assert_cmphex (GUINT32_FROM_BE (magic), ==, 0x67446698);
  *error = GUINT32_FROM_BE (*error);
  return cookie;
}

static void
wait_for_connections (VbNbdServer *server, guint n)
{
  for (int i = 0; i < 500 && vb_nbd_server_n_connections (server) != n; i++)
    g_usleep (10 * 1000);
  g_assert_cmpuint (vb_nbd_server_n_connections (server), ==, n);
}

static void
test_no_handshake (void)
{
  MemDisk *d = mem_disk_new (512);
  g_autoptr (GError) error = NULL;
  VbNbdServer *server = vb_nbd_server_new ("mem", NULL, &mem_ops, d, &error);
  guint8 pattern[4096], back[4096];
  int sv[2];

  g_assert_no_error (error);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  g_assert_true (vb_nbd_server_serve_fd (server, sv[1], VB_NBD_SERVE_NO_HANDSHAKE, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (vb_nbd_server_n_connections (server), ==, 1);

  /* The first bytes are a transmission request, no greeting before. */
  memset (pattern, 0x5a, sizeof pattern);
  send_request (sv[0], 1 /* WRITE */, 7, 8192, sizeof pattern);
  g_assert_cmpint (send (sv[0], pattern, sizeof pattern, MSG_NOSIGNAL), ==, sizeof pattern);
  g_assert_cmpuint (recv_simple_reply (sv[0], 7), ==, 0);
  g_assert_cmpmem (d->data + 8192, sizeof pattern, pattern, sizeof pattern);

  send_request (sv[0], 0 /* READ */, 8, 8192, sizeof back);
  g_assert_cmpuint (recv_simple_reply (sv[0], 8), ==, 0);
  recv_exact (sv[0], back, sizeof back);
  g_assert_cmpmem (back, sizeof back, pattern, sizeof pattern);

  /* Without a write_zeroes callback the server writes zeroes itself. */
  send_request (sv[0], 6 /* WRITE_ZEROES */, 9, 8192, 1024);
  g_assert_cmpuint (recv_simple_reply (sv[0], 9), ==, 0);
  g_assert_cmpuint (d->data[8192], ==, 0);
  g_assert_cmpuint (d->data[8192 + 1023], ==, 0);
  g_assert_cmpuint (d->data[8192 + 1024], ==, 0x5a);

  /* Not advertised without a flush callback: refused, not pretended. */
  send_request (sv[0], 3 /* FLUSH */, 10, 0, 0);
  g_assert_cmpuint (recv_simple_reply (sv[0], 10), ==, EINVAL);

  close (sv[0]);
  wait_for_connections (server, 0);
  vb_nbd_server_free (server);
  mem_disk_free (d);
}

/* A server of @d on one end of a socketpair, from the first byte in
 * transmission; the client's end, whose reads give up after 10 s (a
 * server that stops answering fails the test instead of hanging it). */
static VbNbdServer *
serve_pair (MemDisk *d, int *client)
{
  g_autoptr (GError) error = NULL;
  VbNbdServer *server = vb_nbd_server_new ("mem", NULL, &mem_ops, d, &error);
  struct timeval tv = { .tv_sec = 10 };
  int sv[2];

  g_assert_no_error (error);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  g_assert_cmpint (setsockopt (sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), ==, 0);
  g_assert_true (vb_nbd_server_serve_fd (server, sv[1], VB_NBD_SERVE_NO_HANDSHAKE, &error));
  g_assert_no_error (error);
  *client = sv[0];
  return server;
}

/* More requests at once than the connection has slots, each answered at
 * once (zero-length reads): the reading stops for want of a slot, and goes
 * on when the replies give the slots back, with nothing else to wake it. */
#define PIPELINED (3 * VB_NBD_MAX_IN_FLIGHT)

static void
test_more_than_slots (void)
{
  MemDisk *d = mem_disk_new (512);
  gboolean seen[PIPELINED + 1] = { FALSE };
  int fd;
  VbNbdServer *server = serve_pair (d, &fd);

  for (guint64 i = 1; i <= PIPELINED; i++)
    send_request (fd, 0 /* READ */, i, 4096, 0);
  for (guint i = 0; i < PIPELINED; i++)
    {
      guint32 error;
      guint64 cookie = recv_any_simple_reply (fd, &error);
      g_assert_cmpuint (error, ==, 0);
      g_assert_cmpuint (cookie, >=, 1);
      g_assert_cmpuint (cookie, <=, PIPELINED);
      g_assert_false (seen[cookie]);
      seen[cookie] = TRUE;
    }
  close (fd);
  wait_for_connections (server, 0);
  vb_nbd_server_free (server);
  mem_disk_free (d);
}

/* A client gone in the middle of a WRITE's payload: the connection ends
 * (its half-read write neither runs nor holds it up), and nothing lands. */
static void
test_cut_write (void)
{
  MemDisk *d = mem_disk_new (512);
  guint8 before[8192], part[1000];
  int fd;
  VbNbdServer *server = serve_pair (d, &fd);

  memcpy (before, d->data, sizeof before);
  memset (part, 0x77, sizeof part);
  send_request (fd, 1 /* WRITE */, 1, 0, 512 << 10);
  g_assert_cmpint (send (fd, part, sizeof part, MSG_NOSIGNAL), ==, sizeof part);
  close (fd);
  wait_for_connections (server, 0);
  g_assert_cmpmem (d->data, sizeof before, before, sizeof before);
  vb_nbd_server_free (server);
  mem_disk_free (d);
}

/* A MemDisk whose reads at GATE_OFFSET wait until the test opens the gate:
 * through the blocking calls, blocking the caller; through the asynchronous
 * path, held without blocking anyone. The blocking wait gives up after
 * GATE_TIMEOUT_S, so that a server running one request at a time fails the
 * checks below instead of hanging them. */
#define GATE_OFFSET 65536u
#define GATE_TIMEOUT_S 5

typedef struct {
  MemDisk *mem;
  GMutex lock;
  GCond cond;
  gboolean open;
  guint n_waiting; /* reads blocked at the gate */
  guint n_flushes;
  guint waiting_at_flush; /* n_waiting when flush was last called */
  /* the asynchronous path: the read held at the gate, and its ring */
  VbEngineIo *held_io;
  VbRing *held_ring;
} GatedDisk;

static guint32
gated_block_size (void *handle)
{
  return 512;
}

static int
gated_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  GatedDisk *g = handle;
  gint64 deadline = g_get_monotonic_time () + GATE_TIMEOUT_S * G_TIME_SPAN_SECOND;

  if (offset == GATE_OFFSET)
    {
      g_mutex_lock (&g->lock);
      g->n_waiting++;
      g_cond_broadcast (&g->cond);
      while (!g->open && g_cond_wait_until (&g->cond, &g->lock, deadline))
        ;
      g->n_waiting--;
      g_mutex_unlock (&g->lock);
    }
  return mem_pread (g->mem, buf, length, offset);
}

static int
gated_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  return mem_pwrite (((GatedDisk *) handle)->mem, buf, length, offset, fua);
}

static int
gated_flush (void *handle)
{
  GatedDisk *g = handle;

  g_mutex_lock (&g->lock);
  g->n_flushes++;
  g->waiting_at_flush = g->n_waiting;
  g_mutex_unlock (&g->lock);
  return 0;
}

static const VbBlockOps gated_ops = {
  .size = mem_size,
  .block_size = gated_block_size,
  .pread = gated_pread,
  .pwrite = gated_pwrite,
  .flush = gated_flush,
};

/* The asynchronous path completes each request through the connection's
 * ring, posted from whichever thread finishes it (the engine's completions
 * arrive the same way). The request's "held" op, the engine switch's and
 * unused here, carries the completion. */
static void
gated_complete (VbRingOp *op, int res)
{
  VbEngineIo *io = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (VbEngineIo, held));

  io->done (io, res);
}

static void
gated_submit (void *handle, VbRing *ring, VbEngineIo *io)
{
  GatedDisk *g = handle;
  int r;

  io->held.func = gated_complete;
  switch (io->kind)
    {
    case VB_ENGINE_IO_READ:
      g_mutex_lock (&g->lock);
      if (io->offset == GATE_OFFSET && !g->open)
        {
          g_assert_null (g->held_io);
          g->held_io = io;
          g->held_ring = ring;
          g->n_waiting++;
          g_cond_broadcast (&g->cond);
          g_mutex_unlock (&g->lock);
          return;
        }
      g_mutex_unlock (&g->lock);
      r = mem_pread (g->mem, io->buf, io->length, io->offset);
      break;
    case VB_ENGINE_IO_WRITE:
      r = mem_pwrite (g->mem, io->buf, io->length, io->offset, io->fua);
      break;
    case VB_ENGINE_IO_FLUSH:
      r = gated_flush (g);
      break;
    default:
      r = -EOPNOTSUPP; /* write-zeroes: the server writes zeroes itself */
      break;
    }
  vb_ring_post (ring, &io->held, r);
}

static const VbBlockOps gated_async_ops = {
  .size = mem_size,
  .block_size = gated_block_size,
  .pread = gated_pread,
  .pwrite = gated_pwrite,
  .flush = gated_flush,
  .submit = gated_submit,
};

typedef struct {
  GatedDisk disk;
  VbNbdServer *server;
  int fd; /* the client's end */
} Gated;

static void
gated_setup (Gated *t, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  int sv[2];

  t->disk.mem = mem_disk_new (512);
  g_mutex_init (&t->disk.lock);
  g_cond_init (&t->disk.cond);
  t->server = vb_nbd_server_new (
      "gated", NULL, GPOINTER_TO_INT (data) ? &gated_async_ops : &gated_ops, &t->disk, &error);
  g_assert_no_error (error);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  g_assert_true (vb_nbd_server_serve_fd (t->server, sv[1], VB_NBD_SERVE_NO_HANDSHAKE, &error));
  g_assert_no_error (error);
  t->fd = sv[0];
}

static void gate_open (GatedDisk *g);

static void
gated_teardown (Gated *t, gconstpointer data)
{
  gate_open (&t->disk);
  close (t->fd);
  wait_for_connections (t->server, 0);
  vb_nbd_server_free (t->server);
  g_cond_clear (&t->disk.cond);
  g_mutex_clear (&t->disk.lock);
  mem_disk_free (t->disk.mem);
}

/* Returns once a read is blocked at the gate, i.e. running on the server. */
static void
gate_wait_blocked (GatedDisk *g)
{
  gint64 deadline = g_get_monotonic_time () + GATE_TIMEOUT_S * G_TIME_SPAN_SECOND;

  g_mutex_lock (&g->lock);
  while (g->n_waiting == 0 && g_cond_wait_until (&g->cond, &g->lock, deadline))
    ;
  g_assert_cmpuint (g->n_waiting, ==, 1);
  g_mutex_unlock (&g->lock);
}

static void
gate_open (GatedDisk *g)
{
  VbEngineIo *io;

  g_mutex_lock (&g->lock);
  g->open = TRUE;
  g_cond_broadcast (&g->cond);
  if ((io = g_steal_pointer (&g->held_io)) != NULL)
    {
      g->n_waiting--;
      mem_pread (g->mem, io->buf, io->length, io->offset);
      vb_ring_post (g->held_ring, &io->held, 0);
    }
  g_mutex_unlock (&g->lock);
}

static void
recv_read_data (Gated *t, guint64 offset)
{
  guint8 back[4096];

  recv_exact (t->fd, back, sizeof back);
  g_assert_cmpmem (back, sizeof back, t->disk.mem->data + offset, sizeof back);
}

/* A read that the device holds up does not hold up the next one: it is
 * answered first, and the held one after. */
static void
test_out_of_order (Gated *t, gconstpointer data)
{
  guint32 error;

  send_request (t->fd, 0 /* READ */, 1, GATE_OFFSET, 4096);
  gate_wait_blocked (&t->disk);
  send_request (t->fd, 0 /* READ */, 2, 0, 4096);
  g_assert_cmpuint (recv_any_simple_reply (t->fd, &error), ==, 2);
  g_assert_cmpuint (error, ==, 0);
  recv_read_data (t, 0);

  gate_open (&t->disk);
  g_assert_cmpuint (recv_any_simple_reply (t->fd, &error), ==, 1);
  g_assert_cmpuint (error, ==, 0);
  recv_read_data (t, GATE_OFFSET);
}

/* A flush waits for every request received before it, even though later
 * requests run meanwhile. */
static void
test_flush_waits (Gated *t, gconstpointer data)
{
  guint32 error;

  send_request (t->fd, 0 /* READ */, 1, GATE_OFFSET, 4096);
  gate_wait_blocked (&t->disk);
  send_request (t->fd, 3 /* FLUSH */, 2, 0, 0);
  send_request (t->fd, 0 /* READ */, 3, 0, 4096);
  g_assert_cmpuint (recv_any_simple_reply (t->fd, &error), ==, 3);
  recv_read_data (t, 0);
  g_mutex_lock (&t->disk.lock);
  g_assert_cmpuint (t->disk.n_flushes, ==, 0);
  g_mutex_unlock (&t->disk.lock);

  gate_open (&t->disk);
  g_assert_cmpuint (recv_any_simple_reply (t->fd, &error), ==, 1);
  recv_read_data (t, GATE_OFFSET);
  g_assert_cmpuint (recv_any_simple_reply (t->fd, &error), ==, 2);
  g_assert_cmpuint (error, ==, 0);
  g_assert_cmpuint (t->disk.n_flushes, ==, 1);
  g_assert_cmpuint (t->disk.waiting_at_flush, ==, 0);
}

/* NBD_CMD_DISC closes only once the requests before it are answered. */
static void
test_disc_waits (Gated *t, gconstpointer data)
{
  struct pollfd p = { .fd = t->fd, .events = POLLIN };
  guint32 error;
  char c;

  send_request (t->fd, 0 /* READ */, 1, GATE_OFFSET, 4096);
  gate_wait_blocked (&t->disk);
  send_request (t->fd, 2 /* DISC */, 2, 0, 0);
  /* Neither a reply nor the end of the stream while the read is held. */
  g_assert_cmpint (poll (&p, 1, 100), ==, 0);

  gate_open (&t->disk);
  g_assert_cmpuint (recv_any_simple_reply (t->fd, &error), ==, 1);
  g_assert_cmpuint (error, ==, 0);
  recv_read_data (t, GATE_OFFSET);
  g_assert_cmpint (recv (t->fd, &c, 1, 0), ==, 0);
}

/* An export whose write-zeroes says it cannot: the server writes zeroes
 * through the same path, and nothing beyond the range changes. */
static void
test_zeroes_by_writing (Gated *t, gconstpointer data)
{
  const guint8 *d = t->disk.mem->data;

  send_request (t->fd, 6 /* WRITE_ZEROES */, 1, 8192, 4096);
  g_assert_cmpuint (recv_simple_reply (t->fd, 1), ==, 0);
  for (guint i = 8192 - 512; i < 8192 + 4096 + 512; i++)
    g_assert_cmpuint (d[i], ==, i >= 8192 && i < 8192 + 4096 ? 0 : (guint8) (i * 13));
}

static void
test_cap_and_free (void)
{
  MemDisk *d = mem_disk_new (4096);
  g_autoptr (GError) error = NULL;
  VbNbdServer *server = vb_nbd_server_new ("", "mem", &mem_ops, d, &error);
  int clients[VB_NBD_MAX_CONNECTIONS];
  int sv[2];
  char c;

  g_assert_no_error (error);
  for (guint i = 0; i < VB_NBD_MAX_CONNECTIONS; i++)
    {
      g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
      g_assert_true (vb_nbd_server_serve_fd (server, sv[1], VB_NBD_SERVE_DEFAULT, &error));
      clients[i] = sv[0];
    }
  g_assert_cmpuint (vb_nbd_server_n_connections (server), ==, VB_NBD_MAX_CONNECTIONS);

  /* One more is refused, and its fd closed (the peer sees EOF). */
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  g_assert_false (vb_nbd_server_serve_fd (server, sv[1], VB_NBD_SERVE_DEFAULT, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_BUSY);
  g_clear_error (&error);
  g_assert_cmpint (recv (sv[0], &c, 1, 0), ==, 0);
  close (sv[0]);

  /* Freeing with every connection open (in the handshake, waiting for the
   * client flags) shuts them down and joins their threads. */
  for (guint i = 0; i < VB_NBD_MAX_CONNECTIONS; i++)
    {
      guint8 greeting[18];
      recv_exact (clients[i], greeting, sizeof greeting);
      g_assert_cmpmem (greeting, 8, "NBDMAGIC", 8);
    }
  vb_nbd_server_free (server);
  for (guint i = 0; i < VB_NBD_MAX_CONNECTIONS; i++)
    {
      g_assert_cmpint (recv (clients[i], &c, 1, 0), ==, 0);
      close (clients[i]);
    }
  mem_disk_free (d);
}

/* ---- block status: a disk that says [HOLE_FROM, HOLE_TO) is a hole, in
 * runs of at most 4 KiB, so that the server has to merge them ---- */

#define HOLE_FROM (64u << 10)
#define HOLE_TO (192u << 10)

static int
mem_extents (void *handle, guint64 offset, guint64 length, guint64 *run, guint32 *flags)
{
  gboolean hole = offset >= HOLE_FROM && offset < HOLE_TO;
  guint64 edge = offset < HOLE_FROM ? HOLE_FROM : offset < HOLE_TO ? HOLE_TO : DISK_SIZE;

  *flags = hole ? VB_EXTENT_HOLE | VB_EXTENT_ZERO : 0;
  *run = MIN (MIN (length, edge - offset), 4096u);
  return 0;
}

static const VbBlockOps mem_extent_ops = {
  .size = mem_size,
  .block_size = mem_block_size,
  .pread = mem_pread,
  .pwrite = mem_pwrite,
  .extents = mem_extents,
};

static void
send_option (int fd, guint32 option, const void *data, guint32 len)
{
  guint8 h[16];

  memcpy (h, "IHAVEOPT", 8);
  option = GUINT32_TO_BE (option);
  memcpy (h + 8, &option, 4);
  len = GUINT32_TO_BE (len);
  memcpy (h + 12, &len, 4);
  g_assert_cmpint (send (fd, h, sizeof h, MSG_NOSIGNAL), ==, sizeof h);
  len = GUINT32_FROM_BE (len);
  if (len > 0)
    g_assert_cmpint (send (fd, data, len, MSG_NOSIGNAL), ==, len);
}

/* The type of the next option reply to @option; its data into @data (at
 * most 256 bytes), its length into *@len. */
static guint32
recv_option_reply (int fd, guint32 option, guint8 *data, guint32 *len)
{
  guint8 h[20];
  guint32 v;

  recv_exact (fd, h, sizeof h);
  g_assert_cmpmem (h, 8, "\x00\x03\xe8\x89\x04\x55\x65\xa9", 8);
  memcpy (&v, h + 8, 4);
  g_assert_cmpuint (GUINT32_FROM_BE (v), ==, option);
  memcpy (len, h + 16, 4);
  *len = GUINT32_FROM_BE (*len);
  g_assert_cmpuint (*len, <=, 256);
  if (*len > 0)
    recv_exact (fd, data, *len);
  memcpy (&v, h + 12, 4);
  return GUINT32_FROM_BE (v);
}

/* A meta context option's data: export @name, then @n queries. */
static GByteArray *
meta_query (const char *name, guint n, const char *const *queries)
{
  GByteArray *b = g_byte_array_new ();
  guint32 v = GUINT32_TO_BE (strlen (name));

  g_byte_array_append (b, (guint8 *) &v, 4);
  g_byte_array_append (b, (const guint8 *) name, strlen (name));
  v = GUINT32_TO_BE (n);
  g_byte_array_append (b, (guint8 *) &v, 4);
  for (guint i = 0; i < n; i++)
    {
      v = GUINT32_TO_BE (strlen (queries[i]));
      g_byte_array_append (b, (guint8 *) &v, 4);
      g_byte_array_append (b, (const guint8 *) queries[i], strlen (queries[i]));
    }
  return b;
}

/* Sends a meta context option; returns its replies' types and, of a
 * META_CONTEXT reply, the context ID in *@id. */
static guint32
meta_option (int fd, guint32 option, const char *name, guint n, const char *const *queries,
             guint32 *id)
{
  g_autoptr (GByteArray) b = meta_query (name, n, queries);
  guint8 data[256];
  guint32 len, type;

  send_option (fd, option, b->data, b->len);
  type = recv_option_reply (fd, option, data, &len);
  if (type != 4 /* META_CONTEXT */)
    return type;
  g_assert_cmpuint (len, ==, 4 + strlen ("base:allocation"));
  g_assert_cmpmem (data + 4, len - 4, "base:allocation", len - 4);
  memcpy (id, data, 4);
  *id = GUINT32_FROM_BE (*id);
  g_assert_cmpuint (recv_option_reply (fd, option, data, &len), ==, 1 /* ACK */);
  return 4;
}

/* A connection through the handshake to the point of options. */
static int
connect_options (VbNbdServer *server)
{
  g_autoptr (GError) error = NULL;
  struct timeval tv = { .tv_sec = 10 };
  guint8 greeting[18];
  guint32 flags = GUINT32_TO_BE (3); /* fixed newstyle, no zeroes */
  int sv[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  g_assert_cmpint (setsockopt (sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), ==, 0);
  g_assert_true (vb_nbd_server_serve_fd (server, sv[1], VB_NBD_SERVE_DEFAULT, &error));
  g_assert_no_error (error);
  recv_exact (sv[0], greeting, sizeof greeting);
  g_assert_cmpint (send (sv[0], &flags, 4, MSG_NOSIGNAL), ==, 4);
  return sv[0];
}

static void
go (int fd)
{
  guint8 data[] = { 0, 0, 0, 3, 'm', 'e', 'm', 0, 0 }, reply[256];
  guint32 len, type;

  send_option (fd, 7 /* GO */, data, sizeof data);
  while ((type = recv_option_reply (fd, 7, reply, &len)) == 3 /* INFO */)
    ;
  g_assert_cmpuint (type, ==, 1 /* ACK */);
}

/* A structured reply to @cookie: its type and payload (into @payload, at
 * most 4096 bytes; its length in *@len). */
static guint16
recv_chunk (int fd, guint64 cookie, guint8 *payload, guint32 *len)
{
  guint8 h[20];
  guint32 magic;
  guint16 flags, type;

  recv_exact (fd, h, sizeof h);
  memcpy (&magic, h, 4);
  g_assert_cmphex (GUINT32_FROM_BE (magic), ==, 0x668e33ef);
  memcpy (&flags, h + 4, 2);
  g_assert_cmphex (GUINT16_FROM_BE (flags), ==, 1 /* DONE */);
  memcpy (&type, h + 6, 2);
  g_assert_cmpmem (h + 8, 8, &cookie, 8);
  memcpy (len, h + 16, 4);
  *len = GUINT32_FROM_BE (*len);
  g_assert_cmpuint (*len, <=, 4096);
  recv_exact (fd, payload, *len);
  return GUINT16_FROM_BE (type);
}

static guint32
be32_at (const guint8 *p)
{
  guint32 v;

  memcpy (&v, p, 4);
  return GUINT32_FROM_BE (v);
}

/* base:allocation negotiated as the spec says (structured replies first,
 * the export's name, queries well formed), then NBD_CMD_BLOCK_STATUS:
 * the export's runs merged into one descriptor per status, REQ_ONE giving
 * one, a range past the end refused, and no block status on a connection
 * that did not select the context. */
static void
test_block_status (void)
{
  MemDisk *d = mem_disk_new (512);
  g_autoptr (GError) error = NULL;
  VbNbdServer *server = vb_nbd_server_new ("mem", NULL, &mem_extent_ops, d, &error);
  const char *const allocation[] = { "base:allocation" };
  const char *const base[] = { "base:" };
  const char *const other[] = { "qemu:dirty-bitmap:x" };
  guint8 data[4096];
  guint32 len, id = 99;
  int fd;

  g_assert_no_error (error);
  fd = connect_options (server);
  /* before structured replies: refused */
  g_assert_cmphex (meta_option (fd, 10, "mem", 1, allocation, &id), ==, 0x80000003);
  send_option (fd, 8 /* STRUCTURED_REPLY */, NULL, 0);
  g_assert_cmpuint (recv_option_reply (fd, 8, data, &len), ==, 1);
  /* a list: everything without a query, by namespace, nothing of others */
  g_assert_cmpuint (meta_option (fd, 9, "mem", 0, NULL, &id), ==, 4);
  g_assert_cmpuint (id, ==, 0);
  g_assert_cmpuint (meta_option (fd, 9, "mem", 1, base, &id), ==, 4);
  g_assert_cmpuint (meta_option (fd, 9, "", 1, other, &id), ==, 1);
  /* refusals: another export, a query longer than the option */
  g_assert_cmphex (meta_option (fd, 10, "disk", 1, allocation, &id), ==, 0x80000006);
  {
    g_autoptr (GByteArray) b = meta_query ("mem", 1, allocation);
    b->data[b->len - 16] = 0x7f; /* the query's length, far too long */
    send_option (fd, 10, b->data, b->len);
    g_assert_cmphex (recv_option_reply (fd, 10, data, &len), ==, 0x80000003);
  }
  g_assert_cmpuint (meta_option (fd, 10, "mem", 1, allocation, &id), ==, 4);
  g_assert_cmpuint (id, ==, 1);
  go (fd);

  send_request (fd, 7, 21, 0, DISK_SIZE);
  g_assert_cmpuint (recv_chunk (fd, 21, data, &len), ==, 5 /* BLOCK_STATUS */);
  g_assert_cmpuint (len, ==, 4 + 3 * 8);
  g_assert_cmpuint (be32_at (data), ==, 1);
  g_assert_cmpuint (be32_at (data + 4), ==, HOLE_FROM);
  g_assert_cmpuint (be32_at (data + 8), ==, 0);
  g_assert_cmpuint (be32_at (data + 12), ==, HOLE_TO - HOLE_FROM);
  g_assert_cmpuint (be32_at (data + 16), ==, VB_EXTENT_HOLE | VB_EXTENT_ZERO);
  g_assert_cmpuint (be32_at (data + 20), ==, DISK_SIZE - HOLE_TO);
  g_assert_cmpuint (be32_at (data + 24), ==, 0);

  /* REQ_ONE (flags 1 << 3): one descriptor, from the offset asked */
  send_request_flags (fd, 1u << 3, 7, 22, HOLE_FROM + 4096, DISK_SIZE - HOLE_FROM - 4096);
  g_assert_cmpuint (recv_chunk (fd, 22, data, &len), ==, 5);
  g_assert_cmpuint (len, ==, 4 + 8);
  g_assert_cmpuint (be32_at (data + 4), ==, HOLE_TO - HOLE_FROM - 4096);
  g_assert_cmpuint (be32_at (data + 8), ==, VB_EXTENT_HOLE | VB_EXTENT_ZERO);

  /* past the end, and no bytes at all: EINVAL */
  send_request (fd, 7, 23, DISK_SIZE - 512, 1024);
  g_assert_cmpuint (recv_chunk (fd, 23, data, &len), ==, 0x8001 /* ERROR */);
  g_assert_cmpuint (be32_at (data), ==, EINVAL);
  send_request (fd, 7, 24, 0, 0);
  g_assert_cmpuint (recv_chunk (fd, 24, data, &len), ==, 0x8001);
  close (fd);

  /* a connection whose last set selected nothing (another namespace), or
   * failed (another export: a set replaces what was set even then): no
   * block status */
  for (guint i = 0; i < 2; i++)
    {
      fd = connect_options (server);
      send_option (fd, 8, NULL, 0);
      g_assert_cmpuint (recv_option_reply (fd, 8, data, &len), ==, 1);
      g_assert_cmpuint (meta_option (fd, 10, "mem", 1, allocation, &id), ==, 4);
      if (i == 0)
        g_assert_cmpuint (meta_option (fd, 10, "mem", 1, other, &id), ==, 1);
      else
        g_assert_cmphex (meta_option (fd, 10, "disk", 1, allocation, &id), ==, 0x80000006);
      go (fd);
      send_request (fd, 7, 25, 0, 4096);
      g_assert_cmpuint (recv_chunk (fd, 25, data, &len), ==, 0x8001);
      g_assert_cmpuint (be32_at (data), ==, EINVAL);
      close (fd);
    }
  wait_for_connections (server, 0);
  vb_nbd_server_free (server);
  mem_disk_free (d);
}

static void
test_refused_arguments (void)
{
  MemDisk *d = mem_disk_new (3);
  g_autoptr (GError) error = NULL;
  g_autofree char *long_name = g_strnfill (4097, 'x');
  VbNbdServer *server;

  g_assert_null (vb_nbd_server_new ("x", NULL, &mem_ops, d, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  d->block_size = 128 << 10;
  g_assert_null (vb_nbd_server_new ("x", NULL, &mem_ops, d, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  d->block_size = 512;
  g_assert_null (vb_nbd_server_new (long_name, NULL, &mem_ops, d, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  server = vb_nbd_server_new ("x", NULL, &mem_ops, d, &error);
  g_assert_no_error (error);
  for (const char *const *a = (const char *const[]){ "x", "unix:", "tcp:127.0.0.1",
                                                     "tcp:1.2.3.4:port", "nbd://host", NULL };
       *a; a++)
    {
      g_assert_false (vb_nbd_server_listen (server, *a, NULL, &error));
      g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
    }
  g_assert_cmpuint (vb_nbd_server_n_connections (server), ==, 0);
  vb_nbd_server_free (server);
  mem_disk_free (d);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nbd-server/no-handshake", test_no_handshake);
  g_test_add ("/nbd-server/out-of-order", Gated, NULL, gated_setup, test_out_of_order,
              gated_teardown);
  g_test_add ("/nbd-server/flush-waits-for-earlier", Gated, NULL, gated_setup, test_flush_waits,
              gated_teardown);
  g_test_add ("/nbd-server/disc-waits-for-replies", Gated, NULL, gated_setup, test_disc_waits,
              gated_teardown);
  g_test_add ("/nbd-server/async/out-of-order", Gated, GINT_TO_POINTER (1), gated_setup,
              test_out_of_order, gated_teardown);
  g_test_add ("/nbd-server/async/flush-waits-for-earlier", Gated, GINT_TO_POINTER (1), gated_setup,
              test_flush_waits, gated_teardown);
  g_test_add ("/nbd-server/async/disc-waits-for-replies", Gated, GINT_TO_POINTER (1), gated_setup,
              test_disc_waits, gated_teardown);
  g_test_add ("/nbd-server/async/write-zeroes-by-writing", Gated, GINT_TO_POINTER (1), gated_setup,
              test_zeroes_by_writing, gated_teardown);
  g_test_add_func ("/nbd-server/more-requests-than-slots", test_more_than_slots);
  g_test_add_func ("/nbd-server/client-gone-mid-write", test_cut_write);
  g_test_add_func ("/nbd-server/cap-and-free", test_cap_and_free);
  g_test_add_func ("/nbd-server/refused-arguments", test_refused_arguments);
  g_test_add_func ("/nbd-server/block-status", test_block_status);
  return g_test_run ();
}
