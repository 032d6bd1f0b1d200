/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Engine jobs on D-Bus: the engine reports a resync, rebuild, check or
 * repair from its job thread; here, on the main thread, each becomes a
 * Job object (vb-jobs.c) with its progress, its Cancel reaches the engine,
 * and the Manager emits rebuild-started / rebuild-finished (mdadm
 * --monitor's words, used for every kind of job as md does). A rebuild
 * onto a spare also moves the spare into the failed component's slot in
 * the desired state, through the same path as a request. */
#include "config.h"

#include "vb-engine-jobs.h"
#include "vb-jobs.h"

#include <string.h>

typedef struct {
  VbDaemon *daemon;
  char *uuid; /* device */
  guint64 id; /* engine job */
  VbJob *job;
  gboolean announced; /* rebuild-started emitted */
  guint64 bytes;
} Link;

typedef struct {
  VbDaemon *daemon;
  char *uuid;
  VbEngineJob job;
  char *device;
  char *operation;
  char *component_uuid;
  char *message;
} JobNote;

static GHashTable *links; /* "uuid/id" -> Link*, main thread */

static void
link_free (Link *link)
{
  g_free (link->uuid);
  g_clear_pointer (&link->job, vb_job_unref);
  g_free (link);
}

static const VbDeviceConfig *
device_by_uuid (VbDaemon *daemon, const char *uuid)
{
  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
      if (strcmp (d->uuid, uuid) == 0)
        return d;
    }
  return NULL;
}

static void
cancel_job (VbJob *job, gpointer user_data)
{
  Link *link = user_data;
  const VbRunning *r = g_hash_table_lookup (link->daemon->running, link->uuid);
  const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;

  /* only asks: the engine's thread finishes the job as cancelled */
  if (backend && backend->engine)
    backend->engine->cancel_job (r->block_device, link->id, NULL);
}

/* The spare now in slot @slot: slot and spare swap roles and places, the
 * failed component keeps its place in the list as "faulty". */
typedef struct {
  char *device;
  guint slot;
  char *component_uuid;
} SpareMove;

static void
spare_move_free (gpointer data)
{
  SpareMove *move = data;

  g_free (move->device);
  g_free (move->component_uuid);
  g_free (move);
}

static gboolean
mutate_spare_move (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                   GError **error)
{
  SpareMove *move = user_data;
  VbDeviceConfig *d = vb_state_lookup_mut (candidate, move->device);
  VbComponentConfig *spare = NULL, *failed = NULL;
  guint spare_at = 0;
  g_autofree char *slot = g_strdup_printf ("%u", move->slot);

  if (d == NULL)
    return TRUE;
  for (guint i = 0; i < d->components->len; i++)
    {
      VbComponentConfig *c = d->components->pdata[i];
      if (g_strcmp0 (c->uuid, move->component_uuid) == 0 && g_strcmp0 (c->role, "spare") == 0)
        {
          spare = c;
          spare_at = i;
        }
      if (strcmp (c->role, slot) == 0)
        failed = c;
    }
  if (spare == NULL || failed == NULL)
    return TRUE; /* nothing to move (already done) */
  g_free (spare->role);
  spare->role = g_strdup (slot);
  g_free (failed->role);
  failed->role = g_strdup ("faulty");
  /* slots first, in slot order */
  d->components->pdata[move->slot] = spare;
  d->components->pdata[spare_at] = failed;
  vb_op_intent_touch (intent, d->name);
  return TRUE;
}

static void
spare_moved (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  SpareMove *move = user_data;
  GVariantBuilder details;

  if (error)
    {
      g_warning ("vblk: %s: recording the spare in slot %u: %s", move->device, move->slot,
                 error->message);
      return;
    }
  g_variant_builder_init (&details, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&details, "{sv}", "component", g_variant_new_uint32 (move->slot));
  vb_daemon_publish_sync (daemon);
  vb_daemon_publish_event (daemon, "spare-active", move->device, g_variant_builder_end (&details));
}

static void
maybe_move_spare (VbDaemon *daemon, const VbDeviceConfig *d, const JobNote *note)
{
  SpareMove *move;

  if (note->component_uuid == NULL || note->job.component < 0
      || (guint) note->job.component >= d->components->len)
    return;
  if (g_strcmp0 (((VbComponentConfig *) d->components->pdata[note->job.component])->uuid,
                 note->component_uuid)
      == 0)
    return;
  move = g_new0 (SpareMove, 1);
  move->device = g_strdup (d->name);
  move->slot = note->job.component;
  move->component_uuid = g_strdup (note->component_uuid);
  vb_daemon_submit (daemon, move->device, mutate_spare_move, VB_OP_CHANGE, NULL, spare_moved, move,
                    spare_move_free);
}

static gboolean
mutate_behind (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
               GError **error)
{
  VbDeviceConfig *d = vb_state_lookup_mut (candidate, user_data);
  const VbRunning *r = d ? g_hash_table_lookup (daemon->running, d->uuid) : NULL;

  if (r && vb_device_sync_behind (d, vb_backend_lookup (r->backend), r->block_device, NULL))
    vb_op_intent_touch (intent, d->name);
  return TRUE;
}

static void
behind_recorded (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  if (error)
    g_warning ("vblk: %s: recording which legs are behind: %s", (const char *) user_data,
               error->message);
}

void
vb_daemon_record_behind (VbDaemon *daemon, const char *name)
{
  vb_daemon_submit (daemon, name, mutate_behind, VB_OP_CHANGE, NULL, behind_recorded,
                    g_strdup (name), g_free);
}

