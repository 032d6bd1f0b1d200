/* The NBD server library without a client program: connections handed over
 * with vb_nbd_server_serve_fd (as the kernel nbd backend will), the
 * connection cap, shutdown with connections open, and refused arguments. */
#include "config.h"

#include "engine/nbd-server.h"
#include "vb-error.h"

#include <errno.h>
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
send_request (int fd, guint16 type, guint64 cookie, guint64 offset, guint32 length)
{
  guint8 h[28];
  guint32 magic = GUINT32_TO_BE (0x25609513), len = GUINT32_TO_BE (length);
  guint16 flags = 0, t = GUINT16_TO_BE (type);
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
      g_assert_false (vb_nbd_server_listen (server, *a, &error));
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
  g_test_add_func ("/nbd-server/cap-and-free", test_cap_and_free);
  g_test_add_func ("/nbd-server/refused-arguments", test_refused_arguments);
  return g_test_run ();
}
