/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr jobs and wait: the Job objects of vblkd (resync, rebuild, check,
 * repair), listed, or waited for with a progress line on a terminal. Only
 * properties are read, so neither needs authorization. */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "vb-error.h"
#include "vb-jobs-math.h"
#include "vb-util.h"

#define JOBS_PATH_PREFIX VB_OBJECT_ROOT "/jobs/"
#define BAR_WIDTH 10

/* One job as vbmgr sees it: its number (from the path) and its proxy. */
typedef struct {
  guint64 id;
  char *path;
  VbDBusJob *job;
} VbMgrJob;

static void
vb_mgr_job_free (VbMgrJob *j)
{
  if (j == NULL)
    return;
  g_free (j->path);
  g_clear_object (&j->job);
  g_free (j);
}

/* "/org/vblk/VBlk1/jobs/N" -> N; FALSE for other paths. */
static gboolean
vb_mgr_job_id_from_path (const char *path, guint64 *id)
{
  return g_str_has_prefix (path, JOBS_PATH_PREFIX)
         && g_ascii_string_to_unsigned (path + strlen (JOBS_PATH_PREFIX), 10, 1, G_MAXUINT, id,
                                        NULL);
}

static VbMgrJob *
vb_mgr_job_get (GDBusObjectManager *manager, const char *path)
{
  g_autoptr (GDBusObject) object = NULL;
  VbDBusJob *job = NULL;
  VbMgrJob *j;
  guint64 id;

  if (!g_variant_is_object_path (path) || !vb_mgr_job_id_from_path (path, &id))
    return NULL;
  object = g_dbus_object_manager_get_object (manager, path);
  if (object != NULL)
    job = vb_dbus_object_get_job (VB_DBUS_OBJECT (object));
  if (job == NULL)
    return NULL;
  j = g_new0 (VbMgrJob, 1);
  j->id = id;
  j->path = g_strdup (path);
  j->job = job;
  return j;
}

static gint
vb_mgr_compare_jobs (gconstpointer a, gconstpointer b)
{
  const VbMgrJob *ja = *(VbMgrJob *const *) a;
  const VbMgrJob *jb = *(VbMgrJob *const *) b;

  return ja->id < jb->id ? -1 : ja->id > jb->id;
}

/* Every job (VbMgrJob*), by number. */
static GPtrArray *
vb_mgr_list_jobs (GDBusObjectManager *manager)
{
  GPtrArray *jobs = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_mgr_job_free);
  GList *objects = g_dbus_object_manager_get_objects (manager);

  for (GList *l = objects; l != NULL; l = l->next)
    {
      VbMgrJob *j = vb_mgr_job_get (manager, g_dbus_object_get_object_path (l->data));

      if (j != NULL)
        g_ptr_array_add (jobs, j);
    }
  g_list_free_full (objects, g_object_unref);
  g_ptr_array_sort (jobs, vb_mgr_compare_jobs);
  return jobs;
}

static const char *
vb_mgr_job_state (VbDBusJob *job)
{
  return vb_mgr_str (vb_dbus_job_get_state (job));
}

static gboolean
vb_mgr_job_running (VbDBusJob *job)
{
  return strcmp (vb_mgr_job_state (job), "running") == 0;
}

/* Object path of the job's device ("" when it names none). */
static const char *
vb_mgr_job_device_path (VbDBusJob *job)
{
  const char *const *objects = vb_dbus_job_get_objects (job);

  return objects != NULL && objects[0] != NULL ? objects[0] : "";
}

static char *
vb_mgr_job_device_name (GDBusObjectManager *manager, VbDBusJob *job)
{
  const char *path = vb_mgr_job_device_path (job);

  return *path != '\0' ? vb_mgr_device_name_from_path (manager, path) : g_strdup ("");
}

/* Seconds until the expected end, rounded up; -1 when unknown. */
static gint64
vb_mgr_job_eta (VbDBusJob *job)
{
  guint64 end = vb_dbus_job_get_expected_end_time (job);
  gint64 now = g_get_real_time ();

  if (end == 0 || !vb_mgr_job_running (job))
    return -1;
  if ((gint64) end <= now)
    return 0;
  return ((gint64) end - now + G_USEC_PER_SEC - 1) / G_USEC_PER_SEC;
}

