/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Serves one regular file over NBD through the engine's NBD server library,
 * so that the server can be tested with real clients (nbdinfo, qemu-img,
 * fio) without a daemon, root or an engine device. With --kernel N it hands
 * N socketpairs to the kernel nbd client over generic netlink instead (the
 * half of backend nbd that talks to the kernel; root, module nbd) and prints
 * the /dev/nbdX it got. */
#include "config.h"

#include "nbd-server.h"
#include "nbd-netlink.h"

#include <linux/nbd.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  int fd;
  guint64 size;
  guint32 block_size;
  gboolean read_only;
} VbFileExport;

static guint64
file_size (void *handle)
{
  return ((VbFileExport *) handle)->size;
}

static guint32
file_block_size (void *handle)
{
  return ((VbFileExport *) handle)->block_size;
}

static gboolean
file_read_only (void *handle)
{
  return ((VbFileExport *) handle)->read_only;
}

/* One fd and the page cache behind it are shared by every connection. */
static gboolean
file_can_multi_conn (void *handle)
{
  return TRUE;
}

static int
file_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  VbFileExport *f = handle;
  guint8 *p = buf;

  while (length > 0)
    {
      ssize_t r = pread (f->fd, p, length, offset);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return -errno;
      if (r == 0) /* the file shrank under us */
        return -EIO;
      p += r;
      length -= r;
      offset += r;
    }
  return 0;
}

static int
file_flush (void *handle)
{
  return fdatasync (((VbFileExport *) handle)->fd) < 0 ? -errno : 0;
}

static int
file_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  VbFileExport *f = handle;
  const guint8 *p = buf;

  while (length > 0)
    {
      ssize_t r = pwrite (f->fd, p, length, offset);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return -errno;
      p += r;
      length -= r;
      offset += r;
    }
  return fua ? file_flush (handle) : 0;
}

static int
file_discard (void *handle, guint64 length, guint64 offset)
{
  VbFileExport *f = handle;

  return fallocate (f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) < 0 ? -errno
                                                                                           : 0;
}

/* -EOPNOTSUPP (e.g. tmpfs) makes the server write zeroes itself. */
static int
file_write_zeroes (void *handle, guint64 length, guint64 offset, gboolean fua)
{
  VbFileExport *f = handle;

  if (fallocate (f->fd, FALLOC_FL_ZERO_RANGE, offset, length) < 0)
    return -errno;
  return fua ? file_flush (handle) : 0;
}

/* Holes of the file by SEEK_DATA/SEEK_HOLE (a file system without them
 * says all data, which is never wrong). */
static int
file_extents (void *handle, guint64 offset, guint64 length, guint64 *run, guint32 *flags)
{
  VbFileExport *f = handle;
  off_t d = lseek (f->fd, offset, SEEK_DATA);
  off_t h;

  *flags = 0;
  *run = length;
  if (d < 0 && errno == ENXIO)
    *flags = VB_EXTENT_HOLE | VB_EXTENT_ZERO; /* no data up to the end */
  else if (d > (off_t) offset)
    {
      *flags = VB_EXTENT_HOLE | VB_EXTENT_ZERO;
      *run = MIN (length, (guint64) d - offset);
    }
  else if (d == (off_t) offset && (h = lseek (f->fd, offset, SEEK_HOLE)) > d)
    *run = MIN (length, (guint64) h - offset);
  return 0;
}

static const VbBlockOps file_ops = {
  .size = file_size,
  .block_size = file_block_size,
  .read_only = file_read_only,
  .can_multi_conn = file_can_multi_conn,
  .pread = file_pread,
  .pwrite = file_pwrite,
  .flush = file_flush,
  .discard = file_discard,
  .write_zeroes = file_write_zeroes,
  .extents = file_extents,
};

