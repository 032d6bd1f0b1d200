/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", md part: the monitor thread of an array (one per
 * array), vblkd playing the part mdmon plays for mdadm's external formats:
 * it waits on md's sysfs attributes (poll POLLPRI) and answers them. */
#include "config.h"

#include "md-array.h"
#include "vb-report.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

/* A member md marked faulty whose failure is not in the superblocks yet. */
static gboolean
unrecorded_failure_locked (MdArray *a)
{
  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autofree char *attr = NULL, *st = NULL;
      if (m == NULL || m->removed || m->failed)
        continue;
      attr = md_dev_attr (m, "state");
      st = md_get (a, attr);
      if (md_has_word (st, "faulty"))
        return TRUE;
    }
  return FALSE;
}

/* The members' states answered: failures recorded, then unblocked and
 * removed; recoveries recorded; spares placed. TRUE when something was
 * done. */
gboolean
md_members_locked (MdArray *a, GArray *pfds)
{
  gboolean acted = FALSE;

  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autofree char *attr = NULL, *st = NULL;
      if (m && m->removed && m->failed && a->spare_paths->len > 0 && md_take_spare_locked (a, i))
        {
          m = a->members[i];
          acted = TRUE;
        }
      if (m == NULL || m->removed)
        continue;
      attr = md_dev_attr (m, "state");
      st = md_watch (a, attr, pfds);
      if (st == NULL)
        {
          /* removed by someone else (mdadm --remove) */
          if (!m->failed)
            md_record_failure_locked (a, i, "left the array", FALSE);
          md_member_gone_locked (a, i, TRUE);
          acted = TRUE;
        }
      else if (md_has_word (st, "faulty"))
        {
          if (!m->failed)
            {
              if (!md_record_failure_locked (a, i, "was marked faulty by md", FALSE))
                continue; /* md keeps holding it; tried again at the next look */
              acted = TRUE;
            }
          /* md1: md unblocks it once its own superblocks say faulty */
          if (md_has_word (st, "blocked"))
            {
              g_autofree char *after = NULL;
              if (!a->native && md_set (a, attr, "-blocked") == 0)
                {
                  after = md_get (a, attr);
                  acted |= g_strcmp0 (after, st) != 0; /* no spinning on a state md keeps */
                }
            }
          else if (md_set (a, attr, "remove") == 0)
            {
              md_member_gone_locked (a, i, TRUE);
              acted = TRUE;
            }
        }
      else if (m->rebuilding && md_has_word (st, "in_sync"))
        {
          m->rebuilding = FALSE;
          if (a->meta)
            {
              a->sb.roles[i].state = VB_ROLE_IN_SYNC;
              md_write_all_locked (a);
            }
          vb_report (a->name, VB_REPORT_INFO, "component %u (%s) is in sync", i, m->path);
          acted = TRUE;
        }
    }
  return acted;
}

/* One look at the array: every change md announced answered. TRUE when
 * something was done, so the look is taken again at once. */
static gboolean
act_locked (MdArray *a, GArray *pfds)
{
  g_autofree char *state = md_watch (a, "array_state", pfds);
  gboolean acted;

  if (state == NULL || strcmp (state, "inactive") == 0 || strcmp (state, "clear") == 0)
    return FALSE; /* stopped under us */

  /* components first: a failure is in the superblocks before md goes on */
  acted = md_members_locked (a, pfds);

  if (a->native)
    ; /* md keeps its own superblocks clean and dirty */
  else if (strcmp (state, "write-pending") == 0)
    {
      if (a->sb.clean)
        {
          a->sb.clean = FALSE;
          md_write_all_locked (a);
        }
      /* "active" lets md acknowledge the writes it holds: a member that
       * failed since the look above is recorded first */
      if (unrecorded_failure_locked (a))
        acted = TRUE;
      else
        acted |= md_set (a, "array_state", "active") == 0;
    }
  else if (!a->read_only
           && (strcmp (state, "active-idle") == 0 || strcmp (state, "read-auto") == 0))
    acted |= md_set (a, "array_state", "clean") == 0;
  else if (strcmp (state, "clean") == 0 && a->meta && !a->sb.clean)
    {
      g_autofree char *resync = md_get (a, "resync_start");
      if (g_strcmp0 (resync, "none") == 0)
        {
          a->sb.clean = TRUE;
          md_write_all_locked (a);
          acted = TRUE;
        }
    }
  /* a job's end is heard with the states it leaves (a rebuilt slot in sync) */
  md_publish_status_locked (a);
  md_jobs_locked (a, pfds);
  return acted;
}

static gpointer
monitor_thread (gpointer data)
{
  MdArray *a = data;

  for (;;)
    {
      g_autoptr (GArray) pfds = g_array_new (FALSE, FALSE, sizeof (struct pollfd));
      struct pollfd w = { .fd = a->wake, .events = POLLIN };
      gboolean acted;
      int timeout;
      guint64 count;

      g_mutex_lock (&a->lock);
      if (a->stopping)
        {
          g_mutex_unlock (&a->lock);
          break;
        }
      acted = act_locked (a, pfds);
      md_publish_status_locked (a);
      timeout = a->job_op ? JOB_TICK_MS : IDLE_TICK_MS;
      g_mutex_unlock (&a->lock);
      if (!acted)
        {
          g_array_append_val (pfds, w);
          if (poll ((struct pollfd *) pfds->data, pfds->len, timeout) < 0 && errno != EINTR)
            g_usleep (100000);
          if (read (a->wake, &count, sizeof count) < 0 && errno != EAGAIN)
            g_debug ("%s: monitor wake: %s", a->md, g_strerror (errno));
        }
      for (guint i = 0; i < pfds->len; i++)
        if (g_array_index (pfds, struct pollfd, i).fd != a->wake)
          close (g_array_index (pfds, struct pollfd, i).fd);
    }
  return NULL;
}

void
md_monitor_start (MdArray *a)
{
  g_autofree char *name = g_strdup_printf ("md-%s", a->name);

  a->stopping = FALSE;
  a->thread = g_thread_new (name, monitor_thread, a);
}

void
md_monitor_stop (MdArray *a)
{
  if (a->thread == NULL)
    return;
  g_mutex_lock (&a->lock);
  a->stopping = TRUE;
  g_mutex_unlock (&a->lock);
  md_wake (a);
  g_thread_join (a->thread);
  a->thread = NULL;
}