static gboolean
vb_mgr_job_counts_mismatches (VbDBusJob *job)
{
  const char *operation = vb_mgr_str (vb_dbus_job_get_operation (job));

  return strcmp (operation, "check") == 0 || strcmp (operation, "repair") == 0;
}

static void
vb_mgr_job_to_json (JsonBuilder *builder, GDBusObjectManager *manager, VbMgrJob *j)
{
  VbDBusJob *job = j->job;
  g_autofree char *device = vb_mgr_job_device_name (manager, job);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "id");
  json_builder_add_int_value (builder, (gint64) j->id);
  json_builder_set_member_name (builder, "path");
  json_builder_add_string_value (builder, j->path);
  json_builder_set_member_name (builder, "operation");
  json_builder_add_string_value (builder, vb_mgr_str (vb_dbus_job_get_operation (job)));
  json_builder_set_member_name (builder, "device");
  json_builder_add_string_value (builder, device);
  json_builder_set_member_name (builder, "objects");
  json_builder_begin_array (builder);
  for (const char *const *o = vb_dbus_job_get_objects (job); o && *o; o++)
    json_builder_add_string_value (builder, *o);
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "state");
  json_builder_add_string_value (builder, vb_mgr_job_state (job));
  json_builder_set_member_name (builder, "progress");
  json_builder_add_double_value (builder, vb_dbus_job_get_progress (job));
  json_builder_set_member_name (builder, "rate");
  json_builder_add_int_value (builder, (gint64) vb_dbus_job_get_rate (job));
  json_builder_set_member_name (builder, "expected_end_time");
  json_builder_add_int_value (builder, (gint64) vb_dbus_job_get_expected_end_time (job));
  json_builder_set_member_name (builder, "start_time");
  json_builder_add_int_value (builder, (gint64) vb_dbus_job_get_start_time (job));
  json_builder_set_member_name (builder, "bytes");
  json_builder_add_int_value (builder, (gint64) vb_dbus_job_get_bytes (job));
  json_builder_set_member_name (builder, "bytes_done");
  json_builder_add_int_value (builder, (gint64) vb_dbus_job_get_bytes_done (job));
  json_builder_set_member_name (builder, "mismatches");
  json_builder_add_int_value (builder, (gint64) vb_dbus_job_get_mismatches (job));
  json_builder_set_member_name (builder, "message");
  json_builder_add_string_value (builder, vb_mgr_str (vb_dbus_job_get_message (job)));
  json_builder_set_member_name (builder, "cancelable");
  json_builder_add_boolean_value (builder, vb_dbus_job_get_cancelable (job));
  json_builder_set_member_name (builder, "started_by_uid");
  json_builder_add_int_value (builder, vb_dbus_job_get_started_by_uid (job));
  json_builder_end_object (builder);
}

static char *
vb_mgr_percent (double progress)
{
  /* rounded down, as the progress line: no "100.0%" while work is left */
  guint tenths = (guint) (CLAMP (progress, 0.0, 1.0) * 1000.0 + 1e-6);

  return g_strdup_printf ("%u.%u%%", tenths / 10, tenths % 10);
}

static char **
vb_mgr_job_row (GDBusObjectManager *manager, VbMgrJob *j)
{
  VbDBusJob *job = j->job;
  char **row = g_new0 (char *, 10);
  g_autofree char *done
      = g_format_size_full (vb_dbus_job_get_bytes_done (job), G_FORMAT_SIZE_IEC_UNITS);
  g_autofree char *total
      = g_format_size_full (vb_dbus_job_get_bytes (job), G_FORMAT_SIZE_IEC_UNITS);
  gint64 eta = vb_mgr_job_eta (job);

  row[0] = g_strdup_printf ("%" G_GUINT64_FORMAT, j->id);
  row[1] = g_strdup (vb_mgr_str (vb_dbus_job_get_operation (job)));
  row[2] = vb_mgr_job_device_name (manager, job);
  row[3] = g_strdup (vb_mgr_job_state (job));
  row[4] = vb_mgr_percent (vb_dbus_job_get_progress (job));
  row[5] = vb_job_format_rate (vb_dbus_job_get_rate (job));
  row[6] = vb_mgr_job_running (job) ? vb_job_format_duration (eta) : g_strdup ("-");
  row[7] = g_strdup_printf ("%s/%s", done, total);
  row[8] = vb_mgr_job_counts_mismatches (job)
               ? g_strdup_printf ("%" G_GUINT64_FORMAT, vb_dbus_job_get_mismatches (job))
               : g_strdup ("-");
  return row;
}

