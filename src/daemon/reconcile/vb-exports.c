/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Exports: a started device served over NBD on each address its desired
 * state lists ("nbd unix:PATH" or "nbd tcp:HOST:PORT"). Engine devices are
 * served in process; a device the kernel runs (loop over a file) is served
 * from its block node through an engine of its own. Only the reconciler's
 * worker thread touches the servers (ops run one at a time). */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-exports.h"

#include "engine.h"
#include "nbd-server.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  char *uuid;
  char *block_device;
  char **specs;         /* what is being served, as in the desired state */
  VbEngine *own_engine; /* serving a kernel-run block node */
  VbNbdServer *server;
} Export;

static void
export_free (Export *x)
{
  /* the server first: it joins the threads that use the engine */
  g_clear_pointer (&x->server, vb_nbd_server_free);
  g_clear_pointer (&x->own_engine, vb_engine_free);
  g_strfreev (x->specs);
  g_free (x->uuid);
  g_free (x->block_device);
  g_free (x);
}

GHashTable *
vb_exports_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) export_free);
}

static gboolean
specs_equal (char **a, GPtrArray *b)
{
  guint n = a ? g_strv_length (a) : 0;

  if (n != b->len)
    return FALSE;
  for (guint i = 0; i < n; i++)
    if (g_strcmp0 (a[i], b->pdata[i]) != 0)
      return FALSE;
  return TRUE;
}

/* Block ops for the device: in process for an engine device, else an
 * engine (driver window, whole node) over its block node. */
static gboolean
ops_for (const VbRunning *r, Export *x, const VbBlockOps **ops, void **handle, GError **error)
{
  const VbBackend *backend = vb_backend_lookup (r->backend);
  const VbDriver *window = vb_driver_lookup ("window");
  g_autoptr (GHashTable) attributes = NULL;
  VbComponentInfo info = { r->block_device, VB_COMPONENT_KIND_BLOCK, 0 };
  VbEngineSource source = { r->block_device, NULL, NULL };
  int fd;

  if (backend && backend->engine && backend->engine->block_ops (r->block_device, ops, handle))
    return TRUE;
  fd = open (r->block_device, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ioctl (fd, BLKGETSIZE64, &info.size) < 0)
    {
      int e = errno;
      if (fd >= 0)
        close (fd);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", r->block_device, g_strerror (e));
      return FALSE;
    }
  close (fd);
  attributes = vb_driver_resolve_attributes (window, NULL, NULL, error);
  x->own_engine = vb_engine_new (
      r->block_device, window, attributes, 1, &source, &info, NULL,
      g_strcmp0 (g_hash_table_lookup (r->attributes, "read_only"), "true") == 0, error);
  if (x->own_engine == NULL)
    return FALSE;
  *ops = &vb_engine_ops;
  *handle = x->own_engine;
  return TRUE;
}

gboolean
vb_export_tls_load (const VbExportSpec *spec, VbNbdTls **tls, GError **error)
{
  /* the two enums are one list */
  G_STATIC_ASSERT ((int) VB_EXPORT_TLS_ALLOW == (int) VB_NBD_TLS_ALLOW);
  G_STATIC_ASSERT ((int) VB_EXPORT_TLS_REQUIRE == (int) VB_NBD_TLS_REQUIRE);
  VbNbdTlsMode mode = (VbNbdTlsMode) spec->tls;

  *tls = NULL;
  if (spec->tls == VB_EXPORT_TLS_OFF)
    return TRUE;
  if (spec->tls_psk)
    *tls = vb_nbd_tls_new_psk (mode, spec->tls_psk, error);
  else
    *tls = vb_nbd_tls_new_x509 (mode, spec->tls_certs, error);
  return *tls != NULL;
}

static Export *
export_start (const VbDeviceConfig *d, const VbRunning *r, GError **error)
{
  Export *x = g_new0 (Export, 1);
  const VbBlockOps *ops;
  void *handle;
  g_autofree char *description = g_strdup_printf ("vblk device %s (%s)", d->name, d->driver);

  x->uuid = g_strdup (d->uuid);
  x->block_device = g_strdup (r->block_device);
  x->specs = g_new0 (char *, d->exports->len + 1);
  for (guint i = 0; i < d->exports->len; i++)
    x->specs[i] = g_strdup (d->exports->pdata[i]);
  if (!ops_for (r, x, &ops, &handle, error))
    goto fail;
  x->server = vb_nbd_server_new (d->name, description, ops, handle, error);
  if (x->server == NULL)
    goto fail;
  for (guint i = 0; i < d->exports->len; i++)
    {
      g_auto (VbExportSpec) spec = { NULL };
      g_autoptr (VbNbdTls) tls = NULL;

      if (!vb_export_spec_parse (d->exports->pdata[i], &spec, error))
        goto fail;
      if (g_str_has_prefix (spec.address, "unix:"))
        {
          g_autofree char *dir = g_path_get_dirname (spec.address + 5);
          g_mkdir_with_parents (dir, 0755);
        }
      if (!vb_export_tls_load (&spec, &tls, error)
          || !vb_nbd_server_listen (x->server, spec.address, tls, error))
        {
          g_prefix_error (error, _ ("export of '%s' on %s: "), d->name, spec.address);
          goto fail;
        }
    }
  return x;
fail:
  export_free (x);
  return NULL;
}

void
vb_exports_sync (GHashTable *exports, const VbState *state, GHashTable *running,
                 VbExportFailFunc fail, gpointer user_data)
{
  GHashTableIter iter;
  gpointer key, value;

  /* what no longer matches goes first, so that addresses are free again */
  g_hash_table_iter_init (&iter, exports);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      Export *x = value;
      const VbDeviceConfig *d = NULL;
      const VbRunning *r = g_hash_table_lookup (running, x->uuid);
      for (guint i = 0; i < state->devices->len && d == NULL; i++)
        if (strcmp (((VbDeviceConfig *) state->devices->pdata[i])->uuid, x->uuid) == 0)
          d = state->devices->pdata[i];
      if (d == NULL || r == NULL || g_strcmp0 (r->block_device, x->block_device) != 0
          || !specs_equal (x->specs, d->exports))
        g_hash_table_iter_remove (&iter);
    }
  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      /* (a device without exports is not looked up: thousands may be configured) */
      const VbRunning *r = d->exports->len ? g_hash_table_lookup (running, d->uuid) : NULL;
      g_autoptr (GError) error = NULL;
      Export *x;

      if (r == NULL || g_hash_table_contains (exports, d->uuid))
        continue;
      x = export_start (d, r, &error);
      if (x == NULL)
        {
          fail (d->name, error, user_data);
          continue;
        }
      g_hash_table_insert (exports, x->uuid, x);
    }
}

void
vb_exports_stop (GHashTable *exports, const char *uuid)
{
  g_hash_table_remove (exports, uuid);
}
