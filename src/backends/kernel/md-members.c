/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", md part: members while the array runs: a failure
 * recorded in the surviving superblocks before md goes on, a component
 * added to a slot (re-add, spare), a spare taking a failed slot. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "md-array.h"
#include "handler-md1.h"
#include "kernel-util.h"
#include "metadata.h"
#include "superblock.h"
#include "vb-error.h"
#include "vb-testhook.h"
#include "vb-report.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* The failure of slot @slot into the surviving superblocks. FALSE when no
 * survivor took the write: md is not let go on (tried again later). */
gboolean
md_record_failure_locked (MdArray *a, guint slot, const char *why, gboolean requested)
{
  Member *m = a->members[slot];
  VbRoleState was = a->sb.roles[slot].state;

  m->failed = TRUE;
  if (a->meta)
    {
      a->sb.roles[slot].state = VB_ROLE_FAULTY;
      if (!md_write_all_locked (a))
        {
          vb_report (
              a->name, VB_REPORT_WARNING,
              "component %u (%s) %s, and no surviving superblock could record it; md keeps holding it",
              slot, m->path, why);
          a->sb.roles[slot].state = was;
          m->failed = FALSE;
          return FALSE;
        }
    }
  m->rebuilding = FALSE;
  if (a->meta)
    vb_report (a->name, VB_REPORT_INFO,
               "component %u (%s) %s; recorded as faulty (events %" G_GUINT64_FORMAT ")", slot,
               m->path, why, a->sb.events);
  else
    vb_report (a->name, VB_REPORT_INFO, "component %u (%s) %s%s", slot, m->path, why,
               a->native ? "; md records it in its superblocks" : "");
  vb_test_hook ("md:failure-recorded");
  /* seen faulty by whoever hears of it */
  md_publish_status_locked (a);
  /* as the engine reports them: negative, -ECANCELED for a request */
  vb_backends_report_failure (a->uuid, slot, requested ? -ECANCELED : -EIO);
  return TRUE;
}

/* md1: a component md can take as a spare carries a superblock of the
 * array; a blank one gets its first from an in-sync member's. */
static gboolean
native_superblock_ready_locked (MdArray *a, Member *m, GError **error)
{
  VbSuperblock sb;
  const Member *from = NULL;

  if (vb_metadata_md1.read (-1, m->node, &sb, NULL) && strcmp (sb.device_uuid, a->uuid) == 0)
    return TRUE; /* a member coming back: md re-adds it */
  for (guint i = 0; i < a->n && from == NULL; i++)
    if (a->members[i] && !a->members[i]->failed && !a->members[i]->removed
        && !a->members[i]->rebuilding)
      from = a->members[i];
  if (from == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("%s: no in-sync member to take a superblock for '%s' from"), a->name,
                   m->path);
      return FALSE;
    }
  if (!vb_md1_write_spare (from->node, a->md_version, m->node, m->uuid, a->next_dev_number,
                           &a->next_dev_number, error))
    return FALSE;
  vb_report (a->name, VB_REPORT_INFO, "'%s' got an md %s superblock as a spare of the array",
             m->path, a->md_version);
  return TRUE;
}

/* A member over @path (UUID @uuid), its node attached (a loop device
 * over a file, listed in @attached). */
static Member *
new_member (MdArray *a, const char *path, const char *uuid, GPtrArray *attached, GError **error)
{
  g_autofree char *tag = vb_kernel_loop_tag (a->instance, a->uuid);
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func (g_free);
  VbComponentInfo info = { .source = path };
  VbBackendRequest one
      = { .name = a->name, .n_components = 1, .paths = &path, .components = &info };
  struct stat st;

  if (stat (path, &st) != 0)
    {
      int e = errno;
      g_set_error (error, VB_ERROR, e == ENOENT ? VB_ERROR_NOT_FOUND : VB_ERROR_FAILED,
                   _ ("component '%s': %s"), path, g_strerror (e));
      return NULL;
    }
  info.kind = S_ISBLK (st.st_mode) ? VB_COMPONENT_KIND_BLOCK : VB_COMPONENT_KIND_FILE;
  if (!vb_kernel_component_nodes (&one, tag, FALSE, nodes, attached, error))
    return NULL;
  return md_member_new (path, uuid, nodes->pdata[0], a->meta, error);
}

/* The superblock member @m needs before md takes it: md's own (md1), or
 * vblk's saying it rebuilds slot @slot. */
static gboolean
member_superblock_locked (MdArray *a, Member *m, guint slot, GError **error)
{
  VbSuperblock sb = a->sb;

  if (a->native)
    return native_superblock_ready_locked (a, m, error);
  if (!a->meta)
    return TRUE;
  g_strlcpy (sb.component_uuid, m->uuid, sizeof sb.component_uuid);
  sb.role = (gint32) slot;
  sb.roles[slot].state = VB_ROLE_REBUILDING;
  g_strlcpy (sb.roles[slot].uuid, m->uuid, sizeof sb.roles[slot].uuid);
  return vb_superblock_write (m->fd, m->path, &sb, error);
}