static GVariant *
job_details (const JobNote *note, Link *link)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "operation", g_variant_new_string (note->operation));
  if (link->job)
    g_variant_builder_add (&b, "{sv}", "job",
                           g_variant_new_object_path (vb_job_object_path (link->job)));
  if (note->job.component >= 0)
    g_variant_builder_add (&b, "{sv}", "component", g_variant_new_uint32 (note->job.component));
  g_variant_builder_add (&b, "{sv}", "bytes", g_variant_new_uint64 (note->job.bytes));
  if (note->job.state != VB_ENGINE_JOB_RUNNING)
    {
      static const char *const states[] = { "running", "finished", "cancelled", "failed" };
      g_variant_builder_add (&b, "{sv}", "state", g_variant_new_string (states[note->job.state]));
      g_variant_builder_add (&b, "{sv}", "done", g_variant_new_uint64 (note->job.done));
      g_variant_builder_add (&b, "{sv}", "mismatches", g_variant_new_uint64 (note->job.mismatches));
    }
  return g_variant_builder_end (&b);
}

static Link *
link_new (VbDaemon *daemon, const char *name, const char *uuid, const char *key, guint64 id,
          const char *operation, gint component, guint64 bytes)
{
  g_autofree char *device_path = vb_device_object_path (name);
  g_autofree char *component_path
      = component >= 0 ? vb_component_object_path (name, component) : NULL;
  const char *objects[] = { device_path, component_path, NULL };
  Link *link = g_new0 (Link, 1);

  if (links == NULL)
    links = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) link_free);
  link->daemon = daemon;
  link->uuid = g_strdup (uuid);
  link->id = id;
  link->job = vb_job_new (daemon, operation, objects, bytes, cancel_job, link);
  link->bytes = bytes;
  g_hash_table_insert (links, g_strdup (key), link);
  return link;
}

const char *
vb_engine_jobs_register (VbDaemon *daemon, const VbDeviceConfig *d, guint64 id,
                         const char *operation)
{
  g_autofree char *key = g_strdup_printf ("%s/%" G_GUINT64_FORMAT, d->uuid, id);
  Link *link = links ? g_hash_table_lookup (links, key) : NULL;

  if (link == NULL)
    link = link_new (daemon, d->name, d->uuid, key, id, operation, -1, 0);
  return vb_job_object_path (link->job);
}

static gboolean
publish_job (gpointer data)
{
  JobNote *note = data;
  VbDaemon *daemon = note->daemon;
  const VbDeviceConfig *d = device_by_uuid (daemon, note->uuid);
  g_autofree char *key = g_strdup_printf ("%s/%" G_GUINT64_FORMAT, note->uuid, note->job.id);
  Link *link;

  link = links ? g_hash_table_lookup (links, key) : NULL;
  /* the device may not be in the desired state yet: a job that its own
   * creation or start began is reported before that request finishes */
  if (note->device && (link == NULL || !link->announced) && !daemon->shutting_down)
    {
      if (link == NULL)
        link = link_new (daemon, note->device, note->uuid, key, note->job.id, note->operation,
                         note->job.component, note->job.bytes);
      link->announced = TRUE;
      vb_daemon_publish_event (daemon, "rebuild-started", note->device, job_details (note, link));
      if (d)
        {
          maybe_move_spare (daemon, d, note);
          vb_daemon_publish_sync (daemon);
        }
    }
  if (link)
    {
      if (link->bytes != note->job.bytes)
        {
          link->bytes = note->job.bytes;
          vb_job_set_total (link->job, note->job.bytes);
        }
      vb_job_update (link->job, note->job.done, note->job.mismatches);
      if (note->job.state != VB_ENGINE_JOB_RUNNING)
        {
          static const char *const states[] = { "running", "finished", "cancelled", "failed" };
          g_autofree char *summary = NULL;
          /* the device's state (a leg in sync now) is out before the job's end */
          if (d)
            vb_daemon_publish_sync (daemon);
          if (note->message == NULL)
            summary = g_strdup_printf ("%s: %" G_GUINT64_FORMAT " bytes, %" G_GUINT64_FORMAT
                                       " mismatches",
                                       note->operation, note->job.done, note->job.mismatches);
          vb_job_finish (link->job, states[note->job.state],
                         note->message ? note->message : summary);
          vb_daemon_publish_event (daemon, "rebuild-finished", note->device,
                                   job_details (note, link));
          /* a reconfiguration's rebuild is over */
          if (d && note->job.state != VB_ENGINE_JOB_CANCELLED)
            g_hash_table_remove (daemon->reconfigured, d->name);
          if (d && note->job.state == VB_ENGINE_JOB_FINISHED)
            vb_daemon_record_behind (daemon, d->name);
          if (d)
            vb_daemon_publish_sync (daemon);
          g_hash_table_remove (links, key);
        }
    }
  g_free (note->uuid);
  g_free (note->device);
  g_free (note->operation);
  g_free (note->component_uuid);
  g_free (note->message);
  g_free (note);
  return G_SOURCE_REMOVE;
}

void
vb_daemon_engine_job (const char *uuid, const VbEngineJob *job, gpointer user_data)
{
  JobNote *note = g_new0 (JobNote, 1);

  note->daemon = user_data;
  note->uuid = g_strdup (uuid);
  note->job = *job;
  note->device = g_strdup (job->device);
  note->operation = g_strdup (job->operation);
  note->component_uuid = g_strdup (job->component_uuid);
  note->message = g_strdup (job->message);
  note->job.operation = NULL;
  note->job.device = NULL;
  note->job.component_uuid = NULL;
  note->job.message = NULL;
  /* the main thread owns all state: publish there, before what comes
   * after (the reply to the Start that began the job, say) */
  g_idle_add_full (G_PRIORITY_DEFAULT, publish_job, note, NULL);
}
