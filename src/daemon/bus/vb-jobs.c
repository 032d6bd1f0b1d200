/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Job objects: /org/vblk/VBlk1/jobs/N. Owners report from any thread;
 * what they report is kept under the job's lock and published on the main
 * thread, at most about four times a second (the final state at once). */
#include "config.h"

#include "vb-auth.h"
#include "vb-jobs.h"
#include "vb-jobs-math.h"
#include "vb-request.h"

#include <glib/gi18n.h>
#include <string.h>

/* Published updates of a running job are at least this far apart. */
#define PUBLISH_INTERVAL_US (G_USEC_PER_SEC / 4)
/* A running job is republished this often even without news, so that the
 * rate of a stalled job falls and its expected end moves. */
#define REFRESH_INTERVAL_MS 1000
#define MAX_ENDED_JOBS 32

struct _VbJobs {
  VbDaemon *daemon;
  guint last_id;
  GHashTable *by_path; /* object path -> VbJob* (a reference): the exported jobs */
  GQueue ended;        /* VbJob* (borrowed from by_path), in the order they ended */
};

struct _VbJob {
  gatomicrefcount ref;

  /* set by vb_job_new, constant afterwards */
  VbDaemon *daemon;
  GMainContext *context; /* the main thread's */
  guint id;
  char *path;
  char *operation;
  char **objects;
  char *device_name; /* for polkit; NULL when objects[0] is no device */
  gint64 start_real;
  gint64 start_mono;
  VbJobCancelFunc cancel;
  gpointer cancel_data;
  gint64 started_by; /* the caller's uid, -1 while not known (main thread) */

  GRecMutex lock; /* guards the fields down to the next comment */
  guint64 total;
  guint64 done;
  guint64 mismatches;
  gboolean ended; /* vb_job_finish() was called */
  char *final_state;
  char *message;
  gboolean publish_pending;
  gint64 next_publish_us; /* monotonic */
  gboolean cancel_asked;

  /* main thread only */
  VbJobs *jobs; /* NULL once unexported */
  VbDBusObjectSkeleton *object;
  VbDBusJob *iface;
  VbJobRate rate;
  guint refresh_id;
  gboolean end_published;
  gint64 last_publish_us;
};

VbJob *
vb_job_ref (VbJob *job)
{
  g_return_val_if_fail (job != NULL, NULL);
  g_atomic_ref_count_inc (&job->ref);
  return job;
}

void
vb_job_unref (VbJob *job)
{
  if (job == NULL || !g_atomic_ref_count_dec (&job->ref))
    return;
  g_assert (job->refresh_id == 0 && job->jobs == NULL);
  if (job->iface != NULL)
    g_signal_handlers_disconnect_by_data (job->iface, job);
  g_clear_object (&job->iface);
  g_clear_object (&job->object);
  g_main_context_unref (job->context);
  g_free (job->path);
  g_free (job->operation);
  g_strfreev (job->objects);
  g_free (job->device_name);
  g_rec_mutex_clear (&job->lock);
  g_free (job->final_state);
  g_free (job->message);
  g_free (job);
}

const char *
vb_job_object_path (VbJob *job)
{
  return job->path;
}

const char *
vb_job_device_path (VbJob *job)
{
  return job->objects[0];
}

const char *
vb_job_operation (VbJob *job)
{
  return job->operation;
}

gboolean
vb_job_is_running (VbJob *job)
{
  gboolean running;

  g_rec_mutex_lock (&job->lock);
  running = !job->ended;
  g_rec_mutex_unlock (&job->lock);
  return running;
}

static const char *
job_device_label (VbJob *job)
{
  return job->device_name ? job->device_name : job->objects[0];
}

/* Main thread: takes the job off the bus and out of the table. */
static void
drop (VbJob *job)
{
  VbJobs *jobs = job->jobs;

  g_clear_handle_id (&job->refresh_id, g_source_remove);
  if (jobs->daemon->bus->object_manager != NULL)
    g_dbus_object_manager_server_unexport (jobs->daemon->bus->object_manager, job->path);
  g_queue_remove (&jobs->ended, job);
  job->jobs = NULL;
  g_hash_table_steal (jobs->by_path, job->path);
  vb_job_unref (job);
}

