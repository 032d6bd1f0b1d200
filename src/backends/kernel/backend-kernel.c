/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel": the kernel's own virtual block devices, configured by
 * vblkd. Two backends behind the one name users and state.json know
 * (kernel-parts.h): md for raid0, raid1 and raid10, device-mapper for
 * window and linear. This file sends each call to its part — by driver
 * at start, by block node after — and sweeps the loop devices a start
 * left behind. The engine device ops are md's: on a device-mapper node
 * they find no array (no redundancy, no job, no component status). */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "backend.h"
#include "kernel-parts.h"
#include "kernel-util.h"
#include "vb-error.h"

#include <string.h>

/* The part that made block node @block_device. */
static const VbBackend *
part_of_node (const char *block_device)
{
  return vb_kernel_md_is_node (block_device) ? &vb_kernel_md_backend : &vb_kernel_dm_backend;
}

/* Either part will do; supports() says which driver needs which. */
static gboolean
kernel_available (char **reason)
{
  g_autofree char *no_dm = NULL, *no_md = NULL;

  if (vb_kernel_dm_backend.available (&no_dm) || vb_kernel_md_backend.available (&no_md))
    return TRUE;
  *reason = g_strdup_printf ("%s; %s", no_dm, no_md);
  return FALSE;
}

static gboolean
kernel_supports (const VbDriver *driver, GHashTable *attributes, char **reason)
{
  if (vb_kernel_dm_runs (driver))
    return vb_kernel_dm_backend.supports (driver, attributes, reason);
  if (vb_kernel_md_runs (driver))
    return vb_kernel_md_backend.supports (driver, attributes, reason);
  if (vb_kernel_refuses_engine (attributes, reason))
    return FALSE;
  *reason = g_strdup_printf ("driver '%s' has no device-mapper table or md level", driver->name);
  return FALSE;
}

static char *
kernel_start (const VbBackendRequest *request, GError **error)
{
  if (vb_kernel_md_runs (request->driver))
    return vb_kernel_md_backend.start (request, error);
  return vb_kernel_dm_backend.start (request, error);
}

static gboolean
kernel_stop (const char *block_device, const char *instance, const char *uuid, GError **error)
{
  return part_of_node (block_device)->stop (block_device, instance, uuid, error);
}

static gboolean
kernel_update (const char *block_device, const VbBackendRequest *request, GError **error)
{
  return part_of_node (block_device)->update (block_device, request, error);
}

static gboolean
kernel_reconfigure (const char *block_device, const VbBackendRequest *request, guint timeout_ms,
                    VbReconfigureReport *report, GError **error)
{
  const VbBackend *part = part_of_node (block_device);

  if (!(part->capabilities & VB_BACKEND_CAN_RECONFIGURE))
    {
      memset (report, 0, sizeof *report);
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("%s is an md array (backend kernel): its online reconfiguration is not built "
                      "yet; stop it, or run it on the engine (backend loop)"),
                   block_device);
      return FALSE;
    }
  return part->reconfigure (block_device, request, timeout_ms, report, error);
}

/* Both parts' devices; then (where device-mapper runs) the loop devices
 * tagged for a device neither runs, left by a start that never made its
 * device, are detached. */
static GPtrArray *
kernel_scan (const char *instance, GError **error)
{
  const VbBackend *const parts[] = { &vb_kernel_md_backend, &vb_kernel_dm_backend };
  g_autoptr (GPtrArray) found
      = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_backend_instance_free);
  g_autoptr (GHashTable) live = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) orphans = NULL;
  g_autofree char *no_dm = NULL;

  for (guint p = 0; p < G_N_ELEMENTS (parts); p++)
    {
      GPtrArray *some = parts[p]->scan (instance, error);
      if (some == NULL)
        return NULL;
      g_ptr_array_extend_and_steal (found, some);
    }
  if (!vb_kernel_dm_backend.available (&no_dm))
    return g_steal_pointer (&found);
  for (guint i = 0; i < found->len; i++)
    g_hash_table_add (live, ((VbBackendInstance *) found->pdata[i])->uuid);
  orphans = vb_kernel_orphan_loops (instance, live);
  vb_kernel_detach_all (orphans);
  return g_steal_pointer (&found);
}

static gboolean
kernel_node_owner (dev_t devnum, VbNodeOwner *owner)
{
  return vb_kernel_dm_backend.node_owner (devnum, owner)
         || vb_kernel_md_backend.node_owner (devnum, owner);
}

const VbBackend vb_backend_kernel = {
  .name = "kernel",
  .capabilities = VB_BACKEND_CAN_FORMAT | VB_BACKEND_CAN_RECONFIGURE | VB_BACKEND_SURVIVES_SERVER,
  .available = kernel_available,
  .supports = kernel_supports,
  .start = kernel_start,
  .stop = kernel_stop,
  .update = kernel_update,
  .scan = kernel_scan,
  .node_owner = kernel_node_owner,
  .format = vb_kernel_format,
  .reconfigure = kernel_reconfigure,
  .engine = &vb_kernel_md_ops,
};