int
vb_cmd_jobs (int argc, char **argv)
{
  static const char *const header[] = {
    N_ ("JOB"),  N_ ("OPERATION"), N_ ("DEVICE"),     N_ ("STATE"),      N_ ("PROGRESS"),
    N_ ("RATE"), N_ ("ETA"),       N_ ("DONE/TOTAL"), N_ ("MISMATCHES"), NULL,
  };
  static const VbMgrListing listing = {
    .command = "jobs",
    .summary = N_ ("List the jobs: resync, rebuild, check and repair, running or "
                   "recently ended."),
    .header = header,
    .collect = vb_mgr_list_jobs,
    .row = (char **(*) (GDBusObjectManager *, gpointer)) vb_mgr_job_row,
    .to_json = (VbMgrToJsonFunc) vb_mgr_job_to_json,
  };

  return vb_mgr_run_listing (&listing, argc, argv);
}

/* vbmgr wait */

#define SETTLE_MS 3000

typedef struct {
  GDBusObjectManager *manager;
  GMainLoop *loop;
  const char *target;  /* as written on the command line */
  char *job_path;      /* waiting for this job, */
  char *device_path;   /* or until no job of this device runs, */
  const char *state;   /* or until the device's State is this */
  gboolean gone;       /* the device went away */
  guint settle_id;     /* no job runs, the device still degraded: a moment for its state */
  GHashTable *watched; /* path -> VbMgrJob*: the jobs waited for */
  gboolean tty;
  gboolean drawn;
  char *last_line; /* what is drawn */
  gboolean timed_out;
  gboolean lost; /* vblkd went away */
  gboolean done; /* stop waiting */
  guint timeout_id;
  double timeout;
} VbMgrWait;

static void
vb_mgr_wait_clear_line (VbMgrWait *w)
{
  if (w->drawn)
    g_printerr ("\r\033[K");
  w->drawn = FALSE;
  g_clear_pointer (&w->last_line, g_free);
}

static void
vb_mgr_wait_draw (VbMgrWait *w, VbDBusJob *job)
{
  g_autofree char *device = NULL;
  g_autofree char *line = NULL;
  struct winsize ws;

  if (!w->tty)
    return;
  if (job == NULL)
    {
      vb_mgr_wait_clear_line (w);
      return;
    }
  device = vb_mgr_job_device_name (w->manager, job);
  line = vb_job_format_progress_line (
      vb_dbus_job_get_progress (job), vb_dbus_job_get_rate (job), vb_mgr_job_eta (job),
      vb_mgr_str (vb_dbus_job_get_operation (job)), device, BAR_WIDTH);
  /* one line: never wrap, or "\r" no longer goes back to its start */
  if (ioctl (STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && strlen (line) >= ws.ws_col)
    line[ws.ws_col - 1] = '\0';
  if (w->drawn && g_strcmp0 (line, w->last_line) == 0)
    return;
  g_printerr ("\r%s\033[K", line);
  w->drawn = TRUE;
  g_free (w->last_line);
  w->last_line = g_steal_pointer (&line);
}

/* The watched jobs, by number (borrowed). */
static GPtrArray *
vb_mgr_wait_sorted (VbMgrWait *w)
{
  GPtrArray *jobs = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, w->watched);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (jobs, value);
  g_ptr_array_sort (jobs, vb_mgr_compare_jobs);
  return jobs;
}

static void
vb_mgr_wait_stop (VbMgrWait *w)
{
  g_clear_handle_id (&w->settle_id, g_source_remove);
  w->done = TRUE;
  g_main_loop_quit (w->loop);
}

/* The watched job to show: the running one with the lowest number. */
static VbDBusJob *
vb_mgr_wait_shown_job (VbMgrWait *w)
{
  GHashTableIter iter;
  gpointer value;
  VbMgrJob *best = NULL;

  g_hash_table_iter_init (&iter, w->watched);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      VbMgrJob *j = value;
      if (vb_mgr_job_running (j->job) && (best == NULL || j->id < best->id))
        best = j;
    }
  return best ? best->job : NULL;
}

static char *vb_mgr_wait_device_state (VbMgrWait *w);