static void
trim_ended (VbJobs *jobs)
{
  while (g_queue_get_length (&jobs->ended) > MAX_ENDED_JOBS)
    drop (g_queue_peek_head (&jobs->ended));
}

/* Main thread: what the owner reported, onto the bus. */
static void
publish (VbJob *job)
{
  gint64 now = g_get_monotonic_time ();
  gint64 now_real = g_get_real_time ();
  guint64 total, done, mismatches, rate, end;
  gboolean ended;
  g_autofree char *state = NULL;
  g_autofree char *message = NULL;

  g_rec_mutex_lock (&job->lock);
  total = job->total;
  done = job->done;
  mismatches = job->mismatches;
  ended = job->ended;
  state = g_strdup (job->final_state);
  message = g_strdup (job->message);
  job->next_publish_us = now + PUBLISH_INTERVAL_US;
  g_rec_mutex_unlock (&job->lock);

  if (job->jobs == NULL || job->end_published)
    return;
  job->last_publish_us = now;
  if (ended)
    {
      gint64 elapsed = now - job->start_mono;

      if (strcmp (state, "finished") == 0 && done < total)
        done = total;
      rate = elapsed > 0 ? (guint64) ((double) done * G_USEC_PER_SEC / (double) elapsed) : 0;
      end = (guint64) now_real;
    }
  else
    {
      vb_job_rate_add (&job->rate, now, done);
      rate = vb_job_rate_get (&job->rate);
      end = vb_job_expected_end (total, done, rate, now_real);
    }

  g_object_freeze_notify (G_OBJECT (job->iface));
  vb_dbus_job_set_progress (
      job->iface, ended && strcmp (state, "finished") == 0 ? 1.0 : vb_job_progress (done, total));
  vb_dbus_job_set_bytes (job->iface, total);
  vb_dbus_job_set_rate (job->iface, rate);
  vb_dbus_job_set_expected_end_time (job->iface, end);
  vb_dbus_job_set_bytes_done (job->iface, done);
  vb_dbus_job_set_mismatches (job->iface, mismatches);
  if (ended)
    {
      vb_dbus_job_set_message (job->iface, message ? message : "");
      vb_dbus_job_set_state (job->iface, state);
    }
  g_object_thaw_notify (G_OBJECT (job->iface));

  if (ended)
    {
      g_message ("vblk: %s: job %u (%s) %s%s%s", job_device_label (job), job->id, job->operation,
                 state, message && *message ? ": " : "", message ? message : "");
      /* the final properties reach clients before Completed does */
      g_dbus_interface_skeleton_flush (G_DBUS_INTERFACE_SKELETON (job->iface));
      vb_dbus_job_emit_completed (job->iface, strcmp (state, "finished") == 0,
                                  message ? message : "");
      job->end_published = TRUE;
      g_clear_handle_id (&job->refresh_id, g_source_remove);
      g_queue_push_tail (&job->jobs->ended, job);
      trim_ended (job->jobs);
    }
}

static gboolean
publish_cb (gpointer data)
{
  VbJob *job = data;

  g_rec_mutex_lock (&job->lock);
  job->publish_pending = FALSE;
  g_rec_mutex_unlock (&job->lock);
  publish (job);
  return G_SOURCE_REMOVE;
}

static gboolean
refresh_cb (gpointer data)
{
  VbJob *job = data;

  if (g_get_monotonic_time () - job->last_publish_us >= REFRESH_INTERVAL_MS * 1000 * 9 / 10)
    publish (job);
  return G_SOURCE_CONTINUE;
}

/* publish() on the main thread in @wait_us (or at once), holding a ref */
static void
post_publish (VbJob *job, gint64 wait_us)
{
  GSource *source = wait_us > 0 ? g_timeout_source_new ((guint) ((wait_us + 999) / 1000))
                                : g_idle_source_new ();

  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, publish_cb, vb_job_ref (job), (GDestroyNotify) vb_job_unref);
  g_source_attach (source, job->context);
  g_source_unref (source);
}

