/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See assembly.h: the start of a device with one copy of its data (raid0,
 * linear), beside the redundant drivers' rule in assembly.c. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "assembly.h"

#include "vb-error.h"

#include <string.h>

gboolean
vb_assembly_single_copy (const char *device, VbSuperblock *table, const VbAssemblySlot *slots,
                         guint n, gboolean grown, GError **error)
{
  g_return_val_if_fail (device != NULL && (slots != NULL || n == 0), FALSE);
  g_return_val_if_fail (table == NULL || table->n_roles == n, FALSE);

  for (guint i = 0; i < n; i++)
    {
      const VbAssemblySlot *s = &slots[i];
      const VbSuperblock *sb = s->sb;

      if (s->missing)
        {
          g_set_error (
              error, VB_ERROR, VB_ERROR_FAILED,
              _ ("component '%s' is missing: '%s' keeps no other copy of the data on it; refusing to start (nothing was written)"),
              s->path, device);
          return FALSE;
        }
      if (table == NULL)
        continue; /* a new device: every component is blank */
      if (sb == NULL)
        {
          if (grown && table->roles[i].state == VB_ROLE_REBUILDING)
            continue;
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("component '%s' carries no superblock of '%s' (slot %u holds component "
                          "%s, events %" PRIu64 "): not the component that holds that "
                          "part of the data; refusing to start (nothing was written)"),
                       s->path, device, i, table->roles[i].uuid, table->events);
          return FALSE;
        }
      if (sb->role != (gint32) i || strcmp (sb->component_uuid, table->roles[i].uuid) != 0)
        {
          g_autofree char *was = sb->role == VB_SB_ROLE_SPARE
                                     ? g_strdup ("a spare")
                                     : g_strdup_printf ("slot %d", sb->role);
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("component '%s' is component %s (%s) of '%s', not the one of slot %u "
                          "(%s); refusing to start (nothing was written)"),
                       s->path, sb->component_uuid, was, device, i, table->roles[i].uuid);
          return FALSE;
        }
      if (sb->events + 1 < table->events)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("component '%s' is stale (events %" PRIu64 ", the device at %" PRIu64
                          "): it missed writes, and '%s' keeps no other copy of "
                          "them; refusing to start (nothing was written)"),
                       s->path, sb->events, table->events, device);
          return FALSE;
        }
      if (table->roles[i].state != VB_ROLE_IN_SYNC)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("component '%s': the superblocks say slot %u is %s, and '%s' keeps no "
                          "other copy of its data; refusing to start (nothing was written)"),
                       s->path, i, vb_role_state_to_string (table->roles[i].state), device);
          return FALSE;
        }
    }
  /* new space of a grown concatenation: in sync from the start */
  for (guint i = 0; table && i < n; i++)
    if (slots[i].sb == NULL)
      table->roles[i].state = VB_ROLE_IN_SYNC;
  return TRUE;
}