/* Whether a component of the degraded device shows "rebuilding" or
 * "spare": a rebuild just ended (its slot not recorded in sync yet) or is
 * about to begin (a spare about to take the failed slot). */
static gboolean
vb_mgr_wait_rebuilding (VbMgrWait *w)
{
  g_autoptr (GDBusObject) object = g_dbus_object_manager_get_object (w->manager, w->device_path);
  g_autoptr (VbDBusDevice) device
      = object ? vb_dbus_object_get_device (VB_DBUS_OBJECT (object)) : NULL;
  const char *const *paths = device ? vb_dbus_device_get_components (device) : NULL;

  for (guint i = 0; paths && paths[i]; i++)
    {
      g_autoptr (VbDBusComponent) c = vb_mgr_lookup_component (w->manager, paths[i]);
      if (c
          && (g_strcmp0 (vb_dbus_component_get_state (c), "rebuilding") == 0
              || g_strcmp0 (vb_dbus_component_get_state (c), "spare") == 0))
        return TRUE;
    }
  return FALSE;
}

static gboolean
vb_mgr_wait_settled (gpointer user_data)
{
  VbMgrWait *w = user_data;

  w->settle_id = 0;
  vb_mgr_wait_stop (w);
  return G_SOURCE_REMOVE;
}

/* The device's last job ended and it still shows degraded or failed with
 * a component rebuilding or a spare: its state follows the job's end by a moment (a
 * rebuilt leg is in sync once vblkd recorded it), so the wait gives it
 * SETTLE_MS before it says so. TRUE while it waits. */
static gboolean
vb_mgr_wait_settling (VbMgrWait *w)
{
  g_autofree char *state = vb_mgr_wait_device_state (w);

  if (state == NULL || (strcmp (state, "degraded") != 0 && strcmp (state, "failed") != 0)
      || !vb_mgr_wait_rebuilding (w))
    return FALSE;
  if (w->settle_id == 0)
    w->settle_id = g_timeout_add (SETTLE_MS, vb_mgr_wait_settled, w);
  return TRUE;
}

/* Looks again at everything; quits the loop once nothing watched runs. */
static void
vb_mgr_wait_check (VbMgrWait *w)
{
  g_autofree char *owner
      = g_dbus_object_manager_client_get_name_owner (G_DBUS_OBJECT_MANAGER_CLIENT (w->manager));
  gboolean running = FALSE;
  GHashTableIter iter;
  gpointer value;

  if (w->done)
    return;
  if (owner == NULL)
    {
      w->lost = TRUE;
      vb_mgr_wait_stop (w);
      return;
    }
  if (w->state != NULL)
    {
      g_autoptr (GDBusObject) object
          = g_dbus_object_manager_get_object (w->manager, w->device_path);
      g_autoptr (VbDBusDevice) device
          = object ? vb_dbus_object_get_device (VB_DBUS_OBJECT (object)) : NULL;

      w->gone = device == NULL;
      if (w->gone || g_strcmp0 (vb_dbus_device_get_state (device), w->state) == 0)
        vb_mgr_wait_stop (w);
      return;
    }
  if (w->device_path != NULL)
    {
      g_autoptr (GPtrArray) jobs = vb_mgr_list_jobs (w->manager);

      /* jobs of the device that run now, including ones started since */
      for (guint i = 0; i < jobs->len; i++)
        {
          VbMgrJob *j = jobs->pdata[i];

          if (vb_mgr_job_running (j->job)
              && strcmp (vb_mgr_job_device_path (j->job), w->device_path) == 0
              && !g_hash_table_contains (w->watched, j->path))
            {
              g_hash_table_insert (w->watched, j->path, j);
              jobs->pdata[i] = NULL; /* moved: the free function skips NULL */
            }
        }
    }
  g_hash_table_iter_init (&iter, w->watched);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      VbMgrJob *j = value;
      g_autoptr (GDBusObject) object = g_dbus_object_manager_get_object (w->manager, j->path);

      /* a job gone from the bus keeps its last known state in our proxy */
      if (object != NULL && vb_mgr_job_running (j->job))
        running = TRUE;
    }
  if (running)
    g_clear_handle_id (&w->settle_id, g_source_remove); /* a new job: no settling */
  else if (w->device_path != NULL && vb_mgr_wait_settling (w))
    return;
  if (!running)
    vb_mgr_wait_stop (w);
  else
    vb_mgr_wait_draw (w, vb_mgr_wait_shown_job (w));
}