/* With the lock held: a publish within the rate limit, unless one is
 * pending already. */
static void
schedule_publish_locked (VbJob *job)
{
  if (job->publish_pending)
    return;
  job->publish_pending = TRUE;
  post_publish (job, job->next_publish_us - g_get_monotonic_time ());
}

void
vb_job_update (VbJob *job, guint64 done_bytes, guint64 mismatches)
{
  g_return_if_fail (job != NULL);

  g_rec_mutex_lock (&job->lock);
  if (!job->ended)
    {
      job->done = done_bytes;
      job->mismatches = mismatches;
      schedule_publish_locked (job);
    }
  g_rec_mutex_unlock (&job->lock);
}

void
vb_job_set_total (VbJob *job, guint64 total_bytes)
{
  g_return_if_fail (job != NULL);

  g_rec_mutex_lock (&job->lock);
  if (!job->ended)
    {
      job->total = total_bytes;
      schedule_publish_locked (job);
    }
  g_rec_mutex_unlock (&job->lock);
}

void
vb_job_finish (VbJob *job, const char *state, const char *message)
{
  g_return_if_fail (job != NULL);
  g_return_if_fail (g_strcmp0 (state, "finished") == 0 || g_strcmp0 (state, "cancelled") == 0
                    || g_strcmp0 (state, "failed") == 0);

  g_rec_mutex_lock (&job->lock);
  if (job->ended)
    {
      g_rec_mutex_unlock (&job->lock);
      g_critical ("vblk: %s: job %u (%s) finished twice (%s, then %s)", job_device_label (job),
                  job->id, job->operation, job->final_state, state);
      return;
    }
  job->ended = TRUE;
  job->final_state = g_strdup (state);
  job->message = g_strdup (message);
  g_rec_mutex_unlock (&job->lock);
  /* the main thread publishes right here; another thread posts it (never
   * g_main_context_invoke: it would run publish() on this thread while the
   * main loop is not running, e.g. during shutdown) */
  if (g_main_context_is_owner (job->context))
    publish (job);
  else
    post_publish (job, 0);
}

static const char *const no_options[] = { NULL };

