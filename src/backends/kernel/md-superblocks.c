/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", md part: vblk's superblocks as the array's external
 * metadata ("external:vblk"): written to every member that has not
 * failed, the bitmap area kept all dirty while md runs the array, and the
 * assembly at start (the engine's rules, assembly.h). */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "md-array.h"
#include "assembly.h"
#include "superblock.h"
#include "vb-error.h"
#include "vb-report.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The current superblock to every member that has not failed, events
 * counted up. FALSE when no member took it. Called with a->lock held. */
gboolean
md_write_all_locked (MdArray *a)
{
  guint written = 0;

  if (!a->meta)
    return TRUE;
  a->sb.events++;
  a->sb.utime = g_get_real_time ();
  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autoptr (GError) local = NULL;
      VbSuperblock one;
      if (m == NULL || m->fd < 0 || m->failed)
        continue;
      one = a->sb;
      g_strlcpy (one.component_uuid, m->uuid, sizeof one.component_uuid);
      one.role = (gint32) i;
      if (vb_superblock_write (m->fd, m->path, &one, &local))
        written++;
      else
        vb_report (a->name, VB_REPORT_WARNING, "%s", local->message);
    }
  return written > 0;
}

/* vblk's bitmap area of @m: every bit set (md runs the array and keeps no
 * vblk bitmap) or clear (stopped clean, every copy equal). */
void
md_write_bitmap (MdArray *a, Member *m, gboolean dirty)
{
  void *buf = NULL;
  gsize len = a->sb.bitmap_bytes;

  if (!(a->sb.features & VB_SB_FEATURE_BITMAP) || len == 0 || m == NULL || m->fd < 0 || m->failed)
    return;
  if (posix_memalign (&buf, 4096, len) != 0)
    return;
  memset (buf, dirty ? 0xff : 0, len);
  if (pwrite (m->fd, buf, len, VB_BITMAP_OFFSET) != (ssize_t) len || fdatasync (m->fd) != 0)
    vb_report (a->name, VB_REPORT_WARNING, "writing the bitmap of '%s': %s", m->path,
               g_strerror (errno));
  free (buf);
}

/* raid0: md has no copy to recover a member from, so every slot must hold
 * its own, current component — the rules of every device with one copy
 * of its data, the engine's too (vb_assembly_single_copy). */
static gboolean
assemble_single_copy (MdArray *a, const VbBackendRequest *request, const VbSuperblock *found,
                      const gboolean *present, GError **error)
{
  g_autofree VbAssemblySlot *slots = g_new0 (VbAssemblySlot, a->n);

  for (guint i = 0; i < a->n; i++)
    {
      slots[i].path = a->members[i] ? a->members[i]->path : request->components[i].source;
      slots[i].missing = a->members[i] == NULL;
      slots[i].sb = present[i] ? &found[i] : NULL;
    }
  if (!vb_assembly_single_copy (a->name, &a->sb, slots, a->n, FALSE, error))
    return FALSE;
  for (guint i = 0; i < a->n; i++)
    {
      g_free (a->members[i]->uuid);
      a->members[i]->uuid = g_strdup (found[i].component_uuid);
    }
  return TRUE;
}

/* Each member's superblock into @found (@present: one there; a blank
 * member is a new component); *@best gets the newest. FALSE when one
 * belongs to another device, two claim a role at equal events, or none
 * is there. */
static gboolean
read_superblocks (MdArray *a, VbSuperblock *found, gboolean *present, gint *best, GError **error)
{
  *best = -1;
  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autoptr (GError) local = NULL;
      if (m == NULL)
        continue;
      if (!vb_superblock_read (m->fd, m->path, &found[i], &local))
        {
          if (g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
            continue; /* blank: a new component */
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("%s; refusing to start (nothing was written)"), local->message);
          return FALSE;
        }
      if (strcmp (found[i].device_uuid, a->uuid) != 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("component '%s' belongs to device '%s' (%s), not to '%s' (%s); refusing "
                          "to start (nothing was written)"),
                       m->path, found[i].device_name, found[i].device_uuid, a->name, a->uuid);
          return FALSE;
        }
      present[i] = TRUE;
      if (*best < 0 || found[i].events > found[*best].events)
        *best = i;
    }
  /* two components claiming one role with equal events: which holds the
   * data cannot be told */
  for (guint i = 0; i < a->n; i++)
    for (guint j = i + 1; j < a->n; j++)
      if (present[i] && present[j] && found[i].role == found[j].role && found[i].role >= 0
          && found[i].events == found[j].events
          && strcmp (found[i].component_uuid, found[j].component_uuid) != 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("components '%s' and '%s' both claim role %d of '%s' at events %" PRIu64
                          "; refusing to start (nothing was written)"),
                       a->members[i]->path, a->members[j]->path, found[i].role, a->name,
                       found[i].events);
          return FALSE;
        }
  if (*best < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("device '%s': no component holds a vblk superblock of it; refusing to start"),
                   a->name);
      return FALSE;
    }
  return TRUE;
}