static void
vb_mgr_wait_on_properties (GDBusObjectManagerClient *manager, GDBusObjectProxy *object,
                           GDBusProxy *proxy, GVariant *changed, GStrv invalidated,
                           gpointer user_data)
{
  vb_mgr_wait_check (user_data);
}

static void
vb_mgr_wait_on_object (GDBusObjectManager *manager, GDBusObject *object, gpointer user_data)
{
  vb_mgr_wait_check (user_data);
}

static void
vb_mgr_wait_on_owner (GObject *manager, GParamSpec *pspec, gpointer user_data)
{
  vb_mgr_wait_check (user_data);
}

static gboolean
vb_mgr_wait_on_timeout (gpointer user_data)
{
  VbMgrWait *w = user_data;

  w->timed_out = TRUE;
  w->timeout_id = 0;
  vb_mgr_wait_stop (w);
  return G_SOURCE_REMOVE;
}

static gboolean
vb_mgr_wait_on_tick (gpointer user_data)
{
  VbMgrWait *w = user_data;

  /* the ETA counts down between updates */
  vb_mgr_wait_draw (w, vb_mgr_wait_shown_job (w));
  return G_SOURCE_CONTINUE;
}

/* The device's State; NULL when it is gone. */
static char *
vb_mgr_wait_device_state (VbMgrWait *w)
{
  g_autoptr (GDBusObject) object = g_dbus_object_manager_get_object (w->manager, w->device_path);
  g_autoptr (VbDBusDevice) device
      = object ? vb_dbus_object_get_device (VB_DBUS_OBJECT (object)) : NULL;

  return device ? g_strdup (vb_dbus_device_get_state (device)) : NULL;
}

/* A device waited for: where it ended. Jobs cancelled on the way (one
 * superseded by the next, as a resync by the rebuild onto a spare) are no
 * failure, as under mdadm --wait; a device left degraded or failed is. */
static int
vb_mgr_wait_report_device (VbMgrWait *w, int status)
{
  g_autofree char *state = vb_mgr_wait_device_state (w);

  if (state == NULL)
    {
      g_printerr (_ ("vbmgr: wait %s: NotFound: the device went away\n"), w->target);
      return VB_EXIT_FAILED;
    }
  if (w->state != NULL && w->timed_out)
    {
      g_printerr (_ ("vbmgr: wait %s: timed out after %g s: the device is %s, not %s\n"), w->target,
                  w->timeout, state, w->state);
      return VB_EXIT_FAILED;
    }
  if (w->state == NULL && !w->timed_out
      && (strcmp (state, "degraded") == 0 || strcmp (state, "failed") == 0))
    {
      g_printerr (_ ("vbmgr: wait %s: no job runs, and the device is %s (vbmgr show %s)\n"),
                  w->target, state, w->target);
      return VB_EXIT_FAILED;
    }
  return status;
}

/* Prints why each watched job did not finish; the exit code. */
static int
vb_mgr_wait_report (VbMgrWait *w)
{
  g_autoptr (GPtrArray) jobs = vb_mgr_wait_sorted (w);
  int status = VB_EXIT_OK;

  if (w->lost)
    {
      g_autoptr (GError) error
          = g_error_new (G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER,
                         _ ("vblkd went away while vbmgr waited for %s"), w->target);
      return vb_mgr_fail ("wait", w->target, error);
    }
  for (guint i = 0; i < jobs->len; i++)
    {
      VbMgrJob *j = jobs->pdata[i];
      const char *state = vb_mgr_job_state (j->job);
      const char *message = vb_mgr_str (vb_dbus_job_get_message (j->job));
      const char *operation = vb_mgr_str (vb_dbus_job_get_operation (j->job));
      g_autoptr (GDBusObject) object = g_dbus_object_manager_get_object (w->manager, j->path);
      g_autofree char *what = g_strdup_printf (_ ("job %" PRIu64 " (%s)"), j->id, operation);

      if (strcmp (state, "finished") == 0
          || (w->job_path == NULL && strcmp (state, "cancelled") == 0))
        continue;
      status = VB_EXIT_FAILED;
      if (strcmp (state, "running") != 0)
        g_printerr ("vbmgr: wait %s: %s %s%s%s\n", w->target, what, state, *message ? ": " : "",
                    message);
      else if (object == NULL)
        g_printerr (_ ("vbmgr: wait %s: %s went away before it ended\n"), w->target, what);
      else if (w->timed_out)
        {
          g_autofree char *percent = vb_mgr_percent (vb_dbus_job_get_progress (j->job));

          g_printerr (_ ("vbmgr: wait %s: timed out after %g s: %s is at %s\n"), w->target,
                      w->timeout, what, percent);
        }
    }
  return w->job_path == NULL ? vb_mgr_wait_report_device (w, status) : status;
}