static void
cancel_authorized (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
{
  g_autoptr (VbJob) job = user_data;
  g_autoptr (GVariant) options = NULL;
  g_autoptr (GError) error = NULL;

  g_variant_get (g_dbus_method_invocation_get_parameters (invocation), "(@a{sv})", &options);
  if (!vb_options_check (options, no_options, &error))
    {
      vb_invocation_return_gerror (invocation, error);
      return;
    }
  g_rec_mutex_lock (&job->lock);
  if (job->ended)
    g_set_error (&error, VB_ERROR, VB_ERROR_BUSY, _ ("job %u (%s of %s) is %s"), job->id,
                 job->operation, job_device_label (job), job->final_state);
  else if (job->cancel == NULL)
    g_set_error (&error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                 _ ("job %u (%s of %s) cannot be cancelled"), job->id, job->operation,
                 job_device_label (job));
  else if (!job->cancel_asked)
    {
      g_message ("vblk: %s: job %u (%s): cancel requested", job_device_label (job), job->id,
                 job->operation);
      job->cancel_asked = TRUE;
      job->cancel (job, job->cancel_data);
    }
  g_rec_mutex_unlock (&job->lock);
  if (error)
    vb_invocation_return_gerror (invocation, error);
  else
    g_dbus_method_invocation_return_value (invocation, NULL);
}

typedef struct {
  VbJob *job;
  GDBusMethodInvocation *invocation;
} CancelRequest;

/* The user who started the job cancels it as it is; anyone else needs
 * org.vblk.manage (UDisks: cancel-job-other-user). */
static void
cancel_caller_known (gboolean known, guint32 uid, gpointer data)
{
  CancelRequest *req = data;
  VbJob *job = req->job;

  if (known && job->started_by >= 0 && (gint64) uid == job->started_by)
    cancel_authorized (job->daemon, req->invocation, job); /* takes the reference */
  else
    vb_auth_check (job->daemon, req->invocation, "org.vblk.manage", job->device_name,
                   cancel_authorized, job, (GDestroyNotify) vb_job_unref);
  g_object_unref (req->invocation);
  g_free (req);
}

static gboolean
handle_cancel (VbDBusJob *iface, GDBusMethodInvocation *invocation, GVariant *options, VbJob *job)
{
  CancelRequest *req = g_new0 (CancelRequest, 1);

  req->job = vb_job_ref (job);
  req->invocation = g_object_ref (invocation);
  vb_auth_caller_uid (invocation, cancel_caller_known, req);
  return TRUE;
}

static void
started_by_known (gboolean known, guint32 uid, gpointer data)
{
  VbJob *job = data;

  if (known && job->iface)
    {
      job->started_by = uid;
      vb_dbus_job_set_started_by_uid (job->iface, uid);
    }
  vb_job_unref (job);
}

void
vb_job_set_started_by (VbJob *job, GDBusMethodInvocation *invocation)
{
  vb_auth_caller_uid (invocation, started_by_known, vb_job_ref (job));
}

/* "/org/vblk/VBlk1/devices/NAME" -> NAME; NULL for other paths. */
static char *
device_name_of (const char *path)
{
  const char *prefix = VB_OBJECT_ROOT "/devices/";
  const char *element;

  if (!g_str_has_prefix (path, prefix))
    return NULL;
  element = path + strlen (prefix);
  if (*element == '\0' || strchr (element, '/') != NULL)
    return NULL;
  return vb_object_path_unescape (element);
}

VbJob *
vb_job_new (VbDaemon *daemon, const char *operation, const char *const *objects,
            guint64 total_bytes, VbJobCancelFunc cancel, gpointer cancel_data)
{
  VbJobs *jobs;
  VbJob *job;

  g_return_val_if_fail (daemon != NULL && daemon->bus->jobs != NULL, NULL);
  g_return_val_if_fail (daemon->bus->object_manager != NULL, NULL);
  g_return_val_if_fail (operation != NULL, NULL);
  g_return_val_if_fail (objects != NULL && objects[0] != NULL, NULL);
  for (guint i = 0; objects[i]; i++)
    g_return_val_if_fail (g_variant_is_object_path (objects[i]), NULL);

  jobs = daemon->bus->jobs;
  job = g_new0 (VbJob, 1);
  g_atomic_ref_count_init (&job->ref);
  g_rec_mutex_init (&job->lock);
  job->daemon = daemon;
  job->context = g_main_context_ref_thread_default ();
  job->id = ++jobs->last_id;
  job->path = g_strdup_printf (VB_OBJECT_ROOT "/jobs/%u", job->id);
  job->operation = g_strdup (operation);
  job->objects = g_strdupv ((char **) objects);
  job->device_name = device_name_of (objects[0]);
  job->total = total_bytes;
  job->start_real = g_get_real_time ();
  job->start_mono = g_get_monotonic_time ();
  job->cancel = cancel;
  job->cancel_data = cancel_data;
  job->started_by = -1;
  vb_job_rate_init (&job->rate);
  vb_job_rate_add (&job->rate, job->start_mono, 0);
  job->last_publish_us = job->start_mono;
  job->next_publish_us = job->start_mono + PUBLISH_INTERVAL_US;

  job->iface = vb_dbus_job_skeleton_new ();
  vb_dbus_job_set_operation (job->iface, operation);
  vb_dbus_job_set_state (job->iface, "running");
  vb_dbus_job_set_progress (job->iface, 0.0);
  vb_dbus_job_set_rate (job->iface, 0);
  vb_dbus_job_set_expected_end_time (job->iface, 0);
  vb_dbus_job_set_start_time (job->iface, (guint64) job->start_real);
  vb_dbus_job_set_objects (job->iface, objects);
  vb_dbus_job_set_bytes (job->iface, total_bytes);
  vb_dbus_job_set_bytes_done (job->iface, 0);
  vb_dbus_job_set_mismatches (job->iface, 0);
  vb_dbus_job_set_message (job->iface, "");
  vb_dbus_job_set_cancelable (job->iface, cancel != NULL);
  vb_dbus_job_set_started_by_uid (job->iface, 0);
  g_signal_connect (job->iface, "handle-cancel", G_CALLBACK (handle_cancel), job);
  job->object = vb_dbus_object_skeleton_new (job->path);
  vb_dbus_object_skeleton_set_job (job->object, job->iface);

  job->jobs = jobs;
  g_hash_table_insert (jobs->by_path, job->path, vb_job_ref (job));
  job->refresh_id = g_timeout_add (REFRESH_INTERVAL_MS, refresh_cb, job);
  g_dbus_object_manager_server_export (daemon->bus->object_manager,
                                       G_DBUS_OBJECT_SKELETON (job->object));
  g_debug ("vblk: %s: job %u (%s) started, %" G_GUINT64_FORMAT " bytes", job_device_label (job),
           job->id, operation, total_bytes);
  return job;
}

VbJobs *
vb_jobs_new (VbDaemon *daemon)
{
  VbJobs *jobs = g_new0 (VbJobs, 1);

  jobs->daemon = daemon;
  jobs->by_path = g_hash_table_new (g_str_hash, g_str_equal);
  g_queue_init (&jobs->ended);
  return jobs;
}

static gint
compare_ids (gconstpointer a, gconstpointer b)
{
  guint ia = (*(VbJob *const *) a)->id;
  guint ib = (*(VbJob *const *) b)->id;

  return ia < ib ? -1 : ia > ib;
}

/* The exported jobs, references, in order of their numbers; @device_path
 * (if not NULL) keeps those of one device only. */
static GPtrArray *
list_jobs (VbJobs *jobs, const char *device_path)
{
  GPtrArray *list = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_job_unref);
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, jobs->by_path);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      VbJob *job = value;
      if (device_path == NULL || strcmp (job->objects[0], device_path) == 0)
        g_ptr_array_add (list, vb_job_ref (job));
    }
  g_ptr_array_sort (list, compare_ids);
  return list;
}

