/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* NBD server: listening sockets, one accept thread per socket and one
 * thread per connection, each running the protocol of nbd-conn.c on a ring
 * of its own. Accepting blocks its thread; nothing here touches a
 * GMainContext. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "nbd-conn.h"
#include "nbd-server.h"
#include "vb-error.h"

#include <errno.h>
#include <gio/gio.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* The longest export name or description the protocol allows. */
#define VB_NBD_MAX_STRING 4096u
#define VB_NBD_ACCEPT_BACKOFF_US (100 * 1000)

typedef struct {
  VbNbdServer *server;
  int fd;
  VbNbdTls *tls; /* NULL: plaintext only */
  GThread *thread;
  char *unix_path; /* unlinked at free when still the socket we bound */
  dev_t dev;
  ino_t ino;
} VbNbdListener;

typedef struct {
  VbNbdServer *server;
  int fd; /* closed, and set to -1, under server->lock */
  GThread *thread;
  gboolean done; /* under server->lock: the thread has finished */
  VbNbdServeFlags flags;
  VbNbdTls *tls; /* the listener's */
} VbNbdConnThread;

struct _VbNbdServer {
  VbNbdExport export;
  int stop_fd; /* eventfd, readable once the server stops */
  GMutex lock;
  gboolean stopping;
  GPtrArray *listeners;
  GPtrArray *conns; /* every connection thread not yet joined */
  guint n_active;
};