/* md takes member @m into slot @slot (new_dev; for vblk's metadata its
 * offset, size and slot too: md1 takes them from md's superblock and
 * places the spare itself). */
static gboolean
md_add_locked (MdArray *a, Member *m, guint slot, GError **error)
{
  g_autofree char *dev = g_strdup_printf ("%u:%u", major (m->devnum), minor (m->devnum));
  g_autofree char *offset = md_dev_attr (m, "offset");
  g_autofree char *size = md_dev_attr (m, "size");
  g_autofree char *sslot = md_dev_attr (m, "slot");
  g_autofree char *action = a->native ? NULL : md_get (a, "sync_action");
  /* md places a new member in a free slot itself, and starts recovering
   * it, as soon as its thread looks (on Linux 7.x at once, before vblk's
   * slot is written: "Device or resource busy"): frozen until the member
   * is configured, and only from idle, as mdadm freezes (a running job is
   * not stopped, a cancel's freeze not undone); md_add_member_locked's
   * "recover" lets md go on */
  gboolean froze = g_strcmp0 (action, "idle") == 0 && md_set (a, "sync_action", "frozen") == 0;
  int r = md_set (a, "new_dev", dev);

  if (r == 0 && !a->native)
    r = md_set_u64 (a, offset, a->sb.data_offset / SECTOR);
  if (r == 0 && !a->native)
    r = md_set_u64 (a, size, a->sb.data_size / 1024);
  if (r == 0 && !a->native)
    r = md_set_u64 (a, sslot, slot);
  if (r < 0)
    {
      g_autofree char *state = md_dev_attr (m, "state");
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("md refused '%s' in slot %u of %s: %s"),
                   m->path, slot, a->md, g_strerror (-r));
      md_set (a, state, "remove");
      if (froze)
        md_set (a, "sync_action", "idle");
      return FALSE;
    }
  return TRUE;
}

/* @path (UUID @uuid) into slot @slot of the running array: its superblock
 * written (rebuilding), then md adds it and recovers it. */
gboolean
md_add_member_locked (MdArray *a, guint slot, const char *path, const char *uuid, GError **error)
{
  g_autoptr (GPtrArray) attached = g_ptr_array_new_with_free_func (g_free);
  Member *m = new_member (a, path, uuid, attached, error);

  if (m)
    m->rebuilding = TRUE;
  if (m == NULL || !member_superblock_locked (a, m, slot, error)
      || !md_add_locked (a, m, slot, error))
    {
      md_member_free (m);
      vb_kernel_detach_all (attached);
      return FALSE;
    }
  md_member_free (a->members[slot]);
  a->members[slot] = m;
  if (a->meta)
    {
      g_strlcpy (a->sb.roles[slot].uuid, uuid, sizeof a->sb.roles[slot].uuid);
      a->sb.roles[slot].state = VB_ROLE_REBUILDING;
      md_write_all_locked (a);
      md_write_bitmap (a, m, TRUE);
    }
  md_set (a, "sync_action", "recover");
  vb_report (a->name, VB_REPORT_INFO, "'%s' added to slot %u of %s; md recovers it", path, slot,
             a->md);
  return TRUE;
}

/* A spare into slot @slot, whose component failed and left md. TRUE when
 * one took it. */
gboolean
md_take_spare_locked (MdArray *a, guint slot)
{
  g_autofree char *action = NULL;
  g_autoptr (GError) local = NULL;
  Member *failed = a->members[slot];
  const char *path, *uuid;

  if (a->copies == 1 || a->spare_paths->len == 0)
    return FALSE;
  /* md places no member while a resync, recovery or check runs: the spare
   * waits for the next look */
  action = md_get (a, "sync_action");
  if (g_strcmp0 (action, "idle") != 0 && g_strcmp0 (action, "frozen") != 0)
    return FALSE;
  path = a->spare_paths->pdata[0];
  uuid = a->spare_uuids->pdata[0];
  a->members[slot] = NULL;
  if (!md_add_member_locked (a, slot, path, uuid, &local))
    {
      /* it stays a spare: tried again at the next look */
      a->members[slot] = failed;
      vb_report (a->name, VB_REPORT_WARNING, "spare '%s': %s", path, local->message);
      return FALSE;
    }
  vb_report (a->name, VB_REPORT_INFO, "spare '%s' takes slot %u", path, slot);
  g_ptr_array_remove_index (a->spare_paths, 0);
  g_ptr_array_remove_index (a->spare_uuids, 0);
  md_member_free (failed);
  return TRUE;
}

/* A member md removed: its file let go; a spare, if there is one, takes
 * its slot. */
void
md_member_gone_locked (MdArray *a, guint slot, gboolean take_spare)
{
  md_member_let_go_locked (a, slot);
  if (take_spare)
    md_take_spare_locked (a, slot);
}