/* The newest superblock fits the device: its slots, its data size. */
static gboolean
newest_fits (MdArray *a, const VbSuperblock *newest, const char *path, const VbLayout *layout,
             GError **error)
{
  if (newest->n_roles != a->n)
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_FAILED,
          _ ("component '%s': its superblock says %u slots, the device has %u; refusing to "
             "start (nothing was written)"),
          path, newest->n_roles, a->n);
      return FALSE;
    }
  if (layout->component_size < newest->data_size)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("device '%s' holds %" PRIu64 " bytes of data per component, its "
                      "components now give %" PRIu64 "; refusing to start (nothing was "
                      "written)"),
                   a->name, newest->data_size, layout->component_size);
      return FALSE;
    }
  return TRUE;
}

/* Member @m takes the component UUID its superblock @own names. */
static void
take_found_uuid (Member *m, const VbSuperblock *own)
{
  g_free (m->uuid);
  m->uuid = g_strdup (own->component_uuid);
}

/* Slot @i as the assembly rule decides it (md keeps no vblk bitmap:
 * whatever is behind is recovered in full). TRUE when it is in sync. */
static gboolean
decide_slot (MdArray *a, guint i, const VbSuperblock *found, const gboolean *present,
             const char *newest_uuid)
{
  Member *m = a->members[i];
  g_autofree char *why = NULL;
  VbSlotFacts facts = {
    .device = &a->sb,
    .slot = i,
    .present = m != NULL,
    .own = present[i] ? &found[i] : NULL,
    .newest = newest_uuid,
    .use_bitmap = FALSE,
    .named = m != NULL && m->uuid != NULL && strcmp (m->uuid, a->sb.roles[i].uuid) == 0,
  };

  switch (vb_assembly_decide (&facts, &why))
    {
    case VB_SLOT_MISSING:
      if (a->sb.roles[i].state == VB_ROLE_IN_SYNC)
        a->sb.roles[i].state = VB_ROLE_MISSING;
      vb_report (a->name, VB_REPORT_INFO, "component %u is missing; starting degraded", i);
      return FALSE;
    case VB_SLOT_CURRENT:
      take_found_uuid (m, &found[i]);
      return TRUE;
    case VB_SLOT_STRANGER:
      /* its component went away (re-added when it comes back); the disk
       * at its path is let go, never written */
      a->sb.roles[i].state = VB_ROLE_MISSING;
      vb_report (a->name, VB_REPORT_INFO, "component %u (%s): %s", i, m->path, why);
      m->failed = TRUE;
      md_member_let_go_locked (a, i);
      return FALSE;
    case VB_SLOT_FAULTY:
      /* kept out of md, shown faulty, until an explicit re-add */
      vb_report (a->name, VB_REPORT_INFO, "component %u (%s): %s", i, m->path, why);
      take_found_uuid (m, &found[i]);
      m->failed = TRUE;
      md_member_let_go_locked (a, i);
      return FALSE;
    case VB_SLOT_RESYNC:
    case VB_SLOT_RESUME:
    case VB_SLOT_REBUILD:
      break;
    }
  vb_report (a->name, VB_REPORT_INFO, "component %u (%s): %s; md recovers it in full", i, m->path,
             why);
  if (present[i] && strcmp (found[i].component_uuid, a->sb.roles[i].uuid) == 0)
    take_found_uuid (m, &found[i]);
  m->rebuilding = TRUE;
  g_strlcpy (a->sb.roles[i].uuid, m->uuid, sizeof a->sb.roles[i].uuid);
  a->sb.roles[i].state = VB_ROLE_REBUILDING;
  return FALSE;
}

/* The newest superblock's role table decides: a member with the table's
 * events in an in-sync role is in sync; a faulty one stays out of md
 * until it is re-added; any other member is recovered in full (md has no
 * bitmap of vblk's). */
gboolean
md_assemble (MdArray *a, const VbBackendRequest *request, const VbLayout *layout, GError **error)
{
  g_autofree VbSuperblock *found = g_new0 (VbSuperblock, a->n);
  g_autofree gboolean *present = g_new0 (gboolean, a->n);
  gint best;
  guint in_sync = 0;

  if (!read_superblocks (a, found, present, &best, error)
      || !newest_fits (a, &found[best], a->members[best]->path, layout, error))
    return FALSE;
  a->sb = found[best];
  g_strlcpy (a->sb.format, "vblk", sizeof a->sb.format);
  g_strlcpy (a->sb.device_name, a->name, sizeof a->sb.device_name);
  vb_superblock_set_attributes (&a->sb, request->attributes);
  if (a->copies == 1)
    return assemble_single_copy (a, request, found, present, error);
  for (guint i = 0; i < a->n; i++)
    in_sync += decide_slot (a, i, found, present, found[best].component_uuid);
  if (in_sync == 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("device '%s': no component is in sync (the newest superblock, events %" PRIu64
                      ", names none that is here); refusing to start"),
                   a->name, a->sb.events);
      return FALSE;
    }
  return TRUE;
}