static gpointer
conn_main (gpointer data)
{
  VbNbdConnThread *c = data;
  VbNbdServer *s = c->server;
  int one = 1, r;

  /* Fails harmlessly on a unix socket. */
  setsockopt (c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  r = vb_nbd_conn_run (&s->export, c->tls, c->fd, !(c->flags & VB_NBD_SERVE_NO_HANDSHAKE));
  if (r < 0)
    g_debug ("nbd: %s: connection closed: %s", s->export.name, g_strerror (-r));

  g_mutex_lock (&s->lock);
  close (c->fd);
  c->fd = -1;
  c->done = TRUE;
  s->n_active--;
  g_mutex_unlock (&s->lock);
  return NULL;
}

static void
conn_thread_free (VbNbdConnThread *c)
{
  g_clear_pointer (&c->tls, vb_nbd_tls_unref);
  g_free (c);
}

static void
reap_locked (VbNbdServer *s)
{
  for (guint i = 0; i < s->conns->len;)
    {
      VbNbdConnThread *c = g_ptr_array_index (s->conns, i);
      if (!c->done)
        {
          i++;
          continue;
        }
      /* done is set under the lock, after which the thread only returns. */
      g_thread_join (c->thread);
      conn_thread_free (c);
      g_ptr_array_remove_index_fast (s->conns, i);
    }
}

static gboolean
serve_fd (VbNbdServer *server, int fd, VbNbdServeFlags flags, VbNbdTls *tls, GError **error)
{
  g_autoptr (GError) local = NULL;
  VbNbdConnThread *c;

  g_mutex_lock (&server->lock);
  if (server->stopping || server->n_active >= VB_NBD_MAX_CONNECTIONS)
    {
      gboolean stopping = server->stopping;
      g_mutex_unlock (&server->lock);
      close (fd);
      if (stopping)
        g_set_error (error, VB_ERROR, VB_ERROR_BUSY, _ ("NBD export %s is stopping"),
                     server->export.name);
      else
        g_set_error (error, VB_ERROR, VB_ERROR_BUSY, _ ("NBD export %s already has %u connections"),
                     server->export.name, VB_NBD_MAX_CONNECTIONS);
      return FALSE;
    }
  reap_locked (server);
  c = g_new0 (VbNbdConnThread, 1);
  c->server = server;
  c->fd = fd;
  c->flags = flags;
  c->tls = tls ? vb_nbd_tls_ref (tls) : NULL;
  c->thread = g_thread_try_new ("vb-nbd-conn", conn_main, c, &local);
  if (c->thread == NULL)
    {
      g_mutex_unlock (&server->lock);
      close (fd);
      conn_thread_free (c);
      g_propagate_prefixed_error (error, g_steal_pointer (&local), _ ("NBD export %s: "),
                                  server->export.name);
      return FALSE;
    }
  server->n_active++;
  g_ptr_array_add (server->conns, c);
  g_mutex_unlock (&server->lock);
  return TRUE;
}

gboolean
vb_nbd_server_serve_fd (VbNbdServer *server, int fd, VbNbdServeFlags flags, GError **error)
{
  g_return_val_if_fail (server != NULL, FALSE);
  g_return_val_if_fail (fd >= 0, FALSE);

  return serve_fd (server, fd, flags, NULL, error);
}

/* ---- listening ---- */

static gpointer
accept_main (gpointer data)
{
  VbNbdListener *l = data;
  VbNbdServer *s = l->server;
  struct pollfd p[2]
      = { { .fd = l->fd, .events = POLLIN }, { .fd = s->stop_fd, .events = POLLIN } };

  for (;;)
    {
      int fd;

      if (poll (p, G_N_ELEMENTS (p), -1) < 0)
        {
          if (errno != EINTR)
            g_usleep (VB_NBD_ACCEPT_BACKOFF_US);
          continue;
        }
      if (p[1].revents)
        return NULL;
      if (!p[0].revents)
        continue;
      fd = accept4 (l->fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0)
        {
          /* EMFILE and the like leave the connection queued and poll would
           * wake at once: back off rather than spin. */
          if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
            g_usleep (VB_NBD_ACCEPT_BACKOFF_US);
          continue;
        }
      serve_fd (s, fd, VB_NBD_SERVE_DEFAULT, l->tls, NULL);
    }
}

static void
listener_free (VbNbdListener *l)
{
  g_clear_pointer (&l->tls, vb_nbd_tls_unref);
  g_free (l->unix_path);
  g_free (l);
}

static gboolean
add_listener (VbNbdServer *s, int fd, const char *unix_path, VbNbdTls *tls, GError **error)
{
  VbNbdListener *l = g_new0 (VbNbdListener, 1);
  g_autoptr (GError) local = NULL;
  struct stat st;

  l->server = s;
  l->fd = fd;
  l->tls = tls ? vb_nbd_tls_ref (tls) : NULL;
  if (unix_path && stat (unix_path, &st) == 0)
    {
      l->unix_path = g_strdup (unix_path);
      l->dev = st.st_dev;
      l->ino = st.st_ino;
    }
  g_mutex_lock (&s->lock);
  if (!s->stopping)
    l->thread = g_thread_try_new ("vb-nbd-accept", accept_main, l, &local);
  if (l->thread)
    g_ptr_array_add (s->listeners, l);
  g_mutex_unlock (&s->lock);
  if (l->thread)
    return TRUE;
  if (l->unix_path)
    unlink (l->unix_path);
  close (fd);
  listener_free (l);
  if (local)
    g_propagate_error (error, g_steal_pointer (&local));
  else
    g_set_error (error, VB_ERROR, VB_ERROR_BUSY, _ ("NBD export %s is stopping"), s->export.name);
  return FALSE;
}

static gboolean
set_errno_error (GError **error, int errsv, const char *what, const char *address)
{
  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "%s %s: %s", what, address,
               g_strerror (errsv));
  return FALSE;
}

/* A socket file nobody accepts on (left by a killed server) may be
 * replaced; a live one may not. */
static gboolean
unix_socket_is_stale (const struct sockaddr_un *sa)
{
  struct stat st;
  int fd, r, errsv;

  if (lstat (sa->sun_path, &st) < 0 || !S_ISSOCK (st.st_mode))
    return FALSE;
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return FALSE;
  r = connect (fd, (const struct sockaddr *) sa, sizeof *sa);
  errsv = errno;
  close (fd);
  return r < 0 && errsv == ECONNREFUSED;
}

