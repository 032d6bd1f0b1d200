/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "nbd": the engine served to the kernel nbd client. Each device
 * gets socketpairs, one end served by vblk's NBD server (transmission
 * phase from the first byte: the kernel does no handshake), the other
 * handed to the kernel with NBD_CMD_CONNECT over generic netlink, which
 * makes /dev/nbdN.
 *
 * The node outlives the vblkd that made it. The kernel holds the sockets;
 * when vblkd ends without a stop (killed, crashed), their other ends
 * close, the kernel marks the connections dead and holds the requests
 * for DEAD_CONN_TIMEOUT_S seconds instead of failing them. The vblkd
 * started again finds the node by its backend identifier
 * (/sys/block/nbdN/backend = "vblk:INSTANCE:UUID"), assembles the engine
 * from the components' superblocks and hands the node new sockets with
 * NBD_CMD_RECONFIGURE; the held requests go on against the new engine. A
 * filesystem mounted on the node sees delay, not errors. The kernel sends
 * again what was in flight on a dead socket: a write the old engine had
 * already done is done again, with the same data. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "backend.h"
#include "engine-runtime.h"
#include "nbd-handshake.h"
#include "nbd-server.h"
#include "loop-util.h"
#include "nbd-netlink.h"
#include "vb-error.h"
#include "vb-report.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nbd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* How long the kernel holds requests for a vblkd started again. */
#define DEAD_CONN_TIMEOUT_S 120
/* Connections per device where the engine allows several (multi-conn):
 * the kernel spreads requests over them by hardware queue. */
#define MAX_CONNECTIONS 4
/* Each end's send buffer: room for a few large requests, so that a 1 MiB
 * write crosses the socket in one go rather than in pieces of the default
 * ~200 KiB, each a wake-up of both ends. (A unix stream socket's sender's
 * buffer is what bounds the bytes in flight.) */
#define SOCKET_BUFFER (4 << 20)
#define TAG_PREFIX "vblk:"
#define DISCONNECT_WAIT_MS 30000

static gboolean
nbd_available (char **reason)
{
  return vb_nbd_netlink_available (reason);
}

/* What serves one device's sockets. */
typedef struct {
  VbNbdServer *server;
  gint index;
  char *tag; /* the backend identifier, "vblk:INSTANCE:UUID" */
} NbdTransport;

static void
transport_free (NbdTransport *t)
{
  vb_nbd_server_free (t->server);
  g_free (t->tag);
  g_free (t);
}

static gint
index_of (const char *block_device)
{
  gint64 index;
  char *end;

  if (!g_str_has_prefix (block_device, "/dev/nbd"))
    return -1;
  index = g_ascii_strtoll (block_device + strlen ("/dev/nbd"), &end, 10);
  return *end == '\0' && end != block_device + strlen ("/dev/nbd") && index >= 0 && index < G_MAXINT
             ? (gint) index
             : -1;
}

/* The backend identifier of /dev/nbdINDEX ("" when not connected). */
static char *
read_backend_id (gint index)
{
  g_autofree char *path = g_strdup_printf ("/sys/block/nbd%d/backend", index);
  char *id = NULL;

  if (!g_file_get_contents (path, &id, NULL, NULL))
    return g_strdup ("");
  return g_strstrip (id);
}

/* RUN_DIR/nbd/UUID: the node and how many connections it was given, which
 * a vblkd started again hands back (a RECONFIGURE socket replaces one
 * dead connection). */
static char *
run_file (const char *uuid)
{
  return g_build_filename (vb_backends_run_dir (), "nbd", uuid, NULL);
}

static void
write_run_file (const char *uuid, gint index, guint n)
{
  g_autofree char *path = run_file (uuid);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *text = g_strdup_printf ("nbd%d %u\n", index, n);
  g_autoptr (GError) local = NULL;

  if (g_mkdir_with_parents (dir, 0700) < 0
      || !g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &local))
    vb_report ("nbd", VB_REPORT_WARNING, "%s: %s", path,
               local ? local->message : g_strerror (errno));
}