int
main (int argc, char **argv)
{
  g_autofree char *socket_path = NULL;
  g_autofree char *export_name = NULL;
  g_autofree char *description = NULL;
  g_autofree char *address = NULL;
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  VbNbdServer *server;
  VbFileExport f = { .fd = -1, .block_size = 512 };
  int tcp_port = 0, block_size = 512, sig, kernel = 0, disconnect = -1;
  gint index = -1;
  gboolean read_only = FALSE;
  struct stat st;
  sigset_t mask;
  const GOptionEntry entries[] = {
    { "socket", 0, 0, G_OPTION_ARG_FILENAME, &socket_path, "Listen on a unix socket", "PATH" },
    { "tcp", 0, 0, G_OPTION_ARG_INT, &tcp_port, "Listen on 127.0.0.1:PORT", "PORT" },
    { "block-size", 0, 0, G_OPTION_ARG_INT, &block_size, "Minimum block size (512)", "N" },
    { "read-only", 0, 0, G_OPTION_ARG_NONE, &read_only, "Refuse writes", NULL },
    { "export", 0, 0, G_OPTION_ARG_STRING, &export_name, "Export name (\"\")", "NAME" },
    { "description", 0, 0, G_OPTION_ARG_STRING, &description, "Export description", "TEXT" },
    { "kernel", 0, 0, G_OPTION_ARG_INT, &kernel, "Connect the kernel nbd client with N sockets",
      "N" },
    { "disconnect", 0, 0, G_OPTION_ARG_INT, &disconnect,
      "Only disconnect /dev/nbdN (a test's cleanup) and exit", "N" },
    { NULL },
  };

  context = g_option_context_new ("FILE - serve FILE over NBD");
  g_option_context_add_main_entries (context, entries, NULL);
  gboolean parsed = g_option_context_parse (context, &argc, &argv, &error);
  if (parsed && disconnect >= 0 && argc == 1)
    {
      if (!vb_nbd_netlink_disconnect (disconnect, &error))
        {
          g_printerr ("/dev/nbd%d: %s\n", disconnect, error->message);
          return 1;
        }
      return 0;
    }
  if (!parsed || argc != 2 || (socket_path != NULL) + (tcp_port != 0) + (kernel > 0) != 1
      || block_size <= 0 || tcp_port < 0 || kernel < 0 || kernel > 16 || tcp_port > 65535)
    {
      g_printerr ("%s\n",
                  error ? error->message : "usage: FILE and one of --socket, --tcp or --kernel");
      return 2;
    }

  f.fd = open (argv[1], (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (f.fd < 0 || fstat (f.fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      g_printerr ("%s: cannot use as a regular file: %s\n", argv[1], g_strerror (errno));
      return 1;
    }
  f.block_size = block_size;
  f.size = st.st_size - st.st_size % block_size;
  f.read_only = read_only;

  /* Blocked before any thread exists, so every thread inherits the mask
   * and only sigwait() below ever sees these signals. */
  sigemptyset (&mask);
  sigaddset (&mask, SIGTERM);
  sigaddset (&mask, SIGINT);
  pthread_sigmask (SIG_BLOCK, &mask, NULL);
  signal (SIGPIPE, SIG_IGN);
  /* The file is served through blocking calls, which the library runs on
   * GLib's shared thread pool: none is kept idle, so that once every
   * client is gone only the server's own threads are left (the tests
   * count them). */
  g_thread_pool_set_max_unused_threads (0);

  server = vb_nbd_server_new (export_name ? export_name : "", description, &file_ops, &f, &error);
  if (server && kernel > 0)
    {
      int kernel_fds[16];
      VbNbdConnect c = {
        .index = -1,
        .size = f.size,
        .block_size = (guint64) block_size,
        .server_flags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA
                        | NBD_FLAG_SEND_TRIM | (read_only ? NBD_FLAG_READ_ONLY : 0)
                        | (kernel > 1 ? NBD_FLAG_CAN_MULTI_CONN : 0),
        .dead_conn_timeout_s = 30,
        .backend_id = "vb-nbd-file-server",
        .fds = kernel_fds,
        .n_fds = (guint) kernel,
      };
      for (int i = 0; i < kernel && server; i++)
        {
          int pair[2];
          if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
            g_error ("socketpair: %s", g_strerror (errno));
          kernel_fds[i] = pair[0];
          if (!vb_nbd_server_serve_fd (server, pair[1], VB_NBD_SERVE_NO_HANDSHAKE, &error))
            g_clear_pointer (&server, vb_nbd_server_free);
        }
      if (server && (index = vb_nbd_netlink_connect (&c, &error)) < 0)
        g_clear_pointer (&server, vb_nbd_server_free);
      for (int i = 0; i < kernel; i++)
        close (kernel_fds[i]); /* the kernel holds its own references */
      if (server)
        printf ("/dev/nbd%d\n", index);
    }
  else if (server)
    {
      address = socket_path ? g_strconcat ("unix:", socket_path, NULL)
                            : g_strdup_printf ("tcp:127.0.0.1:%d", tcp_port);
      if (!vb_nbd_server_listen (server, address, NULL, &error))
        g_clear_pointer (&server, vb_nbd_server_free);
      else
        printf ("ready\n");
    }
  if (server == NULL)
    {
      g_printerr ("%s\n", error->message);
      return 1;
    }
  fflush (stdout);

  while (sigwait (&mask, &sig) != 0)
    ;
  if (index >= 0 && !vb_nbd_netlink_disconnect (index, &error))
    g_printerr ("%s\n", error->message);
  vb_nbd_server_free (server);
  close (f.fd);
  return 0;
}