static gboolean
listen_unix (VbNbdServer *s, const char *path, VbNbdTls *tls, GError **error)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd, r;

  if (path[0] == '\0' || strlen (path) >= sizeof sa.sun_path)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("unix socket path '%s' is empty or longer than %zu bytes"), path,
                   sizeof sa.sun_path - 1);
      return FALSE;
    }
  strcpy (sa.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return set_errno_error (error, errno, "cannot create a socket for", path);
  r = bind (fd, (struct sockaddr *) &sa, sizeof sa);
  if (r < 0 && errno == EADDRINUSE && unix_socket_is_stale (&sa))
    {
      unlink (path);
      r = bind (fd, (struct sockaddr *) &sa, sizeof sa);
    }
  if (r < 0 || listen (fd, SOMAXCONN) < 0)
    {
      int errsv = errno;
      if (r == 0)
        unlink (path);
      close (fd);
      return set_errno_error (error, errsv, "cannot listen on", path);
    }
  return add_listener (s, fd, path, tls, error);
}

static gboolean
listen_tcp (VbNbdServer *s, const char *hostport, VbNbdTls *tls, GError **error)
{
  struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
  struct addrinfo *res = NULL;
  const char *colon = strrchr (hostport, ':');
  g_autofree char *host = NULL;
  const char *port;
  guint n_ok = 0;
  int gai, errsv = 0;

  if (colon == NULL || colon[1] == '\0' || strspn (colon + 1, "0123456789") != strlen (colon + 1))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("NBD address 'tcp:%s' is not tcp:HOST:PORT"), hostport);
      return FALSE;
    }
  port = colon + 1;
  host = g_strndup (hostport, colon - hostport);
  if (host[0] == '[' && host[strlen (host) - 1] == ']')
    {
      char *inner = g_strndup (host + 1, strlen (host) - 2);
      g_free (host);
      host = inner;
    }
  gai = getaddrinfo (host[0] ? host : NULL, port, &hints, &res);
  if (gai != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("NBD address 'tcp:%s': %s"),
                   hostport, gai_strerror (gai));
      return FALSE;
    }
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
    {
      int one = 1;
      int fd
          = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
      if (fd < 0)
        {
          errsv = errno;
          continue;
        }
      setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      /* Otherwise "::" would also take the IPv4 port that the
       * 0.0.0.0 entry of the same lookup binds next. */
      if (ai->ai_family == AF_INET6)
        setsockopt (fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
      if (bind (fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen (fd, SOMAXCONN) < 0)
        {
          errsv = errno;
          close (fd);
          continue;
        }
      if (!add_listener (s, fd, NULL, tls, error))
        {
          freeaddrinfo (res);
          return FALSE;
        }
      n_ok++;
    }
  freeaddrinfo (res);
  if (n_ok == 0)
    {
      g_autofree char *address = g_strconcat ("tcp:", hostport, NULL);
      return set_errno_error (error, errsv ? errsv : EADDRNOTAVAIL, "cannot listen on", address);
    }
  return TRUE;
}

gboolean
vb_nbd_server_listen (VbNbdServer *server, const char *address, VbNbdTls *tls, GError **error)
{
  g_return_val_if_fail (server != NULL, FALSE);
  g_return_val_if_fail (address != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (g_str_has_prefix (address, "unix:"))
    return listen_unix (server, address + strlen ("unix:"), tls, error);
  if (g_str_has_prefix (address, "tcp:"))
    return listen_tcp (server, address + strlen ("tcp:"), tls, error);
  g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
               _ ("NBD address '%s' is neither unix:PATH nor tcp:HOST:PORT"), address);
  return FALSE;
}

/* ---- life cycle ---- */

static gboolean
check_string (const char *what, const char *s, GError **error)
{
  if (strlen (s) > VB_NBD_MAX_STRING || !g_utf8_validate (s, -1, NULL))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("NBD %s must be UTF-8 of at most %u bytes"), what, VB_NBD_MAX_STRING);
      return FALSE;
    }
  return TRUE;
}

