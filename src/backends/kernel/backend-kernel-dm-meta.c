/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", its device-mapper part: the vblk superblocks of a
 * linear table (metadata=vblk; the table maps each component from its
 * data offset on). dm keeps no metadata and tells vblkd nothing while it
 * runs, so the superblocks change only here: read and checked at start by
 * the rules of every device with one copy of its data
 * (vb_assembly_single_copy, the engine's and md's too), then marked
 * running (events + 1, not clean); marked clean at stop; and given the
 * new role table when a component is appended online. Reads and writes go
 * through the block nodes dm maps (a regular file's loop device), the way
 * dm's own writes reach the components. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "assembly.h"
#include "dm-meta.h"
#include "kernel-util.h"
#include "superblock.h"
#include "vb-error.h"
#include "vb-report.h"

#include <string.h>

gboolean
vb_kernel_dm_meta_found (const VbBackendRequest *request)
{
  for (guint i = 0; i < request->n_components; i++)
    {
      g_autoptr (GError) local = NULL;
      VbSuperblock sb;
      /* a damaged one counts: the check names it */
      if (vb_superblock_read (-1, request->paths[i], &sb, &local)
              ? strcmp (sb.device_uuid, request->uuid) == 0
              : !g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
        return TRUE;
    }
  return FALSE;
}

gboolean
vb_kernel_dm_meta_check (const VbBackendRequest *request, GPtrArray *nodes, gboolean grown,
                         VbSuperblock *table, GError **error)
{
  guint n = request->n_components;
  g_autofree VbSuperblock *found = g_new0 (VbSuperblock, n);
  g_autofree VbAssemblySlot *slots = g_new0 (VbAssemblySlot, n);
  guint64 smallest = G_MAXUINT64;
  gint best = -1;

  for (guint i = 0; i < n; i++)
    {
      g_autoptr (GError) local = NULL;
      slots[i].path = request->paths[i];
      smallest = MIN (smallest, request->components[i].size);
      if (!vb_superblock_read (-1, nodes->pdata[i], &found[i], &local))
        {
          if (g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
            continue; /* blank: the rules say whether it may be */
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("component '%s': %s; refusing to start (nothing was written)"),
                       request->paths[i], local->message);
          return FALSE;
        }
      if (strcmp (found[i].device_uuid, request->uuid) != 0)
        {
          g_set_error (
              error, VB_ERROR, VB_ERROR_FAILED,
              _ ("component '%s' belongs to device '%s' (%s), not to '%s' (%s); refusing to start (nothing was written)"),
              request->paths[i], found[i].device_name, found[i].device_uuid, request->name,
              request->uuid);
          return FALSE;
        }
      slots[i].sb = &found[i];
      if (best < 0 || found[i].events > found[best].events)
        best = (gint) i;
    }
  /* a new device's superblocks were written when it was created */
  if (best < 0)
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_FAILED,
          _ ("device '%s': no component holds a vblk superblock of it; refusing to start (nothing was written)"),
          request->name);
      return FALSE;
    }
  *table = found[best];
  if (table->n_roles > n || (table->n_roles < n && !grown))
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_FAILED,
          _ ("component '%s': its superblock says %u slots, the device has %u; refusing to start (nothing was written)"),
          request->paths[best], table->n_roles, n);
      return FALSE;
    }
  if (!grown && smallest < table->data_size)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("device '%s' holds %" PRIu64 " bytes of data per component, its "
                      "components now give %" PRIu64 "; refusing to start (nothing was written)"),
                   request->name, table->data_size, smallest);
      return FALSE;
    }
  /* components appended online: slots new to the table, new space */
  for (guint i = table->n_roles; i < n; i++)
    {
      g_strlcpy (table->roles[i].uuid, request->component_uuids[i], sizeof table->roles[i].uuid);
      table->roles[i].state = VB_ROLE_REBUILDING;
    }
  table->n_roles = n;
  if (!vb_assembly_single_copy (request->name, table, slots, n, grown, error))
    return FALSE;
  g_strlcpy (table->device_name, request->name, sizeof table->device_name);
  vb_superblock_set_attributes (table, request->attributes);
  table->data_size = smallest;
  return TRUE;
}

gboolean
vb_kernel_dm_meta_write (const VbBackendRequest *request, GPtrArray *nodes, VbSuperblock *table,
                         GError **error)
{
  table->clean = FALSE;
  table->events++;
  table->utime = g_get_real_time ();
  for (guint i = 0; i < request->n_components; i++)
    {
      VbSuperblock one = *table;
      g_strlcpy (one.component_uuid, table->roles[i].uuid, sizeof one.component_uuid);
      one.role = (gint32) i;
      if (!vb_superblock_write (-1, nodes->pdata[i], &one, error))
        {
          g_prefix_error (error, _ ("%s: component '%s': "), request->name, request->paths[i]);
          return FALSE;
        }
    }
  return TRUE;
}

void
vb_kernel_dm_meta_stop (const char *device_name, const char *uuid, GPtrArray *nodes)
{
  g_autofree VbSuperblock *found = g_new0 (VbSuperblock, nodes->len);
  g_autofree gboolean *ours = g_new0 (gboolean, nodes->len);
  VbSuperblock table = { 0 };
  gboolean any = FALSE;

  for (guint i = 0; i < nodes->len; i++)
    if (vb_superblock_read (-1, nodes->pdata[i], &found[i], NULL)
        && strcmp (found[i].device_uuid, uuid) == 0)
      {
        ours[i] = TRUE;
        if (!any || found[i].events > table.events)
          table = found[i];
        any = TRUE;
      }
  if (!any)
    return; /* metadata=none */
  table.events++;
  table.utime = g_get_real_time ();
  table.clean = TRUE;
  for (guint i = 0; i < nodes->len; i++)
    {
      g_autoptr (GError) local = NULL;
      VbSuperblock one = table;
      if (!ours[i])
        continue;
      g_strlcpy (one.component_uuid, found[i].component_uuid, sizeof one.component_uuid);
      one.role = found[i].role;
      if (!vb_superblock_write (-1, nodes->pdata[i], &one, &local))
        vb_report (device_name, VB_REPORT_WARNING, "marking the superblocks clean: %s",
                   local->message);
    }
}
