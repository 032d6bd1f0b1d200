/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", md part: md's resync, recovery, check and repair as
 * vblk jobs (the engine's VbEngineJob, reported as the engine reports
 * them), and the check and cancel the daemon asks for. */
#include "config.h"

#include "md-array.h"
#include "vb-report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* apart from the engine's job ids, which count from 1 */
static guint64 next_job_id = G_GUINT64_CONSTANT (1) << 40;

#define REBUILD_UNNAMED_US (2 * G_USEC_PER_SEC)

static void
report_job_locked (MdArray *a, VbEngineJobState state)
{
  VbEngineJob job = {
    .id = a->job_id,
    .device = a->name,
    .operation = a->job_op,
    .state = state,
    .bytes = a->job_bytes,
    .done = a->job_done,
    .component = a->job_slot,
    .component_uuid = a->job_component,
  };

  if (state != VB_ENGINE_JOB_RUNNING
      && (strcmp (a->job_op, "check") == 0 || strcmp (a->job_op, "repair") == 0))
    {
      g_autofree char *count = md_get (a, "mismatch_cnt");
      /* md counts sectors, the engine 4 KiB blocks */
      job.mismatches = count ? g_ascii_strtoull (count, NULL, 10) / (4096 / SECTOR) : 0;
    }
  vb_backends_report_job (a->uuid, &job);
}

static void
clear_job_locked (MdArray *a)
{
  g_clear_pointer (&a->job_op, g_free);
  g_clear_pointer (&a->job_component, g_free);
  a->job_id = 0;
  a->job_slot = -1;
  a->job_seen = a->job_cancel = FALSE;
  a->job_bytes = a->job_done = 0;
}

static void
end_job_locked (MdArray *a)
{
  if (a->job_op == NULL)
    return;
  if (!a->job_cancel)
    a->job_done = a->job_bytes;
  report_job_locked (a, a->job_cancel ? VB_ENGINE_JOB_CANCELLED : VB_ENGINE_JOB_FINISHED);
  vb_report (a->name, VB_REPORT_INFO, "md's %s %s", a->job_op,
             a->job_cancel ? "cancelled" : "finished");
  clear_job_locked (a);
}

/* The slot md recovers onto, or -1 when no member is being rebuilt. */
static gint
rebuilt_slot_locked (MdArray *a)
{
  for (guint i = 0; i < a->n; i++)
    if (a->members[i] && a->members[i]->rebuilding && !a->members[i]->removed)
      return (gint) i;
  return -1;
}

void
md_jobs_locked (MdArray *a, GArray *pfds)
{
  g_autofree char *action = md_watch (a, "sync_action", pfds);
  g_autofree char *completed = NULL;
  gboolean running = action && strcmp (action, "idle") != 0 && strcmp (action, "frozen") != 0;
  const char *op = !running ? NULL : strcmp (action, "recover") == 0 ? "rebuild" : action;
  guint64 done = 0, total = 0;

  if (!running)
    {
      /* a rebuild never reported had nothing to rebuild; a check asked
       * for and not yet seen running stays a while */
      if (a->job_op && !a->job_seen && strcmp (a->job_op, "rebuild") == 0)
        clear_job_locked (a);
      else if (a->job_op
               && (a->job_seen || g_get_monotonic_time () - a->job_asked > 5 * G_USEC_PER_SEC))
        end_job_locked (a);
      return;
    }
  if (a->job_op && strcmp (a->job_op, op) != 0)
    {
      if (a->job_seen)
        end_job_locked (a);
      else if (strcmp (a->job_op, "rebuild") == 0)
        clear_job_locked (a);
    }
  if (a->job_op == NULL)
    {
      a->job_id = __atomic_fetch_add (&next_job_id, 1, __ATOMIC_RELAXED);
      a->job_op = g_strdup (op);
      a->job_asked = g_get_monotonic_time ();
    }
  if (!a->job_seen)
    {
      gint slot = strcmp (op, "rebuild") == 0 ? rebuilt_slot_locked (a) : -1;
      /* md says "recover" for a moment after a failure while it looks for
       * a spare: a rebuild is reported once vblk put a member in to
       * rebuild (the job names it, so the daemon records a spare in its
       * slot), or after REBUILD_UNNAMED_US of md's own */
      if (strcmp (op, "rebuild") == 0 && slot < 0
          && g_get_monotonic_time () - a->job_asked < REBUILD_UNNAMED_US)
        return;
      a->job_seen = TRUE;
      if (slot >= 0)
        {
          a->job_slot = slot;
          g_free (a->job_component);
          a->job_component = g_strdup (a->members[slot]->uuid);
        }
      vb_report (a->name, VB_REPORT_INFO, "md runs %s", op);
    }
  completed = md_get (a, "sync_completed");
  if (completed
      && sscanf (completed, "%" G_GUINT64_FORMAT " / %" G_GUINT64_FORMAT, &done, &total) == 2)
    {
      a->job_done = done * SECTOR;
      a->job_bytes = total * SECTOR;
    }
  report_job_locked (a, VB_ENGINE_JOB_RUNNING);
}

gboolean
md_check (const char *block_device, gboolean repair, guint64 *job, GError **error)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  g_autofree char *action = NULL;
  int r;

  /* not an md array (a device-mapper node of backend kernel): no copies */
  if (a == NULL || a->copies == 1)
    return vb_backend_errno (-ENOTSUP, error);
  g_mutex_lock (&a->lock);
  action = md_get (a, "sync_action");
  if (a->job_op || g_strcmp0 (action, "idle") != 0)
    {
      g_mutex_unlock (&a->lock);
      return vb_backend_errno (-EBUSY, error);
    }
  r = md_set (a, "sync_action", repair ? "repair" : "check");
  if (r < 0)
    {
      g_mutex_unlock (&a->lock);
      return vb_backend_errno (r, error);
    }
  a->job_id = __atomic_fetch_add (&next_job_id, 1, __ATOMIC_RELAXED);
  a->job_op = g_strdup (repair ? "repair" : "check");
  a->job_asked = g_get_monotonic_time ();
  *job = a->job_id;
  g_mutex_unlock (&a->lock);
  md_wake (a);
  return TRUE;
}

gboolean
md_cancel_job (const char *block_device, guint64 job, GError **error)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  int r;

  if (a == NULL)
    return vb_backend_errno (-ESRCH, error);
  g_mutex_lock (&a->lock);
  if (a->job_op == NULL || a->job_id != job)
    {
      g_mutex_unlock (&a->lock);
      return vb_backend_errno (-ESRCH, error);
    }
  a->job_cancel = TRUE;
  /* a check ends; a resync or recovery would start again at once, so md
   * is held (frozen) until the array starts again */
  r = md_set (a, "sync_action",
              strcmp (a->job_op, "check") == 0 || strcmp (a->job_op, "repair") == 0 ? "idle"
                                                                                    : "frozen");
  g_mutex_unlock (&a->lock);
  md_wake (a);
  return vb_backend_errno (r, error);
}