static int
vb_mgr_wait_run (VbMgrWait *w, gboolean json)
{
  gulong handlers[4];
  guint tick_id = 0;
  int status;

  w->loop = g_main_loop_new (NULL, FALSE);
  handlers[0] = g_signal_connect (w->manager, "interface-proxy-properties-changed",
                                  G_CALLBACK (vb_mgr_wait_on_properties), w);
  handlers[1]
      = g_signal_connect (w->manager, "object-added", G_CALLBACK (vb_mgr_wait_on_object), w);
  handlers[2]
      = g_signal_connect (w->manager, "object-removed", G_CALLBACK (vb_mgr_wait_on_object), w);
  handlers[3]
      = g_signal_connect (w->manager, "notify::name-owner", G_CALLBACK (vb_mgr_wait_on_owner), w);
  if (w->timeout >= 0)
    w->timeout_id = g_timeout_add ((guint) MIN (w->timeout * 1000.0, (double) G_MAXUINT),
                                   vb_mgr_wait_on_timeout, w);
  if (w->tty)
    tick_id = g_timeout_add_seconds (1, vb_mgr_wait_on_tick, w);

  /* returns at once when nothing watched runs */
  vb_mgr_wait_check (w);
  if (!w->done)
    g_main_loop_run (w->loop);

  g_clear_handle_id (&w->timeout_id, g_source_remove);
  g_clear_handle_id (&tick_id, g_source_remove);
  for (guint i = 0; i < G_N_ELEMENTS (handlers); i++)
    g_signal_handler_disconnect (w->manager, handlers[i]);
  vb_mgr_wait_clear_line (w);
  g_main_loop_unref (w->loop);

  if (json && !w->lost)
    {
      g_autoptr (JsonBuilder) builder = json_builder_new ();
      g_autoptr (JsonNode) root = NULL;
      g_autoptr (GPtrArray) jobs = vb_mgr_wait_sorted (w);

      if (w->job_path != NULL)
        vb_mgr_job_to_json (builder, w->manager, jobs->pdata[0]);
      else
        {
          json_builder_begin_array (builder);
          for (guint i = 0; i < jobs->len; i++)
            vb_mgr_job_to_json (builder, w->manager, jobs->pdata[i]);
          json_builder_end_array (builder);
        }
      root = json_builder_get_root (builder);
      vb_mgr_print_json (root);
    }
  status = vb_mgr_wait_report (w);
  return status;
}

static gboolean
vb_mgr_device_exists (GDBusObjectManager *manager, const char *name)
{
  g_autofree char *path = vb_device_object_path (name);
  g_autoptr (GDBusObject) object = NULL;
  g_autoptr (VbDBusDevice) device = NULL;

  if (path == NULL || !g_variant_is_object_path (path))
    return FALSE;
  object = g_dbus_object_manager_get_object (manager, path);
  if (object != NULL)
    device = vb_dbus_object_get_device (VB_DBUS_OBJECT (object));
  return device != NULL;
}

/* --timeout SECONDS: a finite number >= 0; -1 when not given. */
static gboolean
vb_mgr_parse_timeout (const char *text, double *timeout)
{
  char *end = NULL;

  *timeout = -1;
  if (text == NULL)
    return TRUE;
  *timeout = g_ascii_strtod (text, &end);
  return end != text && *end == '\0' && isfinite (*timeout) && *timeout >= 0;
}

/* What `wait TARGET` waits for: the job at *@job_path (put in @watched),
 * or, when there is none and TARGET names a device, no job of the device
 * at *@device_path running. FALSE after printing why neither exists. */