/* The connections /dev/nbdINDEX was given, from its run file (0: unknown). */
static guint
read_run_file (const char *uuid, gint index)
{
  g_autofree char *path = run_file (uuid);
  g_autofree char *text = NULL;
  gint at = -1;
  guint n = 0;

  if (!g_file_get_contents (path, &text, NULL, NULL) || sscanf (text, "nbd%d %u", &at, &n) != 2
      || at != index || n == 0 || n > MAX_CONNECTIONS)
    return 0;
  return n;
}

/* @n socketpairs, one end of each served by @server, the other in @fds. */
static gboolean
serve_pairs (VbNbdServer *server, guint n, int *fds, GError **error)
{
  for (guint i = 0; i < n; i++)
    fds[i] = -1;
  for (guint i = 0; i < n; i++)
    {
      int pair[2];
      if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
        {
          int e = errno;
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("socketpair: %s"), g_strerror (e));
          return FALSE;
        }
      for (guint k = 0; k < 2; k++)
        {
          int size = SOCKET_BUFFER;
          /* (as root past net.core.wmem_max, else capped by it; the
           * kernel doubles either for its bookkeeping) */
          if (setsockopt (pair[k], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0)
            setsockopt (pair[k], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        }
      fds[i] = pair[0];
      if (!vb_nbd_server_serve_fd (server, pair[1], VB_NBD_SERVE_NO_HANDSHAKE, error))
        return FALSE;
    }
  return TRUE;
}

static void
close_all (int *fds, guint n)
{
  for (guint i = 0; i < n; i++)
    if (fds[i] >= 0)
      close (fds[i]);
}

/* The runtime's NBD server, and the export's flags for the kernel. */
static NbdTransport *
transport_new (VbEngineRuntime *rt, const VbBackendRequest *request, guint64 *flags, GError **error)
{
  const char *name = request->name;
  VbNbdExport export = {
    .name = name,
    .ops = &vb_engine_switch_ops,
    .handle = rt->sw,
    .block_size = (guint32) vb_engine_switch_ops.block_size (rt->sw),
  };
  VbNbdTerms terms;
  NbdTransport *t;
  VbNbdServer *server;

  server = vb_nbd_server_new (name, NULL, &vb_engine_switch_ops, rt->sw, error);
  if (server == NULL)
    return NULL;
  vb_nbd_terms_load (&export, &terms);
  *flags = terms.tflags;
  t = g_new0 (NbdTransport, 1);
  t->server = server;
  t->index = -1;
  t->tag = g_strdup_printf (TAG_PREFIX "%s:%s", request->instance, request->uuid);
  rt->transport = t;
  rt->transport_free = (GDestroyNotify) transport_free;
  return t;
}

/* The new size to the live node, over netlink. */
static gboolean
announce_size (VbEngineRuntime *rt, GError **error)
{
  NbdTransport *t = rt->transport;

  return vb_nbd_netlink_resize (t->index, t->tag, vb_engine_switch_ops.size (rt->sw), error);
}

/* /dev/nbdINDEX of @instance, @uuid, left by a vblkd that ended: -1 when
 * there is none. */
static gint
find_left_behind (const char *instance, const char *uuid)
{
  g_autofree char *want = g_strdup_printf (TAG_PREFIX "%s:%s", instance, uuid);
  g_autoptr (GDir) dir = g_dir_open ("/sys/block", 0, NULL);
  const char *entry;

  while (dir && (entry = g_dir_read_name (dir)))
    {
      g_autofree char *id = NULL, *dev = NULL;
      gint index;

      if (!g_str_has_prefix (entry, "nbd"))
        continue;
      dev = g_strconcat ("/dev/", entry, NULL);
      index = index_of (dev);
      if (index < 0)
        continue;
      id = read_backend_id (index);
      if (strcmp (id, want) == 0 && vb_engine_runtime_lookup (dev) == NULL)
        return index;
    }
  return -1;
}

/* A node left by a vblkd that ended: new sockets for it, served by a new
 * engine (assembled from the superblocks, so what the old one left dirty
 * is resynced). */
static char *
take_over (const VbBackendRequest *request, gint index, GError **error)
{
  g_autofree char *block_device = g_strdup_printf ("/dev/nbd%d", index);
  g_autofree char *tag = g_strdup_printf (TAG_PREFIX "%s:%s", request->instance, request->uuid);
  guint n = read_run_file (request->uuid, index);
  int fds[MAX_CONNECTIONS];
  VbEngineRuntime *rt;
  NbdTransport *t;
  guint64 flags;

  if (n == 0)
    n = 1; /* every dead connection is held; one new one carries the requests */
  rt = vb_engine_runtime_new (request, error);
  if (rt == NULL)
    return NULL;
  rt->announce_size = announce_size;
  t = transport_new (rt, request, &flags, error);
  if (t == NULL || !serve_pairs (t->server, n, fds, error)
      || !vb_nbd_netlink_reconfigure (index, tag, fds, n, error))
    {
      if (t)
        close_all (fds, n);
      vb_engine_runtime_free (rt);
      g_prefix_error (error, _ ("taking over %s: "), block_device);
      return NULL;
    }
  close_all (fds, n); /* the kernel holds its own references */
  t->index = index;
  vb_report (request->name, VB_REPORT_INFO,
             "took over %s (left by the vblkd that ended) with %u connection%s", block_device, n,
             n == 1 ? "" : "s");
  vb_engine_runtime_register (rt, block_device);
  return g_steal_pointer (&block_device);
}

static char *
nbd_start (const VbBackendRequest *request, GError **error)
{
  g_autofree char *tag = g_strdup_printf (TAG_PREFIX "%s:%s", request->instance, request->uuid);
  gint index = find_left_behind (request->instance, request->uuid);
  int fds[MAX_CONNECTIONS];
  VbEngineRuntime *rt;
  NbdTransport *t;
  guint64 flags = 0;
  guint n;
  VbUdevWatch *watch;
  char *block_device;

  if (index >= 0)
    return take_over (request, index, error);
  rt = vb_engine_runtime_new (request, error);
  if (rt == NULL)
    return NULL;
  rt->announce_size = announce_size;
  t = transport_new (rt, request, &flags, error);
  if (t == NULL)
    {
      vb_engine_runtime_free (rt);
      return NULL;
    }
  n = (flags & NBD_FLAG_CAN_MULTI_CONN) ? CLAMP (g_get_num_processors (), 1, MAX_CONNECTIONS) : 1;
  if (!serve_pairs (t->server, n, fds, error))
    {
      close_all (fds, n);
      vb_engine_runtime_free (rt);
      return NULL;
    }
  VbNbdConnect connect = {
    .index = -1,
    .size = vb_engine_switch_ops.size (rt->sw),
    .block_size = vb_engine_switch_ops.block_size (rt->sw),
    .server_flags = flags,
    .dead_conn_timeout_s = DEAD_CONN_TIMEOUT_S,
    .backend_id = tag,
    .fds = fds,
    .n_fds = n,
  };
  watch = vb_udev_watch_begin ();
  index = vb_nbd_netlink_connect (&connect, error);
  close_all (fds, n); /* the kernel holds its own references */
  if (index < 0)
    {
      vb_udev_watch_end (watch, 0, NULL);
      vb_engine_runtime_free (rt);
      return NULL;
    }
  t->index = index;
  block_device = g_strdup_printf ("/dev/nbd%d", index);
  write_run_file (request->uuid, index, n);
  /* the capacity's change event, once udev has processed it */
  vb_udev_watch_end (watch, vb_devnum_of (block_device), "change");
  vb_engine_runtime_register (rt, block_device);
  return block_device;
}

/* Until /dev/nbdINDEX has no configuration left; FALSE after @timeout_ms. */
static gboolean
wait_disconnected (gint index, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  for (;;)
    {
      g_autofree char *id = read_backend_id (index);
      if (id[0] == '\0')
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (5000);
    }
}

static gboolean
nbd_stop (const char *block_device, const char *instance, const char *uuid, GError **error)
{
  gint index = index_of (block_device);
  g_autofree char *want = g_strdup_printf (TAG_PREFIX "%s:%s", instance, uuid);
  g_autofree char *id = NULL;
  g_autofree char *path = run_file (uuid);
  VbEngineRuntime *rt;

  if (index < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s is not an nbd node"), block_device);
      return FALSE;
    }
  id = read_backend_id (index);
  if (id[0] != '\0' && strcmp (id, want) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("%s now belongs to another device (%s), not disconnecting it"), block_device,
                   id);
      return FALSE;
    }
  if (id[0] != '\0' && !vb_nbd_netlink_disconnect (index, error))
    {
      g_prefix_error (error, "%s: ", block_device);
      return FALSE;
    }
  rt = vb_engine_runtime_unregister (block_device);
  /* the kernel lets go of the configuration once nobody has the node
   * open (udev's probe, say), and may read until then */
  if (!wait_disconnected (index, DISCONNECT_WAIT_MS))
    vb_report (block_device, VB_REPORT_WARNING, "still configured %d ms after the disconnect",
               DISCONNECT_WAIT_MS);
  vb_engine_runtime_free (rt);
  unlink (path);
  return TRUE;
}