VbNbdServer *
vb_nbd_server_new (const char *export_name, const char *description, const VbBlockOps *ops,
                   void *handle, GError **error)
{
  VbNbdServer *s;
  guint32 bs;
  int stop_fd;

  g_return_val_if_fail (export_name != NULL, NULL);
  g_return_val_if_fail (ops != NULL && ops->size != NULL && ops->pread != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!check_string ("export name", export_name, error)
      || (description && !check_string ("export description", description, error)))
    return NULL;
  bs = ops->block_size ? ops->block_size (handle) : 512;
  /* The spec's bounds for a minimum block size. */
  if (bs == 0 || bs > 65536 || (bs & (bs - 1)) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("NBD export %s: block size %u is not a power of two up to 64 KiB"),
                   export_name, bs);
      return NULL;
    }
  stop_fd = eventfd (0, EFD_CLOEXEC);
  if (stop_fd < 0)
    {
      set_errno_error (error, errno, "cannot create an eventfd for NBD export", export_name);
      return NULL;
    }

  s = g_new0 (VbNbdServer, 1);
  s->export.name = g_strdup (export_name);
  s->export.description = description && description[0] ? g_strdup (description) : NULL;
  s->export.ops = ops;
  s->export.handle = handle;
  s->export.block_size = bs;
  s->stop_fd = stop_fd;
  g_mutex_init (&s->lock);
  s->listeners = g_ptr_array_new ();
  s->conns = g_ptr_array_new ();
  return s;
}

guint
vb_nbd_server_n_connections (VbNbdServer *server)
{
  guint n;

  g_return_val_if_fail (server != NULL, 0);
  g_mutex_lock (&server->lock);
  n = server->n_active;
  g_mutex_unlock (&server->lock);
  return n;
}

void
vb_nbd_server_free (VbNbdServer *server)
{
  guint64 one = 1;
  ssize_t written;

  if (server == NULL)
    return;

  g_mutex_lock (&server->lock);
  server->stopping = TRUE;
  g_mutex_unlock (&server->lock);

  /* No new connection after this: the accept threads are gone and
   * serve_fd refuses once stopping is set. */
  written = write (server->stop_fd, &one, sizeof one);
  g_assert (written == sizeof one); /* a blocking eventfd takes one increment */
  for (guint i = 0; i < server->listeners->len; i++)
    {
      VbNbdListener *l = g_ptr_array_index (server->listeners, i);
      struct stat st;

      g_thread_join (l->thread);
      close (l->fd);
      /* Only the socket we bound: another server may have taken the path. */
      if (l->unix_path && lstat (l->unix_path, &st) == 0 && st.st_dev == l->dev
          && st.st_ino == l->ino)
        unlink (l->unix_path);
      listener_free (l);
    }

  /* Under the lock: a finishing thread closes its fd under it too, so the
   * number is never one reused by someone else. */
  g_mutex_lock (&server->lock);
  for (guint i = 0; i < server->conns->len; i++)
    {
      VbNbdConnThread *c = g_ptr_array_index (server->conns, i);
      if (c->fd >= 0)
        shutdown (c->fd, SHUT_RDWR);
    }
  g_mutex_unlock (&server->lock);
  for (guint i = 0; i < server->conns->len; i++)
    {
      VbNbdConnThread *c = g_ptr_array_index (server->conns, i);
      g_thread_join (c->thread);
      conn_thread_free (c);
    }

  g_ptr_array_unref (server->listeners);
  g_ptr_array_unref (server->conns);
  close (server->stop_fd);
  g_mutex_clear (&server->lock);
  g_free ((char *) server->export.name);
  g_free ((char *) server->export.description);
  g_free (server);
}