static gboolean
vb_mgr_wait_find (GDBusObjectManager *manager, const char *target, gboolean is_number,
                  char **job_path, char **device_path, GHashTable *watched)
{
  if (*job_path != NULL)
    {
      VbMgrJob *j = vb_mgr_job_get (manager, *job_path);

      /* a device may be named like a number: the job comes first */
      if (j == NULL && (target[0] == '/' || !vb_mgr_device_exists (manager, target)))
        {
          g_autofree char *text
              = is_number && target[0] != '/'
                    ? g_strdup_printf (_ ("no job %s and no device named '%s'"), target, target)
                    : g_strdup_printf (_ ("no job %s"), target);

          g_printerr ("vbmgr: wait %s: NotFound: %s\n", target, text);
          return FALSE;
        }
      if (j != NULL)
        g_hash_table_insert (watched, j->path, j);
      else
        g_clear_pointer (job_path, g_free);
    }
  if (*job_path == NULL)
    {
      g_autoptr (VbDBusDevice) device = vb_mgr_lookup_device (manager, "wait", target);

      if (device == NULL)
        return FALSE;
      *device_path = vb_device_object_path (target);
    }
  return TRUE;
}

static const char *const device_states[]
    = { "configuring", "ready", "active", "degraded", "failed", "stopped", NULL };

int
vb_cmd_wait (int argc, char **argv)
{
  g_autofree char *timeout_text = NULL;
  g_autofree char *state = NULL;
  gboolean json = FALSE;
  const GOptionEntry entries[]
      = { { "timeout", 0, 0, G_OPTION_ARG_STRING, &timeout_text,
            N_ ("Give up (exit status 1) after this long"), N_ ("SECONDS") },
          { "state", 0, 0, G_OPTION_ARG_STRING, &state,
            N_ ("Wait until the device is in this state (active, degraded, stopped, ...)"),
            N_ ("STATE") },
          { "json", 0, 0, G_OPTION_ARG_NONE, &json,
            N_ ("Print the final properties of the jobs as JSON"), NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (GHashTable) watched = NULL;
  g_autofree char *job_path = NULL;
  g_autofree char *device_path = NULL;
  VbMgrWait w = { 0 };
  const char *target;
  guint64 number = 0;
  gboolean is_number;

  if (!vb_mgr_parse_options ("wait", "NAME|JOB [--state STATE] [--timeout SECONDS]",
                             _ ("Wait until a job has ended, or until no job of a device runs "
                                "(as mdadm --wait), or with --state until the device is in "
                                "that state. JOB is a job number or object path. Exit status 0 "
                                "when the job finished, or no job of the device runs and it is "
                                "neither degraded nor failed (a job superseded by another is no "
                                "failure), or the state was reached; 1 otherwise, or when the "
                                "time ran out."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc < 2)
    return vb_mgr_usage_error ("wait", _ ("missing device name or job"));
  if (argc > 2)
    return vb_mgr_usage_error ("wait", _ ("unexpected argument '%s'"), argv[2]);
  if (!vb_mgr_parse_timeout (timeout_text, &w.timeout))
    return vb_mgr_usage_error ("wait", _ ("--timeout: '%s' is not a number of seconds"),
                               timeout_text);
  target = argv[1];
  is_number = g_ascii_string_to_unsigned (target, 10, 1, G_MAXUINT, &number, NULL);
  if (target[0] == '/')
    {
      if (!g_variant_is_object_path (target) || !vb_mgr_job_id_from_path (target, &number))
        return vb_mgr_usage_error ("wait", _ ("'%s' is not a job path (%sN)"), target,
                                   JOBS_PATH_PREFIX);
      job_path = g_strdup (target);
    }
  else if (is_number)
    job_path = g_strdup_printf (JOBS_PATH_PREFIX "%" G_GUINT64_FORMAT, number);

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  watched = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) vb_mgr_job_free);
  if (state != NULL && !g_strv_contains (device_states, state))
    {
      g_autofree char *known = g_strjoinv (", ", (char **) device_states);
      return vb_mgr_usage_error ("wait", _ ("--state: '%s' is not a device state (%s)"), state,
                                 known);
    }
  if (state != NULL)
    g_clear_pointer (&job_path, g_free); /* a state is a device's */
  if (!vb_mgr_wait_find (manager, target, is_number, &job_path, &device_path, watched))
    return VB_EXIT_FAILED;

  w.manager = manager;
  w.target = target;
  w.job_path = job_path;
  w.device_path = device_path;
  w.state = state;
  w.watched = watched;
  w.tty = isatty (STDERR_FILENO);
  return vb_mgr_wait_run (&w, json);
}