void
vb_jobs_free (VbJobs *jobs)
{
  g_autoptr (GPtrArray) list = NULL;

  if (jobs == NULL)
    return;
  list = list_jobs (jobs, NULL);
  for (guint i = 0; i < list->len; i++)
    drop (list->pdata[i]);
  g_hash_table_unref (jobs->by_path);
  g_queue_clear (&jobs->ended);
  g_free (jobs);
}

VbJob *
vb_jobs_find_running (VbDaemon *daemon, const char *device_object_path)
{
  g_autoptr (GPtrArray) list = list_jobs (daemon->bus->jobs, device_object_path);

  /* the table keeps its reference: borrowed is safe on the main thread */
  for (guint i = 0; i < list->len; i++)
    if (vb_job_is_running (list->pdata[i]))
      return list->pdata[i];
  return NULL;
}

guint
vb_jobs_cancel_device (VbDaemon *daemon, const char *device_object_path)
{
  g_autoptr (GPtrArray) list = list_jobs (daemon->bus->jobs, device_object_path);
  guint asked = 0;

  /* a list, not the table: a cancel function may finish its job, which
   * can drop older ones from the table */
  for (guint i = 0; i < list->len; i++)
    {
      VbJob *job = list->pdata[i];

      g_rec_mutex_lock (&job->lock);
      if (!job->ended && job->cancel != NULL)
        {
          if (!job->cancel_asked)
            {
              job->cancel_asked = TRUE;
              job->cancel (job, job->cancel_data);
            }
          asked++;
        }
      g_rec_mutex_unlock (&job->lock);
    }
  return asked;
}

void
vb_jobs_forget_device (VbDaemon *daemon, const char *device_object_path)
{
  g_autoptr (GPtrArray) list = list_jobs (daemon->bus->jobs, device_object_path);

  for (guint i = 0; i < list->len; i++)
    {
      VbJob *job = list->pdata[i];

      if (job->jobs == NULL || vb_job_is_running (job))
        continue;
      publish (job); /* the end, if it was reported but not published yet */
      if (job->jobs != NULL)
        drop (job);
    }
}