static gboolean
nbd_update (const char *block_device, const VbBackendRequest *request, GError **error)
{
  return vb_engine_runtime_update (block_device, request, error);
}

static GPtrArray *
nbd_scan (const char *instance, GError **error)
{
  g_autoptr (GPtrArray) found
      = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_backend_instance_free);
  g_autofree char *prefix = g_strdup_printf (TAG_PREFIX "%s:", instance);
  g_autoptr (GDir) dir = g_dir_open ("/sys/block", 0, error);
  const char *entry;

  if (dir == NULL)
    return NULL;
  while ((entry = g_dir_read_name (dir)))
    {
      g_autofree char *dev = g_strconcat ("/dev/", entry, NULL);
      g_autofree char *id = NULL;
      gint index = index_of (dev);
      VbBackendInstance *node;

      if (!g_str_has_prefix (entry, "nbd") || index < 0)
        continue;
      id = read_backend_id (index);
      if (!g_str_has_prefix (id, prefix))
        continue;
      node = g_new0 (VbBackendInstance, 1);
      node->uuid = g_strdup (id + strlen (prefix));
      node->block_device = g_steal_pointer (&dev);
      node->left_behind = vb_engine_runtime_lookup (node->block_device) == NULL;
      node->backing
          = g_strdup (node->left_behind ? "connections of a vblkd that ended (start takes it over)"
                                        : "the engine over NBD");
      g_ptr_array_add (found, node);
    }
  return g_steal_pointer (&found);
}

/* The backend identifier vblk gives the kernel: "vblk:INSTANCE:UUID". */
static gboolean
nbd_node_owner (dev_t devnum, VbNodeOwner *owner)
{
  g_autofree char *path
      = g_strdup_printf ("/sys/dev/block/%u:%u/backend", major (devnum), minor (devnum));
  g_autofree char *id = NULL;

  if (!g_file_get_contents (path, &id, NULL, NULL))
    return FALSE;
  return vb_node_owner_parse_tag (g_strstrip (id), owner);
}

const VbBackend vb_backend_nbd = {
  .name = "nbd",
  .capabilities = VB_ENGINE_RUNTIME_CAPABILITIES | VB_BACKEND_SURVIVES_SERVER,
  .available = nbd_available,
  .supports = vb_engine_runtime_supports,
  .start = nbd_start,
  .stop = nbd_stop,
  .update = nbd_update,
  .reconfigure = vb_engine_runtime_reconfigure,
  .scan = nbd_scan,
  .node_owner = nbd_node_owner,
  .format = vb_engine_runtime_format,
  .engine = &vb_engine_runtime_ops,
};
